//! The quick S2-RAID reproduction: every qualitative claim of the paper that it checks holds,
//! every row off by more than the tolerance says why, and the report has the documented shape.

use std::path::PathBuf;

fn traces_present(opts: &repro::Opts) -> bool {
    opts.traces_dir().join("websearch-head.mqsim").exists()
}

/// Checks the JSON shape the issue documents: `{"experiments": [{"id", "title", "rows":
/// [{"label", "published": number or null, "ours": number, "unit"}]}]}`.
fn check_shape(j: &serde_json::Value, ids: &[&str]) {
    let exps = j["experiments"].as_array().expect("experiments array");
    let got: Vec<&str> = exps.iter().map(|e| e["id"].as_str().expect("id")).collect();
    assert_eq!(got, ids);
    for e in exps {
        assert!(e["title"].as_str().is_some_and(|t| !t.is_empty()));
        assert!(e["config"].is_object());
        let rows = e["rows"].as_array().expect("rows");
        assert!(!rows.is_empty(), "{} has no rows", e["id"]);
        for r in rows {
            assert!(r["label"].as_str().is_some_and(|l| !l.is_empty()));
            assert!(r["published"].is_null() || r["published"].is_f64());
            assert!(r["ours"].as_f64().is_some_and(f64::is_finite), "{r}");
            assert!(r["unit"].as_str().is_some());
        }
        for c in e["claims"].as_array().expect("claims") {
            assert!(c["text"].is_string() && c["holds"].is_boolean() && c["evidence"].is_string());
        }
    }
}

#[test]
fn quick_s2raid_upholds_the_papers_claims() {
    let opts = repro::Opts {
        quick: true,
        traces_dir: None,
    };
    if !traces_present(&opts) {
        eprintln!(
            "skipping: {} has no websearch-head.mqsim (set RAIDFORGE_TRACES)",
            opts.traces_dir().display()
        );
        return;
    }
    let seed = repro::seed("s2raid").expect("s2raid is a seed");
    let report = repro::reproduce(seed, &opts, &mut |_| {}).expect("the reproduction runs");
    assert_eq!(report.failed_claims(), Vec::<String>::new());
    let ids = ["table5", "table6", "table7", "fig5", "fig6"];
    for e in &report.experiments {
        assert!(!e.claims.is_empty(), "{} checks no claim", e.id);
        assert!(
            e.unexplained().is_empty(),
            "{}: {:?}",
            e.id,
            e.unexplained()
        );
        // The JSON shows the configuration as an object: a repeated key would lose a line.
        let mut keys: Vec<&str> = e.config.iter().map(|(k, _)| k.as_str()).collect();
        keys.sort_unstable();
        let n = keys.len();
        keys.dedup();
        assert_eq!(keys.len(), n, "{}: repeated configuration keys", e.id);
    }
    // The paper's headline comparisons are there, with its numbers beside ours.
    let t5 = &report.experiments[0];
    let row = |label: &str| {
        t5.rows
            .iter()
            .find(|r| r.label == label)
            .unwrap_or_else(|| panic!("no row {label}"))
    };
    assert_eq!(row("offline: MD RAID5 rebuild").published, Some(157.0));
    assert_eq!(
        row("offline: S2-RAID5 rebuild, 1 spare").published,
        Some(51.0)
    );
    // Offline, the parallel rebuild of the three sub-arrays must beat the single-spare rebuild
    // by a wide margin: it writes to three disks where MD writes to one.
    assert!(
        row("offline: MD RAID5 rebuild").ours
            > 2.0 * row("offline: S2-RAID5 rebuild, 1 spare").ours
    );
    let j = report.to_json();
    check_shape(&j, &ids);
    // The figures come with plots, the tables without.
    for e in j["experiments"].as_array().unwrap() {
        let plots = e["plots"].as_array().unwrap().len();
        let is_fig = e["id"].as_str().unwrap().starts_with("fig");
        assert_eq!(plots > 0, is_fig, "{}", e["id"]);
    }
    let dir: PathBuf = std::env::temp_dir().join(format!("repro-s2raid-{}", std::process::id()));
    let files = report.write(&dir).expect("writes the report");
    assert!(files.iter().any(|f| f.ends_with("s2raid.md")));
    assert!(files.iter().any(|f| f.ends_with("s2raid-fig5.svg")));
    let md = std::fs::read_to_string(dir.join("s2raid.md")).unwrap();
    assert!(md.contains("## table5:") && md.contains("synthetic"));
    std::fs::remove_dir_all(&dir).unwrap();
}
