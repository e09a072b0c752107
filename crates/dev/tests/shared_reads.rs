//! Reads that do not wait for reads (issue 29): a served pool's reads hold their stripes
//! shared (`raidcore::Plan::lock_mode`), so a read stuck in member I/O does not hold up another
//! read of its stripe, on a healthy array and on a degraded one (where one of them
//! reconstructs from parity); and a read that meets a block that reads wrong repairs it only
//! with its stripes held exclusively, never while another read of them is in flight.
//!
//! A member wrapper ([`Gate`]) holds the first read of its data area until the test opens
//! it, so the first reader sits in member I/O with its stripe locks held. Waits are bounded by
//! generous timeouts (a request that should not block but does fails the test instead of
//! hanging it); nothing here measures how long anything took.

use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use dev::pool::{test_opts, CreateOpts, Pool};
use dev::serve_support::{Concurrency, SharedPool};
use dev::Member;
use layout::{Params, SchemeKind};
use raidcore::{plan_read, Plan};

/// Long enough for anything that does not block to finish on a loaded machine.
const PATIENCE: Duration = Duration::from_secs(20);

const CHUNK: u64 = 16 << 10;

struct Dir(PathBuf);

impl Dir {
    fn new(tag: &str) -> Dir {
        let d = std::env::temp_dir().join(format!("rf-shared-reads-{tag}-{}", std::process::id()));
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

/// What a [`Gate`] has seen.
#[derive(Default)]
struct GateState {
    /// The next read of the data area is held (until `open`).
    armed: bool,
    open: bool,
    /// Reads that reached the gate, and those held there now.
    reached: usize,
    inside: usize,
}

/// A member whose first read of its data area (at or past `from`) once the gate is armed
/// waits until the gate opens.
struct Gate {
    inner: Arc<dyn Member>,
    from: u64,
    state: Mutex<GateState>,
    cv: Condvar,
}

impl Gate {
    fn wrap(inner: Arc<dyn Member>, from: u64) -> Arc<Gate> {
        Arc::new(Gate {
            inner,
            from,
            state: Mutex::new(GateState::default()),
            cv: Condvar::new(),
        })
    }

    fn arm(&self) {
        self.state.lock().unwrap().armed = true;
    }

    fn open(&self) {
        self.state.lock().unwrap().open = true;
        self.cv.notify_all();
    }

    fn inside(&self) -> usize {
        self.state.lock().unwrap().inside
    }

    /// Waits until a read reached the gate; false after [`PATIENCE`].
    fn wait_reached(&self) -> bool {
        let deadline = Instant::now() + PATIENCE;
        let mut s = self.state.lock().unwrap();
        while s.reached == 0 {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            s = self.cv.wait_timeout(s, left).unwrap().0;
        }
        true
    }
}

impl Member for Gate {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        if offset >= self.from {
            let mut s = self.state.lock().unwrap();
            // (The first read only: others pass, a repair's reads of this member too.)
            if s.armed && !s.open && s.reached == 0 {
                s.reached += 1;
                s.inside += 1;
                self.cv.notify_all();
                while !s.open {
                    s = self.cv.wait(s).unwrap();
                }
                s.inside -= 1;
            }
        }
        self.inner.read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> std::io::Result<()> {
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

/// Seeded bytes.
fn bytes(seed: u64, n: usize) -> Vec<u8> {
    let mut r = layout::SplitMix64::new(seed);
    (0..n).map(|_| r.next_u64() as u8).collect()
}

/// RAID5 over 4 members of 16 KiB chunks: stripe 0 of cycle 0 holds chunks 0, 1 and 2 on
/// members 0, 1 and 2, its parity on member 3 (the tests check it through the planner). The
/// stripe's three chunks are written with seeded bytes (returned).
fn raid5(dir: &Path, checksums: bool) -> (Pool, Vec<u8>) {
    let mut pool = Pool::create(
        &dir.join("pool.json"),
        CreateOpts {
            params: Params {
                disks: Some(4),
                ..Params::default()
            },
            chunk_bytes: CHUNK,
            checksums,
            ..test_opts(SchemeKind::Raid5, dir, 4, 3 << 20)
        },
    )
    .unwrap();
    let data = bytes(29, 3 * CHUNK as usize);
    pool.write(0, &data).unwrap();
    (pool, data)
}

/// The one plan of a 4 KiB read at `offset`.
fn read_plan(pool: &Pool, offset: u64) -> Plan {
    let mut p = plan_read(pool.geometry(), pool.state(), offset, 4096).unwrap();
    assert_eq!(p.len(), 1);
    p.pop().unwrap()
}

/// Reads 4 KiB at `offset` in a thread, sending the result.
fn read_in<'s>(
    s: &'s std::thread::Scope<'s, '_>,
    sp: &'s SharedPool,
    offset: u64,
) -> mpsc::Receiver<Result<Vec<u8>, String>> {
    let (tx, rx) = mpsc::channel();
    s.spawn(move || {
        let mut b = vec![0u8; 4096];
        let r = sp
            .read(offset, &mut b)
            .map(|()| b)
            .map_err(|e| e.to_string());
        let _ = tx.send(r);
    });
    rx
}

/// Reader A sits in member I/O (the gate) holding its stripe; reader B of the same stripe,
/// on other members, finishes meanwhile. With read locks exclusive, B would wait for A and
/// the test would fail after [`PATIENCE`] (checked by forcing `Plan::lock_mode` exclusive).
/// Healthy: A reads chunk 0 (member 0 gated), B chunk 1 (member 1). Degraded, member 2
/// failed: A reads chunk 2, reconstructed from members 0, 1 and 3 (member 3 gated), B chunk 0
/// (member 0).
#[test]
fn a_read_stuck_in_member_io_does_not_hold_up_a_read_of_its_stripe() {
    for degraded in [false, true] {
        let dir = Dir::new(if degraded { "degraded" } else { "healthy" });
        let (mut pool, data) = raid5(&dir.0, false);
        let (a_at, b_at, gated) = if degraded {
            pool.fail(2).unwrap();
            (2 * CHUNK, 0, 3)
        } else {
            (0, CHUNK, 0)
        };
        let (a, b) = (read_plan(&pool, a_at), read_plan(&pool, b_at));
        assert_eq!(a.locks, b.locks, "both read stripe 0");
        assert!(a.members().contains(&gated));
        assert!(!b.members().contains(&gated));
        if degraded {
            assert_eq!(a.members(), vec![0, 1, 3], "chunk 2 reconstructed");
        }
        let from = pool.data_offset_bytes();
        let mut gate = None;
        pool.wrap_member(gated as usize, |inner| {
            let g = Gate::wrap(inner, from);
            gate = Some(Arc::clone(&g));
            g as Arc<dyn Member>
        });
        let gate = gate.unwrap();
        let sp = SharedPool::new(pool, Concurrency::Stripes).unwrap();
        gate.arm();
        let (b_result, a_still_inside, a_result) = std::thread::scope(|s| {
            let a_rx = read_in(s, &sp, a_at);
            if !gate.wait_reached() {
                gate.open();
                panic!("reader A never reached the gated member");
            }
            let b_rx = read_in(s, &sp, b_at);
            let b_result = b_rx.recv_timeout(PATIENCE);
            let a_still_inside = gate.inside() == 1;
            gate.open();
            let a_result = a_rx.recv_timeout(PATIENCE);
            (b_result, a_still_inside, a_result)
        });
        let what = if degraded { "degraded" } else { "healthy" };
        let b_bytes = b_result
            .unwrap_or_else(|e| panic!("{what}: B waited for A, stuck in member I/O ({e})"))
            .unwrap();
        assert!(a_still_inside, "{what}: A left the gate before B finished");
        let a_bytes = a_result.expect("A finished once let go").unwrap();
        let at = |o: u64| &data[o as usize..o as usize + 4096];
        assert!(b_bytes == at(b_at), "{what}: B's bytes");
        assert!(a_bytes == at(a_at), "{what}: A's bytes");
        sp.close().unwrap();
    }
}

/// A member that records writes to its data area, and whether a read of the watched stripe
/// was in flight on `gate` at the time.
struct Watch {
    inner: Arc<dyn Member>,
    from: u64,
    gate: Arc<Gate>,
    reads: AtomicU64,
    writes: AtomicU64,
    wrote_beside_a_reader: AtomicBool,
}

impl Member for Watch {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        if offset >= self.from {
            self.reads.fetch_add(1, Ordering::SeqCst);
        }
        self.inner.read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> std::io::Result<()> {
        if offset >= self.from {
            self.writes.fetch_add(1, Ordering::SeqCst);
            if self.gate.inside() > 0 {
                self.wrote_beside_a_reader.store(true, Ordering::SeqCst);
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

/// A read meets a block of chunk 0 that fails its checksum while another read of the stripe
/// (chunk 1) sits in member I/O: the repair writes, so it waits for the stripe held
/// exclusively, and the block is rewritten only once the other read is out. Then both return
/// the right bytes and the block on disk is right again. (Repairing under the shared lock, as
/// the read did while reads were exclusive, writes member 0 beside the other reader, which
/// `Watch` records.)
#[test]
fn a_read_repairs_a_bad_block_only_with_its_stripe_to_itself() {
    let dir = Dir::new("repair");
    let (mut pool, data) = raid5(&dir.0, true);
    let (a, b) = (read_plan(&pool, 0), read_plan(&pool, CHUNK));
    assert_eq!(a.locks, b.locks, "both read stripe 0");
    assert_eq!((a.members(), b.members()), (vec![0], vec![1]));
    // Damage a byte of chunk 0 on member 0, behind the pool's back.
    let at = pool.data_offset_bytes() + a.reads[0].offset_bytes + 100;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(dir.0.join("m0.img"))
        .unwrap();
    let mut good = [0u8; 1];
    f.read_exact_at(&mut good, at).unwrap();
    f.write_all_at(&[good[0] ^ 0x5a], at).unwrap();
    let from = pool.data_offset_bytes();
    let mut gate = None;
    pool.wrap_member(1, |inner| {
        let g = Gate::wrap(inner, from);
        gate = Some(Arc::clone(&g));
        g as Arc<dyn Member>
    });
    let gate = gate.unwrap();
    let mut watch = None;
    pool.wrap_member(0, |inner| {
        let w = Arc::new(Watch {
            inner,
            from,
            gate: Arc::clone(&gate),
            reads: AtomicU64::new(0),
            writes: AtomicU64::new(0),
            wrote_beside_a_reader: AtomicBool::new(false),
        });
        watch = Some(Arc::clone(&w));
        w as Arc<dyn Member>
    });
    let watch = watch.unwrap();
    let sp = SharedPool::new(pool, Concurrency::Stripes).unwrap();
    gate.arm();
    let (a_done_early, a_result, b_result) = std::thread::scope(|s| {
        let b_rx = read_in(s, &sp, CHUNK);
        if !gate.wait_reached() {
            gate.open();
            panic!("reader B never reached the gated member");
        }
        let a_rx = read_in(s, &sp, 0);
        // A read member 0 and met the damage; give a repair that does not wait for the stripe
        // time to write (it must not).
        let deadline = Instant::now() + PATIENCE;
        while watch.reads.load(Ordering::SeqCst) == 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        std::thread::sleep(Duration::from_millis(300));
        let a_done_early = a_rx.try_recv().is_ok();
        gate.open();
        (
            a_done_early,
            a_rx.recv_timeout(PATIENCE),
            b_rx.recv_timeout(PATIENCE),
        )
    });
    assert!(
        watch.reads.load(Ordering::SeqCst) > 0,
        "A never read member 0"
    );
    assert!(
        !watch.wrote_beside_a_reader.load(Ordering::SeqCst),
        "the repair wrote member 0 while another read of the stripe was in flight"
    );
    assert!(
        !a_done_early,
        "A repaired and finished while B held the stripe"
    );
    let a_bytes = a_result.expect("A finished").unwrap();
    let b_bytes = b_result.expect("B finished").unwrap();
    assert!(a_bytes == data[..4096], "A's bytes");
    assert!(
        b_bytes == data[CHUNK as usize..CHUNK as usize + 4096],
        "B's bytes"
    );
    assert!(
        watch.writes.load(Ordering::SeqCst) > 0,
        "no repair was written"
    );
    let st = sp.status().unwrap();
    assert!(st.repairs.checksum_mismatches > 0 && st.repairs.repaired_blocks > 0);
    let mut now = [0u8; 1];
    f.read_exact_at(&mut now, at).unwrap();
    assert_eq!(now, good, "the damaged byte was rewritten");
    sp.close().unwrap();
}
