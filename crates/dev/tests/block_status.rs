//! A served pool's block status (`SharedPool::block_status`, what `raidforge serve` answers
//! to `NBD_CMD_BLOCK_STATUS`): every range it says reads as zeros does, on every layout tried,
//! healthy and degraded, in both concurrency modes; ranges written are data, including while
//! writes run; and where the pool cannot know (members behind fault injection, MD's member
//! view, a hole under a checksum that is not that of zeros), it says data.

use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use dev::pool::{test_opts, CreateOpts, Metadata, Pool};
use dev::serve_support::{Concurrency, SharedPool};
use dev::{Faulty, Member};
use layout::SchemeKind;

struct Dir(PathBuf);
impl Dir {
    fn new(tag: &str) -> Dir {
        let d = std::env::temp_dir().join(format!("rf-bstatus-{tag}-{}", std::process::id()));
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

const CHUNK: u64 = 16 << 10;

fn opts(dir: &Path, kind: SchemeKind, n: usize) -> CreateOpts {
    CreateOpts {
        chunk_bytes: CHUNK,
        ..test_opts(kind, dir, n, 4 << 20)
    }
}

fn pattern(seed: u64, n: usize) -> Vec<u8> {
    let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 32) as u8 | 1
        })
        .collect()
}

/// Block status of the whole pool (asking again after short answers), each run claimed zeros
/// read back and found zeros; returns (bytes claimed zeros, bytes said data).
fn check_claims(sp: &SharedPool) -> (u64, u64) {
    let cap = sp.capacity_bytes();
    let (mut zeros, mut data) = (0, 0);
    let mut at = 0;
    while at < cap {
        let runs = sp.block_status(at, cap - at).unwrap();
        assert!(!runs.is_empty() && runs.iter().all(|r| r.0 > 0), "{runs:?}");
        assert!(runs.iter().map(|r| r.0).sum::<u64>() <= cap - at);
        for (n, z) in runs {
            if z {
                let mut buf = vec![0xaau8; n as usize];
                sp.read(at, &mut buf).unwrap();
                assert!(
                    buf.iter().all(|&b| b == 0),
                    "{n} bytes at {at} said to read as zeros hold data"
                );
                zeros += n;
            } else {
                data += n;
            }
            at += n;
        }
    }
    (zeros, data)
}

/// The runs of `sp.block_status(offset, len)` say data over every byte of it.
fn all_data(sp: &SharedPool, offset: u64, len: u64) -> bool {
    let runs = sp.block_status(offset, len).unwrap();
    runs.iter().all(|r| !r.1) && runs.iter().map(|r| r.0).sum::<u64>() >= len
}

fn scenario(kind: SchemeKind, n: usize, width: Option<usize>, mode: Concurrency) {
    let dir = Dir::new(&format!("{}-{n}-{mode:?}", kind.name()));
    let mut o = opts(&dir.0, kind, n);
    o.params.width = width;
    let pool = Pool::create(&dir.0.join("pool.json"), o).unwrap();
    let sp = SharedPool::new(pool, mode).unwrap();
    let cap = sp.capacity_bytes();
    // Fresh members are sparse: the whole pool reads as zeros.
    assert_eq!(check_claims(&sp), (cap, 0), "{kind:?} fresh");
    // A few writes: data there (and on the rest of their stripes), zeros elsewhere.
    let writes = [(100u64, 5000usize), (cap / 2, 1), (cap - 3 * CHUNK, 40_000)];
    for (i, &(off, len)) in writes.iter().enumerate() {
        sp.write(off, &pattern(i as u64, len)).unwrap();
    }
    let (zeros, data) = check_claims(&sp);
    assert!(
        zeros > cap / 2 && data > 0,
        "{kind:?}: {zeros} zeros, {data} data"
    );
    for &(off, len) in &writes {
        assert!(
            all_data(&sp, off, len as u64),
            "{kind:?}: written {off}+{len}"
        );
    }
    // Zeros written are data (allocated), though they read as zeros.
    let z = cap / 4 / CHUNK * CHUNK;
    assert!(!all_data(&sp, z, CHUNK));
    sp.write_zeroes(z, CHUNK).unwrap();
    assert!(all_data(&sp, z, CHUNK));
    // Degraded: what still reads as zeros is found (whole cycles), and nothing else.
    sp.fail(1).unwrap();
    let (zeros2, _) = check_claims(&sp);
    assert!(zeros2 > 0, "{kind:?} degraded: no zeros found");
    for &(off, len) in &writes {
        assert!(all_data(&sp, off, len as u64));
    }
    sp.close().unwrap();
}

#[test]
fn raid5_reports_holes_healthy_and_degraded() {
    scenario(SchemeKind::Raid5, 4, None, Concurrency::Stripes);
    scenario(SchemeKind::Raid5, 4, None, Concurrency::Serial);
}

#[test]
fn raid6_raid1_raid10_report_holes() {
    scenario(SchemeKind::Raid6, 5, None, Concurrency::Stripes);
    scenario(SchemeKind::Raid1, 2, None, Concurrency::Stripes);
    scenario(SchemeKind::Raid10, 4, None, Concurrency::Stripes);
}

#[test]
fn rm2_and_raidplus_report_holes() {
    scenario(SchemeKind::Rm2, 6, None, Concurrency::Stripes);
    scenario(SchemeKind::RaidPlus, 5, Some(3), Concurrency::Stripes);
}

