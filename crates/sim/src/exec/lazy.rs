//! Lazy parity in the simulator: the same raidcore policy as the engine. Writes are planned
//! with [`raidcore::plan_write_lazy`] and list their deferred stripes in the array state's
//! BPGL; deferred parity is recomputed by flush plans ([`raidcore::plan_flush_cycle`]) when
//! raidcore's [`IdleDetector`] says the array is idle (no foreground request in flight and none
//! for [`crate::SimConfig::bpgl_idle_ns`]), when the list is full (down to half the bound), and
//! at once when a member has failed. Flush plans queue on the disks like any other plan.
//!
//! Where the list is kept is [`crate::SimConfig::lazy_model`]: recorded on the members as the
//! engine records it ([`LazyModel::Engine`], the default: a write that listed stripes waits for
//! a record holding them, one record at a time for every write listed before it was taken),
//! or in non-volatile memory as the seed's RAID controller keeps it
//! ([`LazyModel::Controller`]: no member I/O). Either way flushes keep
//! [`FLUSH_PLANS_IN_FLIGHT`] plans in flight while the detector says so. (The served engine's
//! flusher runs steps of [`raidcore::lazy::FLUSH_STEP_CYCLES`] cycles every
//! [`raidcore::lazy::FLUSH_TICK_NS`], each followed by a record of the shorter list. Modelled
//! so, the simulator moved further from the engine on lazy RAID6 over 6 members (mean 58.2
//! ms against the engine's 42.7, where four plans in flight give 54.6 against 42.7): what
//! the engine does differently there is not found yet, see ARCHITECTURE.md.)

use std::collections::BTreeSet;

use raidcore::{
    plan_flush_cycle, plan_write, plan_write_lazy, CoreError, FlushAdvice, IdleDetector,
    ParityPolicy, Plan, PlanKind, StripeId,
};

use super::{Kind, Owner, PlanRun, Simulator};
use crate::metrics::LazyReport;

/// Flush plans in flight at most.
const FLUSH_PLANS_IN_FLIGHT: usize = 4;

/// The plan id a record write's disk I/O carries ([`super::QueuedIo::plan`]): it belongs to
/// no plan.
pub(super) const RECORD_IO: u32 = u32::MAX;

/// Where lazy parity's list is kept.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LazyModel {
    /// Recorded on the members, as the engine records it (`dev::pool::lazy`): before a write
    /// that listed stripes touches a member, a record of the list is durable, one write of
    /// the record's size (`raidcore::lazy::BpglRecord::bytes_for`) on each of the first
    /// `raidcore::record::copies_for` members present. One record is written at a time; it
    /// holds every listing made before it started, and the writes listed meanwhile wait for
    /// the next (group commit).
    #[default]
    Engine,
    /// In non-volatile memory, as the LPU seed's RAID controller keeps it: no member I/O.
    Controller,
}

/// The group commit of the list on the members ([`LazyModel::Engine`]).
#[derive(Debug, Default)]
struct ListCommit {
    /// Requests that put new stripes on the list so far.
    listed: u64,
    /// `listed` when the newest completed record was taken.
    durable_at: u64,
    /// The record being written: the listing it holds and its disk writes not yet done.
    writing: Option<(u64, u32)>,
    /// Plans waiting for a record, with the listing it must hold: (plan id, cycle, listing).
    held: Vec<(u32, u64, u64)>,
}

/// A plan's part in the deferred-parity bookkeeping.
#[derive(Clone, Debug, Default)]
pub(super) enum PlanLazy {
    /// Nothing deferred.
    #[default]
    None,
    /// A lazy write's plan: the stripes of its cycle it deferred.
    Deferred(Vec<StripeId>),
    /// A flush plan: the entries it covers.
    Flush(Vec<(StripeId, u64)>),
}

/// The simulator's lazy-parity state.
pub(super) struct LazyRun {
    pub(super) idle: IdleDetector,
    /// Cycles with a flush plan in flight.
    flushing: BTreeSet<u64>,
    /// A `FlushWake` is scheduled at this time.
    wake_at: Option<u64>,
    /// Deferrals of the request being admitted, handed to its plans one by one.
    deferred: Vec<StripeId>,
    /// The tag `submit` gives the next plan.
    pub(super) next: PlanLazy,
    /// Flushing stopped: a flush could not be planned (data lost).
    blocked: bool,
    commit: ListCommit,
    /// The request being admitted waits for a record holding this listing.
    pub(super) hold_at: Option<u64>,
    pub(super) report: LazyReport,
}

