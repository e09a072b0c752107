//! Recording state: superblocks, member flushes, the history compacted, sync and close.

use super::*;

impl Pool {
    pub(super) fn runs(&self) -> Vec<(u64, u32)> {
        self.state.layout_runs()
    }

    pub(crate) fn tag(&self) -> ArrayStateTag {
        if !self.state.failed().is_empty() {
            ArrayStateTag::Degraded
        } else if !self.state.all_clean() {
            ArrayStateTag::Rebuilding
        } else {
            ArrayStateTag::Clean
        }
    }

    /// Writes the superblock to every present member and the descriptor. A member whose flush
    /// or superblock write fails is failed (recorded in the superblocks written next), like a
    /// member failing a data write: a dead member is found here when nothing else touched it
    /// since it died (found by the fault-injection harness: every command that records state,
    /// `fail`, `replace`, `rebuild`, closing the pool, used to fail instead).
    pub(crate) fn persist(&mut self, tag: ArrayStateTag) -> Result<()> {
        if self.md.is_some() {
            return self.persist_md(tag);
        }
        let started = Instant::now();
        self.compact_history()?;
        // The data the new superblocks describe (rebuilt cycles, above all) must be durable
        // before any superblock says so: flush, write every superblock, flush again.
        if self.flush_or_fail()? {
            return self.persist(self.tag_after_failure(tag));
        }
        self.sb.generation += 1;
        let layout_text = layout::to_text(self.sb.kind, &self.sb.params);
        let runs = self.runs();
        let mut encoded: Vec<(usize, Vec<u8>)> = Vec::new();
        for (i, m) in self.members.handles.iter().enumerate() {
            if m.is_none() {
                continue;
            }
            let sb = Superblock {
                uuid: self.sb.uuid,
                member_index: i as u32,
                member_count: self.members.handles.len() as u32,
                generation: self.sb.generation,
                state: tag,
                data_offset_bytes: self.map.data_offset_bytes,
                data_bytes: self.map.data_bytes,
                chunk_bytes: self.geo.chunk_bytes(),
                created_unix_secs: self.sb.created_unix_secs,
                layout: layout_text.clone(),
                events: self.sb.events.clone(),
                runs: runs.clone(),
                parity: self.lazy.parity,
                bpgl_capacity: self.state.bpgl().capacity() as u32,
                features: if self.wh.mode == WriteHole::Journal {
                    FEATURE_JOURNAL
                } else {
                    0
                } | if self.integrity.checksums.is_some() {
                    FEATURE_CHECKSUMS
                } else {
                    0
                } | if self.wh.intent.is_some() {
                    FEATURE_WRITE_INTENT
                } else {
                    0
                },
                journal_offset_bytes: self.map.journal.offset,
                journal_len_bytes: self.map.journal.bytes,
                checksum_offset_bytes: self.map.checksums.offset,
                checksum_len_bytes: self.map.checksums.bytes,
            };
            encoded.push((i, sb.encode().map_err(|e| PoolError::Io(e.to_string()))?));
        }
        // Every member's superblock at once: one after the other, each checkpoint of a
        // rebuild over members emulated at 4 ms left every member idle for tens of ms while
        // the rebuild's windows ran dry (S2-RAID5 9+1, 300 MiB members, unserved: 2.59 s,
        // 2.32 s with this, for 2.19 s of busy time per member).
        let slot = superblock_slot(self.sb.generation);
        let which: Vec<usize> = encoded.iter().map(|(i, _)| *i).collect();
        let results = each_member(&self.members.handles, &which, |k, m| {
            m.write_at(&encoded[k].1, slot)
        });
        let mut dead: Vec<(usize, std::io::Error)> = Vec::new();
        let mut written: Vec<(usize, Vec<u8>)> = Vec::new();
        for ((i, b), r) in encoded.into_iter().zip(results) {
            match r {
                Ok(()) => written.push((i, b)),
                Err(e) => dead.push((i, e)),
            }
        }
        if !dead.is_empty() {
            self.fail_dead_members(&dead)?;
            return self.persist(self.tag_after_failure(tag));
        }
        if self.flush_or_fail()? {
            return self.persist(self.tag_after_failure(tag));
        }
        let dead = self.superblocks_held(&written);
        if !dead.is_empty() {
            self.fail_dead_members(&dead)?;
            return self.persist(self.tag_after_failure(tag));
        }
        // Every cycle's layout generation is on the members now.
        self.sb.rebuilt_unrecorded.clear();
        self.sb.moved_unrecorded = false;
        // Every member was flushed: regions whose writes were all over before are clean.
        self.intent_flushed_after(started, Duration::ZERO)?;
        self.persist_bpgl_if_dirty()?;
        // Retire the journal records whose in-place writes are done (the members were just
        // flushed; a membership change also moves the journal to the members present).
        if let Some(j) = self.wh.journal.clone() {
            j.checkpoint(&self.members.handles)
                .map_err(|e| PoolError::Io(e.to_string()))?;
            // A member that failed the checkpoint's flush or write is failed (and recorded).
            let dead = j.take_failed_members();
            if !dead.is_empty() {
                return self.fail_members(&dead);
            }
        }
        // Lock order: a served pool's request may hold the IDO lock while it waits for the
        // pool mutex (held by our caller): never wait for the IDO lock here.
        self.ido.touch();
        let ido = Arc::clone(&self.ido);
        ido.persist_if_dirty(&RecordOnly(self), self.sb.uuid, false)?;
        self.save_descriptor()
    }

