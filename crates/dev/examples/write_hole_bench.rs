//! What write-hole protection costs: 4 KiB random writes to a RAID5 pool (4 members) at queue
//! depth 1 (`Pool::write`) and 8 (eight threads on a served `SharedPool`), three ways, side by
//! side in one run:
//!
//! - `none`: no journal; a write returns once the members have it (page cache for files), so
//!   it is not durable until a flush;
//! - `none+flush`: no journal, every write followed by a flush of the members (what a client
//!   asking for durable writes, FUA or fsync per write, gets without a journal);
//! - `journal`: the write journal; a write returns durable (one synced journal record on two
//!   members, concurrent writes sharing a sync).
//!
//! ```sh
//! cargo run --release -p dev --example write_hole_bench -- [--seconds 5] [--dir /tmp]
//!     [--emulate ssd:500MB/s:0.1ms] [--size 256M]
//! ```
//! (`bench/write_hole.sh` runs it.) Prints IOPS per case and the ratios against `none` and
//! `none+flush`, measured in the same run on the same kind of members.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use dev::pool::{test_opts, CreateOpts, Pool, WriteHole};
use dev::serve_support::{Concurrency, SharedPool};
use layout::SchemeKind;

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

fn usage() -> ! {
    eprintln!(
        "usage: write_hole_bench [--seconds S] [--dir DIR] [--emulate KIND:BW:LAT] [--size BYTES]\n\
         4 KiB random writes to a RAID5 pool of 4 file members in DIR, without and with the \n\
         write journal, at queue depth 1 and 8; prints IOPS and ratios."
    );
    std::process::exit(2)
}

fn create(dir: &Path, wh: WriteHole, size: u64, emulate: Option<String>) -> Pool {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).unwrap();
    Pool::create(
        &dir.join("pool.json"),
        CreateOpts {
            emulate,
            force: true,
            write_hole: wh,
            ..test_opts(SchemeKind::Raid5, dir, 4, size)
        },
    )
    .unwrap_or_else(|e| {
        eprintln!("write_hole_bench: {e}");
        std::process::exit(2)
    })
}

/// IOPS of 4 KiB random writes for `secs` at queue depth `qd`.
fn run(
    dir: &Path,
    wh: WriteHole,
    flush: bool,
    qd: usize,
    secs: f64,
    size: u64,
    emu: &Option<String>,
) -> f64 {
    let pool = create(dir, wh, size, emu.clone());
    let blocks = pool.capacity_bytes() / 4096;
    let buf = vec![0xa5u8; 4096];
    let dur = Duration::from_secs_f64(secs);
    let sp = SharedPool::new(pool, Concurrency::Stripes).unwrap();
    let start = Instant::now();
    let total: u64 = std::thread::scope(|s| {
        let hs: Vec<_> = (0..qd)
            .map(|t| {
                let sp = &sp;
                let buf = &buf;
                s.spawn(move || {
                    let mut rng = Rng(t as u64 + 1);
                    let mut n = 0u64;
                    while start.elapsed() < dur {
                        let off = rng.next() % blocks * 4096;
                        sp.write(off, buf).unwrap();
                        if flush {
                            sp.flush().unwrap();
                        }
                        n += 1;
                    }
                    n
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).sum()
    });
    let el = start.elapsed().as_secs_f64();
    if wh == WriteHole::Journal {
        let st = sp.status().unwrap().journal.unwrap();
        eprintln!(
            "  journal qd{qd}: {} records in {} commits ({:.2} records per sync), {} checkpoints",
            st.records,
            st.commits,
            st.records as f64 / st.commits.max(1) as f64,
            st.checkpoints
        );
    }
    sp.close().unwrap();
    let _ = std::fs::remove_dir_all(dir);
    total as f64 / el
}

fn main() {
    let mut secs = 5.0;
    let mut dir = std::env::temp_dir();
    let mut emulate = None;
    let mut size: u64 = 256 << 20;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = || args.next().unwrap_or_else(|| usage());
        match a.as_str() {
            "--seconds" => secs = val().parse().unwrap_or_else(|_| usage()),
            "--dir" => dir = PathBuf::from(val()),
            "--emulate" => emulate = Some(val()),
            "--size" => size = val().parse().unwrap_or_else(|_| usage()),
            _ => usage(),
        }
    }
    let base = dir.join(format!("rf-write-hole-bench-{}", std::process::id()));
    println!(
        "4 KiB random writes, RAID5 4 x {} MiB file members in {}{}, {secs} s per case",
        size >> 20,
        dir.display(),
        emulate
            .as_ref()
            .map_or(String::new(), |e| format!(", emulated {e}"))
    );
    println!(
        "{:<6} {:>12} {:>12} {:>12} {:>14} {:>16}",
        "qd", "none", "none+flush", "journal", "journal/none", "journal/n+flush"
    );
    for qd in [1usize, 8] {
        let none = run(&base, WriteHole::None, false, qd, secs, size, &emulate);
        let nflush = run(&base, WriteHole::None, true, qd, secs, size, &emulate);
        let journal = run(&base, WriteHole::Journal, false, qd, secs, size, &emulate);
        println!(
            "{:<6} {:>12.0} {:>12.0} {:>12.0} {:>14.3} {:>16.3}",
            format!("qd{qd}"),
            none,
            nflush,
            journal,
            journal / none,
            journal / nflush
        );
    }
    let _ = std::fs::remove_dir_all(&base);
}
