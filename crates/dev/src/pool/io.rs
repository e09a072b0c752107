//! Reads and writes: plain, lazy and journaled.

use super::*;

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
        for _attempt in 0..MAX_REPLANS {
            let plans = plan_read(&self.geo, &self.state, offset, len)?;
            let mut users: Vec<&mut [u8]> = Vec::new();
            let mut rest: &mut [u8] = &mut out;
            let mut at = 0u64;
            for p in &plans {
                assert_eq!(p.user_offset, at, "plans cover the request in order");
                let (head, tail) = rest.split_at_mut(p.buffers[0]);
                users.push(head);
                rest = tail;
                at += p.buffers[0] as u64;
            }
            match run_plans(&plans, &mut users, &self.members_view()) {
                Ok(()) => return Ok(out),
                // Bad blocks are repaired (or reported lost) and the read planned again; a
                // failed member is failed, its deferred parity flushed first so that a second
                // failure is survived.
                Err(e) => self.absorb(e)?,
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
        if let Some(j) = self.wh.journal.clone() {
            let piece = j.piece_bytes();
            let mut at = 0usize;
            while at < data.len() {
                // Pieces end on multiples of the piece size, so that records stay bounded.
                let end = ((offset + at as u64) / piece + 1) * piece - offset;
                let end = (end as usize).min(data.len());
                self.write_journaled(&j, offset + at as u64, &data[at..end])?;
                at = end;
            }
            return Ok(());
        }
        for _attempt in 0..MAX_REPLANS {
            let (plans, deferred) = if self.lazy.parity == ParityPolicy::Lazy {
                let lw = plan_write_lazy(
                    &self.geo,
                    &self.state,
                    offset,
                    data.len() as u64,
                    &self.policy,
                )?;
                (lw.plans, lw.deferred)
            } else {
                let plans = plan_write(
                    &self.geo,
                    &self.state,
                    offset,
                    data.len() as u64,
                    &self.policy,
                )?;
                (plans, Vec::new())
            };
            if self.state.defer(&deferred) > 0 {
                if let Err(e) = self.persist_bpgl() {
                    self.state.deferred_write_done(&deferred);
                    return Err(e);
                }
            }
            let result = crate::exec::run_write(&plans, data, &self.members_view());
            self.state.deferred_write_done(&deferred);
            match result {
                Ok(()) => {
                    self.clear_lost(offset, data.len() as u64);
                    let b = self.state.bpgl();
                    if !b.is_empty() && b.len() >= b.capacity() {
                        let half = b.capacity() / 2;
                        self.flush_bpgl(half)?;
                    }
                    return Ok(());
                }
                Err(e) if !e.bad.is_empty() => self.absorb(e)?,
                Err(e) => {
                    let failed = e.failed_members();
                    let only_writes = e.read_errors.is_empty();
                    self.fail_members(&failed)?;
                    self.flush_bpgl(0)?;
                    if only_writes {
                        // Every healthy member was written; the failed one is now reconstructed
                        // from them.
                        return Ok(());
                    }
                }
            }
        }
        Err(gave_up("write", offset))
    }

    /// Plans a write under the pool's parity policy: the plans and the stripes it defers
    /// (listed, and the list made durable, before returning).
    pub(crate) fn plan_write_listed(
        &mut self,
        offset: u64,
        len: u64,
    ) -> Result<(Vec<raidcore::Plan>, Vec<raidcore::StripeId>)> {
        if self.lazy.parity != ParityPolicy::Lazy {
            return Ok((
                plan_write(&self.geo, &self.state, offset, len, &self.policy)?,
                Vec::new(),
            ));
        }
        let lw = plan_write_lazy(&self.geo, &self.state, offset, len, &self.policy)?;
        if self.state.defer(&lw.deferred) > 0 {
            if let Err(e) = self.persist_bpgl() {
                self.state.deferred_write_done(&lw.deferred);
                return Err(e);
            }
        }
        Ok((lw.plans, lw.deferred))
    }

    /// One journaled write cycle (a piece of a write): plan, read and compute, append the
    /// record of every member write, write in place, retire. Member failures are handled like
    /// [`Pool::write`] does.
    pub(super) fn write_journaled(
        &mut self,
        j: &Arc<Journal>,
        offset: u64,
        data: &[u8],
    ) -> Result<()> {
        for _ in 0..64 {
            let (plans, deferred) = self.plan_write_listed(offset, data.len() as u64)?;
            let result = crate::exec::run_write_logged(
                &plans,
                data,
                &self.members_view(),
                |e| j.append(&self.members.handles, e),
                |seq| j.done(seq),
            );
            self.state.deferred_write_done(&deferred);
            let mut failed = j.take_failed_members();
            let outcome = match result {
                Ok(()) => Ok(true),
                Err(LoggedWriteError::Reads(e)) if !e.bad.is_empty() => {
                    // Blocks that read wrong (checksums, latent errors): repair, plan again.
                    self.absorb(e)?;
                    Ok(false)
                }
                Err(LoggedWriteError::Reads(e)) => {
                    failed.extend(e.failed_members());
                    Ok(false)
                }
                Err(LoggedWriteError::Writes(e)) => {
                    // Every healthy member was written; the failed one is now reconstructed
                    // from them.
                    failed.extend(e.failed_members());
                    Ok(true)
                }
                Err(LoggedWriteError::Log(e)) if !failed.is_empty() => {
                    let _ = e;
                    Ok(false)
                }
                Err(LoggedWriteError::Log(e)) => Err(PoolError::Io(e.to_string())),
            };
            if !failed.is_empty() {
                failed.sort();
                failed.dedup();
                self.fail_members(&failed)?;
                self.flush_bpgl(0)?;
            }
            if outcome? {
                self.clear_lost(offset, data.len() as u64);
                let b = self.state.bpgl();
                if !b.is_empty() && b.len() >= b.capacity() {
                    let half = b.capacity() / 2;
                    self.flush_bpgl(half)?;
                }
                return Ok(());
            }
        }
        Err(PoolError::Io(format!(
            "write at {offset}: members keep failing; gave up"
        )))
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
