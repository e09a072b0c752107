//! Shared checks for the quick reproduction tests of every seed.

use std::time::Instant;

/// Runs `name --quick`, then checks claims, notes and the JSON shape; returns the report.
pub fn check_seed(name: &str) -> repro::Report {
    let seed = repro::seed(name).expect("seed registered");
    let opts = repro::Opts {
        quick: true,
        traces_dir: None,
    };
    let t = Instant::now();
    let r = repro::reproduce(seed, &opts, &mut |_| {}).expect("reproduction runs");
    eprintln!("{name} --quick took {:.1} s", t.elapsed().as_secs_f64());
    assert!(!r.experiments.is_empty());
    let failed = r.failed_claims();
    assert!(failed.is_empty(), "failed claims: {failed:#?}");
    for e in &r.experiments {
        assert!(!e.rows.is_empty(), "{}: no rows", e.id);
        assert!(
            !e.claims.is_empty() || e.id == "fig4.1",
            "{}: no claims",
            e.id
        );
        assert!(!e.config.is_empty(), "{}: no configuration", e.id);
        assert!(!e.title.is_empty(), "{}: no title", e.id);
        // The JSON shows the configuration as an object: a repeated key would lose a line.
        let mut keys: Vec<&str> = e.config.iter().map(|(k, _)| k.as_str()).collect();
        keys.sort_unstable();
        let n = keys.len();
        keys.dedup();
        assert_eq!(keys.len(), n, "{}: repeated configuration keys", e.id);
        let unexplained: Vec<&str> = e.unexplained().iter().map(|r| r.label.as_str()).collect();
        assert!(
            unexplained.is_empty(),
            "{}: rows without a note: {unexplained:?}",
            e.id
        );
        for row in &e.rows {
            assert!(
                row.ours.is_finite(),
                "{}: {} is not finite",
                e.id,
                row.label
            );
        }
        for p in &e.plots {
            assert!(
                p.svg.starts_with("<svg") || p.svg.starts_with("<?xml"),
                "{}",
                e.id
            );
        }
    }
    // JSON shape: {"experiments": [{"id", "title", "config": {..}, "rows": [{"label",
    // "published", "ours", "unit", "ratio"}], "claims": [{"text", "holds", "evidence"}]}]}.
    let j = r.to_json();
    assert_eq!(j["name"], name);
    assert_eq!(j["quick"], true);
    let exps = j["experiments"].as_array().expect("experiments array");
    assert_eq!(exps.len(), r.experiments.len());
    for e in exps {
        assert!(e["id"].is_string() && e["title"].is_string());
        assert!(e["config"].is_object());
        for row in e["rows"].as_array().expect("rows") {
            assert!(row["label"].is_string());
            assert!(row["published"].is_number() || row["published"].is_null());
            assert!(row["label"].as_str().is_some_and(|l| !l.is_empty()));
            assert!(row["ours"].as_f64().is_some_and(f64::is_finite), "{row}");
            assert!(row["unit"].is_string());
            assert!(row["ratio"].is_number() || row["ratio"].is_null());
        }
        for c in e["claims"].as_array().expect("claims") {
            assert!(c["text"].is_string() && c["holds"].is_boolean() && c["evidence"].is_string());
        }
        for p in e["plots"].as_array().expect("plots") {
            assert!(p["file"].as_str().unwrap().ends_with(".svg"));
        }
    }
    r
}

/// The experiment ids of `r`, in order.
#[allow(dead_code)]
pub fn ids(r: &repro::Report) -> Vec<&str> {
    r.experiments.iter().map(|e| e.id.as_str()).collect()
}

/// The experiment `id` of `r`.
#[allow(dead_code)]
pub fn experiment<'a>(r: &'a repro::Report, id: &str) -> &'a repro::Experiment {
    r.experiments
        .iter()
        .find(|e| e.id == id)
        .unwrap_or_else(|| panic!("experiment {id} missing"))
}

/// The row `label` of experiment `e`.
#[allow(dead_code)]
pub fn row<'a>(e: &'a repro::Experiment, label: &str) -> &'a repro::Row {
    e.rows
        .iter()
        .find(|r| r.label == label)
        .unwrap_or_else(|| panic!("{}: row {label} missing", e.id))
}