impl LazyRun {
    pub(super) fn new(idle_after_ns: u64) -> LazyRun {
        LazyRun {
            idle: IdleDetector::new(idle_after_ns),
            flushing: BTreeSet::new(),
            wake_at: None,
            deferred: Vec::new(),
            next: PlanLazy::None,
            blocked: false,
            commit: ListCommit::default(),
            hold_at: None,
            report: LazyReport::default(),
        }
    }
}

impl Simulator {
    /// Plans a write under the configured parity policy; under lazy parity the deferred
    /// stripes are listed now (before any of the write's member I/O) and handed to its plans
    /// by [`Simulator::lazy_tag_for`].
    pub(super) fn plan_write_tagged(
        &mut self,
        offset: u64,
        len: u64,
    ) -> Result<Vec<Plan>, CoreError> {
        if self.cfg.parity == ParityPolicy::Eager {
            return plan_write(&self.geo, &self.state, offset, len, &self.cfg.write_policy);
        }
        let lw = plan_write_lazy(&self.geo, &self.state, offset, len, &self.cfg.write_policy)?;
        let c = &mut self.lazy.commit;
        if self.state.defer(&lw.deferred) > 0 {
            c.listed += 1;
        }
        // Listed stripes (its own, or an earlier write's whose record is still on its way)
        // that no completed record holds yet.
        self.lazy.hold_at = (self.cfg.lazy_model == LazyModel::Engine
            && !lw.deferred.is_empty()
            && c.durable_at < c.listed)
            .then_some(c.listed);
        let r = &mut self.lazy.report;
        r.deferrals += lw.deferred.len() as u64;
        r.max_len = r.max_len.max(self.state.bpgl().len());
        self.lazy.deferred = lw.deferred;
        Ok(lw.plans)
    }

    /// Starts request plan `id` ([`Simulator::submitted`]), or when `hold` says so
    /// ([`LazyRun::hold_at`]), holds it until a record of the list holds that listing.
    pub(super) fn start_or_hold(
        &mut self,
        id: u32,
        cycle: u64,
        hold: Option<u64>,
        replanned: bool,
    ) {
        match hold {
            None => self.submitted(id, cycle, replanned),
            Some(at) => {
                self.lazy.commit.held.push((id, cycle, at));
                self.record_start();
            }
        }
    }

    /// Starts a record of the list unless one is being written or no plan waits for one.
    pub(super) fn record_start(&mut self) {
        let c = &self.lazy.commit;
        if c.writing.is_some() || c.held.is_empty() {
            return;
        }
        let at = c.listed;
        let bytes = raidcore::lazy::BpglRecord::bytes_for(self.state.bpgl().len()) as u64;
        let copies = raidcore::record::copies_for(self.geo.disks(), self.geo.scheme().tolerance());
        let mut queued = 0u32;
        for d in 0..self.disks.len() {
            if queued as usize == copies {
                break;
            }
            if self.disks[d].failed {
                continue;
            }
            // (Where the engine keeps it: before the data area, which starts at 0 here.)
            self.queue_io(d as layout::Disk, RECORD_IO, 0, 0, bytes, true, false);
            queued += 1;
        }
        self.lazy.report.records += 1;
        if queued == 0 {
            // No member left to take it: nothing to wait for.
            self.record_done(at);
        } else {
            self.lazy.commit.writing = Some((at, queued));
        }
    }

    /// A record write's disk I/O completed (or its disk failed).
    pub(super) fn record_io_done(&mut self) {
        let Some((at, pending)) = self.lazy.commit.writing.as_mut() else {
            unreachable!("a record I/O completed with no record being written");
        };
        *pending -= 1;
        if *pending == 0 {
            let at = *at;
            self.lazy.commit.writing = None;
            self.record_done(at);
        }
    }

    /// The record holding listing `at` is durable: the plans waiting for it start, and the
    /// next record starts for those still waiting.
    fn record_done(&mut self, at: u64) {
        let c = &mut self.lazy.commit;
        c.durable_at = c.durable_at.max(at);
        let durable = c.durable_at;
        let (go, wait): (Vec<_>, Vec<_>) = std::mem::take(&mut c.held)
            .into_iter()
            .partition(|&(_, _, a)| a <= durable);
        c.held = wait;
        for (id, cycle, _) in go {
            // A member failed while it waited: planned again (as the engine does).
            if self.run_is_current(self.plans.get(id)) {
                self.submitted(id, cycle, false);
            } else {
                self.replan(id);
            }
        }
        self.record_start();
    }