    /// Before writes to the cycles of `[offset, offset + len)`: a cycle that a rebuild moved
    /// to its new layout since the superblocks last recorded the layout is recorded first
    /// (issue 21, defect 1). A write lands in the cycle's new places only; if the process
    /// died before the superblocks said the cycle had moved, the pool would come back with
    /// the cycle in its old layout, whose places (a spare's copy during a copy-back) do not
    /// have the write: acknowledged and flushed data gone, parity left inconsistent. Reads
    /// need no such care (both places hold the same bytes until a write).
    pub(crate) fn record_layout_before_writes(&mut self, offset: u64, len: u64) -> Result<()> {
        if self.sb.rebuilt_unrecorded.is_empty() || len == 0 {
            return Ok(());
        }
        let cycle_bytes = self.geo.data_per_cycle() * self.geo.chunk_bytes();
        let (first, last) = (offset / cycle_bytes, (offset + len - 1) / cycle_bytes);
        self.record_layout_of_cycles(first..=last)
    }

    /// [`Pool::record_layout_before_writes`] for whole cycles (a flush of deferred parity).
    pub(crate) fn record_layout_of_cycles(
        &mut self,
        cycles: std::ops::RangeInclusive<u64>,
    ) -> Result<()> {
        if self.sb.rebuilt_unrecorded.range(cycles).next().is_none() {
            return Ok(());
        }
        // Writes are under way: the pool is in use, not clean.
        let tag = match self.tag() {
            ArrayStateTag::Clean => ArrayStateTag::Active,
            t => t,
        };
        self.persist(tag)
    }

    /// Reads back the superblocks just written and flushed (`written`: member index and
    /// bytes, all at generation `self.sb.generation`'s slot). A member that acknowledged the
    /// write but does not hold it lost the write (a device that drops writes silently: the
    /// fault-injection harness's lost-write fault); left so, it would come back stale at the
    /// next assembly, which refuses a member that missed updates, and the pool would not open
    /// after a crash. Such a member gets the superblock written and flushed again, once more;
    /// one that still does not hold it (or cannot be read) is returned to be failed, which the
    /// next superblocks record.
    fn superblocks_held(&self, written: &[(usize, Vec<u8>)]) -> Vec<(usize, std::io::Error)> {
        const TRIES: usize = 3;
        let slot = superblock_slot(self.sb.generation);
        let mut dead = Vec::new();
        let written: Vec<&(usize, Vec<u8>)> = written
            .iter()
            .filter(|(i, _)| self.members.handles[*i].is_some())
            .collect();
        let which: Vec<usize> = written.iter().map(|(i, _)| *i).collect();
        let held = each_member(&self.members.handles, &which, |k, m| {
            let b = &written[k].1;
            let mut back = vec![0u8; b.len()];
            for attempt in 0..TRIES {
                if attempt > 0 && (m.write_at(b, slot).is_err() || m.flush().is_err()) {
                    break;
                }
                if m.read_at(&mut back, slot).is_ok() && back == *b {
                    return true;
                }
            }
            false
        });
        for (&i, held) in which.iter().zip(held) {
            if !held {
                dead.push((
                    i,
                    std::io::Error::other(format!(
                        "member {i} does not hold the superblock it acknowledged \
                         (generation {}), even after {} more writes: it loses writes",
                        self.sb.generation,
                        TRIES - 1
                    )),
                ));
            }
        }
        dead
    }

