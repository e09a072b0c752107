//! The RAID write hole, reproduced and closed.
//!
//! Without protection: write D2 and flush; write D1 of the same stripe and crash after the
//! data write but before the parity write; open again, fail D2's member, read D2: the bytes
//! come back wrong, and nothing says so (silent corruption of data the crash never touched).
//! With the write journal the same sequence returns D2 intact, and D1 reads either its old or
//! its new contents (new whenever the write had returned), at every crash point: every prefix
//! of the write's member writes, and every subset (and torn sector prefixes) of the writes
//! still unsynced when the crash came.
//!
//! Also: concurrent served writes (group commit) crashed at random points; a journal that
//! wraps its ring many times; the journal surviving the loss of a journal member.

use dev::crash::{Apply, CrashSim, PendingWrite};
use dev::pool::{test_opts, CreateOpts, Pool, WriteHole};
use dev::serve_support::{Concurrency, SharedPool};
use layout::SchemeKind;
use raidcore::{plan_read, plan_write, WritePolicy};
use std::path::{Path, PathBuf};

struct TempDir(PathBuf);
impl TempDir {
    fn new(name: &str) -> TempDir {
        let d = std::env::temp_dir().join(format!("rf-wh-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        TempDir(d)
    }
}
impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

const CHUNK: u64 = 4096;

fn create(dir: &Path, kind: SchemeKind, disks: usize, wh: WriteHole, data: u64) -> Pool {
    create_with(dir, kind, disks, wh, data, false)
}

fn create_with(
    dir: &Path,
    kind: SchemeKind,
    disks: usize,
    wh: WriteHole,
    data: u64,
    checksums: bool,
) -> Pool {
    Pool::create(
        &dir.join("pool.json"),
        CreateOpts {
            chunk_bytes: CHUNK,
            write_hole: wh,
            journal_bytes: Some(256 << 10),
            checksums,
            ..test_opts(kind, dir, disks, (2 << 20) + data)
        },
    )
    .unwrap()
}

fn members(dir: &Path, n: usize) -> Vec<PathBuf> {
    (0..n).map(|i| dir.join(format!("m{i}.img"))).collect()
}

fn pattern(seed: u64, n: usize) -> Vec<u8> {
    let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 24) as u8
        })
        .collect()
}

/// The member holding logical byte `off`.
fn member_of(pool: &Pool, off: u64) -> u32 {
    let plans = plan_read(pool.geometry(), pool.state(), off, 512).unwrap();
    plans[0].reads[0].member
}

#[derive(Debug, PartialEq, Eq, Clone, Copy)]
enum D1 {
    Old,
    New,
    /// Some sectors old, some new.
    SectorMix,
    /// A sector that is neither.
    Garbage,
}

fn classify(got: &[u8], old: &[u8], new: &[u8]) -> D1 {
    if got == old {
        return D1::Old;
    }
    if got == new {
        return D1::New;
    }
    let ok = got
        .chunks(512)
        .zip(old.chunks(512).zip(new.chunks(512)))
        .all(|(g, (o, n))| g == o || g == n);
    if ok {
        D1::SectorMix
    } else {
        D1::Garbage
    }
}

/// Every case, and who the update writes in place.
struct Matrix {
    cases: Vec<Case>,
    /// D1's member, the parity members the update writes, the data area's start.
    m1: u32,
    parity: Vec<u32>,
    data_off: u64,
    /// Member operations (writes and flushes) the update issues.
    total: u64,
}

impl Matrix {
    /// Whether `c` is the data-without-parity crash: D1's in-place write reached its member
    /// whole, no parity write did.
    fn data_only(&self, c: &Case) -> bool {
        let pf = || {
            c.pending
                .iter()
                .zip(&c.fates)
                .filter(|(w, _)| w.offset >= self.data_off)
        };
        pf().any(|(w, f)| w.member == self.m1 as usize && *f == Apply::Whole)
            && pf().any(|(w, _)| self.parity.contains(&(w.member as u32)))
            && pf()
                .filter(|(w, _)| self.parity.contains(&(w.member as u32)))
                .all(|(_, f)| *f == Apply::Skip)
    }
}

/// One crash case's result.
#[derive(Debug)]
struct Case {
    crash_after: u64,
    fates: Vec<Apply>,
    pending: Vec<PendingWrite>,
    acknowledged: bool,
    d2_intact: bool,
    d1: D1,
}

/// When D2's member (and the second one) fails: after the pool was opened again, or with the
/// crash, while it is down (then assembly finds the pool unclean and degraded).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Failure {
    AfterReopen,
    /// Assembly without the failed members; a refusal (an unclean pool that lacks members
    /// needs --force) is checked to write nothing, then the pool is opened with force.
    WhileDown,
}

