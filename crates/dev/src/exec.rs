//! Running raidcore plans on real members.
//!
//! [`run_plans`] executes a batch of plans together, following raidcore's execution contract
//! (all reads, then each plan's ops in order, then all writes). Member I/O of the whole batch is
//! grouped by member and each member's list runs on its own thread, so members work in parallel
//! while each one sees its I/Os in order, like a disk with one actuator. Running several
//! independent plans as one batch (a parallel rebuild does) is what lets many members share the
//! work.
//!
//! A member I/O error is reported with the member, so the caller can fail the member and plan
//! again: reads are re-planned degraded; a plan whose writes partly failed has still written
//! every healthy member, which is consistent once the failed member is marked failed (its unit
//! is then reconstructed from the others, whose parity already includes the new data).

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

use raidcore::{MemberIo, Plan};

use crate::csum::{Checksums, BLOCK_BYTES};
use crate::Member;

/// A member range that could not be read correctly while the member itself still works: a
/// read error on part of it (a latent sector error) or a block whose checksum does not match.
/// The caller reconstructs it from redundancy and rewrites it (see `Pool`), instead of failing
/// the member.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BadRange {
    pub member: u32,
    /// Data-area byte offset.
    pub offset_bytes: u64,
    pub len: u64,
    /// True for a checksum mismatch, false for a read error.
    pub checksum: bool,
}

/// A batch whose reads of one member fail on more blocks than this (after probing block by
/// block) fails the member instead: a dying or vanished disk, not a few bad sectors. So does a
/// read past the member's end.
pub const MAX_BAD_BLOCKS_PER_READ: usize = 64;

/// A member I/O that failed.
#[derive(Debug, thiserror::Error)]
#[error("member {member}: {source}")]
pub struct MemberError {
    pub member: u32,
    pub write: bool,
    #[source]
    pub source: std::io::Error,
}

/// Bytes and I/Os read and written per member, updated as I/O completes.
#[derive(Debug, Default)]
pub struct Counters {
    pub read_bytes: AtomicU64,
    pub write_bytes: AtomicU64,
    /// Member read and write operations (data area).
    pub reads: AtomicU64,
    pub writes: AtomicU64,
    /// Metadata writes (the deferred-parity list), not counted in `writes`.
    pub meta_writes: AtomicU64,
    /// Reads in progress now, and the data-area byte just past the last read: the hints the
    /// planner balances mirrored reads with (`raidcore::plan_read_balanced`; not moved by
    /// `drain_into`).
    pub reads_in_flight: AtomicU32,
    pub read_head: AtomicU64,
}

/// The read-balancing hints of `counters` (see [`Counters::reads_in_flight`]).
pub fn member_loads(counters: &[Counters]) -> Vec<raidcore::MemberLoad> {
    counters
        .iter()
        .map(|c| raidcore::MemberLoad {
            queued: c.reads_in_flight.load(Ordering::Relaxed),
            head: c.read_head.load(Ordering::Relaxed),
        })
        .collect()
}

impl Counters {
    /// Moves everything counted here into `to`.
    pub fn drain_into(&self, to: &Counters) {
        for (a, b) in [
            (&self.read_bytes, &to.read_bytes),
            (&self.write_bytes, &to.write_bytes),
            (&self.reads, &to.reads),
            (&self.writes, &to.writes),
            (&self.meta_writes, &to.meta_writes),
        ] {
            b.fetch_add(a.swap(0, Ordering::Relaxed), Ordering::Relaxed);
        }
    }
}

/// Members as the executor sees them: `None` for a failed or missing member. `data_offset` is
/// added to every plan offset (plans address the member's data area).
pub struct Members<'a> {
    pub members: &'a [Option<Arc<dyn Member>>],
    pub counters: &'a [Counters],
    pub data_offset_bytes: u64,
    /// Per-block checksums (pools created with checksums): reads are verified, writes update
    /// them. Every member I/O is then whole 4 KiB blocks.
    pub checksums: Option<&'a Checksums>,
    /// Blocks marked lost (a poisoned checksum entry) are taken as they are stored instead
    /// of reported. A write sets it: the blocks it reads are the old values and the other
    /// units of parity rows, and a marked block's stored bytes are exactly what its row's
    /// parity was computed with (`Pool::repair_in_rebuild`), so a write that covers it whole,
    /// or only uses it as a parity source, keeps the row consistent. (A write of part of a
    /// marked block would merge garbage into acknowledged data: the pool refuses it before
    /// planning, `Pool::check_lost_for_write`.)
    pub marked_lost_as_stored: bool,
}

