//! Plans: what an executor does to serve one request (or rebuild one cycle).
//!
//! ## Buffers
//!
//! A plan names byte buffers by number; `buffers[i]` is buffer `i`'s length in bytes. Buffer 0
//! is the caller's *user buffer*: for a [`PlanKind::Read`] the destination of the read, for a
//! [`PlanKind::Write`] the source of the write (never written by the plan), for a rebuild empty.
//! When a request spans several cycles it becomes several plans; buffer 0 of each is the part
//! `request[user_offset .. user_offset + buffers[0]]` of the caller's bytes. Every other buffer
//! is scratch the executor allocates for the plan (its initial contents do not matter: the
//! planner never reads a byte it has not filled, which [`Plan::validate`] checks).
//!
//! ## Execution contract (what an executor must do)
//!
//! 1. Take the plan's stripe locks ([`Plan::locks`], all or nothing, in
//!    [`Plan::lock_mode`]: shared for a read, exclusive otherwise; see
//!    [`crate::StripeLocks`]) and check the plan is current
//!    ([`crate::ArrayState::plan_is_current`]); otherwise re-plan.
//! 2. **Phase 1**: perform every entry of [`Plan::reads`] (member bytes at `offset_bytes` into
//!    the slice), in any order, in parallel if it likes.
//! 3. **Phase 2**: perform the [`Plan::ops`] strictly in order; each is one `codec` call (see
//!    [`Op`]). Every slice an op names is in bounds, all slices of one op are pairwise
//!    non-overlapping (they may share a buffer), and codec ops name slices of equal length.
//! 4. **Phase 3**: perform every entry of [`Plan::writes`] (slice to member bytes), in any
//!    order, in parallel if it likes. No two writes of a plan overlap on a member.
//! 5. Release the locks. For a rebuild plan, call [`crate::ArrayState::mark_rebuilt`] (or
//!    [`crate::RebuildScheduler::complete`]) only after every write is durable.
//!
//! Reads and writes never target a failed member, and a plan reads every member range it needs
//! before it writes any, so member ranges may be both read and written by one plan (a rebuild
//! that swaps units relies on this). Member offsets are relative to the member's data area (the
//! executor adds its data offset, e.g. past a superblock).

use std::collections::BTreeMap;
use std::fmt;

use layout::Disk;

use crate::array::StripeId;
use crate::lock::LockMode;
use crate::policy::WriteMode;

/// A byte range of a plan buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Slice {
    /// Buffer number (0 = the user buffer).
    pub buf: usize,
    /// Offset in the buffer, bytes.
    pub off: usize,
    /// Length, bytes.
    pub len: usize,
}

impl Slice {
    /// A slice of buffer `buf`.
    pub fn new(buf: usize, off: usize, len: usize) -> Slice {
        Slice { buf, off, len }
    }
    /// The whole of a buffer of `len` bytes.
    pub fn whole(buf: usize, len: usize) -> Slice {
        Slice { buf, off: 0, len }
    }
    /// End offset (exclusive).
    pub fn end(&self) -> usize {
        self.off + self.len
    }
    /// The sub-slice `off .. off + len` of this slice.
    pub fn sub(&self, off: usize, len: usize) -> Slice {
        assert!(off + len <= self.len, "sub-slice {off}+{len} of {self:?}");
        Slice {
            buf: self.buf,
            off: self.off + off,
            len,
        }
    }
    /// True when both name a common byte.
    pub fn overlaps(&self, other: &Slice) -> bool {
        self.buf == other.buf
            && self.len > 0
            && other.len > 0
            && self.off < other.end()
            && other.off < self.end()
    }
}

/// One member read or write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemberIo {
    /// The member.
    pub member: Disk,
    /// Byte offset in the member's data area.
    pub offset_bytes: u64,
    /// Where the bytes go (read) or come from (write); its length is the I/O size.
    pub data: Slice,
}

