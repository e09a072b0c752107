//! `raidforge trace read`: the requests the simulator replays from a trace file, one a line
//! (with --json, one JSON object a line). The reading is `sim`'s own (format detection,
//! --lenient, --speedup, --loops, --requests exactly as `raidforge sim` applies them).

use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, Subcommand};
use serde_json::{json, Value};
use sim::exec::Workload;
use sim::{Request, Source, SourceOptions, TraceFormat, WorkloadSpec};

#[derive(Subcommand, Debug)]
pub enum TraceCommand {
    /// Print the requests of a trace as the simulator replays them: arrival time, volume,
    /// read or write, byte offset and length, one a line (--json: one JSON object a line,
    /// {"time_ns", "offset_bytes", "len_bytes", "op", "volume"}). The format, the lines
    /// skipped and the request count go to stderr.
    ///
    /// Example: raidforge trace read websearch-head.mqsim --requests 10 --json
    Read(TraceReadArgs),
    /// Summarise a trace in one pass: requests and bytes by direction, the read share, a
    /// size histogram, requests per second over time (mean and peak), the footprint
    /// (distinct bytes touched), each volume's extent and the share of sequential requests
    /// (starting where the previous one of their volume ended). Reads the trace as `sim`
    /// replays it (format detection, compression, block-layer merging of Q replays).
    ///
    /// Example: raidforge trace stats data/traces/websearch-head.mqsim --plot ws.svg
    Stats(TraceStatsArgs),
}

