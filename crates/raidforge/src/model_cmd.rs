//! `raidforge model`: analytic models. `model mttdl` prints the mean time to data loss of RAID5,
//! RAID6, RAID6 with lazy parity update (seed 002), RAID-50 and RAID+ (seed 001) from the Markov
//! chains in `repro::mttdl`.

use std::path::PathBuf;

use anyhow::{bail, Context};
use clap::{Args, Subcommand};
use repro::mttdl::{self, DiskRates, LpuRates};

/// Analytic models (no simulation).
#[derive(Subcommand, Debug)]
pub enum ModelCommand {
    /// Mean time to data loss (MTTDL) of RAID5, RAID6, RAID6 with lazy parity update, RAID-50
    /// and RAID+, against the number of disks.
    ///
    /// Each model is a Markov chain: disks fail independently (rate 1/MTTF each), a failed
    /// disk is rebuilt in MTTR on average, one at a time, and the MTTDL is the mean time until
    /// more disks have failed than the layout tolerates. Lazy parity update (seed 002) defers
    /// one of RAID6's two parity updates: while updates are pending a failure leaves only one
    /// parity until the deferred list is flushed, so its MTTDL lies between RAID5's and RAID6's.
    /// RAID+ (seed 001) rebuilds a failed disk from all survivors, k/(n-1) of RAID5's rebuild
    /// time; its bound is RAID-50's MTTDL times (k-1)/k (seed 001, Table 1).
    ///
    /// Defaults are seed 002's parameters (MTTF 30,000 h, MTTR 24 h, BPGL 0.26 h / 0.009 h /
    /// 0.74 h). Times are in hours; the table also gives years.
    ///
    /// Examples: raidforge model mttdl;  raidforge model mttdl --disks 8 --mttf-hours 1e6
    /// --json;  raidforge model mttdl --disks 4..24 --plot mttdl.svg
    Mttdl(MttdlArgs),
}

/// Arguments of `raidforge model mttdl`.
#[derive(Args, Debug)]
pub struct MttdlArgs {
    /// Mean time to failure of one disk, hours (seed 002: 30,000).
    #[arg(long, default_value_t = 30_000.0)]
    mttf_hours: f64,
    /// Mean time to repair (rebuild) one failed disk, hours (seed 002: 24).
    #[arg(long, default_value_t = 24.0)]
    mttr_hours: f64,
    /// Numbers of disks: one (8), a list (4,8,16) or a range (4..16, inclusive).
    #[arg(long, default_value = "4..16")]
    disks: String,
    /// Lazy parity: mean time until the deferred-parity list (BPGL) fills again after it was
    /// drained, hours (1/lambda2; seed 002: 0.26).
    #[arg(long, default_value_t = 0.26)]
    bpgl_fill_hours: f64,
    /// Lazy parity: mean time to drain the list while the array is healthy and idle, hours
    /// (1/mu2; seed 002: 0.009).
    #[arg(long, default_value_t = 0.009)]
    bpgl_drain_hours: f64,
    /// Lazy parity: mean time to flush the list after a disk failure, hours (1/mu3; seed 002:
    /// 0.74).
    #[arg(long, default_value_t = 0.74)]
    bpgl_flush_hours: f64,
    /// Stripe width k of RAID+ and group width of RAID-50 (capped at the number of disks).
    #[arg(long, default_value_t = 5)]
    width: usize,
    /// Print the table as JSON.
    #[arg(long)]
    json: bool,
    /// Also write an SVG plot of MTTDL against the number of disks to this file.
    #[arg(long, value_name = "FILE.svg")]
    plot: Option<PathBuf>,
}

/// Parses `8`, `4,8,16` or `4..16`.
fn parse_disks(s: &str) -> anyhow::Result<Vec<usize>> {
    let num = |t: &str| -> anyhow::Result<usize> {
        t.trim()
            .parse::<usize>()
            .with_context(|| format!("--disks: {t:?} is not a number of disks"))
    };
    let v: Vec<usize> = if let Some((a, b)) = s.split_once("..") {
        let (a, b) = (num(a)?, num(b.trim_start_matches('='))?);
        if a > b {
            bail!("--disks {s}: the range is empty");
        }
        (a..=b).collect()
    } else {
        s.split(',').map(num).collect::<anyhow::Result<_>>()?
    };
    if let Some(&n) = v.iter().find(|&&n| n < 4) {
        bail!("--disks: {n} is too few; the models need at least 4 disks (RAID6 with lazy parity)");
    }
    if v.len() > 10_000 {
        bail!("--disks: at most 10,000 values");
    }
    Ok(v)
}

pub fn run(c: ModelCommand) -> anyhow::Result<()> {
    match c {
        ModelCommand::Mttdl(a) => mttdl_cmd(a),
    }
}

