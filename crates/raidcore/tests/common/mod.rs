//! Shared test harness: an array executed by `MemArray`, a reference model of the volume (a
//! plain byte vector) and a shadow array that receives the same writes and never fails.

#![allow(dead_code)]

use std::sync::Arc;

use layout::{build, Disk, Params, Scheme, SchemeKind};
use raidcore::{
    check_consistency, plan_read, plan_read_balanced, plan_write, ArrayState, CoreError, Geometry,
    MemArray, MemberLoad, RebuildOrder, RebuildScheduler, SpeedLimits, WritePolicy,
};

/// SplitMix64: a seeded generator for the test sequences.
#[derive(Clone)]
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        assert!(n > 0);
        self.next() % n
    }
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

/// The scheme `kind` with parameters `p`. Panics when the layout crate refuses them: a test
/// whose scheme cannot be built would otherwise check nothing.
pub fn scheme(kind: SchemeKind, p: Params) -> Arc<dyn Scheme> {
    build(kind, &p).unwrap_or_else(|e| panic!("{kind:?} {p:?}: the layout crate refuses it: {e}"))
}

/// A geometry of `cycles` cycles with `chunk` byte chunks.
pub fn geometry(s: Arc<dyn Scheme>, chunk: u64, cycles: u64) -> Geometry {
    let probe = Geometry::new(s.clone(), chunk, u64::MAX / 4).unwrap();
    let g = Geometry::new(s, chunk, probe.stride_rows() * chunk * cycles).unwrap();
    assert_eq!(g.cycles(), cycles);
    g
}

/// One logical operation of a test sequence.
#[derive(Clone, Debug)]
pub enum Req {
    Write { off: u64, data: Vec<u8> },
    Read { off: u64, len: u64 },
}

/// A seeded sequence of writes (aligned and unaligned, within a chunk, across chunks, across
/// cycles) each followed by a read of some range.
pub fn sequence(geo: &Geometry, seed: u64, writes: usize) -> Vec<Req> {
    let mut rng = Rng(seed);
    let cap = geo.capacity_bytes();
    let cb = geo.chunk_bytes();
    let per_cycle = geo.data_per_cycle() * cb;
    let mut out = Vec::new();
    for _ in 0..writes {
        let (off, len) = match rng.below(6) {
            0 => (rng.below(cap / cb) * cb, cb),
            1 => {
                let a = rng.below(cb);
                (rng.below(cap / cb) * cb + a, 1 + rng.below(cb - a))
            }
            2 => (rng.below(cap), cb + rng.below(2 * cb)),
            3 if geo.cycles() > 1 => {
                let k = 1 + rng.below(geo.cycles() - 1);
                let back = 1 + rng.below((2 * cb).min(k * per_cycle));
                (k * per_cycle - back, back + 1 + rng.below(2 * cb))
            }
            4 => (rng.below(cap), 1 + rng.below(per_cycle + cb)),
            _ => {
                // A whole stripe-ish aligned run.
                let n = 1 + rng.below(8);
                (rng.below(cap / cb) * cb, n * cb)
            }
        };
        let off = off.min(cap - 1);
        let len = len.min(cap - off).max(1);
        let data = rng.bytes(len as usize);
        out.push(Req::Write { off, data });
        let off = rng.below(cap);
        let len = 1 + rng.below((cap - off).min(3 * cb));
        out.push(Req::Read { off, len });
    }
    out
}

pub struct Harness {
    pub geo: Geometry,
    pub state: ArrayState,
    pub mem: MemArray,
    pub model: Vec<u8>,
    pub shadow: MemArray,
    pub shadow_state: ArrayState,
    pub policy: WritePolicy,
    /// Members replaced so far.
    pub replaced: Vec<Disk>,
    /// Reads so far: every other read is planned by `plan_read_balanced` with member loads
    /// drawn from this count, so every scenario also checks reads from any copy.
    pub reads: u64,
}

impl Clone for Harness {
    fn clone(&self) -> Harness {
        Harness {
            geo: self.geo.clone(),
            state: self.state.clone(),
            mem: self.mem.clone(),
            model: self.model.clone(),
            shadow: self.shadow.clone(),
            shadow_state: self.shadow_state.clone(),
            policy: self.policy.clone(),
            replaced: self.replaced.clone(),
            reads: self.reads,
        }
    }
}

/// Every member I/O of `p` starts and ends on a multiple of the geometry's I/O alignment.
pub fn assert_aligned(geo: &Geometry, p: &raidcore::Plan) {
    let al = geo.io_align_bytes();
    for io in p.reads.iter().chain(&p.writes) {
        assert!(
            io.offset_bytes.is_multiple_of(al) && (io.data.len as u64).is_multiple_of(al),
            "unaligned member I/O {io:?} (alignment {al})"
        );
    }
}

impl Harness {
    pub fn new(geo: Geometry, policy: WritePolicy) -> Harness {
        let state = ArrayState::new(&geo);
        let mem = MemArray::new(geo.disks(), geo.member_bytes_used());
        Harness {
            model: vec![0; geo.capacity_bytes() as usize],
            shadow: mem.clone(),
            shadow_state: state.clone(),
            state,
            mem,
            geo,
            policy,
            replaced: Vec::new(),
            reads: 0,
        }
    }

