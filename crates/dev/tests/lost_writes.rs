//! A member that drops writes silently (acknowledges them, keeps the old bytes: firmware
//! bugs, a cache lost with its power) losing the superblocks written to it. Found by the
//! served fault harness (seed 0x6b076a29): such a member fell two superblock generations
//! behind, and the pool then refused to open after a crash ("member 0 is stale"). Now every
//! superblock written is read back after the flush, written again if missing, and a member
//! that still does not hold it is failed (and the failure recorded).

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use dev::pool::{CreateOpts, Pool};
use dev::Member;
use layout::{Params, SchemeKind};

struct Dir(PathBuf);
impl Dir {
    fn new(tag: &str) -> Dir {
        let d = std::env::temp_dir().join(format!("rf-lost-writes-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        Dir(d)
    }
    fn pool(&self) -> PathBuf {
        self.0.join("pool.json")
    }
}
impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Drops its next `lose` writes (acknowledging them).
struct LosesWrites {
    inner: Arc<dyn Member>,
    lose: AtomicUsize,
}

impl Member for LosesWrites {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        self.inner.read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> std::io::Result<()> {
        let dropped = self
            .lose
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok();
        if dropped {
            return Ok(());
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

fn create(d: &Dir) {
    let n = 4;
    let opts = CreateOpts {
        size_bytes: Some(4 << 20),
        ..CreateOpts::new(
            SchemeKind::Raid5,
            Params {
                disks: Some(n),
                ..Params::default()
            },
            (0..n).map(|i| d.0.join(format!("m{i}.img"))).collect(),
            16 << 10,
        )
    };
    Pool::create(&d.pool(), opts).unwrap().close().unwrap();
}

/// Opens the pool with member 1 dropping its next `lose` writes, writes, and closes it.
fn session(d: &Dir, lose: usize, fill: u8) {
    let mut pool = Pool::open(&d.pool()).unwrap();
    pool.wrap_member(1, |inner| {
        Arc::new(LosesWrites {
            inner,
            lose: AtomicUsize::new(0),
        }) as Arc<dyn Member>
    });
    pool.write(0, &vec![fill; 64 << 10]).unwrap();
    // Armed now: the close's superblock update is what it loses.
    let mut armed = None;
    pool.wrap_member(1, |inner| {
        let m = Arc::new(LosesWrites {
            inner,
            lose: AtomicUsize::new(lose),
        });
        armed = Some(Arc::clone(&m));
        m as Arc<dyn Member>
    });
    pool.close().unwrap();
    let left = armed.expect("member 1 present").lose.load(Ordering::SeqCst);
    assert!(left < lose, "the close wrote nothing to member 1");
}

#[test]
fn superblock_writes_a_member_drops_are_written_again() {
    let d = Dir::new("again");
    create(&d);
    for round in 0..3u8 {
        session(&d, 1, round + 1);
    }
    let mut pool =
        Pool::open(&d.pool()).expect("the pool opens: every member holds its superblock");
    assert!(pool.state().failed().is_empty(), "no member was failed");
    let mut back = vec![0u8; 64 << 10];
    back.copy_from_slice(&pool.read(0, 64 << 10).unwrap());
    assert!(back.iter().all(|&b| b == 3));
}

#[test]
fn a_member_that_keeps_dropping_its_superblock_is_failed_not_left_stale() {
    let d = Dir::new("fail");
    create(&d);
    for round in 0..3u8 {
        if Pool::open(&d.pool())
            .map(|p| !p.state().failed().is_empty())
            .unwrap_or(false)
        {
            break;
        }
        session(&d, 1000, round + 1);
    }
    let pool = Pool::open(&d.pool()).expect("the pool opens degraded, not refused");
    assert_eq!(
        pool.state().failed(),
        &[1],
        "the member that lost its superblocks is failed"
    );
}