/// One computation, mapping one-to-one onto a `codec` call (or a memory copy / fill).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// `dst = src` (equal lengths).
    Copy {
        /// Source.
        src: Slice,
        /// Destination.
        dst: Slice,
    },
    /// `dst = 0`.
    Zero {
        /// Destination.
        dst: Slice,
    },
    /// `codec::xor::encode(data, p)`.
    XorEncode {
        /// Data units, in stripe order.
        data: Vec<Slice>,
        /// Parity (output).
        p: Slice,
    },
    /// `codec::pq::encode(data, p, q)`; data index i has Q coefficient g^i.
    PqEncode {
        /// Data units, in stripe order.
        data: Vec<Slice>,
        /// P (output).
        p: Slice,
        /// Q (output).
        q: Slice,
    },
    /// `codec::xor::update(parity, old, new)`: `parity ^= old ^ new`, in place.
    XorUpdate {
        /// Parity, updated in place.
        parity: Slice,
        /// The data unit's old contents.
        old: Slice,
        /// The data unit's new contents.
        new: Slice,
    },
    /// `codec::pq::update(p, q, index, old, new)`, in place on `p` and `q`.
    PqUpdate {
        /// P, updated in place.
        p: Slice,
        /// Q, updated in place.
        q: Slice,
        /// Data index of the unit in its stripe (Q coefficient g^index).
        index: usize,
        /// The data unit's old contents.
        old: Slice,
        /// The data unit's new contents.
        new: Slice,
    },
    /// `codec::xor::recover(units, &[erased])`: `units[erased]` = XOR of the others.
    XorRecover {
        /// Every unit of the stripe (data, then P).
        units: Vec<Slice>,
        /// Position of the unit to rebuild (output).
        erased: usize,
    },
    /// `codec::pq::recover(units, erased)` with `units = [D_0 .. D_{k-1}, P, Q]`; one or two
    /// erased positions (an unread survivor is listed as erased and computed into scratch).
    PqRecover {
        /// `[D_0 .. D_{k-1}, P, Q]`.
        units: Vec<Slice>,
        /// Positions to compute (outputs), one or two.
        erased: Vec<usize>,
    },
}

impl Op {
    /// Slices the op reads before it writes anything (in-place targets included).
    pub fn inputs(&self) -> Vec<Slice> {
        match self {
            Op::Copy { src, .. } => vec![*src],
            Op::Zero { .. } => vec![],
            Op::XorEncode { data, .. } | Op::PqEncode { data, .. } => data.clone(),
            Op::XorUpdate { parity, old, new } => vec![*parity, *old, *new],
            Op::PqUpdate { p, q, old, new, .. } => vec![*p, *q, *old, *new],
            Op::XorRecover { units, erased } => units
                .iter()
                .enumerate()
                .filter(|(i, _)| i != erased)
                .map(|(_, s)| *s)
                .collect(),
            Op::PqRecover { units, erased } => units
                .iter()
                .enumerate()
                .filter(|(i, _)| !erased.contains(i))
                .map(|(_, s)| *s)
                .collect(),
        }
    }
    /// Slices the op writes.
    pub fn outputs(&self) -> Vec<Slice> {
        match self {
            Op::Copy { dst, .. } | Op::Zero { dst } => vec![*dst],
            Op::XorEncode { p, .. } => vec![*p],
            Op::PqEncode { p, q, .. } => vec![*p, *q],
            Op::XorUpdate { parity, .. } => vec![*parity],
            Op::PqUpdate { p, q, .. } => vec![*p, *q],
            Op::XorRecover { units, erased } => vec![units[*erased]],
            Op::PqRecover { units, erased } => erased.iter().map(|&e| units[e]).collect(),
        }
    }
    /// Every slice the op names, each once.
    pub fn slices(&self) -> Vec<Slice> {
        match self {
            Op::Copy { src, dst } => vec![*src, *dst],
            Op::Zero { dst } => vec![*dst],
            Op::XorEncode { data, p } => data.iter().copied().chain([*p]).collect(),
            Op::PqEncode { data, p, q } => data.iter().copied().chain([*p, *q]).collect(),
            Op::XorUpdate { parity, old, new } => vec![*parity, *old, *new],
            Op::PqUpdate { p, q, old, new, .. } => vec![*p, *q, *old, *new],
            Op::XorRecover { units, .. } | Op::PqRecover { units, .. } => units.clone(),
        }
    }
    /// The op with every slice `s` replaced by `f(s)`.
    pub fn map_slices(&self, f: impl Fn(Slice) -> Slice) -> Op {
        let all = |v: &[Slice]| v.iter().map(|&s| f(s)).collect::<Vec<_>>();
        match self {
            Op::Copy { src, dst } => Op::Copy {
                src: f(*src),
                dst: f(*dst),
            },
            Op::Zero { dst } => Op::Zero { dst: f(*dst) },
            Op::XorEncode { data, p } => Op::XorEncode {
                data: all(data),
                p: f(*p),
            },
            Op::PqEncode { data, p, q } => Op::PqEncode {
                data: all(data),
                p: f(*p),
                q: f(*q),
            },
            Op::XorUpdate { parity, old, new } => Op::XorUpdate {
                parity: f(*parity),
                old: f(*old),
                new: f(*new),
            },
            Op::PqUpdate {
                p,
                q,
                index,
                old,
                new,
            } => Op::PqUpdate {
                p: f(*p),
                q: f(*q),
                index: *index,
                old: f(*old),
                new: f(*new),
            },
            Op::XorRecover { units, erased } => Op::XorRecover {
                units: all(units),
                erased: *erased,
            },
            Op::PqRecover { units, erased } => Op::PqRecover {
                units: all(units),
                erased: erased.clone(),
            },
        }
    }

