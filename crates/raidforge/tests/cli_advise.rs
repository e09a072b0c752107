//! `raidforge advise` as a script sees it: every candidate that survives the failures asked
//! for is simulated, the Pareto front and the recommendation follow the rules the help states
//! (checked here from the numbers it printed), constraints can leave no recommendation, and
//! the HTML page holds the table.

mod common;

use common::{json_here, TempDir};
use serde_json::Value;

fn advise(extra: &[&str]) -> Value {
    let trace = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../data/traces/websearch-head.mqsim"
    );
    let mut args = vec![
        "advise",
        "--workload",
        trace,
        "--disks",
        "8",
        "--member-size",
        "256M",
        "--loops",
        "1",
        "--json",
    ];
    args.extend_from_slice(extra);
    json_here(&args)
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or(f64::NAN)
}

#[test]
fn every_fitting_layout_is_compared_and_the_pick_follows_the_rules() {
    let v = advise(&[]);
    let c = v["candidates"].as_array().unwrap();
    assert!(c.len() >= 8, "{} candidates", c.len());
    for x in c {
        assert!(x["tolerance"].as_u64().unwrap() >= 1);
        let u = f(&x["usable_share"]);
        assert!(u > 0.0 && u < 1.0, "{x}");
        assert!(f(&x["rebuild_hours_whole_drive"]) > 0.0, "{x}");
        assert!(f(&x["mttdl_years"]) > 0.0, "{x}");
    }
    // The front: not beaten on usable share, MTTDL and p99 while rebuilding at once.
    let key = |x: &Value| {
        (
            f(&x["usable_share"]),
            f(&x["mttdl_years"]),
            -f(&x["p99_ms"]["rebuilding"]),
        )
    };
    for x in c {
        let k = key(x);
        let beaten = c.iter().any(|y| {
            let j = key(y);
            j.0 >= k.0 && j.1 >= k.1 && j.2 >= k.2 && (j.0 > k.0 || j.1 > k.1 || j.2 > k.2)
        });
        assert_eq!(x["pareto_front"].as_bool(), Some(!beaten), "{}", x["name"]);
    }
    // The pick meets every constraint and keeps the most capacity (within half a percent).
    let pick = v["recommended"].as_str().expect("a recommendation");
    let p = c.iter().find(|x| x["name"] == pick).unwrap();
    assert_eq!(p["meets_constraints"], true);
    let best = c
        .iter()
        .filter(|x| x["meets_constraints"] == true)
        .map(|x| f(&x["usable_share"]))
        .fold(0.0, f64::max);
    assert!(f(&p["usable_share"]) >= best - 0.005);
    assert!(v["reason"].as_str().unwrap().starts_with(pick));
}

#[test]
fn constraints_and_failures_to_survive_narrow_the_field() {
    let v = advise(&["--survive", "2", "--p99-normal-ms", "0.001"]);
    let c = v["candidates"].as_array().unwrap();
    assert!(!c.is_empty());
    assert!(c.iter().all(|x| x["tolerance"].as_u64().unwrap() >= 2));
    assert!(c.iter().all(|x| x["meets_constraints"] == false));
    assert!(v["recommended"].is_null(), "{}", v["recommended"]);
    let skipped = v["not_simulated"].as_array().unwrap();
    assert!(skipped.iter().any(|x| x["name"] == "raid5 8"));
}

#[test]
fn the_html_page_holds_the_table_and_the_plot() {
    let dir = TempDir::new("advise", "html");
    let page = dir.path().join("a.html");
    let v = advise(&["--html", page.to_str().unwrap()]);
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>") && html.contains("<svg"));
    for x in v["candidates"].as_array().unwrap() {
        assert!(html.contains(&format!("<td>{}</td>", x["name"].as_str().unwrap())));
    }
}

/// With an SSD among the disks, RAID4S and RAIDH join the candidates.
#[test]
fn an_ssd_brings_raid4s_and_raidh_in() {
    let v = advise(&["--ssds", "1"]);
    let names: Vec<&str> = v["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"raid4s") && names.contains(&"raidh"),
        "{names:?}"
    );
    let plain = advise(&[]);
    assert!(!plain["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .any(|x| x["name"] == "raid4s"));
}