/// [`Members`] held by value (shared handles), for plans run on a thread of their own: the
/// windows a rebuild keeps in flight (`crate::pool::WindowFlow`) outlive the borrow of the
/// pool that plans and marks them.
#[derive(Clone)]
pub struct OwnedMembers {
    pub members: Vec<Option<Arc<dyn Member>>>,
    pub counters: Arc<[Counters]>,
    pub data_offset_bytes: u64,
    pub checksums: Option<Arc<Checksums>>,
}

impl OwnedMembers {
    /// The members as plans see them (reads of marked-lost blocks reported, as usual).
    pub fn view(&self) -> Members<'_> {
        Members {
            members: &self.members,
            counters: &self.counters,
            data_offset_bytes: self.data_offset_bytes,
            checksums: self.checksums.as_deref(),
            marked_lost_as_stored: false,
        }
    }
}

/// The outcome of a batch: every member error that happened (empty on success).
#[derive(Debug, Default)]
pub struct BatchErrors {
    pub read_errors: Vec<MemberError>,
    pub write_errors: Vec<MemberError>,
    /// Ranges of working members that read wrong (read errors on a few blocks, checksum
    /// mismatches): repair them, then plan again. Like a read error, a bad range stops the
    /// batch before any op or write runs.
    pub bad: Vec<BadRange>,
}

impl BatchErrors {
    pub fn is_empty(&self) -> bool {
        self.read_errors.is_empty() && self.write_errors.is_empty() && self.bad.is_empty()
    }
    /// Adds the errors of `other` (batches run side by side).
    pub fn absorb(&mut self, other: BatchErrors) {
        self.read_errors.extend(other.read_errors);
        self.write_errors.extend(other.write_errors);
        self.bad.extend(other.bad);
    }
    /// Members that failed, each once.
    pub fn failed_members(&self) -> Vec<u32> {
        let mut v: Vec<u32> = self
            .read_errors
            .iter()
            .chain(&self.write_errors)
            .map(|e| e.member)
            .collect();
        v.sort();
        v.dedup();
        v
    }
}

/// A plan whose member I/O can move straight between the caller's buffer and the members: a
/// read with no ops whose reads all land in buffer 0, or a write with no reads and no ops whose
/// writes all come from buffer 0 (RAID0, mirrors, healthy full copies). No scratch, no copies.
fn is_direct(p: &Plan) -> bool {
    use raidcore::PlanKind;
    p.ops.is_empty()
        && match p.kind {
            PlanKind::Read => p.reads.iter().all(|r| r.data.buf == 0) && p.writes.is_empty(),
            PlanKind::Write => p.reads.is_empty() && p.writes.iter().all(|w| w.data.buf == 0),
            _ => false,
        }
}

/// A read's buffer cut into the user buffers of its plans (`plans[i].buffers[0]` bytes each,
/// in order: read plans cover the request front to back).
pub fn read_buffers<'b>(plans: &[raidcore::Plan], buf: &'b mut [u8]) -> Vec<&'b mut [u8]> {
    let mut users: Vec<&mut [u8]> = Vec::with_capacity(plans.len());
    let mut rest = buf;
    let mut at = 0u64;
    for p in plans {
        assert_eq!(p.user_offset, at, "plans cover the request in order");
        let (head, tail) = rest.split_at_mut(p.buffers[0]);
        users.push(head);
        rest = tail;
        at += p.buffers[0] as u64;
    }
    users
}

/// Runs `plans` as one batch. `users[i]` is plan i's user buffer (`plans[i].buffers[0]` bytes:
/// the destination of a read, the source of a write, empty for a rebuild). If any read fails,
/// no op or write runs and the read errors are returned (re-plan after failing the members).
/// Write errors do not stop the other writes.
pub fn run_plans(
    plans: &[Plan],
    users: &mut [&mut [u8]],
    m: &Members<'_>,
) -> Result<(), BatchErrors> {
    assert_eq!(plans.len(), users.len(), "one user buffer per plan");
    for (p, u) in plans.iter().zip(users.iter()) {
        assert_eq!(p.buffers[0], u.len(), "user buffer length");
    }
    if plans.iter().all(is_direct) {
        // Reads land in the caller's memory and writes leave from it: no buffers at all.
        let mut empty: Vec<Vec<Vec<u8>>> = plans.iter().map(|_| Vec::new()).collect();
        read_phase_into(plans, &mut empty, Some(users), m)?;
        let srcs: Vec<&[u8]> = users.iter().map(|u| &**u).collect();
        return commit_from(plans, &empty, Some(&srcs), m);
    }
    let bufs = prepare(plans, users, m)?;
    let result = commit(plans, &bufs, m);
    // Reads deliver buffer 0 to the caller.
    for ((p, b), u) in plans.iter().zip(&bufs).zip(users.iter_mut()) {
        if matches!(p.kind, raidcore::PlanKind::Read) {
            u.copy_from_slice(&b[0]);
        }
    }
    result
}