    /// The state to record after a member failed while recording `tag`.
    pub(super) fn tag_after_failure(&self, tag: ArrayStateTag) -> ArrayStateTag {
        match tag {
            ArrayStateTag::Rebuilding => tag,
            _ => self.tag(),
        }
    }

    /// Flushes every present member; members whose flush fails are failed. Returns whether
    /// any was (an error only when that loses data).
    pub(super) fn flush_or_fail(&mut self) -> Result<bool> {
        let dead = self.flush_each();
        if dead.is_empty() {
            return Ok(false);
        }
        self.fail_dead_members(&dead)?;
        Ok(true)
    }

    /// Marks members that failed an I/O outside a plan as failed (in memory; the caller
    /// persists). Whether the pool then has lost data is for the caller to report.
    pub(crate) fn fail_dead_members(&mut self, dead: &[(usize, std::io::Error)]) -> Result<()> {
        for (i, e) in dead {
            if let Some(h) = self.members.handles[*i].take() {
                self.state.fail(&self.geo, *i as Disk)?;
                self.sb.events.push(Event::Fail(*i as u32));
                self.file.desc.members[*i].failed_why = Some(super::membership::failure_why(
                    &*h,
                    format!("I/O error: {e}"),
                ));
            }
        }
        Ok(())
    }

    /// When every cycle is in the target layout, the history that led there no longer
    /// matters: only which members are missing, in failure order, does (the target layout is
    /// `recovery_plan(scheme, failed)` and every present member holds valid data for every
    /// cycle). Replaces the events with one failure per missing member and the state with the
    /// equivalent one, so that the superblock's event list (64 entries at most) does not fill
    /// up over a pool's life of failures and replacements.
    pub(super) fn compact_history(&mut self) -> Result<()> {
        let failed = self.state.failed().to_vec();
        if !self.state.all_clean() || self.sb.events.len() == failed.len() {
            return Ok(());
        }
        let mut state = ArrayState::new(&self.geo);
        for &d in &failed {
            state.fail(&self.geo, d)?;
        }
        let target = state.target_generation();
        if target > 0 {
            for c in 0..self.geo.cycles() {
                state.mark_rebuilt(c, target);
            }
        }
        assert!(
            *state.layout_of(0) == *self.state.layout_of(0) && state.all_clean(),
            "compacting the history changed the layout"
        );
        state.adopt_bpgl(&self.state);
        state.continue_count_from(&self.state);
        self.state = state;
        self.sb.events = failed.iter().map(|&d| Event::Fail(d)).collect();
        Ok(())
    }

    /// Flushes every present member, all at once: one thread each, so that the syncs of
    /// members sharing a file system share its journal commits instead of queueing.
    pub(super) fn flush_members(&self) -> Result<()> {
        match self.flush_each().into_iter().next() {
            Some((i, e)) => Err(PoolError::Io(format!("flushing member {i}: {e}"))),
            None => Ok(()),
        }
    }

    /// Flushes every present member, all at once; returns the members that failed.
    pub(super) fn flush_each(&self) -> Vec<(usize, std::io::Error)> {
        flush_each(&self.members.handles)
    }

    /// Makes every completed write durable on every present member (the volume's flush:
    /// what an NBD FLUSH waits for).
    /// A member whose flush fails is failed (and the failure recorded), as a member failing
    /// a write is: the flush succeeds when the pool survives it.
    /// A pool that has lost data fails the flush (after flushing what it still has): writes
    /// acknowledged to members failed since cannot be made durable.
    pub fn sync(&mut self) -> Result<()> {
        let started = Instant::now();
        let dead = self.flush_each();
        self.after_flush(dead)?;
        self.intent_flushed(started)
    }

