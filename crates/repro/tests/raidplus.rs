//! The quick RAID+ reproduction: every qualitative claim of the paper that it checks holds,
//! every row within 20 % of the paper or on the list below, and the report has the documented shape
//! (the shared checks in `common`).

mod common;

use std::path::PathBuf;

use common::{experiment, Differs, Fails};

/// Rows of the quick run allowed to differ from the paper (see `common::Differs`).
const ALLOWED: &[Differs] = &[
    Differs {
        experiment: "table2",
        label: "* + 3: * rebuild",
        lo: 0.1,
        hi: 0.77,
        why: "quick run: 16 GB disks instead of the paper's 50 GB (0.32 of its rebuild times)",
    },
    Differs {
        experiment: "cov",
        label: "n=59 k=7: RAID_H rebuild read-load CoV",
        lo: 0.22,
        hi: 0.92,
        why: "our Jenkins-hash placement spreads a failed disk's stripes about as evenly as \
              random placement; the paper's hash was more skewed",
    },
    Differs {
        experiment: "table3",
        label: "*: RAID-5C * perf",
        lo: 0.7,
        hi: 3.4,
        why: APPS,
    },
    Differs {
        experiment: "table3",
        label: "*: RAID_H * perf",
        lo: 0.35,
        hi: 2.0,
        why: APPS,
    },
    Differs {
        experiment: "table3",
        label: "*: RAID+ rebuild perf",
        lo: 0.35,
        hi: 1.5,
        why: APPS,
    },
    Differs {
        experiment: "table4",
        label: "* RAID-5C / RAID-50",
        lo: 0.5,
        hi: 8.5,
        why: APPS,
    },
    Differs {
        experiment: "table4",
        label: "GridGraph RAID* / RAID-50",
        lo: 0.35,
        hi: 1.6,
        why: APPS,
    },
    Differs {
        experiment: "fig10d",
        label: "read-friendly / native, sequential read",
        lo: 0.8,
        hi: 2.4,
        why: "quick run's 256 KiB units: since reads hold their stripes shared (issue 29) a \
              stream's requests of one stripe no longer wait for one another, and how the \
              ordering lays consecutive units on each disk decides the bandwidth (2.56x; the \
              full run's 64 KiB units give 1.46x)",
    },
    Differs {
        experiment: "fig6",
        label: "RAID-5 rebuild / RAID+ rebuild",
        lo: 0.39,
        hi: 1.6,
        why: "MD's limits and stand-ins decide how fast each pool rebuilds under the mix",
    },
    Differs {
        experiment: "fig6",
        label: "Fin2 p99 during the rebuild, RAID+ / RAID-5",
        lo: 26.0,
        hi: 110.0,
        why: "the simulated rebuild keeps RAID+ at MD's minimum whatever the load and locks a \
              whole pool cycle (see the report)",
    },
];

/// The application and mix experiments' stand-ins (see the reports).
const APPS: &str = "synthetic application stand-ins (TPC-C: a small block trace replayed \
                    closed-loop), the same MD rebuild limits for every organisation, RAID-5C \
                    concatenated 84 MiB at a time, 1 GB disks in the quick run";

/// Claims of the paper the quick run does not uphold (see `common::Fails`).
const FAILS: &[Fails] = &[
    Fails {
        experiment: "fig7",
        claim: "RAID-5C lags the others*",
        why: "our RAID-5C concatenates its arrays 84 MiB at a time, not in 1 GB extents",
    },
    Fails {
        experiment: "fig5",
        claim: "... and beats RAID-5C",
        why: "the same 84 MiB concatenation: the TPC-C trace reaches every array",
    },
    Fails {
        experiment: "table4",
        claim: "GridGraph (sequential)*",
        why: "the same 84 MiB concatenation",
    },
    Fails {
        experiment: "table4",
        claim: "TPC-C: RAID+ at least matches*",
        why: "the same 84 MiB concatenation",
    },
    Fails {
        experiment: "fig6",
        claim: "Spreading the rebuild cuts Fin2's mean latency*",
        why: "the simulated rebuild keeps RAID+ at MD's minimum rate whatever the load and \
              locks a whole pool cycle",
    },
    Fails {
        experiment: "fig8",
        claim: "RAID+ has lower mean latency than RAID-50*",
        why: "synthetic stand-ins for the MSR traces",
    },
];

#[test]
fn quick_raidplus_upholds_the_papers_claims() {
    let report = common::check_seed_with("raidplus", ALLOWED, FAILS);
    for e in &report.experiments {
        assert!(!e.claims.is_empty(), "{} checks no claim", e.id);
    }
    let t2 = experiment(&report, "table2");
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
    let cov = experiment(&report, "cov");
    for r in cov.rows.iter().filter(|r| r.label.contains("RAID+")) {
        assert!(r.ours.abs() < 1e-9, "{}: {}", r.label, r.ours);
    }
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
