//! Shared checks for the quick reproduction tests of every seed.
//!
//! Besides the report's shape, every row with a published value is bounded here, by data
//! that lives in the tests rather than in the code under test: ours must be within
//! [`WITHIN`] of the published value, or the row must be on the seed test's list of rows
//! allowed to differ ([`Differs`]), which says why and bounds ours / published.

use std::time::Instant;

/// Relative distance from the published value within which a row needs no entry on its
/// seed test's list of rows allowed to differ.
pub const WITHIN: f64 = 0.20;

/// Rows allowed to differ from their published values by more than [`WITHIN`]: those of
/// experiment `experiment` whose label matches `label` (`*` stands for any text), with
/// `lo <= ours / published <= hi`. Each entry must match a row.
///
/// The bounds of the lists were set from the quick run of 2026-11-25 (seeded: every run gives
/// the same figures) as half the smallest and twice the largest ratio of the rows an entry
/// names, unless the entry says otherwise: wide enough for modelling changes, narrow enough
/// that a reproduction drifting by more than 2x gets looked at again.
pub struct Differs {
    pub experiment: &'static str,
    pub label: &'static str,
    pub lo: f64,
    pub hi: f64,
    pub why: &'static str,
}

/// Claims of the paper allowed to fail in the quick run: those of experiment `experiment`
/// whose text matches `claim` (`*` stands for any text). A failing claim must carry a note
/// saying why (the report shows it); each entry must match a failing claim, so an entry is
/// dropped as soon as the claim holds again.
pub struct Fails {
    pub experiment: &'static str,
    pub claim: &'static str,
    pub why: &'static str,
}

