//! `raidforge reproduce raide --quick` as CI runs it (seed 004 chapter 5): every claim holds,
//! Table 5.1 comes out of the plans exactly, the thesis's decomposition of writes into
//! partial-stripe writes agrees with the planner in every case, and the uneven reads of
//! Figure 5.1 appear at exactly 320, 640 and 960 KiB.

mod common;

use common::{experiment, row};

#[test]
fn quick_run_upholds_every_claim() {
    let r = common::check_seed("raide", &[]);
    let t = experiment(&r, "table5.1");
    for row in &t.rows {
        assert_eq!(Some(row.ours), row.published, "{}", row.label);
    }
    let f = experiment(&r, "fig5.3");
    assert_eq!(
        row(f, "cases (start, size)").ours,
        row(
            f,
            "cases where the planner's partial and full stripes match the analysis"
        )
        .ours
    );
    let f = experiment(&r, "fig5.1");
    for k in (64..=1024).step_by(64) {
        let cov = row(f, &format!("{k} KiB read CoV over devices")).ours;
        assert_eq!(
            cov > 1.0,
            [320, 640, 960].contains(&k),
            "{k} KiB: read CoV {cov}"
        );
    }
}

#[test]
fn the_decomposition_covers_one_and_two_stripe_writes() {
    use repro::raide::thesis_decomposition as d;
    // Inside a stripe, across the edge, ending on the edge, starting on it.
    assert_eq!(d(1, 2, 4), (2, 0, 0));
    assert_eq!(d(3, 2, 4), (1, 1, 0));
    assert_eq!(d(2, 6, 4), (2, 0, 1));
    assert_eq!(d(0, 5, 4), (0, 1, 1));
    assert_eq!(d(0, 4, 4), (0, 0, 1));
}