    /// A volume flush that started at `started` succeeded: write-intent marks of regions
    /// idle since before it are cleared ([`WriteIntent::flushed`]).
    pub(crate) fn intent_flushed(&mut self, started: Instant) -> Result<()> {
        self.intent_flushed_after(started, super::intent::INTENT_CLEAR_AFTER)
    }

    fn intent_flushed_after(&mut self, started: Instant, idle: Duration) -> Result<()> {
        let Some(w) = self.wh.intent.clone() else {
            return Ok(());
        };
        let members = self.members.handles.clone();
        let dead = w.flushed(started, idle, || Ok(members), &self.members.counters)?;
        self.fail_record_writers(dead)
    }

    /// The end of a volume flush whose member flushes failed on `dead` (every failure: Linux
    /// reports a failed fsync once, so a member whose flush failed is failed, never flushed
    /// again and counted durable): fails them, records it, and fails the flush when the pool
    /// has lost data.
    pub(crate) fn after_flush(&mut self, dead: Vec<(usize, std::io::Error)>) -> Result<()> {
        if !dead.is_empty() {
            self.fail_dead_members(&dead)?;
            let tag = self.tag();
            self.persist(tag)?;
        }
        if self.state.data_lost(&self.geo) {
            let why = match dead.first() {
                Some((i, e)) => format!("member {i} failed ({e}) and "),
                None => String::new(),
            };
            return Err(PoolError::Io(format!(
                "flush: {why}the pool has lost data (more members failed than the layout \
                 tolerates): writes to failed members cannot be made durable"
            )));
        }
        Ok(())
    }

    /// Saves counters and marks the pool's state; call when a command ends.
    pub fn close(mut self) -> Result<()> {
        // An MD-format pool says clean again: every write is over (flushed first).
        self.md_mark_clean();
        // Every write is over: once the members are flushed, no region needs a resync.
        if let Some(w) = self.wh.intent.clone() {
            if !w.marked().is_empty() {
                let dead = self.flush_each();
                self.fail_record_writers(dead)?;
                let dead = w.clear_all(&self.members.handles, &self.members.counters)?;
                self.fail_record_writers(dead)?;
            }
        }
        let tag = self.tag();
        self.persist(tag)?;
        // Nobody else can reach the pool now: the IDO record is written for sure.
        let ido = Arc::clone(&self.ido);
        ido.persist_if_dirty(&RecordOnly(&self), self.sb.uuid, true)
    }
}

/// Flushes every present member, all at once: one thread each, so that the syncs of members
/// sharing a file system share its journal commits instead of queueing. Returns every member
/// whose flush failed.
pub(crate) fn flush_each(handles: &[Option<Arc<dyn Member>>]) -> Vec<(usize, std::io::Error)> {
    let present: Vec<usize> = (0..handles.len())
        .filter(|&i| handles[i].is_some())
        .collect();
    let results = each_member(handles, &present, |_, m| m.flush());
    present
        .into_iter()
        .zip(results)
        .filter_map(|(i, r)| r.err().map(|e| (i, e)))
        .collect()
}

/// `f(k, member)` for the `k`-th of the members `which` (present ones: the callers pass no
/// other) all at once, a thread per member, the results in `which`'s order: metadata I/O of
/// all members costs what one member's does.
pub(crate) fn each_member<T: Send>(
    handles: &[Option<Arc<dyn Member>>],
    which: &[usize],
    f: impl Fn(usize, &dyn Member) -> T + Sync,
) -> Vec<T> {
    let f = &f;
    std::thread::scope(|s| {
        let spawned: Vec<_> = which
            .iter()
            .enumerate()
            .map(|(k, &i)| {
                let m = handles[i]
                    .as_deref()
                    .expect("metadata I/O goes to present members");
                s.spawn(move || f(k, m))
            })
            .collect();
        spawned
            .into_iter()
            .map(|h| h.join().expect("member metadata thread"))
            .collect()
    })
}
