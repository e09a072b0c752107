//! `raidforge layout show|check|compare`.

use std::sync::Arc;

use anyhow::Context;
use clap::{Args, Subcommand};
use layout::{check, recovery_plan, Cycle, Disk, Order, Params, Scheme, SchemeKind};
use serde_json::{json, Value};

#[derive(Subcommand, Debug)]
pub enum LayoutCommand {
    /// Print one full cycle of a layout: every stripe, its units' disks, offsets and roles.
    ///
    /// One cycle is the part that repeats: one RAID+ template, one RAIDH parity cycle, the K
    /// partitions of S2-RAID, one parity rotation of RAID5. Offsets are in chunks from the start
    /// of the cycle. With --failed, shows where lost units live after the rebuild (interim layout
    /// for RAID+, spare disks or spare space for the others).
    ///
    /// Example: raidforge layout show --scheme raidplus --disks 5 --width 3
    Show(ShowArgs),
    /// Measure a layout's properties: stripes on distinct disks, data and parity per disk, and
    /// the rebuild load per disk after a failure (disk 0 unless --failed is given), with its
    /// coefficient of variation (CoV, 0 = perfectly even) over the whole cycle and over windows.
    ///
    /// Example: raidforge layout check --scheme hash --disks 59 --width 7 --json
    Check(CheckArgs),
    /// Compare rebuild balance of RAID+, random and hash placement, RAID-50 and RAID-5C on one
    /// disk count and stripe width (default: the RAID+ paper's 59 disks, 7-wide stripes, 56+3).
    Compare(CompareArgs),
}

