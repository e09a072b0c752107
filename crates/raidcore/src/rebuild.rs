//! Rebuild scheduling: which cycles to rebuild next, how many at once, and how fast.
//!
//! A rebuild is a sequence of [`plan_rebuild_cycle`] plans, one per cycle not yet in the target
//! generation. [`RebuildScheduler`] hands them out in an order ([`RebuildOrder`]): `Sequential`
//! (one cycle at a time, in order: MD's progressive rebuild) or `Parallel` (up to
//! `max_in_flight` cycles at once; cycles occupy disjoint member rows, so their plans are
//! independent, and a declustered layout such as RAID+ or S2-RAID then keeps every member
//! busy). The executor runs each plan and reports it back with [`RebuildScheduler::complete`]
//! (or [`RebuildScheduler::abort`] if it failed). If an event changes the target generation
//! mid-rebuild, the scheduler starts over from cycle 0 toward the new target (cycles already
//! there are skipped).
//!
//! Rate limiting is data, not sleeping: [`Throttle`] (inside the scheduler) tells the executor
//! how long to wait before issuing more rebuild I/O, given the time the executor reads from its
//! own clock, whether foreground I/O is active, and the bytes rebuilt so far. Like MD's
//! `sync_speed_min/max`: with foreground load the rebuild backs off to `min_bytes_per_sec`; when
//! idle it runs up to `max_bytes_per_sec`.
//!
//! A hot-zone-first order (rebuild the cycles foreground I/O uses most first) is a further
//! [`RebuildOrder`] variant that changes only how `next_plans` picks the next cycle.

use std::collections::BTreeSet;

use crate::array::{ArrayState, Geometry};
use crate::plan::{Plan, PlanKind};
use crate::planner::plan_rebuild_cycle;
use crate::CoreError;

/// Which cycles are rebuilt when.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RebuildOrder {
    /// One cycle at a time, in cycle order.
    Sequential,
    /// Up to `max_in_flight` cycles at once, handed out in cycle order.
    Parallel {
        /// Most cycles in flight at once (at least 1).
        max_in_flight: usize,
    },
}

/// Rebuild speed limits (MD's `speed_limit_min` / `speed_limit_max`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SpeedLimits {
    /// Guaranteed rate even under foreground load.
    pub min_bytes_per_sec: u64,
    /// Cap when idle; 0 means unlimited.
    pub max_bytes_per_sec: u64,
}

impl Default for SpeedLimits {
    /// MD's defaults: 1000 KiB/s and 200000 KiB/s.
    fn default() -> SpeedLimits {
        SpeedLimits {
            min_bytes_per_sec: 1000 * 1024,
            max_bytes_per_sec: 200_000 * 1024,
        }
    }
}

/// Client load seen within this long makes a rebuild keep to its minimum rate (MD's idle
/// test looks back about as far). The engine's served rebuild and the simulator's default.
pub const FOREGROUND_WINDOW_NS: u64 = 500_000_000;

/// How often a rebuild held back by its [`Throttle`] looks at the load again: the engine
/// sleeps in slices this long and the simulator wakes at least this often, so both resume at
/// full rate within this long of the clients going quiet. (MD sleeps 500 ms; with that, the
/// simulator's rebuilds under the calibration's zipf load of issue 32 ended 0 or 0.5 s late by
/// where the last client request fell, PR 19.1 s against IDO's 18.7 s, where the engine's
/// all took 18.2-18.4 s.) The reproductions of systems built on MD keep MD's
/// [`MD_THROTTLE_RECHECK_NS`].
pub const THROTTLE_RECHECK_NS: u64 = 50_000_000;

/// MD's [`THROTTLE_RECHECK_NS`]: its resync sleeps 500 ms whenever it is over the minimum
/// rate under load. The simulator's library default, for the reproductions of systems built
/// on MD; `raidforge sim` takes the engine's.
pub const MD_THROTTLE_RECHECK_NS: u64 = 500_000_000;

/// Windows a pipelined rebuild keeps in flight, out of the `windows` it may use: all of them
/// when no client is busy, at most two (one read beside one written) while clients are, so
/// that the rebuild leaves the members to them between its steps. The engine's served
/// rebuild (`dev::pool::RebuildOpts::windows`) and the simulator (`SimConfig::rebuild_windows`)
/// both take it from here.
pub fn windows_in_flight(windows: usize, clients_busy: bool) -> usize {
    if clients_busy {
        windows.clamp(1, 2)
    } else {
        windows.max(1)
    }
}