    /// The deferrals of the admitted request that belong to plan `p` (its cycle).
    pub(super) fn lazy_tag_for(&mut self, p: &Plan) -> PlanLazy {
        if self.lazy.deferred.is_empty() || p.kind != PlanKind::Write {
            return PlanLazy::None;
        }
        let (mine, rest): (Vec<StripeId>, Vec<StripeId>) = std::mem::take(&mut self.lazy.deferred)
            .into_iter()
            .partition(|s| s.cycle == p.cycle);
        self.lazy.deferred = rest;
        if mine.is_empty() {
            PlanLazy::None
        } else {
            PlanLazy::Deferred(mine)
        }
    }

    /// A plan left the executor: completed (`done`) or abandoned to be re-planned.
    pub(super) fn lazy_plan_ended(&mut self, run: &PlanRun, done: bool) {
        match &run.lazy {
            PlanLazy::None => {}
            PlanLazy::Deferred(stripes) => self.state.deferred_write_done(stripes),
            PlanLazy::Flush(entries) => {
                self.lazy.flushing.remove(&run.cycle);
                if done {
                    self.state.flush_done(entries);
                    self.lazy.report.flush_plans += 1;
                }
            }
        }
        if run.owner == Owner::Flush || !matches!(run.lazy, PlanLazy::None) {
            self.maybe_flush();
        }
    }

    /// A foreground request was admitted.
    pub(super) fn foreground_started(&mut self) {
        self.lazy.idle.foreground_start(self.now_ns);
    }

    /// A foreground request completed (or failed).
    pub(super) fn foreground_ended(&mut self) {
        self.lazy.idle.foreground_end(self.now_ns);
        self.maybe_flush();
    }

    pub(super) fn flush_wake(&mut self) {
        if self.lazy.wake_at.is_some_and(|t| t <= self.now_ns) {
            self.lazy.wake_at = None;
        }
        self.maybe_flush();
    }

    /// Starts flush plans when the idle detector (or a failure) says so; otherwise arranges to
    /// look again when the array would become idle.
    #[inline]
    pub(super) fn maybe_flush(&mut self) {
        // (Inline: runs on every completion, and nothing is deferred unless parity is lazy.)
        if self.state.bpgl().is_empty() || self.lazy.blocked {
            return;
        }
        self.flush_some();
    }

    /// [`Simulator::maybe_flush`] with deferred parities.
    #[inline(never)]
    fn flush_some(&mut self) {
        let now = self.now_ns;
        let (len, cap) = (self.state.bpgl().len(), self.state.bpgl().capacity());
        let advice = self.lazy.idle.advise(now, len, cap);
        let forced = !self.state.failed().is_empty();
        if advice == FlushAdvice::Wait && !forced {
            if let Some(t) = self.lazy.idle.idle_at() {
                let t = t.max(now);
                if self.lazy.wake_at.is_none_or(|w| w > t || w < now) {
                    self.lazy.wake_at = Some(t);
                    self.schedule(t, Kind::FlushWake);
                }
            }
            return;
        }
        while self.lazy.flushing.len() < FLUSH_PLANS_IN_FLIGHT {
            let next = self
                .state
                .bpgl()
                .flushable_cycles(FLUSH_PLANS_IN_FLIGHT * 2 + self.lazy.flushing.len())
                .into_iter()
                .find(|c| !self.lazy.flushing.contains(c));
            let Some(c) = next else { break };
            let fp = match plan_flush_cycle(&self.geo, &self.state, c) {
                Ok(Some(fp)) => fp,
                Ok(None) => break,
                Err(_) => {
                    // More failures than the foreground parity covers: nothing to flush with.
                    self.lazy.blocked = true;
                    return;
                }
            };
            self.lazy.flushing.insert(c);
            if advice == FlushAdvice::Idle && !forced {
                self.lazy.report.idle_flushes += 1;
            } else {
                self.lazy.report.forced_flushes += 1;
            }
            self.lazy.next = PlanLazy::Flush(fp.entries);
            self.submit(fp.plan, Owner::Flush, 0, false, false);
        }
    }
}
