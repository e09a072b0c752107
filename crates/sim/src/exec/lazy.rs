//! Lazy parity in the simulator: the same raidcore policy as the engine. Writes are planned
//! with [`raidcore::plan_write_lazy`] and list their deferred stripes in the array state's
//! BPGL; deferred parity is recomputed by flush plans ([`raidcore::plan_flush_cycle`]) when
//! raidcore's [`IdleDetector`] says the array is idle (no foreground request in flight and none
//! for [`crate::SimConfig::bpgl_idle_ns`]), when the list is full (down to half the bound), and
//! at once when a member has failed. Flush plans queue on the disks like any other plan.
//!
//! The list itself is kept in controller memory (modelled as non-volatile, like the seed's
//! RAID controller): the simulator does not charge a member I/O for persisting it, whereas the
//! engine writes it to two members before a write that lists new stripes.

use std::collections::BTreeSet;

use raidcore::{
    plan_flush_cycle, plan_write, plan_write_lazy, CoreError, FlushAdvice, IdleDetector,
    ParityPolicy, Plan, PlanKind, StripeId,
};

use super::{Kind, Owner, PlanRun, Simulator};
use crate::metrics::LazyReport;

/// Flush plans in flight at most.
const FLUSH_PLANS_IN_FLIGHT: usize = 4;

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
        self.state.defer(&lw.deferred);
        let r = &mut self.lazy.report;
        r.deferrals += lw.deferred.len() as u64;
        r.max_len = r.max_len.max(self.state.bpgl().len());
        self.lazy.deferred = lw.deferred;
        Ok(lw.plans)
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
