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

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use raidcore::{MemberIo, Plan, Slice};

use crate::Member;

/// A member I/O that failed.
#[derive(Debug, thiserror::Error)]
#[error("member {member}: {source}")]
pub struct MemberError {
    pub member: u32,
    pub write: bool,
    #[source]
    pub source: std::io::Error,
}

/// Bytes read and written per member, updated as I/O completes.
#[derive(Debug, Default)]
pub struct Counters {
    pub read_bytes: AtomicU64,
    pub write_bytes: AtomicU64,
}

/// Members as the executor sees them: `None` for a failed or missing member. `data_offset` is
/// added to every plan offset (plans address the member's data area).
pub struct Members<'a> {
    pub members: &'a [Option<Arc<dyn Member>>],
    pub counters: &'a [Counters],
    pub data_offset_bytes: u64,
}

/// The outcome of a batch: every member error that happened (empty on success).
#[derive(Debug, Default)]
pub struct BatchErrors {
    pub read_errors: Vec<MemberError>,
    pub write_errors: Vec<MemberError>,
}

impl BatchErrors {
    pub fn is_empty(&self) -> bool {
        self.read_errors.is_empty() && self.write_errors.is_empty()
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

fn slice_of(bufs: &[Vec<u8>], s: &Slice) -> std::ops::Range<usize> {
    debug_assert!(s.off + s.len <= bufs[s.buf].len());
    s.off..s.off + s.len
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

/// Phases 1 and 2 of a batch: allocates the buffers (buffer 0 a copy of the user buffer), reads,
/// and runs the ops. Returns the buffers for [`commit`].
pub fn prepare(
    plans: &[Plan],
    users: &[&mut [u8]],
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
    read_phase(plans, &mut bufs, m)?;
    for (p, b) in plans.iter().zip(bufs.iter_mut()) {
        // The planner made these ops; a codec refusal is a planner bug.
        raidcore::mem::run_ops(&p.ops, b).expect("plan ops are valid");
    }
    Ok(bufs)
}

/// Phase 3 of a batch: every write, grouped by member, one thread per member. A failing
/// member stops its own writes only.
pub fn commit(plans: &[Plan], bufs: &[Vec<Vec<u8>>], m: &Members<'_>) -> Result<(), BatchErrors> {
    let mut errors = BatchErrors::default();
    let mut by_member: Vec<Vec<(usize, MemberIo)>> = vec![Vec::new(); m.members.len()];
    for (pi, p) in plans.iter().enumerate() {
        for io in &p.writes {
            by_member[io.member as usize].push((pi, *io));
        }
    }
    let results: Vec<Result<(), MemberError>> = per_member(&by_member, |member, ios| {
        let dev = m.members[member].as_ref().ok_or_else(|| MemberError {
            member: member as u32,
            write: true,
            source: std::io::Error::other("member is failed or missing"),
        })?;
        for (pi, io) in ios {
            let b = &bufs[*pi][io.data.buf][slice_of(&bufs[*pi], &io.data)];
            dev.write_at(b, m.data_offset_bytes + io.offset_bytes)
                .map_err(|e| MemberError {
                    member: member as u32,
                    write: true,
                    source: e,
                })?;
            m.counters[member]
                .write_bytes
                .fetch_add(io.data.len as u64, Ordering::Relaxed);
        }
        Ok(())
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

/// Phase 1 of a batch: every read of every plan into `bufs` (per plan, per buffer).
fn read_phase(
    plans: &[Plan],
    bufs: &mut [Vec<Vec<u8>>],
    m: &Members<'_>,
) -> Result<(), BatchErrors> {
    let mut errors = BatchErrors::default();
    // Phase 1: reads, grouped by member, one thread per member.
    let mut by_member: Vec<Vec<(usize, MemberIo)>> = vec![Vec::new(); m.members.len()];
    for (pi, p) in plans.iter().enumerate() {
        for io in &p.reads {
            by_member[io.member as usize].push((pi, *io));
        }
    }
    let results: Vec<Result<Vec<(usize, MemberIo, Vec<u8>)>, MemberError>> =
        per_member(&by_member, |member, ios| {
            let dev = m.members[member].as_ref().ok_or_else(|| MemberError {
                member: member as u32,
                write: false,
                source: std::io::Error::other("member is failed or missing"),
            })?;
            let mut out = Vec::with_capacity(ios.len());
            for (pi, io) in ios {
                let mut buf = vec![0u8; io.data.len];
                dev.read_at(&mut buf, m.data_offset_bytes + io.offset_bytes)
                    .map_err(|e| MemberError {
                        member: member as u32,
                        write: false,
                        source: e,
                    })?;
                m.counters[member]
                    .read_bytes
                    .fetch_add(io.data.len as u64, Ordering::Relaxed);
                out.push((*pi, *io, buf));
            }
            Ok(out)
        });
    for r in results {
        match r {
            Ok(done) => {
                for (pi, io, data) in done {
                    let range = slice_of(&bufs[pi], &io.data);
                    bufs[pi][io.data.buf][range].copy_from_slice(&data);
                }
            }
            Err(e) => errors.read_errors.push(e),
        }
    }

    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}

/// Runs `f` for every member that has I/O in `by_member`, each member on its own thread so
/// that members work in parallel while each sees its I/Os in order. With a single busy member
/// it runs on the calling thread: a thread would only add its start-up cost.
fn per_member<T, F>(by_member: &[Vec<(usize, MemberIo)>], f: F) -> Vec<T>
where
    T: Send,
    F: Fn(usize, &[(usize, MemberIo)]) -> T + Sync,
{
    let busy: Vec<(usize, &[(usize, MemberIo)])> = by_member
        .iter()
        .enumerate()
        .filter(|(_, ios)| !ios.is_empty())
        .map(|(member, ios)| (member, ios.as_slice()))
        .collect();
    if busy.len() <= 1 {
        return busy
            .into_iter()
            .map(|(member, ios)| f(member, ios))
            .collect();
    }
    let f = &f;
    std::thread::scope(|s| {
        let handles: Vec<_> = busy
            .into_iter()
            .map(|(member, ios)| s.spawn(move || f(member, ios)))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("member I/O thread"))
            .collect()
    })
}

/// Runs only the reads of `plan` (a verify plan, say) and returns its buffers.
pub fn run_reads(plan: &Plan, m: &Members<'_>) -> Result<Vec<Vec<u8>>, BatchErrors> {
    let mut bufs = vec![plan
        .buffers
        .iter()
        .map(|&len| vec![0u8; len])
        .collect::<Vec<_>>()];
    read_phase(std::slice::from_ref(plan), &mut bufs, m)?;
    Ok(bufs.pop().expect("one plan"))
}
