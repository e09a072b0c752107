//! Pools end to end on real (sparse) files, for every scheme.
//!
//! For each scheme: create a pool, write seeded pseudo-random data at random offsets and sizes
//! (aligned, unaligned, within a chunk, across chunks and across cycles) while keeping a
//! reference model of the volume, and check reads against it. Then, for every single failure
//! (and every pair for the two-parity schemes), on a copy of that pool assembled from its member
//! files (given in shuffled order):
//!
//! - degraded reads return the model's bytes and degraded writes land;
//! - a partial rebuild (`RebuildOpts::max_cycles`) leaves a pool whose cycles are half in the new
//!   layout and half in the old; the pool is reopened from its descriptor (superblock events
//!   and layout runs) in that state and still reads and writes correctly (for pairs, the second
//!   member fails in that state);
//! - the rebuild completes (replacing members first when the layout rebuilds in place),
//!   `verify` is clean and every byte matches the model;
//! - the failed members are replaced by new files and the pool copies back; each replaced
//!   member's data area is then byte-identical to the same member of a shadow pool that
//!   received the same writes and never failed, and every member matches the shadow at every
//!   position of the healthy layout.
//!
//! Pools are reopened from the descriptor (`Pool::open`) between steps. Failure sets rotate the
//! write policy (md, rmw, modthresh) and the rebuild order (batches of cycles pipelined or not,
//! one cycle at a time). Sizes are small (2 MiB members, 1 MiB of it data; 4 or 16 KiB chunks):
//! the file takes about a minute on two cores. Every configuration runs at that size, spare and
//! level-6 variants and RAID+ with n = 13, k = 4 included; the `heavy_*` soaks run them again
//! with 8 MiB members, 16 KiB chunks and more operations (ignored by default: `cargo test -p
//! dev --test pool_matrix -- --ignored`, about seven minutes on two busy cores).
//!
//! Beside the matrix: members failing under I/O (reads and a rebuild), `verify` finding a
//! flipped byte, a second failure half-way through a rebuild, and a pool outliving many more
//! replacements than the superblock has event slots.

use std::path::{Path, PathBuf};

use dev::pool::{test_opts, CreateOpts, Pool, PoolError, RebuildOpts};
use layout::{Disk, Params, SchemeKind};
use raidcore::{CoreError, WritePolicy};

/// SplitMix64: a seeded generator for the test sequences.
#[derive(Clone)]
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        assert!(n > 0);
        self.next() % n
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        let mut v = Vec::with_capacity(n + 8);
        while v.len() < n {
            v.extend_from_slice(&self.next().to_le_bytes());
        }
        v.truncate(n);
        v
    }
}