/// Writes land chunk after chunk while block status runs: a chunk whose write completed
/// before a block status began is never reported as zeros.
#[test]
fn completed_writes_are_data_while_writes_run() {
    let dir = Dir::new("race");
    let pool = Pool::create(&dir.0.join("pool.json"), opts(&dir.0, SchemeKind::Raid5, 4)).unwrap();
    let sp = SharedPool::new(pool, Concurrency::Stripes).unwrap();
    let chunks = sp.capacity_bytes() / CHUNK;
    let done = AtomicU64::new(0);
    let stop = AtomicBool::new(false);
    let looks = AtomicU64::new(0);
    std::thread::scope(|s| {
        s.spawn(|| {
            // Every other chunk, so that each stripe has chunks written and not.
            for k in (0..chunks).step_by(2) {
                sp.write(k * CHUNK, &pattern(k, CHUNK as usize)).unwrap();
                done.store(k + 1, Ordering::SeqCst);
            }
            stop.store(true, Ordering::SeqCst);
        });
        for _ in 0..2 {
            s.spawn(|| {
                while !stop.load(Ordering::SeqCst) {
                    let written = done.load(Ordering::SeqCst);
                    let runs = sp.block_status(0, sp.capacity_bytes()).unwrap();
                    let mut at = 0;
                    for (n, z) in runs {
                        if z {
                            assert!(
                                at >= written * CHUNK,
                                "{n} bytes at {at} said zeros after chunk {written} was written"
                            );
                        }
                        at += n;
                    }
                    looks.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
    });
    assert!(
        looks.load(Ordering::Relaxed) > 2,
        "block status did not run alongside"
    );
    let (zeros, data) = check_claims(&sp);
    assert_eq!((zeros, data), (0, sp.capacity_bytes()));
    sp.close().unwrap();
}

/// Members that are not plain files as far as reads go say nothing of holes: fault
/// injection in front of one member makes every stripe it holds data. Emulated speed passes
/// the member's holes on.
#[test]
fn wrapped_members() {
    let dir = Dir::new("wrapped");
    let mut pool =
        Pool::create(&dir.0.join("pool.json"), opts(&dir.0, SchemeKind::Raid5, 4)).unwrap();
    pool.wrap_member(0, |inner| Arc::new(Faulty::new(inner)) as Arc<dyn Member>);
    let sp = SharedPool::new(pool, Concurrency::Stripes).unwrap();
    assert_eq!(check_claims(&sp), (0, sp.capacity_bytes()));
    sp.close().unwrap();

    let dir = Dir::new("emulated");
    let pool = Pool::create(
        &dir.0.join("pool.json"),
        CreateOpts {
            emulate: Some("ssd:10GB/s:0ms".into()),
            ..opts(&dir.0, SchemeKind::Raid5, 4)
        },
    )
    .unwrap();
    let sp = SharedPool::new(pool, Concurrency::Stripes).unwrap();
    assert_eq!(check_claims(&sp), (sp.capacity_bytes(), 0));
    sp.close().unwrap();
}

/// An MD-format pool's members are views at MD's data offset: data everywhere.
#[test]
fn md_format_pools_report_data() {
    let dir = Dir::new("md");
    let pool = Pool::create(
        &dir.0.join("pool.json"),
        CreateOpts {
            metadata: Metadata::Md,
            size_bytes: Some(16 << 20),
            ..opts(&dir.0, SchemeKind::Raid5, 4)
        },
    )
    .unwrap();
    let sp = SharedPool::new(pool, Concurrency::Stripes).unwrap();
    assert_eq!(check_claims(&sp), (0, sp.capacity_bytes()));
    sp.close().unwrap();
}

/// Punches a hole over `[offset, end of file)` of `path`.
fn punch(path: &Path, offset: u64) {
    let f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    let len = f.metadata().unwrap().len() - offset;
    // SAFETY: fallocate on a descriptor open for the call; no memory involved.
    let r = unsafe {
        libc::fallocate(
            f.as_raw_fd(),
            libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
            offset as libc::off_t,
            len as libc::off_t,
        )
    };
    assert_eq!(
        r,
        0,
        "punching {}: {}",
        path.display(),
        std::io::Error::last_os_error()
    );
}

/// With checksums, a hole under a block whose stored checksum is not that of zeros is not
/// zeros: the data there was destroyed behind the pool's back, and a read reports it rather
/// than returning zeros.
#[test]
fn checksums_keep_punched_data_from_passing_as_zeros() {
    let dir = Dir::new("csum");
    let desc = dir.0.join("pool.json");
    let pool = Pool::create(
        &desc,
        CreateOpts {
            checksums: true,
            ..opts(&dir.0, SchemeKind::Raid5, 4)
        },
    )
    .unwrap();
    let sp = SharedPool::new(pool, Concurrency::Stripes).unwrap();
    let cap = sp.capacity_bytes();
    let stripe = 3 * CHUNK;
    sp.write(0, &pattern(1, stripe as usize)).unwrap();
    let (zeros, data) = check_claims(&sp);
    assert_eq!((zeros, data), (cap - stripe, stripe));
    let st = sp.status().unwrap();
    sp.close().unwrap();
    // Every member's data area becomes a hole.
    for m in &st.members {
        punch(&m.path, m.data_offset_bytes);
    }
    let sp = SharedPool::new(Pool::open(&desc).unwrap(), Concurrency::Stripes).unwrap();
    assert!(
        all_data(&sp, 0, stripe),
        "punched checksummed data reported as zeros"
    );
    let mut buf = vec![0u8; CHUNK as usize];
    assert!(
        sp.read(0, &mut buf).is_err(),
        "the punched data reads as an error"
    );
    let runs = sp.block_status(stripe, cap - stripe).unwrap();
    assert_eq!(runs, vec![(cap - stripe, true)]);
    sp.close().ok();
}