    pub fn try_write(&mut self, off: u64, data: &[u8]) -> Result<(), CoreError> {
        let plans = plan_write(&self.geo, &self.state, off, data.len() as u64, &self.policy)?;
        for p in &plans {
            p.assert_avoids(self.state.failed());
            assert_aligned(&self.geo, p);
            assert!(self.state.plan_is_current(p));
            let at = p.user_offset as usize;
            let mut user = data[at..at + p.buffers[0]].to_vec();
            self.mem.run(p, &mut user).unwrap();
        }
        let splans = plan_write(
            &self.geo,
            &self.shadow_state,
            off,
            data.len() as u64,
            &self.policy,
        )
        .unwrap();
        for p in &splans {
            let at = p.user_offset as usize;
            let mut user = data[at..at + p.buffers[0]].to_vec();
            self.shadow.run(p, &mut user).unwrap();
        }
        self.model[off as usize..off as usize + data.len()].copy_from_slice(data);
        Ok(())
    }

    pub fn write(&mut self, off: u64, data: &[u8]) {
        self.try_write(off, data)
            .unwrap_or_else(|e| panic!("write {off}+{}: {e}", data.len()));
    }

    pub fn try_read(&mut self, off: u64, len: u64) -> Result<Vec<u8>, CoreError> {
        self.reads += 1;
        let plans = if self.reads.is_multiple_of(2) {
            let mut rng = Rng(self.reads);
            let loads: Vec<MemberLoad> = (0..self.geo.disks())
                .map(|_| MemberLoad {
                    queued: rng.below(4) as u32,
                    head: rng.below(self.geo.member_bytes_used().max(1)),
                })
                .collect();
            plan_read_balanced(&self.geo, &self.state, off, len, &loads)?
        } else {
            plan_read(&self.geo, &self.state, off, len)?
        };
        let mut out = vec![0xCCu8; len as usize];
        for p in &plans {
            p.assert_avoids(self.state.failed());
            assert_aligned(&self.geo, p);
            let at = p.user_offset as usize;
            self.mem.run(p, &mut out[at..at + p.buffers[0]]).unwrap();
        }
        Ok(out)
    }

    pub fn check_read(&mut self, off: u64, len: u64) {
        let got = self
            .try_read(off, len)
            .unwrap_or_else(|e| panic!("read {off}+{len}: {e}"));
        let want = &self.model[off as usize..(off + len) as usize];
        if got != want {
            let first = got.iter().zip(want).position(|(a, b)| a != b).unwrap();
            panic!(
                "read {off}+{len} differs from the model at byte {} (logical {}); failed {:?}",
                first,
                off + first as u64,
                self.state.failed()
            );
        }
    }

    pub fn run(&mut self, reqs: &[Req]) {
        for r in reqs {
            match r {
                Req::Write { off, data } => self.write(*off, data),
                Req::Read { off, len } => self.check_read(*off, *len),
            }
        }
    }

    /// Reads the whole volume (one request) and a chunk-by-chunk pass, against the model.
    pub fn check_all_reads(&mut self) {
        let cap = self.geo.capacity_bytes();
        self.check_read(0, cap);
        let cb = self.geo.chunk_bytes();
        let mut off = cb / 3;
        while off < cap {
            let len = (2 * cb).min(cap - off);
            self.check_read(off, len);
            off += 5 * cb;
        }
    }

    /// Every stripe whose units are all available is consistent.
    pub fn check_consistent(&self) {
        for c in 0..self.geo.cycles() {
            check_consistency(&self.geo, &self.state, &self.mem.members, c)
                .unwrap_or_else(|e| panic!("{e} (failed {:?})", self.state.failed()));
        }
    }

    pub fn fail(&mut self, d: Disk) {
        let out = self.state.fail(&self.geo, d).unwrap();
        assert!(!out.data_lost, "failing {d} lost data");
        self.mem.remove(d);
    }

    pub fn replace(&mut self, d: Disk) {
        self.state.replace(&self.geo, d).unwrap();
        self.mem.insert(d, self.geo.member_bytes_used(), 0);
        self.replaced.push(d);
    }