/// Every crash point of "update D1 in D2's stripe" on `kind`, then fail D2's member (and,
/// with `second_failure`, one parity member the update writes) and read both.
fn crash_matrix(
    name: &str,
    kind: SchemeKind,
    disks: usize,
    wh: WriteHole,
    second_failure: bool,
) -> Matrix {
    crash_matrix_with(name, kind, disks, wh, second_failure, false)
}

/// [`crash_matrix`] with the members failing while the pool is down.
fn crash_matrix_down(name: &str, kind: SchemeKind, disks: usize, second_failure: bool) -> Matrix {
    crash_matrix_full(
        name,
        kind,
        disks,
        WriteHole::None,
        second_failure,
        false,
        Failure::WhileDown,
    )
}

/// [`crash_matrix`] on a pool with block checksums when `checksums` (the checksum pages are
/// more pending writes: with more than 6, the fates are every single write kept, every
/// single write lost, and each write torn with the others whole or lost, instead of every
/// subset).
fn crash_matrix_with(
    name: &str,
    kind: SchemeKind,
    disks: usize,
    wh: WriteHole,
    second_failure: bool,
    checksums: bool,
) -> Matrix {
    crash_matrix_full(
        name,
        kind,
        disks,
        wh,
        second_failure,
        checksums,
        Failure::AfterReopen,
    )
}

fn crash_matrix_full(
    name: &str,
    kind: SchemeKind,
    disks: usize,
    wh: WriteHole,
    second_failure: bool,
    checksums: bool,
    failure: Failure,
) -> Matrix {
    let tmp = TempDir::new(name);
    let dir = &tmp.0;
    let mut pool = create_with(dir, kind, disks, wh, 64 << 10, checksums);
    let (off1, off2) = (0u64, CHUNK);
    let len = CHUNK as usize;
    let data_off = pool.status().members[0].data_offset_bytes;
    let m1 = member_of(&pool, off1);
    let m2 = member_of(&pool, off2);
    assert_ne!(m1, m2, "D1 and D2 on different members");
    let w1 = plan_write(
        pool.geometry(),
        pool.state(),
        off1,
        len as u64,
        &WritePolicy::Md,
    )
    .unwrap();
    let w2 = plan_write(
        pool.geometry(),
        pool.state(),
        off2,
        len as u64,
        &WritePolicy::Md,
    )
    .unwrap();
    assert_eq!(w1[0].locks, w2[0].locks, "D1 and D2 in one stripe");
    let parity: Vec<u32> = w1[0]
        .writes
        .iter()
        .map(|w| w.member)
        .filter(|&m| m != m1)
        .collect();
    assert!(!parity.is_empty() && !parity.contains(&m2));
    let (d1_old, d1_new, d2) = (pattern(1, len), pattern(11, len), pattern(2, len));
    pool.write(off2, &d2).unwrap();
    pool.write(off1, &d1_old).unwrap();
    pool.close().unwrap();
    let paths = members(dir, disks);
    let pristine: Vec<Vec<u8>> = paths.iter().map(|p| std::fs::read(p).unwrap()).collect();
    let restore = || {
        for (p, b) in paths.iter().zip(&pristine) {
            std::fs::write(p, b).unwrap();
        }
    };
    // How many member writes the update issues.
    let total = {
        let mut p = Pool::open(&dir.join("pool.json")).unwrap();
        let sim = CrashSim::new();
        p.wrap_members(|i, m| sim.wrap(i, m));
        p.write(off1, &d1_new).unwrap();
        let n = sim.ops_issued();
        drop(p);
        sim.finish(|_| Apply::Skip).unwrap();
        n
    };
    assert!(total >= 2);
    let mut cases = Vec::new();
    for k in 0..=total {
        // Which pending writes there will be at this crash point: find out once.
        let run = |fate: &mut dyn FnMut(&PendingWrite) -> Apply| -> (Vec<PendingWrite>, bool) {
            restore();
            let mut p = Pool::open(&dir.join("pool.json")).unwrap();
            let sim = CrashSim::new();
            p.wrap_members(|i, m| sim.wrap(i, m));
            sim.crash_after_ops(k);
            p.write(off1, &d1_new).unwrap();
            let acknowledged = !sim.crashed();
            sim.crash();
            let pending = sim.pending();
            drop(p);
            sim.finish(fate).unwrap();
            (pending, acknowledged)
        };
        let (pending, _) = run(&mut |_| Apply::Skip);
        // Every subset of the pending writes, and each pending write torn to its first sector
        // with the others whole or lost.
        let p = pending.len();
        assert!(p <= 12, "{p} pending writes");
        let masks: Vec<u32> = if p <= 6 {
            (0..1u32 << p).collect()
        } else {
            let all = (1u32 << p) - 1;
            let mut v = vec![0, all];
            for i in 0..p {
                v.push(1 << i);
                v.push(all & !(1 << i));
            }
            v
        };
        let mut fate_sets: Vec<Vec<Apply>> = masks
            .iter()
            .map(|&mask| {
                (0..p)
                    .map(|i| {
                        if mask >> i & 1 == 1 {
                            Apply::Whole
                        } else {
                            Apply::Skip
                        }
                    })
                    .collect()
            })
            .collect();
        for t in 0..p {
            for &mask in &masks {
                let mut f: Vec<Apply> = (0..p)
                    .map(|i| {
                        if mask >> i & 1 == 1 {
                            Apply::Whole
                        } else {
                            Apply::Skip
                        }
                    })
                    .collect();
                f[t] = Apply::TornSectors(1);
                fate_sets.push(f);
            }
        }
        for fates in fate_sets {
            let (pend, acknowledged) = run(&mut |w| fates[w.order]);
            let mut gone = vec![m2];
            if second_failure {
                gone.push(parity[0]);
            }
            let mut pool = match failure {
                Failure::AfterReopen => {
                    let mut pool = Pool::open(&dir.join("pool.json")).unwrap();
                    for &m in &gone {
                        pool.fail(m as usize).unwrap();
                    }
                    pool
                }
                Failure::WhileDown => {
                    for &m in &gone {
                        std::fs::remove_file(&paths[m as usize]).unwrap();
                    }
                    let before: Vec<Vec<u8>> = paths
                        .iter()
                        .filter(|p| p.exists())
                        .map(|p| std::fs::read(p).unwrap())
                        .collect();
                    match Pool::open(&dir.join("pool.json")) {
                        // Clean: the crash came before the write marked its region.
                        Ok(p) => p,
                        Err(e) => {
                            assert!(
                                e.to_string().contains("--force"),
                                "the refusal says how to start it anyway: {e}"
                            );
                            let after: Vec<Vec<u8>> = paths
                                .iter()
                                .filter(|p| p.exists())
                                .map(|p| std::fs::read(p).unwrap())
                                .collect();
                            assert!(before == after, "a refused open wrote to the members");
                            Pool::open_forced(&dir.join("pool.json"), None).unwrap()
                        }
                    }
                }
            };
            let got2 = pool.read(off2, len as u64).unwrap();
            let got1 = pool.read(off1, len as u64).unwrap();
            drop(pool);
            cases.push(Case {
                crash_after: k,
                fates,
                pending: pend,
                acknowledged,
                d2_intact: got2 == d2,
                d1: classify(&got1, &d1_old, &d1_new),
            });
        }
    }
    let m = Matrix {
        cases,
        m1,
        parity,
        data_off,
        total,
    };
    assert!(
        m.cases.iter().any(|c| m.data_only(c)),
        "no case wrote D1 in place without its parity"
    );
    m
}

