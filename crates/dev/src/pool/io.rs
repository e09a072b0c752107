//! Reads and writes. Every write, plain, journaled or served, goes through one loop
//! ([`write_loop`]): plan it ([`Pool::plan_write_listed`]: lazy deferrals listed first), run it
//! ([`run_attempt`]: through the journal when the pool has one), act on the outcome
//! ([`Outcome`]), at most [`REPLANS_MAX`] times. Where it runs is a [`WriteSite`]: the pool
//! itself, or a served pool (`crate::serve_support`), which plans under its mutex and runs
//! under stripe locks outside it.

use super::*;

/// How often a request (a read, a write, a batch of deferred-parity flushes) is planned
/// again, after members failed or blocks that read wrong were repaired, before it gives up:
/// the one bound of every replan loop.
pub(crate) const REPLANS_MAX: usize = 64;

/// The error of a request that was planned again [`REPLANS_MAX`] times.
pub(crate) fn gave_up(what: &str, offset: u64) -> PoolError {
    PoolError::Io(format!(
        "{what} at {offset}: gave up after {REPLANS_MAX} attempts (members keep failing, or \
         blocks keep reading wrong after being repaired: check the members)"
    ))
}

/// The pieces a write of `len` bytes at `offset` runs in: one, or with a journal pieces that
/// end on multiples of `piece` bytes (so that journal records stay bounded). Yields (offset,
/// range of the data).
pub(crate) fn pieces(
    offset: u64,
    len: usize,
    piece: Option<u64>,
) -> impl Iterator<Item = (u64, std::ops::Range<usize>)> {
    let mut at = 0usize;
    // Without a journal an empty write is planned too (it plans nothing); with one it is
    // no record at all.
    let mut first = piece.is_none();
    std::iter::from_fn(move || {
        if at >= len && !std::mem::take(&mut first) {
            return None;
        }
        first = false;
        let end = match piece {
            Some(p) => (((offset + at as u64) / p + 1) * p - offset).min(len as u64) as usize,
            None => len,
        };
        let r = (offset + at as u64, at..end);
        at = end;
        Some(r)
    })
}

/// A write planned and ready to run: its plans, the stripes it deferred (released once its
/// member writes are over) and what the site needs to run it.
pub(crate) struct Attempt<R> {
    pub plans: Vec<raidcore::Plan>,
    pub deferred: Vec<raidcore::StripeId>,
    pub run: R,
}

/// What an attempt's outcome asks for: the members to fail, and what comes next.
#[derive(Debug)]
pub(crate) struct Outcome {
    pub failed: Vec<u32>,
    pub next: Next,
}

#[derive(Debug)]
pub(crate) enum Next {
    /// Written: every healthy member holds the new data (the failed ones' units are implied
    /// by the parity written).
    Done,
    /// Blocks the write needed read wrong (nothing was written, no member failed): repair
    /// them while the attempt still holds its stripes, then plan again.
    Repair(Vec<crate::exec::BadRange>),
    /// Members failed before anything was written in place: plan again without them.
    Replan,
    /// The journal refused the record though no member failed.
    Refused(PoolError),
}

impl Outcome {
    fn done() -> Outcome {
        Outcome {
            failed: Vec::new(),
            next: Next::Done,
        }
    }

    /// The outcome of a batch that failed, `failed` members already known to have failed
    /// (journal copies). Reads stop a batch before any write: a batch whose reads all worked
    /// wrote every healthy member.
    fn of_batch(e: crate::exec::BatchErrors, mut failed: Vec<u32>) -> Outcome {
        let next = if e.read_errors.is_empty() && e.bad.is_empty() {
            Next::Done
        } else if e.read_errors.is_empty() && failed.is_empty() {
            return Outcome {
                failed,
                next: Next::Repair(e.bad),
            };
        } else {
            Next::Replan
        };
        failed.extend(e.failed_members());
        failed.sort_unstable();
        failed.dedup();
        Outcome { failed, next }
    }
}

/// Runs an attempt's plans on `view`'s members, through `journal` when there is one (the
/// record made durable before any in-place write), and says what the outcome asks for.
pub(crate) fn run_attempt(
    plans: &[raidcore::Plan],
    data: &[u8],
    view: &Members<'_>,
    journal: Option<&Arc<Journal>>,
) -> Outcome {
    // A write's reads take blocks marked lost as stored (see `Members::marked_lost_as_stored`).
    let view = &Members {
        marked_lost_as_stored: true,
        ..*view
    };
    let Some(j) = journal else {
        return match crate::exec::run_write(plans, data, view) {
            Ok(()) => Outcome::done(),
            Err(e) => Outcome::of_batch(e, Vec::new()),
        };
    };
    let r = crate::exec::run_write_logged(
        plans,
        data,
        view,
        |e| j.append(view.members, e),
        |seq| j.done(seq),
    );
    let failed = j.take_failed_members();
    match r {
        Ok(()) => Outcome {
            failed,
            next: Next::Done,
        },
        Err(LoggedWriteError::Reads(e) | LoggedWriteError::Writes(e)) => {
            Outcome::of_batch(e, failed)
        }
        // The journal lost a member: plan again without it.
        Err(LoggedWriteError::Log(_)) if !failed.is_empty() => Outcome {
            failed,
            next: Next::Replan,
        },
        Err(LoggedWriteError::Log(e)) => Outcome {
            failed,
            next: Next::Refused(PoolError::Io(e.to_string())),
        },
    }
}

