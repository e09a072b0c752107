//! IDO and the other rebuild policies of seed 003 in the real engine: a served pool
//! (`SharedPool`) with a RAID1 surrogate pool, a skewed workload learned in normal state, a
//! member failure, a policy rebuild driven step by step (and in the background), and every
//! byte compared with a reference volume throughout, across restarts in the middle of the
//! rebuild and of the reclaim, and across a surrogate failure.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use dev::ido::{IdoStatus, RebuildPolicy};
use dev::pool::{CreateOpts, Pool, RebuildOpts};
use dev::serve_support::{Concurrency, PolicyStep, RebuildCursor, SharedPool};
use layout::{Params, SchemeKind, SplitMix64};

struct Dir(PathBuf);

impl Dir {
    fn new(tag: &str) -> Dir {
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

fn create(dir: &Path, name: &str, kind: SchemeKind, n: usize, size: u64) -> Pool {
    Pool::create(
        &dir.join(format!("{name}.json")),
        CreateOpts {
            scheme: kind,
            params: Params {
                disks: Some(n),
                ..Params::default()
            },
            members: (0..n).map(|i| dir.join(format!("{name}{i}.img"))).collect(),
            size_bytes: Some(size),
            chunk_bytes: 16 << 10,
            emulate: None,
            force: false,
            direct: false,
            parity: Default::default(),
            bpgl_capacity: None,
            checksums: false,
            write_hole: Default::default(),
            journal_bytes: None,
        },
    )
    .unwrap()
}

/// Zones of 384 KiB (two RAID5 cycles of 4 x 16 KiB chunks), 32 of them.
const ZONE: u64 = 384 << 10;
/// Zones that get 90 % of the requests.
const HOT: [u64; 3] = [26, 7, 19];

struct Rig {
    dir: Dir,
    reference: Vec<u8>,
    rng: SplitMix64,
    /// Reads compared so far.
    checked: u64,
}

impl Rig {
    fn main(&self) -> PathBuf {
        self.dir.0.join("main.json")
    }

    /// A RAID5 pool of four 5 MiB members with a 2-member RAID1 surrogate of 4 MiB (8 zone
    /// slots), filled with random data, then a skewed workload in normal state.
    fn new(tag: &str) -> (Rig, Arc<SharedPool>) {
        let dir = Dir::new(tag);
        drop(create(&dir.0, "sur", SchemeKind::Raid1, 2, 4 << 20).close());
        let mut p = create(&dir.0, "main", SchemeKind::Raid5, 4, 5 << 20);
        p.configure_ido(Some(ZONE), Some(&dir.0.join("sur.json")))
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
    fn workload(&mut self, sp: &SharedPool, n: usize) {
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
    fn check_all(&self, sp: &SharedPool) {
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
    fn fail_and_replace(&self, sp: &SharedPool) {
        sp.fail(2).unwrap();
        sp.replace(2, &self.dir.0.join("new2.img")).unwrap();
    }
}

fn ido_status(sp: &SharedPool) -> IdoStatus {
    sp.status().unwrap().ido.expect("status has an ido section")
}

fn opts() -> RebuildOpts {
    RebuildOpts {
        parallel_cycles: 1,
        ..RebuildOpts::default()
    }
}

/// Closes the served pool and opens it again from its descriptor (a restart).
fn restart(rig: &Rig, sp: Arc<SharedPool>) -> Arc<SharedPool> {
    sp.close().unwrap();
    drop(sp);
    reopen(rig)
}

/// Drops the served pool without closing it (nothing recorded beyond what each operation
/// recorded itself: a crash of the process, the page cache surviving) and opens it again.
fn crash(rig: &Rig, sp: Arc<SharedPool>) -> Arc<SharedPool> {
    drop(sp);
    reopen(rig)
}

fn reopen(rig: &Rig) -> Arc<SharedPool> {
    // The served pool's idle flusher may hold it for a moment after the drop.
    let mut tries = 0;
    let p = loop {
        match Pool::open(&rig.main()) {
            Ok(p) => break p,
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

#[test]
fn ido_hot_zones_first_redirected_reclaimed_across_restarts() {
    let (mut rig, mut sp) = Rig::new("ido");
    // Popularity was learned in normal state and survives a restart.
    let before = ido_status(&sp);
    assert_eq!(before.phase, "normal");
    let top: Vec<u64> = before.popular.iter().take(3).map(|&(z, _)| z).collect();
    let mut hot_sorted = HOT.to_vec();
    hot_sorted.sort();
    let mut top_sorted = top.clone();
    top_sorted.sort();
    assert_eq!(top_sorted, hot_sorted, "popular zones {:?}", before.popular);
    sp = restart(&rig, sp);
    assert_eq!(ido_status(&sp).popular, before.popular);

    rig.fail_and_replace(&sp);
    assert!(sp
        .begin_policy_rebuild(Some(RebuildPolicy::Ido), None)
        .unwrap());
    let s = ido_status(&sp);
    assert_eq!(s.policy, "ido");
    assert_eq!(s.phase, "rebuilding");
    let mut hot_first: Vec<u64> = s.hot_zones.iter().take(3).copied().collect();
    hot_first.sort();
    assert_eq!(hot_first, hot_sorted, "hot zones {:?}", s.hot_zones);

    let mut cur = RebuildCursor::new();
    let mut steps = 0;
    let mut restarted_rebuild = false;
    let mut restarted_reclaim = false;
    let mut max_migrated = 0;
    let mut saw_dmap = 0;
    loop {
        rig.workload(&sp, 12);
        let step = sp.policy_step(&opts(), &mut cur).unwrap();
        steps += 1;
        let s = ido_status(&sp);
        max_migrated = max_migrated.max(s.zones_migrated);
        saw_dmap = saw_dmap.max(s.dmap_entries);
        // The core's zone flags follow the seed's states: `11` = on the surrogate, `10` or
        // `11` = rebuilt.
        if s.phase == "rebuilding" {
            assert_eq!(s.zones_flag_migrated, s.zones_migrated, "{s:?}");
        }
        // (Before the restart only: after it, status counts zones rebuilt since the resume.)
        if s.phase == "rebuilding" && !restarted_rebuild {
            assert_eq!(
                s.zones_flag_rebuilt + s.zones_flag_migrated,
                s.zones_rebuilt,
                "{s:?}"
            );
        }
        if matches!(step, PolicyStep::Done) {
            break;
        }
        // The hot zones are rebuilt before any other (2 cycles each, one cycle per step).
        if !restarted_rebuild && s.zones_rebuilt >= 3 && s.zones_rebuilt < 6 {
            let n = s.hot_zones.len().min(s.rebuilt_order.len());
            assert_eq!(
                &s.rebuilt_order[..n],
                &s.hot_zones[..n],
                "rebuild order {:?}, hot {:?}",
                s.rebuilt_order,
                s.hot_zones
            );
        }
        if !restarted_rebuild && s.zones_rebuilt == 10 {
            // Restart in the middle of the rebuild: everything redirected so far is found
            // again, and the rebuild resumes with the recorded policy.
            restarted_rebuild = true;
            assert!(s.dmap_entries > 0 && s.zones_migrated >= 3, "{s:?}");
            sp = crash(&rig, sp);
            let again = ido_status(&sp);
            assert_eq!(again.phase, "rebuilding");
            assert_eq!(again.dmap_entries, s.dmap_entries);
            assert_eq!(again.zones_migrated, s.zones_migrated);
            assert_eq!(again.zones_flag_migrated, s.zones_flag_migrated);
            assert_eq!(again.epochs, s.epochs);
            rig.check_all(&sp);
            assert!(sp.begin_policy_rebuild(None, None).unwrap());
            cur = RebuildCursor::new();
        }
        if !restarted_reclaim && s.phase == "reclaiming" && s.reclaimed_zones == 1 {
            restarted_reclaim = true;
            assert!(s.reclaim_zones_left > 0, "{s:?}");
            sp = restart(&rig, sp);
            assert_eq!(ido_status(&sp).phase, "reclaiming");
            rig.check_all(&sp);
            assert!(sp.begin_policy_rebuild(None, None).unwrap());
            cur = RebuildCursor::new();
        }
        assert!(steps < 10_000, "the rebuild does not end");
    }
    assert!(restarted_rebuild && restarted_reclaim);
    let s = ido_status(&sp);
    assert_eq!(s.phase, "normal");
    assert_eq!(s.dmap_entries, 0, "{s:?}");
    assert_eq!(s.dmap_bytes, 0);
    assert_eq!(s.zones_rebuilt, 32);
    assert_eq!(
        s.zones_flag_migrated, 0,
        "reclaimed zones are no longer `11`: {s:?}"
    );
    assert!(
        max_migrated >= 3,
        "hot zones were migrated ({max_migrated})"
    );
    assert!(saw_dmap > 0);
    assert!(s.redirected_reads > 0 && s.redirected_writes > 0, "{s:?}");
    assert!(s.reclaimed_bytes > 0);
    assert_eq!(sp.status().unwrap().state, "clean");
    rig.check_all(&sp);
    let v = sp.verify().unwrap();
    assert!(v.inconsistent.is_empty(), "{:?}", v.inconsistent);
    assert!(rig.checked > 500);
    sp = restart(&rig, sp);
    rig.check_all(&sp);
    sp.close().unwrap();
}

/// The baselines: every byte right during and after the rebuild, the D-Map emptied.
fn policy_run(policy: RebuildPolicy) -> IdoStatus {
    let (mut rig, sp) = Rig::new(policy.name());
    rig.fail_and_replace(&sp);
    assert!(sp.begin_policy_rebuild(Some(policy), None).unwrap());
    let mut cur = RebuildCursor::new();
    let mut first = Vec::new();
    let mut max_dmap = 0;
    loop {
        rig.workload(&sp, 12);
        let step = sp.policy_step(&opts(), &mut cur).unwrap();
        let s = ido_status(&sp);
        max_dmap = max_dmap.max(s.dmap_entries);
        if first.is_empty() && !s.rebuilt_order.is_empty() {
            first = s.rebuilt_order.clone();
        }
        if matches!(step, PolicyStep::Done) {
            break;
        }
    }
    rig.check_all(&sp);
    let mut s = ido_status(&sp);
    assert_eq!(s.phase, "normal");
    assert_eq!(s.dmap_entries, 0);
    assert!(sp.verify().unwrap().inconsistent.is_empty());
    sp.close().unwrap();
    s.rebuilt_order = first;
    s.dmap_entries = max_dmap;
    s
}

#[test]
fn pr_rebuilds_in_address_order_without_redirection() {
    let s = policy_run(RebuildPolicy::Pr);
    assert_eq!(s.redirected_requests, 0);
    assert_eq!(s.rebuilt_order.first(), Some(&0));
}

#[test]
fn pro_rebuilds_popular_zones_first() {
    let s = policy_run(RebuildPolicy::Pro);
    assert!(HOT.contains(&s.rebuilt_order[0]), "{:?}", s.rebuilt_order);
    assert_eq!(s.redirected_requests, 0);
}

#[test]
fn workout_redirects_writes_and_popular_reads() {
    let s = policy_run(RebuildPolicy::Workout);
    assert!(s.redirected_writes > 0 && s.redirected_reads > 0, "{s:?}");
    assert!(s.dmap_entries > 0);
}

#[test]
fn vdf_caches_reads_and_redirects_writes() {
    let s = policy_run(RebuildPolicy::Vdf);
    assert!(s.redirected_writes > 0 && s.redirected_reads > 0, "{s:?}");
}

#[test]
fn surrogate_failure_during_an_ido_rebuild_loses_nothing() {
    let (mut rig, sp) = Rig::new("surfail");
    rig.fail_and_replace(&sp);
    assert!(sp
        .begin_policy_rebuild(Some(RebuildPolicy::Ido), None)
        .unwrap());
    let mut cur = RebuildCursor::new();
    let mut failed = false;
    loop {
        rig.workload(&sp, 12);
        let step = sp.policy_step(&opts(), &mut cur).unwrap();
        let s = ido_status(&sp);
        if !failed && s.zones_rebuilt == 8 {
            assert!(s.dmap_dirty_bytes > 0 && s.zones_migrated > 0, "{s:?}");
            // A surrogate member dies: the redirected data is copied home at the next
            // request, the surrogate dropped, the rebuild goes on as PR.
            sp.ido().fail_surrogate_member(0).unwrap();
            failed = true;
            rig.workload(&sp, 30);
            let s = ido_status(&sp);
            assert!(s.surrogate_state.starts_with("dropped"), "{s:?}");
            assert_eq!(s.dmap_entries, 0);
            rig.check_all(&sp);
        }
        if matches!(step, PolicyStep::Done) {
            break;
        }
    }
    assert!(failed);
    rig.check_all(&sp);
    let s = ido_status(&sp);
    assert_eq!(s.phase, "normal");
    assert_eq!(sp.status().unwrap().state, "clean");
    sp.close().unwrap();
}

/// The background rebuild thread with clients running beside it (the served path).
#[test]
fn ido_in_the_background_with_concurrent_clients() {
    let (mut rig, sp) = Rig::new("bg");
    rig.fail_and_replace(&sp);
    sp.start_rebuild_with(opts(), Some(RebuildPolicy::Ido), None)
        .unwrap();
    let mut rounds = 0;
    while sp.rebuild_info().running {
        rig.workload(&sp, 20);
        rounds += 1;
        assert!(rounds < 100_000);
    }
    let info = sp.rebuild_info();
    assert!(info.finished, "{info:?}");
    rig.check_all(&sp);
    let s = ido_status(&sp);
    assert_eq!(s.phase, "normal");
    assert_eq!(s.dmap_entries, 0);
    assert_eq!(sp.status().unwrap().state, "clean");
    sp.close().unwrap();
}
