//! The quick S2-RAID reproduction: every qualitative claim of the paper that it checks holds,
//! every row off by more than the tolerance says why, and the report has the documented shape
//! (the shared checks in `common`). Needs the WebSearch trace (`RAIDFORGE_TRACES` or the
//! workspace's ../shared/traces), like the simulator's trace tests.

mod common;

use std::path::PathBuf;

use common::{experiment, ids, row};

#[test]
fn quick_s2raid_upholds_the_papers_claims() {
    let report = common::check_seed("s2raid");
    assert_eq!(ids(&report), ["table5", "table6", "table7", "fig5", "fig6"]);
    for e in &report.experiments {
        assert!(!e.claims.is_empty(), "{} checks no claim", e.id);
    }
    // The paper's headline comparisons are there, with its numbers beside ours.
    let t5 = experiment(&report, "table5");
    let row = |label: &str| row(t5, label);
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