/// Windows a rebuild keeps in flight by default over `members` members: a quarter of them, 4
/// at least and 16 at most. A window's units are spread over all the members, so the wider the
/// enclosure the fewer I/Os each member gets from one window, and the more windows it takes to
/// keep every member's queue from running dry; at 16 windows of the default 16 MiB the buffers
/// stay at 256 MiB, however wide. Measured (bench/rebuild.sh, members emulated at 100 MB/s, 256
/// KiB chunks): RAID+ n=31 k=7 rebuilt at 240 MB/s with 4 windows and 310 MB/s with 8.
pub fn default_windows_in_flight(members: usize) -> usize {
    members.div_ceil(4).clamp(4, 16)
}

/// Windows that may be reading at once, out of `windows` in flight. When the windows write
/// where they also read (`writes_where_read`: a declustered layout rebuilding into spare space
/// on the survivors), every member does both, and all may read. When they write only members
/// they do not read (a replacement, a dedicated spare), at most half read (at least one), so that
/// the readers work while the target writes what the others read before, rather than all
/// reading and then all writing. Measured on members emulated at 100 MB/s: RAID+ n=31 k=7 with 8
/// windows 287 MB/s with 4 reading and 307 MB/s with 8; RAID5 onto a replacement with 4
/// windows 96.6 MB/s with 2 reading and 93.2 MB/s with 4; S2-RAID5 onto its spare 282 against
/// 276 MB/s.
pub fn reading_windows(windows: usize, writes_where_read: bool) -> usize {
    let windows = windows.max(1);
    if writes_where_read {
        windows
    } else {
        windows.div_ceil(2)
    }
}

/// Cycles a pipelined rebuild keeps in flight, reading and writing together: `windows`
/// windows (see [`windows_in_flight`]), each holding a batch of `batch_cycles` cycles or as
/// much of it as `window_bytes` of buffers holds, where a cycle's plan reads and writes
/// `cycle_bytes` (0 in either: no bound by bytes). At least 1. The engine's served rebuild
/// lays its batches into windows so (`dev::pool::rebuild_windows`); the simulator, which
/// hands out whole cycles, keeps this many.
pub fn cycles_in_flight(
    windows: usize,
    batch_cycles: usize,
    window_bytes: u64,
    cycle_bytes: u64,
) -> usize {
    let per_window = if window_bytes > 0 && cycle_bytes > 0 {
        (batch_cycles as f64).min(window_bytes as f64 / cycle_bytes as f64)
    } else {
        batch_cycles as f64
    };
    ((windows as f64 * per_window) as usize).max(1)
}

/// Rate measurement marks: one every `THROTTLE_STEP_NS`, the last `THROTTLE_MARKS` kept, and the
/// rate measured from the oldest, so over the last 27 to 30 s. These are MD's `SYNC_MARK_STEP`
/// (3 s) and `SYNC_MARKS` (10): a window long enough that a burst of rebuild plans handed out
/// together (several MiB with a few cycles in flight) is paid for at a low minimum rate instead
/// of slipping out of the window, and short enough that an idle gap buys at most 30 s of rate.
const THROTTLE_STEP_NS: u64 = 3_000_000_000;
const THROTTLE_MARKS: usize = 10;

/// A pure rate limiter: the caller supplies the clock.
#[derive(Clone, Debug)]
pub struct Throttle {
    limits: SpeedLimits,
    /// (time ns, bytes) marks, oldest first, at most `THROTTLE_MARKS`; the rate is measured
    /// from the oldest.
    marks: std::collections::VecDeque<(u64, u64)>,
}

impl Throttle {
    /// A throttle with these limits; the first call to `delay_ns` starts its clock.
    pub fn new(limits: SpeedLimits) -> Throttle {
        Throttle {
            limits,
            marks: std::collections::VecDeque::with_capacity(THROTTLE_MARKS),
        }
    }

    /// The limits.
    pub fn limits(&self) -> SpeedLimits {
        self.limits
    }