/// Arguments of `raidforge trace stats`.
#[derive(Args, Debug)]
pub struct TraceStatsArgs {
    /// The trace file.
    pub file: PathBuf,
    /// Trace format, as `raidforge trace read --format` takes it; detected when absent.
    #[arg(long)]
    pub format: Option<String>,
    /// Skip malformed lines and count them instead of stopping at the first.
    #[arg(long)]
    pub lenient: bool,
    /// Read only this many requests.
    #[arg(long)]
    pub requests: Option<u64>,
    #[command(flatten)]
    pub merge: MergeArgs,
    /// Also draw requests per second over time and the size histogram into this SVG file.
    #[arg(long)]
    pub plot: Option<PathBuf>,
    /// Print one JSON object.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `raidforge trace read`.
#[derive(Args, Debug)]
pub struct TraceReadArgs {
    /// The trace file.
    pub file: PathBuf,
    /// Trace format: spc, msr, mqsim, tencent, systor, blkparse-q, blkparse-d, fio, alibaba,
    /// or csv:SPEC for any other CSV, its columns (from 1) and units given, e.g.
    /// csv:time=5:us,offset=3:bytes,size=4:sectors,op=2:rw,device=1 (time units s, ms, us,
    /// ns, 100ns; offset and size units bytes, sectors, blocks or a byte count; op words rw,
    /// 01 (0 reads), 10 (1 reads) or scsi opcodes; flags header and sep=tab|semicolon|space).
    /// Detected from the first lines when absent. Files compressed with gzip, zstd, xz or
    /// bzip2 are read as they are.
    #[arg(long)]
    pub format: Option<String>,
    /// Skip malformed lines and count them instead of stopping at the first.
    #[arg(long)]
    pub lenient: bool,
    /// Divide every arrival time by this (replay this many times faster).
    #[arg(long, default_value_t = 1.0)]
    pub speedup: f64,
    /// Read the trace this many times back to back (each pass starts one mean inter-arrival
    /// time after the last), as `raidforge sim --loops` replays it.
    #[arg(long, default_value_t = 1)]
    pub loops: u64,
    /// Stop after this many requests.
    #[arg(long)]
    pub requests: Option<u64>,
    #[command(flatten)]
    pub merge: MergeArgs,
    /// Print one JSON object a line.
    #[arg(long)]
    pub json: bool,
}

/// How a trace replay merges adjacent requests (`raidforge sim`, `raidforge trace read`).
#[derive(Args, Debug, Clone)]
pub struct MergeArgs {
    /// Merge adjacent requests as the kernel's block layer does before it issues them to a
    /// device: auto merges blkparse Q replays only (their requests are the application's,
    /// many of them pieces of one device request), on merges every trace, off none. A
    /// request takes later ones of the same volume and direction that start where it ends
    /// (or end where it starts) while its window lasts, up to --merge-max-kib.
    #[arg(long, default_value = "auto", value_parser = ["auto", "on", "off"])]
    pub merge: String,
    /// How long after its arrival a request can take others, in microseconds (the plug and
    /// queue time in which the kernel merges).
    #[arg(long, default_value_t = 1000)]
    pub merge_window_us: u64,
    /// Largest request, in KiB: merging stops there and larger ones are split (the device's
    /// max_sectors_kb: 1280 by default in recent kernels, 512 or less for many drivers).
    #[arg(long, default_value_t = 1280)]
    pub merge_max_kib: u64,
    /// Replay only this volume of the trace (its device, LUN, ASU or the CSV's device
    /// column); the other volumes' lines are counted as skipped.
    #[arg(long, conflicts_with = "fold_volumes")]
    pub only_volume: Option<u32>,
    /// Replay every volume's requests on one volume, at their own offsets.
    #[arg(long)]
    pub fold_volumes: bool,
}

impl MergeArgs {
    /// The volumes these options keep.
    pub fn volumes(&self) -> sim::Volumes {
        match (self.only_volume, self.fold_volumes) {
            (Some(v), _) => sim::Volumes::Only(v),
            (None, true) => sim::Volumes::Fold,
            (None, false) => sim::Volumes::All,
        }
    }
}

impl MergeArgs {
    /// The merging these options ask for.
    pub fn choice(&self) -> anyhow::Result<sim::MergeChoice> {
        if self.merge_max_kib == 0 {
            anyhow::bail!("--merge-max-kib must be at least 1");
        }
        let m = sim::Merge {
            window_ns: self.merge_window_us.saturating_mul(1000),
            max_bytes: self.merge_max_kib.saturating_mul(1024),
            ..sim::Merge::default()
        };
        Ok(match self.merge.as_str() {
            "on" => sim::MergeChoice::On(m),
            "off" => sim::MergeChoice::Off,
            _ => sim::MergeChoice::Auto(m),
        })
    }
}

/// The trace format a `--format` names (`None`: detect it).
pub fn parse_format(name: Option<&str>) -> anyhow::Result<Option<TraceFormat>> {
    name.map(|f| TraceFormat::parse(f).map_err(|e| anyhow::anyhow!("--format: {e}")))
        .transpose()
}

/// The requests of a trace, read as `raidforge sim` reads them.
pub struct TraceRequests {
    source: Source,
    format: TraceFormat,
}

impl TraceRequests {
    /// Opens the trace `a` names (detecting its format unless given).
    pub fn open(a: &TraceReadArgs) -> anyhow::Result<TraceRequests> {
        let format = parse_format(a.format.as_deref())?;
        if !(a.speedup.is_finite() && a.speedup > 0.0) {
            anyhow::bail!("--speedup must be a positive number, not {}", a.speedup);
        }
        // Opening the reader once names the format (detected from the first lines).
        let format = sim::trace::open(&a.file, format, sim::ReadOptions::default())?.format();
        let spec = WorkloadSpec::Trace {
            path: a.file.clone(),
            format: Some(format),
        };
        let opts = SourceOptions {
            speedup: a.speedup,
            lenient: a.lenient,
            limit: a.requests,
            loops: a.loops,
            merge: a.merge.choice()?,
            volumes: a.merge.volumes(),
        };
        // The capacity matters to synthetic workloads only.
        let source = spec.open(u64::MAX, &opts)?;
        Ok(TraceRequests { source, format })
    }

    /// The trace's format.
    pub fn format(&self) -> TraceFormat {
        self.format
    }

    /// Malformed lines skipped so far (under --lenient).
    pub fn skipped(&self) -> u64 {
        self.source.skipped()
    }

    /// Trace requests merged into others so far, and pieces split off requests over the
    /// largest size (--merge).
    pub fn merging(&self) -> (u64, u64) {
        self.source.merging()
    }
}

impl Iterator for TraceRequests {
    type Item = anyhow::Result<Request>;