    /// Short name for diagnostics.
    pub fn name(&self) -> &'static str {
        match self {
            Op::Copy { .. } => "copy",
            Op::Zero { .. } => "zero",
            Op::XorEncode { .. } => "xor-encode",
            Op::PqEncode { .. } => "pq-encode",
            Op::XorUpdate { .. } => "xor-update",
            Op::PqUpdate { .. } => "pq-update",
            Op::XorRecover { .. } => "xor-recover",
            Op::PqRecover { .. } => "pq-recover",
        }
    }
}

/// What a plan is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlanKind {
    /// Serves a logical read: buffer 0 is the destination.
    Read,
    /// Serves a logical write: buffer 0 is the source.
    Write,
    /// Moves a cycle from layout generation `from` to `to`.
    Rebuild {
        /// The cycle's generation when planned.
        from: u32,
        /// The target generation (pass it to `mark_rebuilt`).
        to: u32,
    },
    /// Recomputes deferred background parities (lazy parity, [`crate::lazy`]); when done,
    /// pass its entries to `ArrayState::flush_done`.
    Flush,
    /// Recomputes parts of units that read wrong and writes them back in place
    /// ([`crate::repair`]).
    Repair,
}

/// A plan for one cycle. See the module docs for the execution contract.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    /// What the plan is for.
    pub kind: PlanKind,
    /// The cycle the plan works on (each plan stays inside one cycle).
    pub cycle: u64,
    /// The layout generation the cycle was in when planned.
    pub layout_generation: u32,
    /// [`crate::ArrayState::generation`] when planned.
    pub state_generation: u64,
    /// Where buffer 0 starts inside the caller's whole request buffer.
    pub user_offset: u64,
    /// Byte length of each buffer; `buffers[0]` is the user buffer.
    pub buffers: Vec<usize>,
    /// Phase 1.
    pub reads: Vec<MemberIo>,
    /// Phase 2, in order.
    pub ops: Vec<Op>,
    /// Phase 3.
    pub writes: Vec<MemberIo>,
    /// Stripes the executor must hold while the plan runs (sorted, distinct), in
    /// [`Plan::lock_mode`].
    pub locks: Vec<StripeId>,
    /// For writes: the mode chosen for each parity stripe written (stripe index, mode).
    pub modes: Vec<(usize, WriteMode)>,
    /// When the plan treats some background parity as stale (listed in the deferred-parity
    /// list, or deferred by this lazy write): the list's removal count of its cycle when
    /// planned ([`crate::lazy::Bpgl::removals_of`]). Such a plan neither reads nor writes that
    /// parity, which is right only while the stripe stays listed: once an entry of its cycle
    /// is dropped (a flush made the parity current), the plan is no longer current ([`crate::ArrayState::plan_is_current`]) and must be made again, or it
    /// would leave the parity stale with nothing listing it.
    pub bpgl_removals: Option<u64>,
}

/// Member I/O totals of a plan (or of one member).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IoCounts {
    /// Member reads.
    pub reads: u64,
    /// Member writes.
    pub writes: u64,
    /// Bytes read.
    pub read_bytes: u64,
    /// Bytes written.
    pub write_bytes: u64,
}

impl std::ops::AddAssign for IoCounts {
    fn add_assign(&mut self, o: IoCounts) {
        self.reads += o.reads;
        self.writes += o.writes;
        self.read_bytes += o.read_bytes;
        self.write_bytes += o.write_bytes;
    }
}