    /// Nanoseconds to wait before issuing more rebuild I/O, at time `now_ns` (monotonic, from
    /// the executor's clock), with `bytes_done` rebuilt (or handed out) so far (monotonic). The
    /// allowed rate is `min_bytes_per_sec` while foreground I/O is active and
    /// `max_bytes_per_sec` otherwise; a rate of 0 means unlimited.
    pub fn delay_ns(&mut self, now_ns: u64, foreground_busy: bool, bytes_done: u64) -> u64 {
        if self.marks.is_empty() {
            self.marks.push_back((now_ns, bytes_done));
        }
        let &(last_ns, last_bytes) = self.marks.back().expect("a mark");
        assert!(now_ns >= last_ns, "the clock went backwards");
        assert!(bytes_done >= last_bytes, "bytes done went backwards");
        if now_ns - last_ns >= THROTTLE_STEP_NS {
            self.marks.push_back((now_ns, bytes_done));
            if self.marks.len() > THROTTLE_MARKS {
                self.marks.pop_front();
            }
        }
        let rate = if foreground_busy {
            self.limits.min_bytes_per_sec
        } else {
            self.limits.max_bytes_per_sec
        };
        if rate == 0 {
            return 0;
        }
        let (t0, b0) = *self.marks.front().expect("a mark");
        let earliest_ns = t0 as u128 + (bytes_done - b0) as u128 * 1_000_000_000 / rate as u128;
        earliest_ns
            .saturating_sub(now_ns as u128)
            .min(u64::MAX as u128) as u64
    }
}

/// Rebuild progress.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Progress {
    /// Cycles in the target generation.
    pub cycles_done: u64,
    /// Cycles in the array.
    pub cycles_total: u64,
    /// Cycles whose plans are running.
    pub in_flight: usize,
    /// Bytes written by completed rebuild plans.
    pub bytes_rebuilt: u64,
}

/// Hands out rebuild plans in order, bounded, and tracks progress.
#[derive(Clone, Debug)]
pub struct RebuildScheduler {
    order: RebuildOrder,
    target: Option<u32>,
    cursor: u64,
    in_flight: BTreeSet<u64>,
    /// Cycles in flight whose reads are done (they are writing), reported with
    /// [`RebuildScheduler::reads_done`]: their slots go to the next cycles.
    writing: BTreeSet<u64>,
    bytes_rebuilt: u64,
    /// Bytes of the rebuild plans handed out: what the throttle counts. Like MD, which counts
    /// resync sectors when it issues them, so that the cycles in flight (several MiB for a wide
    /// array) are inside the rate and a low minimum rate is met instead of overshot.
    bytes_issued: u64,
    throttle: Throttle,
    /// Cycles to hand out before the cursor's (a hot-zone-first order: IDO, PRO).
    priority: std::collections::VecDeque<u64>,
}

impl RebuildScheduler {
    /// A scheduler handing out plans in `order`, throttled by `limits`.
    pub fn new(order: RebuildOrder, limits: SpeedLimits) -> RebuildScheduler {
        if let RebuildOrder::Parallel { max_in_flight } = order {
            assert!(max_in_flight > 0, "max_in_flight must be positive");
        }
        RebuildScheduler {
            order,
            target: None,
            cursor: 0,
            in_flight: BTreeSet::new(),
            writing: BTreeSet::new(),
            bytes_rebuilt: 0,
            bytes_issued: 0,
            throttle: Throttle::new(limits),
            priority: std::collections::VecDeque::new(),
        }
    }

    /// Most plans in flight at once.
    pub fn max_in_flight(&self) -> usize {
        match self.order {
            RebuildOrder::Sequential => 1,
            RebuildOrder::Parallel { max_in_flight } => max_in_flight,
        }
    }

    /// Sets the cycles a parallel order keeps reading at once from now on (at least 1; the
    /// cycles already in flight finish): an executor whose depth changes with the load (the
    /// engine's windows in flight, [`windows_in_flight`]) says so here. No effect on a
    /// sequential order.
    pub fn set_max_in_flight(&mut self, max_in_flight: usize) {
        if let RebuildOrder::Parallel { .. } = self.order {
            self.order = RebuildOrder::Parallel {
                max_in_flight: max_in_flight.max(1),
            };
        }
    }

    /// Room for one more cycle: fewer than [`RebuildScheduler::max_in_flight`] reading, and
    /// at most twice that in flight (the cycles writing included).
    fn has_room(&self) -> bool {
        let max = self.max_in_flight();
        self.in_flight.len() - self.writing.len() < max && self.in_flight.len() < 2 * max
    }

