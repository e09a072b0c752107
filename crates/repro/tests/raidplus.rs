//! The quick RAID+ reproduction: every qualitative claim of the paper that it checks holds,
//! every row off by more than the tolerance says why, and the report has the documented shape.

use std::path::PathBuf;

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
fn quick_raidplus_upholds_the_papers_claims() {
    let opts = repro::Opts {
        quick: true,
        traces_dir: None,
    };
    let seed = repro::seed("raidplus").expect("raidplus is a seed");
    let report = repro::reproduce(seed, &opts, &mut |_| {}).expect("the reproduction runs");
    assert_eq!(report.failed_claims(), Vec::<String>::new());
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
    let t2 = &report.experiments[0];
    let published: Vec<f64> = t2
        .rows
        .iter()
        .filter(|r| r.unit == "s")
        .filter_map(|r| r.published)
        .collect();
    // Table 2 as printed in the paper.
    assert_eq!(
        published,
        [307.0, 60.0, 102.0, 41.0, 307.0, 99.0, 143.0, 83.0]
    );
    // The within-template balance of RAID+ is exact by construction (orthogonal Latin squares):
    // every survivor reads and receives the same number of units.
    let cov = report
        .experiments
        .iter()
        .find(|e| e.id == "cov")
        .expect("cov");
    for r in cov.rows.iter().filter(|r| r.label.contains("RAID+")) {
        assert!(r.ours.abs() < 1e-9, "{}: {}", r.label, r.ours);
    }
    let j = report.to_json();
    check_shape(&j, &["table2", "fig10a", "fig10b", "cov"]);
    let dir: PathBuf = std::env::temp_dir().join(format!("repro-raidplus-{}", std::process::id()));
    let files = report.write(&dir).expect("writes the report");
    for f in [
        "raidplus.md",
        "raidplus.json",
        "raidplus-fig10a.svg",
        "raidplus-fig10b.svg",
    ] {
        assert!(files.iter().any(|p| p.ends_with(f)), "{f} not written");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