    fn next(&mut self) -> Option<Self::Item> {
        self.source
            .next_request()
            .map(|r| r.map_err(anyhow::Error::from))
    }
}

/// One request as `trace read --json` prints it.
pub fn request_json(r: &Request) -> Value {
    json!({
        "time_ns": r.time_ns,
        "offset_bytes": r.offset_bytes,
        "len_bytes": r.len_bytes,
        "op": r.op.as_str(),
        "volume": r.volume,
    })
}

pub fn run(c: TraceCommand) -> anyhow::Result<()> {
    match c {
        TraceCommand::Read(a) => read(&a),
        TraceCommand::Stats(a) => stats(&a),
    }
}

fn read(a: &TraceReadArgs) -> anyhow::Result<()> {
    use std::io::Write;
    let mut requests = TraceRequests::open(a)?;
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    if !a.json {
        writeln!(
            out,
            "{:>14} {:>6} {:>5} {:>16} {:>10}",
            "time s", "volume", "op", "offset", "length"
        )?;
    }
    let mut n = 0u64;
    for r in requests.by_ref() {
        let r = r?;
        n += 1;
        if a.json {
            writeln!(out, "{}", request_json(&r))?;
        } else {
            writeln!(
                out,
                "{:>14.6} {:>6} {:>5} {:>16} {:>10}",
                r.time_ns as f64 / 1e9,
                r.volume,
                r.op.as_str(),
                r.offset_bytes,
                r.len_bytes
            )?;
        }
    }
    out.flush()?;
    let (merged, split) = requests.merging();
    eprintln!(
        "{}: format {}, {n} requests{}, {} malformed lines skipped",
        a.file.display(),
        requests.format(),
        if merged + split > 0 {
            format!(
                " ({} in the trace; {merged} merged into others and {split} pieces split off \
                 requests over the largest size, as the block layer would; --merge off keeps \
                 them as recorded)",
                (n + merged).saturating_sub(split)
            )
        } else {
            String::new()
        },
        requests.skipped()
    );
    Ok(())
}

/// One pass of `trace stats` over a trace: the JSON `--json` prints, the statistics behind it
/// and the reader's counts (format, lines skipped, merged, split). Writes `--plot`.
struct Gathered {
    json: Value,
    st: sim::trace::stats::TraceStats,
    format: String,
    skipped: u64,
    merged: u64,
    split: u64,
}

fn gather(a: &TraceStatsArgs) -> anyhow::Result<Gathered> {
    use sim::trace::stats::{size_bucket_bounds, TraceStats};
    let mut requests = TraceRequests::open(&TraceReadArgs {
        file: a.file.clone(),
        format: a.format.clone(),
        lenient: a.lenient,
        speedup: 1.0,
        loops: 1,
        requests: a.requests,
        merge: a.merge.clone(),
        json: false,
    })?;
    let mut st = TraceStats::new();
    let mut last_progress = std::time::Instant::now();
    for r in requests.by_ref() {
        st.add(&r?);
        if st.requests() % 65536 == 0 && last_progress.elapsed().as_secs() >= 2 {
            eprintln!("{}: {} requests read", a.file.display(), st.requests());
            last_progress = std::time::Instant::now();
        }
    }
    let n = st.requests();
    if n == 0 {
        anyhow::bail!(
            "{} holds no request as {} reads it ({} malformed lines skipped)",
            a.file.display(),
            requests.format(),
            requests.skipped()
        );
    }
    let (merged, split) = requests.merging();
    let duration_s = st.last_ns as f64 / 1e9;
    let rate = st.rate();
    let peak = rate
        .iter()
        .map(|b| (b.reads + b.writes) as f64 / b.width_s)
        .fold(0.0, f64::max);
    let bounds = size_bucket_bounds();
    let sizes: Vec<Value> = (st.sizes.iter().enumerate())
        .filter(|(_, &(r, w))| r + w > 0)
        .map(|(i, &(reads, writes))| {
            json!({
                "le_bytes": bounds.get(i),
                "reads": reads,
                "writes": writes,
            })
        })
        .collect();
    let bytes = st.read_bytes + st.write_bytes;
    let out = json!({
        "file": a.file.display().to_string(),
        "format": requests.format().to_string(),
        "requests": n,
        "requests_in_trace": (n + merged).saturating_sub(split),
        "requests_merged": merged,
        "requests_split": split,
        "lines_skipped": requests.skipped(),
        "reads": st.reads,
        "writes": st.writes,
        "read_share": st.reads as f64 / n as f64,
        "read_bytes": st.read_bytes,
        "write_bytes": st.write_bytes,
        "mean_size_bytes": bytes as f64 / n as f64,
        "duration_s": duration_s,
        "mean_iops": if duration_s > 0.0 { n as f64 / duration_s } else { 0.0 },
        "peak_iops": peak,
        "rate_bucket_s": rate.first().map_or(0.0, |b| b.width_s),
        "footprint_bytes": st.footprint_bytes(),
        "sequential_share": st.sequential as f64 / n as f64,
        "volumes": st.extent.iter().map(|(v, e)| json!({"volume": v, "extent_bytes": e})).collect::<Vec<_>>(),
        "sizes": sizes,
        "rate": rate.iter().map(|b| json!({"start_s": b.start_s, "reads": b.reads, "writes": b.writes})).collect::<Vec<_>>(),
    });
    if let Some(path) = &a.plot {
        std::fs::write(path, stats_svg(&a.file, &st))
            .with_context(|| format!("--plot: cannot write {}", path.display()))?;
    }
    Ok(Gathered {
        json: out,
        st,
        format: requests.format().to_string(),
        skipped: requests.skipped(),
        merged,
        split,
    })
}

/// What `raidforge trace stats --json` prints (and `--plot` written, when asked for).
pub fn stats_json(a: &TraceStatsArgs) -> anyhow::Result<Value> {
    Ok(gather(a)?.json)
}

fn stats(a: &TraceStatsArgs) -> anyhow::Result<()> {
    let Gathered {
        json: out,
        st,
        format,
        skipped,
        merged,
        split,
    } = gather(a)?;
    let n = st.requests();
    let bytes = st.read_bytes + st.write_bytes;
    let duration_s = st.last_ns as f64 / 1e9;
    let rate = st.rate();
    let peak = out["peak_iops"].as_f64().unwrap_or(0.0);
    if a.json {
        println!("{out}");
        return Ok(());
    }
    let mib = |b: u64| b as f64 / (1u64 << 20) as f64;
    println!("{} ({format})", a.file.display());
    println!(
        "requests      {n}{}",
        if merged + split > 0 {
            format!(
                " ({} in the trace; {merged} merged, {split} split by the block-layer model)",
                (n + merged).saturating_sub(split)
            )
        } else {
            String::new()
        }
    );
    println!(
        "reads         {} ({:.1} %), {:.1} MiB",
        st.reads,
        100.0 * st.reads as f64 / n as f64,
        mib(st.read_bytes)
    );
    println!(
        "writes        {}, {:.1} MiB",
        st.writes,
        mib(st.write_bytes)
    );
    println!("mean size     {:.1} KiB", bytes as f64 / n as f64 / 1024.0);
    println!(
        "duration      {duration_s:.3} s; {:.1} IOPS mean, {peak:.1} peak ({} s buckets)",
        if duration_s > 0.0 {
            n as f64 / duration_s
        } else {
            0.0
        },
        rate.first().map_or(0.0, |b| b.width_s)
    );
    println!(
        "footprint     {:.1} MiB over {} volume(s); {:.1} % of requests sequential",
        mib(st.footprint_bytes()),
        st.extent.len(),
        100.0 * st.sequential as f64 / n as f64
    );
    println!("sizes         up to      reads     writes");
    for (i, &(r, w)) in st.sizes.iter().enumerate() {
        if r + w == 0 {
            continue;
        }
        let label = sim::trace::stats::size_bucket_label(i);
        println!("              {label:>8} {r:>10} {w:>10}");
    }
    if skipped > 0 {
        println!("skipped       {skipped} malformed lines");
    }
    Ok(())
}

/// `trace stats --plot`: requests per second over time, and the size histogram.
fn stats_svg(file: &std::path::Path, st: &sim::trace::stats::TraceStats) -> String {
    use sim::svg::{stack, BarChart, LineChart, Series};
    let name = file.file_name().map_or_else(
        || file.display().to_string(),
        |f| f.to_string_lossy().into_owned(),
    );
    let rate = st.rate();
    let w = rate.first().map_or(1.0, |b| b.width_s);
    let line = |f: fn(&sim::trace::stats::RateBucket) -> u64| -> Vec<(f64, f64)> {
        rate.iter()
            .map(|b| (b.start_s + b.width_s / 2.0, f(b) as f64 / b.width_s))
            .collect()
    };
    let times = LineChart {
        title: format!("{name}: requests per second ({w} s buckets)"),
        x_label: "time since the first request (s)".into(),
        y_label: "requests per second".into(),
        series: vec![
            Series::line("reads", line(|b| b.reads)),
            Series::line("writes", line(|b| b.writes)),
        ],
        ..Default::default()
    };
    let used: Vec<usize> = (0..st.sizes.len())
        .filter(|&i| st.sizes[i].0 + st.sizes[i].1 > 0)
        .collect();
    let sizes = BarChart {
        title: format!("{name}: request sizes"),
        x_label: "size up to".into(),
        y_label: "requests".into(),
        categories: (used.iter())
            .map(|&i| sim::trace::stats::size_bucket_label(i))
            .collect(),
        series: vec![
            (
                "reads".into(),
                used.iter().map(|&i| st.sizes[i].0 as f64).collect(),
            ),
            (
                "writes".into(),
                used.iter().map(|&i| st.sizes[i].1 as f64).collect(),
            ),
        ],
        ..Default::default()
    };
    stack(&[times.to_svg(), sizes.to_svg()])
}