    /// The plan of `cycle` has read what it reads and now writes: its slot goes to the next
    /// cycle, whose reads then run beside these writes, as the engine's rebuild starts its
    /// next window when one is done reading (`dev::pool::WindowFlow`).
    /// At most twice [`RebuildScheduler::max_in_flight`] cycles are then in flight. An
    /// executor that never calls this keeps `max_in_flight` cycles, reading or writing.
    pub fn reads_done(&mut self, cycle: u64) {
        debug_assert!(
            self.in_flight.contains(&cycle),
            "cycle {cycle} not in flight"
        );
        self.writing.insert(cycle);
    }

    /// The next plans to start (possibly none: everything handed out, or the limit reached).
    /// Errors as [`plan_rebuild_cycle`] does (e.g. [`CoreError::NeedsReplacement`]); the cycle
    /// is then retried on the next call.
    pub fn next_plans(
        &mut self,
        geo: &Geometry,
        state: &ArrayState,
    ) -> Result<Vec<Plan>, CoreError> {
        self.next_plans_with(geo, state, |c| {
            Ok(plan_rebuild_cycle(geo, state, c)?.map(|plan| {
                let bytes = plan.io_counts().write_bytes;
                (plan, bytes)
            }))
        })
    }

    /// [`RebuildScheduler::next_plans`] with the planning of each cycle left to `plan`, which
    /// must answer for cycle `c` what `plan_rebuild_cycle(geo, state, c)` answers, in any form
    /// `P` the caller executes (with the plan's written bytes, which the throttle counts). An
    /// executor that knows the plan of a cycle in the same layout generations can hand out a
    /// translated copy instead of planning again (the simulator does); report completion with
    /// [`RebuildScheduler::complete_cycle`] and failure with
    /// [`RebuildScheduler::abort_cycle`].
    pub fn next_plans_with<P>(
        &mut self,
        geo: &Geometry,
        state: &ArrayState,
        mut plan: impl FnMut(u64) -> Result<Option<(P, u64)>, CoreError>,
    ) -> Result<Vec<P>, CoreError> {
        let target = state.target_generation();
        if self.target != Some(target) {
            self.target = Some(target);
            self.cursor = 0;
        }
        let mut out = Vec::new();
        // Prioritised cycles first (dropped once clean or in flight), then cycle order.
        while self.has_room() {
            let Some(c) = self.priority.pop_front() else {
                break;
            };
            if c >= geo.cycles() || state.is_clean(c) || self.in_flight.contains(&c) {
                continue;
            }
            match plan(c) {
                Ok(Some((p, write_bytes))) => {
                    self.in_flight.insert(c);
                    self.bytes_issued += write_bytes;
                    out.push(p);
                }
                Ok(None) => {}
                Err(e) => {
                    self.priority.push_front(c);
                    if out.is_empty() {
                        return Err(e);
                    }
                    return Ok(out);
                }
            }
        }
        // A cycle that stopped in a staging generation (`Generation::staging`) moves on in
        // another pass, once the pass that put it there has nothing in flight.
        if self.cursor >= geo.cycles() && self.in_flight.is_empty() && !state.all_clean() {
            self.cursor = 0;
        }
        while self.has_room() && self.cursor < geo.cycles() {
            let c = self.cursor;
            if state.is_clean(c) || self.in_flight.contains(&c) {
                self.cursor += 1;
                continue;
            }
            match plan(c) {
                Ok(Some((p, write_bytes))) => {
                    self.in_flight.insert(c);
                    self.bytes_issued += write_bytes;
                    out.push(p);
                }
                Ok(None) => {}
                // Hand out what is planned; the failing cycle is retried (and its error
                // reported) on the next call.
                Err(_) if !out.is_empty() => break,
                Err(e) => return Err(e),
            }
            self.cursor += 1;
        }
        Ok(out)
    }

    /// Cycles to rebuild before continuing in cycle order, in this order (replacing any
    /// earlier priority list). Cycles already clean or in flight when their turn comes are
    /// skipped. IDO and PRO (`raidcore::ido::Ido::priority_cycles`) use this.
    pub fn prioritize(&mut self, cycles: impl IntoIterator<Item = u64>) {
        self.priority = cycles.into_iter().collect();
    }

    /// Cycles still waiting in the priority list.
    pub fn priority_len(&self) -> usize {
        self.priority.len()
    }