impl Plan {
    /// The plan cut into plans that each hold at most `max_bytes` of buffers (or one group
    /// of buffers that work together, when that group alone is larger), for an executor that
    /// streams a large plan (a rebuild cycle of a wide declustered layout holds hundreds of
    /// MiB) through a bounded window of memory. Run one after the other, or each one's reads
    /// beside the previous one's writes, the pieces do what the plan does.
    ///
    /// A group is a set of buffers joined by the ops that name them together, with the reads
    /// that fill them, those ops and the writes that take from them: groups share nothing, so
    /// each piece keeps its ops in the plan's order and runs on its own. The plan comes back
    /// whole (one piece) when it has a user buffer (buffer 0 not empty: a read or a write,
    /// whose caller owns that buffer), fits in `max_bytes`, or writes member bytes that it
    /// also reads (a piece run after another must not read what that one wrote; a move
    /// within the members can do this, a rebuild into new places does not). Every piece
    /// keeps the plan's kind, cycle, generations and locks; progress is the whole plan's
    /// (mark a rebuild cycle rebuilt once every piece of it ran).
    pub fn windows(&self, max_bytes: usize) -> Vec<Plan> {
        let total: usize = self.buffers.iter().sum();
        if self.buffers.first() != Some(&0) || total <= max_bytes || self.reads_what_it_writes() {
            return vec![self.clone()];
        }
        // Union-find over buffers: an op joins the buffers it names.
        let n = self.buffers.len();
        let mut parent: Vec<usize> = (0..n).collect();
        fn root(parent: &mut [usize], mut b: usize) -> usize {
            while parent[b] != b {
                parent[b] = parent[parent[b]];
                b = parent[b];
            }
            b
        }
        for op in &self.ops {
            let slices = op.slices();
            let first = root(&mut parent, slices[0].buf);
            for s in &slices[1..] {
                let r = root(&mut parent, s.buf);
                parent[r] = first;
            }
        }
        if (1..n).any(|b| root(&mut parent, b) == root(&mut parent, 0)) {
            return vec![self.clone()];
        }
        // Groups in order of their first buffer, into windows of at most `max_bytes`.
        let mut window_of_root: Vec<Option<usize>> = vec![None; n];
        let mut window_of_buf = vec![usize::MAX; n];
        let mut sizes: Vec<usize> = Vec::new();
        let mut group_bytes = vec![0usize; n];
        for b in 1..n {
            let r = root(&mut parent, b);
            group_bytes[r] += self.buffers[b];
        }
        #[allow(clippy::needless_range_loop)] // (`b` indexes three tables)
        for b in 1..n {
            let r = root(&mut parent, b);
            let w = match window_of_root[r] {
                Some(w) => w,
                None => {
                    let fits = sizes
                        .last()
                        .is_some_and(|&used| used + group_bytes[r] <= max_bytes);
                    if fits {
                        *sizes.last_mut().expect("checked") += group_bytes[r];
                    } else {
                        sizes.push(group_bytes[r]);
                    }
                    window_of_root[r] = Some(sizes.len() - 1);
                    sizes.len() - 1
                }
            };
            window_of_buf[b] = w;
        }
        let mut pieces: Vec<Plan> = (0..sizes.len()).map(|_| self.empty_piece()).collect();
        let mut renumber = vec![0usize; n];
        for b in 1..n {
            let piece = &mut pieces[window_of_buf[b]];
            renumber[b] = piece.buffers.len();
            piece.buffers.push(self.buffers[b]);
        }
        let map = |s: Slice| Slice {
            buf: renumber[s.buf],
            ..s
        };
        for r in &self.reads {
            pieces[window_of_buf[r.data.buf]].reads.push(MemberIo {
                data: map(r.data),
                ..*r
            });
        }
        for op in &self.ops {
            pieces[window_of_buf[op.slices()[0].buf]]
                .ops
                .push(op.map_slices(map));
        }
        for w in &self.writes {
            pieces[window_of_buf[w.data.buf]].writes.push(MemberIo {
                data: map(w.data),
                ..*w
            });
        }
        pieces
    }

    /// The plan without its I/O and with only an empty user buffer: what every piece of
    /// [`Plan::windows`] starts from.
    fn empty_piece(&self) -> Plan {
        Plan {
            kind: self.kind,
            cycle: self.cycle,
            layout_generation: self.layout_generation,
            state_generation: self.state_generation,
            user_offset: self.user_offset,
            buffers: vec![0],
            reads: Vec::new(),
            ops: Vec::new(),
            writes: Vec::new(),
            locks: self.locks.clone(),
            modes: self.modes.clone(),
            bpgl_removals: self.bpgl_removals,
        }
    }

