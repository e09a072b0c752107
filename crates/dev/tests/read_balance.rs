//! A real pool reads mirrored chunks from every copy (issue 29): the executor's per-member
//! reads in flight and last read position go to `raidcore::plan_read_balanced`, as MD's
//! read_balance does. Concurrent served readers spread over RAID1's and RAID10's copies (the
//! status counters show it), a sequential reader stays on one copy, and a failed copy is
//! never read.

use std::path::PathBuf;
use std::sync::Arc;

use dev::pool::{test_opts, Pool};
use dev::serve_support::{Concurrency, SharedPool};
use layout::SchemeKind;

struct Dir(PathBuf);
impl Dir {
    fn new(tag: &str) -> Dir {
        let d = std::env::temp_dir().join(format!("rf-read-balance-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        Dir(d)
    }
}
impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A pool of `n` members emulating disks that take 1 ms per I/O (one at a time each), with
/// its first 4 MiB written.
fn pool(dir: &Dir, kind: SchemeKind, n: usize) -> Pool {
    let mut o = test_opts(kind, &dir.0, n, 8 << 20);
    o.emulate = Some("hdd:500MB/s:1ms".into());
    let mut p = Pool::create(&dir.0.join("pool.json"), o).unwrap();
    let data: Vec<u8> = (0..4u32 << 20).map(|i| (i * 7 + i / 4096) as u8).collect();
    p.write(0, &data).unwrap();
    p.sync().unwrap();
    p
}

fn member_reads(st: &dev::pool::Status) -> Vec<u64> {
    st.members.iter().map(|m| m.reads).collect()
}

#[test]
fn concurrent_served_readers_read_every_copy_alike() {
    for (kind, n) in [(SchemeKind::Raid1, 2), (SchemeKind::Raid10, 4)] {
        let dir = Dir::new(&format!("{kind:?}"));
        let p = pool(&dir, kind, n);
        let before = member_reads(&p.status());
        let sp = Arc::new(SharedPool::new(p, Concurrency::Stripes).unwrap());
        let threads: Vec<_> = (0..4u64)
            .map(|t| {
                let sp = Arc::clone(&sp);
                std::thread::spawn(move || {
                    let mut x = t * 0x9E37_79B9 + 1;
                    let mut buf = vec![0u8; 4096];
                    for _ in 0..150 {
                        x = x
                            .wrapping_mul(6364136223846793005)
                            .wrapping_add(1442695040888963407);
                        let off = (x >> 33) % 1024 * 4096;
                        sp.read(off, &mut buf).unwrap();
                        let want: Vec<u8> = (off as u32..off as u32 + 4096)
                            .map(|i| (i * 7 + i / 4096) as u8)
                            .collect();
                        assert_eq!(buf, want, "read at {off}");
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let after = member_reads(&sp.status().unwrap());
        let reads: Vec<u64> = after.iter().zip(&before).map(|(a, b)| a - b).collect();
        eprintln!("{kind:?}: reads per member {reads:?}");
        assert_eq!(reads.iter().sum::<u64>(), 600, "{kind:?}: {reads:?}");
        let mean = 600.0 / n as f64;
        assert!(
            reads
                .iter()
                .all(|&r| (r as f64 - mean).abs() <= 0.15 * mean),
            "{kind:?}: reads per member {reads:?}"
        );
        sp.close().unwrap();
    }
}

#[test]
fn a_sequential_reader_stays_on_one_copy_and_a_failed_copy_is_never_read() {
    let dir = Dir::new("seq");
    let mut p = pool(&dir, SchemeKind::Raid1, 2);
    let before = member_reads(&p.status());
    for i in 0..256u64 {
        p.read(i * 4096, 4096).unwrap();
    }
    let reads: Vec<u64> = member_reads(&p.status())
        .iter()
        .zip(&before)
        .map(|(a, b)| a - b)
        .collect();
    assert_eq!(reads.iter().filter(|&&r| r > 0).count(), 1, "{reads:?}");
    assert_eq!(reads.iter().sum::<u64>(), 256, "{reads:?}");
    // With the copy it was reading failed, the stream moves to the other and stays there.
    let on = reads.iter().position(|&r| r > 0).unwrap();
    p.fail(on).unwrap();
    let before = member_reads(&p.status());
    for i in 0..256u64 {
        p.read(i * 4096, 4096).unwrap();
    }
    let after = member_reads(&p.status());
    assert_eq!(after[on], before[on], "the failed copy was read");
    assert_eq!(after[1 - on] - before[1 - on], 256);
}
