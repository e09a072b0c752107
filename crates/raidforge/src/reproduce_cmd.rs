//! `raidforge reproduce`: regenerate the seed papers' published results on the simulator and
//! the planner, and write reports with the published values beside ours.

use std::path::PathBuf;

use anyhow::{bail, Context};
use clap::Args;

/// Arguments of `raidforge reproduce`.
#[derive(Args, Debug)]
pub struct ReproduceArgs {
    /// Which reproduction: s2raid, raidplus, raid4s, raide, raidh, lpu, ido; all (every one,
    /// then COVERAGE.md); or coverage (only COVERAGE.md, from the NAME.json reports already in
    /// --out: every table and figure of the seed documents with what the reproductions do
    /// about it).
    name: String,
    /// Directory for NAME.md, NAME.json and the SVG plots.
    #[arg(long, default_value = "reproduce")]
    out: PathBuf,
    /// Scaled-down runs (smaller disks, shorter traces), marked as such in every report:
    /// `all` (s2raid, raidplus, raid4s, raidh, lpu and ido) in about 15 s with a release build
    /// (about 90 s with a debug build).
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
                "unknown reproduction {name:?}; choose one of: {}, all, coverage",
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

/// Writes `OUT/COVERAGE.md` from the reports in `OUT`; returns its path.
fn write_coverage(out: &std::path::Path) -> anyhow::Result<PathBuf> {
    let text = repro::coverage::render_dir(out)?;
    let path = out.join("COVERAGE.md");
    std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
    Ok(path)
}

pub fn run(a: ReproduceArgs) -> anyhow::Result<bool> {
    if a.name == "coverage" {
        let path = write_coverage(&a.out)?;
        eprintln!("wrote {}", path.display());
        return Ok(true);
    }
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
        let explained = r.explained_failures();
        let unexplained: usize = r.experiments.iter().map(|e| e.unexplained().len()).sum();
        eprintln!(
            "  {} experiments in {:.1} s; claims failed: {} (and {} not upheld, with the reason \
             in the report); rows off by >20 % without a note: {}",
            r.experiments.len(),
            r.runtime_s,
            failed.len(),
            explained.len(),
            unexplained
        );
        for f in &failed {
            eprintln!("  CLAIM FAILED {f}");
        }
        for f in &explained {
            eprintln!("  not upheld (explained): {f}");
        }
        for f in &files {
            eprintln!("  wrote {}", f.display());
        }
        ok &= failed.is_empty();
        reports.push(r);
    }
    if a.name == "all" {
        let path = write_coverage(&a.out)?;
        eprintln!("wrote {}", path.display());
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