    /// Rebuilds every cycle through the scheduler, replacing members when the layout needs
    /// them (in-place rebuild). Plans of one batch run in reverse order (they are independent).
    pub fn rebuild(&mut self, order: RebuildOrder) {
        let mut sched = RebuildScheduler::new(order, SpeedLimits::default());
        let mut rounds = 0;
        loop {
            rounds += 1;
            assert!(rounds < 10_000, "rebuild does not finish");
            match sched.next_plans(&self.geo, &self.state) {
                Ok(plans) if plans.is_empty() => {
                    assert!(sched.is_finished(&self.state), "scheduler stalled");
                    // A rebuild goes on without a failed member whose units the layout keeps
                    // in place (they stay lost): it is replaced and rebuilt next.
                    match self.state.awaiting_replacement().first() {
                        Some(&d) => self.replace(d),
                        None => break,
                    }
                }
                Ok(plans) => {
                    assert!(plans.len() <= sched.max_in_flight());
                    for p in plans.iter().rev() {
                        p.assert_avoids(self.state.failed());
                        assert_aligned(&self.geo, p);
                        assert!(self.state.plan_is_current(p));
                        self.mem.run(p, &mut []).unwrap();
                        // Written but not yet recorded (a crash, or another write of the
                        // batch failing, stops it here): the cycle still reads right in the
                        // layout it is recorded in.
                        let cycle_bytes = self.geo.data_per_cycle() * self.geo.chunk_bytes();
                        self.check_read(p.cycle * cycle_bytes, cycle_bytes);
                        sched.complete(&mut self.state, p);
                    }
                }
                Err(CoreError::NeedsReplacement { member }) => self.replace(member),
                Err(e) => panic!("rebuild: {e}"),
            }
        }
        let prog = sched.progress(&self.geo, &self.state);
        assert_eq!(prog.cycles_done, prog.cycles_total);
        assert_eq!(prog.in_flight, 0);
        assert!(self.state.all_clean());
    }

    /// Replaced members equal the shadow's byte for byte; every member equals the shadow at
    /// every position of the healthy layout.
    pub fn compare_with_shadow(&self) {
        assert!(self.state.failed().is_empty());
        for &d in &self.replaced {
            let a = self.mem.members[d as usize].as_ref().unwrap();
            let b = self.shadow.members[d as usize].as_ref().unwrap();
            if a != b {
                let first = a.iter().zip(b).position(|(x, y)| x != y).unwrap();
                panic!("replaced member {d} differs from the shadow at byte {first}");
            }
        }
        let cb = self.geo.chunk_bytes();
        for c in 0..self.geo.cycles() {
            for st in &self.geo.healthy().stripes {
                for u in &st.units {
                    let off = self.geo.member_offset(c, u.loc(), 0) as usize;
                    let a = &self.mem.members[u.disk as usize].as_ref().unwrap()
                        [off..off + cb as usize];
                    let b = &self.shadow.members[u.disk as usize].as_ref().unwrap()
                        [off..off + cb as usize];
                    assert!(a == b, "cycle {c}: {:?} differs from the shadow", u);
                }
            }
        }
    }
}

/// Failure sets to try: every single member; every pair when the scheme tolerates two.
pub fn failure_sets(s: &dyn Scheme, pairs: bool) -> Vec<Vec<Disk>> {
    let n = s.cycle().disks as Disk;
    let mut v: Vec<Vec<Disk>> = (0..n).map(|d| vec![d]).collect();
    if pairs && s.tolerance() >= 2 {
        for a in 0..n {
            for b in a + 1..n {
                v.push(vec![a, b]);
            }
        }
    }
    v
}

/// The whole scenario for one scheme (see tests/matrix.rs).
pub fn scenario(kind: SchemeKind, p: Params, chunk: u64, seed: u64) {
    scenario_aligned(kind, p, chunk, 1, seed);
}

/// [`scenario`] with member I/O aligned to `align` bytes.
pub fn scenario_aligned(kind: SchemeKind, p: Params, chunk: u64, align: u64, seed: u64) {
    let s = scheme(kind, p);
    let geo = geometry(s.clone(), chunk, 3).with_io_align(align).unwrap();
    let mut h = Harness::new(geo, WritePolicy::Md);
    // Healthy phase.
    let healthy_ops = sequence(&h.geo, seed, 30);
    h.run(&healthy_ops);
    h.check_all_reads();
    h.check_consistent();
    if s.tolerance() == 0 {
        return;
    }
    let sets = failure_sets(&*s, true);
    for (i, set) in sets.iter().enumerate() {
        let mut f = h.clone();
        let short = set.len() > 1;
        let n_ops = if short { 4 } else { 10 };
        let order = if i % 2 == 0 {
            RebuildOrder::Sequential
        } else {
            RebuildOrder::Parallel { max_in_flight: 2 }
        };
        for &d in set {
            f.fail(d);
        }
        // Degraded reads, then degraded writes and reads.
        if !short {
            f.check_all_reads();
        }
        f.run(&sequence(
            &f.geo,
            seed ^ ((i as u64 + 1) * 0x1234_5678),
            n_ops,
        ));
        f.check_all_reads();
        f.check_consistent();
        // Rebuild (onto spares, spare space, or replacements when in place).
        f.rebuild(order);
        f.check_all_reads();
        f.check_consistent();
        // More writes in the rebuilt layout, then replace what is still missing and copy back.
        f.run(&sequence(
            &f.geo,
            seed ^ ((i as u64 + 7) * 0x9876_5431),
            n_ops / 2,
        ));
        for d in f.state.failed().to_vec() {
            f.replace(d);
        }
        f.rebuild(order);
        f.check_all_reads();
        f.check_consistent();
        f.compare_with_shadow();
    }
}