/// Who makes a lazy write's listing durable ([`Pool::plan_write_listed`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Listing {
    /// The planner, under the pool mutex (an exclusive pool).
    Here,
    /// The caller, once outside the pool mutex (a served pool's group commit).
    ByCaller,
}

/// Where a write runs.
pub(crate) trait WriteSite {
    /// What running an attempt needs besides its plans (a served pool: its stripe locks and
    /// the members they were planned against).
    type Run;
    /// Plans an attempt (lazy deferrals listed and made durable); `None` when the plans went
    /// stale before they could run (the deferrals are released; plan again).
    fn plan(&mut self, offset: u64, len: u64) -> Result<Option<Attempt<Self::Run>>>;
    /// Runs an attempt's plans.
    fn run(&mut self, a: &Attempt<Self::Run>, data: &[u8]) -> Outcome;
    /// Runs `f` on the pool (under a served pool's mutex).
    fn pool<T>(&mut self, f: impl FnOnce(&mut Pool) -> Result<T>) -> Result<T>;
    /// Once members failed and the attempt's stripes are released: flushes the deferred
    /// parity, so that a second failure is survived.
    fn flush_deferred(&mut self) -> Result<()>;
    /// A write of `len` bytes at `offset` is over.
    fn written(&mut self, offset: u64, len: u64) -> Result<()>;
    /// Marks the write's regions in the pool's write-intent bitmap before any member write
    /// (a pool without a journal; `None` with one): held until the write is over.
    fn intent(&mut self, offset: u64, len: u64) -> Result<Option<IntentGuard>>;
}

/// The one write loop: plan, run, act on the outcome, at most [`REPLANS_MAX`] times. The
/// attempt's members are failed and its blocks repaired before its stripes are released
/// (nobody reads a failed member's stale units); deferred parity is flushed after.
pub(crate) fn write_loop(site: &mut impl WriteSite, offset: u64, data: &[u8]) -> Result<()> {
    let len = data.len() as u64;
    let _intent = site.intent(offset, len)?;
    for _attempt in 0..REPLANS_MAX {
        let Some(a) = site.plan(offset, len)? else {
            continue;
        };
        let outcome = site.run(&a, data);
        // The membership the plans were made against (every plan of an attempt is made
        // under one state).
        let planned_at = a.plans.first().map(|p| p.state_generation);
        let Attempt { deferred, run, .. } = a;
        let settled = site.pool(|p| p.settle_attempt(&deferred, &outcome));
        drop(run);
        settled?;
        if !outcome.failed.is_empty() {
            site.flush_deferred()?;
        }
        match outcome.next {
            Next::Done => {
                // Members failed under the write, its own or (a served pool runs requests
                // side by side) another request's since it was planned: what it wrote must
                // still be readable from the members left, or the write fails (issue 21,
                // defect 3: a served write beyond the tolerance was acknowledged; the served
                // fault harness, seed 0x6b076807: a write whose only copy's member another
                // request failed while it ran).
                let failed_here = !outcome.failed.is_empty();
                site.pool(|p| {
                    if failed_here || planned_at.is_some_and(|g| g != p.state().generation()) {
                        p.check_written(offset, len)
                    } else {
                        Ok(())
                    }
                })?;
                return site.written(offset, len);
            }
            Next::Repair(_) | Next::Replan => {}
            Next::Refused(e) => return Err(e),
        }
    }
    Err(gave_up("write", offset))
}

/// The exclusive pool runs writes on the caller's thread.
impl WriteSite for Pool {
    type Run = ();

    fn plan(&mut self, offset: u64, len: u64) -> Result<Option<Attempt<()>>> {
        self.check_lost_for_write(offset, len)?;
        let (plans, deferred, _) = self.plan_write_listed(offset, len, Listing::Here)?;
        Ok(Some(Attempt {
            plans,
            deferred,
            run: (),
        }))
    }

    fn run(&mut self, a: &Attempt<()>, data: &[u8]) -> Outcome {
        run_attempt(
            &a.plans,
            data,
            &self.members_view(),
            self.wh.journal.as_ref(),
        )
    }