/// Without protection the data-without-parity crash returns wrong bytes for D2, silently
/// (the read succeeds); so does every crash that leaves D1's member changed and the parity not.
fn assert_hole_open(m: &Matrix, what: &str) {
    let mut seen = 0;
    for c in m.cases.iter().filter(|c| m.data_only(c)) {
        assert!(!c.d2_intact, "{what}: the write hole did not show at {c:?}");
        assert_eq!(c.d1, D1::New, "{what}: {c:?}");
        seen += 1;
    }
    assert!(seen > 0);
    // A crash that wrote nothing in place, or everything, leaves D2 intact.
    for c in &m.cases {
        let all = c.crash_after == m.total && c.fates.iter().all(|f| *f == Apply::Whole);
        if c.fates.iter().all(|f| *f == Apply::Skip) || all {
            assert!(c.d2_intact, "{what}: {c:?}");
        }
    }
}

fn assert_hole_closed(m: &Matrix, what: &str) {
    let cases = &m.cases;
    // Every member operation of the update was a crash point: the record's writes and
    // syncs on `copies` members and the in-place writes.
    assert!(
        m.total >= 4 + 1 + m.parity.len() as u64,
        "{} operations",
        m.total
    );
    for c in cases {
        assert!(c.d2_intact, "{what}: D2 corrupted at {c:?}");
        assert!(
            matches!(c.d1, D1::Old | D1::New),
            "{what}: D1 neither old nor new at {c:?}"
        );
        if c.acknowledged {
            assert_eq!(
                c.d1,
                D1::New,
                "{what}: an acknowledged write was lost at {c:?}"
            );
        }
    }
    assert!(cases.iter().any(|c| c.d1 == D1::Old) && cases.iter().any(|c| c.d1 == D1::New));
}

