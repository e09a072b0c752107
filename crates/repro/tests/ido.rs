//! `raidforge reproduce ido --quick` as CI runs it: every figure of seed 003 present, every
//! claim holding, every row within 20 % of the paper or on the list below, the documented JSON.

mod common;

use common::{experiment, row, Differs, Fails};

/// Rows of the quick run allowed to differ from the paper (see `common::Differs`).
const ALLOWED: &[Differs] = &[
    Differs {
        experiment: "fig9",
        label: "* IDO speedup over *",
        lo: 0.18,
        hi: 5.1,
        why: "scaled-down array, datasheet drives, synthetic Financial workloads with an \
              assumed locality and 60 s of WebSearch: the claims compare directions",
    },
    Differs {
        experiment: "fig11",
        label: "* ido redirected",
        lo: 0.091,
        hi: 2.0,
        why: "the share redirected depends on the workload's locality, assumed for the \
              synthetic Financial loads; the WebSearch head is read-only and spread out",
    },
];

/// Claims of the paper the quick run does not uphold (see `common::Fails`).
const FAILS: &[Fails] = &[Fails {
    experiment: "fig10",
    claim: "IDO's improvement sets in earlier*",
    why: "right after the failure IDO migrates every hot zone to the surrogate, while \
          WorkOut's request-based redirection already catches the synthetic hot spots' repeats",
}];

#[test]
fn quick_run_upholds_the_papers_claims() {
    let r = common::check_seed_with("ido", ALLOWED, FAILS);
    let ids: Vec<&str> = r.experiments.iter().map(|e| e.id.as_str()).collect();
    assert_eq!(
        ids,
        ["fig9", "fig10", "fig11", "fig12", "fig13", "fig14", "fig15", "fig16"]
    );
    let f11 = experiment(&r, "fig11");
    for w in ["Fin1", "Fin2"] {
        let ido = row(f11, &format!("{w} ido redirected"));
        assert!(ido.published.is_some());
        assert!(ido.ours > 0.0 && ido.ours <= 100.0, "{w}: {}", ido.ours);
        let pr_time = row(experiment(&r, "fig9"), &format!("{w} pr rebuild time")).ours;
        let ido_time = row(experiment(&r, "fig9"), &format!("{w} ido rebuild time")).ours;
        assert!(ido_time < pr_time, "{w}: {ido_time} vs {pr_time}");
    }
}
