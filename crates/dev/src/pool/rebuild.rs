//! Rebuild: every cycle moved to the newest layout generation, two batches in flight.

use super::*;

/// Progress of a rebuild, passed to the caller's callback.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub struct RebuildProgress {
    pub cycles_done: u64,
    pub cycles_total: u64,
    pub bytes_written: u64,
    pub elapsed_s: f64,
}

impl Pool {
    /// Moves every cycle to the newest layout generation: rebuilds lost units into their
    /// destinations (spares, spare space, a replacement) and copies units back after a
    /// replacement. Calls `progress` after every batch.
    pub fn rebuild(
        &mut self,
        opts: &RebuildOpts,
        mut progress: impl FnMut(RebuildProgress),
    ) -> Result<RebuildProgress> {
        let total = self.geo.cycles();
        let start = Instant::now();
        let mut written = 0u64;
        let batch = opts.parallel_cycles.max(1) as u64;
        let mut c = 0u64;
        let mut last_persist = Instant::now();
        // Refuse before touching anything when the rebuild cannot start (a member must be
        // replaced first, too many failures), and do nothing when nothing is to be done.
        match (0..total).find(|&c| !self.state.is_clean(c)) {
            Some(first) => {
                plan_rebuild_cycle(&self.geo, &self.state, first)?;
            }
            None => {
                let pr = RebuildProgress {
                    cycles_done: total,
                    cycles_total: total,
                    bytes_written: 0,
                    elapsed_s: start.elapsed().as_secs_f64(),
                };
                progress(pr);
                return Ok(pr);
            }
        }
        self.persist(ArrayStateTag::Rebuilding)?;
        // A two-stage pipeline: while one batch's writes run, the next batch is read and
        // computed (their cycles occupy disjoint member ranges). Without it a rebuild into one
        // spare alternates between reading the survivors and writing the spare.
        let pipelined = opts.batches_in_flight > 1;
        let mut pending: Option<(Vec<raidcore::Plan>, Vec<u64>, Vec<Vec<Vec<u8>>>)> = None;
        // Cycles this call has rebuilt (marked), for `max_cycles`.
        let mut rebuilt_here = 0u64;
        let max_cycles = opts.max_cycles.unwrap_or(u64::MAX);
        // Restarts because survivor blocks read wrong: each repairs or records them, so a
        // block that keeps failing after its rewrite (a disk that cannot remap) ends it.
        let mut bad_restarts = 0usize;
        // A cycle that cannot be planned stops the rebuild; what was done before it is still
        // committed and recorded.
        let mut stop: Option<PoolError> = None;
        loop {
            let mut plans = Vec::new();
            let mut cycles = Vec::new();
            let in_flight = pending.as_ref().map_or(0, |(_, cs, _)| cs.len() as u64);
            while stop.is_none()
                && c < total
                && (cycles.len() as u64) < batch
                && rebuilt_here + in_flight + (cycles.len() as u64) < max_cycles
            {
                match plan_rebuild_cycle(&self.geo, &self.state, c) {
                    Ok(Some(p)) => {
                        plans.push(p);
                        cycles.push(c);
                    }
                    Ok(None) => {}
                    Err(e) => {
                        stop = Some(e.into());
                        break;
                    }
                }
                c += 1;
            }
            if plans.is_empty() && pending.is_none() {
                if c >= total || rebuilt_here >= max_cycles || stop.is_some() {
                    break;
                }
                continue;
            }
            let empty: Vec<Vec<u8>> = plans.iter().map(|_| Vec::new()).collect();
            let mut users: Vec<&mut [u8]> = Vec::new();
            let mut empty = empty;
            users.extend(empty.iter_mut().map(|v| v.as_mut_slice()));
            let view = self.members_view();
            let (prepared, committed) = if pipelined {
                std::thread::scope(|s| {
                    let commit = pending
                        .as_ref()
                        .map(|(ps, _, bufs)| s.spawn(|| crate::exec::commit(ps, bufs, &view)));
                    let prepared = crate::exec::prepare(&plans, &users, &view);
                    (prepared, commit.map(|h| h.join().unwrap()))
                })
            } else {
                let committed = pending
                    .as_ref()
                    .map(|(ps, _, bufs)| crate::exec::commit(ps, bufs, &view));
                (crate::exec::prepare(&plans, &users, &view), committed)
            };
            let mut failed: Vec<u32> = Vec::new();
            let mut bad: Vec<crate::exec::BadRange> = Vec::new();
            if let Some(Err(e)) = &committed {
                failed.extend(e.failed_members());
            }
            if let Err(e) = &prepared {
                failed.extend(e.failed_members());
                bad.extend(e.bad.iter().copied());
            }
            if !failed.is_empty() || !bad.is_empty() {
                failed.sort();
                failed.dedup();
                if !failed.is_empty() {
                    self.fail_members(&failed)?;
                }
                if !bad.is_empty() {
                    // Latent sector errors or checksum mismatches on survivors: repaired from
                    // the remaining redundancy where it suffices, otherwise recorded lost and
                    // zeroed so the rebuild can go on.
                    bad_restarts += 1;
                    if bad_restarts > 2 * REPLANS_MAX {
                        self.persist(ArrayStateTag::Rebuilding)?;
                        return Err(PoolError::Io(format!(
                            "rebuild stopped: survivor blocks keep reading wrong after being \
                             rewritten (last: member {} byte {}); the progress so far is \
                             recorded: replace that member too",
                            bad[0].member,
                            self.map.data_offset_bytes + bad[0].offset_bytes
                        )));
                    }
                    self.repair_in_rebuild(&bad)?;
                }
                // Start over with the new failure set (clean cycles are skipped quickly).
                pending = None;
                c = 0;
                continue;
            }
            if let Some((ps, cs, _)) = pending.take() {
                for (p, &cy) in ps.iter().zip(&cs) {
                    written += p.writes.iter().map(|w| w.data.len as u64).sum::<u64>();
                    let to = match p.kind {
                        raidcore::PlanKind::Rebuild { to, .. } => to,
                        _ => unreachable!("rebuild plans only"),
                    };
                    self.state.mark_rebuilt(cy, to);
                    self.sb.rebuilt_unrecorded.insert(cy);
                    rebuilt_here += 1;
                }
            }
            let bufs = prepared.expect("checked above");
            if !plans.is_empty() {
                pending = Some((plans, cycles, bufs));
            }
            let done = self.state.clean_cycles();
            let pr = RebuildProgress {
                cycles_done: done,
                cycles_total: total,
                bytes_written: written,
                elapsed_s: start.elapsed().as_secs_f64(),
            };
            progress(pr);
            if let Some(max) = opts.speed_max_bytes_per_sec {
                let should = Duration::from_secs_f64(written as f64 / max as f64);
                let el = start.elapsed();
                if should > el {
                    std::thread::sleep(should - el);
                }
            }
            // Record progress now and then, so an interrupted rebuild resumes where it was.
            if last_persist.elapsed() > Duration::from_secs(1) {
                self.persist(ArrayStateTag::Rebuilding)?;
                last_persist = Instant::now();
            }
        }
        // Blocks lost during this rebuild: marked so that reads of them fail from now on.
        self.poison_pending()?;
        let tag = self.tag();
        self.persist(tag)?;
        if let Some(e) = stop {
            return Err(e);
        }
        Ok(RebuildProgress {
            cycles_done: self.state.clean_cycles(),
            cycles_total: total,
            bytes_written: written,
            elapsed_s: start.elapsed().as_secs_f64(),
        })
    }
}