/// Without a journal, the write-intent bitmap's resync at open: every crash case, once the
/// pool is opened again, leaves D2's stripe consistent, so D2 survives its member failing. D1
/// holds what the crash left of it, sector by sector: no journal replays it, and a write that
/// returned but was not flushed may be lost to a power cut (only a flush promises more).
fn assert_resynced(m: &Matrix, what: &str) {
    for c in &m.cases {
        assert!(c.d2_intact, "{what}: D2 corrupted at {c:?}");
        assert!(
            c.d1 != D1::Garbage,
            "{what}: D1 holds bytes never written at {c:?}"
        );
    }
    assert!(m.cases.iter().any(|c| c.d1 == D1::New) && m.cases.iter().any(|c| c.d1 == D1::Old));
}

/// Issue 21, defect 4: the unclean-shutdown state was written but never read, so a crash
/// between a stripe's data and parity writes left it inconsistent for good, and a later
/// failure returned wrong bytes for data the crash never touched. Now the regions the
/// write-intent bitmap marked are resynchronised when the pool is opened again.
#[test]
fn wh_raid5_resync_at_open_closes_the_write_hole_without_a_journal() {
    let m = crash_matrix("r5-none", SchemeKind::Raid5, 4, WriteHole::None, false);
    assert_resynced(&m, "raid5 none");
}

/// The hole itself, where no resync can close it: the member fails with the crash (a dirty
/// and degraded pool, which a plain open refuses, writing nothing, and --force starts).
#[test]
fn wh_raid5_write_hole_without_protection_when_a_member_dies_with_the_crash() {
    let m = crash_matrix_down("r5-none-down", SchemeKind::Raid5, 4, false);
    assert_hole_open(&m, "raid5 none, member lost with the crash");
}

#[test]
fn wh_raid5_journal_closes_the_write_hole() {
    let m = crash_matrix(
        "r5-journal",
        SchemeKind::Raid5,
        4,
        WriteHole::Journal,
        false,
    );
    eprintln!(
        "raid5 journal: {} member operations, {} crash cases",
        m.total,
        m.cases.len()
    );
    assert_hole_closed(&m, "raid5 journal");
}

/// The journal and block checksums together: every crash point of the update, then D2's
/// member fails; D2 reads back intact (nothing reported lost: reads succeed), D1 old or new.
#[test]
fn wh_raid5_journal_with_checksums_closes_the_write_hole() {
    let m = crash_matrix_with(
        "r5-journal-csum",
        SchemeKind::Raid5,
        4,
        WriteHole::Journal,
        false,
        true,
    );
    eprintln!(
        "raid5 journal + checksums: {} member operations, {} crash cases",
        m.total,
        m.cases.len()
    );
    assert_hole_closed(&m, "raid5 journal + checksums");
}

#[test]
fn wh_raid6_two_failures_resync_at_open_closes_the_write_hole_without_a_journal() {
    let m = crash_matrix("r6-none", SchemeKind::Raid6, 4, WriteHole::None, true);
    assert_resynced(&m, "raid6 none");
}

#[test]
fn wh_raid6_two_failures_write_hole_without_protection_when_members_die_with_the_crash() {
    let m = crash_matrix_down("r6-none-down", SchemeKind::Raid6, 4, true);
    assert_hole_open(&m, "raid6 none, members lost with the crash");
}

#[test]
fn wh_raid6_two_failures_journal_closes_the_write_hole() {
    let m = crash_matrix("r6-journal", SchemeKind::Raid6, 4, WriteHole::Journal, true);
    eprintln!(
        "raid6 journal: {} member operations, {} crash cases",
        m.total,
        m.cases.len()
    );
    assert_hole_closed(&m, "raid6 journal");
}

/// SplitMix64, for the seeded tests below.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// What one 4 KiB block of the volume may read after a crash: the last value whose write
/// returned before the crash, or any value written after it.
#[derive(Clone, Default)]
struct BlockHistory {
    values: Vec<u64>,
    acked: Option<usize>,
}

impl BlockHistory {
    fn allowed(&self) -> Vec<u64> {
        match self.acked {
            Some(a) => self.values[a..].to_vec(),
            None => std::iter::once(0)
                .chain(self.values.iter().copied())
                .collect(),
        }
    }
}

fn block(value: u64) -> Vec<u8> {
    if value == 0 {
        vec![0; 4096]
    } else {
        pattern(value, 4096)
    }
}

/// Checks every block of `hist` against `pool`; returns the value each block holds.
fn check_blocks(pool: &mut Pool, hist: &[BlockHistory], what: &str) -> Vec<u64> {
    let mut values = Vec::new();
    for (b, h) in hist.iter().enumerate() {
        let got = pool.read(b as u64 * 4096, 4096).unwrap();
        let found = h.allowed().into_iter().find(|&v| got == block(v));
        assert!(
            found.is_some(),
            "{what}: block {b} reads none of the values {:?} (acked {:?})",
            h.allowed(),
            h.acked
        );
        values.push(found.unwrap());
    }
    values
}

