//! `raidforge reproduce ido --quick` as CI runs it: every figure of seed 003 present, every
//! claim holding, notes where ours departs from the published values, the documented JSON.

mod common;

use common::{experiment, row};

#[test]
fn quick_run_upholds_every_claim() {
    let r = common::check_seed("ido");
    let ids: Vec<&str> = r.experiments.iter().map(|e| e.id.as_str()).collect();
    assert_eq!(ids, ["fig9", "fig11", "fig12", "fig13", "fig14", "fig16"]);
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