    fn pool<T>(&mut self, f: impl FnOnce(&mut Pool) -> Result<T>) -> Result<T> {
        f(self)
    }

    fn flush_deferred(&mut self) -> Result<()> {
        self.flush_bpgl(0).map(|_| ())
    }

    fn intent(&mut self, offset: u64, len: u64) -> Result<Option<IntentGuard>> {
        self.intent_begin(offset, len)
    }

    /// Lost ranges the write covered hold data again; a full deferred-parity list is
    /// flushed down to half its bound.
    fn written(&mut self, offset: u64, len: u64) -> Result<()> {
        self.clear_lost(offset, len);
        let b = self.state.bpgl();
        if !b.is_empty() && b.len() >= b.capacity() {
            let half = b.capacity() / 2;
            self.flush_bpgl(half)?;
        }
        Ok(())
    }
}

impl Pool {
    pub(crate) fn check_range(&self, offset: u64, len: u64) -> Result<()> {
        let cap = self.capacity_bytes();
        if offset.checked_add(len).is_none_or(|end| end > cap) {
            return Err(PoolError::Usage(format!(
                "range {offset}+{len} is beyond the end of the pool ({cap} bytes)"
            )));
        }
        Ok(())
    }

    /// Reads `len` bytes at `offset`. A member that fails is failed and the read re-planned.
    pub fn read(&mut self, offset: u64, len: u64) -> Result<Vec<u8>> {
        if self.ido.note(offset, len) {
            return Err(self.ido_busy());
        }
        self.read_plain(offset, len)
    }

    /// [`Pool::read`] without zone tracking or IDO routing (the served pool routes first).
    pub(crate) fn read_plain(&mut self, offset: u64, len: u64) -> Result<Vec<u8>> {
        self.check_range(offset, len)?;
        self.check_lost(offset, len)?;
        let mut out = vec![0u8; len as usize];
        for _attempt in 0..REPLANS_MAX {
            // Mirrored units are read from the copy MD's read_balance would pick.
            let loads = crate::exec::member_loads(&self.members.counters);
            let plans = plan_read_balanced(&self.geo, &self.state, offset, len, &loads)?;
            let mut users = crate::exec::read_buffers(&plans, &mut out);
            match run_plans(&plans, &mut users, &self.members_view()) {
                Ok(()) => return Ok(out),
                // Bad blocks are repaired (or reported lost) and the read planned again; a
                // failed member is failed, its deferred parity flushed first so that a second
                // failure is survived.
                Err(e) => {
                    // Only blocks marked lost read wrong: a degraded read may reconstruct
                    // through them (checked against the checksums).
                    if e.read_errors.is_empty() && self.only_marked(&e.bad) {
                        if let Some(v) = self.read_through_marked(offset, len) {
                            return Ok(v);
                        }
                    }
                    self.absorb(e)?
                }
            }
        }
        Err(gave_up("read", offset))
    }

    /// Writes `data` at `offset`. Plans run a batch at a time (one plan per cycle touched).
    /// Under lazy parity, stripes whose background parity the write leaves stale are listed
    /// (and the list made durable) before any member write; when the list is full it is
    /// flushed down to half its bound afterwards.
    pub fn write(&mut self, offset: u64, data: &[u8]) -> Result<()> {
        if self.ido.note(offset, data.len() as u64) {
            return Err(self.ido_busy());
        }
        self.write_plain(offset, data)
    }

    /// [`Pool::write`] without zone tracking or IDO routing (the served pool routes first).
    pub(crate) fn write_plain(&mut self, offset: u64, data: &[u8]) -> Result<()> {
        self.check_range(offset, data.len() as u64)?;
        let piece = self.wh.journal.as_ref().map(|j| j.piece_bytes());
        for (at, range) in pieces(offset, data.len(), piece) {
            write_loop(self, at, &data[range])?;
        }
        Ok(())
    }

