//! Lazy parity: the policy switch, the deferred-parity list (BPGL) on the members and its
//! flushes.

use super::*;

/// The deferred-parity list's two slots ([`raidcore::region::BPGL`]).
pub(super) const BPGL_SLOTS: DualSlot = DualSlot::new("deferred-parity list", region::BPGL);

/// The group commit of the deferred-parity list on a served pool (under the pool mutex).
///
/// A lazy write that lists stripes must not touch a member until a record holding them is
/// durable. Written under the pool mutex, every such write held up every request for a record
/// write (a 4 ms request on each copy's member, in turn): lazy RM2 over 8 members emulated at
/// 4 ms answered in 61.5 ms against the 33.4 ms simulated, and in 31.9 ms with the records
/// left out (bench/calibrate.py). So a served write lists its stripes under the mutex and
/// then waits, outside it, for a record taken after its listing
/// (`serve_support::SharedPool::list_durable`): one write at a time writes the list as it
/// stands then, for every write that listed before it, while the next ones queue.
#[derive(Debug, Default)]
pub(crate) struct ListCommit {
    /// Writes that put new stripes on the list since the pool opened.
    pub(crate) listed: u64,
    /// `listed` when the newest durable record's list was taken: every listing up to here is
    /// on the members.
    pub(crate) durable_at: u64,
    /// A record is being written outside the pool mutex. Records are written one at a time
    /// (two in flight could land out of order in a slot); one asked for meanwhile is left to
    /// the writer ([`ListCommit::again`]).
    pub(crate) writing: bool,
    /// The list was to be recorded while [`ListCommit::writing`]: its writer records it again
    /// when done.
    pub(crate) again: bool,
}

/// A deferred-parity record taken under the pool mutex, to be written outside it.
pub(crate) struct ListRecord {
    seq: u64,
    /// [`ListCommit::listed`] when taken.
    at: u64,
    bytes: Vec<u8>,
    stripes: Vec<raidcore::StripeId>,
    handles: Vec<Option<Arc<dyn Member>>>,
    counters: Arc<[Counters]>,
    copies: usize,
}

/// Members that could not take a record, or the error when none took it.
pub(crate) type ListWritten =
    std::result::Result<Vec<(usize, std::io::Error)>, crate::dual_slot::SlotWriteError>;

impl ListRecord {
    /// Writes the record to its members and makes it durable (no lock held).
    pub(crate) fn write(&self) -> ListWritten {
        BPGL_SLOTS.write(
            &self.handles,
            &self.counters,
            self.copies,
            self.seq,
            &self.bytes,
            true,
        )
    }
}

/// The newest valid deferred-parity record of array `uuid` on any of `members` (both slots of
/// each are read), and how many members hold it.
pub(super) fn newest_bpgl(
    members: &[Option<Arc<dyn Member>>],
    uuid: &[u8; 16],
) -> Option<(BpglRecord, usize)> {
    let found: Vec<(usize, BpglRecord)> = (BPGL_SLOTS.read_each(members, BpglRecord::encoded_len))
        .into_iter()
        .filter_map(|(i, b)| Some((i, BpglRecord::decode(&b)?)))
        .filter(|(_, r)| &r.uuid == uuid)
        .collect();
    let newest = found.iter().map(|(_, r)| r.sequence).max()?;
    let holders: BTreeSet<usize> = (found.iter())
        .filter(|(_, r)| r.sequence == newest)
        .map(|&(i, _)| i)
        .collect();
    let (_, r) = found.into_iter().rfind(|(_, r)| r.sequence == newest)?;
    Some((r, holders.len()))
}