/// Runs the write plans of one request: `data` is the whole request, plan `i` writes
/// `data[plans[i].user_offset..][..plans[i].buffers[0]]`. Like [`run_plans`], without copying
/// the caller's bytes when the plans need no scratch.
pub fn run_write(plans: &[Plan], data: &[u8], m: &Members<'_>) -> Result<(), BatchErrors> {
    let srcs: Vec<&[u8]> = plans
        .iter()
        .map(|p| &data[p.user_offset as usize..p.user_offset as usize + p.buffers[0]])
        .collect();
    if plans.iter().all(is_direct) {
        let empty: Vec<Vec<Vec<u8>>> = plans.iter().map(|_| Vec::new()).collect();
        return commit_from(plans, &empty, Some(&srcs), m);
    }
    let bufs = prepare_from(plans, &srcs, m)?;
    commit(plans, &bufs, m)
}

/// Phases 1 and 2 of a batch: allocates the buffers (buffer 0 a copy of the user buffer), reads,
/// and runs the ops. Returns the buffers for [`commit`].
pub fn prepare(
    plans: &[Plan],
    users: &[&mut [u8]],
    m: &Members<'_>,
) -> Result<Vec<Vec<Vec<u8>>>, BatchErrors> {
    let srcs: Vec<&[u8]> = users.iter().map(|u| &**u).collect();
    prepare_from(plans, &srcs, m)
}

fn prepare_from(
    plans: &[Plan],
    users: &[&[u8]],
    m: &Members<'_>,
) -> Result<Vec<Vec<Vec<u8>>>, BatchErrors> {
    let mut bufs: Vec<Vec<Vec<u8>>> = plans
        .iter()
        .zip(users.iter())
        .map(|(p, u)| {
            assert_eq!(p.buffers[0], u.len(), "user buffer length");
            let mut b: Vec<Vec<u8>> = p.buffers.iter().map(|&len| vec![0u8; len]).collect();
            b[0].copy_from_slice(u);
            b
        })
        .collect();
    read_phase_into(plans, &mut bufs, None, m)?;
    compute(plans, &mut bufs);
    Ok(bufs)
}

/// [`prepare`]'s reads alone, for plans with no user buffer (a rebuild's): their buffers as
/// read, to be given to [`compute`].
///
/// Buffers come from `free` when it has them (a pipeline gives back the buffers of each window
/// it has written): their old bytes are left in place, since a plan never reads a buffer
/// before a member read or an op fills it (the in-memory executor the tests run every plan
/// on, `raidcore::mem`, fills its buffers with a poison byte to make sure). Fresh zeroed
/// buffers cost the page faults of every window again.
pub fn read_only(
    plans: &[Plan],
    m: &Members<'_>,
    free: &mut Vec<Vec<u8>>,
) -> Result<Vec<Vec<Vec<u8>>>, BatchErrors> {
    let mut take = |len: usize| -> Vec<u8> {
        match free.iter().rposition(|v| v.capacity() >= len) {
            Some(i) => {
                let mut v = free.swap_remove(i);
                if v.len() >= len {
                    v.truncate(len);
                } else {
                    v.resize(len, 0);
                }
                v
            }
            None => vec![0u8; len],
        }
    };
    let mut bufs: Vec<Vec<Vec<u8>>> = plans
        .iter()
        .map(|p| {
            assert_eq!(p.buffers[0], 0, "plans read alone have no user buffer");
            p.buffers.iter().map(|&len| take(len)).collect()
        })
        .collect();
    read_phase_into(plans, &mut bufs, None, m)?;
    Ok(bufs)
}

/// Phase 2 of a batch: every plan's ops over its buffers (read by phase 1).
pub fn compute(plans: &[Plan], bufs: &mut [Vec<Vec<u8>>]) {
    for (p, b) in plans.iter().zip(bufs.iter_mut()) {
        // The planner made these ops; a codec refusal is a planner bug.
        raidcore::mem::run_ops(&p.ops, b).expect("plan ops are valid");
    }
}

/// Phase 3 of a batch: every write, grouped by member, one thread per member. A failing
/// member stops its own writes only.
pub fn commit(plans: &[Plan], bufs: &[Vec<Vec<u8>>], m: &Members<'_>) -> Result<(), BatchErrors> {
    commit_from(plans, bufs, None, m)
}