    /// Reports that `plan` ran and its writes are durable: marks its cycle rebuilt.
    pub fn complete(&mut self, state: &mut ArrayState, plan: &Plan) {
        let PlanKind::Rebuild { to, .. } = plan.kind else {
            panic!("complete() takes rebuild plans");
        };
        self.complete_cycle(state, plan.cycle, to, plan.io_counts().write_bytes);
    }

    /// [`RebuildScheduler::complete`] of the rebuild plan of cycle `cycle` toward generation
    /// `to` that wrote `write_bytes`.
    pub fn complete_cycle(
        &mut self,
        state: &mut ArrayState,
        cycle: u64,
        to: u32,
        write_bytes: u64,
    ) {
        assert!(
            self.in_flight.remove(&cycle),
            "cycle {cycle} was not in flight"
        );
        self.writing.remove(&cycle);
        state.mark_rebuilt(cycle, to);
        self.bytes_rebuilt += write_bytes;
        if !state.is_clean(cycle) {
            // Planned toward a target an event has since replaced: do it again.
            self.cursor = self.cursor.min(cycle);
        }
    }

    /// Reports that `plan` failed (an I/O error, an event): its cycle will be planned again.
    pub fn abort(&mut self, plan: &Plan) {
        self.abort_cycle(plan.cycle);
    }

    /// [`RebuildScheduler::abort`] of the rebuild plan of cycle `cycle`.
    pub fn abort_cycle(&mut self, cycle: u64) {
        assert!(self.in_flight.remove(&cycle), "cycle not in flight");
        self.writing.remove(&cycle);
        self.cursor = self.cursor.min(cycle);
    }

    /// True when every cycle is in the target generation and nothing is in flight.
    pub fn is_finished(&self, state: &ArrayState) -> bool {
        self.in_flight.is_empty() && state.all_clean()
    }

    /// Progress toward the current target.
    pub fn progress(&self, geo: &Geometry, state: &ArrayState) -> Progress {
        Progress {
            cycles_done: state.clean_cycles(),
            cycles_total: geo.cycles(),
            in_flight: self.in_flight.len(),
            bytes_rebuilt: self.bytes_rebuilt,
        }
    }

