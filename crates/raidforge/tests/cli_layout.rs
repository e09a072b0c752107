//! The `raidforge layout` command as a script sees it: the real binary, its JSON, its errors.

mod common;

use common::{json_here, run};

#[test]
fn show_json_follows_the_contract() {
    let v = json_here(&[
        "layout", "show", "--scheme", "raid5", "--disks", "5", "--json",
    ]);
    assert_eq!(v["scheme"], "raid5");
    assert_eq!(v["disks"], 5);
    let stripes = v["stripes"].as_array().unwrap();
    assert_eq!(stripes.len(), 5);
    for (row, s) in stripes.iter().enumerate() {
        let units = s["units"].as_array().unwrap();
        assert_eq!(units.len(), 5);
        // Data first, then parity; MD left-symmetric parity walks down from the last disk.
        let roles: Vec<&str> = units.iter().map(|u| u["role"].as_str().unwrap()).collect();
        assert_eq!(roles, ["data", "data", "data", "data", "p"]);
        assert_eq!(units[4]["disk"], 4 - row as u64);
        assert!(units.iter().all(|u| u["offset"] == row as u64));
    }
}

#[test]
fn show_with_failures_moves_units_to_the_spare() {
    let v = json_here(&[
        "layout", "show", "--scheme", "raid6", "--disks", "7", "--spares", "1", "--failed", "2",
        "--json",
    ]);
    for s in v["stripes"].as_array().unwrap() {
        for u in s["units"].as_array().unwrap() {
            assert_ne!(u["disk"], 2, "no unit left on the failed disk");
        }
    }
    let on_spare: usize = v["stripes"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| s["units"].as_array().unwrap())
        .filter(|u| u["disk"] == 6)
        .count();
    assert_eq!(
        on_spare, 6,
        "disk 2's six units are rebuilt onto spare disk 6"
    );
}

#[test]
fn check_json_reports_the_measured_properties() {
    let v = json_here(&[
        "layout", "check", "--scheme", "raid50", "--disks", "59", "--width", "7", "--spares", "3",
        "--json",
    ]);
    for key in [
        "stripes_on_distinct_disks",
        "data_units_per_disk",
        "parity_units_per_disk",
        "rebuild_reads_per_disk",
        "rebuild_writes_per_disk",
        "rebuild_read_cov",
        "rebuild_write_cov",
    ] {
        assert!(v.get(key).is_some(), "missing {key}");
    }
    assert_eq!(v["stripes_on_distinct_disks"], true);
    let reads = v["rebuild_reads_per_disk"].as_array().unwrap();
    assert_eq!(reads.len(), 59);
    assert_eq!(reads.iter().filter(|r| r.as_u64().unwrap() > 0).count(), 6);
}

#[test]
fn bad_parameters_exit_nonzero_with_one_line_naming_the_constraint() {
    let cases: &[(&[&str], &str)] = &[
        (
            &["layout", "show", "--scheme", "raid9", "--disks", "5"],
            "unknown scheme",
        ),
        (
            &["layout", "show", "--scheme", "raid5", "--disks", "2"],
            "at least 3",
        ),
        (
            &[
                "layout", "check", "--scheme", "raid5", "--disks", "5", "--failed", "0,1",
            ],
            "tolerates at most 1",
        ),
        (
            &[
                "layout", "check", "--scheme", "raid6", "--disks", "5", "--failed", "9",
            ],
            "does not exist",
        ),
        (
            &[
                "layout", "show", "--scheme", "hash", "--disks", "5", "--width", "5",
            ],
            "width",
        ),
        (
            &[
                "layout", "show", "--scheme", "raidplus", "--disks", "5", "--width", "3",
                "--order", "sideways",
            ],
            "order",
        ),
    ];
    for (args, needle) in cases {
        let out = run(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: '{err}' lacks '{needle}'");
        assert_eq!(
            err.trim_end().lines().count(),
            1,
            "{args:?}: one line, got '{err}'"
        );
        assert!(!err.contains("panicked"));
        assert!(out.stdout.is_empty());
    }
}

#[test]
fn s2raid_json_has_subarrays_and_their_overlap() {
    let v = json_here(&[
        "layout",
        "show",
        "--scheme",
        "s2raid5",
        "--disks",
        "9",
        "--group",
        "3",
        "--partitions",
        "3",
        "--json",
    ]);
    let subs = v["subarrays"].as_array().unwrap();
    assert_eq!(subs.len(), 9);
    for s in subs {
        assert_eq!(s["members"].as_array().unwrap().len(), 3);
    }
    let c = json_here(&[
        "layout",
        "check",
        "--scheme",
        "s2raid5",
        "--disks",
        "9",
        "--group",
        "3",
        "--partitions",
        "3",
        "--json",
    ]);
    assert_eq!(c["max_disks_shared_by_two_subarrays"], 1);
    assert_eq!(c["disks_read"], 6);
}

/// The RAID+ paper's contrast on its evaluation configuration (59 disks, 7-wide stripes):
/// RAID+ spreads the rebuild exactly evenly within a template, random and hash placement do
/// not, and RAID-50 confines it to one group.
#[test]
fn compare_shows_the_raidplus_contrast() {
    let v = json_here(&["layout", "compare", "--json"]);
    let by = |name: &str| {
        v["schemes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["scheme"] == name)
            .unwrap_or_else(|| panic!("{name} missing"))
            .clone()
    };
    let rp = by("raidplus");
    assert_eq!(rp["rebuild_read_cov_window_max"], 0.0);
    assert_eq!(rp["rebuild_write_cov"], 0.0);
    assert_eq!(rp["disks_read"], 58);
    for name in ["random", "hash"] {
        let s = by(name);
        assert!(
            s["rebuild_read_cov_window_max"].as_f64().unwrap() > 0.10,
            "{name}: {s}"
        );
    }
    assert_eq!(by("raid50")["disks_read"], 6);
}
