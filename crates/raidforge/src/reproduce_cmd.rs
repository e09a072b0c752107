//! `raidforge reproduce`: regenerate the seed papers' published results on the simulator and
//! the planner, and write reports with the published values beside ours.

use std::path::PathBuf;

use anyhow::{bail, Context};
use clap::Args;

/// Arguments of `raidforge reproduce`.
#[derive(Args, Debug)]
pub struct ReproduceArgs {
    /// Which seed: s2raid, raidplus, raid4s, raidh, lpu, ido, or all.
    name: String,
    /// Directory for NAME.md, NAME.json and the SVG plots.
    #[arg(long, default_value = "reproduce")]
    out: PathBuf,
    /// Scaled-down runs (smaller disks, shorter traces): every seed in about two minutes.
    #[arg(long)]
    quick: bool,
    /// Folder of the traces the reproductions replay (default: $RAIDFORGE_TRACES, else the
    /// repository's data/traces).
    #[arg(long)]
    traces: Option<PathBuf>,
    /// Print the reports as JSON on stdout (one object: {"reports": [...]}).
    #[arg(long)]
    json: bool,
}

/// The seeds `name` selects: one, or every one for `all`.
pub fn seeds(name: &str) -> anyhow::Result<Vec<&'static repro::Seed>> {
    if name == "all" {
        return Ok(repro::SEEDS.iter().collect());
    }
    match repro::seed(name) {
        Some(s) => Ok(vec![s]),
        None => {
            let names: Vec<&str> = repro::SEEDS.iter().map(|s| s.name).collect();
            bail!(
                "unknown reproduction {name:?}; choose one of: {}, all",
                names.join(", ")
            )
        }
    }
}

/// What `raidforge reproduce --json` prints for these reports.
pub fn reports_json(reports: &[repro::Report]) -> serde_json::Value {
    let v: Vec<serde_json::Value> = reports.iter().map(|r| r.to_json()).collect();
    serde_json::json!({ "reports": v })
}

pub fn run(a: ReproduceArgs) -> anyhow::Result<bool> {
    let seeds = seeds(&a.name)?;
    let opts = repro::Opts {
        quick: a.quick,
        traces_dir: a.traces.clone(),
    };
    let mut reports = Vec::new();
    let mut ok = true;
    for s in seeds {
        eprintln!(
            "reproduce {}{}:",
            s.name,
            if a.quick { " (quick)" } else { "" }
        );
        let mut progress = |line: &str| eprintln!("  {line}");
        let r = repro::reproduce(s, &opts, &mut progress)
            .with_context(|| format!("reproducing {}", s.name))?;
        let files = r
            .write(&a.out)
            .with_context(|| format!("writing the report into {}", a.out.display()))?;
        let failed = r.failed_claims();
        let unexplained: usize = r.experiments.iter().map(|e| e.unexplained().len()).sum();
        eprintln!(
            "  {} experiments in {:.1} s; claims failed: {}; rows off by >20 % without a note: {}",
            r.experiments.len(),
            r.runtime_s,
            failed.len(),
            unexplained
        );
        for f in &failed {
            eprintln!("  CLAIM FAILED {f}");
        }
        for f in &files {
            eprintln!("  wrote {}", f.display());
        }
        ok &= failed.is_empty();
        reports.push(r);
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&reports_json(&reports))?);
    } else {
        for r in &reports {
            println!("{}: {}", r.name, r.source);
            for e in &r.experiments {
                let held = e.claims.iter().filter(|c| c.holds).count();
                println!(
                    "  {:<10} {:<60} {} rows, claims {}/{}",
                    e.id,
                    e.title,
                    e.rows.len(),
                    held,
                    e.claims.len()
                );
            }
        }
    }
    Ok(ok)
}