    /// Whether some member bytes the plan writes are also bytes it reads.
    fn reads_what_it_writes(&self) -> bool {
        let mut reads: Vec<(Disk, u64, u64)> = self
            .reads
            .iter()
            .map(|r| (r.member, r.offset_bytes, r.offset_bytes + r.data.len as u64))
            .collect();
        reads.sort_unstable();
        // The furthest end of the reads of the same member up to each one.
        let mut furthest = Vec::with_capacity(reads.len());
        for (i, &(m, _, e)) in reads.iter().enumerate() {
            let before = (i > 0 && reads[i - 1].0 == m).then(|| furthest[i - 1]);
            furthest.push(before.map_or(e, |f: u64| f.max(e)));
        }
        self.writes.iter().any(|w| {
            let (m, a, e) = (w.member, w.offset_bytes, w.offset_bytes + w.data.len as u64);
            // Of the reads of member `m` that start before `e`, does one end past `a`?
            let hi = reads.partition_point(|&(rm, ra, _)| (rm, ra) < (m, e));
            hi > 0 && reads[hi - 1].0 == m && furthest[hi - 1] > a
        })
    }

    /// How the executor holds [`Plan::locks`]: shared for a read ([`PlanKind::Read`], healthy
    /// or degraded: it writes nothing, so reads of a stripe may run together), exclusively
    /// for every plan that writes (writes, rebuild cycles, flushes, repairs; a rebuild cycle
    /// that moves without writes too: it changes where the cycle's data is read from).
    /// [`Plan::validate`] checks that a read plan writes nothing.
    #[inline]
    pub fn lock_mode(&self) -> LockMode {
        match self.kind {
            PlanKind::Read => LockMode::Shared,
            _ => LockMode::Exclusive,
        }
    }

    /// Member I/O totals over the whole plan.
    pub fn io_counts(&self) -> IoCounts {
        IoCounts {
            reads: self.reads.len() as u64,
            writes: self.writes.len() as u64,
            read_bytes: self.reads.iter().map(|r| r.data.len as u64).sum(),
            write_bytes: self.writes.iter().map(|w| w.data.len as u64).sum(),
        }
    }

    /// Member I/O totals per member (members the plan does not touch are absent).
    pub fn per_member(&self) -> BTreeMap<Disk, IoCounts> {
        let mut m: BTreeMap<Disk, IoCounts> = BTreeMap::new();
        for r in &self.reads {
            let e = m.entry(r.member).or_default();
            e.reads += 1;
            e.read_bytes += r.data.len as u64;
        }
        for w in &self.writes {
            let e = m.entry(w.member).or_default();
            e.writes += 1;
            e.write_bytes += w.data.len as u64;
        }
        m
    }

    /// Members the plan reads or writes.
    pub fn members(&self) -> Vec<Disk> {
        self.per_member().into_keys().collect()
    }

    /// Asserts that the plan never touches one of `failed`.
    pub fn assert_avoids(&self, failed: &[Disk]) {
        for io in self.reads.iter().chain(&self.writes) {
            assert!(
                !failed.contains(&io.member),
                "plan for cycle {} touches failed member {}",
                self.cycle,
                io.member
            );
        }
    }

    /// Asserts the plan's internal consistency: every slice in bounds; buffer 0 never written
    /// by a write plan; no two reads fill the same bytes; every op reads only bytes filled
    /// before it (by a read or an earlier op), names pairwise disjoint slices of equal length
    /// (codec ops), and has a well-formed erasure list; every write's source is filled; no two
    /// writes overlap on a member; a read plan fills all of buffer 0 and writes nothing; locks
    /// sorted and distinct.
    pub fn validate(&self) {
        if let Err(e) = self.check() {
            panic!(
                "invalid plan ({:?}, cycle {}): {e}\n{self}",
                self.kind, self.cycle
            );
        }
    }