    /// [`Throttle::delay_ns`] with the bytes of the plans this scheduler has handed out (in
    /// flight or done; a plan handed out again after an abort counts again).
    pub fn delay_ns(&mut self, now_ns: u64, foreground_busy: bool) -> u64 {
        self.throttle
            .delay_ns(now_ns, foreground_busy, self.bytes_issued)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEC: u64 = 1_000_000_000;

    #[test]
    fn windows_in_flight_are_two_at_most_while_clients_are_busy() {
        assert_eq!(windows_in_flight(4, false), 4);
        assert_eq!(windows_in_flight(4, true), 2);
        assert_eq!(windows_in_flight(1, true), 1);
        assert_eq!(windows_in_flight(0, false), 1);
        assert_eq!(windows_in_flight(0, true), 1);
        let mut s = RebuildScheduler::new(
            RebuildOrder::Parallel { max_in_flight: 8 },
            SpeedLimits::default(),
        );
        s.set_max_in_flight(16);
        assert_eq!(s.max_in_flight(), 16);
        s.set_max_in_flight(0);
        assert_eq!(s.max_in_flight(), 1);
        let mut q = RebuildScheduler::new(RebuildOrder::Sequential, SpeedLimits::default());
        q.set_max_in_flight(16);
        assert_eq!(q.max_in_flight(), 1);
    }

    /// The default grows with the enclosure between its bounds, and never asks for more than
    /// 16 windows (256 MiB of the default windows) however many members.
    #[test]
    fn default_windows_grow_with_the_members_within_bounds() {
        assert_eq!(default_windows_in_flight(0), 4);
        assert_eq!(default_windows_in_flight(8), 4);
        assert_eq!(default_windows_in_flight(13), 4);
        assert_eq!(default_windows_in_flight(17), 5);
        assert_eq!(default_windows_in_flight(31), 8);
        assert_eq!(default_windows_in_flight(64), 16);
        assert_eq!(default_windows_in_flight(255), 16);
        for n in 1..=255 {
            let w = default_windows_in_flight(n);
            assert!((4..=16).contains(&w));
            assert!(w >= default_windows_in_flight(n - 1), "n = {n}");
        }
    }

    /// Reading windows: all when writes land where reads do, half (rounded up) otherwise,
    /// and never none.
    #[test]
    fn reading_windows_are_all_or_half() {
        for w in 0..40 {
            let all = reading_windows(w, true);
            let half = reading_windows(w, false);
            assert_eq!(all, w.max(1));
            assert!(half >= 1 && half <= all);
            assert!(
                2 * half >= w && 2 * (half - 1) < w.max(1),
                "w = {w}: {half}"
            );
        }
        assert_eq!(reading_windows(4, false), 2);
        assert_eq!(reading_windows(8, true), 8);
    }

    /// RAID5 over 4 members with 64 KiB chunks: 1 MiB of buffers a cycle, so a 16 MiB window
    /// holds a whole batch of 8; RAID+ n=13 k=4: 12 MiB a cycle, so a window holds 1.33.
    #[test]
    fn cycles_in_flight_are_the_batches_the_windows_hold() {
        let mib = 1u64 << 20;
        assert_eq!(cycles_in_flight(4, 8, 16 * mib, mib), 32);
        assert_eq!(cycles_in_flight(2, 8, 16 * mib, mib), 16);
        assert_eq!(cycles_in_flight(4, 8, 16 * mib, 12 * mib), 5);
        assert_eq!(cycles_in_flight(2, 8, 16 * mib, 12 * mib), 2);
        assert_eq!(cycles_in_flight(4, 8, 0, 12 * mib), 32);
        assert_eq!(cycles_in_flight(4, 8, 64 << 10, mib), 1);
    }

    #[test]
    fn throttle_backs_off_under_load() {
        let limits = SpeedLimits {
            min_bytes_per_sec: 1_000_000,
            max_bytes_per_sec: 10_000_000,
        };
        let mut t = Throttle::new(limits);
        assert_eq!(t.delay_ns(0, false, 0), 0);
        // 5 MB after 0.5 s: exactly at the max rate when idle.
        assert_eq!(t.delay_ns(SEC / 2, false, 5_000_000), 0);
        // 6 MB at 0.5 s idle: 0.1 s ahead of the max rate.
        assert_eq!(t.delay_ns(SEC / 2, false, 6_000_000), SEC / 10);
        // Under load the min rate applies: 6 MB needs 6 s.
        assert_eq!(t.delay_ns(SEC / 2, true, 6_000_000), 6 * SEC - SEC / 2);
        // Unlimited when max is 0.
        let mut u = Throttle::new(SpeedLimits {
            min_bytes_per_sec: 0,
            max_bytes_per_sec: 0,
        });
        assert_eq!(u.delay_ns(0, true, 1 << 40), 0);
    }

    #[test]
    fn throttle_window_slides() {
        let mut t = Throttle::new(SpeedLimits {
            min_bytes_per_sec: 1000,
            max_bytes_per_sec: 1000,
        });
        t.delay_ns(0, false, 0);
        // A long idle gap (nothing rebuilt) buys at most one window (30 s) of burst: marks
        // every 3 s, the oldest of the last ten is where the rate is measured from.
        for s in (3..=60).step_by(3) {
            t.delay_ns(s * SEC, false, 0);
        }
        // Measured from the mark at 33 s: 40000 bytes at 1000 B/s end at 73 s.
        assert_eq!(t.delay_ns(60 * SEC, false, 40_000), 13 * SEC);
        // Bytes handed out in one burst stay in the window for 27-30 s: 10000 bytes at 0 s
        // are not forgotten 6 s later (a two-mark window would have let a second burst go).
        let mut u = Throttle::new(SpeedLimits {
            min_bytes_per_sec: 1000,
            max_bytes_per_sec: 1000,
        });
        u.delay_ns(0, true, 0);
        assert_eq!(u.delay_ns(0, true, 10_000), 10 * SEC);
        for s in (3..=9).step_by(3) {
            assert_eq!(u.delay_ns(s * SEC, true, 10_000), (10 - s) * SEC);
        }
        assert_eq!(u.delay_ns(9 * SEC, true, 20_000), 11 * SEC);
    }

    #[test]
    fn scheduler_counts_plans_in_flight_against_the_rate() {
        use layout::{build, Params, SchemeKind};
        let p = Params {
            disks: Some(6),
            spares: 1,
            ..Params::default()
        };
        let geo = Geometry::new(build(SchemeKind::Raid5, &p).unwrap(), 4096, 1 << 20).unwrap();
        let mut state = ArrayState::new(&geo);
        state.fail(&geo, 2).unwrap();
        let rate = 100_000;
        let mut sched = RebuildScheduler::new(
            RebuildOrder::Parallel { max_in_flight: 4 },
            SpeedLimits {
                min_bytes_per_sec: rate,
                max_bytes_per_sec: rate,
            },
        );
        let (mut now, mut issued, mut batch_max) = (0u64, 0u64, 0u64);
        let mut in_flight: Vec<Plan> = Vec::new();
        loop {
            let d = sched.delay_ns(now, true);
            if d > 0 {
                now += d;
                // Plans take a while: the oldest completes during the wait.
                if !in_flight.is_empty() {
                    let p = in_flight.remove(0);
                    sched.complete(&mut state, &p);
                }
                continue;
            }
            let plans = sched.next_plans(&geo, &state).unwrap();
            if plans.is_empty() {
                if in_flight.is_empty() {
                    break;
                }
                let p = in_flight.remove(0);
                sched.complete(&mut state, &p);
                continue;
            }
            let bytes: u64 = plans.iter().map(|p| p.io_counts().write_bytes).sum();
            batch_max = batch_max.max(bytes);
            // Never ahead of the rate by more than the batch just handed out.
            assert!(
                issued as u128 * 1_000_000_000 <= rate as u128 * now as u128 + 1,
                "{issued} bytes handed out by {now} ns at {rate} B/s"
            );
            issued += bytes;
            in_flight.extend(plans);
        }
        assert!(sched.is_finished(&state));
        assert_eq!(issued, geo.cycles() * geo.stride_rows() * 4096);
        // The whole rebuild took at least its bytes at the rate, less one batch.
        assert!(now as u128 * rate as u128 >= (issued - batch_max) as u128 * 1_000_000_000);
    }
    /// A cycle done reading gives its slot to the next (as the engine's windows do):
    /// `max_in_flight` cycles read at once and at most twice that are in flight; a
    /// scheduler never told keeps `max_in_flight`.
    #[test]
    fn cycles_done_reading_give_their_slots_to_the_next() {
        use layout::{build, Params, SchemeKind};
        let p = Params {
            disks: Some(4),
            ..Params::default()
        };
        let geo = Geometry::new(build(SchemeKind::Raid5, &p).unwrap(), 4096, 1 << 20).unwrap();
        let mut state = ArrayState::new(&geo);
        state.fail(&geo, 1).unwrap();
        state.replace(&geo, 1).unwrap();
        assert!(geo.cycles() >= 12);
        let unlimited = SpeedLimits {
            min_bytes_per_sec: 0,
            max_bytes_per_sec: 0,
        };
        let mut sched =
            RebuildScheduler::new(RebuildOrder::Parallel { max_in_flight: 3 }, unlimited);
        let first = sched.next_plans(&geo, &state).unwrap();
        assert_eq!(first.len(), 3);
        assert!(sched.next_plans(&geo, &state).unwrap().is_empty(), "full");
        // Two of them are done reading: two more start.
        sched.reads_done(first[0].cycle);
        sched.reads_done(first[1].cycle);
        let second = sched.next_plans(&geo, &state).unwrap();
        assert_eq!(second.len(), 2);
        sched.reads_done(first[2].cycle);
        for p in &second {
            sched.reads_done(p.cycle);
        }
        // Five writing: one more reaches twice the limit.
        let extra = sched.next_plans(&geo, &state).unwrap();
        assert_eq!(extra.len(), 1);
        sched.reads_done(extra[0].cycle);
        // Six in flight, all writing: nothing more until one ends.
        assert_eq!(sched.progress(&geo, &state).in_flight, 6);
        assert!(sched.next_plans(&geo, &state).unwrap().is_empty());
        sched.complete(&mut state, &first[0]);
        let third = sched.next_plans(&geo, &state).unwrap();
        assert_eq!(third.len(), 1);
        // Ends (completed or aborted) free both counts: the rebuild still finishes.
        sched.abort(&third[0]);
        let mut in_flight: Vec<Plan> = first[1..]
            .iter()
            .chain(&second)
            .chain(&extra)
            .cloned()
            .collect();
        while !sched.is_finished(&state) {
            in_flight.extend(sched.next_plans(&geo, &state).unwrap());
            let p = in_flight.remove(0);
            sched.reads_done(p.cycle);
            sched.complete(&mut state, &p);
        }
        assert!(state.all_clean());
    }
}