    /// Plans a write under the pool's parity policy: the plans and the stripes it defers
    /// (listed). The one place a write is planned, for plain, journaled and served writes.
    /// The list holding the deferred stripes must be durable before the plans touch a
    /// member: with [`Listing::Here`] it is when this returns; with [`Listing::ByCaller`]
    /// the third value, when there is one, is the listing ([`lazy::ListCommit::listed`]) a
    /// durable record must reach first (`SharedPool::list_durable`).
    pub(crate) fn plan_write_listed(
        &mut self,
        offset: u64,
        len: u64,
        listing: Listing,
    ) -> Result<(Vec<raidcore::Plan>, Vec<raidcore::StripeId>, Option<u64>)> {
        // A cycle a rebuild moved is recorded before it takes writes in its new places.
        self.record_layout_before_writes(offset, len)?;
        // An MD-format pool's superblocks say dirty before its first write.
        self.md_before_write()?;
        // Stripes where the write rewrites a block marked lost are reconstruct-written, so
        // that the block's stored bytes are never an old value (see `RcwFor`).
        let stripes = self.stripes_rewriting_marked(offset, len);
        if self.lazy.parity != ParityPolicy::Lazy {
            let policy = RcwFor {
                inner: &self.policy,
                stripes: &stripes,
            };
            return Ok((
                plan_write(&self.geo, &self.state, offset, len, &policy)?,
                Vec::new(),
                None,
            ));
        }
        // Each round that finds the plans stale failed a member while writing the list.
        for _ in 0..=self.members.handles.len() {
            let policy = RcwFor {
                inner: &self.policy,
                stripes: &stripes,
            };
            let lw = plan_write_lazy(&self.geo, &self.state, offset, len, &policy)?;
            if self.state.defer(&lw.deferred) > 0 {
                self.lazy.commit.listed += 1;
            }
            // Listed stripes (its own or an earlier write's, whose record may still be on its
            // way) that no durable record holds yet.
            let c = &self.lazy.commit;
            let undurable = !lw.deferred.is_empty() && c.durable_at < c.listed;
            if undurable {
                if listing == Listing::ByCaller {
                    let at = c.listed;
                    return Ok((lw.plans, lw.deferred, Some(at)));
                }
                debug_assert!(!c.writing, "an exclusive pool records the list itself");
                if let Err(e) = self.persist_bpgl() {
                    self.state.deferred_write_done(&lw.deferred);
                    return Err(e);
                }
            }
            if lw.plans.iter().all(|p| self.state.plan_is_current(p)) {
                return Ok((lw.plans, lw.deferred, None));
            }
            self.state.deferred_write_done(&lw.deferred);
        }
        Err(gave_up("write", offset))
    }

    /// After a write during which members failed (and were failed): whether what it wrote
    /// can still be read, reconstructed from the members left. When it cannot, the write
    /// fails: its client must not count the bytes written.
    pub(crate) fn check_written(&self, offset: u64, len: u64) -> Result<()> {
        match plan_read(&self.geo, &self.state, offset, len) {
            Ok(_) => Ok(()),
            Err(e) => Err(PoolError::Io(format!(
                "write at {offset}: members failed while it was written, and what it wrote \
                 cannot be read back from the members left: {e}"
            ))),
        }
    }

    /// After an attempt: releases its deferrals (its member writes are over, or it will be
    /// planned again), fails the members that failed and repairs the blocks that read wrong.
    pub(crate) fn settle_attempt(
        &mut self,
        deferred: &[raidcore::StripeId],
        outcome: &Outcome,
    ) -> Result<()> {
        self.state.deferred_write_done(deferred);
        if !outcome.failed.is_empty() {
            self.fail_members(&outcome.failed)?;
        }
        if let Next::Repair(bad) = &outcome.next {
            self.repair_bad(bad)?;
        }
        Ok(())
    }

    /// Write-hole protection of this pool.
    pub fn write_hole(&self) -> WriteHole {
        self.wh.mode
    }

    /// The open journal, if any.
    pub fn journal(&self) -> Option<&Arc<Journal>> {
        self.wh.journal.as_ref()
    }

    pub(super) fn journal_geometry(&self) -> JournalGeometry {
        JournalGeometry {
            uuid: self.sb.uuid,
            offset: self.map.journal.offset,
            len: self.map.journal.bytes,
            // As many copies as the array survives failures, plus one.
            copies: (self.geo.scheme().tolerance() + 1).max(2),
            data_offset: self.map.data_offset_bytes,
            data_bytes: self.map.data_bytes,
        }
    }
}

/// The pool's write policy, except on the stripes listed, where reconstruct-write is chosen
/// whenever both modes are possible. A write that covers a block marked lost takes its
/// stored bytes as they are (`exec::Members::marked_lost_as_stored`); those bytes carry no
/// checksum of their own, so damage to them at rest goes unseen. As a read-modify-write's
/// old value such damage would shift the new parity and, later, every unit reconstructed
/// from it, with nothing to detect it. A reconstruct-write computes the parity from the
/// stripe's current data instead, which keeps parity and stored bytes consistent whatever
/// they hold.
struct RcwFor<'a> {
    inner: &'a WritePolicy,
    stripes: &'a [raidcore::StripeId],
}

impl raidcore::ModePolicy for RcwFor<'_> {
    fn choose(&self, w: &raidcore::StripeWrite) -> raidcore::WriteMode {
        if self.stripes.contains(&w.stripe) {
            raidcore::WriteMode::Rcw
        } else {
            self.inner.choose(w)
        }
    }
    fn check(&self, disks: usize) -> std::result::Result<(), raidcore::CoreError> {
        self.inner.check(disks)
    }
}