/// A directory under the system temp dir, removed on drop (kept when the test panics, so the
/// member files can be inspected).
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let d = std::env::temp_dir().join(format!(
            "raidforge-pool-matrix-{name}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        TempDir(d)
    }
    fn path(&self) -> &Path {
        &self.0
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

/// How big and how thorough a run is.
#[derive(Clone, Copy)]
struct Size {
    member_bytes: u64,
    chunk: u64,
    healthy_ops: usize,
    single_ops: usize,
    pair_ops: usize,
    /// Cycles per rebuild batch (1 = sequential).
    parallel: usize,
}

const QUICK: Size = Size {
    member_bytes: 2 << 20,
    chunk: 4096,
    healthy_ops: 24,
    single_ops: 8,
    pair_ops: 3,
    parallel: 8,
};

/// The `#[ignore]`d variants: bigger members and chunks, more operations.
const HEAVY: Size = Size {
    member_bytes: 8 << 20,
    chunk: 16 << 10,
    healthy_ops: 60,
    single_ops: 20,
    pair_ops: 8,
    parallel: 4,
};

/// One logical request of a test sequence: a write, then a read of some range.
fn sequence(
    cap: u64,
    cb: u64,
    per_cycle: u64,
    cycles: u64,
    seed: u64,
    n: usize,
) -> Vec<(u64, Vec<u8>, u64, u64)> {
    let mut rng = Rng(seed);
    let mut out = Vec::new();
    for _ in 0..n {
        let (off, len) = match rng.below(7) {
            // One aligned chunk.
            0 => (rng.below(cap / cb) * cb, cb),
            // Unaligned within a chunk.
            1 => {
                let a = rng.below(cb);
                (rng.below(cap / cb) * cb + a, 1 + rng.below(cb - a))
            }
            // Unaligned, spanning chunks.
            2 => (rng.below(cap), cb + rng.below(2 * cb)),
            // Across a cycle boundary.
            3 if cycles > 1 => {
                let k = 1 + rng.below(cycles - 1);
                let back = 1 + rng.below((2 * cb).min(k * per_cycle));
                (k * per_cycle - back, back + 1 + rng.below(2 * cb))
            }
            // Up to a whole cycle and more, anywhere.
            4 => (rng.below(cap), 1 + rng.below(per_cycle + cb)),
            // The tail of the volume.
            5 => {
                let len = 1 + rng.below(3 * cb);
                (cap.saturating_sub(len), len)
            }
            // An aligned run of whole chunks.
            _ => {
                let n = 1 + rng.below(8);
                (rng.below(cap / cb) * cb, n * cb)
            }
        };
        let off = off.min(cap - 1);
        let len = len.min(cap - off).max(1);
        let data = rng.bytes(len as usize);
        let roff = rng.below(cap);
        let rlen = 1 + rng.below((cap - roff).min(3 * cb));
        out.push((off, data, roff, rlen));
    }
    out
}

fn member_paths(dir: &Path, n: usize) -> Vec<PathBuf> {
    (0..n).map(|i| dir.join(format!("m{i}.img"))).collect()
}

/// A pool under test, a shadow pool that receives the same writes and never fails, and the
/// reference model of the volume.
struct Rig {
    name: String,
    dir: PathBuf,
    desc: PathBuf,
    pool: Option<Pool>,
    shadow: Pool,
    model: Vec<u8>,
    cap: u64,
    chunk: u64,
    per_cycle: u64,
    cycles: u64,
    /// Members replaced by new files so far.
    replaced: Vec<usize>,
    new_files: usize,
    parallel: usize,
    /// Rebuild batches in flight (1: no pipelining).
    in_flight: usize,
    /// The write policy of the pool under test (the shadow uses MD's).
    policy: WritePolicy,
}

impl Rig {
    fn pool(&mut self) -> &mut Pool {
        self.pool.as_mut().expect("pool is open")
    }

    fn write(&mut self, off: u64, data: &[u8]) {
        let name = self.name.clone();
        self.pool()
            .write(off, data)
            .unwrap_or_else(|e| panic!("{name}: write {off}+{}: {e}", data.len()));
        self.shadow
            .write(off, data)
            .unwrap_or_else(|e| panic!("{name}: shadow write {off}+{}: {e}", data.len()));
        self.model[off as usize..off as usize + data.len()].copy_from_slice(data);
    }

    fn check_read(&mut self, off: u64, len: u64) {
        let name = self.name.clone();
        let got = self
            .pool()
            .read(off, len)
            .unwrap_or_else(|e| panic!("{name}: read {off}+{len}: {e}"));
        let want = &self.model[off as usize..(off + len) as usize];
        if got != want {
            let first = got.iter().zip(want).position(|(a, b)| a != b).unwrap();
            let failed = self.pool().status().failed;
            panic!(
                "{name}: read {off}+{len} differs from the model at logical byte {} (failed {failed:?})",
                off + first as u64,
            );
        }
    }

    fn run_ops(&mut self, seed: u64, n: usize) {
        for (off, data, roff, rlen) in
            sequence(self.cap, self.chunk, self.per_cycle, self.cycles, seed, n)
        {
            self.write(off, &data);
            self.check_read(off, data.len() as u64);
            self.check_read(roff, rlen);
        }
    }

    /// The whole volume in one request, then a pass of small unaligned reads.
    fn check_all(&mut self) {
        self.check_read(0, self.cap);
        let cb = self.chunk;
        let mut off = cb / 3;
        while off < self.cap {
            let len = (2 * cb).min(self.cap - off);
            self.check_read(off, len);
            off += 7 * cb + 511;
        }
    }

    /// `verify` finds no inconsistent stripe and checks every cycle; with no member missing,
    /// every stripe is checked fully.
    fn verify_clean(&mut self) {
        let name = self.name.clone();
        let cycles = self.cycles;
        let r = self
            .pool()
            .verify()
            .unwrap_or_else(|e| panic!("{name}: verify: {e}"));
        assert_eq!(r.cycles_checked, cycles, "{name}: verify skipped cycles");
        assert!(
            r.inconsistent.is_empty(),
            "{name}: verify found inconsistent stripes {:?}",
            &r.inconsistent[..r.inconsistent.len().min(10)]
        );
        let st = self.pool().status();
        if st.failed.is_empty() && st.cycles_clean == st.cycles {
            assert_eq!(
                r.stripes_degraded, 0,
                "{name}: healthy pool has unchecked stripes"
            );
            assert!(r.stripes_checked > 0);
        }
    }

    /// Closes the pool (recording its state) and opens it again from the descriptor.
    fn reopen(&mut self) {
        let before = self.pool().status();
        self.pool.take().unwrap().close().unwrap();
        let mut p = Pool::open(&self.desc).unwrap_or_else(|e| panic!("{}: reopen: {e}", self.name));
        p.set_policy(self.policy.clone());
        let after = p.status();
        assert_eq!(
            after.state, before.state,
            "{}: state after reopen",
            self.name
        );
        assert_eq!(
            after.failed, before.failed,
            "{}: failed after reopen",
            self.name
        );
        assert_eq!(
            after.cycles_clean, before.cycles_clean,
            "{}: cycles_clean after reopen",
            self.name
        );
        assert_eq!(after.size_bytes, before.size_bytes);
        let states = |s: &dev::pool::Status| {
            s.members
                .iter()
                .map(|m| m.state.clone())
                .collect::<Vec<_>>()
        };
        assert_eq!(
            states(&after),
            states(&before),
            "{}: member states after reopen",
            self.name
        );
        self.pool = Some(p);
    }

    fn fail(&mut self, d: usize) {
        let name = self.name.clone();
        self.pool()
            .fail(d)
            .unwrap_or_else(|e| panic!("{name}: fail {d}: {e}"));
        let st = self.pool().status();
        assert!(st.failed.contains(&(d as Disk)));
        assert_eq!(st.members[d].state, "failed");
        assert_eq!(st.state, "degraded", "{name}: after failing {d}");
    }

    fn replace(&mut self, d: usize) {
        self.new_files += 1;
        let path = self.dir.join(format!("new{}-m{d}.img", self.new_files));
        let name = self.name.clone();
        self.pool()
            .replace(d, &path)
            .unwrap_or_else(|e| panic!("{name}: replace {d}: {e}"));
        let st = self.pool().status();
        assert!(!st.failed.contains(&(d as Disk)));
        assert_eq!(
            std::fs::canonicalize(&st.members[d].path).unwrap(),
            std::fs::canonicalize(&path).unwrap()
        );
        self.replaced.push(d);
    }

    fn opts(&self, max_cycles: Option<u64>) -> RebuildOpts {
        RebuildOpts {
            parallel_cycles: self.parallel,
            speed_max_bytes_per_sec: None,
            speed_min_bytes_per_sec: None,
            windows_in_flight: self.in_flight,
            max_cycles,
            // Windows of 4 KiB, 256 KiB or 16 MiB: plans cut into many pieces, a few, or none.
            window_bytes: 4096 << (self.parallel % 3 * 6),
        }
    }

    /// Rebuilds at most `max` cycles (everything with None), replacing members first when the
    /// layout rebuilds in place. Returns the cycles rebuilt.
    fn rebuild(&mut self, max: Option<u64>) -> u64 {
        let name = self.name.clone();
        let opts = self.opts(max);
        let cycles = self.cycles;
        for _ in 0..8 {
            let clean_before = self.pool().status().cycles_clean;
            let mut calls = 0u64;
            let mut last_done = 0;
            match self.pool().rebuild(&opts, |pr| {
                calls += 1;
                assert_eq!(pr.cycles_total, cycles);
                assert!(pr.cycles_done >= last_done, "progress went backwards");
                last_done = pr.cycles_done;
            }) {
                Ok(pr) => {
                    let st = self.pool().status();
                    assert_eq!(pr.cycles_done, st.cycles_clean);
                    let done = st.cycles_clean - clean_before;
                    match max {
                        None => {
                            assert_eq!(st.cycles_clean, cycles, "{name}: rebuild left cycles");
                            assert!(st.state == "clean" || st.state == "degraded");
                            if st.failed.is_empty() {
                                assert_eq!(st.state, "clean");
                            }
                            assert!(calls > 0 || done == 0);
                        }
                        Some(m) => assert_eq!(
                            done,
                            m.min(cycles - clean_before),
                            "{name}: partial rebuild"
                        ),
                    }
                    return done;
                }
                Err(PoolError::Core(CoreError::NeedsReplacement { member })) => {
                    self.replace(member as usize)
                }
                Err(e) => panic!("{name}: rebuild: {e}"),
            }
        }
        panic!("{name}: rebuild keeps asking for replacements");
    }

    fn replace_all_failed(&mut self) {
        for d in self.pool().status().failed {
            self.replace(d as usize);
        }
    }

    /// Replaced members are byte-identical to the shadow's from the data offset on; every
    /// member equals the shadow at every unit of the healthy layout.
    fn compare_with_shadow(&mut self) {
        let name = self.name.clone();
        let st = self.pool().status();
        let sst = self.shadow.status();
        assert!(st.failed.is_empty());
        assert_eq!(st.state, "clean");
        let read = |p: &Path, off: u64| {
            let b = std::fs::read(p).unwrap();
            b[off as usize..].to_vec()
        };
        let mine: Vec<Vec<u8>> = st
            .members
            .iter()
            .map(|m| read(&m.path, m.data_offset_bytes))
            .collect();
        let theirs: Vec<Vec<u8>> = sst
            .members
            .iter()
            .map(|m| read(&m.path, m.data_offset_bytes))
            .collect();
        let mut replaced = self.replaced.clone();
        replaced.sort();
        replaced.dedup();
        assert!(!replaced.is_empty(), "{name}: nothing was replaced");
        for &d in &replaced {
            assert_eq!(mine[d].len(), theirs[d].len(), "{name}: member {d} size");
            if mine[d] != theirs[d] {
                let first = mine[d]
                    .iter()
                    .zip(&theirs[d])
                    .position(|(a, b)| a != b)
                    .unwrap();
                panic!("{name}: replaced member {d} differs from the shadow at data byte {first}");
            }
        }
        let geo = self.shadow.geometry().clone();
        let cb = geo.chunk_bytes() as usize;
        for c in 0..geo.cycles() {
            for st in &geo.healthy().stripes {
                for u in &st.units {
                    let off = geo.member_offset(c, u.loc(), 0) as usize;
                    let d = u.disk as usize;
                    assert!(
                        mine[d][off..off + cb] == theirs[d][off..off + cb],
                        "{name}: cycle {c}: {u:?} differs from the shadow"
                    );
                }
            }
        }
    }
}

/// Copies a file, leaving 64 KiB blocks of zeros as holes (members are mostly empty).
fn sparse_copy(from: &Path, to: &Path) {
    use std::os::unix::fs::FileExt;
    let b = std::fs::read(from).unwrap();
    let f = std::fs::File::create(to).unwrap();
    f.set_len(b.len() as u64).unwrap();
    let zeros = vec![0u8; 64 << 10];
    for (i, block) in b.chunks(64 << 10).enumerate() {
        if block != &zeros[..block.len()] {
            f.write_all_at(block, (i as u64) << 16).unwrap();
        }
    }
}

/// Copies the member files of the pool in `from` into `to` and assembles a pool from them
/// (paths in shuffled order).
fn clone_pool(from: &[PathBuf], to: &Path, shuffle: u64) -> (Pool, PathBuf) {
    std::fs::create_dir_all(to).unwrap();
    let mut paths: Vec<PathBuf> = from
        .iter()
        .map(|p| {
            let q = to.join(p.file_name().unwrap());
            sparse_copy(p, &q);
            q
        })
        .collect();
    let mut rng = Rng(shuffle);
    for i in (1..paths.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        paths.swap(i, j);
    }
    let desc = to.join("pool.json");
    let pool = Pool::assemble(&desc, &paths, None)
        .unwrap_or_else(|e| panic!("assemble {}: {e}", to.display()));
    (pool, desc)
}

/// Failure sets: every member; every pair when asked.
fn failure_sets(n: usize, pairs: bool) -> Vec<Vec<usize>> {
    let mut v: Vec<Vec<usize>> = (0..n).map(|d| vec![d]).collect();
    if pairs {
        for a in 0..n {
            for b in a + 1..n {
                v.push(vec![a, b]);
            }
        }
    }
    v
}

/// The whole scenario for one scheme. `pairs`: also every pair of failures.
fn scenario(name: &str, kind: SchemeKind, p: Params, size: Size, seed: u64, pairs: bool) {
    let tmp = TempDir::new(name);
    let n = p.disks.unwrap();
    let base_dir = tmp.path().join("base");
    std::fs::create_dir_all(&base_dir).unwrap();
    let members = member_paths(&base_dir, n);
    let desc = base_dir.join("pool.json");
    let mut pool = Pool::create(
        &desc,
        CreateOpts {
            params: p.clone(),
            chunk_bytes: size.chunk,
            ..test_opts(kind, &base_dir, n, size.member_bytes)
        },
    )
    .unwrap_or_else(|e| panic!("{name}: create: {e}"));
    let geo = pool.geometry().clone();
    let cap = pool.capacity_bytes();
    eprintln!(
        "{name}: {} cycles of {} stride rows, {cap} bytes",
        geo.cycles(),
        geo.stride_rows()
    );
    let st = pool.status();
    assert_eq!(st.state, "clean");
    assert_eq!(st.scheme, kind.name());
    assert_eq!(st.size_bytes, cap);
    assert_eq!(st.chunk_bytes, size.chunk);
    assert!(
        geo.cycles() >= 4,
        "{name}: only {} cycles; use bigger members",
        geo.cycles()
    );
    // Every member file is sparse-created at the member size.
    for m in &members {
        assert_eq!(std::fs::metadata(m).unwrap().len(), size.member_bytes);
    }
    // The healthy phase, run on the base pool; its copies start every failure set.
    let shadow_dir = tmp.path().join("base-shadow");
    let (shadow, _) = clone_pool(&members, &shadow_dir, seed);
    let mut rig = Rig {
        name: name.to_string(),
        dir: base_dir.clone(),
        desc: desc.clone(),
        pool: None,
        shadow,
        model: vec![0; cap as usize],
        cap,
        chunk: size.chunk,
        per_cycle: geo.data_per_cycle() * size.chunk,
        cycles: geo.cycles(),
        replaced: Vec::new(),
        new_files: 0,
        parallel: size.parallel,
        in_flight: 2,
        policy: WritePolicy::Md,
    };
    // A new pool reads as zeros.
    pool.write(0, &[]).unwrap();
    rig.pool = Some(pool);
    rig.check_read(0, cap);
    rig.run_ops(seed, size.healthy_ops);
    rig.check_all();
    rig.verify_clean();
    rig.reopen();
    rig.check_all();
    let model = rig.model.clone();
    rig.pool.take().unwrap().close().unwrap();
    drop(rig);
    std::fs::remove_dir_all(&shadow_dir).unwrap();

    let tolerance = layout::build(kind, &p).unwrap().tolerance();
    if tolerance == 0 {
        no_redundancy(name, &members, tmp.path(), &model);
        return;
    }
    for (i, set) in failure_sets(n, pairs && tolerance >= 2).iter().enumerate() {
        let label = format!("{name} failing {set:?}");
        let set_dir = tmp.path().join(format!("set{i}"));
        let (pool, desc) = clone_pool(&members, &set_dir.join("main"), seed ^ i as u64);
        let (shadow, _) = clone_pool(&members, &set_dir.join("shadow"), !seed ^ i as u64);
        let mut rig = Rig {
            name: label,
            dir: set_dir.clone(),
            desc,
            pool: Some(pool),
            shadow,
            model: model.clone(),
            cap,
            chunk: size.chunk,
            per_cycle: geo.data_per_cycle() * size.chunk,
            cycles: geo.cycles(),
            replaced: Vec::new(),
            new_files: 0,
            // Rebuild orders vary by set: batches of cycles, pipelined or not, or one cycle at
            // a time like MD.
            parallel: [size.parallel, 1, 3, 1][i % 4],
            in_flight: [4, 2, 1, 3][i % 4],
            policy: [WritePolicy::Md, WritePolicy::Rmw, WritePolicy::Modthresh][i % 3].clone(),
        };
        let policy = rig.policy.clone();
        rig.pool().set_policy(policy);
        let s = seed ^ ((i as u64 + 1) * 0x1234_5678);
        if set.len() == 1 {
            single(&mut rig, set[0], size.single_ops, s, i);
        } else {
            pair(&mut rig, set[0], set[1], size.pair_ops, s, i);
        }
        drop(rig);
        std::fs::remove_dir_all(&set_dir).unwrap();
    }
}

/// One member fails: degraded I/O, a partial rebuild and reopen, the full rebuild, copy-back.
fn single(rig: &mut Rig, d: usize, ops: usize, seed: u64, i: usize) {
    rig.fail(d);
    if i.is_multiple_of(2) {
        rig.reopen();
    }
    rig.check_all();
    rig.run_ops(seed, ops);
    rig.verify_clean();
    // Rebuild a third of the cycles, then look at the pool from a fresh open.
    let part = (rig.cycles / 3).max(1);
    rig.rebuild(Some(part));
    let st = rig.pool().status();
    assert_eq!(st.cycles_clean, part, "{}: partial rebuild", rig.name);
    assert!(
        st.state == "degraded" || st.state == "rebuilding",
        "{}: state {} mid-rebuild",
        rig.name,
        st.state
    );
    rig.reopen();
    rig.check_all();
    rig.run_ops(seed ^ 0x55, ops / 2);
    rig.verify_clean();
    if i % 3 == 1 {
        rig.reopen();
    }
    rig.rebuild(None);
    rig.check_all();
    rig.verify_clean();
    // More writes in the rebuilt layout; then replace what is still missing and copy back.
    rig.run_ops(seed ^ 0xAA, ops / 2);
    rig.replace_all_failed();
    if i % 2 == 1 {
        rig.reopen();
    }
    rig.rebuild(None);
    rig.check_all();
    rig.verify_clean();
    rig.compare_with_shadow();
    rig.reopen();
    rig.check_read(0, rig.cap);
}

/// Two members fail, the second while the rebuild after the first is half done.
fn pair(rig: &mut Rig, a: usize, b: usize, ops: usize, seed: u64, i: usize) {
    rig.fail(a);
    rig.run_ops(seed, ops);
    let part = (rig.cycles / 2).max(1);
    rig.rebuild(Some(part));
    assert_eq!(rig.pool().status().cycles_clean, part);
    rig.fail(b);
    if rig.replaced.contains(&a) {
        // Replaced and half rebuilt when b failed: still being rebuilt.
        assert_eq!(
            rig.pool().status().members[a].state,
            "rebuilding",
            "{}",
            rig.name
        );
    }
    if i.is_multiple_of(2) {
        rig.reopen();
    }
    rig.check_read(0, rig.cap);
    rig.run_ops(seed ^ 1, ops);
    rig.verify_clean();
    rig.rebuild(None);
    rig.check_read(0, rig.cap);
    rig.verify_clean();
    rig.run_ops(seed ^ 2, ops);
    rig.replace_all_failed();
    if i % 2 == 1 {
        rig.reopen();
    }
    rig.rebuild(None);
    rig.check_all();
    rig.verify_clean();
    rig.compare_with_shadow();
}

/// A scheme without redundancy: a failure loses data, and reads then fail instead of returning
/// wrong bytes; the healthy copy still reads back after a reopen.
fn no_redundancy(name: &str, members: &[PathBuf], tmp: &Path, model: &[u8]) {
    let (mut pool, desc) = clone_pool(members, &tmp.join("fail"), 1);
    assert_eq!(
        pool.read(0, model.len() as u64).unwrap(),
        model,
        "{name}: assembled copy"
    );
    let e = pool.fail(0).expect_err("failing a raid0 member loses data");
    assert!(e.to_string().contains("lost data"), "{name}: {e}");
    assert_eq!(pool.status().state, "failed");
    let e = pool
        .read(0, model.len() as u64)
        .expect_err("reads of a failed pool");
    assert!(
        matches!(e, PoolError::Core(CoreError::DataLost { .. })),
        "{name}: {e}"
    );
    drop(pool);
    let again = Pool::open(&desc).unwrap();
    assert_eq!(again.status().state, "failed");
}

fn d(n: usize) -> Params {
    Params {
        disks: Some(n),
        ..Params::default()
    }
}

#[test]
fn raid0() {
    scenario("raid0", SchemeKind::Raid0, d(4), QUICK, 1, false);
}

#[test]
fn raid1() {
    scenario("raid1", SchemeKind::Raid1, d(3), QUICK, 2, false);
}

#[test]
fn raid10() {
    scenario("raid10", SchemeKind::Raid10, d(4), QUICK, 3, false);
}

#[test]
fn raid4() {
    scenario("raid4", SchemeKind::Raid4, d(5), QUICK, 4, false);
}

#[test]
fn raid5() {
    let s = Size {
        chunk: 16 << 10,
        ..QUICK
    };
    scenario("raid5", SchemeKind::Raid5, d(5), s, 5, false);
}

#[test]
fn raid5_with_spare() {
    let p = Params { spares: 1, ..d(6) };
    scenario("raid5-spare", SchemeKind::Raid5, p, QUICK, 6, false);
}

#[test]
fn raid6() {
    scenario("raid6", SchemeKind::Raid6, d(6), QUICK, 7, true);
}

#[test]
fn raid50() {
    let p = Params {
        width: Some(3),
        ..d(6)
    };
    scenario("raid50", SchemeKind::Raid50, p, QUICK, 8, false);
}

#[test]
fn raid5c() {
    let p = Params {
        width: Some(4),
        ..d(8)
    };
    scenario("raid5c", SchemeKind::Raid5c, p, QUICK, 9, false);
}

#[test]
fn raid60() {
    let p = Params {
        width: Some(4),
        ..d(8)
    };
    scenario("raid60", SchemeKind::Raid60, p, QUICK, 10, true);
}

#[test]
fn random() {
    let p = Params {
        width: Some(4),
        seed: 3,
        stripes: Some(12),
        ..d(7)
    };
    scenario("random", SchemeKind::Random, p, QUICK, 10, false);
}

#[test]
fn hash() {
    let p = Params {
        width: Some(3),
        seed: 5,
        stripes: Some(12),
        ..d(6)
    };
    scenario("hash", SchemeKind::Hash, p, QUICK, 11, false);
}

#[test]
fn s2raid5() {
    let p = Params {
        group: Some(3),
        partitions: Some(3),
        ..d(9)
    };
    let s = Size {
        chunk: 16 << 10,
        ..QUICK
    };
    scenario("s2raid5", SchemeKind::S2Raid5, p, s, 12, false);
}

#[test]
fn s2raid5_with_spare() {
    let p = Params {
        group: Some(3),
        partitions: Some(3),
        spares: 1,
        ..d(10)
    };
    scenario("s2raid5-spare", SchemeKind::S2Raid5, p, QUICK, 13, false);
}

#[test]
fn s2raid10() {
    let p = Params {
        group: Some(3),
        partitions: Some(3),
        ..d(9)
    };
    scenario("s2raid10", SchemeKind::S2Raid10, p, QUICK, 14, false);
}

#[test]
fn raidplus_5_3() {
    let p = Params {
        width: Some(3),
        ..d(5)
    };
    scenario("raidplus-5-3", SchemeKind::RaidPlus, p, QUICK, 15, false);
}

#[test]
fn raidplus_7_4_level6() {
    let p = Params {
        width: Some(4),
        level: Some(6),
        ..d(7)
    };
    scenario("raidplus-7-4-l6", SchemeKind::RaidPlus, p, QUICK, 16, true);
}

#[test]
fn rm2() {
    scenario("rm2", SchemeKind::Rm2, d(8), QUICK, 17, true);
}

#[test]
fn raidh() {
    let p = Params {
        weights: Some(vec![0, 0, 1, 1, 2]),
        ..d(5)
    };
    scenario("raidh", SchemeKind::RaidH, p, QUICK, 18, false);
}

// The configurations the heavy soaks below run at full size, at the quick size here so that
// every run of the suite covers them: random and hash placement at level 6 (every pair of
// failures), S2-RAID10 and RM2 with a spare, RAIDH with the RAID4S weights, and RAID+ at the
// benchmark shape n = 13, k = 4.

#[test]
fn random_level6() {
    let p = Params {
        width: Some(4),
        level: Some(6),
        seed: 4,
        stripes: Some(9),
        ..d(6)
    };
    scenario("random6", SchemeKind::Random, p, QUICK, 31, true);
}

#[test]
fn hash_level6() {
    let p = Params {
        width: Some(4),
        level: Some(6),
        seed: 5,
        stripes: Some(9),
        ..d(6)
    };
    scenario("hash6", SchemeKind::Hash, p, QUICK, 32, true);
}

#[test]
fn s2raid10_with_spare() {
    let p = Params {
        group: Some(3),
        partitions: Some(3),
        spares: 1,
        ..d(10)
    };
    scenario("s2raid10-spare", SchemeKind::S2Raid10, p, QUICK, 33, false);
}

#[test]
fn rm2_with_spare() {
    let p = Params { spares: 1, ..d(9) };
    scenario("rm2-spare", SchemeKind::Rm2, p, QUICK, 34, true);
}

#[test]
fn raid4s_weights() {
    let p = Params {
        weights: Some(vec![0, 0, 0, 0, 5]),
        ..d(5)
    };
    scenario("raid4s", SchemeKind::RaidH, p, QUICK, 35, false);
}

#[test]
fn raidplus_13_4() {
    let p = Params {
        width: Some(4),
        ..d(13)
    };
    scenario("raidplus-13-4", SchemeKind::RaidPlus, p, QUICK, 36, false);
}

/// Members that stop answering while the pool is open (their files are cut short, so every
/// read of them fails): a read fails the member and is answered degraded, a rebuild that loses
/// a second member part-way goes on degraded and finishes (the second member replaced later);
/// and a failed member whose file no longer holds a superblock does not keep the pool from
/// opening.
#[test]
fn members_failing_under_io() {
    let tmp = TempDir::new("faults");
    let n = 6;
    let members = member_paths(tmp.path(), n);
    let desc = tmp.path().join("pool.json");
    let mut pool = Pool::create(
        &desc,
        CreateOpts {
            chunk_bytes: 4096,
            ..test_opts(SchemeKind::Raid6, tmp.path(), n, 2 << 20)
        },
    )
    .unwrap();
    let cap = pool.capacity_bytes();
    let mut rng = Rng(99);
    let model = rng.bytes(cap as usize);
    pool.write(0, &model).unwrap();
    let cut = |i: usize| {
        std::fs::OpenOptions::new()
            .write(true)
            .open(&members[i])
            .unwrap()
            .set_len(0)
            .unwrap()
    };
    // Member 1 dies; the next read notices, fails it and still returns the data.
    cut(1);
    assert_eq!(pool.read(0, cap).unwrap(), model);
    let st = pool.status();
    assert_eq!(st.failed, vec![1]);
    assert_eq!(st.state, "degraded");
    drop(pool);
    // Its file holds no superblock any more; the pool opens degraded all the same.
    let mut pool = Pool::open(&desc).unwrap();
    assert_eq!(pool.status().failed, vec![1]);
    assert_eq!(pool.read(0, cap).unwrap(), model);
    pool.replace(1, &tmp.path().join("new1.img")).unwrap();
    // Member 4 dies during the rebuild onto the replacement: the rebuild goes on degraded
    // (issue 25), rebuilding member 1's units from the four members left.
    let cycles = pool.geometry().cycles();
    let mut batches = 0;
    let mut cut_at = None;
    let pr = pool
        .rebuild(
            &RebuildOpts {
                parallel_cycles: 2,
                ..RebuildOpts::default()
            },
            |pr| {
                batches += 1;
                if batches == 3 {
                    assert!(pr.cycles_done < cycles);
                    cut_at = Some(pr.cycles_done);
                    cut(4);
                }
            },
        )
        .expect("RAID6 rebuilds member 1 with member 4 gone too");
    assert!(
        cut_at.is_some_and(|c| c < cycles),
        "member 4 died mid-rebuild"
    );
    assert_eq!(pr.cycles_done, cycles);
    let st = pool.status();
    assert_eq!(st.failed, vec![4]);
    assert_eq!(st.cycles_clean, cycles);
    assert_eq!(st.fault_tolerance, 1, "member 1 is rebuilt");
    assert_eq!(pool.read(0, cap).unwrap(), model);
    drop(pool);
    let mut pool = Pool::open(&desc).unwrap();
    assert_eq!(pool.read(0, cap).unwrap(), model);
    // With member 0 gone too, member 1's rebuilt units carry the reads.
    pool.fail(0).unwrap();
    assert_eq!(pool.read(0, cap).unwrap(), model);
    pool.replace(0, &tmp.path().join("new0.img")).unwrap();
    pool.replace(4, &tmp.path().join("new4.img")).unwrap();
    pool.rebuild(&RebuildOpts::default(), |_| {}).unwrap();
    let st = pool.status();
    assert_eq!(st.state, "clean");
    assert!(st.failed.is_empty());
    let v = pool.verify().unwrap();
    assert!(v.inconsistent.is_empty() && v.stripes_degraded == 0);
    assert_eq!(pool.read(0, cap).unwrap(), model);
    pool.close().unwrap();
    assert_eq!(Pool::open(&desc).unwrap().read(0, cap).unwrap(), model);
}

/// `verify` is not blind: one flipped byte in a member's data area is reported as the stripe
/// holding it, for mirrors, XOR, P+Q and RM2's shared-data groups; the other stripes stay
/// consistent.
#[test]
fn verify_finds_a_flipped_byte() {
    let cases = [
        ("raid1", SchemeKind::Raid1, d(3)),
        ("raid5", SchemeKind::Raid5, d(5)),
        ("raid6", SchemeKind::Raid6, d(6)),
        ("rm2", SchemeKind::Rm2, d(8)),
        (
            "raidplus",
            SchemeKind::RaidPlus,
            Params {
                width: Some(3),
                ..d(5)
            },
        ),
    ];
    for (name, kind, p) in cases {
        let tmp = TempDir::new(&format!("verify-{name}"));
        let n = p.disks.unwrap();
        let members = member_paths(tmp.path(), n);
        let mut pool = Pool::create(
            &tmp.path().join("pool.json"),
            CreateOpts {
                params: p,
                chunk_bytes: 4096,
                ..test_opts(kind, tmp.path(), n, 2 << 20)
            },
        )
        .unwrap();
        let cap = pool.capacity_bytes();
        pool.write(0, &Rng(5).bytes(cap as usize)).unwrap();
        assert!(pool.verify().unwrap().inconsistent.is_empty(), "{name}");
        let geo = pool.geometry().clone();
        let off0 = pool.status().members[0].data_offset_bytes;
        let mut rng = Rng(name.len() as u64);
        for _ in 0..3 {
            // A unit of the healthy layout, somewhere in the pool.
            let c = rng.below(geo.cycles());
            let stripes = &geo.healthy().stripes;
            let si = rng.below(stripes.len() as u64) as usize;
            let u = stripes[si].units[rng.below(stripes[si].units.len() as u64) as usize];
            let at = off0 + geo.member_offset(c, u.loc(), rng.below(geo.chunk_bytes()));
            let path = &members[u.disk as usize];
            let mut b = std::fs::read(path).unwrap();
            b[at as usize] ^= 0x10;
            std::fs::write(path, &b).unwrap();
            let r = pool.verify().unwrap();
            // Every stripe holding that unit, and only those.
            let mut want: Vec<(u64, usize)> = stripes
                .iter()
                .enumerate()
                .filter(|(_, s)| s.units.iter().any(|v| v.loc() == u.loc()))
                .map(|(i, _)| (c, i))
                .collect();
            want.sort();
            let mut got = r.inconsistent.clone();
            got.sort();
            assert_eq!(got, want, "{name}: flipped {u:?} of cycle {c}");
            b[at as usize] ^= 0x10;
            std::fs::write(path, &b).unwrap();
        }
        assert!(pool.verify().unwrap().inconsistent.is_empty(), "{name}");
    }
}

/// A second failure before the first rebuild finished loses only the cycles not yet rebuilt:
/// the pool says it has failed, the rebuilt cycles still read back, the others are refused
/// (never returned wrong), and nothing panics.
#[test]
fn second_failure_mid_rebuild_loses_only_unrebuilt_cycles() {
    let tmp = TempDir::new("partial-loss");
    let n = 6;
    let mut pool = Pool::create(
        &tmp.path().join("pool.json"),
        CreateOpts {
            params: Params { spares: 1, ..d(n) },
            chunk_bytes: 4096,
            ..test_opts(SchemeKind::Raid5, tmp.path(), n, 2 << 20)
        },
    )
    .unwrap();
    let cap = pool.capacity_bytes();
    let model = Rng(7).bytes(cap as usize);
    pool.write(0, &model).unwrap();
    pool.fail(0).unwrap();
    let part = pool.geometry().cycles() / 2;
    pool.rebuild(
        &RebuildOpts {
            max_cycles: Some(part),
            ..RebuildOpts::default()
        },
        |_| {},
    )
    .unwrap();
    let e = pool.fail(1).expect_err("a second failure loses data");
    assert!(e.to_string().contains("lost data"), "{e}");
    assert_eq!(pool.status().state, "failed");
    let per_cycle = pool.geometry().data_per_cycle() * pool.geometry().chunk_bytes();
    let rebuilt = part * per_cycle;
    assert_eq!(pool.read(0, rebuilt).unwrap(), &model[..rebuilt as usize]);
    let e = pool.read(rebuilt, per_cycle).expect_err("lost cycle");
    assert!(
        matches!(e, PoolError::Core(CoreError::DataLost { .. })),
        "{e}"
    );
    let e = pool.read(0, cap).expect_err("a read touching a lost cycle");
    assert!(matches!(e, PoolError::Core(CoreError::DataLost { .. })));
    // Writes to lost cycles are refused too; writes to rebuilt ones land.
    assert!(pool.write(rebuilt, &[1, 2, 3]).is_err());
    pool.write(10, &[9; 100]).unwrap();
    let mut m = model[..rebuilt as usize].to_vec();
    m[10..110].fill(9);
    assert_eq!(pool.read(0, rebuilt).unwrap(), m);
}

/// A pool outlives many member replacements: the superblock keeps only the history the
/// current layout needs, so failing, replacing and rebuilding again and again (far more than
/// the superblock's 64 event slots) keeps working and keeps the data.
#[test]
fn many_replacements_over_a_pool_lifetime() {
    let tmp = TempDir::new("lifetime");
    let n = 3;
    let desc = tmp.path().join("pool.json");
    let mut pool = Pool::create(
        &desc,
        CreateOpts {
            chunk_bytes: 4096,
            ..test_opts(SchemeKind::Raid5, tmp.path(), n, (1 << 20) + (96 << 10))
        },
    )
    .unwrap();
    let cap = pool.capacity_bytes();
    let mut rng = Rng(11);
    let mut model = rng.bytes(cap as usize);
    pool.write(0, &model).unwrap();
    for round in 0..40 {
        let m = round % n;
        pool.fail(m)
            .unwrap_or_else(|e| panic!("round {round}: fail: {e}"));
        let off = rng.below(cap - 100);
        let data = rng.bytes(100);
        pool.write(off, &data).unwrap();
        model[off as usize..off as usize + 100].copy_from_slice(&data);
        pool.replace(m, &tmp.path().join(format!("r{round}.img")))
            .unwrap_or_else(|e| panic!("round {round}: replace: {e}"));
        if round % 5 == 4 {
            pool.close().unwrap();
            pool = Pool::open(&desc).unwrap();
        }
        pool.rebuild(&RebuildOpts::default(), |_| {})
            .unwrap_or_else(|e| panic!("round {round}: rebuild: {e}"));
        assert_eq!(pool.status().state, "clean");
        // The previous member file is no longer part of the pool.
        let old = if round >= n {
            tmp.path().join(format!("r{}.img", round - n))
        } else {
            tmp.path().join(format!("m{m}.img"))
        };
        std::fs::remove_file(old).unwrap();
    }
    assert_eq!(pool.read(0, cap).unwrap(), model);
    pool.close().unwrap();
    let mut pool = Pool::open(&desc).unwrap();
    assert_eq!(pool.read(0, cap).unwrap(), model);
    assert!(pool.verify().unwrap().inconsistent.is_empty());
}

// Soaks: the configurations above (every one of them also runs at the quick size in every
// run of the suite) with bigger members and chunks and more operations. Several minutes on two
// cores: `cargo test -p dev --test pool_matrix -- --ignored`.

#[test]
#[ignore = "soak (minutes): cargo test -p dev --test pool_matrix -- --ignored"]
fn heavy_classic() {
    let p = |n, w, sp| Params {
        width: w,
        spares: sp,
        ..d(n)
    };
    scenario("heavy-raid1", SchemeKind::Raid1, d(4), HEAVY, 101, false);
    scenario("heavy-raid10", SchemeKind::Raid10, d(5), HEAVY, 102, false);
    scenario("heavy-raid4", SchemeKind::Raid4, d(6), HEAVY, 103, false);
    scenario("heavy-raid5", SchemeKind::Raid5, d(7), HEAVY, 104, false);
    let spare = p(7, None, 1);
    scenario(
        "heavy-raid5-spare",
        SchemeKind::Raid5,
        spare,
        HEAVY,
        105,
        false,
    );
    scenario("heavy-raid6", SchemeKind::Raid6, d(7), HEAVY, 106, true);
    let r50 = p(7, Some(3), 1);
    scenario(
        "heavy-raid50-spare",
        SchemeKind::Raid50,
        r50,
        HEAVY,
        107,
        false,
    );
    let r5c = p(9, Some(3), 0);
    scenario("heavy-raid5c", SchemeKind::Raid5c, r5c, HEAVY, 108, false);
}

#[test]
#[ignore = "soak (minutes): cargo test -p dev --test pool_matrix -- --ignored"]
fn heavy_declustered() {
    let random6 = Params {
        width: Some(4),
        level: Some(6),
        seed: 4,
        stripes: Some(10),
        ..d(7)
    };
    scenario(
        "heavy-random6",
        SchemeKind::Random,
        random6,
        HEAVY,
        111,
        true,
    );
    let hash6 = Params {
        width: Some(4),
        level: Some(6),
        seed: 5,
        stripes: Some(12),
        ..d(7)
    };
    scenario("heavy-hash6", SchemeKind::Hash, hash6, HEAVY, 112, true);
    let s2 = Params {
        group: Some(3),
        partitions: Some(3),
        spares: 1,
        ..d(10)
    };
    scenario(
        "heavy-s2raid10-spare",
        SchemeKind::S2Raid10,
        s2,
        HEAVY,
        113,
        false,
    );
    let rm2 = Params { spares: 1, ..d(9) };
    scenario("heavy-rm2-spare", SchemeKind::Rm2, rm2, HEAVY, 114, true);
    let raidh = Params {
        weights: Some(vec![0, 0, 0, 0, 5]),
        ..d(5)
    };
    scenario("heavy-raid4s", SchemeKind::RaidH, raidh, HEAVY, 115, false);
}

/// RAID+ at the benchmark shape (n = 13, k = 4), every single failure.
#[test]
#[ignore = "soak (minutes): cargo test -p dev --test pool_matrix -- --ignored"]
fn heavy_raidplus_13_4() {
    let p = Params {
        width: Some(4),
        ..d(13)
    };
    let size = Size {
        member_bytes: 24 << 20,
        chunk: 4096,
        ..HEAVY
    };
    scenario(
        "heavy-raidplus-13-4",
        SchemeKind::RaidPlus,
        p,
        size,
        121,
        false,
    );
}
