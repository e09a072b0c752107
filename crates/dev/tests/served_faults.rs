//! A served pool (`SharedPool`, what `raidforge serve` runs) meeting members that die under it
//! (issue 21): what its writes and flushes answer when the data is lost, and that every member
//! whose flush fails is failed. The served fault-injection harness (`dev::faultsim_served`,
//! tests/faultsim_served.rs) finds such things at random; these pin the cases found.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use dev::pool::{CreateOpts, Pool};
use dev::serve_support::{Concurrency, SharedPool};
use dev::{Faulty, Member};
use layout::{Params, SchemeKind};

struct Dir(PathBuf);
impl Dir {
    fn new(tag: &str) -> Dir {
        let d = std::env::temp_dir().join(format!("rf-served-faults-{tag}-{}", std::process::id()));
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

fn create(dir: &Path, kind: SchemeKind, n: usize) -> Pool {
    Pool::create(
        &dir.join("pool.json"),
        CreateOpts {
            scheme: kind,
            params: Params {
                disks: Some(n),
                ..Params::default()
            },
            members: (0..n).map(|i| dir.join(format!("m{i}.img"))).collect(),
            size_bytes: Some(4 << 20),
            chunk_bytes: 16 << 10,
            emulate: None,
            force: false,
            direct: false,
            parity: Default::default(),
            bpgl_capacity: None,
            checksums: false,
            write_hole: Default::default(),
            journal_bytes: None,
            metadata: Default::default(),
        },
    )
    .unwrap()
}

/// Wraps member `i` so that the test can make it die later.
fn dying(pool: &mut Pool, i: usize) -> Arc<Faulty<Arc<dyn Member>>> {
    let mut kept = None;
    pool.wrap_member(i, |inner| {
        let f = Arc::new(Faulty::new(inner));
        kept = Some(Arc::clone(&f));
        f as Arc<dyn Member>
    });
    kept.expect("member present")
}

fn failed(sp: &SharedPool) -> Vec<u32> {
    sp.status().unwrap().failed
}

/// Issue 21, defect 3: RAID5 of 3 with member 0 failed; member 1 dies under a served write.
/// The write used to be acknowledged (its member writes failed, the member was failed, and
/// the request returned Ok) and later flushes succeeded, though nothing held the data any
/// more. Now the write and every later flush fail.
#[test]
fn a_served_write_beyond_the_tolerance_fails_and_so_do_later_flushes() {
    let d = Dir::new("beyond");
    let mut pool = create(&d.0, SchemeKind::Raid5, 3);
    pool.fail(0).unwrap();
    let m1 = dying(&mut pool, 1);
    let sp = SharedPool::new(pool, Concurrency::Stripes).unwrap();
    sp.write(0, &vec![0x11u8; 256 << 10]).unwrap();
    sp.flush().unwrap();
    m1.faults.fail_stop.store(true, Ordering::SeqCst);
    let w = sp.write(0, &vec![0xccu8; 2 << 20]);
    assert!(
        w.is_err(),
        "a write whose data no member holds was acknowledged"
    );
    assert_eq!(failed(&sp), vec![0, 1]);
    assert!(
        sp.flush().is_err(),
        "a flush after the data was lost succeeded"
    );
    assert!(sp.flush().is_err(), "a second flush succeeded");
    let mut buf = vec![0u8; 4096];
    assert!(sp.read(0, &mut buf).is_err());
}

/// A member whose next flush fails once, as Linux reports a failed writeback to the first
/// fsync after it and then forgets it (the data the failed writeback held are lost, and a
/// second fsync succeeds).
struct FsyncErrorOnce {
    inner: Arc<dyn Member>,
    armed: AtomicBool,
}

impl Member for FsyncErrorOnce {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        self.inner.read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> std::io::Result<()> {
        self.inner.write_at(buf, offset)
    }
    fn flush(&self) -> std::io::Result<()> {
        if self.armed.swap(false, Ordering::SeqCst) {
            return Err(std::io::Error::other(
                "injected: writeback failed (EIO once)",
            ));
        }
        self.inner.flush()
    }
    fn size_bytes(&self) -> u64 {
        self.inner.size_bytes()
    }
    fn describe(&self) -> String {
        self.inner.describe()
    }
}

fn fsync_error_once(pool: &mut Pool, i: usize) -> Arc<FsyncErrorOnce> {
    let mut kept = None;
    pool.wrap_member(i, |inner| {
        let f = Arc::new(FsyncErrorOnce {
            inner,
            armed: AtomicBool::new(false),
        });
        kept = Some(Arc::clone(&f));
        f as Arc<dyn Member>
    });
    kept.expect("member present")
}

/// Issue 21, item 5: two members whose flush fails at once (RAID6 of 5 survives both), each
/// reporting its error once, as Linux does. Only the first failure was failed; the others
/// were flushed again, and the second member's second fsync succeeded, so it stayed in the
/// pool with the writes its failed writeback lost, and the flush was acknowledged. Now every
/// member whose flush fails is failed, none is flushed twice, and the flush succeeds (the
/// pool survives two members).
#[test]
fn every_member_whose_flush_fails_is_failed_and_the_flush_succeeds_within_the_tolerance() {
    let d = Dir::new("two-flushes");
    let mut pool = create(&d.0, SchemeKind::Raid6, 5);
    let a = fsync_error_once(&mut pool, 1);
    let b = fsync_error_once(&mut pool, 3);
    let sp = SharedPool::new(pool, Concurrency::Stripes).unwrap();
    let data: Vec<u8> = (0..(192u32 << 10)).map(|i| (i % 251) as u8).collect();
    sp.write(0, &data).unwrap();
    a.armed.store(true, Ordering::SeqCst);
    b.armed.store(true, Ordering::SeqCst);
    sp.flush()
        .expect("RAID6 survives two members; the flush must succeed");
    assert_eq!(failed(&sp), vec![1, 3]);
    let mut back = vec![0u8; data.len()];
    sp.read(0, &mut back).unwrap();
    assert!(back == data, "data read back after two members died");
    sp.close().unwrap();
}

/// A three-way mirror whose last member dies under a served write: the write fails, and so
/// does every later write, since no member is left to hold anything.
#[test]
fn a_mirror_with_no_member_left_acknowledges_no_write() {
    let d = Dir::new("mirror-none");
    let mut pool = create(&d.0, SchemeKind::Raid1, 3);
    pool.fail(0).unwrap();
    pool.fail(1).unwrap();
    let m2 = dying(&mut pool, 2);
    let sp = SharedPool::new(pool, Concurrency::Stripes).unwrap();
    sp.write(0, &vec![0x11u8; 64 << 10]).unwrap();
    m2.faults.fail_stop.store(true, Ordering::SeqCst);
    let w = sp.write(0, &vec![0xccu8; 64 << 10]);
    assert!(
        w.is_err(),
        "a write whose data no member holds was acknowledged"
    );
    assert_eq!(failed(&sp), vec![0, 1, 2]);
    for at in [0u64, 1 << 20, 3 << 20] {
        let w = sp.write(at, &vec![0xddu8; 4096]);
        assert!(
            w.is_err(),
            "a write at {at} was acknowledged with every member failed"
        );
        let mut buf = vec![0u8; 4096];
        assert!(sp.read(at, &mut buf).is_err());
    }
}

/// A member whose writes at or past `from` wait at a gate until the test opens it.
struct Gated {
    inner: Arc<dyn Member>,
    from: u64,
    reached: std::sync::Mutex<bool>,
    open: std::sync::Mutex<bool>,
    cv: std::sync::Condvar,
}

impl Member for Gated {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        self.inner.read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> std::io::Result<()> {
        if offset >= self.from {
            *self.reached.lock().unwrap() = true;
            self.cv.notify_all();
            let mut open = self.open.lock().unwrap();
            while !*open {
                open = self.cv.wait(open).unwrap();
            }
        }
        self.inner.write_at(buf, offset)
    }
    fn flush(&self) -> std::io::Result<()> {
        self.inner.flush()
    }
    fn size_bytes(&self) -> u64 {
        self.inner.size_bytes()
    }
    fn describe(&self) -> String {
        self.inner.describe()
    }
}

/// Found by the served fault harness (seed 0x6b076807): a served write whose only copy's
/// member another request failed while the write ran was acknowledged (the write saw no
/// error of its own), though nothing held its data any more. RAID1 of 2 with member 1
/// failed: a write waits inside member 0 while the operator fails member 0, then completes.
#[test]
fn a_write_whose_member_another_request_failed_while_it_ran_fails() {
    let d = Dir::new("failed-under");
    let mut pool = create(&d.0, SchemeKind::Raid1, 2);
    pool.fail(1).unwrap();
    let data_at = pool.data_offset_bytes();
    let mut gate = None;
    pool.wrap_member(0, |inner| {
        let g = Arc::new(Gated {
            inner,
            from: data_at + (1 << 20),
            reached: std::sync::Mutex::new(false),
            open: std::sync::Mutex::new(false),
            cv: std::sync::Condvar::new(),
        });
        gate = Some(Arc::clone(&g));
        g as Arc<dyn Member>
    });
    let gate = gate.unwrap();
    let sp = Arc::new(SharedPool::new(pool, Concurrency::Stripes).unwrap());
    let writer = {
        let sp = Arc::clone(&sp);
        std::thread::spawn(move || sp.write(1 << 20, &vec![0x5au8; 4096]))
    };
    {
        let mut reached = gate.reached.lock().unwrap();
        while !*reached {
            reached = gate.cv.wait(reached).unwrap();
        }
    }
    // The write is inside member 0 now: fail it (the pool then holds nothing).
    let _ = sp.fail(0);
    assert_eq!(failed(&sp), vec![1, 0]);
    *gate.open.lock().unwrap() = true;
    gate.cv.notify_all();
    let w = writer.join().unwrap();
    assert!(
        w.is_err(),
        "a write was acknowledged though the only member it wrote to was failed while it ran"
    );
}