/// Served pools: threads write interleaved blocks (sharing stripes, so stripe locks order
/// them and their journal appends share syncs) until a crash at a random member operation;
/// after recovery every block holds its last acknowledged value (or a later one), every
/// stripe's parity agrees with its data, and that stays true with any one member failed.
#[test]
fn wh_served_writes_crash_at_random_points() {
    let tmp = TempDir::new("served");
    let dir = &tmp.0;
    const BLOCKS: usize = 48;
    const THREADS: usize = 4;
    let pool = create(dir, SchemeKind::Raid5, 4, WriteHole::Journal, 256 << 10);
    pool.close().unwrap();
    let paths = members(dir, 4);
    let mut rng = Rng(0x5eed);
    let mut commits_seen = 0u64;
    let mut current = vec![0u64; BLOCKS];
    for round in 0..8u64 {
        let mut pool = Pool::open(&dir.join("pool.json")).unwrap();
        // The state before this round: every block's current value is acknowledged.
        let mut hist: Vec<BlockHistory> = current
            .iter()
            .map(|&v| BlockHistory {
                values: vec![v],
                acked: Some(0),
            })
            .collect();
        let sim = CrashSim::new();
        pool.wrap_members(|i, m| sim.wrap(i, m));
        let sp = SharedPool::new(pool, Concurrency::Stripes).unwrap();
        sim.crash_after_ops(10 + rng.below(400));
        let results: Vec<Vec<(usize, u64, bool)>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..THREADS)
                .map(|t| {
                    let sp = &sp;
                    let sim = &sim;
                    let mut r = Rng(round * 100 + t as u64);
                    s.spawn(move || {
                        let mut log = Vec::new();
                        for i in 0..120u64 {
                            if sim.crashed() {
                                break;
                            }
                            let b = t + THREADS * r.below((BLOCKS / THREADS) as u64) as usize;
                            let v = round * 1000 + 1 + t as u64 * 200 + i;
                            sp.write(b as u64 * 4096, &block(v)).unwrap();
                            log.push((b, v, !sim.crashed()));
                        }
                        log
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        if let Some(st) = sp.status().unwrap().journal {
            commits_seen += st.commits;
        }
        sim.crash();
        let _ = sp.close();
        drop(sp);
        for log in &results {
            for &(b, v, acked) in log {
                hist[b].values.push(v);
                if acked {
                    hist[b].acked = Some(hist[b].values.len() - 1);
                }
            }
        }
        let mut fates = Rng(round ^ 0xfa7e);
        sim.finish(|_| match fates.below(3) {
            0 => Apply::Skip,
            1 => Apply::Whole,
            _ => Apply::TornSectors(1 + fates.below(7) as usize),
        })
        .unwrap();
        let mut pool = Pool::open(&dir.join("pool.json")).unwrap();
        current = check_blocks(&mut pool, &hist, &format!("round {round}"));
        let v = pool.verify().unwrap();
        assert!(
            v.inconsistent.is_empty(),
            "round {round}: {:?}",
            v.inconsistent
        );
        pool.close().unwrap();
        // Any one member failed: the same contents (parity agrees with the data).
        let victim = rng.below(4) as usize;
        let copy = dir.join("copy");
        let _ = std::fs::remove_dir_all(&copy);
        std::fs::create_dir_all(&copy).unwrap();
        let copies: Vec<PathBuf> = paths
            .iter()
            .enumerate()
            .filter(|&(i, _)| i != victim)
            .map(|(i, p)| {
                let to = copy.join(format!("m{i}.img"));
                std::fs::copy(p, &to).unwrap();
                to
            })
            .collect();
        let mut degraded = Pool::assemble(&copy.join("pool.json"), &copies, None).unwrap();
        check_blocks(
            &mut degraded,
            &hist,
            &format!("round {round}, member {victim} missing"),
        );
        drop(degraded);
    }
    assert!(commits_seen > 0);
}

/// A small journal wraps its ring many times (checkpoints free it); crashes at random points
/// of a long run of writes of every size still recover every acknowledged write.
#[test]
fn wh_ring_wraps_and_recovers() {
    let tmp = TempDir::new("wrap");
    let dir = &tmp.0;
    let mut pool = Pool::create(
        &dir.join("pool.json"),
        CreateOpts {
            chunk_bytes: CHUNK,
            write_hole: WriteHole::Journal,
            journal_bytes: Some(64 << 10),
            ..test_opts(SchemeKind::Raid6, dir, 5, (2 << 20) + (256 << 10))
        },
    )
    .unwrap();
    let cap = pool.capacity_bytes();
    let mut model = vec![0u8; cap as usize];
    let mut rng = Rng(7);
    let mut replayed_rounds = 0u64;
    for round in 0..6u64 {
        let sim = CrashSim::new();
        pool.wrap_members(|i, m| sim.wrap(i, m));
        sim.crash_after_ops(200 + rng.below(600));
        let mut last_ok = model.clone();
        let mut in_flight: Option<(u64, Vec<u8>)> = None;
        let mut writes = 0;
        while !sim.crashed() {
            let len = 512 * (1 + rng.below(40));
            let off = 512 * rng.below((cap - len) / 512);
            let data = pattern(rng.next(), len as usize);
            pool.write(off, &data).unwrap();
            writes += 1;
            if sim.crashed() {
                in_flight = Some((off, data));
            } else {
                last_ok[off as usize..(off + len) as usize].copy_from_slice(&data);
            }
        }
        let st = pool.status().journal.unwrap();
        assert!(
            st.checkpoints > 0,
            "round {round}: the ring never filled: {st:?}"
        );
        drop(pool);
        let mut fates = Rng(round);
        sim.finish(|_| match fates.below(3) {
            0 => Apply::Skip,
            1 => Apply::Whole,
            _ => Apply::TornSectors(1),
        })
        .unwrap();
        pool = Pool::open(&dir.join("pool.json")).unwrap();
        let got = pool.read(0, cap).unwrap();
        // Everything acknowledged is there; the write in flight at the crash is old or new
        // in every sector (a write larger than the journal's piece is several records).
        let (f_off, f_data) = in_flight.clone().unwrap_or((0, Vec::new()));
        let f = f_off as usize..f_off as usize + f_data.len();
        for (i, (g, o)) in got.chunks(512).zip(last_ok.chunks(512)).enumerate() {
            let at = i * 512;
            let new = f
                .contains(&at)
                .then(|| &f_data[at - f.start..at - f.start + 512]);
            assert!(
                g == o || new == Some(g),
                "round {round} after {writes} writes: sector at {at} is neither old nor new \
                 (in flight: {:?})",
                f
            );
        }
        model = got;
        let v = pool.verify().unwrap();
        assert!(
            v.inconsistent.is_empty(),
            "round {round}: {:?}",
            v.inconsistent
        );
        // A round may have nothing to replay: the crash can cut the journal write of the only
        // live record (the write in flight then reads old). Before the checkpoint `tail ==
        // ring` fix, recovery then fell back to an older checkpoint and replayed retired
        // records, which made every round look replayed.
        replayed_rounds += u64::from(pool.status().journal.unwrap().replayed_records > 0);
    }
    assert!(
        replayed_rounds >= 3,
        "{replayed_rounds} of 6 rounds replayed records"
    );
    let _ = model;
}

/// The journal is kept on two members: with the first one gone after a crash, the record on
/// the second is replayed (RAID5: D1 written in place, parity not, journal member 0 lost).
#[test]
fn wh_journal_survives_losing_a_journal_member() {
    let tmp = TempDir::new("jmember");
    let dir = &tmp.0;
    let mut pool = create(dir, SchemeKind::Raid5, 4, WriteHole::Journal, 64 << 10);
    let old = pattern(5, 8192);
    pool.write(0, &old).unwrap();
    pool.close().unwrap();
    let mut pool = Pool::open(&dir.join("pool.json")).unwrap();
    let sim = CrashSim::new();
    pool.wrap_members(|i, m| sim.wrap(i, m));
    let new = pattern(6, 8192);
    pool.write(0, &new).unwrap();
    drop(pool);
    // Only the first in-place write lands; the record is durable on members 0 and 1.
    let data_off = 2 << 20;
    let mut first = true;
    sim.finish(|w| {
        if w.offset >= data_off && first {
            first = false;
            Apply::Whole
        } else {
            Apply::Skip
        }
    })
    .unwrap();
    std::fs::remove_file(dir.join("m0.img")).unwrap();
    let mut pool = Pool::open(&dir.join("pool.json")).unwrap();
    assert_eq!(pool.status().failed, vec![0]);
    assert_eq!(pool.status().journal.unwrap().replayed_records, 1);
    assert_eq!(pool.read(0, 8192).unwrap(), new);
    assert_eq!(pool.read(8192, 8192).unwrap(), vec![0u8; 8192]);
}

/// A pool whose members carry version 2 superblocks (written before the journal existed)
/// opens and works without a journal, and is recorded as version 3 from then on.
#[test]
fn wh_version_2_pools_keep_working() {
    use raidcore::superblock::{crc32c, Superblock, SUPERBLOCK_BYTES, SUPERBLOCK_SLOTS};
    use std::os::unix::fs::FileExt;
    let tmp = TempDir::new("v2");
    let dir = &tmp.0;
    let mut pool = create(dir, SchemeKind::Raid5, 4, WriteHole::None, 64 << 10);
    let data = pattern(9, 40_000);
    pool.write(1000, &data).unwrap();
    pool.close().unwrap();
    for p in members(dir, 4) {
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&p)
            .unwrap();
        // Both superblock copies (the second one is written from the second generation on).
        for at in SUPERBLOCK_SLOTS {
            let mut b = vec![0u8; SUPERBLOCK_BYTES];
            f.read_exact_at(&mut b, at).unwrap();
            if Superblock::decode(&b).is_err() {
                continue;
            }
            assert_eq!(u32::from_le_bytes(b[8..12].try_into().unwrap()), 3);
            b[8..12].copy_from_slice(&2u32.to_le_bytes());
            let crc = crc32c(&b[..4092]);
            b[4092..].copy_from_slice(&crc.to_le_bytes());
            f.write_all_at(&b, at).unwrap();
            assert_eq!(Superblock::decode(&b).unwrap().features, 0);
        }
    }
    let mut pool = Pool::open(&dir.join("pool.json")).unwrap();
    assert_eq!(pool.write_hole(), WriteHole::None);
    assert!(pool.journal().is_none());
    assert_eq!(pool.read(1000, data.len() as u64).unwrap(), data);
    pool.write(0, &[7u8; 512]).unwrap();
    pool.close().unwrap();
    // The newest copy is version 3.
    let b = std::fs::read(dir.join("m0.img")).unwrap();
    let newest = SUPERBLOCK_SLOTS
        .iter()
        .filter_map(|&at| {
            let at = at as usize;
            let sb = &b[at..at + SUPERBLOCK_BYTES];
            Superblock::decode(sb)
                .ok()
                .map(|d| (d.generation, sb.to_vec()))
        })
        .max_by_key(|(g, _)| *g)
        .unwrap()
        .1;
    assert_eq!(u32::from_le_bytes(newest[8..12].try_into().unwrap()), 3);
    let mut pool = Pool::open(&dir.join("pool.json")).unwrap();
    assert_eq!(pool.read(0, 512).unwrap(), vec![7u8; 512]);
    assert!(pool.verify().unwrap().inconsistent.is_empty());
}

/// A member whose journal write fails is failed and left out of the journal (its records go
/// to the others); once it is replaced the journal uses it again, so that replacing members
/// within one session does not leave records on ever fewer members. Then a crash after a
/// write, and the failure of one of the members that held the record: the write still reads
/// back.
#[test]
fn wh_a_replaced_member_takes_journal_records_again() {
    let tmp = TempDir::new("jreplace");
    let dir = &tmp.0;
    let pool = create(dir, SchemeKind::Raid5, 4, WriteHole::Journal, 64 << 10);
    pool.close().unwrap();
    let mut pool = Pool::open(&dir.join("pool.json")).unwrap();
    pool.wrap_member(0, |inner| {
        let f = dev::Faulty::new(inner);
        // The journal region (from 1 MiB) refuses writes.
        f.faults
            .write_error_ranges
            .lock()
            .unwrap()
            .push((1 << 20, 2 << 20));
        std::sync::Arc::new(f) as std::sync::Arc<dyn dev::Member>
    });
    pool.write(0, &pattern(10, 8192)).unwrap();
    assert_eq!(pool.status().failed, vec![0]);
    assert_eq!(pool.journal().unwrap().avoided_members(), vec![0]);
    std::fs::remove_file(dir.join("m0.img")).unwrap();
    pool.replace(0, &dir.join("m0.img")).unwrap();
    assert!(
        pool.journal().unwrap().avoided_members().is_empty(),
        "the replacement is still avoided"
    );
    pool.rebuild(&dev::pool::RebuildOpts::default(), |_| {})
        .unwrap();
    pool.close().unwrap();
    // Records now go to members 0 and 1 (the first two present): crash after one write whose
    // in-place writes are all lost, then lose member 1.
    let mut pool = Pool::open(&dir.join("pool.json")).unwrap();
    let sim = CrashSim::new();
    pool.wrap_members(|i, m| sim.wrap(i, m));
    let new = pattern(11, 8192);
    pool.write(0, &new).unwrap();
    drop(pool);
    let data_off = 2 << 20;
    sim.finish(|w| {
        if w.offset >= data_off {
            Apply::Skip
        } else {
            Apply::Whole
        }
    })
    .unwrap();
    std::fs::remove_file(dir.join("m1.img")).unwrap();
    let mut pool = Pool::open(&dir.join("pool.json")).unwrap();
    assert_eq!(pool.status().failed, vec![1]);
    assert_eq!(pool.status().journal.unwrap().replayed_records, 1);
    assert_eq!(pool.read(0, 8192).unwrap(), new);
}

/// A member whose sectors in `bad` fail every read until a write covers them (a latent sector
/// error that a rewrite remaps).
struct BadSectors {
    inner: std::sync::Arc<dyn dev::Member>,
    bad: std::sync::Mutex<Vec<(u64, u64)>>,
}

impl dev::Member for BadSectors {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        let end = offset + buf.len() as u64;
        if self
            .bad
            .lock()
            .unwrap()
            .iter()
            .any(|&(s, e)| s < end && offset < e)
        {
            return Err(std::io::Error::other("injected latent sector error"));
        }
        self.inner.read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> std::io::Result<()> {
        self.inner.write_at(buf, offset)?;
        let end = offset + buf.len() as u64;
        self.bad
            .lock()
            .unwrap()
            .retain(|&(s, e)| !(offset <= s && e <= end));
        Ok(())
    }
    fn flush(&self) -> std::io::Result<()> {
        self.inner.flush()
    }
    fn size_bytes(&self) -> u64 {
        self.inner.size_bytes()
    }
    fn describe(&self) -> String {
        format!("bad sectors over {}", self.inner.describe())
    }
}

/// A repair in flight at a crash: a read meets a latent sector error, the redundancy's answer
/// is written over the bad sector, and the power fails before that write is durable, leaving
/// the sector torn (random bytes, as a disk may leave a sector it was writing). On a pool with
/// a journal the repair is a logged write like any other, replayed when the pool opens. It
/// was written in place only, so the torn sector stayed and its data read back wrong with
/// nothing to say so; with another member failed, every reconstruction that used it did too
/// (served fault harness, seed 0x6b081cc9: a lazy RAID6 with a journal).
#[test]
fn a_repair_torn_by_a_crash_is_replayed_from_the_journal() {
    use std::os::unix::fs::FileExt;
    use std::sync::Arc;
    for kind in [SchemeKind::Raid5, SchemeKind::Raid6] {
        let dir = TempDir::new(&format!("torn-repair-{kind:?}"));
        let pool = create(&dir.0, kind, 6, WriteHole::Journal, 1 << 20);
        let cap = pool.capacity_bytes();
        let mut pool = pool;
        let model = pattern(11, cap as usize);
        pool.write(0, &model).unwrap();
        pool.close().unwrap();
        // One data sector of the fifth chunk: where it is on its member.
        let off = 5 * CHUNK + 1024;
        let mut p = Pool::open(&dir.0.join("pool.json")).unwrap();
        let (victim, at) = {
            let plans = plan_read(p.geometry(), p.state(), off, 512).unwrap();
            let r = &plans[0].reads[0];
            (r.member as usize, p.data_offset_bytes() + r.offset_bytes)
        };
        let sim = CrashSim::new();
        // (The bad sector is outside the crash simulation: the repair's write remaps it at
        // once, and the crash then decides what reached the medium.)
        p.wrap_members(|i, m| {
            let m = sim.wrap(i, m);
            if i == victim {
                Arc::new(BadSectors {
                    inner: m,
                    bad: std::sync::Mutex::new(vec![(at, at + 512)]),
                })
            } else {
                m
            }
        });
        // The read is answered from the redundancy and the sector rewritten.
        let back = p.read(off - off % CHUNK, CHUNK).unwrap();
        let from = (off - off % CHUNK) as usize;
        assert!(
            back == model[from..from + CHUNK as usize],
            "{kind:?}: the repaired read"
        );
        let pending = sim.pending();
        assert!(
            pending
                .iter()
                .any(|w| w.member == victim && w.offset <= at && at < w.offset + w.len as u64),
            "{kind:?}: the repair's write is not durable yet: {pending:?}"
        );
        // The power fails: nothing pending reaches the members, and the sector under repair
        // holds random bytes.
        sim.crash();
        drop(p);
        sim.finish(|_| Apply::Skip).unwrap();
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(dir.0.join(format!("m{victim}.img")))
            .unwrap();
        f.write_all_at(&pattern(99, 512), at).unwrap();
        drop(f);
        // Opened again: every byte reads back, the stripe is consistent, and it still reads
        // back with the member beside the repaired one failed.
        let mut p = Pool::open(&dir.0.join("pool.json")).unwrap();
        let all = p.read(0, cap).unwrap();
        assert!(all == model, "{kind:?}: the volume after the crash");
        let v = p.verify().unwrap();
        assert!(v.inconsistent.is_empty(), "{kind:?}: {:?}", v.inconsistent);
        p.fail((victim + 1) % 6).unwrap();
        let all = p.read(0, cap).unwrap();
        assert!(
            all == model,
            "{kind:?}: the volume degraded after the crash"
        );
        p.close().unwrap();
    }
}