/// Arguments of `raidforge layout show`.
#[derive(Args, Debug)]
pub struct ShowArgs {
    #[command(flatten)]
    pub scheme: SchemeArgs,
    /// Print JSON: {"scheme", "disks", "rows", "stripes": [{"units": [{"disk", "offset", "role"}]}]}.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `raidforge layout check`.
#[derive(Args, Debug)]
pub struct CheckArgs {
    #[command(flatten)]
    pub scheme: SchemeArgs,
    /// Stripes per window for the windowed CoV (default n(n-1): one RAID+ template for the
    /// same number of disks).
    #[arg(long)]
    pub window: Option<usize>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `raidforge layout compare`.
#[derive(Args, Debug)]
pub struct CompareArgs {
    /// Number of disks (a prime power, for RAID+).
    #[arg(long, default_value_t = 59)]
    pub disks: usize,
    /// Stripe width including parity (and RAID-50 group width).
    #[arg(long, default_value_t = 7)]
    pub width: usize,
    /// Seed for random and hash placement.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Print JSON: {"disks", "width", "schemes": [<check report>...]}.
    #[arg(long)]
    pub json: bool,
}

/// Scheme and parameters, shared by every command that builds a layout.
#[derive(Args, Debug, Clone)]
pub struct LayoutArgs {
    /// Placement scheme: raid0 raid1 raid10 raid4 raid5 raid6 raid50 raid5c raid60 random hash
    /// s2raid5 s2raid10 raidplus rm2 raidh.
    #[arg(long)]
    scheme: String,
    /// Number of member disks, spares included.
    #[arg(long)]
    disks: Option<usize>,
    /// Stripe width including parity (the group width for raid50/raid5c/raid60; the stripe group
    /// size M for rm2).
    #[arg(long)]
    width: Option<usize>,
    /// Dedicated spare disks (the last ones).
    #[arg(long, default_value_t = 0)]
    spares: usize,
    /// RAID level of each stripe: 5 (one parity) or 6 (P+Q), for raidplus, random, hash.
    #[arg(long)]
    level: Option<u8>,
    /// S2-RAID group size G (a prime).
    #[arg(long)]
    group: Option<usize>,
    /// S2-RAID partitions per disk K.
    #[arg(long)]
    partitions: Option<usize>,
    /// RAIDH per-device parity weights, e.g. 0,0,1,1,2 (RAID4S: 0,0,0,0,1).
    #[arg(long, value_delimiter = ',')]
    weights: Option<Vec<u32>>,
    /// RAID+ stripe order within a template: native, read or write.
    #[arg(long, default_value = "native")]
    order: String,
    /// Seed for random and hash placement.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Stripes per cycle for random and hash placement (default n(n-1)).
    #[arg(long)]
    stripes: Option<usize>,
    /// RAID+ pool with several volumes: width:level pairs, e.g. 3:5,4:6.
    #[arg(long)]
    volumes: Option<String>,
    /// Linux MD layout: for raid5/raid6 left-symmetric (ls, the default), left-asymmetric
    /// (la), right-symmetric (rs), right-asymmetric (ra), parity-first, parity-last, and for
    /// raid6 also the -6 forms (left-symmetric-6, ..., parity-first-6: RAID5's layout with Q
    /// on the last member); for raid10 nN, fN or oN (N near, far or offset copies; default
    /// n2), or nNfM / nNoM.
    #[arg(long = "layout", value_name = "NAME")]
    md_layout: Option<String>,
}

/// Layout parameters plus a failure list, for show and check.
#[derive(Args, Debug)]
pub struct SchemeArgs {
    #[command(flatten)]
    pub layout: LayoutArgs,
    /// Failed disks in failure order, e.g. 0 or 0,3.
    #[arg(long, value_delimiter = ',')]
    pub failed: Vec<Disk>,
}

impl SchemeArgs {
    fn build(&self) -> anyhow::Result<Arc<dyn Scheme>> {
        let (kind, params) = self.layout.params()?;
        Ok(layout::build(kind, &params)?)
    }
}

impl LayoutArgs {
    /// The scheme and its parameters, validated by name only (the layout checks the rest).
    pub fn params(&self) -> anyhow::Result<(SchemeKind, Params)> {
        let kind = SchemeKind::parse(&self.scheme)?;
        let params = Params {
            disks: self
                .disks
                .or_else(|| self.weights.as_ref().map(|w| w.len())),
            width: self.width,
            spares: self.spares,
            level: self.level,
            group: self.group,
            partitions: self.partitions,
            weights: self.weights.clone(),
            order: Order::parse(&self.order)?,
            seed: self.seed,
            stripes: self.stripes,
            volumes: self.volumes.clone(),
            md_layout: self.md_layout.clone(),
        };
        Ok((kind, params))
    }
}

pub fn run(c: LayoutCommand) -> anyhow::Result<()> {
    match c {
        LayoutCommand::Show(a) => show(&a.scheme, a.json),
        LayoutCommand::Check(a) => {
            let Checked {
                scheme: s,
                report,
                json: v,
                scheme_extra,
            } = check_report(&a)?;
            if a.json {
                println!("{}", serde_json::to_string_pretty(&v)?);
            } else {
                for (k, val) in scheme_extra
                    .as_ref()
                    .and_then(Value::as_object)
                    .into_iter()
                    .flatten()
                {
                    println!("{k}: {val}");
                }
                print_report(&*s, &report);
            }
            Ok(())
        }
        LayoutCommand::Compare(a) => compare(a.disks, a.width, a.seed, a.json),
    }
}

/// What `layout check --json` prints.
pub fn check_json(a: &CheckArgs) -> anyhow::Result<Value> {
    Ok(check_report(a)?.json)
}

/// A measured layout.
struct Checked {
    scheme: Arc<dyn Scheme>,
    report: layout::CheckReport,
    /// What `layout check --json` prints.
    json: Value,
    /// The scheme's own check figures (part of `json`; printed as `key: value` lines without
    /// --json).
    scheme_extra: Option<Value>,
}

fn check_report(a: &CheckArgs) -> anyhow::Result<Checked> {
    let s = a.scheme.build()?;
    let n = s.cycle().disks;
    let window = a.window.unwrap_or(n * n.saturating_sub(1)).max(1);
    let report = check(&*s, &a.scheme.failed, window)?;
    let mut v = report_json(&report);
    if let Some(x) = extra(&*s)? {
        merge(&mut v, x);
    }
    let mut scheme_extra = None;
    if let Some(frag) = s.check_extra_json() {
        let x: Value = serde_json::from_str(&format!("{{{frag}}}"))
            .with_context(|| format!("scheme {} produced bad JSON", s.name()))?;
        merge(&mut v, x.clone());
        scheme_extra = Some(x);
    }
    Ok(Checked {
        scheme: s,
        report,
        json: v,
        scheme_extra,
    })
}

fn extra(s: &dyn Scheme) -> anyhow::Result<Option<Value>> {
    match s.extra_json() {
        None => Ok(None),
        Some(frag) => Ok(Some(
            serde_json::from_str(&format!("{{{frag}}}"))
                .with_context(|| format!("scheme {} produced bad JSON", s.name()))?,
        )),
    }
}

fn merge(into: &mut Value, from: Value) {
    if let (Value::Object(a), Value::Object(b)) = (into, from) {
        a.extend(b);
    }
}

fn cycle_json(c: &Cycle) -> Value {
    Value::Array(
        c.stripes
            .iter()
            .map(|s| {
                json!({"units": s.units.iter().map(|u| json!({
                    "disk": u.disk, "offset": u.offset, "role": u.role.as_str()
                })).collect::<Vec<_>>()})
            })
            .collect(),
    )
}

/// What `layout show --json` prints.
pub fn show_json(args: &SchemeArgs) -> anyhow::Result<Value> {
    let s = args.build()?;
    let cycle = shown_cycle(&*s, args)?;
    let mut v = json!({
        "scheme": s.name(),
        "disks": cycle.disks,
        "rows": cycle.rows,
        "failed": args.failed,
        "stripes": cycle_json(&cycle),
    });
    if let Some(x) = extra(&*s)? {
        merge(&mut v, x);
    }
    Ok(v)
}

/// The healthy cycle, or the one after the rebuild of `--failed`.
fn shown_cycle(s: &dyn Scheme, args: &SchemeArgs) -> anyhow::Result<Cycle> {
    Ok(if args.failed.is_empty() {
        s.cycle().clone()
    } else {
        recovery_plan(s, &args.failed)?.rebuilt
    })
}

fn show(args: &SchemeArgs, as_json: bool) -> anyhow::Result<()> {
    if as_json {
        println!("{}", serde_json::to_string(&show_json(args)?)?);
        return Ok(());
    }
    let s = args.build()?;
    let cycle = shown_cycle(&*s, args)?;
    println!("{}", s.describe());
    println!(
        "one cycle: {} stripes, {} rows per disk, {} data chunks",
        cycle.stripes.len(),
        cycle.rows,
        cycle.data_chunks()
    );
    if !args.failed.is_empty() {
        println!("after failing disks {:?} (x = failed disk)", args.failed);
    }
    print_grid(&cycle, &args.failed);
    Ok(())
}

/// Stripe label: a, b, ... z like the papers' figures while it fits, numbers beyond.
fn label(i: usize, total: usize) -> String {
    if total <= 26 {
        ((b'a' + i as u8) as char).to_string()
    } else {
        i.to_string()
    }
}

/// A grid with one row per offset and one column per disk; each cell names the stripe and the
/// unit's role (D data, P, Q, M mirror).
fn print_grid(c: &Cycle, failed: &[Disk]) {
    let mut cells = vec![vec![String::from("."); c.disks]; c.rows as usize];
    for (si, s) in c.stripes.iter().enumerate() {
        let mut d = 0;
        for u in &s.units {
            let r = match u.role {
                layout::Role::Data => {
                    d += 1;
                    format!("D{}", d - 1)
                }
                layout::Role::P => "P".into(),
                layout::Role::Q => "Q".into(),
                layout::Role::Mirror => "M".into(),
            };
            let cell = &mut cells[u.offset as usize][u.disk as usize];
            let text = format!("{}.{}", label(si, c.stripes.len()), r);
            // RM2 data units belong to two groups: show both.
            if cell == "." {
                *cell = text;
            } else if u.role == layout::Role::Data {
                cell.push('+');
                cell.push_str(&label(si, c.stripes.len()));
            }
        }
    }
    let w = cells
        .iter()
        .flatten()
        .map(|s| s.len())
        .max()
        .unwrap_or(1)
        .max(4);
    let mut head = format!("{:>6} ", "offset");
    for d in 0..c.disks {
        let name = if failed.contains(&(d as Disk)) {
            format!("x{d}")
        } else {
            format!("d{d}")
        };
        head.push_str(&format!(" {name:>w$}"));
    }
    println!("{head}");
    for (o, row) in cells.iter().enumerate() {
        let mut line = format!("{o:>6} ");
        for cell in row {
            line.push_str(&format!(" {cell:>w$}"));
        }
        println!("{line}");
    }
}

fn report_json(r: &layout::CheckReport) -> Value {
    json!({
        "scheme": r.scheme,
        "disks": r.disks,
        "stripes": r.stripes,
        "rows": r.rows,
        "failed": r.failed,
        "stripes_on_distinct_disks": r.stripes_on_distinct_disks,
        "data_units_per_disk": r.data_units_per_disk,
        "parity_units_per_disk": r.parity_units_per_disk,
        "rebuild_reads_per_disk": r.rebuild_reads_per_disk,
        "rebuild_writes_per_disk": r.rebuild_writes_per_disk,
        "rebuild_read_cov": r.rebuild_read_cov,
        "rebuild_write_cov": r.rebuild_write_cov,
        "disks_read": r.disks_read,
        "disks_written": r.disks_written,
        "window": r.windowed.window,
        "windows": r.windowed.windows,
        "rebuild_read_cov_window_max": r.windowed.read_cov_max,
        "rebuild_read_cov_window_mean": r.windowed.read_cov_mean,
        "rebuild_write_cov_window_max": r.windowed.write_cov_max,
        "rebuild_write_cov_window_mean": r.windowed.write_cov_mean,
    })
}

fn print_report(s: &dyn Scheme, r: &layout::CheckReport) {
    println!("{}", s.describe());
    println!(
        "cycle: {} stripes over {} rows; failed disks {:?}",
        r.stripes, r.rows, r.failed
    );
    println!(
        "every stripe on distinct disks: {}",
        if r.stripes_on_distinct_disks {
            "yes"
        } else {
            "NO"
        }
    );
    println!(
        "{:>6} {:>8} {:>8} {:>14} {:>15}",
        "disk", "data", "parity", "rebuild reads", "rebuild writes"
    );
    for d in 0..r.disks {
        println!(
            "{:>6} {:>8} {:>8} {:>14} {:>15}",
            if r.failed.contains(&(d as Disk)) {
                format!("x{d}")
            } else {
                format!("d{d}")
            },
            r.data_units_per_disk[d],
            r.parity_units_per_disk[d],
            r.rebuild_reads_per_disk[d],
            r.rebuild_writes_per_disk[d]
        );
    }
    println!(
        "rebuild reads on {} disks, CoV {:.2} % over the cycle, worst {:.2} % over windows of {} stripes",
        r.disks_read,
        r.rebuild_read_cov * 100.0,
        r.windowed.read_cov_max * 100.0,
        r.windowed.window
    );
    println!(
        "rebuild writes on {} disks, CoV {:.2} % over the cycle, worst {:.2} % over windows",
        r.disks_written,
        r.rebuild_write_cov * 100.0,
        r.windowed.write_cov_max * 100.0
    );
}

/// The schemes `layout compare` measures: (name, description, check report).
fn compare_rows(
    n: usize,
    k: usize,
    seed: u64,
) -> anyhow::Result<Vec<(String, String, layout::CheckReport)>> {
    if n < 4 || k < 3 || k >= n {
        anyhow::bail!("--disks must be at least 4 and --width between 3 and disks-1 (got {n} disks, width {k})");
    }
    let window = n * (n - 1);
    let spares = n % k;
    let base = Params {
        disks: Some(n),
        width: Some(k),
        seed,
        ..Params::default()
    };
    let mut rows = Vec::new();
    // Random and hash placement get ten templates' worth of stripes, so the whole-cycle CoV
    // (which evens out over many stripes) and the local-window CoV (which does not) differ.
    let long = Params {
        stripes: Some(10 * window),
        ..base.clone()
    };
    let mut candidates: Vec<(&str, SchemeKind, Params)> = vec![
        ("raidplus", SchemeKind::RaidPlus, base.clone()),
        ("random", SchemeKind::Random, long.clone()),
        ("hash", SchemeKind::Hash, long),
    ];
    if n - spares >= k {
        let grouped = Params {
            spares,
            ..base.clone()
        };
        candidates.push(("raid50", SchemeKind::Raid50, grouped.clone()));
        candidates.push(("raid5c", SchemeKind::Raid5c, grouped));
    }
    for (name, kind, p) in candidates {
        match layout::build(kind, &p) {
            Ok(s) => {
                let r = check(&*s, &[], window)?;
                rows.push((name.to_string(), s.describe(), r));
            }
            Err(e) => eprintln!("raidforge: skipping {name}: {e}"),
        }
    }
    Ok(rows)
}

/// What `layout compare --json` prints.
pub fn compare_json(a: &CompareArgs) -> anyhow::Result<Value> {
    let (n, k) = (a.disks, a.width);
    let rows = compare_rows(n, k, a.seed)?;
    Ok(json!({
        "disks": n,
        "width": k,
        "window": n * (n - 1),
        "schemes": rows.iter().map(|(_, d, r)| {
            let mut v = report_json(r);
            merge(&mut v, json!({"description": d}));
            v
        }).collect::<Vec<_>>(),
    }))
}

fn compare(n: usize, k: usize, seed: u64, as_json: bool) -> anyhow::Result<()> {
    if as_json {
        let a = CompareArgs {
            disks: n,
            width: k,
            seed,
            json: true,
        };
        println!("{}", serde_json::to_string_pretty(&compare_json(&a)?)?);
        return Ok(());
    }
    let rows = compare_rows(n, k, seed)?;
    let window = n * (n - 1);
    println!("Rebuild of one failed disk, {n} disks, stripe width {k}, windows of {window} stripes (one RAID+ template).");
    println!("CoV = standard deviation / mean of rebuild reads over surviving disks; 0 % is perfectly even.");
    println!(
        "{:<10} {:>10} {:>11} {:>13} {:>13} {:>11}",
        "scheme", "disks read", "read CoV %", "window CoV %", "disks written", "write CoV %"
    );
    for (name, _, r) in &rows {
        println!(
            "{:<10} {:>10} {:>11.2} {:>13.2} {:>13} {:>11.2}",
            name,
            r.disks_read,
            r.rebuild_read_cov * 100.0,
            r.windowed.read_cov_max * 100.0,
            r.disks_written,
            r.rebuild_write_cov * 100.0
        );
    }
    for (_, d, _) in &rows {
        println!("  {d}");
    }
    Ok(())
}