    /// [`Plan::validate`] as a result, for tests that expect a failure.
    pub fn check(&self) -> Result<(), String> {
        let mut filled: Vec<Ranges> = vec![Ranges::default(); self.buffers.len()];
        let is_write = self.kind == PlanKind::Write;
        if is_write {
            filled[0].insert(0, self.buffers[0]);
        }
        if !matches!(self.kind, PlanKind::Read | PlanKind::Write) && self.buffers[0] != 0 {
            return Err("a rebuild has no user buffer".into());
        }
        let in_bounds = |s: &Slice| -> Result<(), String> {
            match self.buffers.get(s.buf) {
                Some(&len) if s.end() <= len => Ok(()),
                Some(&len) => Err(format!("{s:?} beyond buffer length {len}")),
                None => Err(format!("{s:?} names a buffer that does not exist")),
            }
        };
        // Phase 1.
        let mut per_buf_reads: Vec<Ranges> = vec![Ranges::default(); self.buffers.len()];
        for r in &self.reads {
            in_bounds(&r.data)?;
            if r.data.len == 0 {
                return Err(format!("empty read {r:?}"));
            }
            if is_write && r.data.buf == 0 {
                return Err(format!("read {r:?} into the source of a write"));
            }
            if per_buf_reads[r.data.buf].intersects(r.data.off, r.data.end()) {
                return Err(format!("read {r:?} overlaps another read's destination"));
            }
            per_buf_reads[r.data.buf].insert(r.data.off, r.data.end());
            filled[r.data.buf].insert(r.data.off, r.data.end());
        }
        // Phase 2.
        for (i, op) in self.ops.iter().enumerate() {
            let slices = op.slices();
            for s in &slices {
                in_bounds(s).map_err(|e| format!("op {i} ({}): {e}", op.name()))?;
            }
            for (a, sa) in slices.iter().enumerate() {
                for sb in &slices[a + 1..] {
                    if sa.overlaps(sb) {
                        return Err(format!("op {i} ({}): {sa:?} overlaps {sb:?}", op.name()));
                    }
                }
            }
            if !matches!(op, Op::Zero { .. }) {
                let len = slices[0].len;
                if slices.iter().any(|s| s.len != len) {
                    return Err(format!("op {i} ({}): slices of unequal length", op.name()));
                }
            }
            match op {
                Op::XorRecover { units, erased } if *erased >= units.len() || units.len() < 2 => {
                    return Err(format!("op {i}: bad xor erasure {erased}"));
                }
                Op::PqRecover { units, erased } => {
                    let mut e = erased.clone();
                    e.sort_unstable();
                    e.dedup();
                    if units.len() < 3
                        || e.len() != erased.len()
                        || erased.is_empty()
                        || erased.len() > 2
                        || erased.iter().any(|&x| x >= units.len())
                    {
                        return Err(format!("op {i}: bad pq erasures {erased:?}"));
                    }
                }
                Op::XorEncode { data, .. } | Op::PqEncode { data, .. } if data.is_empty() => {
                    return Err(format!("op {i}: encode without data"));
                }
                _ => {}
            }
            for s in op.inputs() {
                if !filled[s.buf].covers(s.off, s.end()) {
                    return Err(format!(
                        "op {i} ({}) reads {s:?}, which nothing filled",
                        op.name()
                    ));
                }
            }
            for s in op.outputs() {
                if is_write && s.buf == 0 {
                    return Err(format!("op {i} ({}) writes the user's source", op.name()));
                }
                filled[s.buf].insert(s.off, s.end());
            }
        }
        // Phase 3.
        let mut member_writes: BTreeMap<Disk, Ranges> = BTreeMap::new();
        for w in &self.writes {
            in_bounds(&w.data)?;
            if w.data.len == 0 {
                return Err(format!("empty write {w:?}"));
            }
            if !filled[w.data.buf].covers(w.data.off, w.data.end()) {
                return Err(format!("write {w:?} sends bytes nothing filled"));
            }
            let r = member_writes.entry(w.member).or_default();
            let (a, b) = (
                w.offset_bytes as usize,
                (w.offset_bytes as usize) + w.data.len,
            );
            if r.intersects(a, b) {
                return Err(format!("write {w:?} overlaps another write"));
            }
            r.insert(a, b);
        }
        if self.kind == PlanKind::Read && !filled[0].covers(0, self.buffers[0]) {
            return Err("a read plan leaves part of the user buffer unfilled".into());
        }
        if self.kind == PlanKind::Read && !self.writes.is_empty() {
            return Err("a read plan writes (it holds its stripes shared)".into());
        }
        if self.locks.windows(2).any(|w| w[0] >= w[1]) {
            return Err("locks not sorted and distinct".into());
        }
        Ok(())
    }
}