/// `text` matches `pattern`, where each `*` stands for any text (possibly empty).
fn matches(pattern: &str, text: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if parts.len() == 1 {
        return pattern == text;
    }
    if !text.starts_with(first) || text.len() < first.len() + last.len() || !text.ends_with(last) {
        return false;
    }
    let mut rest = &text[first.len()..text.len() - last.len()];
    for part in &parts[1..parts.len() - 1] {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    true
}

/// Every row with a published value is within [`WITHIN`] of it or on `allowed` (within its
/// bounds); a published zero must be matched exactly (up to 1e-9). Lists every offender.
pub fn check_published(r: &repro::Report, allowed: &[Differs]) {
    let mut used = vec![0usize; allowed.len()];
    let mut bad = Vec::new();
    for e in &r.experiments {
        for row in &e.rows {
            let Some(p) = row.published else { continue };
            let entry = allowed
                .iter()
                .position(|a| matches(a.experiment, &e.id) && matches(a.label, &row.label));
            if p == 0.0 {
                if entry.is_some() || row.ours.abs() > 1e-9 {
                    bad.push(format!(
                        "{} {:?}: published 0, ours {}",
                        e.id, row.label, row.ours
                    ));
                }
                continue;
            }
            let ratio = row.ours / p;
            match entry {
                Some(i) => {
                    used[i] += 1;
                    let a = &allowed[i];
                    if !(a.lo..=a.hi).contains(&ratio) {
                        bad.push(format!(
                            "{} {:?}: ours / published = {ratio:.4}, allowed {}..{} ({})",
                            e.id, row.label, a.lo, a.hi, a.why
                        ));
                    }
                }
                None if (ratio - 1.0).abs() > WITHIN => bad.push(format!(
                    "{} {:?}: ours {} vs published {p} (ratio {ratio:.4}) and not on the list of rows allowed to differ",
                    e.id, row.label, row.ours
                )),
                None => {}
            }
        }
    }
    for (a, n) in allowed.iter().zip(&used) {
        if *n == 0 {
            bad.push(format!(
                "the entry {} {:?} matches no row with a published value",
                a.experiment, a.label
            ));
        }
    }
    assert!(
        bad.is_empty(),
        "{}: {} rows out of bounds:\n{}",
        r.name,
        bad.len(),
        bad.join("\n")
    );
}

/// Every claim holds, or fails with a note and is on `fails`; every entry of `fails` matches a
/// failing claim.
pub fn check_claims(r: &repro::Report, fails: &[Fails]) {
    let mut used = vec![0usize; fails.len()];
    let mut bad = Vec::new();
    for e in &r.experiments {
        for c in e.claims.iter().filter(|c| !c.holds) {
            let entry = fails
                .iter()
                .position(|f| matches(f.experiment, &e.id) && matches(f.claim, &c.text));
            match (entry, &c.note) {
                (Some(i), Some(_)) => used[i] += 1,
                (Some(_), None) => bad.push(format!(
                    "{}: {:?} fails without a note saying why ({})",
                    e.id, c.text, c.evidence
                )),
                (None, _) => bad.push(format!(
                    "{}: {:?} fails ({}) and is not on the list of claims allowed to fail",
                    e.id, c.text, c.evidence
                )),
            }
        }
    }
    for (f, n) in fails.iter().zip(&used) {
        if *n == 0 {
            bad.push(format!(
                "the entry {} {:?} ({}) matches no failing claim",
                f.experiment, f.claim, f.why
            ));
        }
    }
    assert!(
        bad.is_empty(),
        "{}: {} claims:\n{}",
        r.name,
        bad.len(),
        bad.join("\n")
    );
}

/// Runs `name --quick`, then checks claims, notes, the rows against their published values
/// (see [`check_published`]) and the JSON shape; returns the report.
#[allow(dead_code)] // the tests whose seeds uphold every claim
pub fn check_seed(name: &str, allowed: &[Differs]) -> repro::Report {
    check_seed_with(name, allowed, &[])
}

/// As [`check_seed`], with claims allowed to fail (see [`Fails`]).
pub fn check_seed_with(name: &str, allowed: &[Differs], fails: &[Fails]) -> repro::Report {
    let seed = repro::seed(name).expect("seed registered");
    let opts = repro::Opts {
        quick: true,
        traces_dir: None,
    };
    let t = Instant::now();
    let r = repro::reproduce(seed, &opts, &mut |_| {}).expect("reproduction runs");
    eprintln!("{name} --quick took {:.1} s", t.elapsed().as_secs_f64());
    assert!(!r.experiments.is_empty());
    let ids: Vec<&str> = r.experiments.iter().map(|e| e.id.as_str()).collect();
    assert_eq!(ids, seed.experiments, "the declared experiments");
    check_published(&r, allowed);
    check_claims(&r, fails);
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
        check_plots(e);
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
            assert!(c["note"].is_null() || c["note"].is_string());
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

#[allow(unused_imports)]
pub use sim::svg::texts_of;

/// The values of the published markers of `svg` (`class="published" data-value="V"`).
#[allow(dead_code)]
pub fn published_markers(svg: &str) -> Vec<f64> {
    svg.split("class=\"published\" data-value=\"")
        .skip(1)
        .map(|r| r[..r.find('"').unwrap()].parse().expect("a number"))
        .collect()
}

/// Every plot of a quick run of `e`: stamped as scaled down, every axis titled, and each
/// published marker a published value of one of `e`'s rows (a marker drawn from anything
/// else would put words in the paper's mouth).
#[allow(dead_code)]
pub fn check_plots(e: &repro::Experiment) {
    let published: Vec<f64> = e.rows.iter().filter_map(|r| r.published).collect();
    for (i, p) in e.plots.iter().enumerate() {
        let at = format!("{} plot {}", e.id, i + 1);
        assert_eq!(
            p.svg.matches("class=\"scaled-down\"").count(),
            1,
            "{at}: a quick run's plot is stamped once"
        );
        let charts = p.svg.matches("class=\"title\"").count();
        assert!(charts >= 1, "{at}: no chart");
        for axis in ["x-title", "y-title"] {
            let t = texts_of(&p.svg, axis);
            assert_eq!(t.len(), charts, "{at}: {axis} per chart");
            assert!(t.iter().all(|t| !t.trim().is_empty()), "{at}: empty {axis}");
        }
        for v in published_markers(&p.svg) {
            assert!(
                published
                    .iter()
                    .any(|&x| (x - v).abs() <= 1e-9 * x.abs().max(1.0)),
                "{at}: marker {v} is no published value of the rows"
            );
        }
    }
}