/// Runs flush plans on `view`'s members, through `journal` when the pool has one
/// ([`Journal::append_final`]): replay after a crash rewrites every record since the last
/// checkpoint, and an older write's record of the parity a flush recomputed, replayed over
/// it, would leave the stripe's parity behind its data with the stripe no longer listed
/// (served fault harness, seed 0x6b099bac: a sector never written read another write's
/// bytes after two failures). Members the journal failed come back as write errors. `Err`
/// only when the journal refused the record with no member to blame.
pub(crate) fn run_flush(
    plans: &[raidcore::Plan],
    view: &Members<'_>,
    journal: Option<&Arc<Journal>>,
) -> Result<std::result::Result<(), crate::exec::BatchErrors>> {
    let Some(j) = journal else {
        let mut empty: Vec<Vec<u8>> = plans.iter().map(|_| Vec::new()).collect();
        let mut users: Vec<&mut [u8]> = empty.iter_mut().map(|v| v.as_mut_slice()).collect();
        return Ok(run_plans(plans, &mut users, view));
    };
    let r = crate::exec::run_write_logged(
        plans,
        &[],
        view,
        |e| j.append_final(view.members, e),
        |seqs| seqs.into_iter().for_each(|s| j.done(s)),
    );
    let journal_failed = j.take_failed_members();
    let with_journal_failed = |mut e: crate::exec::BatchErrors| {
        e.write_errors.extend(
            journal_failed
                .iter()
                .map(|&member| crate::exec::MemberError {
                    member,
                    write: true,
                    source: std::io::Error::other("its write-journal copy failed"),
                }),
        );
        e
    };
    match r {
        Ok(()) if journal_failed.is_empty() => Ok(Ok(())),
        Ok(()) => Ok(Err(with_journal_failed(Default::default()))),
        Err(LoggedWriteError::Reads(e) | LoggedWriteError::Writes(e)) => {
            Ok(Err(with_journal_failed(e)))
        }
        Err(LoggedWriteError::Log(_)) if !journal_failed.is_empty() => {
            Ok(Err(with_journal_failed(Default::default())))
        }
        Err(LoggedWriteError::Log(e)) => {
            Err(PoolError::Io(format!("flushing deferred parity: {e}")))
        }
    }
}

impl Pool {
    /// The parity policy writes use.
    pub fn parity(&self) -> ParityPolicy {
        self.lazy.parity
    }

    /// Changes the parity policy (recorded in the superblocks when the pool is closed). Going
    /// eager does not flush: deferred updates stay listed until flushed.
    pub fn set_parity(&mut self, parity: ParityPolicy) -> Result<()> {
        if parity == ParityPolicy::Lazy && !self.state.lazy_groups().supported() {
            return Err(PoolError::Usage(format!(
                "--parity lazy needs a two-parity layout (rm2, raid6, or raidplus/random/hash \
                 with --level 6); this pool is {}",
                self.sb.kind.name()
            )));
        }
        // Cycles moved since the layout was last recorded were recorded lazily only for
        // moves that leave an old copy: record them all before a write can defer parity in
        // one (see `Pool::mark_rebuilt_batch`).
        if parity == ParityPolicy::Lazy && self.sb.moved_unrecorded {
            let tag = match self.tag() {
                ArrayStateTag::Clean => ArrayStateTag::Active,
                t => t,
            };
            self.persist(tag)?;
        }
        self.lazy.parity = parity;
        Ok(())
    }

    /// Writes the deferred-parity list to the first `tolerance + 1` present members
    /// ([`Pool::record_copies`]; alternating between
    /// the two slots after the superblock, sequence-numbered, checksummed) and makes it
    /// durable. Called before a lazy write that lists new stripes runs its member writes.
    pub(crate) fn persist_bpgl_if_dirty(&mut self) -> Result<()> {
        if self.lazy.dirty
            || !self
                .state
                .bpgl()
                .stripes()
                .eq(self.lazy.on_disk.iter().copied())
        {
            self.persist_bpgl()?;
        }
        Ok(())
    }

    ///
    /// While a served write records the list outside the pool mutex, the list is left to it
    /// to record again when it is done ([`ListCommit::again`]).
    pub(crate) fn persist_bpgl(&mut self) -> Result<()> {
        if self.lazy.commit.writing {
            self.lazy.commit.again = true;
            return Ok(());
        }
        let r = self.list_record();
        let written = r.write();
        self.list_recorded(r, written).map(|_| ())
    }

    /// The list as it stands, as a record to write (the next sequence number).
    pub(crate) fn list_record(&self) -> ListRecord {
        let seq = self.lazy.seq + 1;
        ListRecord {
            seq,
            at: self.lazy.commit.listed,
            bytes: self.state.bpgl().record(self.sb.uuid, seq).encode(),
            stripes: self.state.bpgl().stripes().collect(),
            handles: self.members.handles.clone(),
            counters: Arc::clone(&self.members.counters),
            copies: self.record_copies(),
        }
    }