impl fmt::Display for Plan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "plan {:?} cycle {} (layout gen {}, state gen {}) buffers {:?}",
            self.kind, self.cycle, self.layout_generation, self.state_generation, self.buffers
        )?;
        for r in &self.reads {
            writeln!(
                f,
                "  read  m{} @{} -> {:?}",
                r.member, r.offset_bytes, r.data
            )?;
        }
        for o in &self.ops {
            writeln!(f, "  op    {o:?}")?;
        }
        for w in &self.writes {
            writeln!(
                f,
                "  write m{} @{} <- {:?}",
                w.member, w.offset_bytes, w.data
            )?;
        }
        Ok(())
    }
}

/// A set of half-open byte ranges, kept sorted and merged.
#[derive(Clone, Debug, Default)]
struct Ranges(Vec<(usize, usize)>);

impl Ranges {
    fn insert(&mut self, a: usize, b: usize) {
        if a >= b {
            return;
        }
        let mut out = Vec::with_capacity(self.0.len() + 1);
        let (mut a, mut b) = (a, b);
        for &(x, y) in &self.0 {
            if y < a || x > b {
                out.push((x, y));
            } else {
                a = a.min(x);
                b = b.max(y);
            }
        }
        out.push((a, b));
        out.sort_unstable();
        self.0 = out;
    }
    fn covers(&self, a: usize, b: usize) -> bool {
        a >= b || self.0.iter().any(|&(x, y)| x <= a && b <= y)
    }
    fn intersects(&self, a: usize, b: usize) -> bool {
        self.0.iter().any(|&(x, y)| x < b && a < y)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(kind: PlanKind, buffers: Vec<usize>) -> Plan {
        Plan {
            kind,
            cycle: 0,
            layout_generation: 0,
            state_generation: 0,
            user_offset: 0,
            buffers,
            reads: vec![],
            ops: vec![],
            writes: vec![],
            locks: vec![],
            modes: vec![],
            bpgl_removals: None,
        }
    }

    #[test]
    fn ranges_merge_and_cover() {
        let mut r = Ranges::default();
        r.insert(10, 20);
        r.insert(30, 40);
        assert!(!r.covers(15, 35));
        r.insert(20, 30);
        assert!(r.covers(10, 40));
        assert_eq!(r.0, vec![(10, 40)]);
        assert!(r.intersects(39, 50) && !r.intersects(40, 50));
    }

    #[test]
    fn validate_catches_unfilled_inputs_and_overlaps() {
        let mut p = plan(PlanKind::Write, vec![8, 8, 8]);
        p.ops.push(Op::XorEncode {
            data: vec![Slice::new(0, 0, 8), Slice::new(1, 0, 8)],
            p: Slice::new(2, 0, 8),
        });
        assert!(p.check().unwrap_err().contains("nothing filled"));
        p.reads.push(MemberIo {
            member: 0,
            offset_bytes: 0,
            data: Slice::new(1, 0, 8),
        });
        assert!(p.check().is_ok());
        p.writes.push(MemberIo {
            member: 1,
            offset_bytes: 0,
            data: Slice::new(2, 0, 8),
        });
        p.writes.push(MemberIo {
            member: 1,
            offset_bytes: 4,
            data: Slice::new(2, 0, 4),
        });
        assert!(p.check().unwrap_err().contains("overlaps"));
        p.writes.pop();
        assert!(p.check().is_ok());
        // A write plan must not fill its source.
        p.ops.push(Op::Zero {
            dst: Slice::new(0, 0, 1),
        });
        assert!(p.check().unwrap_err().contains("source"));
    }

    #[test]
    fn read_plan_must_fill_user_buffer() {
        let mut p = plan(PlanKind::Read, vec![8]);
        p.reads.push(MemberIo {
            member: 0,
            offset_bytes: 0,
            data: Slice::new(0, 0, 4),
        });
        assert!(p.check().is_err());
        p.reads.push(MemberIo {
            member: 1,
            offset_bytes: 0,
            data: Slice::new(0, 4, 4),
        });
        assert!(p.check().is_ok());
        assert_eq!(
            p.io_counts(),
            IoCounts {
                reads: 2,
                writes: 0,
                read_bytes: 8,
                write_bytes: 0
            }
        );
        assert_eq!(p.members(), vec![0, 1]);
    }
}
