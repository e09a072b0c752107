//! The IDO test rig, shared by dev/tests/ido.rs and raidforge/tests/cli_ido.rs (included with
//! `#[path]`): a RAID5 main pool with a surrogate, a reference volume, a skewed workload
//! whose every read is compared, and restarts.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use dev::ido::{IdoStatus, RebuildPolicy};
use dev::pool::{test_opts, CreateOpts, Pool, RebuildOpts};
use dev::serve_support::{Concurrency, SharedPool};
use layout::{SchemeKind, SplitMix64};

pub struct Dir(pub PathBuf);

impl Dir {
    pub fn new(tag: &str) -> Dir {
        let p = std::env::temp_dir().join(format!("raidforge-ido-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        Dir(p)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub fn create(dir: &Path, name: &str, kind: SchemeKind, n: usize, size: u64) -> Pool {
    Pool::create(
        &dir.join(format!("{name}.json")),
        CreateOpts {
            members: (0..n).map(|i| dir.join(format!("{name}{i}.img"))).collect(),
            chunk_bytes: 16 << 10,
            ..test_opts(kind, dir, n, size)
        },
    )
    .unwrap()
}

/// Zones of 384 KiB (two RAID5 cycles of 4 x 16 KiB chunks), 32 of them.
pub const ZONE: u64 = 384 << 10;
/// Zones that get 90 % of the requests.
pub const HOT: [u64; 3] = [26, 7, 19];

pub struct Rig {
    pub dir: Dir,
    pub reference: Vec<u8>,
    pub rng: SplitMix64,
    /// Reads compared so far.
    pub checked: u64,
}

impl Rig {
    pub fn main(&self) -> PathBuf {
        self.dir.0.join("main.json")
    }

    /// A RAID5 pool of four 5 MiB members with a 2-member RAID1 surrogate of 4 MiB (8 zone
    /// slots), filled with random data, then a skewed workload in normal state.
    pub fn new(tag: &str) -> (Rig, Arc<SharedPool>) {
        Rig::with_surrogate(tag, |dir| dir.join("sur.json"))
    }

    /// The same with the surrogate `surrogate` names, given the rig's directory after
    /// `sur.json` was created there: its descriptor, or the NBD address of a process serving
    /// it.
    pub fn with_surrogate(
        tag: &str,
        surrogate: impl FnOnce(&Path) -> PathBuf,
    ) -> (Rig, Arc<SharedPool>) {
        let dir = Dir::new(tag);
        drop(create(&dir.0, "sur", SchemeKind::Raid1, 2, 4 << 20).close());
        let mut p = create(&dir.0, "main", SchemeKind::Raid5, 4, 5 << 20);
        p.configure_ido(Some(ZONE), Some(&surrogate(&dir.0)))
            .unwrap();
        assert_eq!(p.ido().zone_bytes(), ZONE);
        let cap = p.capacity_bytes() as usize;
        assert_eq!(cap as u64 / ZONE, 32);
        let sp = SharedPool::new(p, Concurrency::Stripes).unwrap();
        let mut rng = SplitMix64::new(0x1d0);
        let mut reference = vec![0u8; cap];
        for b in reference.iter_mut() {
            *b = rng.next_u64() as u8;
        }
        for at in (0..cap).step_by(1 << 20) {
            let end = (at + (1 << 20)).min(cap);
            sp.write(at as u64, &reference[at..end]).unwrap();
        }
        let mut rig = Rig {
            dir,
            reference,
            rng,
            checked: 0,
        };
        rig.workload(&sp, 600);
        (rig, sp)
    }

    /// `n` requests, 90 % of them to the hot zones, 70 % reads (each compared with the
    /// reference), sizes 4..64 KiB, some crossing zone boundaries.
    pub fn workload(&mut self, sp: &SharedPool, n: usize) {
        let cap = self.reference.len() as u64;
        for _ in 0..n {
            let zone = if self.rng.below(10) < 9 {
                HOT[self.rng.below(3)]
            } else {
                self.rng.below(32) as u64
            };
            let len = 4096 * (1 + self.rng.below(16)) as u64;
            let off =
                (zone * ZONE + 4096 * self.rng.below((ZONE / 4096) as usize) as u64).min(cap - len);
            if self.rng.below(10) < 7 {
                let mut buf = vec![0u8; len as usize];
                sp.read(off, &mut buf).unwrap();
                assert!(
                    buf == self.reference[off as usize..(off + len) as usize],
                    "read {off}+{len} (zone {}) differs from the reference",
                    off / ZONE
                );
                self.checked += 1;
            } else {
                let fill = self.rng.next_u64() as u8;
                let data: Vec<u8> = (0..len).map(|i| fill.wrapping_add(i as u8)).collect();
                sp.write(off, &data).unwrap();
                self.reference[off as usize..(off + len) as usize].copy_from_slice(&data);
            }
        }
    }

    /// Reads the whole pool and compares it.
    pub fn check_all(&self, sp: &SharedPool) {
        let cap = self.reference.len();
        for at in (0..cap).step_by(256 << 10) {
            let end = (at + (256 << 10)).min(cap);
            let mut buf = vec![0u8; end - at];
            sp.read(at as u64, &mut buf).unwrap();
            assert!(
                buf == self.reference[at..end],
                "bytes {at}..{end} differ from the reference"
            );
        }
    }

    /// Fails member 2 and puts a blank replacement in.
    pub fn fail_and_replace(&self, sp: &SharedPool) {
        sp.fail(2).unwrap();
        sp.replace(2, &self.dir.0.join("new2.img")).unwrap();
    }

    /// [`Rig::fail_and_replace`], then `policy`'s rebuild begun (not yet stepped).
    pub fn begin_policy(&self, sp: &SharedPool, policy: RebuildPolicy) {
        self.fail_and_replace(sp);
        assert!(sp.begin_policy_rebuild(Some(policy), None).unwrap());
    }
}

pub fn ido_status(sp: &SharedPool) -> IdoStatus {
    sp.status().unwrap().ido.expect("status has an ido section")
}

pub fn opts() -> RebuildOpts {
    RebuildOpts {
        parallel_cycles: 1,
        ..RebuildOpts::default()
    }
}

/// Closes the served pool and opens it again from its descriptor (a restart).
pub fn restart(rig: &Rig, sp: Arc<SharedPool>) -> Arc<SharedPool> {
    sp.close().unwrap();
    drop(sp);
    reopen(rig)
}

/// Drops the served pool without closing it (nothing recorded beyond what each operation
/// recorded itself: a crash of the process, the page cache surviving) and opens it again.
pub fn crash(rig: &Rig, sp: Arc<SharedPool>) -> Arc<SharedPool> {
    drop(sp);
    reopen(rig)
}

pub fn reopen(rig: &Rig) -> Arc<SharedPool> {
    // The served pool's idle flusher may hold it for a moment after the drop.
    let mut tries = 0;
    let p = loop {
        match Pool::open(&rig.main()) {
            Ok(p) => break p,
            // Dropped mid-rebuild with writes not yet flushed: unclean and lacking the member
            // being rebuilt, which a plain open refuses (as MD refuses a dirty degraded
            // array). These tests crash between requests (nothing in flight, the page cache
            // surviving), so the operator's --force is right here.
            Err(e) if e.to_string().contains("--force") => {
                break Pool::open_forced(&rig.main(), None).unwrap_or_else(|e| panic!("{e}"))
            }
            Err(e) if tries < 100 => {
                tries += 1;
                let _ = e;
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            Err(e) => panic!("reopening: {e}"),
        }
    };
    SharedPool::new(p, Concurrency::Stripes).unwrap()
}