/// [`commit`], taking buffer 0 of every plan from `users` when given.
fn commit_from(
    plans: &[Plan],
    bufs: &[Vec<Vec<u8>>],
    users: Option<&[&[u8]]>,
    m: &Members<'_>,
) -> Result<(), BatchErrors> {
    let mut errors = BatchErrors::default();
    let mut by_member: Vec<Vec<(u64, &[u8])>> = vec![Vec::new(); m.members.len()];
    for (pi, p) in plans.iter().enumerate() {
        for io in &p.writes {
            let s = io.data;
            let src: &[u8] = match users {
                Some(u) if s.buf == 0 => &u[pi][s.off..s.end()],
                _ => &bufs[pi][s.buf][s.off..s.end()],
            };
            by_member[io.member as usize].push((io.offset_bytes, src));
        }
    }
    let bytes: usize = by_member.iter().flatten().map(|(_, b)| b.len()).sum();
    let parallel = worth_threads(m, &by_member, bytes);
    let results: Vec<Result<(), MemberError>> = per_member(by_member, parallel, |member, ios| {
        let dev = m.members[member].as_ref().ok_or_else(|| MemberError {
            member: member as u32,
            write: true,
            source: std::io::Error::other("member is failed or missing"),
        })?;
        // Writes to a member whose every call is a device request (`Member::merges_writes`:
        // O_DIRECT files and devices, emulated and NBD members) go out as one
        // `write_vectored_at` per run of consecutive bytes, as the reads do: a rebuild's
        // writes to the replacement are then
        // a few large requests instead of one per chunk (on members emulated at 4 ms per I/O,
        // 32 chunk writes of a step took 142 ms, one write of the run 18 ms).
        // Writes to buffered files are not merged: measured with bench/nbd.sh, RAID0 4 KiB
        // random writes after the sequential write case fell to about a third when 1 MiB
        // writes went out as 256 KiB `pwritev`s (likely the larger page-cache folios such
        // writes leave on ext4, which every later small write into them pays for), and
        // sequential writes gained nothing visible. Measured again with `pwritev` runs
        // (bench/nbd.sh, RAID0 over 4 members): on ext4, 1-job 4 KiB random writes after the
        // sequential case 73.5 K IOPS merged against 86.7 K not; on tmpfs, 16-job 1 MiB
        // sequential writes 0.96-0.97x nbdkit merged against 0.97-1.01x not.
        let merge = dev.merges_writes();
        let mut pages: Vec<(u64, u64)> = Vec::new();
        let mut i = 0;
        while i < ios.len() {
            let (first, b) = ios[i];
            let mut end = first + b.len() as u64;
            let mut j = i + 1;
            while merge && j < ios.len() && ios[j].0 == end && j - i < MAX_RUN_SEGMENTS {
                end += ios[j].1.len() as u64;
                j += 1;
            }
            let run = &ios[i..j];
            let written = if run.len() == 1 {
                dev.write_at(b, m.data_offset_bytes + first)
            } else {
                let bufs: Vec<&[u8]> = run.iter().map(|&(_, b)| b).collect();
                dev.write_vectored_at(&bufs, m.data_offset_bytes + first)
            };
            written.map_err(|e| MemberError {
                member: member as u32,
                write: true,
                source: e,
            })?;
            for &(offset, b) in run {
                m.counters[member]
                    .write_bytes
                    .fetch_add(b.len() as u64, Ordering::Relaxed);
                // The plan's member writes, merged or not (what status reports per member).
                m.counters[member].writes.fetch_add(1, Ordering::Relaxed);
                if let Some(c) = m.checksums {
                    c.record(member, offset, b);
                    pages.push((
                        offset / BLOCK_BYTES,
                        (offset + b.len() as u64) / BLOCK_BYTES,
                    ));
                }
            }
            i = j;
        }
        // The checksums of what this member just wrote, with the writes (the same batch):
        // each run of touched region pages once.
        // A failing copy (on another member) does not stop the other runs' pages.
        let mut first_err = None;
        if let Some(c) = m.checksums {
            for (first, end) in crate::csum::page_runs(pages) {
                if let Err(e) = c.write_pages(member, m.members, first, end) {
                    first_err.get_or_insert(MemberError {
                        member: e.member as u32,
                        write: true,
                        source: e.source,
                    });
                }
                for h in c.holders(member) {
                    if m.members[h].is_some() {
                        m.counters[h].meta_writes.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        }
        first_err.map_or(Ok(()), Err)
    });
    for r in results {
        if let Err(e) = r {
            errors.write_errors.push(e);
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}

/// Most writes merged into one request (Linux takes at most 1024 segments per `pwritev`).
const MAX_RUN_SEGMENTS: usize = 1024;

/// The unit a failed read is narrowed to on a pool without checksums: a disk sector. (With
/// checksums a block is checked, repaired and lost whole, so blocks are the unit.)
const SECTOR_BYTES: u64 = 512;

/// Reads one run of consecutive member bytes into `run` after the whole read failed: block by
/// block, so that only the blocks that fail are reported bad, and on a pool without checksums
/// a failing block sector by sector, so that only the sectors that fail are. (A block of which
/// a write remapped one sector while the others stay unreadable must not take that sector
/// with it: it was acknowledged, and it reads back; found by the served fault harness, seed
/// 0x6b07f9a4.) Returns the bad ranges, or `None` when too many blocks fail (the member, not
/// a few sectors, is broken).
fn probe_run(
    dev: &dyn Member,
    member: u32,
    m: &Members<'_>,
    offset: u64,
    run: &mut [&mut [u8]],
) -> Option<Vec<BadRange>> {
    let unit = if m.checksums.is_some() {
        BLOCK_BYTES
    } else {
        SECTOR_BYTES
    };
    let mut bad: Vec<BadRange> = Vec::new();
    let mut blocks_bad = 0u64;
    let mut at = offset;
    for dst in run.iter_mut() {
        let mut pos = 0usize;
        while pos < dst.len() {
            let o = at + pos as u64;
            let n = ((BLOCK_BYTES - o % BLOCK_BYTES) as usize).min(dst.len() - pos);
            let block = &mut dst[pos..pos + n];
            if let Err(e) = dev.read_at(block, m.data_offset_bytes + o) {
                // Past the end of the member: the member is cut short, not a bad sector.
                if e.kind() == std::io::ErrorKind::UnexpectedEof {
                    return None;
                }
                blocks_bad += 1;
                if blocks_bad > MAX_BAD_BLOCKS_PER_READ as u64 {
                    return None;
                }
                let mut k = 0usize;
                while k < n {
                    let so = o + k as u64;
                    let sn = if unit == BLOCK_BYTES {
                        n
                    } else {
                        ((unit - so % unit) as usize).min(n - k)
                    };
                    let failed = sn == n
                        || dev
                            .read_at(&mut block[k..k + sn], m.data_offset_bytes + so)
                            .is_err();
                    if failed {
                        match bad.last_mut() {
                            Some(b) if b.offset_bytes + b.len == so => b.len += sn as u64,
                            _ => bad.push(BadRange {
                                member,
                                offset_bytes: so,
                                len: sn as u64,
                                checksum: false,
                            }),
                        }
                    }
                    k += sn;
                }
            }
            pos += n;
        }
        at += dst.len() as u64;
    }
    Some(bad)
}

/// The blocks of a run just read (`offset`, consecutive slices) whose checksums do not match,
/// skipping ranges already known bad.
fn verify_run(
    c: &Checksums,
    member: usize,
    offset: u64,
    run: &[&mut [u8]],
    known: &[BadRange],
) -> Vec<BadRange> {
    let mut out = Vec::new();
    let mut at = offset;
    for dst in run {
        for mm in c.verify(member, at, dst) {
            let inside = known.iter().any(|k| {
                k.offset_bytes <= mm.offset_bytes && mm.offset_bytes < k.offset_bytes + k.len
            });
            if !inside {
                out.push(BadRange {
                    member: member as u32,
                    offset_bytes: mm.offset_bytes,
                    len: BLOCK_BYTES,
                    checksum: true,
                });
            }
        }
        at += dst.len() as u64;
    }
    out
}

/// Phase 1 of a batch: every read of every plan, straight into its destination. Destinations
/// are carved out of the buffers as disjoint slices (a plan's reads never overlap: checked by
/// `Plan::check`), so each member's thread fills its own slices with no copy. With `users`,
/// buffer 0 of every plan is the caller's memory.
fn read_phase_into(
    plans: &[Plan],
    bufs: &mut [Vec<Vec<u8>>],
    mut users: Option<&mut [&mut [u8]]>,
    m: &Members<'_>,
) -> Result<(), BatchErrors> {
    let mut by_member: Vec<Vec<(u64, &mut [u8])>> =
        (0..m.members.len()).map(|_| Vec::new()).collect();
    let mut user_iter = users.as_deref_mut().map(|u| u.iter_mut());
    for (p, pb) in plans.iter().zip(bufs.iter_mut()) {
        let user: Option<&mut [u8]> = user_iter
            .as_mut()
            .map(|it| &mut **it.next().expect("one user buffer per plan"));
        // Reads per buffer, in buffer order.
        let nbufs = p.buffers.len();
        let mut per_buf: Vec<Vec<&MemberIo>> = vec![Vec::new(); nbufs];
        for io in &p.reads {
            per_buf[io.data.buf].push(io);
        }
        let mut targets: Vec<&mut [u8]> = Vec::with_capacity(nbufs);
        let mut user = user;
        let unallocated = pb.is_empty();
        for (bi, b) in pb.iter_mut().enumerate() {
            match (bi, user.take()) {
                (0, Some(u)) => targets.push(u),
                (_, u) => {
                    user = u;
                    targets.push(b.as_mut_slice());
                }
            }
        }
        if let Some(u) = user.take() {
            // A direct plan has no allocated buffers: buffer 0 is the caller's.
            debug_assert!(unallocated);
            targets.push(u);
        }
        for (ios, target) in per_buf.iter_mut().zip(targets) {
            ios.sort_by_key(|io| io.data.off);
            let mut rest: &mut [u8] = target;
            let mut pos = 0usize;
            for io in ios.iter() {
                assert!(io.data.off >= pos, "reads into one buffer overlap: {io:?}");
                let tail = std::mem::take(&mut rest);
                let (_, tail) = tail.split_at_mut(io.data.off - pos);
                let (dst, tail) = tail.split_at_mut(io.data.len);
                rest = tail;
                pos = io.data.end();
                by_member[io.member as usize].push((io.offset_bytes, dst));
            }
        }
    }
    let bytes: usize = by_member.iter().flatten().map(|(_, b)| b.len()).sum();
    let parallel = worth_threads(m, &by_member, bytes);
    let results: Vec<Result<Vec<BadRange>, MemberError>> =
        per_member(by_member, parallel, |member, ios| {
            let dev = m.members[member].as_ref().ok_or_else(|| MemberError {
                member: member as u32,
                write: false,
                source: std::io::Error::other("member is failed or missing"),
            })?;
            let mut bad: Vec<BadRange> = Vec::new();
            let mut run: Vec<&mut [u8]> = Vec::new();
            let mut ios = ios.into_iter().peekable();
            while let Some((offset, first)) = ios.next() {
                // Reads of consecutive member bytes (the same member's units of consecutive
                // cycles, say) come in as one vectored read.
                let mut end = offset + first.len() as u64;
                run.clear();
                run.push(first);
                while let Some((_, dst)) = ios.next_if(|(o, _)| *o == end) {
                    end += dst.len() as u64;
                    run.push(dst);
                }
                let at = m.data_offset_bytes + offset;
                let c = &m.counters[member];
                c.reads_in_flight.fetch_add(1, Ordering::Relaxed);
                c.read_head.store(end, Ordering::Relaxed);
                let read = match run.as_mut_slice() {
                    [one] => dev.read_at(one, at),
                    many => dev.read_vectored_at(many, at),
                };
                c.reads_in_flight.fetch_sub(1, Ordering::Relaxed);
                let mut found: Vec<BadRange> = Vec::new();
                if let Err(e) = read {
                    // A few bad sectors are repaired from redundancy; a member whose reads fail
                    // everywhere (or past its end) is failed.
                    let so_far: u64 = bad.iter().map(|b| b.len.div_ceil(BLOCK_BYTES)).sum();
                    match probe_run(&**dev, member as u32, m, offset, &mut run) {
                        Some(b)
                            if !b.is_empty()
                                && so_far
                                    + b.iter()
                                        .map(|b| b.len.div_ceil(BLOCK_BYTES))
                                        .sum::<u64>()
                                    <= MAX_BAD_BLOCKS_PER_READ as u64 =>
                        {
                            found = b
                        }
                        _ => {
                            return Err(MemberError {
                                member: member as u32,
                                write: false,
                                source: e,
                            })
                        }
                    }
                }
                if let Some(c) = m.checksums {
                    let mut mism = verify_run(c, member, offset, &run, &found);
                    if m.marked_lost_as_stored {
                        mism.retain(|b| c.stored(member, b.offset_bytes) != crate::csum::POISON);
                    }
                    found.extend(mism);
                }
                bad.extend(found);
                m.counters[member]
                    .read_bytes
                    .fetch_add(end - offset, Ordering::Relaxed);
                // The plan's member reads, merged or not (what status reports per member).
                m.counters[member]
                    .reads
                    .fetch_add(run.len() as u64, Ordering::Relaxed);
            }
            Ok(bad)
        });
    let mut errors = BatchErrors::default();
    for r in results {
        match r {
            Err(e) => errors.read_errors.push(e),
            Ok(b) => errors.bad.extend(b),
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}

/// Runs `f` for every member that has I/O in `by_member`, each member on its own thread so
/// that members work in parallel while each sees its I/Os in order. One busy member runs on the
/// calling thread (a thread would only add its start-up cost), and so does the last of several.
pub(crate) fn per_member<I, T, F>(by_member: Vec<Vec<I>>, parallel: bool, f: F) -> Vec<T>
where
    I: Send,
    T: Send,
    F: Fn(usize, Vec<I>) -> T + Sync,
{
    let mut busy: Vec<(usize, Vec<I>)> = by_member
        .into_iter()
        .enumerate()
        .filter(|(_, ios)| !ios.is_empty())
        .collect();
    let Some((last_member, last_ios)) = busy.pop() else {
        return Vec::new();
    };
    if busy.is_empty() || !parallel {
        busy.push((last_member, last_ios));
        return busy
            .into_iter()
            .map(|(member, ios)| f(member, ios))
            .collect();
    }
    let f = &f;
    if let Some(mut seats) = IoSeats::take(busy.len()) {
        // Hand the other members' I/O to the kept threads: spawning a thread per member and
        // phase cost more than a 4 KiB write itself on fast members (RAID5 random writes on
        // O_DIRECT loop devices: 0.17x of RAID0 with spawned threads, 0.36x with kept ones,
        // bench/loop_direct.sh).
        let mut out: Vec<Option<T>> = Vec::new();
        out.resize_with(busy.len() + 1, || None);
        let (theirs, mine_slot) = out.split_at_mut(busy.len());
        io_pool().in_place_scope(|s| {
            for ((member, ios), slot) in busy.into_iter().zip(theirs.iter_mut()) {
                let seat = seats.one();
                s.spawn(move |_| {
                    *slot = Some(f(member, ios));
                    drop(seat);
                });
            }
            mine_slot[0] = Some(f(last_member, last_ios));
        });
        return out
            .into_iter()
            .map(|t| t.expect("every member's I/O ran"))
            .collect();
    }
    std::thread::scope(|s| {
        let handles: Vec<_> = busy
            .into_iter()
            .map(|(member, ios)| s.spawn(move || f(member, ios)))
            .collect();
        let mine = f(last_member, last_ios);
        let mut out: Vec<T> = handles
            .into_iter()
            .map(|h| h.join().expect("member I/O thread"))
            .collect();
        out.push(mine);
        out
    })
}

/// Threads kept for member I/O (they block in reads and writes, so there are more than
/// cores); when all are promised ([`IoSeats`]), a phase spawns its own.
const IO_POOL_THREADS: usize = 64;

/// Threads of [`io_pool`] promised to I/O handed to it: a phase takes a seat per member it
/// hands over, or spawns its own threads when too few are left. So a handed-over I/O never
/// waits for a thread behind I/O to other members (a member that hangs would otherwise stall
/// the healthy ones once its I/Os held every kept thread).
static IO_SEATS_TAKEN: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// `n` seats of [`IO_SEATS_TAKEN`], given back one by one as [`IoSeat`]s drop.
struct IoSeats(usize);

/// One seat, given back when dropped (after its I/O ran).
struct IoSeat;

impl IoSeats {
    fn take(n: usize) -> Option<IoSeats> {
        let before = IO_SEATS_TAKEN.fetch_add(n, Ordering::AcqRel);
        if before + n > IO_POOL_THREADS {
            IO_SEATS_TAKEN.fetch_sub(n, Ordering::AcqRel);
            return None;
        }
        Some(IoSeats(n))
    }

    fn one(&mut self) -> IoSeat {
        assert!(self.0 > 0, "more seats used than taken");
        self.0 -= 1;
        IoSeat
    }
}

impl Drop for IoSeats {
    fn drop(&mut self) {
        // Seats taken but not handed out (none, unless a member's I/O panicked first).
        IO_SEATS_TAKEN.fetch_sub(self.0, Ordering::AcqRel);
    }
}

impl Drop for IoSeat {
    fn drop(&mut self) {
        IO_SEATS_TAKEN.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The process's member I/O threads, started on first use.
fn io_pool() -> &'static rayon_core::ThreadPool {
    static POOL: std::sync::OnceLock<rayon_core::ThreadPool> = std::sync::OnceLock::new();
    POOL.get_or_init(|| {
        rayon_core::ThreadPoolBuilder::new()
            .num_threads(IO_POOL_THREADS)
            .thread_name(|i| format!("raidforge-io-{i}"))
            .build()
            .expect("starting the member I/O threads")
    })
}

/// Batches up to this size, on members that complete at memory speed, run on the calling
/// thread: member threads would cost more than they save (measured with bench/nbd.sh on 2
/// cores: 1 MiB sequential NBD I/O was faster inline than with a thread per member).
const INLINE_BATCH_BYTES: usize = 4 << 20;

/// Whether a phase moving `bytes` over the members with I/O in `by_member` should run one
/// thread per member.
fn worth_threads<I>(m: &Members<'_>, by_member: &[Vec<I>], bytes: usize) -> bool {
    bytes > INLINE_BATCH_BYTES
        || by_member.iter().enumerate().any(|(i, ios)| {
            !ios.is_empty()
                && !m.members[i]
                    .as_ref()
                    .is_some_and(|d| d.completes_in_memory())
        })
}

/// Runs only the reads of `plan` (a scrub's verify plan) and returns its buffers and the
/// ranges that read wrong (whose bytes in the buffers are not to be trusted); only member
/// failures are errors.
pub fn run_reads_flagged(
    plan: &Plan,
    m: &Members<'_>,
) -> Result<(Vec<Vec<u8>>, Vec<BadRange>), BatchErrors> {
    let mut bufs = vec![plan
        .buffers
        .iter()
        .map(|&len| vec![0u8; len])
        .collect::<Vec<_>>()];
    let bad = match read_phase_into(std::slice::from_ref(plan), &mut bufs, None, m) {
        Ok(()) => Vec::new(),
        Err(e) if e.read_errors.is_empty() => e.bad,
        Err(e) => return Err(e),
    };
    Ok((bufs.pop().expect("one plan"), bad))
}

/// Runs only the reads of `plan` (a verify plan, say) and returns its buffers.
pub fn run_reads(plan: &Plan, m: &Members<'_>) -> Result<Vec<Vec<u8>>, BatchErrors> {
    let mut bufs = vec![plan
        .buffers
        .iter()
        .map(|&len| vec![0u8; len])
        .collect::<Vec<_>>()];
    read_phase_into(std::slice::from_ref(plan), &mut bufs, None, m)?;
    Ok(bufs.pop().expect("one plan"))
}

/// Why a logged write ([`run_write_logged`]) did not complete.
#[derive(Debug)]
pub enum LoggedWriteError<E> {
    /// A read failed: nothing was logged or written (fail the members, plan again).
    Reads(BatchErrors),
    /// The log refused the record: nothing was written in place.
    Log(E),
    /// Some in-place writes failed (the others and the record are durable).
    Writes(BatchErrors),
}

/// [`run_write`] with a write-ahead log: after the reads and ops, hands every member write of
/// the plans (member, offset in the data area, bytes), in plan order, to `log`, which must make
/// them durable before it returns; only then are the members written in place. `done` gets
/// what `log` returned once the in-place writes are over, whatever their outcome.
pub fn run_write_logged<T, E>(
    plans: &[Plan],
    data: &[u8],
    m: &Members<'_>,
    log: impl FnOnce(&[(u32, u64, &[u8])]) -> Result<T, E>,
    done: impl FnOnce(T),
) -> Result<(), LoggedWriteError<E>> {
    let srcs: Vec<&[u8]> = plans
        .iter()
        .map(|p| &data[p.user_offset as usize..p.user_offset as usize + p.buffers[0]])
        .collect();
    let direct = plans.iter().all(is_direct);
    let bufs: Vec<Vec<Vec<u8>>> = if direct {
        plans.iter().map(|_| Vec::new()).collect()
    } else {
        prepare_from(plans, &srcs, m).map_err(LoggedWriteError::Reads)?
    };
    let mut entries: Vec<(u32, u64, &[u8])> = Vec::new();
    for (pi, p) in plans.iter().enumerate() {
        for io in &p.writes {
            let s = io.data;
            let src: &[u8] = if direct || s.buf == 0 {
                &srcs[pi][s.off..s.end()]
            } else {
                &bufs[pi][s.buf][s.off..s.end()]
            };
            entries.push((io.member, io.offset_bytes, src));
        }
    }
    if entries.is_empty() {
        return Ok(());
    }
    let token = log(&entries).map_err(LoggedWriteError::Log)?;
    let r = commit_from(plans, &bufs, Some(&srcs), m);
    done(token);
    r.map_err(LoggedWriteError::Writes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::sync::Barrier;

    /// The results come back in member order whichever way the I/O ran: on the calling
    /// thread, on the kept threads, or on threads of its own when there are more busy members
    /// than kept threads.
    #[test]
    fn per_member_returns_every_members_result_in_member_order() {
        for members in [1usize, 2, 5, IO_POOL_THREADS + 6] {
            for parallel in [false, true] {
                let by_member: Vec<Vec<usize>> = (0..members)
                    .map(|m| if m % 3 == 1 { vec![] } else { vec![m, m * 10] })
                    .collect();
                let ran = AtomicUsize::new(0);
                let out = per_member(by_member, parallel, |member, ios| {
                    ran.fetch_add(1, Ordering::Relaxed);
                    assert_eq!(ios, vec![member, member * 10]);
                    member
                });
                let want: Vec<usize> = (0..members).filter(|m| m % 3 != 1).collect();
                assert_eq!(out, want, "{members} members, parallel {parallel}");
                assert_eq!(ran.load(Ordering::Relaxed), want.len());
            }
        }
    }

    /// Members' I/O runs at the same time (each waits for all the others at a barrier, which
    /// would never open if any two ran one after the other), on the kept threads and, with
    /// more busy members than those, on threads of its own.
    #[test]
    fn members_run_in_parallel() {
        for members in [2usize, 4, IO_POOL_THREADS + 2] {
            let barrier = Barrier::new(members);
            let by_member: Vec<Vec<()>> = (0..members).map(|_| vec![()]).collect();
            per_member(by_member, true, |_, _| {
                barrier.wait();
            });
        }
    }
}