/// The validated table of `a`, plus the SVG plot written if `a` asks for one.
fn mttdl_rows(a: &MttdlArgs) -> anyhow::Result<Vec<mttdl::MttdlRow>> {
    let positive = |name: &str, v: f64| {
        if v.is_finite() && v > 0.0 {
            Ok(())
        } else {
            Err(anyhow::anyhow!(
                "--{name} must be a positive number of hours, got {v}"
            ))
        }
    };
    positive("mttf-hours", a.mttf_hours)?;
    positive("mttr-hours", a.mttr_hours)?;
    positive("bpgl-fill-hours", a.bpgl_fill_hours)?;
    positive("bpgl-drain-hours", a.bpgl_drain_hours)?;
    positive("bpgl-flush-hours", a.bpgl_flush_hours)?;
    if a.width < 2 {
        bail!("--width must be at least 2 (one data unit and its parity)");
    }
    let disks = parse_disks(&a.disks)?;
    let d = DiskRates {
        mttf_h: a.mttf_hours,
        mttr_h: a.mttr_hours,
    };
    let b = LpuRates {
        fill_h: a.bpgl_fill_hours,
        drain_h: a.bpgl_drain_hours,
        flush_h: a.bpgl_flush_hours,
    };
    let rows = mttdl::table(&disks, a.width, d, b);
    if let Some(path) = &a.plot {
        let xs = |f: fn(&mttdl::MttdlRow) -> f64| -> Vec<(f64, f64)> {
            rows.iter().map(|r| (r.disks as f64, f(r))).collect()
        };
        let chart = sim::svg::LineChart {
            title: format!(
                "MTTDL (MTTF {} h, MTTR {} h, RAID+/RAID-50 width {})",
                a.mttf_hours, a.mttr_hours, a.width
            ),
            x_label: "number of disks".into(),
            y_label: "MTTDL (hours, log scale)".into(),
            series: vec![
                sim::svg::Series::line("RAID5", xs(|r| r.raid5_h)),
                sim::svg::Series::line("RAID-50", xs(|r| r.raid50_h)),
                sim::svg::Series::line("RAID+", xs(|r| r.raidplus_h)),
                sim::svg::Series::line("RAID6+LPU", xs(|r| r.raid6_lpu_h)),
                sim::svg::Series::line("RAID6", xs(|r| r.raid6_h)),
            ],
            markers: Vec::new(),
            log_y: true,
            ..Default::default()
        };
        std::fs::write(path, chart.to_svg())
            .with_context(|| format!("writing the plot {}", path.display()))?;
        eprintln!("wrote {}", path.display());
    }
    Ok(rows)
}

/// What `raidforge model mttdl --json` prints (and the plot, if `a` asks for one).
pub fn mttdl_json(a: &MttdlArgs) -> anyhow::Result<serde_json::Value> {
    let rows = mttdl_rows(a)?;
    Ok(table_json(a, &rows))
}

fn table_json(a: &MttdlArgs, rows: &[mttdl::MttdlRow]) -> serde_json::Value {
    serde_json::json!({
        "mttf_hours": a.mttf_hours,
        "mttr_hours": a.mttr_hours,
        "bpgl_fill_hours": a.bpgl_fill_hours,
        "bpgl_drain_hours": a.bpgl_drain_hours,
        "bpgl_flush_hours": a.bpgl_flush_hours,
        "width": a.width,
        "unit": "hours",
        "rows": rows,
    })
}

fn mttdl_cmd(a: MttdlArgs) -> anyhow::Result<()> {
    let rows = mttdl_rows(&a)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&table_json(&a, &rows))?);
        return Ok(());
    }
    println!(
        "MTTDL in hours (years in brackets); disk MTTF {} h, MTTR {} h; lazy parity: BPGL fill {} h, \
         drain {} h, flush {} h; RAID-50/RAID+ width {}",
        a.mttf_hours, a.mttr_hours, a.bpgl_fill_hours, a.bpgl_drain_hours, a.bpgl_flush_hours, a.width
    );
    println!(
        "{:>5}  {:>20}  {:>20}  {:>20}  {:>9}  {:>9}  {:>20}  {:>20}  {:>20}",
        "disks",
        "RAID5",
        "RAID6",
        "RAID6+LPU",
        "LPU/R6",
        "LPU/R5",
        "RAID-50",
        "RAID+",
        "RAID+ bound"
    );
    let cell = |h: f64| format!("{h:.3e} ({:.2e} y)", h / 8766.0);
    for r in &rows {
        println!(
            "{:>5}  {:>20}  {:>20}  {:>20}  {:>9.3}  {:>9.1}  {:>20}  {:>20}  {:>20}",
            r.disks,
            cell(r.raid5_h),
            cell(r.raid6_h),
            cell(r.raid6_lpu_h),
            r.raid6_lpu_h / r.raid6_h,
            r.raid6_lpu_h / r.raid5_h,
            cell(r.raid50_h),
            cell(r.raidplus_h),
            cell(r.raidplus_bound_h),
        );
    }
    println!(
        "RAID+ bound = RAID-50 x (k-1)/k (seed 001, Table 1), a first-order result; the chain \
         above may sit slightly below it when rebuilds are long."
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::parse_disks;

    #[test]
    fn disks_parse() {
        assert_eq!(parse_disks("8").unwrap(), vec![8]);
        assert_eq!(parse_disks("4,8,16").unwrap(), vec![4, 8, 16]);
        assert_eq!(parse_disks("4..7").unwrap(), vec![4, 5, 6, 7]);
        assert_eq!(parse_disks("4..=5").unwrap(), vec![4, 5]);
        assert!(parse_disks("3").is_err());
        assert!(parse_disks("9..4").is_err());
        assert!(parse_disks("x").is_err());
    }
}
