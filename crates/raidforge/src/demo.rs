//! `raidforge demo`: the README's main job. Builds pools of emulated hard disks in a temporary
//! directory, fills them, fails a member of each, rebuilds them side by side with progress, checks
//! every byte, and prints the rebuild times with the speedups.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use clap::Args;
use dev::pool::{CreateOpts, Pool, RebuildOpts};
use layout::{Params, SchemeKind};

#[derive(Args, Debug)]
pub struct DemoArgs {
    /// Size of each member file (bigger is slower and steadier), e.g. 64M (M, MiB: 2^20
    /// bytes; MB: 10^6), as `raidforge create --member-size` takes it.
    #[arg(long, value_parser = crate::pool_cmd::parse_size, default_value = "48M")]
    pub member_size: u64,
    /// Emulated member speed during the rebuilds, KIND:BANDWIDTH:LATENCY as `raidforge create
    /// --emulate` takes it (MB/s: 10^6 bytes/s; M/s or MiB/s: 2^20).
    #[arg(long, default_value = "hdd:120MB/s:4ms")]
    pub emulate: String,
    /// Chunk (stripe unit) size; 64K, as `raidforge create` defaults to.
    #[arg(long, value_parser = crate::pool_cmd::parse_size, default_value = "64K")]
    pub chunk: u64,
    /// Keep the pools in this directory instead of a temporary one (it must not exist).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Print the results as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Deterministic test bytes: the content of logical byte `off` of a pool filled with `seed`.
pub fn fill_bytes(seed: u64, off: u64, out: &mut [u8]) {
    // SplitMix64 of (seed, 8-byte word index): any range can be regenerated to compare.
    let mix = |mut z: u64| {
        z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    };
    for (i, b) in out.iter_mut().enumerate() {
        let a = off + i as u64;
        *b = (mix(seed ^ (a / 8).wrapping_mul(0x1000_0000_01B3)) >> ((a % 8) * 8)) as u8;
    }
}

struct Case {
    name: &'static str,
    kind: SchemeKind,
    params: Params,
    /// Usable size to match (another case's capacity), or None for `member_size` members.
    match_capacity_of: Option<usize>,
    baseline: Option<usize>,
}

#[derive(serde::Serialize)]
struct Outcome {
    name: String,
    layout: String,
    members: usize,
    member_bytes: u64,
    usable_bytes: u64,
    rebuild_s: f64,
    rebuilt_bytes: u64,
    members_written: usize,
    speedup_vs: Option<String>,
    speedup: Option<f64>,
    verified_bytes: u64,
}

fn p(disks: usize) -> Params {
    Params {
        disks: Some(disks),
        ..Params::default()
    }
}

pub fn run(a: DemoArgs) -> anyhow::Result<()> {
    dev::Speed::parse(&a.emulate)?;
    let (dir, temp) = match &a.dir {
        Some(d) => {
            if d.exists() {
                anyhow::bail!("{} exists; give a new directory", d.display());
            }
            (d.clone(), false)
        }
        None => (
            std::env::temp_dir().join(format!("raidforge-demo-{}", std::process::id())),
            true,
        ),
    };
    std::fs::create_dir_all(&dir)?;
    let result = run_in(&a, &dir);
    if temp {
        let _ = std::fs::remove_dir_all(&dir);
    }
    result
}

fn run_in(a: &DemoArgs, dir: &Path) -> anyhow::Result<()> {
    let cases = vec![
        Case {
            name: "raid5 10+1",
            kind: SchemeKind::Raid5,
            params: Params { spares: 1, ..p(11) },
            match_capacity_of: None,
            baseline: None,
        },
        Case {
            name: "raidplus n=13 k=4",
            kind: SchemeKind::RaidPlus,
            params: Params {
                width: Some(4),
                ..p(13)
            },
            match_capacity_of: Some(0),
            baseline: Some(0),
        },
        Case {
            name: "raidplus n=31 k=7",
            kind: SchemeKind::RaidPlus,
            params: Params {
                width: Some(7),
                ..p(31)
            },
            match_capacity_of: Some(0),
            baseline: Some(0),
        },
        Case {
            name: "raid5 9+1",
            kind: SchemeKind::Raid5,
            params: Params { spares: 1, ..p(10) },
            match_capacity_of: None,
            baseline: None,
        },
        Case {
            name: "s2raid5 R=9 G=3 +1",
            kind: SchemeKind::S2Raid5,
            params: Params {
                group: Some(3),
                partitions: Some(3),
                spares: 1,
                ..p(10)
            },
            match_capacity_of: None,
            baseline: Some(3),
        },
    ];
    let quiet = a.json;
    let tty = std::io::stderr().is_terminal() && !quiet;
    let mut outcomes: Vec<Outcome> = Vec::new();
    for (ci, case) in cases.iter().enumerate() {
        let n = case.params.disks.unwrap();
        let pool_dir = dir.join(format!("pool{ci}"));
        std::fs::create_dir_all(&pool_dir)?;
        let members: Vec<PathBuf> = (0..n).map(|i| pool_dir.join(format!("m{i}.img"))).collect();
        // Member size: as given, or the smallest giving at least another case's capacity.
        let member_bytes = match case.match_capacity_of {
            None => a.member_size,
            Some(j) => {
                let want = outcomes[j].usable_bytes;
                let scheme = layout::build(case.kind, &case.params)?;
                let probe = raidcore::Geometry::new(scheme, a.chunk, a.chunk * 1024 * 1024)?;
                let per_cycle = probe.data_per_cycle() * a.chunk;
                let cycles = want.div_ceil(per_cycle);
                cycles * probe.stride_rows() * a.chunk
                    + raidcore::superblock::DEFAULT_DATA_OFFSET_BYTES
            }
        };
        let desc = pool_dir.join("pool.json");
        let mut pool = Pool::create(
            &desc,
            CreateOpts {
                size_bytes: Some(member_bytes),
                ..CreateOpts::new(case.kind, case.params.clone(), members.clone(), a.chunk)
            },
        )?;
        let usable = pool.capacity_bytes();
        if !quiet {
            eprintln!(
                "[{}] {} members of {} MiB, {} MiB usable: filling...",
                case.name,
                n,
                member_bytes >> 20,
                usable >> 20
            );
        }
        let seed = 0xD3_u64 + ci as u64;
        let piece = 4u64 << 20;
        let mut off = 0;
        let mut buf = vec![0u8; piece as usize];
        while off < usable {
            let len = piece.min(usable - off) as usize;
            fill_bytes(seed, off, &mut buf[..len]);
            pool.write(off, &buf[..len])?;
            off += len as u64;
        }
        // Fail the first member, then rebuild on emulated disks.
        pool.fail(0)?;
        pool.set_emulation(Some(a.emulate.clone()))?;
        let before: Vec<u64> = pool
            .status()
            .members
            .iter()
            .map(|m| m.write_bytes)
            .collect();
        let bar = tty.then(|| crate::pool_cmd::progress_bar(case.name, pool.geometry().cycles()));
        let r = pool.rebuild(
            &RebuildOpts {
                parallel_cycles: 8,
                speed_max_bytes_per_sec: None,
                ..RebuildOpts::default()
            },
            |pr| {
                if let Some(b) = &bar {
                    b.set_position(pr.cycles_done);
                    b.set_message(format!("{:.1} s", pr.elapsed_s));
                }
            },
        )?;
        if let Some(b) = bar {
            b.finish();
        } else if !quiet {
            eprintln!("[{}] rebuilt in {:.2} s", case.name, r.elapsed_s);
        }
        let after: Vec<u64> = pool
            .status()
            .members
            .iter()
            .map(|m| m.write_bytes)
            .collect();
        let members_written = before.iter().zip(&after).filter(|(b, a)| a > b).count();
        // Check every byte and every stripe, at full speed.
        pool.set_emulation(None)?;
        let mut verified = 0u64;
        let mut off = 0;
        let mut want = vec![0u8; piece as usize];
        while off < usable {
            let len = piece.min(usable - off);
            let got = pool.read(off, len)?;
            fill_bytes(seed, off, &mut want[..len as usize]);
            if got != want[..len as usize] {
                anyhow::bail!(
                    "[{}] data mismatch in bytes {off}..{}",
                    case.name,
                    off + len
                );
            }
            verified += len;
            off += len;
        }
        let v = pool.verify()?;
        if !v.inconsistent.is_empty() {
            anyhow::bail!(
                "[{}] {} inconsistent stripes after rebuild",
                case.name,
                v.inconsistent.len()
            );
        }
        let status = pool.status();
        pool.close()?;
        let baseline = case.baseline.map(|b| &outcomes[b]);
        outcomes.push(Outcome {
            name: case.name.into(),
            layout: status.layout,
            members: n,
            member_bytes,
            usable_bytes: usable,
            rebuild_s: r.elapsed_s,
            rebuilt_bytes: r.bytes_written,
            members_written,
            speedup_vs: baseline.map(|b| b.name.clone()),
            speedup: baseline.map(|b| b.rebuild_s / r.elapsed_s),
            verified_bytes: verified,
        });
    }
    if a.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({
                "emulate": a.emulate, "chunk_bytes": a.chunk, "pools": outcomes
            }))?
        );
        return Ok(());
    }
    println!();
    println!(
        "Rebuild of one failed member on emulated disks ({}), every byte verified afterwards:",
        a.emulate
    );
    println!(
        "{:<20} {:>8} {:>11} {:>10} {:>15} {:>10}",
        "pool", "members", "usable MiB", "rebuild s", "members written", "speedup"
    );
    for o in &outcomes {
        println!(
            "{:<20} {:>8} {:>11} {:>10.2} {:>15} {:>10}",
            o.name,
            o.members,
            o.usable_bytes >> 20,
            o.rebuild_s,
            o.members_written,
            match (&o.speedup, &o.speedup_vs) {
                (Some(s), Some(v)) => format!("{s:.2}x vs {v}"),
                _ => "baseline".into(),
            }
        );
    }
    Ok(())
}
