//! Per-block checksums, scrub, and latent sector errors during a rebuild, on real files.
//!
//! Bytes are changed in member files behind the engine's back (the pool closed), then the
//! pool is reopened: a read returns the right bytes and repairs the block, `scrub` finds and
//! repairs what reads did not touch (naming member and offset), a second scrub finds nothing,
//! and beyond the redundancy the loss is reported and reads fail rather than return bad
//! bytes. Every read is compared with a reference copy of the volume.

use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use dev::pool::{test_opts, CreateOpts, Pool, PoolError, RebuildOpts, ScrubOpts, ScrubReport};
use dev::{Faulty, Member};
use layout::{Params, Role, SchemeKind};
use raidcore::{logical_offset, place_loc, ParityPolicy, PlaceId};

struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let shm = Path::new("/dev/shm");
        let base = if shm.is_dir() {
            shm.to_path_buf()
        } else {
            std::env::temp_dir()
        };
        let d = base.join(format!("raidforge-csum-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        TempDir(d)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("keeping {} for inspection", self.0.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

const CHUNK: u64 = 16 << 10;

fn params(n: usize, level: Option<u8>) -> Params {
    Params {
        disks: Some(n),
        level,
        ..Params::default()
    }
}

fn member_path(dir: &Path, i: usize) -> PathBuf {
    dir.join(format!("m{i}.img"))
}

/// A pool of `n` members of about 2 MiB each, filled with seeded bytes (returned).
fn filled(dir: &Path, kind: SchemeKind, p: Params, checksums: bool) -> (Pool, Vec<u8>) {
    let n = p.disks.unwrap();
    let mut pool = Pool::create(
        &dir.join("pool.json"),
        CreateOpts {
            params: p,
            chunk_bytes: CHUNK,
            checksums,
            ..test_opts(kind, dir, n, 3 << 20)
        },
    )
    .unwrap();
    let cap = pool.capacity_bytes() as usize;
    let mut rng = layout::SplitMix64::new(kind as u64 * 1000 + n as u64);
    let data: Vec<u8> = (0..cap).map(|_| rng.next_u64() as u8).collect();
    pool.write(0, &data).unwrap();
    (pool, data)
}

/// Member and member byte of byte `in_chunk` of place `p` of cycle `c`.
fn where_is(pool: &Pool, c: u64, p: PlaceId, in_chunk: u64) -> (usize, u64) {
    let (loc, valid) = place_loc(pool.geometry(), pool.state(), c, p);
    assert!(valid);
    (
        loc.disk as usize,
        pool.data_offset_bytes() + pool.geometry().member_offset(c, loc, in_chunk),
    )
}

/// The places of stripe `s` of cycle 0's layout with role `role`.
fn places_with(pool: &Pool, s: usize, role: Role) -> Vec<PlaceId> {
    let geo = pool.geometry();
    geo.stripe_places(s)
        .iter()
        .copied()
        .filter(|&p| geo.role(p) == role)
        .collect()
}

fn flip_byte(dir: &Path, member: usize, at: u64) -> u8 {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(member_path(dir, member))
        .unwrap();
    let mut b = [0u8; 1];
    f.read_exact_at(&mut b, at).unwrap();
    f.write_all_at(&[b[0] ^ 0x5a], at).unwrap();
    b[0]
}

fn byte_at(dir: &Path, member: usize, at: u64) -> u8 {
    let f = std::fs::File::open(member_path(dir, member)).unwrap();
    let mut b = [0u8; 1];
    f.read_exact_at(&mut b, at).unwrap();
    b[0]
}

fn scrub(pool: &mut Pool) -> ScrubReport {
    pool.scrub(&ScrubOpts::default(), |_| {}).unwrap()
}

fn assert_clean(r: &ScrubReport) {
    assert!(
        r.repaired.is_empty() && r.unrecoverable.is_empty() && r.parity_mismatches.is_empty(),
        "expected a clean scrub: {r:?}"
    );
    assert!(r.clean());
}

/// Flips a byte in each of `targets` (cycle, place) at in-chunk byte 4096 + 17, reopens, and
/// checks: a read of the whole volume returns the reference and repairs the blocks it read;
/// the file bytes are back; scrub repairs the rest, naming member and block; a second scrub is
/// clean.
fn flip_read_scrub(name: &str, kind: SchemeKind, p: Params, targets: &[(u64, Role, usize)]) {
    let d = TempDir::new(name);
    let (pool, data) = filled(&d.0, kind, p, true);
    let mut flipped = Vec::new();
    for &(c, role, s) in targets {
        let place = places_with(&pool, s, role)[0];
        let (m, at) = where_is(&pool, c, place, 4096 + 17);
        flipped.push((m, at, flip_byte(&d.0, m, at)));
    }
    pool.close().unwrap();
    let mut pool = Pool::open(&d.0.join("pool.json")).unwrap();
    assert_eq!(
        pool.read(0, data.len() as u64).unwrap(),
        data,
        "{name}: read"
    );
    let after_read = pool.status().repairs;
    let r = scrub(&mut pool);
    assert!(r.unrecoverable.is_empty(), "{name}: {r:?}");
    // Every flipped block was repaired by the read or by the scrub, which names it.
    let by_read = after_read.repaired_blocks as usize;
    assert_eq!(
        by_read + r.repaired.len(),
        flipped.len(),
        "{name}: repaired by read {after_read:?}, by scrub {:?}",
        r.repaired
    );
    for (m, at, orig) in &flipped {
        assert_eq!(
            byte_at(&d.0, *m, *at),
            *orig,
            "{name}: member {m} byte {at}"
        );
    }
    for rr in &r.repaired {
        assert!(
            flipped
                .iter()
                .any(|(m, at, _)| rr.member == *m && rr.offset == at / 4096 * 4096),
            "{name}: scrub repaired {rr:?}, not a flipped block"
        );
        assert_eq!((rr.length, rr.kind.as_str()), (4096, "checksum"));
    }
    let s = pool.status();
    assert_eq!(
        s.repairs.checksum_mismatches as usize,
        flipped.len(),
        "{name}"
    );
    assert!(s.lost.is_empty());
    assert_clean(&scrub(&mut pool));
    assert_eq!(pool.read(0, data.len() as u64).unwrap(), data);
    pool.close().unwrap();
}

#[test]
fn raid5_data_block_is_repaired_by_a_read() {
    flip_read_scrub(
        "r5data",
        SchemeKind::Raid5,
        params(4, None),
        &[(1, Role::Data, 0)],
    );
}

#[test]
fn raid5_parity_block_is_repaired_by_scrub() {
    let d = TempDir::new("r5p");
    let (pool, data) = filled(&d.0, SchemeKind::Raid5, params(4, None), true);
    let place = places_with(&pool, 0, Role::P)[0];
    let (m, at) = where_is(&pool, 2, place, 100);
    let orig = flip_byte(&d.0, m, at);
    pool.close().unwrap();
    let mut pool = Pool::open(&d.0.join("pool.json")).unwrap();
    // A healthy read does not touch parity: it returns the data and repairs nothing.
    assert_eq!(pool.read(0, data.len() as u64).unwrap(), data);
    assert_eq!(pool.status().repairs.repaired_blocks, 0);
    let r = scrub(&mut pool);
    assert_eq!(r.repaired.len(), 1, "{r:?}");
    assert_eq!(r.repaired[0].member, m);
    assert_eq!(r.repaired[0].offset, at / 4096 * 4096);
    assert!(r.parity_mismatches.is_empty() && r.unrecoverable.is_empty());
    assert_eq!(byte_at(&d.0, m, at), orig);
    assert_clean(&scrub(&mut pool));
    pool.close().unwrap();
}

#[test]
fn raid6_two_blocks_of_one_stripe_and_q() {
    // Data and P of one stripe (two erasures), and Q of another cycle.
    flip_read_scrub(
        "r6",
        SchemeKind::Raid6,
        params(5, None),
        &[(1, Role::Data, 0), (1, Role::P, 0), (3, Role::Q, 0)],
    );
}

#[test]
fn raid1_and_raid10_copies() {
    flip_read_scrub(
        "r1",
        SchemeKind::Raid1,
        params(2, None),
        &[(1, Role::Mirror, 0), (2, Role::Data, 0)],
    );
    flip_read_scrub(
        "r10",
        SchemeKind::Raid10,
        params(4, None),
        &[(1, Role::Mirror, 0), (2, Role::Data, 1)],
    );
}

/// Beyond the redundancy: the loss is reported by scrub (exit status 1 in the CLI), reads of
/// it fail naming the logical range, everything else reads right, nothing bad is returned.
#[test]
fn beyond_tolerance_is_reported_never_returned() {
    for (name, kind, p, roles) in [
        (
            "r5x2",
            SchemeKind::Raid5,
            params(4, None),
            vec![Role::Data, Role::P],
        ),
        (
            "r1x2",
            SchemeKind::Raid1,
            params(2, None),
            vec![Role::Data, Role::Mirror],
        ),
    ] {
        let d = TempDir::new(name);
        let (pool, data) = filled(&d.0, kind, p, true);
        let c = 1;
        let data_place = places_with(&pool, 0, Role::Data)[0];
        let lo = logical_offset(pool.geometry(), c, data_place, 8192).unwrap();
        for role in roles {
            let place = places_with(&pool, 0, role)[0];
            let (m, at) = where_is(&pool, c, place, 8192 + 5);
            flip_byte(&d.0, m, at);
        }
        pool.close().unwrap();
        let mut pool = Pool::open(&d.0.join("pool.json")).unwrap();
        match pool.read(lo, 4096) {
            Err(PoolError::Lost { ranges }) => {
                assert!(ranges
                    .iter()
                    .any(|r| r.logical_offset == lo && r.length == 4096));
            }
            other => panic!("{name}: read of a lost block returned {other:?}"),
        }
        let e = pool.read(0, data.len() as u64).unwrap_err().to_string();
        assert!(e.contains(&format!("{lo}..{}", lo + 4096)), "{name}: {e}");
        let r = scrub(&mut pool);
        assert!(!r.clean());
        assert!(
            r.unrecoverable
                .iter()
                .any(|u| u.logical_offset == lo && u.length == 4096),
            "{name}: {r:?}"
        );
        // Everything around the lost block reads right.
        assert_eq!(pool.read(0, lo).unwrap(), &data[..lo as usize]);
        let after = lo + 4096;
        assert_eq!(
            pool.read(after, data.len() as u64 - after).unwrap(),
            &data[after as usize..]
        );
        // Rewriting the lost block clears it.
        pool.write(lo, &data[lo as usize..after as usize]).unwrap();
        assert_eq!(pool.read(0, data.len() as u64).unwrap(), data);
        assert!(pool.status().lost.is_empty());
        assert_clean(&scrub(&mut pool));
        pool.close().unwrap();
    }
}

/// Without checksums scrub checks parity only: a changed data byte is a parity mismatch it can
/// report (MD's `check`) or fix by recomputing parity from the data (MD's `repair`), which then
/// keeps the changed byte: nothing tells which unit was wrong.
#[test]
fn without_checksums_parity_only() {
    let d = TempDir::new("nock");
    let (pool, data) = filled(&d.0, SchemeKind::Raid5, params(4, None), false);
    let place = places_with(&pool, 0, Role::Data)[0];
    let (m, at) = where_is(&pool, 1, place, 10);
    flip_byte(&d.0, m, at);
    pool.close().unwrap();
    let mut pool = Pool::open(&d.0.join("pool.json")).unwrap();
    let r = scrub(&mut pool);
    assert!(!r.checksums);
    assert_eq!(r.parity_mismatches.len(), 1, "{r:?}");
    assert!(!r.parity_mismatches[0].repaired && !r.clean());
    let r = pool
        .scrub(
            &ScrubOpts {
                rewrite_parity: true,
                ..ScrubOpts::default()
            },
            |_| {},
        )
        .unwrap();
    assert!(r.parity_mismatches[0].repaired && r.clean(), "{r:?}");
    assert_eq!(r.repaired[0].kind, "parity");
    assert!(pool.verify().unwrap().inconsistent.is_empty());
    let got = pool.read(0, data.len() as u64).unwrap();
    assert_ne!(
        got, data,
        "the changed byte stays (parity follows the data)"
    );
    pool.close().unwrap();
}

/// Member `m`'s 4 KiB at member byte `at` fail to read until rewritten (a latent sector
/// error a rewrite remaps).
fn latent_error(pool: &mut Pool, m: usize, at: u64) {
    latent_errors(pool, m, &[(at, at + 4096)], true);
}

/// Member `m`'s byte ranges `ranges` fail to read; with `remap`, until a write covers one
/// whole (as a disk remaps a bad sector when it is rewritten).
fn latent_errors(pool: &mut Pool, m: usize, ranges: &[(u64, u64)], remap: bool) {
    pool.wrap_member(m, |inner| {
        let f = Faulty::new(inner);
        f.faults
            .read_error_ranges
            .lock()
            .unwrap()
            .extend_from_slice(ranges);
        f.faults.remap_on_write.store(remap, Ordering::SeqCst);
        Arc::new(f) as Arc<dyn Member>
    });
}

/// The pool's lost ranges, `(logical offset, length)`, as `status` lists them.
fn lost_ranges(pool: &Pool) -> Vec<(u64, u64)> {
    pool.status()
        .lost
        .iter()
        .map(|l| (l.logical_offset, l.length))
        .collect()
}

/// Every byte outside the pool's lost ranges reads as `data`.
fn assert_reads_outside_lost(pool: &mut Pool, data: &[u8]) {
    let mut lost: Vec<(u64, u64)> = lost_ranges(pool)
        .into_iter()
        .map(|(a, n)| (a, a + n))
        .collect();
    lost.sort();
    let mut at = 0u64;
    for (a, b) in lost
        .into_iter()
        .chain([(data.len() as u64, data.len() as u64)])
    {
        if a > at {
            assert_eq!(
                pool.read(at, a - at).unwrap(),
                &data[at as usize..a as usize],
                "bytes {at}..{a}"
            );
        }
        at = at.max(b);
    }
}

/// A latent sector error on a survivor during a rebuild: `range` (member bytes) of member
/// `bad_member` fails to read until rewritten.
fn rebuild_with_lse(
    dir: &Path,
    kind: SchemeKind,
    p: Params,
    checksums: bool,
) -> (Pool, Vec<u8>, u64) {
    let (mut pool, data) = filled(dir, kind, p, checksums);
    pool.fail(0).unwrap();
    pool.replace(0, &dir.join("new0.img")).unwrap();
    // The first data unit on a survivor of a stripe of cycle 2 (or the last) that lost a unit with member 0:
    // the rebuild reads it (reconstruction reads data first).
    let geo = pool.geometry().clone();
    let c = 2.min(geo.cycles() - 1);
    let disk = |q: PlaceId| place_loc(&geo, pool.state(), c, q).0.disk;
    let place = (0..geo.healthy().stripes.len())
        .find_map(|s| {
            let ps = geo.stripe_places(s);
            if !ps.iter().any(|&q| disk(q) == 0) {
                return None;
            }
            ps.iter()
                .copied()
                .find(|&q| disk(q) != 0 && geo.role(q) == Role::Data)
        })
        .unwrap();
    let (m, at) = where_is(&pool, c, place, 8192);
    let lo = logical_offset(&geo, c, place, 8192).unwrap();
    latent_error(&mut pool, m, at);
    pool.rebuild(&RebuildOpts::default(), |_| {}).unwrap();
    (pool, data, lo)
}

#[test]
fn latent_error_in_rebuild_is_repaired_where_redundancy_remains() {
    for (name, kind, p) in [
        ("lse-r6", SchemeKind::Raid6, params(5, None)),
        ("lse-rm2", SchemeKind::Rm2, params(6, None)),
        (
            "lse-raidplus6",
            SchemeKind::RaidPlus,
            Params {
                width: Some(4),
                ..params(7, Some(6))
            },
        ),
    ] {
        for checksums in [false, true] {
            let d = TempDir::new(&format!("{name}-{checksums}"));
            let (mut pool, data, _) = rebuild_with_lse(&d.0, kind, p.clone(), checksums);
            let s = pool.status();
            assert_eq!(s.state, "clean", "{name}");
            assert!(s.lost.is_empty(), "{name}: {:?}", s.lost);
            assert!(s.repairs.read_errors >= 1 && s.repairs.repaired_blocks >= 1);
            assert_eq!(pool.read(0, data.len() as u64).unwrap(), data, "{name}");
            assert!(pool.verify().unwrap().inconsistent.is_empty(), "{name}");
            if checksums {
                assert_clean(&scrub(&mut pool));
            }
            pool.close().unwrap();
        }
    }
}

#[test]
fn latent_error_in_raid5_rebuild_is_reported_lost() {
    for checksums in [false, true] {
        let d = TempDir::new(&format!("lse-r5-{checksums}"));
        let (mut pool, data, lo) =
            rebuild_with_lse(&d.0, SchemeKind::Raid5, params(4, None), checksums);
        let s = pool.status();
        // The rebuild went on to the end and names what it lost.
        assert_eq!(s.cycles_clean, s.cycles);
        assert!(
            s.lost
                .iter()
                .any(|l| l.logical_offset == lo && l.length == 4096),
            "{:?}",
            s.lost
        );
        match pool.read(lo, 4096) {
            Err(PoolError::Lost { ranges }) => {
                assert!(ranges.iter().any(|r| r.logical_offset == lo))
            }
            other => panic!("read of a lost block returned {other:?}"),
        }
        // Everything not lost reads right.
        assert_reads_outside_lost(&mut pool, &data);
        pool.close().unwrap();
        if checksums {
            // The loss is marked on the members: even a descriptor rebuilt from the members
            // alone (which has no list of lost ranges) refuses to return the block.
            let members: Vec<PathBuf> = (1..4)
                .map(|i| member_path(&d.0, i))
                .chain([d.0.join("new0.img")])
                .collect();
            std::fs::remove_file(d.0.join("pool.json")).unwrap();
            let mut pool = Pool::assemble(&d.0.join("pool.json"), &members, None).unwrap();
            assert!(pool.status().lost.is_empty());
            assert!(
                matches!(pool.read(lo, 4096), Err(PoolError::Lost { .. })),
                "a poisoned block must not read"
            );
            pool.close().unwrap();
        }
    }
}

/// A block a rebuild recorded lost still holds the bytes its stripe's parity was computed
/// with. A later rebuild that meets it (its checksum marked lost) must leave those bytes as
/// they are: the redundancy still holds the stripe's other units, and one the user rewrote
/// since the loss is rebuilt from them. (Zeros written over the marked block rebuilt that
/// unit wrong under a matching checksum: served fault harness, seed 0x6b0922a7.)
#[test]
fn a_block_marked_lost_keeps_the_bytes_its_stripe_was_computed_with() {
    let d = TempDir::new("marked-lost-r6");
    let (mut pool, mut data) = filled(&d.0, SchemeKind::Raid6, params(6, None), true);
    let geo = pool.geometry().clone();
    let c = 1;
    let disk = |pool: &Pool, q: PlaceId| place_loc(&geo, pool.state(), c, q).0.disk;
    // A stripe whose units on members 0 and 1 (z0, z1) are both data, and another data unit
    // `x`.
    let (z0, z1, x) = (0..geo.healthy().stripes.len())
        .find_map(|s| {
            let ps = geo.stripe_places(s);
            let on = |m: u32| ps.iter().copied().find(|&q| disk(&pool, q) == m);
            let (a, b) = (on(0)?, on(1)?);
            if geo.role(a) != Role::Data || geo.role(b) != Role::Data {
                return None;
            }
            let x = ps
                .iter()
                .copied()
                .find(|&q| disk(&pool, q) > 1 && geo.role(q) == Role::Data)?;
            Some((a, b, x))
        })
        .expect("a stripe with data on members 0 and 1");
    let lo_x = logical_offset(&geo, c, x, 8192).unwrap();
    let lo_z0 = logical_offset(&geo, c, z0, 8192).unwrap();
    let lo_z1 = logical_offset(&geo, c, z1, 8192).unwrap();
    // Members 0 and 1 fail, and x's block cannot be read during their rebuild: three
    // erasures in a stripe that survives two.
    pool.fail(0).unwrap();
    pool.fail(1).unwrap();
    pool.replace(0, &d.0.join("new0.img")).unwrap();
    pool.replace(1, &d.0.join("new1.img")).unwrap();
    let (mx, at) = where_is(&pool, c, x, 8192);
    latent_error(&mut pool, mx, at);
    // The rebuild runs a cycle at a time; the user rewrites the blocks of x and z1 as soon as
    // the rebuild has found them lost (as a served rebuild lets a client do), before the
    // rebuild ends. z0's block stays lost.
    let opts = RebuildOpts {
        parallel_cycles: 1,
        ..RebuildOpts::default()
    };
    let mut cur = dev::pool::RebuildCursor::new();
    while pool.status().lost.is_empty() {
        assert!(pool.rebuild_step(&opts, &mut cur).unwrap().is_some());
    }
    let lost: Vec<u64> = pool
        .status()
        .lost
        .iter()
        .map(|l| l.logical_offset)
        .collect();
    assert!(
        [lo_x, lo_z0, lo_z1].iter().all(|l| lost.contains(l)),
        "{lost:?}"
    );
    let fresh: Vec<u8> = (0..4096u32).map(|i| (i * 7 + 3) as u8).collect();
    for lo in [lo_x, lo_z1] {
        pool.write(lo, &fresh).unwrap();
        data[lo as usize..lo as usize + 4096].copy_from_slice(&fresh);
    }
    while pool.rebuild_step(&opts, &mut cur).unwrap().is_some() {}
    // The end of the rebuild marks what is still lost, not the block rewritten meanwhile.
    assert_eq!(pool.read(lo_x, 4096).unwrap(), fresh);
    assert_eq!(pool.read(lo_z1, 4096).unwrap(), fresh);
    assert!(matches!(
        pool.read(lo_z0, 4096),
        Err(PoolError::Lost { .. })
    ));
    // x's member fails: with z0's block lost, two erasures in a stripe that survives two.
    // The rebuild reads z0's block (marked lost) and must rebuild x from what the stripe's
    // parity was computed with.
    let mx = disk(&pool, x) as usize;
    pool.fail(mx).unwrap();
    pool.replace(mx, &d.0.join("newx.img")).unwrap();
    pool.rebuild(&RebuildOpts::default(), |_| {}).unwrap();
    assert_eq!(
        pool.read(lo_x, 4096).unwrap(),
        fresh,
        "the rewritten block was rebuilt wrong"
    );
    assert!(matches!(
        pool.read(lo_z0, 4096),
        Err(PoolError::Lost { .. })
    ));
    // Everything not lost reads what was written; the rewritten block is not listed lost.
    assert!(!pool.status().lost.iter().any(|l| l.logical_offset == lo_x));
    assert_reads_outside_lost(&mut pool, &data);
    pool.close().unwrap();
}

/// A served pool (requests under stripe locks, outside the pool mutex) repairs what its reads
/// and read-modify-writes find, like the exclusive one.
#[test]
fn served_pool_reads_and_writes_repair() {
    use dev::serve_support::{Concurrency, SharedPool};
    let d = TempDir::new("served");
    let (pool, mut data) = filled(&d.0, SchemeKind::Raid5, params(4, None), true);
    let p0 = places_with(&pool, 0, Role::Data)[0];
    let (m, at) = where_is(&pool, 1, p0, 300);
    let lo = logical_offset(pool.geometry(), 1, p0, 0).unwrap();
    // A second flip, in a block a small write will read-modify-write.
    let p1 = places_with(&pool, 0, Role::Data)[1];
    let (m2, at2) = where_is(&pool, 2, p1, 9000);
    let lo2 = logical_offset(pool.geometry(), 2, p1, 8192).unwrap();
    pool.close().unwrap();
    flip_byte(&d.0, m, at);
    flip_byte(&d.0, m2, at2);
    let pool = Pool::open(&d.0.join("pool.json")).unwrap();
    let sp = SharedPool::new(pool, Concurrency::Stripes).unwrap();
    let mut buf = vec![0u8; CHUNK as usize];
    sp.read(lo, &mut buf).unwrap();
    assert_eq!(buf, &data[lo as usize..(lo + CHUNK) as usize]);
    // 100 bytes into the damaged block: the write reads it (and parity) first.
    sp.write(lo2 + 50, &[7u8; 100]).unwrap();
    data[(lo2 + 50) as usize..(lo2 + 150) as usize].fill(7);
    let mut all = vec![0u8; data.len()];
    sp.read(0, &mut all).unwrap();
    assert_eq!(all, data);
    let s = sp.close().unwrap();
    assert_eq!(s.repairs.checksum_mismatches, 2, "{:?}", s.repairs);
    let mut pool = Pool::open(&d.0.join("pool.json")).unwrap();
    assert_clean(&scrub(&mut pool));
    pool.close().unwrap();
}

/// A crash between a block's write and its checksum page's write (no journal) leaves data and
/// parity that agree under a checksum that does not: the block is reported lost, never
/// "repaired" into either version; rewriting it clears it.
#[test]
fn stale_checksum_after_a_crash_is_reported_not_invented() {
    let d = TempDir::new("stale");
    let (mut pool, mut data) = filled(&d.0, SchemeKind::Raid5, params(4, None), true);
    let p0 = places_with(&pool, 0, Role::Data)[0];
    let (m, at) = where_is(&pool, 1, p0, 4096);
    let lo = logical_offset(pool.geometry(), 1, p0, 4096).unwrap();
    // The checksum pages as they were before the write (what a crash before their writes
    // leaves): the member's own copy and the copy on the next member.
    let block = (at - pool.data_offset_bytes()) / 4096;
    let copies = checksum_copies(&d.0, m, block);
    let old_pages: Vec<Vec<u8>> = copies.iter().map(|(f, at)| read_page(f, *at)).collect();
    pool.write(lo, &[0xEEu8; 4096]).unwrap();
    pool.close().unwrap();
    for ((f, at), old) in copies.iter().zip(&old_pages) {
        f.write_all_at(old, *at).unwrap();
    }
    let mut pool = Pool::open(&d.0.join("pool.json")).unwrap();
    match pool.read(lo, 4096) {
        Err(PoolError::Lost { ranges }) => {
            assert!(ranges[0].reason.contains("stored checksum"), "{ranges:?}");
        }
        other => panic!("a block under a stale checksum read as {other:?}"),
    }
    let r = scrub(&mut pool);
    assert!(
        r.unrecoverable.iter().any(|u| u.logical_offset == lo),
        "{r:?}"
    );
    data[lo as usize..(lo + 4096) as usize].fill(0x11);
    pool.write(lo, &data[lo as usize..(lo + 4096) as usize])
        .unwrap();
    assert_eq!(pool.read(0, data.len() as u64).unwrap(), data);
    assert_clean(&scrub(&mut pool));
    pool.close().unwrap();
}

/// A latent sector error on a data block of a healthy pool. When a rewrite remaps the sector,
/// the read repairs the block in place and the member stays; when the sector cannot be
/// remapped (it still fails after its repair was written), the member is failed, like MD
/// does, and the read is served degraded: the right bytes, no error, nothing lost.
#[test]
fn a_block_that_still_reads_wrong_after_its_repair_fails_its_member() {
    for (name, kind, n) in [
        ("r5", SchemeKind::Raid5, 4usize),
        ("r6", SchemeKind::Raid6, 5),
    ] {
        for checksums in [false, true] {
            for remap in [true, false] {
                let d = TempDir::new(&format!("persist-lse-{name}-{checksums}-{remap}"));
                let (mut pool, data) = filled(&d.0, kind, params(n, None), checksums);
                let geo = pool.geometry().clone();
                let place = (0..geo.healthy().stripes.len())
                    .flat_map(|s| geo.stripe_places(s).to_vec())
                    .find(|&q| geo.role(q) == Role::Data)
                    .unwrap();
                let (m, at) = where_is(&pool, 1, place, 4096);
                let lo = logical_offset(&geo, 1, place, 4096).unwrap();
                latent_errors(&mut pool, m, &[(at, at + 512)], remap);
                let what = format!("{name} checksums {checksums} remap {remap}");
                let got = pool.read(lo, 4096).unwrap();
                assert_eq!(got, &data[lo as usize..lo as usize + 4096], "{what}");
                let s = pool.status();
                assert!(s.lost.is_empty(), "{what}: {:?}", s.lost);
                assert!(s.repairs.read_errors >= 1, "{what}");
                if remap {
                    assert!(pool.state().failed().is_empty(), "{what}");
                    assert_eq!(s.repairs.members_failed_by_repair, 0, "{what}");
                } else {
                    assert_eq!(pool.state().failed(), &[m as u32], "{what}");
                    assert_eq!(s.repairs.members_failed_by_repair, 1, "{what}");
                }
                assert_eq!(pool.read(0, data.len() as u64).unwrap(), data, "{what}");
                pool.close().unwrap();
            }
        }
    }
}

/// An entry damaged at rest in every copy, the data good: the sectors holding it fail their
/// seals, so the entry is known to be unreliable; with every member present the block's
/// complete stripe, agreeing with its parity, vouches for it at open (entries rewritten);
/// with a member missing nothing can, and the block is reported lost, never returned
/// unverified.
#[test]
fn a_damaged_checksum_entry_at_rest_is_vouched_for_or_reported_lost() {
    for degraded in [false, true] {
        let d = TempDir::new(&format!("csum-entry-{degraded}"));
        let (pool, data) = filled(&d.0, SchemeKind::Raid5, params(4, None), true);
        let geo = pool.geometry().clone();
        let place = (0..geo.healthy().stripes.len())
            .flat_map(|s| geo.stripe_places(s).to_vec())
            .find(|&q| geo.role(q) == Role::Data)
            .unwrap();
        let (m, at) = where_is(&pool, 1, place, 0);
        let lo = logical_offset(&geo, 1, place, 0).unwrap() as usize;
        pool.close().unwrap();
        let path = member_path(&d.0, m);
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .unwrap();
        let sb = superblock_of(&f);
        let block = (at - sb.data_offset_bytes) / 4096;
        drop(f);
        // The same bit of the entry's CRC flipped in every copy (the member's own and the
        // next member's): no copy vouches for the block.
        tear_entry(&d.0, m, block, 2);
        if degraded {
            // A member other than the damaged block's is missing at open: its stripe cannot
            // vouch for the block.
            std::fs::remove_file(member_path(&d.0, (m + 1) % 4)).unwrap();
        }
        let mut pool = Pool::open(&d.0.join("pool.json")).unwrap();
        if degraded {
            let err = pool.read(lo as u64, 4096).unwrap_err();
            assert!(matches!(err, PoolError::Lost { .. }), "{err}");
            assert_eq!(pool.status().repairs.checksum_entries_rewritten, 0);
        } else {
            // Every copy's sector fails its seal, so the entries are known to be damaged (not
            // the data): the complete stripe, agreeing with its parity, vouches for the block
            // at open and its entries are rewritten.
            assert!(pool.status().repairs.checksum_entries_rewritten >= 1);
            assert_eq!(pool.read(lo as u64, 4096).unwrap(), &data[lo..lo + 4096]);
        }
        // Everything else reads right.
        assert_eq!(pool.read(0, lo as u64).unwrap(), &data[..lo]);
        pool.close().unwrap();
    }
}

/// The checksum-region pages holding member `m`'s entry for data-area block `block`, in every
/// copy: (member file, page offset). Copy `k` lives on member `(m + k) % n`, in section `k` of
/// its region (the region is `copies` equal sections; see `dev::csum`).
fn checksum_copies(dir: &Path, m: usize, block: u64) -> Vec<(std::fs::File, u64)> {
    // RAID5 and RAID1/10 keep two copies (tolerance + 1).
    checksum_copies_n(dir, m, block, 2)
}

/// The pages holding the `copies` copies of member `m`'s entry for `block`.
fn checksum_copies_n(dir: &Path, m: usize, block: u64, copies: usize) -> Vec<(std::fs::File, u64)> {
    let sb_of = |i: usize| {
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(member_path(dir, i))
            .unwrap();
        let sb = superblock_of(&f);
        (f, sb)
    };
    let (_, sb) = sb_of(m);
    let n = sb.member_count as usize;
    let entry = dev::csum::entry_offset(block);
    // One section per copy, sized for the data area (the region may be a little larger).
    let section = dev::csum::region_bytes(sb.data_bytes, 1);
    assert!(sb.checksum_len_bytes >= copies as u64 * section);
    (0..copies)
        .map(|k| {
            let (f, sb) = sb_of((m + k) % n);
            (
                f,
                sb.checksum_offset_bytes + k as u64 * section + entry / 4096 * 4096,
            )
        })
        .collect()
}

/// Flips one bit of member `m`'s entry for `block` in each of its first `copies` copies, so
/// that none is sealed any more (a crash tore every copy); returns the copies torn.
fn tear_entry(dir: &Path, m: usize, block: u64, copies: usize) -> usize {
    let in_page = (dev::csum::entry_offset(block) % 4096) as usize;
    let found = checksum_copies_n(dir, m, block, copies);
    for (f, page) in &found {
        let mut p = read_page(f, *page);
        p[in_page] ^= 0x40;
        f.write_all_at(&p, *page).unwrap();
    }
    found.len()
}

fn read_page(f: &std::fs::File, at: u64) -> Vec<u8> {
    let mut b = vec![0u8; 4096];
    f.read_exact_at(&mut b, at).unwrap();
    b
}

/// A member that silently loses a block's write AND the write of that block's checksum page
/// (seed 0xab32e of the fault harness: raid10-4, "loses its next 3 writes"): after a restart
/// its stale block matches its own stale entry, but the copy of the entry on the next member
/// is newer (higher generation), so the stale block does not verify and is repaired from
/// redundancy. Every level with redundancy; both data and copy positions.
#[test]
fn a_lost_write_of_a_block_and_its_checksum_page_is_caught() {
    let cases: [(SchemeKind, Params); 3] = [
        (SchemeKind::Raid5, params(4, None)),
        (SchemeKind::Raid10, params(4, None)),
        (SchemeKind::Raid1, params(2, None)),
    ];
    for (kind, p) in cases {
        let d = TempDir::new(&format!("lost-{kind:?}"));
        let (mut pool, mut data) = filled(&d.0, kind, p, true);
        let place = places_with(&pool, 0, Role::Data)[0];
        let (m, at) = where_is(&pool, 1, place, 4096);
        let lo = logical_offset(pool.geometry(), 1, place, 4096).unwrap();
        let block = (at - pool.data_offset_bytes()) / 4096;
        // What the member holds before the write: the block and its own checksum page.
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(member_path(&d.0, m))
            .unwrap();
        let old_block = read_page(&file, at);
        let (own, own_page) = checksum_copies(&d.0, m, block).remove(0);
        let old_own = read_page(&own, own_page);
        data[lo as usize..(lo + 4096) as usize].fill(0x5A);
        pool.write(lo, &data[lo as usize..(lo + 4096) as usize])
            .unwrap();
        pool.close().unwrap();
        // The member lost both writes.
        file.write_all_at(&old_block, at).unwrap();
        own.write_all_at(&old_own, own_page).unwrap();
        let mut pool = Pool::open(&d.0.join("pool.json")).unwrap();
        assert_eq!(
            pool.read(0, data.len() as u64).unwrap(),
            data,
            "{kind:?}: stale block returned"
        );
        assert!(
            pool.status().repairs.checksum_mismatches >= 1,
            "{kind:?}: {:?}",
            pool.status().repairs
        );
        pool.close().unwrap();
        // Repaired on the member itself, and its own entry rewritten at open.
        assert_eq!(read_page(&file, at), vec![0x5A; 4096], "{kind:?}");
        let mut pool = Pool::open(&d.0.join("pool.json")).unwrap();
        assert_clean(&scrub(&mut pool));
        pool.close().unwrap();
    }
}

/// One copy of an entry damaged at rest (a bit flipped in its CRC): its sector's seal fails, so
/// the other copy is taken at open, the damaged copy is rewritten from it, and nothing is
/// reported lost (own copy damaged, then the other member's).
#[test]
fn a_damaged_copy_of_a_checksum_entry_is_ignored_and_rewritten() {
    for k in [0usize, 1] {
        let d = TempDir::new(&format!("csum-copy-{k}"));
        let (pool, data) = filled(&d.0, SchemeKind::Raid5, params(4, None), true);
        let place = places_with(&pool, 0, Role::Data)[0];
        let (m, at) = where_is(&pool, 1, place, 0);
        let block = (at - pool.data_offset_bytes()) / 4096;
        pool.close().unwrap();
        let in_page = (dev::csum::entry_offset(block) % 4096) as usize;
        let copies = checksum_copies(&d.0, m, block);
        let good = read_page(&copies[k].0, copies[k].1);
        let mut bad = good.clone();
        bad[in_page + 1] ^= 0x08;
        copies[k].0.write_all_at(&bad, copies[k].1).unwrap();
        let mut pool = Pool::open(&d.0.join("pool.json")).unwrap();
        assert_eq!(pool.read(0, data.len() as u64).unwrap(), data, "copy {k}");
        assert!(pool.status().lost.is_empty(), "copy {k}");
        pool.close().unwrap();
        assert_eq!(
            read_page(&copies[k].0, copies[k].1),
            good,
            "copy {k} not rewritten"
        );
    }
}

/// A member's superblock: the newest valid one of its two copies.
fn superblock_of(f: &std::fs::File) -> raidcore::superblock::Superblock {
    raidcore::superblock::SUPERBLOCK_SLOTS
        .iter()
        .filter_map(|&at| raidcore::superblock::Superblock::decode(&read_page(f, at)).ok())
        .max_by_key(|sb| sb.generation)
        .expect("a valid superblock copy")
}

/// The block and its member's own copy of its entry both damaged at rest (one misbehaving
/// member): the own copy's sector fails its seal, so the copy on the other member is taken,
/// and the read finds the block does not match it and repairs it from redundancy.
#[test]
fn a_damaged_block_under_a_damaged_own_entry_is_repaired() {
    let d = TempDir::new("csum-both");
    let (pool, data) = filled(&d.0, SchemeKind::Raid5, params(4, None), true);
    let place = places_with(&pool, 0, Role::Data)[0];
    let (m, at) = where_is(&pool, 1, place, 0);
    let block = (at - pool.data_offset_bytes()) / 4096;
    pool.close().unwrap();
    let in_page = (dev::csum::entry_offset(block) % 4096) as usize;
    let copies = checksum_copies(&d.0, m, block);
    let mut own = read_page(&copies[0].0, copies[0].1);
    own[in_page + 2] ^= 0x10;
    copies[0].0.write_all_at(&own, copies[0].1).unwrap();
    flip_byte(&d.0, m, at + 77);
    let mut pool = Pool::open(&d.0.join("pool.json")).unwrap();
    assert_eq!(pool.read(0, data.len() as u64).unwrap(), data);
    assert!(pool.status().lost.is_empty());
    assert_eq!(pool.status().repairs.checksum_mismatches, 1);
    pool.close().unwrap();
}

/// A block of the last copy of which some sectors cannot be read while one can (a write
/// remapped it): a read of the block fails naming only the unreadable sectors on a pool
/// without checksums, and the readable sector (acknowledged data) stays readable; with
/// checksums the block is checked whole, so it is lost whole. (Served fault harness, seed
/// 0x6b07f9a4: a 3-way mirror down to one member with latent errors acknowledged a 512-byte
/// write into such a block, and a neighbour's read then recorded the whole block lost.)
#[test]
fn an_unreadable_sector_is_lost_alone_on_a_pool_without_checksums() {
    for checksums in [false, true] {
        let d = TempDir::new(&format!("sector-lost-{checksums}"));
        let (mut pool, data) = filled(&d.0, SchemeKind::Raid1, params(2, None), checksums);
        pool.fail(1).unwrap();
        // Block 3 of cycle 1 on member 0: its second and fourth sectors fail to read.
        let geo = pool.geometry().clone();
        let place = places_with(&pool, 0, Role::Data)[0];
        let c = 1;
        let (m, at) = where_is(&pool, c, place, 3 * 4096);
        let lo = logical_offset(&geo, c, place, 3 * 4096).unwrap();
        latent_errors(
            &mut pool,
            m,
            &[(at + 512, at + 1024), (at + 1536, at + 2048)],
            false,
        );
        let err = pool.read(lo, 4096).unwrap_err();
        let PoolError::Lost { ranges } = err else {
            panic!("read of a block with unreadable sectors returned {err:?}");
        };
        let got: Vec<(u64, u64)> = ranges
            .iter()
            .map(|r| (r.logical_offset, r.length))
            .collect();
        let want = if checksums {
            vec![(lo, 4096)]
        } else {
            vec![(lo + 512, 512), (lo + 1536, 512)]
        };
        assert_eq!(got, want, "checksums {checksums}: the ranges reported lost");
        assert_eq!(
            lost_ranges(&pool),
            want,
            "checksums {checksums}: the ranges listed lost"
        );
        if !checksums {
            // The sectors around and between the unreadable ones read what was written.
            for (a, b) in [(0u64, 512u64), (1024, 1536), (2048, 4096)] {
                assert_eq!(
                    pool.read(lo + a, b - a).unwrap(),
                    &data[(lo + a) as usize..(lo + b) as usize],
                    "bytes {a}..{b} of the block"
                );
            }
        }
        pool.close().unwrap();
    }
}

/// An entry torn in every copy (its sectors fail their seals) in a cycle that also holds a
/// block damaged at rest: the damaged block's stripe disagrees with its parity, which must not
/// keep the other stripes of the cycle from vouching for their blocks; when the torn entry's
/// own block is the damaged one, the row's other blocks (whose checksums match) recompute it;
/// and when the damaged block sits in the torn entry's row, recomputing it from the row
/// (torn block included) and finding its own checksum vouches for the torn block too.
/// (Served fault harness, seed 0x6b07f806: a bit flip, or a misdirected write, on one member,
/// then a power loss that tore both copies of a checksum sector; good blocks were reported
/// lost.)
#[test]
fn a_torn_entry_is_vouched_for_beside_a_block_damaged_at_rest() {
    for case in ["another stripe", "its own block", "its row"] {
        let d = TempDir::new(&format!("csum-torn-beside-{}", case.replace(' ', "-")));
        let (pool, data) = filled(&d.0, SchemeKind::Raid5, params(4, None), true);
        let geo = pool.geometry().clone();
        let stripes = geo.healthy().stripes.len();
        assert!(
            stripes >= 2,
            "a RAID5 cycle of 4 members has several stripes"
        );
        let data_places = |s: usize| -> Vec<PlaceId> {
            geo.stripe_places(s)
                .iter()
                .copied()
                .filter(|&q| geo.role(q) == Role::Data)
                .collect()
        };
        let place = data_places(0)[0];
        let (other, other_at) = match case {
            "another stripe" => (data_places(1)[0], 4096),
            "its own block" => (place, 0),
            _ => (data_places(0)[1], 0),
        };
        let (m, at) = where_is(&pool, 1, place, 0);
        let (mo, at_other) = where_is(&pool, 1, other, other_at);
        let lo = logical_offset(&geo, 1, place, 0).unwrap() as usize;
        let lo_other = logical_offset(&geo, 1, other, other_at).unwrap() as usize;
        pool.close().unwrap();
        let f = std::fs::File::open(member_path(&d.0, m)).unwrap();
        let sb = superblock_of(&f);
        drop(f);
        let block = (at - sb.data_offset_bytes) / 4096;
        tear_entry(&d.0, m, block, 2);
        flip_byte(&d.0, mo, at_other + 100);
        let mut pool = Pool::open(&d.0.join("pool.json")).unwrap();
        let what = format!("a block damaged in {case}");
        assert!(
            pool.status().repairs.checksum_entries_rewritten >= 1,
            "{what}: the torn entry was vouched for at open"
        );
        assert_eq!(
            pool.read(lo as u64, 4096).unwrap(),
            &data[lo..lo + 4096],
            "{what}"
        );
        assert_eq!(
            pool.read(lo_other as u64, 4096).unwrap(),
            &data[lo_other..lo_other + 4096],
            "{what}: the damaged block"
        );
        assert_eq!(pool.read(0, data.len() as u64).unwrap(), data, "{what}");
        assert!(pool.status().lost.is_empty(), "{what}");
        pool.close().unwrap();
    }
}

/// A degraded pool with the write journal: an entry a crash tore in every copy (its sectors
/// fail their seals) is vouched for at open from its block, which the replay shows was not
/// being written; the block reads back. Its cycle is short of a member, so its stripes cannot
/// vouch; such entries were left unknown, and the good blocks under them were reported lost
/// at the next read (served fault harness, seed 0x6b0a9e54: RAID50 with a member failed, a
/// power loss tore both copies of another member's checksum sectors). Without the journal
/// the block may have been torn mid-write: there it is reported lost, not guessed at.
#[test]
fn a_torn_entry_in_a_degraded_cycle_is_vouched_for_with_the_journal() {
    for journal in [true, false] {
        let d = TempDir::new(&format!("torn-degraded-{journal}"));
        let n = 4;
        let mut pool = Pool::create(
            &d.0.join("pool.json"),
            CreateOpts {
                params: params(n, None),
                chunk_bytes: CHUNK,
                checksums: true,
                write_hole: if journal {
                    dev::pool::WriteHole::Journal
                } else {
                    dev::pool::WriteHole::None
                },
                // (The journal's region takes 2 MiB more of each member.)
                ..test_opts(SchemeKind::Raid5, &d.0, n, 5 << 20)
            },
        )
        .unwrap();
        let cap = pool.capacity_bytes() as usize;
        let mut rng = layout::SplitMix64::new(77);
        let data: Vec<u8> = (0..cap).map(|_| rng.next_u64() as u8).collect();
        pool.write(0, &data).unwrap();
        pool.fail(3).unwrap();
        let place = places_with(&pool, 0, Role::Data)
            .into_iter()
            .find(|&p| where_is(&pool, 1, p, 0).0 != 3)
            .unwrap();
        let (m, at) = where_is(&pool, 1, place, 0);
        let lo = logical_offset(pool.geometry(), 1, place, 0).unwrap() as usize;
        pool.close().unwrap();
        let f = std::fs::File::open(member_path(&d.0, m)).unwrap();
        let sb = superblock_of(&f);
        drop(f);
        let block = (at - sb.data_offset_bytes) / 4096;
        assert_eq!(tear_entry(&d.0, m, block, 2), 2);
        let mut pool = Pool::open(&d.0.join("pool.json")).unwrap();
        assert_eq!(pool.state().failed(), &[3], "still degraded");
        let got = pool.read(lo as u64, 4096);
        if journal {
            assert!(
                pool.status().repairs.checksum_entries_rewritten >= 1,
                "the torn entry was vouched for at open"
            );
            assert_eq!(got.unwrap(), &data[lo..lo + 4096]);
            assert_eq!(pool.read(0, cap as u64).unwrap(), data);
            assert!(pool.status().lost.is_empty());
        } else {
            assert!(
                got.is_err(),
                "without the journal the block is reported lost"
            );
        }
        pool.close().unwrap();
    }
}

/// RAID6 with lazy parity: an entry torn in every copy (its sectors fail their seals) whose
/// block lies in a stripe on the deferred-parity list (its Q stale, P current) is vouched for
/// at open from the foreground parity, so a member failure afterwards loses nothing. Listed
/// cycles used to be left unvouched: the good block then failed its torn checksum, and with
/// one member gone and Q stale the stripe had nothing left to recompute it from (served fault
/// harness, seed 0x6b08ba9d: a power loss, then a fail-stop; within the tolerance, yet data
/// lost).
#[test]
fn a_torn_entry_in_a_stripe_with_deferred_parity_is_vouched_for() {
    let d = TempDir::new("torn-lazy");
    let (mut pool, mut data) = filled(&d.0, SchemeKind::Raid6, params(6, None), true);
    pool.set_parity(ParityPolicy::Lazy).unwrap();
    let geo = pool.geometry().clone();
    let data_places = places_with(&pool, 0, Role::Data);
    assert!(
        data_places.len() >= 3,
        "RAID6 of 6 has 4 data units a stripe"
    );
    // A small write to the stripe's first data unit defers its Q.
    let written = logical_offset(&geo, 1, data_places[0], 0).unwrap();
    let new = vec![0xA5u8; 4096];
    pool.write(written, &new).unwrap();
    data[written as usize..written as usize + 4096].copy_from_slice(&new);
    assert!(
        pool.state().bpgl().stripes_of(1).any(|s| s == 0),
        "the small write left stripe 0 of cycle 1 on the deferred-parity list"
    );
    // The torn entry: another data unit of the stripe, which the write did not touch.
    let (m, at) = where_is(&pool, 1, data_places[1], 0);
    let (victim, _) = where_is(&pool, 1, data_places[2], 0);
    pool.close().unwrap();
    let f = std::fs::File::open(member_path(&d.0, m)).unwrap();
    let sb = superblock_of(&f);
    drop(f);
    let block = (at - sb.data_offset_bytes) / 4096;
    // RAID6 keeps three copies (tolerance + 1); all of them torn.
    tear_entry(&d.0, m, block, 3);
    let mut pool = Pool::open(&d.0.join("pool.json")).unwrap();
    let st = pool.status();
    assert!(
        st.bpgl_len > 0,
        "the list survived the close: {}",
        st.bpgl_len
    );
    assert!(
        st.repairs.checksum_entries_rewritten >= 1,
        "the torn entry was vouched for at open"
    );
    assert_eq!(pool.read(0, data.len() as u64).unwrap(), data);
    // One member of the stripe gone: the deferred Q is recomputed first, from P and the
    // data, torn entry's block included.
    pool.fail(victim).unwrap();
    assert_eq!(
        pool.read(0, data.len() as u64).unwrap(),
        data,
        "member {victim} failed"
    );
    assert!(pool.status().lost.is_empty(), "{:?}", pool.status().lost);
    pool.close().unwrap();
}

/// An entry torn in every copy, and in the same row a block damaged at rest whose own entry
/// is intact but sits in a page that also holds a torn entry (so it counts as torn as well):
/// two suspect blocks in one row of a one-parity stripe. Recomputing the damaged block from
/// the row, torn block included, finds its own checksum, which vouches for the torn block;
/// nothing is lost. (Served fault harness, seed 0x6b08cb68: a misdirected write on one
/// member, then a power loss that tore a checksum sector of the next member in every copy.)
#[test]
fn a_torn_entry_is_vouched_for_beside_a_damaged_block_in_a_suspect_page() {
    let d = TempDir::new("csum-torn-suspect");
    let (pool, data) = filled(&d.0, SchemeKind::Raid5, params(4, None), true);
    let geo = pool.geometry().clone();
    let data_places = places_with(&pool, 0, Role::Data);
    let (m, at) = where_is(&pool, 1, data_places[0], 0);
    let (mo, at_other) = where_is(&pool, 1, data_places[1], 0);
    assert_ne!(m, mo);
    let lo = logical_offset(&geo, 1, data_places[0], 0).unwrap() as usize;
    let lo_other = logical_offset(&geo, 1, data_places[1], 0).unwrap() as usize;
    pool.close().unwrap();
    let data_offset = {
        let f = std::fs::File::open(member_path(&d.0, m)).unwrap();
        superblock_of(&f).data_offset_bytes
    };
    let tear = |member: usize, block: u64| tear_entry(&d.0, member, block, 2);
    let block = (at - data_offset) / 4096;
    let block_other = (at_other - data_offset) / 4096;
    // The torn entry of the first block.
    tear(m, block);
    // An entry of another sector of the damaged block's page, torn too: the page is suspect.
    let per_sector = dev::csum::ENTRIES_PER_SECTOR;
    let per_page = dev::csum::ENTRIES_PER_PAGE;
    let neighbour = if block_other % per_page + per_sector < per_page {
        block_other + per_sector
    } else {
        block_other - per_sector
    };
    assert_eq!(neighbour / per_page, block_other / per_page);
    tear(mo, neighbour);
    // The damaged block: its entry is intact.
    flip_byte(&d.0, mo, at_other + 100);
    let mut pool = Pool::open(&d.0.join("pool.json")).unwrap();
    assert!(
        pool.status().repairs.checksum_entries_rewritten >= 1,
        "the torn entries were vouched for at open"
    );
    assert_eq!(pool.read(lo as u64, 4096).unwrap(), &data[lo..lo + 4096]);
    assert_eq!(
        pool.read(lo_other as u64, 4096).unwrap(),
        &data[lo_other..lo_other + 4096],
        "the damaged block"
    );
    assert_eq!(pool.read(0, data.len() as u64).unwrap(), data);
    assert!(pool.status().lost.is_empty(), "{:?}", pool.status().lost);
    // Every stripe agrees with its parity again.
    let r = pool.verify().unwrap();
    assert!(r.inconsistent.is_empty(), "{:?}", r.inconsistent);
    pool.close().unwrap();
}

/// A checksum-region sector written to the wrong place (a misdirected write inside the
/// region, on the member holding a copy): it carries other blocks' entries, some with newer
/// generations than the entries it lands on, which used to win at open, so that a good block
/// failed its checksum and was reported lost. Sealed to its place, it fails its seal where it
/// landed and the other copy is taken (and the bad one rewritten).
#[test]
fn a_checksum_sector_written_to_the_wrong_place_is_ignored() {
    let d = TempDir::new("csum-misplaced-sector");
    let (mut pool, mut data) = filled(&d.0, SchemeKind::Raid5, params(4, None), true);
    let geo = pool.geometry().clone();
    let m = 1usize;
    let per_sector = dev::csum::ENTRIES_PER_SECTOR;
    // A data block of member m in the first sector of its entries, whose twin one sector on
    // is a data block too.
    let logical_of = |pool: &Pool, block: u64| {
        let (c, p, in_chunk) =
            raidcore::locate_member_byte(&geo, pool.state(), m as layout::Disk, block * 4096)?;
        logical_offset(&geo, c, p, in_chunk)
    };
    let (x, lx, ly) = (0..per_sector)
        .find_map(|x| Some((x, logical_of(&pool, x)?, logical_of(&pool, x + per_sector)?)))
        .expect("a data block in the first sector and one in the second");
    // Block x written three more times: its entry's generation is ahead of its twin's.
    for round in 0..3u8 {
        let new = vec![0x30 + round; 4096];
        pool.write(lx, &new).unwrap();
        data[lx as usize..lx as usize + 4096].copy_from_slice(&new);
    }
    pool.close().unwrap();
    // The copy on the next member: the sector holding x's entry lands on the next sector.
    let copies = checksum_copies(&d.0, m, x);
    let (f, page) = &copies[1];
    let mut p = read_page(f, *page);
    let from = (dev::csum::entry_offset(x) % 4096 / 512 * 512) as usize;
    let sector = p[from..from + 512].to_vec();
    p[from + 512..from + 1024].copy_from_slice(&sector);
    f.write_all_at(&p, *page).unwrap();
    let mut pool = Pool::open(&d.0.join("pool.json")).unwrap();
    assert_eq!(
        pool.read(ly, 4096).unwrap(),
        &data[ly as usize..ly as usize + 4096],
        "the block under the misplaced entries"
    );
    assert_eq!(pool.read(0, data.len() as u64).unwrap(), data);
    assert!(pool.status().lost.is_empty(), "{:?}", pool.status().lost);
    pool.close().unwrap();
}

/// A range a rebuild recorded lost is the user's to rewrite (from a backup, say): a write
/// covering it whole succeeds, reads return what was written, the range leaves the lost list,
/// and, on a pool with checksums, the mark on the members goes too (a descriptor rebuilt from
/// the members alone reads it). A write of part of it is refused, naming the range.
#[test]
fn a_range_lost_in_a_rebuild_can_be_rewritten() {
    for (checksums, whole) in [(false, true), (true, true), (true, false), (false, false)] {
        let d = TempDir::new(&format!("lost-rewrite-{checksums}-{whole}"));
        let (mut pool, mut data, _) =
            rebuild_with_lse(&d.0, SchemeKind::Raid5, params(4, None), checksums);
        let lost = lost_ranges(&pool);
        assert!(!lost.is_empty());
        for &(lo, len) in &lost {
            assert!(matches!(pool.read(lo, len), Err(PoolError::Lost { .. })));
            // Whole: the range and a block either side where there is one (a write wider
            // than the range); part: the range's first half.
            let (at, n) = if whole {
                let at = lo.saturating_sub(4096);
                (at, (lo + len + 4096).min(data.len() as u64) - at)
            } else {
                (lo, len / 2)
            };
            let fresh: Vec<u8> = (0..n as u32).map(|i| (i * 13 + 5) as u8).collect();
            let r = pool.write(at, &fresh);
            if !whole {
                match r {
                    Err(PoolError::Lost { ranges }) => {
                        assert!(ranges.iter().any(|r| r.logical_offset == lo), "{ranges:?}")
                    }
                    other => panic!("a write of half a lost range returned {other:?}"),
                }
                assert!(matches!(pool.read(lo, len), Err(PoolError::Lost { .. })));
                continue;
            }
            r.unwrap_or_else(|e| panic!("checksums {checksums}: {n} bytes at {at}: {e}"));
            data[at as usize..(at + n) as usize].copy_from_slice(&fresh);
            assert_eq!(pool.read(at, n).unwrap(), fresh);
        }
        assert_reads_outside_lost(&mut pool, &data);
        if whole {
            assert!(pool.status().lost.is_empty(), "{:?}", pool.status().lost);
            // The rewrites left every row consistent: another member's rebuild reads back
            // what was written.
            pool.fail(2).unwrap();
            pool.replace(2, &d.0.join("new2.img")).unwrap();
            pool.rebuild(&RebuildOpts::default(), |_| {}).unwrap();
            assert!(pool.status().lost.is_empty(), "{:?}", pool.status().lost);
            assert_eq!(pool.read(0, data.len() as u64).unwrap(), data);
        }
        pool.close().unwrap();
        if !checksums {
            continue;
        }
        // A descriptor rebuilt from the members alone: the marks on the members still refuse
        // a write of part of a lost block, and a whole one clears them.
        let members: Vec<PathBuf> = [d.0.join("new0.img"), member_path(&d.0, 1)]
            .into_iter()
            .chain([if whole {
                d.0.join("new2.img")
            } else {
                member_path(&d.0, 2)
            }])
            .chain([member_path(&d.0, 3)])
            .collect();
        std::fs::remove_file(d.0.join("pool.json")).unwrap();
        let mut pool = Pool::assemble(&d.0.join("pool.json"), &members, None).unwrap();
        assert!(pool.status().lost.is_empty());
        for &(lo, len) in if whole { &[][..] } else { &lost[..] } {
            let half = vec![0x5au8; 2048];
            for at in [lo, lo + 1024, lo + len - 2048] {
                match pool.write(at, &half) {
                    Err(PoolError::Lost { ranges }) => assert!(
                        ranges
                            .iter()
                            .any(|r| r.logical_offset <= at && at < r.logical_offset + r.length),
                        "{ranges:?}"
                    ),
                    other => panic!("a write of part of a marked block returned {other:?}"),
                }
            }
            assert!(matches!(pool.read(lo, len), Err(PoolError::Lost { .. })));
            let fresh: Vec<u8> = (0..len as u32).map(|i| (i * 17 + 1) as u8).collect();
            pool.write(lo, &fresh).unwrap();
            data[lo as usize..(lo + len) as usize].copy_from_slice(&fresh);
        }
        assert_eq!(pool.read(0, data.len() as u64).unwrap(), data);
        assert!(pool.verify().unwrap().inconsistent.is_empty());
        pool.close().unwrap();
    }
}

/// A block marked lost has no checksum of its own bytes, so damage to them at rest goes
/// unseen. Rewriting it must not use those bytes as a read-modify-write's old value (the
/// parity would take the damage in, and later reconstructions of its row's other units with
/// it, undetected): the pool reconstruct-writes such stripes. Checked on a stripe wide
/// enough that the write policy would otherwise choose a read-modify-write.
#[test]
fn rewriting_a_damaged_marked_block_keeps_its_row_consistent() {
    let d = TempDir::new("marked-damaged");
    let MarkedRow {
        mut pool,
        mut data,
        lost,
        unit: l2,
        unit_member: disk,
        marked_member: m,
        marked_at: at,
        ..
    } = marked_row(&d.0);
    // The marked block on the member that had the latent error is damaged at rest.
    flip_byte(&d.0, m, at + 100);
    // Every lost range is rewritten, exactly.
    for &(a, n) in &lost {
        let fresh: Vec<u8> = (0..n as u32).map(|i| (i * 29 + a as u32) as u8).collect();
        pool.write(a, &fresh).unwrap();
        data[a as usize..(a + n) as usize].copy_from_slice(&fresh);
    }
    assert!(pool.status().lost.is_empty());
    // Another data unit of the row, read degraded once its member fails.
    pool.fail(disk).unwrap();
    assert!(
        pool.read(l2, 4096).unwrap() == data[l2 as usize..l2 as usize + 4096],
        "the degraded read is reconstructed from a parity the rewrite kept consistent"
    );
    pool.replace(disk, &d.0.join("newc.img")).unwrap();
    pool.rebuild(&RebuildOpts::default(), |_| {}).unwrap();
    assert!(pool.status().lost.is_empty());
    assert!(pool.read(0, data.len() as u64).unwrap() == data);
    pool.close().unwrap();
}

/// A RAID5 pool of six members after a rebuild that met a latent error: two blocks of one
/// row are marked lost, one of them on a survivor.
struct MarkedRow {
    pool: Pool,
    /// The pool's bytes.
    data: Vec<u8>,
    /// Its lost ranges, `(logical offset, length)`.
    lost: Vec<(u64, u64)>,
    /// Another data unit of the row, not lost: its logical offset and its member.
    unit: u64,
    unit_member: usize,
    /// The marked block on the survivor: its member, member byte and logical offset.
    marked_member: usize,
    marked_at: u64,
    marked_lo: u64,
}

fn marked_row(dir: &Path) -> MarkedRow {
    let (pool, data, lo) = rebuild_with_lse(dir, SchemeKind::Raid5, params(6, None), true);
    let lost = lost_ranges(&pool);
    assert!(lost.iter().any(|&(a, _)| a == lo), "{lost:?}");
    let geo = pool.geometry().clone();
    let cb = geo.chunk_bytes();
    let (c, idx) = geo.locate_chunk(lo / cb);
    let place = geo.data_place(idx);
    let in_chunk = lo % cb;
    let (m, m_at) = where_is(&pool, c, place, in_chunk);
    assert_ne!(m, 0, "the latent error was on a survivor");
    let (s, _) = geo.place_units(place)[0];
    let (unit, unit_member) = geo
        .stripe_places(s)
        .iter()
        .filter(|&&q| geo.role(q) == Role::Data)
        .map(|&q| {
            (
                logical_offset(&geo, c, q, in_chunk).unwrap(),
                place_loc(&geo, pool.state(), c, q).0.disk as usize,
            )
        })
        .find(|&(l, disk)| {
            disk != m && disk != 0 && !lost.iter().any(|&(a, n)| a <= l && l < a + n)
        })
        .expect("another data unit in the row");
    MarkedRow {
        pool,
        data,
        lost,
        unit,
        unit_member,
        marked_member: m,
        marked_at: m_at,
        marked_lo: lo,
    }
}

/// A degraded read of a data unit whose row holds blocks marked lost: the marked blocks' stored
/// bytes are what the row's parity was computed with (`Pool::repair_in_rebuild`), so the unit
/// is reconstructed through them, checked against its own checksum, and nothing more is lost;
/// so is a rebuild of its member (checked against the entries the member had before it was
/// replaced).
#[test]
fn a_degraded_read_beside_a_marked_block_is_reconstructed() {
    let d = TempDir::new("marked-degraded-read");
    let MarkedRow {
        mut pool,
        data,
        lost,
        unit: l2,
        unit_member: disk,
        marked_member: m,
        marked_at: m_at,
        ..
    } = marked_row(&d.0);
    pool.fail(disk).unwrap();
    let got = pool.read(l2, 4096);
    assert!(
        matches!(&got, Ok(b) if b[..] == data[l2 as usize..l2 as usize + 4096]),
        "the degraded read beside the marked blocks returned {:?}",
        got.map(|b| b[..4].to_vec())
    );
    assert_eq!(lost_ranges(&pool), lost, "nothing more is recorded lost");
    assert_reads_outside_lost(&mut pool, &data);
    // The member's rebuild reconstructs through them too, checked against the entries the
    // member had before it was replaced.
    pool.replace(disk, &d.0.join("newx.img")).unwrap();
    pool.rebuild(&RebuildOpts::default(), |_| {}).unwrap();
    assert_eq!(lost_ranges(&pool), lost, "the rebuild lost nothing more");
    assert_reads_outside_lost(&mut pool, &data);
    // A marked block damaged at rest: what the row gives no longer matches the unit's
    // checksum, and the degraded read says so instead of returning it.
    flip_byte(&d.0, m, m_at + 100);
    pool.fail(disk).unwrap();
    let got = pool.read(l2, 4096);
    assert!(
        matches!(got, Err(PoolError::Lost { .. })),
        "a degraded read through a damaged marked block returned {:?}",
        got.map(|b| b[..4].to_vec())
    );
    pool.close().unwrap();
}

/// The same through the served pool (stripe locks, the read retried exclusively).
#[test]
fn a_served_degraded_read_beside_a_marked_block_is_reconstructed() {
    use dev::serve_support::{Concurrency, SharedPool};
    let d = TempDir::new("marked-degraded-served");
    let MarkedRow {
        pool,
        data,
        lost,
        unit: l2,
        unit_member: disk,
        marked_member: m,
        marked_at: m_at,
        ..
    } = marked_row(&d.0);
    let sp = SharedPool::new(pool, Concurrency::Stripes).unwrap();
    sp.fail(disk).unwrap();
    let mut b = vec![0u8; 4096];
    let got = sp.read(l2, &mut b);
    assert!(
        got.is_ok() && b[..] == data[l2 as usize..l2 as usize + 4096],
        "the served degraded read returned {got:?}, {:02x?}",
        &b[..4]
    );
    let listed: Vec<(u64, u64)> = sp
        .status()
        .unwrap()
        .lost
        .iter()
        .map(|l| (l.logical_offset, l.length))
        .collect();
    assert_eq!(listed, lost, "nothing more is recorded lost");
    // The served rebuild of the member, then the damage.
    sp.replace(disk, &d.0.join("newx.img")).unwrap();
    let mut cur = dev::serve_support::RebuildCursor::new();
    while sp
        .rebuild_step(&RebuildOpts::default(), &mut cur)
        .unwrap()
        .is_some()
    {}
    let listed: Vec<(u64, u64)> = sp
        .status()
        .unwrap()
        .lost
        .iter()
        .map(|l| (l.logical_offset, l.length))
        .collect();
    assert_eq!(listed, lost, "the served rebuild lost nothing more");
    assert!(sp.read(l2, &mut b).is_ok() && b[..] == data[l2 as usize..l2 as usize + 4096]);
    flip_byte(&d.0, m, m_at + 100);
    sp.fail(disk).unwrap();
    assert!(
        matches!(sp.read(l2, &mut b), Err(PoolError::Lost { .. })),
        "a served degraded read through a damaged marked block returned {:02x?}",
        &b[..4]
    );
    sp.close().unwrap();
}

/// A rebuild through a marked block damaged at rest: the unit it reconstructs does not match
/// the replaced member's old checksum, so the rebuild records it lost (as before) instead of
/// writing wrong bytes under a valid checksum.
#[test]
fn a_rebuild_through_a_damaged_marked_block_records_the_loss() {
    let d = TempDir::new("marked-damaged-rebuild");
    let MarkedRow {
        mut pool,
        data,
        lost,
        unit: l2,
        unit_member: disk,
        marked_member: m,
        marked_at: m_at,
        ..
    } = marked_row(&d.0);
    flip_byte(&d.0, m, m_at + 100);
    pool.fail(disk).unwrap();
    pool.replace(disk, &d.0.join("newx.img")).unwrap();
    pool.rebuild(&RebuildOpts::default(), |_| {}).unwrap();
    let now = lost_ranges(&pool);
    assert!(
        now.iter().any(|&(a, n)| a <= l2 && l2 < a + n),
        "the unit rebuilt through the damaged block is listed lost: {now:?}"
    );
    assert!(lost.iter().all(|r| now.contains(r)), "{now:?}");
    assert!(matches!(pool.read(l2, 4096), Err(PoolError::Lost { .. })));
    assert_reads_outside_lost(&mut pool, &data);
    pool.close().unwrap();
}

/// A block marked lost whose own member is replaced and rebuilt: the rebuild writes back the
/// bytes its row gives (the stored ones, not the lost data) under a checksum of its own, and
/// then marks the block again, so that a descriptor rebuilt from the members alone still
/// refuses to read it; unless the user rewrote the range meanwhile, whose data then stays.
#[test]
fn a_rebuild_of_a_marked_blocks_member_marks_it_again() {
    for rewrite in [false, true] {
        let d = TempDir::new(&format!("marked-own-rebuild-{rewrite}"));
        let MarkedRow {
            mut pool,
            mut data,
            lost,
            marked_member: m,
            marked_lo: lo,
            ..
        } = marked_row(&d.0);
        let n = pool.geometry().disks();
        // The row's other marked blocks are rewritten: the one on member m is its only one,
        // and the rebuild reconstructs it without meeting another.
        let mut lost = lost;
        for &(a, len) in &lost {
            if a <= lo && lo < a + len {
                continue;
            }
            let fresh: Vec<u8> = (0..len as u32).map(|i| (i * 7 + 3) as u8).collect();
            pool.write(a, &fresh).unwrap();
            data[a as usize..(a + len) as usize].copy_from_slice(&fresh);
        }
        lost.retain(|&(a, len)| a <= lo && lo < a + len);
        assert_eq!(lost_ranges(&pool), lost);
        pool.fail(m).unwrap();
        pool.replace(m, &d.0.join("newm.img")).unwrap();
        if rewrite {
            // Rewritten whole before the rebuild: no longer lost, and not marked again.
            for &(a, len) in &lost {
                let fresh: Vec<u8> = (0..len as u32).map(|i| (i * 11 + 9) as u8).collect();
                pool.write(a, &fresh).unwrap();
                data[a as usize..(a + len) as usize].copy_from_slice(&fresh);
            }
            lost.clear();
        }
        pool.rebuild(&RebuildOpts::default(), |_| {}).unwrap();
        assert_eq!(lost_ranges(&pool), lost);
        assert_reads_outside_lost(&mut pool, &data);
        pool.close().unwrap();
        let members: Vec<PathBuf> = (0..n)
            .map(|i| match i {
                0 => d.0.join("new0.img"),
                i if i == m => d.0.join("newm.img"),
                i => member_path(&d.0, i),
            })
            .collect();
        std::fs::remove_file(d.0.join("pool.json")).unwrap();
        let mut pool = Pool::assemble(&d.0.join("pool.json"), &members, None).unwrap();
        for &(lo, len) in &lost {
            let got = pool.read(lo, len);
            assert!(
                matches!(got, Err(PoolError::Lost { .. })),
                "lost bytes {lo}+{len} read {:?} from the members alone",
                got.map(|b| b[..4].to_vec())
            );
        }
        if rewrite {
            assert_eq!(pool.read(0, data.len() as u64).unwrap(), data);
        }
        pool.close().unwrap();
    }
}