    /// Records the outcome of writing `r`: `Ok(true)` when every copy is durable. Members
    /// that could not take it are failed like members failing a data write, and recording
    /// that writes the list again, to the members left (each round fails a member, so this
    /// ends): `Ok(false)`, and plans made before are no longer current (callers check).
    pub(crate) fn list_recorded(&mut self, r: ListRecord, written: ListWritten) -> Result<bool> {
        let dead = written.map_err(|e| PoolError::Io(e.to_string()))?;
        if !dead.is_empty() {
            self.fail_dead_members(&dead)?;
            self.lazy.dirty = true;
            let tag = self.tag();
            self.persist(tag)?;
            return Ok(false);
        }
        // (A member back from failure may have numbered the list past `r` meanwhile.)
        self.lazy.seq = self.lazy.seq.max(r.seq);
        self.lazy.dirty = false;
        self.lazy.on_disk = r.stripes;
        let c = &mut self.lazy.commit;
        c.durable_at = c.durable_at.max(r.at);
        Ok(true)
    }

    /// Plans flushes of up to `max_cycles` cycles of the deferred-parity list.
    /// The cycles' layouts are recorded first if a rebuild moved them since
    /// ([`Pool::record_layout_of_cycles`]: a flush writes parity in the new places).
    pub(crate) fn plan_flush_batch(
        &mut self,
        max_cycles: usize,
    ) -> Result<Vec<raidcore::FlushPlan>> {
        let mut fps = Vec::new();
        let cycles = self.state.bpgl().flushable_cycles(max_cycles);
        if let (Some(&first), Some(&last)) = (cycles.first(), cycles.last()) {
            self.record_layout_of_cycles(first..=last)?;
        }
        for c in self.state.bpgl().flushable_cycles(max_cycles) {
            if let Some(f) = plan_flush_cycle(&self.geo, &self.state, c)? {
                fps.push(f);
            }
        }
        Ok(fps)
    }

    /// Records the outcome of running flush plans: on success the recomputed parities are
    /// made durable and their entries dropped (returns how many); on member errors the members
    /// are failed (returns `None`: plan again).
    pub(crate) fn end_flush(
        &mut self,
        fps: &[raidcore::FlushPlan],
        outcome: std::result::Result<(), crate::exec::BatchErrors>,
    ) -> Result<Option<usize>> {
        match outcome {
            Ok(()) => {
                // The recomputed parities are durable before the list forgets them.
                self.flush_members()?;
                let mut n = 0;
                for f in fps {
                    n += self.state.flush_done(&f.entries);
                }
                self.lazy.dirty = true;
                Ok(Some(n))
            }
            Err(e) => {
                if !e.bad.is_empty() {
                    // Blocks the flush read wrong: repaired (or recorded lost), then planned
                    // again.
                    self.repair_ranges(&e.bad)?;
                }
                let failed = e.failed_members();
                if !failed.is_empty() {
                    self.fail_members(&failed)?;
                }
                Ok(None)
            }
        }
    }

    /// Recomputes deferred background parities until at most `down_to` stripes are listed
    /// (0: all), a batch of cycles at a time; then records the shorter list. Returns the
    /// number of stripes flushed. Only for exclusive use of the pool (the CLI); a served pool
    /// flushes through [`crate::serve_support::SharedPool`], which takes stripe locks.
    pub fn flush_bpgl(&mut self, down_to: usize) -> Result<usize> {
        let mut flushed = 0;
        let mut attempts = 0;
        while self.state.bpgl().len() > down_to {
            let fps = self.plan_flush_batch(16)?;
            if fps.is_empty() {
                break;
            }
            let plans: Vec<raidcore::Plan> = fps.iter().map(|f| f.plan.clone()).collect();
            let outcome = run_flush(&plans, &self.members_view(), self.wh.journal.as_ref())?;
            match self.end_flush(&fps, outcome)? {
                Some(n) => flushed += n,
                None => {
                    attempts += 1;
                    if attempts > REPLANS_MAX {
                        return Err(PoolError::Io(
                            "flushing deferred parity: members keep failing".into(),
                        ));
                    }
                }
            }
        }
        self.persist_bpgl_if_dirty()?;
        Ok(flushed)
    }
}
