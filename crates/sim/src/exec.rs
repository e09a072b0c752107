//! The discrete-event executor: raidcore's plans on simulated member disks.
//!
//! ## What it does
//!
//! A [`Simulator`] owns an array ([`raidcore::Geometry`] + [`raidcore::ArrayState`]), one
//! simulated device per member ([`DiskModel`]) and an event queue ordered by `(time, sequence)`:
//! two events at the same simulated nanosecond run in the order they were scheduled, so one seed
//! gives one run. It pulls requests from a [`Workload`] one at a time (only the next arrival is
//! held, so memory does not grow with the trace), hands each to the planner and executes the
//! plans exactly as raidcore's execution contract says:
//!
//! 1. take the plan's stripe locks in its mode (`Plan::lock_mode`: shared for a read, so reads
//!    of a stripe overlap; exclusive for writes, rebuild cycles, flushes and repairs) all or
//!    nothing; a plan that cannot waits, and a plan never overtakes an older waiting plan of the
//!    same cycle, so neither a rebuild nor a write can starve (a read arriving behind a waiting
//!    write of its cycle waits for it, even when the stripes it reads are only read now); check
//!    the plan is still current (re-plan otherwise);
//! 2. queue every member read on its disk; when the last one completes, the ops take
//!    [`SimConfig::ops_ns`] (0 by default: parity math is far faster than a disk);
//! 3. queue every member write; when the last completes, release the locks. A request
//!    completes when all its plans have.
//!
//! Each disk serves one I/O at a time from its own queue, chosen by the [`Scheduler`]: FIFO, or
//! shortest-positioning-time-first using [`Disk::estimate`](crate::disk::Disk::estimate) over the first entries of the queue
//! with an age limit (like Linux's deadline scheduler). Foreground and rebuild I/O share these
//! queues, so they compete as on real disks. The simulator contains no RAID logic: where data
//! lives, what is read and what is written all come from raidcore's plans.
//!
//! ## Failure and rebuild
//!
//! At [`Failure::at_ns`] the member fails (`ArrayState::fail`): its queued and in-service I/Os
//! fail, the plans they belong to are re-planned against the new state (degraded), and from then
//! on every plan avoids it. After [`SimConfig::rebuild_delay_ns`] the rebuild starts: raidcore's
//! [`RebuildScheduler`] hands out `plan_rebuild_cycle` plans in its [`RebuildOrder`], paced by
//! its [`raidcore::Throttle`] like MD's `sync_speed_min/max` (the minimum rate while foreground
//! I/O was seen in the last [`SimConfig::foreground_idle_ns`], the maximum otherwise). A layout
//! without spare space answers `NeedsReplacement`; the simulator then replaces the member at
//! once with a blank device of the same model (a hot replacement) and rebuilds onto it.
//!
//! ## The plan checker inside
//!
//! Every plan is checked to avoid failed members, and no I/O is ever queued on a failed
//! member (an I/O of a plan made before a failure fails instead, and the plan is re-planned).
//! In debug builds, when the whole array fits in [`SimConfig::mem_check_max_bytes`], the data
//! moves too, on raidcore's in-memory members ([`MemArray`]): each member read and write copies
//! bytes when it completes on its simulated disk (so a plan whose reads straddle a failure sees
//! what a real one would), the ops run through `raidcore::mem::run_ops` between the phases, every
//! read is compared with a reference copy of the volume, and whenever no stripe is half written
//! every cycle written since the last check is checked for parity consistency
//! ([`check_consistency`]). Larger arrays in debug builds get `Plan::validate` on every plan.
//! Release builds check only the failed-member rule. [`Report::check`] says which ran.
//!
//! ## Why it is fast (and still exact)
//!
//! Simulation speed (member I/Os per second of wall time, `bench/sim_speed.sh`) comes from not redoing
//! work, never from planning differently:
//!
//! - **Plan memo** (`PlanMemo` in `exec.rs`): a plan depends on the request's offset *within* its
//!   cycle, its length, the cycle's layout generation and the array's events; the cycle number only
//!   shifts member offsets by `cycle * stride_rows * chunk_bytes` and names the cycle in the locks.
//!   So a request inside one cycle reuses raidcore's plan for an earlier request at the same
//!   in-cycle offset and length in the same generation, translated (`Rc<Plan>` + cycle + byte
//!   shift; locks translated on the fly). Emptied on every failure and replacement and at 64 Ki
//!   entries; writes only under the built-in write policies (a new policy must say whether its
//!   choice depends on more than the stripe's costs). Debug builds re-plan every memoised request
//!   and assert the translation equals the planner's plan; a test runs with and without the memo and
//!   compares whole reports.
//! - **Rebuild plans** come from the same memo: `RebuildScheduler::next_plans_with` lets the
//!   executor answer for a cycle, and every cycle moving between the same two generations (no
//!   event in between, eager parity) runs a translated copy of the first one's plan (`Rc<Plan>` +
//!   cycle + shift; `complete_cycle`/`abort_cycle` report it back). A RAID+ rebuild plan over 59
//!   disks has ~2,800 member I/Os and was, planned per cycle, most of an offline rebuild's time.
//!   Debug builds compare each translated rebuild plan with `plan_rebuild_cycle`'s.
//! - **Memoised small plans** (`Flat`, a 160-byte record of the member I/Os, stripe indices, lock mode and
//!   generations) sit in the memo's table entry; a hit builds the run record in its slab slot and
//!   copies the record in once. (Behind an `Rc`, as it was, a hit followed a pointer: a second
//!   cache miss per request on the way to the locks.)
//! - **Request path**: the held request's arrival is not a heap event (one push and one pop fewer
//!   per request); an idle disk with an empty queue starts an I/O without queueing it; a read's
//!   plan finishes without the empty write stage; a plain request plan is dropped in its slot
//!   instead of moved out; the planning path of `admit` and the lock-waiter pass are out of line
//!   (nearly every request is a memo hit with nobody waiting); volume bases are remembered; the
//!   timeline divides once per record; a looped trace's later passes come from the cached first
//!   pass through their own arm of `Source::next_request`, field by field (through the file
//!   path's temporary, each request was reloaded at other widths than it was stored, which
//!   store-to-load forwarding cannot serve).
//! - **Lock waiters** are retried only when stripes of their own cycle were unlocked (only an
//!   unlock can free what a waiter waits for; debug builds assert each skipped waiter is blocked);
//!   a pass is skipped when no released cycle has a waiter (it would change nothing), the waiter
//!   queue keeps each waiter's cycle inline (no plan look-up per skipped waiter), and the pass's
//!   buffers are reused instead of reallocated.
//! - **Stripe locks**: a plan locks stripes of its own cycle only, so the executor takes and
//!   releases them with `StripeLocks::try_lock_in_as`/`unlock_in_as` (no `StripeId` list built),
//!   and a memoised plan keeps its locks as a bit set and its mode as a flag
//!   (`try_lock_bits_as`/`unlock_bits_as`: no loop; a single reader of a stripe is a bit too, only
//!   a second one is counted in a map); for a
//!   cycle below stripe 64 this is one comparison in a 256-slot direct-mapped table, slots chosen
//!   by Fibonacci hashing (a linear list, searched until its cycle, mispredicted about once per
//!   look-up; a replay holds dozens of cycles, and a cycle whose slot is taken goes to the map),
//!   otherwise one map look-up per plan; `unlock` also looks a cycle up once per run of its stripes (a rebuild releases
//!   thousands of one cycle).
//! - **HDD cache**: the segment look-up first compares sector-rounded bounds in groups of 16 (the
//!   compiler vectorises it; exact bounds then decide, so the answer is the same), the replacement
//!   takes the head of a linked list kept in order of use (a scan for the smallest use time
//!   mispredicted one and a half times per miss), a write that overlaps no segment leaves these copies
//!   alone, and the read-ahead segment is indexed (debug builds check all of them mirror the
//!   segments); each segment
//!   keeps the cylinder position of its filled end (a square root per look-up saved; debug builds
//!   check it bit for bit); `estimate` (SPTF) runs on a reused scratch state instead of cloning
//!   the drive's.
//! - **Arithmetic on a baseline x86-64 target** (no SSE4.1, no POPCNT, no AVX-512): the HDD
//!   model's `fract`, `rem_euclid(1.0)` and `ceil` are libm calls there and its unsigned
//!   float conversions multi-instruction sequences, so it uses bit-identical helpers
//!   (`fract_nonneg`, `wrap_unit`, `ceil_u64`, signed conversions for values below 2^63; a test
//!   compares them with libm), and stripe counts are counted, not `count_ones`.
//! - **Geometry setup**: `Geometry::new` sizes the cycle stride over every single failure (and
//!   pairs) with `layout::recovery_rows`, which peels like `recovery_plan` but builds neither
//!   the repairs nor the rebuilt cycle, and peeling tabulates only the lost units (every other
//!   unit is read from its disk); a test checks `recovery_rows` against `recovery_plan` for every
//!   single failure and pair of every scheme case, errors included.
//!
//! - **Trace parsing** splits ASCII lines on bytes and accumulates digits directly (the same fields
//!   and errors as `str::split` + `trim` + `parse`, which a test compares).
//!
//! `bench/sim_speed.sh NEW BASE` compares two builds side by side; the outputs of `raidforge sim
//! --json` must not change from an optimisation (the simulation is the same, bit for bit).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::rc::Rc;

use layout::Disk;
use raidcore::fxhash::FxHashMap;
use raidcore::{
    check_consistency, plan_read, plan_read_balanced, plan_write, ArrayState, CoreError, Geometry,
    LockMode, MemArray, MemberLoad, Plan, PlanKind, RebuildOrder, RebuildScheduler, SpeedLimits,
    StripeId, StripeLocks, WritePolicy,
};

use crate::disk::{Disk as _, DiskIo, DiskModel, DiskParamError, DriveParams, Rotation};
use crate::metrics::{
    cov, CheckMode, DiskStats, Histogram, Phase, PhaseStats, RebuildReport, Report, Timeline,
};
use crate::trace::{Request, TraceError};
use crate::workload::WorkloadError;
use crate::Op;

mod ido;
mod lazy;
mod lse;

pub use ido::{IdoReport, IdoSimConfig};
pub use lazy::LazyModel;
pub use lse::{LseRandom, LseRange, LseReport};

/// A source of requests for the simulator.
pub trait Workload {
    /// The next request, in arrival order; `None` when the workload is over. An error stops the
    /// run (a lenient source skips bad lines itself and counts them in [`Workload::skipped`]).
    fn next_request(&mut self) -> Option<Result<Request, TraceError>>;
    /// `Some(depth)` for a closed loop: keep `depth` requests outstanding, ignoring their times.
    fn closed_loop_depth(&self) -> Option<u32> {
        None
    }
    /// Bad lines skipped so far.
    fn skipped(&self) -> u64 {
        0
    }
    /// Trace requests merged into others so far, and pieces split off requests over the
    /// largest size (the block layer's merging of a queue-level trace,
    /// [`crate::trace::Merge`]).
    fn merging(&self) -> (u64, u64) {
        (0, 0)
    }
}

/// No requests at all (an offline rebuild).
pub struct NoWorkload;

impl Workload for NoWorkload {
    fn next_request(&mut self) -> Option<Result<Request, TraceError>> {
        None
    }
}

/// How a disk picks the next I/O from its queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scheduler {
    /// First come, first served.
    Fifo,
    /// Shortest positioning time first: the queued I/O that [`Disk::estimate`](crate::disk::Disk::estimate) says would
    /// complete first, among the first `window` of the queue; but the oldest one as soon as it
    /// has waited `age_max_ns` (no starvation).
    Sptf {
        /// Queue entries considered (at least 1).
        window: usize,
        /// Longest wait before the oldest entry is served regardless.
        age_max_ns: u64,
    },
}

impl Scheduler {
    /// SPTF with a 32-entry window and a 500 ms age limit (the deadline scheduler's read expiry).
    pub const ELEVATOR: Scheduler = Scheduler::Sptf {
        window: 32,
        age_max_ns: 500_000_000,
    };
}

/// A member failure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Failure {
    /// The member.
    pub member: Disk,
    /// Simulated time of the failure, ns.
    pub at_ns: u64,
}

/// Everything about a run except the array and the workload.
#[derive(Clone, Debug)]
pub struct SimConfig {
    /// The member drive (members use its first bytes); every member is this model unless
    /// `drive_overrides` names another one for it.
    pub drive: DriveParams,
    /// Members of another model, e.g. an SSD parity member of RAID4S among HDDs. A replacement
    /// of such a member is of its model too.
    pub drive_overrides: Vec<(Disk, DriveParams)>,
    /// Seed of the run (the drives' rotational-latency draws when they use random rotation).
    pub seed: u64,
    /// Per-disk queue scheduler.
    pub scheduler: Scheduler,
    /// The failure, if any.
    pub failure: Option<Failure>,
    /// Delay between the failure and the start of the rebuild; `None`: never rebuild.
    pub rebuild_delay_ns: Option<u64>,
    /// Which cycles are rebuilt when.
    pub rebuild_order: RebuildOrder,
    /// Rebuild rate limits (MD's `sync_speed_min/max`; a max of 0 is unlimited).
    pub speed: SpeedLimits,
    /// Foreground I/O seen within this window makes the rebuild back off to the minimum rate.
    pub foreground_idle_ns: u64,
    /// A rebuild held back by its throttle looks at the load again at least this often:
    /// by default MD's 500 ms ([`raidcore::rebuild::MD_THROTTLE_RECHECK_NS`]), which the
    /// reproductions of systems built on MD keep; `raidforge sim` sets the engine's
    /// [`raidcore::rebuild::THROTTLE_RECHECK_NS`].
    pub throttle_recheck_ns: u64,
    /// RMW/RCW choice for writes.
    pub write_policy: WritePolicy,
    /// Time the ops phase of a plan with ops takes.
    pub ops_ns: u64,
    /// Most foreground requests in flight; further arrivals wait (and their wait counts in
    /// their response time). Bounds memory when the array cannot keep up with the workload.
    pub max_requests_in_flight: usize,
    /// Requests arriving after this time are not replayed (`None`: the whole workload).
    pub stop_ns: Option<u64>,
    /// Run the in-memory plan checker (debug builds) when the array is at most this large
    /// (members times member bytes); 0 disables it.
    pub mem_check_max_bytes: u64,
    /// Eager or lazy parity for writes of two-parity layouts (`raidcore::lazy`; the executor
    /// side is `exec/lazy.rs`).
    pub parity: raidcore::ParityPolicy,
    /// Bound of the deferred-parity list under lazy parity.
    pub bpgl_capacity: usize,
    /// Quiet time after the last foreground request before deferred parity is processed.
    pub bpgl_idle_ns: u64,
    /// Where the deferred-parity list is kept durable (what a write that lists stripes
    /// waits for).
    pub lazy_model: LazyModel,
    /// Serve requests inside one cycle from the memo of raidcore's plans (translated from
    /// another cycle in the same layout generation) instead of planning each one; see
    /// `PlanMemo` in `exec.rs`. The run is the same either way (a test checks it); this only
    /// saves planning time.
    pub plan_memo: bool,
    /// The rebuild policy and surrogate set (`exec/ido.rs`, `raidcore::ido`); `None`: MD's
    /// rebuild (PR) without IDO's bookkeeping.
    pub ido: Option<IdoSimConfig>,
    /// Latent sector errors: bad ranges of members' data areas (`exec/lse.rs`). Empty and
    /// `lse_random` `None`: none (the run is exactly as without LSE support).
    pub lse: Vec<LseRange>,
    /// Latent sector errors drawn from `seed` on every member.
    pub lse_random: Option<LseRandom>,
    /// Where the volumes of a multi-volume workload live and per-volume response times
    /// ([`VolumeLayout`]); `None`: volumes are folded onto the whole array at pseudo-random
    /// bases and measured together.
    pub volumes: Option<VolumeLayout>,
    /// Spread reads of mirrored units over their copies (`raidcore::plan_read_balanced`, MD's
    /// `read_balance`), with each disk's queue and last I/O as the planner's hints; off: every
    /// read goes to the first available copy (`plan_read`). Such reads are planned one by one
    /// (the plan memo cannot hold a choice that depends on the queues).
    pub read_balance: bool,
    /// A disk starting an I/O takes along the queued I/Os that continue it (same direction,
    /// the next bytes, at the front of its queue), up to this many bytes in all, as one
    /// device request, as the block layer merges requests and the engine sends a run of
    /// consecutive bytes in one `preadv`/`pwritev`; 0: one request per unit. [`SimConfig::new`]
    /// merges on the engine's emulated member ([`crate::disk::EmulatedDisk`]), whose cost is
    /// per request, and not on the seeds' drive models, whose reproductions were run with one
    /// request per unit (their read-ahead and head position make consecutive units cheap).
    pub merge_max_bytes: u64,
    /// A rebuild cycle's slot goes to the next cycle once its reads are done
    /// ([`raidcore::RebuildScheduler::reads_done`]), so the next cycles read while it writes,
    /// as the engine's rebuild pipeline does; off: a cycle holds its slot until written.
    /// [`SimConfig::new`] turns it on with request merging (the engine's emulated member),
    /// where without it the cycles in flight read together and write together, one stage
    /// at a time (RAID5 over 4 members at 150 MB/s and 4 ms: 6.6 s simulated against the
    /// engine's 3.3-3.6 s); the seeds' reproductions were run without it.
    pub rebuild_read_ahead: bool,
    /// The engine's windows in flight (`raidforge rebuild --windows-in-flight`), each of
    /// [`RebuildOrder::Parallel`]'s `max_in_flight` cycles: the cycles in flight, reading and
    /// writing together, are at most the windows in flight times that, all of them when no
    /// client is busy and two while clients are ([`raidcore::rebuild::windows_in_flight`]).
    /// With [`SimConfig::rebuild_read_ahead`] (at most twice the cycles reading in flight),
    /// the cycles reading are then half of it. 1 (the default): `max_in_flight` cycles
    /// reading, whatever the load.
    pub rebuild_windows: usize,
    /// The engine's window (`raidforge rebuild --memory-window`): buffer bytes (read and
    /// written) of one window, with [`SimConfig::rebuild_windows`] above 1; 0: no bound.
    pub rebuild_window_bytes: u64,
}

/// Largest request merged from consecutive units: what the engine's batches reach (1024
/// segments of 64 KiB).
pub const MERGE_MAX_BYTES: u64 = 64 << 20;

/// The array's logical space cut into `count` volumes: extents of `extent_bytes` dealt round
/// robin, extent `e` to volume `e mod count` (a RAID+ pool with one template per volume and
/// cycle, four RAID-5 arrays of a concatenated RAID-5C, virtual arrays over a hashed pool).
/// Volume `v`'s byte `x` is byte `x mod E` of its extent `x / E`, i.e. array byte
/// `((x / E) * count + v) * E + x mod E`; a request's offset is folded modulo the volume's
/// size, and a request of volume `w >= count` goes to volume `w mod count`. Reports then carry
/// response times per volume ([`crate::metrics::VolumeStats`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VolumeLayout {
    /// Number of volumes.
    pub count: u32,
    /// Bytes of each extent.
    pub extent_bytes: u64,
}

impl VolumeLayout {
    /// Bytes each volume holds on an array of `capacity_bytes` (whole extent rounds only).
    pub fn volume_bytes(&self, capacity_bytes: u64) -> u64 {
        capacity_bytes / (self.extent_bytes * u64::from(self.count)) * self.extent_bytes
    }

    /// The array byte holding byte `offset` (already within the volume) of volume `volume`.
    pub fn array_offset(&self, volume: u32, offset: u64) -> u64 {
        let e = self.extent_bytes;
        ((offset / e) * u64::from(self.count) + u64::from(volume % self.count)) * e + offset % e
    }
}

impl SimConfig {
    /// Defaults for `drive`: seed 0, FIFO, no failure, an immediate rebuild with four cycles in
    /// flight (in cycle order, so one cycle's writes overlap the next one's reads, as MD's
    /// resync window does; `RebuildOrder::Sequential` is strictly one cycle at a time), MD's
    /// speed limits, MD's write policy, 64 Ki requests in flight, in-memory checking up to
    /// 64 MiB, the plan memo on.
    pub fn new(drive: DriveParams) -> SimConfig {
        let drive_kind = drive.clone();
        SimConfig {
            drive,
            drive_overrides: Vec::new(),
            seed: 0,
            scheduler: Scheduler::Fifo,
            failure: None,
            rebuild_delay_ns: Some(0),
            rebuild_order: RebuildOrder::Parallel { max_in_flight: 4 },
            speed: SpeedLimits::default(),
            foreground_idle_ns: raidcore::rebuild::FOREGROUND_WINDOW_NS,
            throttle_recheck_ns: raidcore::rebuild::MD_THROTTLE_RECHECK_NS,
            write_policy: WritePolicy::Md,
            ops_ns: 0,
            max_requests_in_flight: 1 << 16,
            stop_ns: None,
            mem_check_max_bytes: 64 << 20,
            parity: raidcore::ParityPolicy::Eager,
            bpgl_capacity: raidcore::lazy::BPGL_DEFAULT_CAPACITY,
            bpgl_idle_ns: raidcore::lazy::FLUSH_IDLE_AFTER_NS,
            lazy_model: LazyModel::Engine,
            plan_memo: true,
            ido: None,
            lse: Vec::new(),
            lse_random: None,
            volumes: None,
            read_balance: false,
            merge_max_bytes: if matches!(drive_kind, DriveParams::Emulated(_)) {
                MERGE_MAX_BYTES
            } else {
                0
            },
            rebuild_read_ahead: matches!(drive_kind, DriveParams::Emulated(_)),
            rebuild_windows: 1,
            rebuild_window_bytes: 0,
        }
    }
}

/// Why a run could not be set up or could not go on.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SimError {
    /// The workload's trace is malformed or unreadable (names the file and line).
    #[error(transparent)]
    Trace(#[from] TraceError),
    /// The synthetic workload's description is invalid.
    #[error(transparent)]
    Workload(#[from] WorkloadError),
    /// The drive parameters are invalid.
    #[error(transparent)]
    Disk(#[from] DiskParamError),
    /// raidcore refused the geometry or an event.
    #[error(transparent)]
    Core(#[from] CoreError),
    /// The configuration does not describe a run (members larger than the drive, a failure of
    /// a member that does not exist, ...).
    #[error("{0}")]
    Config(String),
}

/// What an event does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// The held request arrives.
    Arrival,
    /// The I/O in service on `disk` completes (ignored unless `epoch` is the disk's current one).
    DiskDone { disk: u32, epoch: u32 },
    /// A plan's ops are done.
    OpsDone { plan: u32 },
    /// The member fails.
    Fail,
    /// The rebuild starts.
    RebuildStart,
    /// The rebuild throttle's wait is over.
    RebuildWake,
    /// The idle detector may say idle now (lazy parity).
    FlushWake,
    /// A surrogate operation's network delay is over: queue its I/Os (IDO).
    SurrogateIssue { op: u32 },
    /// The I/O in service on surrogate disk `disk` completes (IDO).
    SurrogateDone { disk: u32 },
}

#[derive(Clone, Copy, Debug)]
struct Event {
    time_ns: u64,
    seq: u64,
    kind: Kind,
}

/// The pending events, earliest `(time, seq)` first out (keys are unique: `seq` is).
///
/// Why not just a binary heap: a replay has three or four events pending on average, and a
/// pop from a heap that size cost about a hundred instructions. Up to [`EventQueue::SMALL`]
/// events are kept in a vector sorted latest first, so a pop is a `Vec::pop` and a push a
/// short shift. Past that (a declustered rebuild keeps dozens of disks
/// busy, and each push would shift most of the vector) every event moves to a binary heap,
/// which serves until it is empty again. Either way the order is the same.
#[derive(Default)]
struct EventQueue {
    sorted: Vec<Event>,
    heap: BinaryHeap<Reverse<EventKey>>,
}

/// An [`Event`] ordered by `(time, seq)` alone, for the heap.
#[derive(Clone, Copy, Debug)]
struct EventKey(Event);

impl PartialEq for EventKey {
    fn eq(&self, o: &EventKey) -> bool {
        (self.0.time_ns, self.0.seq) == (o.0.time_ns, o.0.seq)
    }
}
impl Eq for EventKey {}
impl PartialOrd for EventKey {
    fn partial_cmp(&self, o: &EventKey) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for EventKey {
    fn cmp(&self, o: &EventKey) -> std::cmp::Ordering {
        (self.0.time_ns, self.0.seq).cmp(&(o.0.time_ns, o.0.seq))
    }
}

impl EventQueue {
    /// Most events the sorted vector holds.
    const SMALL: usize = 16;

    fn push(&mut self, ev: Event) {
        if !self.heap.is_empty() {
            self.heap.push(Reverse(EventKey(ev)));
            return;
        }
        if self.sorted.len() >= Self::SMALL {
            self.heap
                .extend(self.sorted.drain(..).map(|e| Reverse(EventKey(e))));
            self.heap.push(Reverse(EventKey(ev)));
            return;
        }
        // Insertion sort's step: in at the end, then moved up past every event due earlier
        // (a few moves of a few events, cheaper than a binary search and a `memmove` call).
        let key = (ev.time_ns, ev.seq);
        self.sorted.push(ev);
        let v = &mut self.sorted;
        let mut i = v.len() - 1;
        while i > 0 && (v[i - 1].time_ns, v[i - 1].seq) < key {
            v[i] = v[i - 1];
            i -= 1;
        }
        v[i] = ev;
    }

    /// `(time, seq)` of the next event.
    fn peek(&self) -> Option<(u64, u64)> {
        match self.heap.peek() {
            Some(Reverse(EventKey(e))) => Some((e.time_ns, e.seq)),
            None => self.sorted.last().map(|e| (e.time_ns, e.seq)),
        }
    }

    fn pop(&mut self) -> Option<Event> {
        if self.heap.is_empty() {
            return self.sorted.pop();
        }
        debug_assert!(self.sorted.is_empty(), "one container at a time");
        self.heap.pop().map(|Reverse(EventKey(e))| e)
    }
}

/// A vector of slots with a free list: stable small ids, deterministic reuse.
struct Slab<T> {
    slots: Vec<Option<T>>,
    free: Vec<u32>,
    live: usize,
}

impl<T> Slab<T> {
    fn new() -> Slab<T> {
        Slab {
            slots: Vec::new(),
            free: Vec::new(),
            live: 0,
        }
    }
    fn insert(&mut self, v: T) -> u32 {
        self.live += 1;
        match self.free.pop() {
            Some(i) => {
                let slot = &mut self.slots[i as usize];
                // (Also tells the compiler there is nothing to drop.)
                assert!(slot.is_none(), "a free slab slot is empty");
                *slot = Some(v);
                i
            }
            None => {
                self.slots.push(Some(v));
                (self.slots.len() - 1) as u32
            }
        }
    }
    fn remove(&mut self, i: u32) -> T {
        let v = self.slots[i as usize].take().expect("slab slot is live");
        self.free.push(i);
        self.live -= 1;
        v
    }
    /// A free slot, counted live already, and its index: the caller fills it in place (a large
    /// value written straight into it rather than built aside and moved in).
    #[inline(always)]
    fn vacant(&mut self) -> (u32, &mut Option<T>) {
        self.live += 1;
        let i = match self.free.pop() {
            Some(i) => i,
            None => {
                self.slots.push(None);
                (self.slots.len() - 1) as u32
            }
        };
        let slot = &mut self.slots[i as usize];
        assert!(slot.is_none(), "a free slab slot is empty");
        (i, slot)
    }

    /// Drops the value in slot `i` where it is (no move out, unlike [`Slab::remove`]).
    fn free(&mut self, i: u32) {
        let slot = &mut self.slots[i as usize];
        assert!(slot.is_some(), "slab slot is live");
        *slot = None;
        self.free.push(i);
        self.live -= 1;
    }
    fn get(&self, i: u32) -> &T {
        self.slots[i as usize].as_ref().expect("slab slot is live")
    }
    fn get_mut(&mut self, i: u32) -> &mut T {
        self.slots[i as usize].as_mut().expect("slab slot is live")
    }
    fn len(&self) -> usize {
        self.live
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Owner {
    Request(u32),
    Rebuild,
    /// Recomputes deferred parity (lazy parity).
    Flush,
    /// Writes redirected data back after the rebuild (IDO's reclaimer).
    Reclaim,
    /// Rewrites places hit by latent sector errors (`exec/lse.rs`; the repair's index).
    Repair(u32),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    Waiting,
    Reading,
    Ops,
    Writing,
}

struct PlanRun {
    /// raidcore's plan; for a plan taken from the [`PlanMemo`], the one made for another cycle
    /// (`shift` translates it). `None` only for a memo hit with `flat` in a release build
    /// (nothing there reads the full plan; debug builds keep it for the checkers).
    plan: Option<Rc<Plan>>,
    /// A memoised small plan's hot fields, copied from the memo (see [`Flat`]); when present
    /// the executor reads its I/Os, locks and generations from here instead of from `plan`.
    flat: Option<Flat>,
    /// The cycle the plan runs on.
    cycle: u64,
    /// Bytes added to every member offset of `plan` (0 unless it came from the memo).
    shift: i64,
    owner: Owner,
    /// Array byte where the plan's `user_offset` counts from: the request's offset, or the
    /// start of the range re-planned.
    user_base: u64,
    stage: Stage,
    /// I/Os of the current stage not yet completed.
    pending: u32,
    /// An I/O of this plan failed (its member failed): re-plan when the stage drains.
    errored: bool,
    /// The plan's buffers in the in-memory checker (debug builds, small arrays).
    bufs: Option<Vec<Vec<u8>>>,
    /// The checker: this plan re-does a plan abandoned after some of its writes landed, so
    /// its stripes stay inconsistent until it completes.
    settles: bool,
    /// Deferred-parity bookkeeping of the plan (lazy parity).
    lazy: lazy::PlanLazy,
}

impl PlanRun {
    /// The full plan (cold paths: rebuild bookkeeping, checkers, messages).
    fn plan(&self) -> &Plan {
        self.plan
            .as_deref()
            .expect("a plan without `flat` keeps its full plan")
    }

    /// Member reads (or writes) of the plan.
    fn io_count(&self, write: bool) -> usize {
        match &self.flat {
            Some(f) => usize::from(if write { f.writes } else { f.reads }),
            None if write => self.plan().writes.len(),
            None => self.plan().reads.len(),
        }
    }

    /// Member I/O `i` of the plan's reads (or writes), on this run's cycle: (member, offset,
    /// length).
    fn member_io(&self, write: bool, i: usize) -> (Disk, u64, u64) {
        let (member, offset, len) = match &self.flat {
            Some(f) => {
                let m = f.ios[if write { usize::from(f.reads) + i } else { i }];
                (m.member, m.offset_bytes, u64::from(m.len))
            }
            None => {
                let p = self.plan();
                let m = if write { &p.writes[i] } else { &p.reads[i] };
                (m.member, m.offset_bytes, m.data.len as u64)
            }
        };
        (member, offset.wrapping_add_signed(self.shift), len)
    }

    /// The plan's stripe locks on this run's cycle, into `out` (cleared first).
    fn stripes_into(&self, out: &mut Vec<StripeId>) {
        out.clear();
        match &self.flat {
            Some(f) => out.extend(
                f.locks[..usize::from(f.locks_len)]
                    .iter()
                    .map(|&s| StripeId {
                        cycle: self.cycle,
                        stripe: s as usize,
                    }),
            ),
            None => out.extend(self.plan().locks.iter().map(|l| StripeId {
                cycle: self.cycle,
                stripe: l.stripe,
            })),
        }
    }

    /// How the plan holds its stripes (shared for a read, `Plan::lock_mode`).
    #[inline]
    fn lock_mode(&self) -> LockMode {
        match &self.flat {
            Some(f) if f.shared => LockMode::Shared,
            Some(_) => LockMode::Exclusive,
            None => self.plan().lock_mode(),
        }
    }

    /// The plan has ops (phase 2).
    fn has_ops(&self) -> bool {
        match &self.flat {
            Some(f) => f.has_ops,
            None => !self.plan().ops.is_empty(),
        }
    }

    /// The plan's range of the request: (`user_offset`, length of buffer 0).
    fn user_range(&self) -> (u64, u64) {
        match &self.flat {
            Some(f) => (f.user_offset, f.user_len),
            None => (self.plan().user_offset, self.plan().buffers[0] as u64),
        }
    }

    /// Panics if the plan touches a failed member (`Plan::assert_avoids`).
    fn assert_avoids(&self, failed: &[Disk]) {
        match &self.flat {
            Some(f) => {
                let n = usize::from(f.reads) + usize::from(f.writes);
                for io in &f.ios[..n] {
                    assert!(
                        !failed.contains(&io.member),
                        "plan for cycle {} touches failed member {}",
                        self.cycle,
                        io.member
                    );
                }
            }
            None => self.plan().assert_avoids(failed),
        }
    }
}

/// One member I/O, as the executor queues it (16 bytes: four fit a cache line).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct FlatIo {
    offset_bytes: u64,
    len: u32,
    member: Disk,
}

/// I/Os a [`Flat`] holds inline (reads and writes together): a RAID5/6 read-modify-write of
/// two chunks needs six.
const FLAT_IOS: usize = 6;
/// Stripe locks a [`Flat`] holds inline.
const FLAT_LOCKS: usize = 4;

/// What the executor's hot path reads from a small memoised plan, in one contiguous record,
/// kept in the memo's table entry and copied into each [`PlanRun`] served from it (once,
/// straight into the run's slot).
///
/// Why hand-made: a [`Plan`] spreads over five or six heap blocks (the `Rc`, the reads, the
/// writes, the locks, ...). A memo hit reuses a plan made long ago, so each of those was a
/// cache miss on every request (the profile's largest item). Here the member I/Os are one
/// flat array (reads, then writes) and the locks are stripe indices within the cycle, so a
/// hit reads one hash-map slot and the run record is self-contained. (It once sat behind an
/// `Rc` of its own: a second cache miss per request, after the table's, on the path to the
/// stripe locks. Copying the record costs more instructions but replays 8-10 % faster.)
/// Plans that do not fit (more I/Os or locks than the inline capacity) keep using the full
/// plan.
#[derive(Clone, Copy, Debug)]
struct Flat {
    ios: [FlatIo; FLAT_IOS],
    locks: [u32; FLAT_LOCKS],
    /// `locks` as a bit set (bit `s` for stripe `s`) when every one is below 64, which
    /// `locks_in_bits` says: then the locks are taken and released without a loop over them.
    lock_bits: u64,
    locks_in_bits: bool,
    /// The plan holds its stripes shared (`Plan::lock_mode`: a read).
    shared: bool,
    reads: u8,
    writes: u8,
    locks_len: u8,
    has_ops: bool,
    layout_generation: u32,
    state_generation: u64,
    user_offset: u64,
    user_len: u64,
}

impl Flat {
    /// The flat form of `plan`, if it fits.
    fn of(plan: &Plan) -> Option<Flat> {
        let n = plan.reads.len() + plan.writes.len();
        if n > FLAT_IOS || plan.locks.len() > FLAT_LOCKS {
            return None;
        }
        let mut f = Flat {
            ios: [FlatIo::default(); FLAT_IOS],
            locks: [0; FLAT_LOCKS],
            lock_bits: 0,
            locks_in_bits: plan.locks.iter().all(|l| l.stripe < 64),
            shared: plan.lock_mode() == LockMode::Shared,
            reads: plan.reads.len() as u8,
            writes: plan.writes.len() as u8,
            locks_len: plan.locks.len() as u8,
            has_ops: !plan.ops.is_empty(),
            layout_generation: plan.layout_generation,
            state_generation: plan.state_generation,
            user_offset: plan.user_offset,
            user_len: plan.buffers[0] as u64,
        };
        for (slot, m) in f.ios.iter_mut().zip(plan.reads.iter().chain(&plan.writes)) {
            *slot = FlatIo {
                offset_bytes: m.offset_bytes,
                len: u32::try_from(m.data.len).ok()?,
                member: m.member,
            };
        }
        for (slot, l) in f.locks.iter_mut().zip(&plan.locks) {
            debug_assert_eq!(
                l.cycle, plan.cycle,
                "a plan locks stripes of its cycle only"
            );
            *slot = u32::try_from(l.stripe).ok()?;
            if f.locks_in_bits {
                f.lock_bits |= 1 << l.stripe;
            }
        }
        Some(f)
    }
}

/// Memo of raidcore's plans for requests that lie inside one cycle.
///
/// A plan depends on the request's offset *within* its cycle, its length, the layout
/// generation the cycle is in and the array's events; the cycle itself only adds
/// `cycle * stride_rows * chunk_bytes` to every member offset (`Geometry::member_offset`) and
/// names the cycle in the locks. So a plan made for one cycle serves every other cycle in the
/// same generation, translated, and the simulator asks the planner once per distinct
/// (operation, offset in cycle, length, generation) instead of once per request. The memo is
/// emptied on every array event (failure, replacement) and when it reaches [`MEMO_MAX`]
/// entries (memory stays bounded). Writes are memoised only under the built-in write policies,
/// which choose from the stripe's costs alone. Debug builds re-plan every request served from
/// the memo and assert that the translated plan is the planner's own.
struct PlanMemo {
    map: FxHashMap<MemoKey, MemoEntry>,
    writes: bool,
    /// Bytes of data per cycle.
    cycle_data_bytes: u64,
    /// Member bytes between consecutive cycles.
    stride_bytes: u64,
    hits: u64,
    /// Rebuild plans, by the generations they move a cycle between (see [`RebuildMemo`]).
    rebuilds: Vec<RebuildMemo>,
    /// Rebuild plans or request plans may be memoised at all (`SimConfig::plan_memo`, eager
    /// parity).
    enabled: bool,
}

/// A memoised rebuild plan. `plan_rebuild_cycle` plans cycle `c` from the generation it is in
/// to the target, reading the survivors of its layout and writing the moved places; the cycle
/// only shifts member offsets (by `c * stride_rows * chunk_bytes`) and names the cycle in the
/// locks, exactly as for requests. So every cycle moving between the same two generations, with
/// no array event in between, runs a translated copy of one plan (a RAID+ rebuild plan over 59
/// disks has thousands of member I/Os and took most of a rebuild's time to plan, once per
/// cycle). Under lazy parity a cycle's deferred parities change its plan, so nothing is
/// memoised then. Emptied with the request memo on every event.
struct RebuildMemo {
    from: u32,
    to: u32,
    made_for: u64,
    plan: Rc<Plan>,
    write_bytes: u64,
}

impl PlanMemo {
    /// Forgets every plan (an array event happened).
    fn clear(&mut self) {
        self.map.clear();
        self.rebuilds.clear();
    }

    /// `plan_rebuild_cycle(geo, state, c)`, from the memo when a plan between the same two
    /// generations is there: (plan, cycle, shift) and the bytes it writes.
    #[allow(clippy::type_complexity)]
    fn rebuild_plan(
        &mut self,
        geo: &Geometry,
        state: &ArrayState,
        c: u64,
    ) -> Result<Option<((Rc<Plan>, u64, i64), u64)>, CoreError> {
        let (from, to) = (state.cycle_generation(c), state.target_generation());
        if let Some(e) = self.rebuilds.iter().find(|e| (e.from, e.to) == (from, to)) {
            let shift = (c as i64 - e.made_for as i64) * self.stride_bytes as i64;
            debug_assert_eq!(e.plan.state_generation, state.generation());
            if cfg!(debug_assertions) {
                let fresh = raidcore::plan_rebuild_cycle(geo, state, c)
                    .expect("a memoised rebuild was planned before")
                    .expect("a cycle between two generations has a rebuild plan");
                assert_eq!(
                    translated(&e.plan, c, shift),
                    fresh,
                    "a memoised rebuild plan differs from the planner's"
                );
            }
            return Ok(Some(((e.plan.clone(), c, shift), e.write_bytes)));
        }
        let Some(plan) = raidcore::plan_rebuild_cycle(geo, state, c)? else {
            return Ok(None);
        };
        let write_bytes = plan.io_counts().write_bytes;
        let plan = Rc::new(plan);
        if self.enabled {
            self.rebuilds.push(RebuildMemo {
                from,
                to,
                made_for: c,
                plan: plan.clone(),
                write_bytes,
            });
        }
        Ok(Some(((plan, c, 0), write_bytes)))
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct MemoKey {
    write: bool,
    in_cycle: u64,
    len: u64,
    layout_generation: u32,
}

/// A memoised plan: the plan, the cycle it was made for, and its [`Flat`] form if it fits
/// (what a hit reads, without touching the plan's heap blocks).
struct MemoEntry {
    flat: Option<Flat>,
    made_for: u64,
    plan: Rc<Plan>,
}

/// Most plans the memo holds before it starts afresh.
const MEMO_MAX: usize = 1 << 16;

struct RequestRun {
    /// Arrival time for the response time (trace time, or admission time in a closed loop).
    arrival_ns: u64,
    op: Op,
    phase: Phase,
    /// Plans not yet completed.
    remaining: u32,
    /// The planner refused part of it (data lost).
    failed: bool,
    /// Serial number (seeds the checker's data pattern).
    serial: u64,
    /// Some of it is served by the array (not only by IDO's surrogate set): it counts as
    /// foreground load for the rebuild throttle.
    touches_array: bool,
    /// The request's volume (per-volume statistics under a [`VolumeLayout`]).
    volume: u32,
}

#[derive(Clone, Copy, Debug)]
struct QueuedIo {
    plan: u32,
    /// Index in the plan's reads or writes.
    index: u32,
    offset_bytes: u64,
    len_bytes: u64,
    write: bool,
    rebuild: bool,
    enqueued_ns: u64,
}

struct DiskSlot {
    model: DiskModel,
    queue: VecDeque<QueuedIo>,
    /// The I/O in service and when it started.
    current: Option<(QueuedIo, u64)>,
    /// I/Os merged into the one in service ([`SimConfig::merge_max_bytes`]), done with it.
    riders: Vec<QueuedIo>,
    /// Member byte just past the last I/O queued (the head position read balancing uses).
    head: u64,
    epoch: u32,
    failed: bool,
    busy_ns: u64,
    stats: DiskStats,
}

/// The in-memory reference the debug checker runs plans on.
struct MemCheck {
    mem: MemArray,
    /// What the volume should hold.
    reference: Vec<u8>,
    member_bytes: u64,
    /// Plans in their write phase: their stripes may be half written.
    writing: usize,
    /// Plans abandoned after some writes landed whose replacements have not completed.
    unsettled: usize,
    /// Cycles written since the last consistency check (checked when nothing is half
    /// written).
    unchecked: std::collections::BTreeSet<u64>,
}

/// Rebuild bookkeeping.
struct RebuildRun {
    sched: RebuildScheduler,
    active: bool,
    wake_pending: bool,
    report: RebuildReport,
    /// Bytes read and written by a cycle's rebuild plan (for [`SimConfig::rebuild_windows`]).
    cycle_bytes: Option<u64>,
}

/// A simulation run in progress. Build with [`Simulator::new`], consume with
/// [`Simulator::run`].
pub struct Simulator {
    geo: Geometry,
    state: ArrayState,
    cfg: SimConfig,
    locks: StripeLocks,
    disks: Vec<DiskSlot>,
    /// Pending events, the held request's arrival aside (see `arrival_at`).
    events: EventQueue,
    seq: u64,
    now_ns: u64,
    plans: Slab<PlanRun>,
    requests: Slab<RequestRun>,
    /// Plans waiting for their stripe locks, oldest first.
    /// (Each with its cycle: a retry pass skips most waiters, and reading the cycle from the
    /// plan was a cache miss per waiter.)
    lock_waiters: VecDeque<(u32, u64)>,
    /// Waiting plans per cycle (a new plan of such a cycle queues behind them).
    waiting_cycles: FxHashMap<u64, u32>,
    /// The next request, admitted at its arrival event (or when a slot frees, if stalled).
    held: Option<Request>,
    /// The held request's arrival event, `(time, seq)`, once scheduled. It is kept out of the
    /// heap (`run` takes it when it is earlier than the heap's first event, in the same
    /// `(time, seq)` order): one push and one pop fewer per request.
    arrival_at: Option<(u64, u64)>,
    workload_done: bool,
    closed_loop: Option<u32>,
    request_cap: usize,
    fg_plans_in_flight: usize,
    last_foreground_ns: Option<u64>,
    rebuild: Option<RebuildRun>,
    phase_hist: [Histogram; 4],
    timeline: Timeline,
    first_arrival_ns: Option<u64>,
    last_completion_ns: u64,
    completed: u64,
    failed_requests: u64,
    unmappable: u64,
    serial: u64,
    plan_count: u64,
    replans: u64,
    event_count: u64,
    check: CheckMode,
    mem: Option<MemCheck>,
    capacity_bytes: u64,
    /// Lazy parity: idle detector, flushes in flight.
    lazy: lazy::LazyRun,
    memo: PlanMemo,
    /// `cfg.read_balance` on a layout with copies: reads are planned with the disks' loads.
    balance_reads: bool,
    /// Emptied buffers of `lock_waiters`, `released` and a retry pass's blocked cycles, kept
    /// for their capacity (a retry pass runs on most completions: no allocation each time).
    waiters_spare: VecDeque<(u32, u64)>,
    released_spare: Vec<u64>,
    blocked_spare: Vec<u64>,
    /// Cycles whose stripes were unlocked since waiters were last retried.
    released: Vec<u64>,
    /// A `retry_waiters` pass is running.
    retrying: bool,
    /// IDO: the controller and the surrogate set (`exec/ido.rs`).
    ido: Option<ido::IdoRun>,
    /// Latent sector errors (`exec/lse.rs`); `None` without any.
    lse: Option<lse::LseRun>,
    /// [`volume_base`] of volumes 0 to 1023, once known.
    volume_bases: Vec<Option<u64>>,
    /// Response times per volume and phase under a [`VolumeLayout`] (empty without one).
    volume_hist: Vec<[Histogram; 4]>,
}

/// Base offset of a volume on the array: 0 for volume 0, otherwise a pseudo-random sector
/// (SplitMix64 of the volume number) so that the volumes of a multi-volume trace land on
/// different parts of the array before folding.
fn volume_base(volume: u32, capacity_bytes: u64) -> u64 {
    if volume == 0 {
        return 0;
    }
    let mut r = crate::rng::SplitMix64::new(u64::from(volume));
    r.next_u64() % (capacity_bytes / 512) * 512
}

impl Simulator {
    /// [`volume_base`] of `volume` on this array, remembered for the first volumes (a trace
    /// names a few; the hash and its 64-bit division ran on every request).
    fn volume_base(&mut self, volume: u32) -> u64 {
        let Some(slot) = self.volume_bases.get_mut(volume as usize) else {
            return volume_base(volume, self.capacity_bytes);
        };
        *slot.get_or_insert_with(|| volume_base(volume, self.capacity_bytes))
    }

    /// A simulator for the array `geo` (healthy) with `cfg`.
    pub fn new(geo: Geometry, cfg: SimConfig) -> Result<Simulator, SimError> {
        let used = geo.member_bytes_used();
        for (d, _) in &cfg.drive_overrides {
            if *d as usize >= geo.disks() {
                return Err(SimError::Config(format!(
                    "a drive model is given for member {d}, but the array has members 0 to {}",
                    geo.disks() - 1
                )));
            }
        }
        for d in 0..geo.disks() as Disk {
            let drive = drive_of(&cfg, d);
            if used > drive.capacity_bytes() {
                return Err(SimError::Config(format!(
                    "members of {used} bytes do not fit on a {} ({} bytes)",
                    drive.name(),
                    drive.capacity_bytes()
                )));
            }
        }
        if let Some(f) = cfg.failure {
            if f.member as usize >= geo.disks() {
                return Err(SimError::Config(format!(
                    "cannot fail member {}: the array has members 0 to {}",
                    f.member,
                    geo.disks() - 1
                )));
            }
        }
        if cfg.max_requests_in_flight == 0 {
            return Err(SimError::Config(
                "max_requests_in_flight must be positive".into(),
            ));
        }
        if let Scheduler::Sptf { window: 0, .. } = cfg.scheduler {
            return Err(SimError::Config("the SPTF window must be positive".into()));
        }
        if let Some(v) = cfg.volumes {
            if v.count == 0 || v.extent_bytes == 0 || v.extent_bytes % 512 != 0 {
                return Err(SimError::Config(format!(
                    "volume layout {v:?}: needs at least one volume and extents of a positive \
                     multiple of 512 bytes"
                )));
            }
            if v.volume_bytes(geo.capacity_bytes()) == 0 {
                return Err(SimError::Config(format!(
                    "volume layout {v:?}: the array ({} bytes) holds less than one extent per \
                     volume",
                    geo.capacity_bytes()
                )));
            }
        }
        if let RebuildOrder::Parallel { max_in_flight: 0 } = cfg.rebuild_order {
            return Err(SimError::Config(
                "a parallel rebuild needs at least one cycle in flight".into(),
            ));
        }
        // Fitting a drive's seek curve takes about a millisecond; members share one fitted
        // model (clones share it) unless each needs its own random rotation stream.
        let proto = cfg.drive.build(disk_seed(cfg.seed, 0, 0))?;
        let disks = (0..geo.disks())
            .map(|d| {
                Ok(DiskSlot {
                    model: new_drive(&cfg, &proto, d as u32, 0)?,
                    queue: VecDeque::new(),
                    current: None,
                    riders: Vec::new(),
                    head: 0,
                    epoch: 0,
                    failed: false,
                    busy_ns: 0,
                    stats: DiskStats::default(),
                })
            })
            .collect::<Result<Vec<_>, DiskParamError>>()?;
        let mut state = ArrayState::new(&geo);
        state.set_bpgl_capacity(cfg.bpgl_capacity);
        let cfg_idle = cfg.bpgl_idle_ns;
        let total = used.saturating_mul(geo.disks() as u64);
        let (check, mem) = if !cfg!(debug_assertions) {
            (CheckMode::Off, None)
        } else if total <= cfg.mem_check_max_bytes
            && !cfg.ido.as_ref().is_some_and(|i| i.policy.uses_surrogate())
        {
            let mem = MemCheck {
                mem: MemArray::new(geo.disks(), used),
                reference: vec![0; geo.capacity_bytes() as usize],
                member_bytes: used,
                writing: 0,
                unsettled: 0,
                unchecked: Default::default(),
            };
            (CheckMode::MemArray, Some(mem))
        } else {
            (CheckMode::Validate, None)
        };
        let capacity_bytes = geo.capacity_bytes();
        for r in &cfg.lse {
            if r.member as usize >= geo.disks() || r.len == 0 || r.offset + r.len > used {
                return Err(SimError::Config(format!(
                    "latent sector error {}:{}:{} is outside the array: members are 0 to {} with {used} data bytes each, and the length must be > 0",
                    r.member, r.offset, r.len, geo.disks() - 1
                )));
            }
        }
        let lse = lse::LseRun::new(&cfg, geo.disks(), used);
        let ido = match &cfg.ido {
            Some(i) => Some(ido::IdoRun::new(i, &geo, &cfg.drive, cfg.seed)?),
            None => None,
        };
        let memo = PlanMemo {
            map: FxHashMap::default(),
            // Exhaustive on purpose: a new policy must say whether its choice depends on more
            // than the stripe's costs (then its writes cannot be memoised).
            writes: match cfg.write_policy {
                WritePolicy::Md
                | WritePolicy::Modthresh
                | WritePolicy::Rmw
                | WritePolicy::Cost { .. } => true,
            },
            cycle_data_bytes: geo.data_per_cycle() * geo.chunk_bytes(),
            stride_bytes: geo.stride_rows() * geo.chunk_bytes(),
            hits: 0,
            rebuilds: Vec::new(),
            // Under lazy parity a plan depends on the deferred-parity list too (what is
            // deferred, which parities are stale), which the keys do not capture.
            enabled: cfg.plan_memo && cfg.parity != raidcore::ParityPolicy::Lazy,
        };
        let balance_reads = cfg.read_balance
            && geo
                .healthy()
                .stripes
                .iter()
                .any(|st| st.code == layout::Code::Mirror);
        Ok(Simulator {
            volume_bases: vec![None; 1024],
            volume_hist: match cfg.volumes {
                Some(v) => (0..v.count).map(|_| Default::default()).collect(),
                None => Vec::new(),
            },
            memo,
            balance_reads,
            waiters_spare: VecDeque::new(),
            released_spare: Vec::new(),
            blocked_spare: Vec::new(),
            released: Vec::new(),
            retrying: false,
            ido,
            lse,
            state,
            cfg,
            locks: StripeLocks::new(),
            disks,
            events: EventQueue::default(),
            seq: 0,
            now_ns: 0,
            plans: Slab::new(),
            requests: Slab::new(),
            lock_waiters: VecDeque::new(),
            waiting_cycles: FxHashMap::default(),
            held: None,
            arrival_at: None,
            workload_done: false,
            closed_loop: None,
            request_cap: 0,
            fg_plans_in_flight: 0,
            last_foreground_ns: None,
            rebuild: None,
            phase_hist: Default::default(),
            timeline: Timeline::new(),
            first_arrival_ns: None,
            last_completion_ns: 0,
            completed: 0,
            failed_requests: 0,
            unmappable: 0,
            serial: 0,
            plan_count: 0,
            replans: 0,
            event_count: 0,
            check,
            mem,
            capacity_bytes,
            lazy: lazy::LazyRun::new(cfg_idle),
            geo,
        })
    }

    /// The geometry being simulated.
    pub fn geometry(&self) -> &Geometry {
        &self.geo
    }

    /// The checker this run uses.
    pub fn check_mode(&self) -> CheckMode {
        self.check
    }

    fn schedule(&mut self, time_ns: u64, kind: Kind) {
        debug_assert!(time_ns >= self.now_ns, "scheduling into the past");
        self.seq += 1;
        self.events.push(Event {
            time_ns,
            seq: self.seq,
            kind,
        });
    }

    /// Schedules the held request's arrival at `time_ns` (see `arrival_at`).
    fn schedule_arrival(&mut self, time_ns: u64) {
        debug_assert!(time_ns >= self.now_ns, "scheduling into the past");
        debug_assert!(self.arrival_at.is_none(), "one arrival at a time");
        self.seq += 1;
        self.arrival_at = Some((time_ns, self.seq));
    }

    /// Runs the whole workload (and the failure and rebuild, if configured) to the end.
    pub fn run<W: Workload + ?Sized>(mut self, workload: &mut W) -> Result<Report, SimError> {
        self.closed_loop = workload.closed_loop_depth();
        self.request_cap = match self.closed_loop {
            Some(depth) => (depth as usize).clamp(1, self.cfg.max_requests_in_flight),
            None => self.cfg.max_requests_in_flight,
        };
        if let Some(f) = self.cfg.failure {
            self.schedule(f.at_ns, Kind::Fail);
        }
        self.pull(workload)?;
        loop {
            let ev = match (self.arrival_at, self.events.peek()) {
                (Some(a), Some(next)) if next < a => self.events.pop().expect("peeked"),
                (Some((time_ns, seq)), _) => {
                    self.arrival_at = None;
                    Event {
                        time_ns,
                        seq,
                        kind: Kind::Arrival,
                    }
                }
                (None, Some(_)) => self.events.pop().expect("peeked"),
                (None, None) => break,
            };
            debug_assert!(ev.time_ns >= self.now_ns, "time went backwards");
            self.now_ns = ev.time_ns;
            self.event_count += 1;
            match ev.kind {
                Kind::Arrival => {
                    let r = self.held.take().expect("an arrival holds a request");
                    self.admit(r);
                    self.pull(workload)?;
                }
                Kind::DiskDone { disk, epoch } => {
                    if self.disks[disk as usize].epoch == epoch {
                        self.disk_done(disk);
                    }
                }
                Kind::OpsDone { plan } => self.start_writes(plan),
                Kind::Fail => self.fail(),
                Kind::RebuildStart => {
                    if let Some(r) = self.rebuild.as_mut() {
                        r.active = true;
                        r.report.start_s = Some(self.now_ns as f64 / 1e9);
                    }
                    self.ido_rebuild_started();
                    self.kick_rebuild();
                }
                Kind::RebuildWake => {
                    if let Some(r) = self.rebuild.as_mut() {
                        r.wake_pending = false;
                    }
                    self.kick_rebuild();
                }
                Kind::FlushWake => self.flush_wake(),
                Kind::SurrogateIssue { op } => self.sur_issue(op),
                Kind::SurrogateDone { disk } => self.sur_disk_done(disk),
            }
            // A stalled arrival (in-flight limit) is re-armed when a request completes.
            if self.arrival_at.is_none()
                && self.held.is_some()
                && self.requests.len() < self.request_cap
            {
                let t = self.arrival_time(self.held.as_ref().expect("held"));
                self.schedule_arrival(t);
            }
        }
        assert_eq!(self.plans.len(), 0, "plans left when the events ran out");
        assert_eq!(
            self.requests.len(),
            0,
            "requests left when the events ran out"
        );
        assert!(
            self.lock_waiters.is_empty(),
            "plans still waiting for locks"
        );
        assert_eq!(self.locks.held(), 0, "locks held at the end");
        if let Some(m) = self.mem.as_ref() {
            assert_eq!(
                (m.writing, m.unsettled),
                (0, 0),
                "checker counts at the end"
            );
            assert!(m.unchecked.is_empty(), "cycles left unchecked at the end");
        }
        let skipped = workload.skipped();
        let merging = workload.merging();
        Ok(self.report(skipped, merging))
    }

    fn arrival_time(&self, r: &Request) -> u64 {
        if self.closed_loop.is_some() {
            self.now_ns
        } else {
            r.time_ns.max(self.now_ns)
        }
    }

    /// Fetches the next request into `held` and schedules its arrival if a slot is free.
    fn pull<W: Workload + ?Sized>(&mut self, w: &mut W) -> Result<(), SimError> {
        debug_assert!(self.held.is_none());
        if self.workload_done {
            return Ok(());
        }
        loop {
            let r = match w.next_request() {
                None => {
                    self.workload_done = true;
                    return Ok(());
                }
                Some(Err(e)) => return Err(SimError::Trace(e)),
                Some(Ok(r)) => r,
            };
            if self.cfg.stop_ns.is_some_and(|s| r.time_ns > s)
                || (self.closed_loop.is_some() && self.cfg.stop_ns.is_some_and(|s| self.now_ns > s))
            {
                self.workload_done = true;
                return Ok(());
            }
            let cap = self.capacity_bytes;
            if r.len_bytes == 0 || r.len_bytes > cap {
                self.unmappable += 1;
                continue;
            }
            if let Some(v) = self.cfg.volumes {
                // Fold onto the volume (modulo its size, sector aligned, moved down if it would
                // run past its end), then place it in the volume's extents; a request that
                // would cross an extent boundary is moved back into one extent.
                let size = v.volume_bytes(cap);
                let volume = r.volume % v.count;
                let len = r.len_bytes.min(v.extent_bytes);
                let mut off = r.offset_bytes % size / 512 * 512;
                if off % v.extent_bytes + len > v.extent_bytes {
                    off = (off / v.extent_bytes + 1) * v.extent_bytes - len;
                    off = off / 512 * 512;
                }
                let mapped = Request {
                    offset_bytes: v.array_offset(volume, off),
                    len_bytes: len,
                    volume,
                    ..r
                };
                self.held = Some(mapped);
                if self.requests.len() < self.request_cap {
                    let t = self.arrival_time(&mapped);
                    self.schedule_arrival(t);
                }
                return Ok(());
            }
            // Fold onto the array: volume base plus offset, modulo the capacity, sector
            // aligned, moved down if it would run past the end.
            let base = self.volume_base(r.volume);
            // (In u64 when the sum cannot overflow: u128 division is a slow library call.)
            let mut off = match r.offset_bytes.checked_add(base) {
                // (Most offsets of a trace replayed on a large enough array are on it already:
                // no division then.)
                Some(sum) if sum < cap => sum,
                Some(sum) => sum % cap,
                None => ((u128::from(r.offset_bytes) + u128::from(base)) % u128::from(cap)) as u64,
            };
            off = off / 512 * 512;
            if off + r.len_bytes > cap {
                off = (cap - r.len_bytes) / 512 * 512;
            }
            let mapped = Request {
                offset_bytes: off,
                ..r
            };
            self.held = Some(mapped);
            if self.requests.len() < self.request_cap {
                let t = self.arrival_time(&mapped);
                self.schedule_arrival(t);
            }
            return Ok(());
        }
    }

    fn current_phase(&self) -> Phase {
        match &self.rebuild {
            None => Phase::Normal,
            Some(r) => match (r.report.start_s, r.report.end_s) {
                (Some(_), Some(_)) => Phase::After,
                // A rebuild that could not run leaves the array degraded.
                (Some(_), None) if r.report.error.is_none() => Phase::Rebuilding,
                _ => Phase::Degraded,
            },
        }
    }

    fn admit(&mut self, r: Request) {
        let arrival_ns = if self.closed_loop.is_some() {
            self.now_ns
        } else {
            r.time_ns
        };
        self.first_arrival_ns.get_or_insert(arrival_ns);
        if self.ido_admit(&r, arrival_ns) {
            return;
        }
        self.last_foreground_ns = Some(self.now_ns);
        self.serial += 1;
        if let Some((key, cycle)) = self.memo_key(r.op, r.offset_bytes, r.len_bytes) {
            if let Some(e) = self.memo.map.get(&key) {
                // A memo hit: the run record is built straight in its slot from the memo's
                // entry (one copy of the flat form, from the cache line the look-up brought
                // in; no pointer to follow afterwards).
                let shift = (cycle as i64 - e.made_for as i64) * self.memo.stride_bytes as i64;
                let plan = if e.flat.is_none() || cfg!(debug_assertions) {
                    Some(e.plan.clone())
                } else {
                    None
                };
                let phase = self.current_phase();
                let rid = self.requests.insert(RequestRun {
                    arrival_ns,
                    op: r.op,
                    phase,
                    remaining: 1,
                    failed: false,
                    serial: self.serial,
                    touches_array: true,
                    volume: r.volume,
                });
                self.memo.hits += 1;
                let (id, slot) = self.plans.vacant();
                *slot = Some(PlanRun {
                    plan,
                    flat: None,
                    cycle,
                    shift,
                    owner: Owner::Request(rid),
                    user_base: r.offset_bytes,
                    stage: Stage::Waiting,
                    pending: 0,
                    errored: false,
                    bufs: None,
                    settles: false,
                    lazy: std::mem::take(&mut self.lazy.next),
                });
                // (Apart from the rest: so the flat form is copied once, from the table entry
                // into the slot, instead of into a temporary record first.)
                if let Some(run) = slot {
                    run.flat = e.flat;
                }
                self.foreground_started();
                self.count_plan(Owner::Request(rid));
                if cfg!(debug_assertions) {
                    self.memo_check(r.op, r.offset_bytes, r.len_bytes, id);
                }
                self.submitted(id, cycle, false);
                return;
            }
        }
        self.admit_planned(r, arrival_ns);
    }

    /// [`Simulator::admit`] of a request the memo does not hold: plan it (and memoise a single
    /// plan). Apart so that the memo hit, nearly every request, runs in a small function.
    #[inline(never)]
    fn admit_planned(&mut self, r: Request, arrival_ns: u64) {
        let planned = match r.op {
            Op::Read if self.balance_reads => {
                let loads: Vec<MemberLoad> = self
                    .disks
                    .iter()
                    .map(|d| MemberLoad {
                        queued: (d.queue.len() + d.riders.len() + usize::from(d.current.is_some()))
                            as u32,
                        head: d.head,
                    })
                    .collect();
                plan_read_balanced(&self.geo, &self.state, r.offset_bytes, r.len_bytes, &loads)
            }
            Op::Read => plan_read(&self.geo, &self.state, r.offset_bytes, r.len_bytes),
            Op::Write => self.plan_write_tagged(r.offset_bytes, r.len_bytes),
        };
        let plans = match planned {
            Ok(p) => p,
            Err(CoreError::DataLost { .. }) => {
                self.failed_requests += 1;
                return;
            }
            Err(e) => panic!("the simulator mapped a request the planner refuses: {e}"),
        };
        let id = self.requests.insert(RequestRun {
            arrival_ns,
            op: r.op,
            phase: self.current_phase(),
            remaining: plans.len() as u32,
            failed: false,
            serial: self.serial,
            touches_array: true,
            volume: r.volume,
        });
        self.foreground_started();
        let memoise = plans.len() == 1;
        let hold = self.lazy.hold_at.take();
        for p in plans {
            let plan = Rc::new(p);
            if memoise {
                self.memo_insert(r.op, r.offset_bytes, r.len_bytes, &plan);
            }
            self.lazy.next = self.lazy_tag_for(&plan);
            let cycle = plan.cycle;
            let owner = Owner::Request(id);
            let run = self.insert_run(Some(plan), None, cycle, 0, owner, r.offset_bytes, false);
            self.start_or_hold(run, cycle, hold, false);
        }
    }

    /// The memo key of a request, if it lies inside one cycle and may be memoised.
    fn memo_key(&self, op: Op, offset: u64, len: u64) -> Option<(MemoKey, u64)> {
        let m = &self.memo;
        if !m.enabled || (op == Op::Write && !m.writes) || (op == Op::Read && self.balance_reads) {
            return None;
        }
        let cycle = offset / m.cycle_data_bytes;
        let in_cycle = offset - cycle * m.cycle_data_bytes;
        if in_cycle + len > m.cycle_data_bytes {
            return None;
        }
        let key = MemoKey {
            write: op == Op::Write,
            in_cycle,
            len,
            layout_generation: self.state.cycle_generation(cycle),
        };
        Some((key, cycle))
    }

    /// Debug builds: the memo's plan that run `id` (a request served from the memo) executes,
    /// translated to its cycle, is the planner's own plan for the request.
    fn memo_check(&self, op: Op, offset: u64, len: u64, id: u32) {
        let run = self.plans.get(id);
        let fresh = match op {
            Op::Read => plan_read(&self.geo, &self.state, offset, len),
            Op::Write => plan_write(&self.geo, &self.state, offset, len, &self.cfg.write_policy),
        }
        .expect("a memoised plan was planned before");
        assert_eq!(fresh.len(), 1);
        assert_eq!(
            translated(run.plan(), run.cycle, run.shift),
            fresh[0],
            "a memoised plan differs from the planner's"
        );
    }

    fn memo_insert(&mut self, op: Op, offset: u64, len: u64, plan: &Rc<Plan>) {
        let Some((key, cycle)) = self.memo_key(op, offset, len) else {
            return;
        };
        debug_assert_eq!(plan.cycle, cycle);
        if self.memo.map.len() >= MEMO_MAX {
            self.memo.map.clear();
        }
        self.memo.map.insert(
            key,
            MemoEntry {
                flat: Flat::of(plan),
                made_for: cycle,
                plan: plan.clone(),
            },
        );
    }

    /// Takes run `id`'s stripe locks, in its plan's mode (shared for a read); false if some
    /// are held by a plan it cannot run beside. (A plan locks stripes of its own cycle only,
    /// so one per-cycle call takes them all, translated or not.)
    fn lock_run(&mut self, id: u32) -> bool {
        let run = self.plans.get(id);
        let mode = run.lock_mode();
        match &run.flat {
            Some(f) if f.locks_in_bits => {
                self.locks
                    .try_lock_bits_as(mode, run.cycle, f.lock_bits, usize::from(f.locks_len))
            }
            Some(f) => self.locks.try_lock_in_as(
                mode,
                run.cycle,
                f.locks[..usize::from(f.locks_len)]
                    .iter()
                    .map(|&s| s as usize),
            ),
            None => {
                let locks = &run.plan().locks;
                debug_assert!(locks.iter().all(|l| l.cycle == run.plan().cycle));
                self.locks
                    .try_lock_in_as(mode, run.cycle, locks.iter().map(|l| l.stripe))
            }
        }
    }

    /// Releases plan `id`'s stripe locks.
    fn unlock_run(&mut self, id: u32) {
        let run = self.plans.get(id);
        // Only waiters care (during a retry pass they are out of `lock_waiters`).
        if (self.retrying || !self.lock_waiters.is_empty()) && !self.released.contains(&run.cycle) {
            self.released.push(run.cycle);
        }
        let mode = run.lock_mode();
        match &run.flat {
            Some(f) if f.locks_in_bits => {
                self.locks
                    .unlock_bits_as(mode, run.cycle, f.lock_bits, usize::from(f.locks_len))
            }
            Some(f) => self.locks.unlock_in_as(
                mode,
                run.cycle,
                f.locks[..usize::from(f.locks_len)]
                    .iter()
                    .map(|&s| s as usize),
            ),
            None => {
                self.locks
                    .unlock_in_as(mode, run.cycle, run.plan().locks.iter().map(|l| l.stripe))
            }
        }
    }

    /// `ArrayState::plan_is_current` for a possibly translated plan.
    fn run_is_current(&self, run: &PlanRun) -> bool {
        if let Some(f) = &run.flat {
            return f.state_generation == self.state.generation()
                && self.state.cycle_generation(run.cycle) == f.layout_generation;
        }
        if run.shift == 0 {
            return self.state.plan_is_current(run.plan());
        }
        run.plan().state_generation == self.state.generation()
            && self.state.cycle_generation(run.cycle) == run.plan().layout_generation
    }

    /// A new plan: check it, then start it or queue it for its locks. A `replanned` plan
    /// replaces one that was already running: it goes ahead of the plans waiting for locks.
    fn submit(&mut self, plan: Plan, owner: Owner, user_base: u64, replanned: bool, settles: bool) {
        let cycle = plan.cycle;
        let id = self.insert_run(
            Some(Rc::new(plan)),
            None,
            cycle,
            0,
            owner,
            user_base,
            settles,
        );
        self.submitted(id, cycle, replanned);
    }

    /// A new run in its slot, not started (a plan that may be translated from another cycle
    /// by `shift`): [`Simulator::submitted`] starts it or queues it for its locks.
    #[allow(clippy::too_many_arguments)]
    fn insert_run(
        &mut self,
        plan: Option<Rc<Plan>>,
        flat: Option<Flat>,
        cycle: u64,
        shift: i64,
        owner: Owner,
        user_base: u64,
        settles: bool,
    ) -> u32 {
        self.count_plan(owner);
        self.plans.insert(PlanRun {
            plan,
            flat,
            cycle,
            shift,
            owner,
            user_base,
            stage: Stage::Waiting,
            pending: 0,
            errored: false,
            bufs: None,
            settles,
            lazy: std::mem::take(&mut self.lazy.next),
        })
    }

    /// Counts a plan submitted for `owner`.
    fn count_plan(&mut self, owner: Owner) {
        if let Owner::Request(_) = owner {
            self.fg_plans_in_flight += 1;
        }
        self.plan_count += 1;
    }

    /// The rest of [`Simulator::insert_run`] once run `id` is in its slot: check it, then
    /// start it or queue it for its locks.
    fn submitted(&mut self, id: u32, cycle: u64, replanned: bool) {
        if self.check == CheckMode::Validate {
            self.plans.get(id).plan().validate();
        }
        if !self.state.failed().is_empty() {
            self.plans.get(id).assert_avoids(self.state.failed());
        }
        let queue_behind = !replanned
            && !self.lock_waiters.is_empty()
            && self.waiting_cycles.get(&cycle).is_some_and(|&n| n > 0);
        if queue_behind || !self.try_start(id) {
            self.wait_for_locks(id, cycle, replanned);
        }
    }

    fn wait_for_locks(&mut self, id: u32, cycle: u64, front: bool) {
        *self.waiting_cycles.entry(cycle).or_insert(0) += 1;
        if front {
            self.lock_waiters.push_front((id, cycle));
        } else {
            self.lock_waiters.push_back((id, cycle));
        }
    }

    /// Takes the plan's locks and starts its reads; false if the locks are busy.
    fn try_start(&mut self, id: u32) -> bool {
        if !self.lock_run(id) {
            return false;
        }
        if !self.run_is_current(self.plans.get(id)) {
            self.unlock_run(id);
            self.replan(id);
            return true;
        }
        self.start_reads(id);
        true
    }

    /// Retries waiting plans in order; a plan never overtakes an older waiting plan of its
    /// cycle.
    ///
    /// Only waiters of a cycle some plan released stripes of since the last pass are tried: a
    /// waiter waits for stripes of its own cycle held by another plan, and only an unlock can
    /// free them, so trying the others would fail as before (and cost a lock look-up each,
    /// thousands per completion while a rebuild holds whole cycles).
    #[inline]
    fn retry_waiters(&mut self) {
        // (Inline: nearly always nothing waits.)
        if self.lock_waiters.is_empty() {
            if !self.retrying {
                self.released.clear();
            }
            return;
        }
        self.retry_waiting_plans();
    }

    /// [`Simulator::retry_waiters`] with waiters.
    #[inline(never)]
    fn retry_waiting_plans(&mut self) {
        // A pass started from within a pass (a plan it started failed at once) tries every
        // waiter, as all passes once did; it leaves `released` to the outer pass.
        let nested = self.retrying;
        if !nested && self.released.is_empty() {
            return;
        }
        // No waiter of a released cycle: every waiter would be skipped and stay in its place,
        // so the pass would change nothing (debug builds check that it is a no-op).
        if !nested
            && !self
                .released
                .iter()
                .any(|c| self.waiting_cycles.contains_key(c))
        {
            if cfg!(debug_assertions) {
                for &(id, cycle) in &self.lock_waiters {
                    assert_eq!(cycle, self.plans.get(id).cycle);
                    let mut stripes = Vec::new();
                    self.plans.get(id).stripes_into(&mut stripes);
                    let mode = self.plans.get(id).lock_mode();
                    assert!(
                        stripes.iter().any(|&l| self.locks.conflicts(mode, l))
                            || self
                                .lock_waiters
                                .iter()
                                .any(|&(o, c)| o != id && c == cycle),
                        "a waiter of a cycle without released stripes could start"
                    );
                }
            }
            self.released.clear();
            return;
        }
        self.retrying = true;
        let mut released = std::mem::take(&mut self.released_spare);
        if !nested {
            std::mem::swap(&mut released, &mut self.released);
        }
        let mut blocked = std::mem::take(&mut self.blocked_spare);
        blocked.clear();
        let mut skipped: Vec<u64> = Vec::new();
        let mut waiting = std::mem::take(&mut self.waiters_spare);
        std::mem::swap(&mut waiting, &mut self.lock_waiters);
        for (id, cycle) in waiting.drain(..) {
            debug_assert_eq!(cycle, self.plans.get(id).cycle);
            let freed = nested || released.contains(&cycle) || self.released.contains(&cycle);
            if !freed || blocked.contains(&cycle) {
                // Skipped: its stripes are held, or an older waiter of its cycle waits.
                if cfg!(debug_assertions) && !freed {
                    let mut stripes = Vec::new();
                    self.plans.get(id).stripes_into(&mut stripes);
                    let mode = self.plans.get(id).lock_mode();
                    let held = stripes.iter().any(|&l| self.locks.conflicts(mode, l));
                    assert!(
                        held || skipped.contains(&cycle),
                        "a waiter skipped as still blocked could have started"
                    );
                    skipped.push(cycle);
                }
                self.lock_waiters.push_back((id, cycle));
                continue;
            }
            let n = self
                .waiting_cycles
                .get_mut(&cycle)
                .expect("a waiting plan's cycle is counted");
            *n -= 1;
            if *n == 0 {
                self.waiting_cycles.remove(&cycle);
            }
            if !self.try_start(id) {
                blocked.push(cycle);
                *self.waiting_cycles.entry(cycle).or_insert(0) += 1;
                self.lock_waiters.push_back((id, cycle));
            }
        }
        self.retrying = nested;
        released.clear();
        self.released_spare = released;
        self.blocked_spare = blocked;
        self.waiters_spare = waiting;
    }

    fn start_reads(&mut self, id: u32) {
        self.plans.get_mut(id).stage = Stage::Reading;
        if self.mem.is_some() {
            self.mem_start(id);
        }
        if self.issue(id, false) {
            self.reads_done(id);
        }
    }

    fn reads_done(&mut self, id: u32) {
        if self.lse.is_some() && self.lse_reads_done(id) {
            return;
        }
        let run = self.plans.get_mut(id);
        if run.errored {
            self.abandon(id);
            return;
        }
        let read_ahead = self.cfg.rebuild_read_ahead && run.owner == Owner::Rebuild;
        if read_ahead {
            let cycle = run.cycle;
            let r = self.rebuild.as_mut().expect("a rebuild plan has a rebuild");
            r.sched.reads_done(cycle);
        }
        self.reads_done_next(id);
        if read_ahead {
            // The next cycles read beside these writes (issued first).
            self.kick_rebuild();
        }
    }

    /// [`Simulator::reads_done`]'s move of the plan on: its ops, then its writes.
    fn reads_done_next(&mut self, id: u32) {
        let run = self.plans.get_mut(id);
        if self.cfg.ops_ns > 0 && run.has_ops() {
            run.stage = Stage::Ops;
            let t = self.now_ns + self.cfg.ops_ns;
            self.schedule(t, Kind::OpsDone { plan: id });
        } else if run.io_count(true) == 0 && self.mem.is_none() {
            // Nothing to write (a read): what `start_writes` would come to.
            run.stage = Stage::Writing;
            self.plan_done(id);
        } else {
            self.start_writes(id);
        }
    }

    fn start_writes(&mut self, id: u32) {
        let run = self.plans.get_mut(id);
        run.stage = Stage::Writing;
        if let Some(m) = self.mem.as_mut() {
            m.writing += 1;
        }
        if let Some(bufs) = run.bufs.as_mut() {
            let plan = run
                .plan
                .as_deref()
                .expect("debug builds keep the full plan");
            raidcore::mem::run_ops(&plan.ops, bufs)
                .unwrap_or_else(|e| panic!("ops failed in memory: {e}\n{plan}"));
        }
        if self.issue(id, true) {
            if self.plans.get(id).errored {
                self.abandon(id);
            } else {
                self.plan_done(id);
            }
        }
    }

    /// Queues the plan's reads (or writes) on their disks. An I/O to a member that has failed
    /// since the plan was made fails at once. Returns true when nothing is left in flight
    /// (no I/O, or all of it failed): the caller then moves the plan on.
    fn issue(&mut self, id: u32, write: bool) -> bool {
        let run = self.plans.get(id);
        let rebuild = run.owner == Owner::Rebuild;
        let n = run.io_count(write);
        let mut queued = 0u32;
        let mut refused = false;
        for i in 0..n {
            let (member, offset_bytes, len_bytes) = self.plans.get(id).member_io(write, i);
            if self.disks[member as usize].failed {
                refused = true;
                continue;
            }
            self.queue_io(
                member,
                id,
                i as u32,
                offset_bytes,
                len_bytes,
                write,
                rebuild,
            );
            queued += 1;
        }
        let run = self.plans.get_mut(id);
        run.pending = queued;
        run.errored |= refused;
        queued == 0
    }

    /// Queues one disk I/O of plan `plan` (or [`lazy::RECORD_IO`]) on `member`, which has not
    /// failed, and starts it if the disk is idle.
    #[allow(clippy::too_many_arguments)]
    fn queue_io(
        &mut self,
        member: Disk,
        plan: u32,
        index: u32,
        offset_bytes: u64,
        len_bytes: u64,
        write: bool,
        rebuild: bool,
    ) {
        let now = self.now_ns;
        let slot = &mut self.disks[member as usize];
        debug_assert!(!slot.failed);
        slot.head = offset_bytes + len_bytes;
        let io = QueuedIo {
            plan,
            index,
            offset_bytes,
            len_bytes,
            write,
            rebuild,
            enqueued_ns: now,
        };
        if slot.current.is_none() && slot.queue.is_empty() {
            // An idle disk with nothing queued: every scheduler picks this I/O, so it
            // starts without passing through the queue.
            self.start_io(member, io);
        } else {
            slot.queue.push_back(io);
            if slot.current.is_none() {
                self.dispatch(member);
            }
        }
    }

    /// Starts the next queued I/O on an idle disk.
    fn dispatch(&mut self, member: Disk) {
        let now = self.now_ns;
        let slot = &mut self.disks[member as usize];
        debug_assert!(slot.current.is_none() && !slot.failed);
        let pick = match self.cfg.scheduler {
            Scheduler::Fifo => {
                if let Some(io) = slot.queue.pop_front() {
                    self.start_io(member, io);
                }
                return;
            }
            Scheduler::Sptf { window, age_max_ns } => {
                let oldest = slot.queue.front().map(|q| q.enqueued_ns);
                match oldest {
                    None => return,
                    Some(t) if now.saturating_sub(t) >= age_max_ns => 0,
                    Some(_) => {
                        let mut best = (u64::MAX, 0usize);
                        for (i, q) in slot.queue.iter().take(window).enumerate() {
                            let s = slot.model.estimate(now, disk_io(q));
                            if s.completion_ns < best.0 {
                                best = (s.completion_ns, i);
                            }
                        }
                        best.1
                    }
                }
            }
        };
        if let Some(io) = slot.queue.remove(pick) {
            self.start_io(member, io);
        }
    }

    /// Starts `io` on idle disk `member` and schedules its completion.
    fn start_io(&mut self, member: Disk, io: QueuedIo) {
        let now = self.now_ns;
        let max = self.cfg.merge_max_bytes;
        let slot = &mut self.disks[member as usize];
        debug_assert!(slot.current.is_none() && slot.riders.is_empty() && !slot.failed);
        let mut request = disk_io(&io);
        while let Some(next) = slot.queue.front() {
            if next.write != io.write
                || next.offset_bytes != request.end_bytes()
                || request.len_bytes + next.len_bytes > max
            {
                break;
            }
            request.len_bytes += next.len_bytes;
            let next = slot.queue.pop_front().expect("the front just looked at");
            slot.riders.push(next);
        }
        let s = slot.model.submit(now, request);
        // A disk starts a command at once unless its own resources are still busy: an HDD is
        // idle when it has no command, but an SSD's channel stays occupied after it completes
        // a command (its program time outlasts the acknowledgement), so the next command may
        // start later (found with an all-X25-E RAID5 under random writes).
        debug_assert!(
            s.start_ns >= now,
            "a disk starts a command no earlier than it is submitted"
        );
        slot.current = Some((io, s.start_ns));
        let epoch = slot.epoch;
        self.schedule(
            s.completion_ns,
            Kind::DiskDone {
                disk: member,
                epoch,
            },
        );
    }

    fn disk_done(&mut self, member: Disk) {
        let now = self.now_ns;
        let slot = &mut self.disks[member as usize];
        let (io, start) = slot
            .current
            .take()
            .expect("a completion has an I/O in service");
        slot.busy_ns += now - start;
        let riders = std::mem::take(&mut slot.riders);
        // Per unit, merged or not (what the engine's status counts too).
        for io in std::iter::once(&io).chain(&riders) {
            let st = &mut slot.stats;
            if io.plan == lazy::RECORD_IO {
                st.meta_writes += 1;
            } else if io.write {
                st.writes += 1;
                st.write_bytes += io.len_bytes;
                st.rebuild_writes += u64::from(io.rebuild);
            } else {
                st.reads += 1;
                st.read_bytes += io.len_bytes;
                st.rebuild_reads += u64::from(io.rebuild);
            }
        }
        if !slot.queue.is_empty() {
            self.dispatch(member);
        }
        for io in std::iter::once(io).chain(riders) {
            if io.plan == lazy::RECORD_IO {
                self.record_io_done();
                continue;
            }
            if self.mem.is_some() {
                self.mem_io(member, &io);
            }
            if !io.write && self.lse.is_some() {
                self.lse_read_done(io.plan, member, io.offset_bytes, io.len_bytes);
            }
            self.io_finished(io.plan, false);
        }
    }

    /// One I/O of plan `id` finished (or failed).
    #[inline]
    fn io_finished(&mut self, id: u32, error: bool) {
        let run = self.plans.get_mut(id);
        run.errored |= error;
        run.pending -= 1;
        if run.pending > 0 {
            return;
        }
        match run.stage {
            Stage::Reading => self.reads_done(id),
            Stage::Writing => {
                if run.errored {
                    self.abandon(id);
                } else {
                    self.plan_done(id);
                }
            }
            s => unreachable!("I/O completion in stage {s:?}"),
        }
    }

    /// Releases a plan hit by a failure (or stale) and plans its work again.
    fn abandon(&mut self, id: u32) {
        self.unlock_run(id);
        let run = self.plans.get(id);
        if let Some(m) = self.mem.as_mut() {
            if run.stage == Stage::Writing {
                // Some of its writes may have landed: its stripes are unsettled until the
                // replacement plan completes.
                m.writing -= 1;
                if !run.settles {
                    m.unsettled += 1;
                }
                self.plans.get_mut(id).settles = true;
            }
        }
        self.replan(id);
        self.retry_waiters();
    }

    /// Removes plan `id` (locks already released or never taken) and re-plans what it did.
    fn replan(&mut self, id: u32) {
        self.replans += 1;
        let run = self.plans.remove(id);
        self.lazy_plan_ended(&run, false);
        match run.owner {
            Owner::Flush => {}
            Owner::Repair(r) => {
                // Abandoned (a member failed): the original work meets the range again.
                self.lse
                    .as_mut()
                    .expect("a repair runs with LSE on")
                    .drop_repair(r);
            }
            Owner::Reclaim => {
                let (user_offset, len) = run.user_range();
                self.reclaim_replan(run.user_base + user_offset, len);
            }
            Owner::Rebuild => {
                let r = self.rebuild.as_mut().expect("a rebuild plan has a rebuild");
                r.sched.abort_cycle(run.cycle);
                self.kick_rebuild();
            }
            Owner::Request(rid) => {
                self.fg_plans_in_flight -= 1;
                let req = self.requests.get(rid);
                let (user_offset, len) = run.user_range();
                let offset = run.user_base + user_offset;
                // Under the parity policy, as the engine plans a write again (a lazy plan
                // goes stale when a flush drops an entry from the list while it waits).
                let planned = match req.op {
                    Op::Read => plan_read(&self.geo, &self.state, offset, len),
                    Op::Write => self.plan_write_tagged(offset, len),
                };
                match planned {
                    Ok(plans) => {
                        let req = self.requests.get_mut(rid);
                        req.remaining = req.remaining - 1 + plans.len() as u32;
                        // The range lies in one cycle, so it is one plan, which settles what
                        // the abandoned plan left half written.
                        debug_assert!(plans.len() == 1 && plans[0].cycle == run.cycle);
                        let hold = self.lazy.hold_at.take();
                        let mut settles = run.settles;
                        for p in plans {
                            self.lazy.next = self.lazy_tag_for(&p);
                            let cycle = p.cycle;
                            let owner = Owner::Request(rid);
                            let id = self.insert_run(
                                Some(Rc::new(p)),
                                None,
                                cycle,
                                0,
                                owner,
                                offset,
                                settles,
                            );
                            self.start_or_hold(id, cycle, hold, true);
                            settles = false;
                        }
                    }
                    Err(CoreError::DataLost { .. }) => {
                        if run.settles {
                            self.settled();
                        }
                        self.requests.get_mut(rid).failed = true;
                        self.request_part_done(rid);
                    }
                    Err(e) => panic!("re-planning a request failed: {e}"),
                }
            }
        }
    }

    fn plan_done(&mut self, id: u32) {
        self.unlock_run(id);
        // A request's plan with nothing else to account for (no lazy-parity tag, no checker,
        // no latent sector errors): the general path below does just this, after moving the
        // whole run out of its slot.
        let run = self.plans.get(id);
        if let (Owner::Request(rid), lazy::PlanLazy::None, None, None) =
            (run.owner, &run.lazy, &self.mem, &self.lse)
        {
            self.plans.free(id);
            self.fg_plans_in_flight -= 1;
            self.request_part_done(rid);
            self.retry_waiters();
            return;
        }
        let run = self.plans.remove(id);
        self.lazy_plan_ended(&run, true);
        if let Some(m) = self.mem.as_mut() {
            m.writing -= 1;
            if run.settles {
                m.unsettled -= 1;
            }
            if !run.plan().writes.is_empty() {
                m.unchecked.insert(run.cycle);
            }
            self.mem_check(&run);
        }
        match run.owner {
            Owner::Flush => {}
            Owner::Repair(r) => self.lse_repair_done(r),
            Owner::Reclaim => self.reclaim_plan_done(),
            Owner::Request(rid) => {
                self.fg_plans_in_flight -= 1;
                if self.lse.is_some() && self.requests.get(rid).op == Op::Read {
                    let (user_offset, len) = run.user_range();
                    if self.lse_read_lost(run.user_base + user_offset, len) {
                        let req = self.requests.get_mut(rid);
                        if !req.failed {
                            req.failed = true;
                            self.lse.as_mut().expect("checked").report.failed_reads += 1;
                        }
                    }
                }
                self.request_part_done(rid);
            }
            Owner::Rebuild => {
                let r = self.rebuild.as_mut().expect("a rebuild plan has a rebuild");
                let plan = run.plan();
                let PlanKind::Rebuild { to, .. } = plan.kind else {
                    unreachable!("a rebuild owner runs a rebuild plan");
                };
                let write_bytes = plan.io_counts().write_bytes;
                r.sched
                    .complete_cycle(&mut self.state, run.cycle, to, write_bytes);
                r.report.plans += 1;
                r.report.bytes_written += write_bytes;
                self.ido_cycle_rebuilt(run.cycle);
                self.kick_rebuild();
            }
        }
        self.check_settled_cycles();
        self.retry_waiters();
    }

    /// Debug checker: a plan abandoned half-written has no replacement (data lost).
    fn settled(&mut self) {
        if let Some(m) = self.mem.as_mut() {
            m.unsettled -= 1;
        }
    }

    /// Debug checker: when no stripe is half written, every cycle written since the last
    /// check must be parity-consistent.
    fn check_settled_cycles(&mut self) {
        let Some(m) = self.mem.as_mut() else {
            return;
        };
        if m.writing > 0 || m.unsettled > 0 {
            return;
        }
        for c in std::mem::take(&mut m.unchecked) {
            if let Err(e) = check_consistency(&self.geo, &self.state, &m.mem.members, c) {
                panic!("cycle {c} is inconsistent after its writes completed: {e}");
            }
        }
    }

    fn request_part_done(&mut self, rid: u32) {
        let req = self.requests.get_mut(rid);
        req.remaining -= 1;
        if req.remaining > 0 {
            return;
        }
        let req = self.requests.remove(rid);
        if req.touches_array {
            self.last_foreground_ns = Some(self.now_ns);
        }
        self.foreground_ended();
        if req.failed {
            self.failed_requests += 1;
            return;
        }
        self.completed += 1;
        self.last_completion_ns = self.now_ns;
        let phase_index = req.phase as usize;
        debug_assert_eq!(Phase::ALL[phase_index], req.phase);
        self.phase_hist[phase_index].record(self.now_ns - req.arrival_ns);
        self.timeline
            .record(req.arrival_ns, self.now_ns - req.arrival_ns);
        if let Some(h) = self.volume_hist.get_mut(req.volume as usize) {
            h[phase_index].record(self.now_ns - req.arrival_ns);
        }
    }

    /// Debug checker, start of a plan: its buffers, buffer 0 holding the write's data.
    fn mem_start(&mut self, id: u32) {
        let run = self.plans.get(id);
        let plan = run.plan();
        let mut bufs: Vec<Vec<u8>> = plan.buffers.iter().map(|&n| vec![POISON; n]).collect();
        if let Owner::Request(rid) = run.owner {
            let req = self.requests.get(rid);
            let at = run.user_base + plan.user_offset;
            bufs[0] = match req.op {
                Op::Write => (0..plan.buffers[0] as u64)
                    .map(|i| pattern_byte(req.serial, at + i))
                    .collect(),
                Op::Read => vec![0; plan.buffers[0]],
            };
        }
        self.plans.get_mut(id).bufs = Some(bufs);
    }

    /// Debug checker: the data of one member I/O moves when the I/O completes, as on a real
    /// member (a plan's reads may span a failure; its writes land one by one).
    fn mem_io(&mut self, member: Disk, io: &QueuedIo) {
        let m = self.mem.as_mut().expect("checked by caller");
        let run = self.plans.get_mut(io.plan);
        let what = if io.write { "write" } else { "read" };
        let mut mi = if io.write {
            run.plan().writes[io.index as usize]
        } else {
            run.plan().reads[io.index as usize]
        };
        mi.offset_bytes = mi.offset_bytes.wrapping_add_signed(run.shift);
        debug_assert_eq!(mi.offset_bytes, io.offset_bytes);
        let bufs = run.bufs.as_mut().expect("buffers of a started plan");
        debug_assert_eq!(mi.member, member);
        let dev = m.mem.members[member as usize]
            .as_mut()
            .unwrap_or_else(|| panic!("{what} completed on missing member {member}"));
        let range = mi.offset_bytes as usize..mi.offset_bytes as usize + mi.data.len;
        let slice = mi.data.off..mi.data.end();
        if io.write {
            dev[range].copy_from_slice(&bufs[mi.data.buf][slice]);
        } else {
            bufs[mi.data.buf][slice].copy_from_slice(&dev[range]);
        }
    }

    /// Debug checker, end of a plan: a read returned what the volume holds; a write updates
    /// the reference and leaves its cycle's stripes consistent.
    fn mem_check(&mut self, run: &PlanRun) {
        let m = self.mem.as_mut().expect("checked by caller");
        let plan = run.plan();
        let bufs = run.bufs.as_ref().expect("buffers of a completed plan");
        let Owner::Request(rid) = run.owner else {
            // Rebuilds are checked once their cycle is marked rebuilt.
            return;
        };
        let req = self.requests.get(rid);
        let at = (run.user_base + plan.user_offset) as usize;
        let len = plan.buffers[0];
        let lost = self
            .lse
            .as_ref()
            .is_some_and(|l| l.overlaps_lost(at as u64, len as u64));
        match req.op {
            Op::Read if lost => {}
            Op::Read => {
                if bufs[0][..] != m.reference[at..at + len] {
                    let first = (0..len)
                        .find(|&i| bufs[0][i] != m.reference[at + i])
                        .expect("a difference");
                    panic!(
                        "read of {len} bytes at array byte {at} returned wrong data from byte {first} on\n{plan}"
                    );
                }
            }
            Op::Write => {
                m.reference[at..at + len].copy_from_slice(&bufs[0]);
            }
        }
    }

    /// The member fails: its I/Os fail, their plans will be re-planned, the rebuild is armed.
    fn fail(&mut self) {
        let f = self.cfg.failure.expect("a failure event has a failure");
        let outcome = self
            .state
            .fail(&self.geo, f.member)
            .expect("the member was checked at setup and fails once");
        self.memo.clear();
        if let Some(m) = self.mem.as_mut() {
            m.mem.remove(f.member);
        }
        let mut report = RebuildReport {
            failed: f.member,
            fail_at_s: self.now_ns as f64 / 1e9,
            start_s: None,
            end_s: None,
            time_s: None,
            replaced: None,
            bytes_written: 0,
            plans: 0,
            error: None,
        };
        if outcome.data_lost {
            report.error = Some("data lost: more failures than the layout tolerates".into());
        }
        self.rebuild = Some(RebuildRun {
            sched: RebuildScheduler::new(self.cfg.rebuild_order, self.cfg.speed),
            active: false,
            wake_pending: false,
            report,
            cycle_bytes: None,
        });
        let now = self.now_ns;
        let slot = &mut self.disks[f.member as usize];
        slot.failed = true;
        slot.epoch += 1;
        let mut dead: Vec<u32> = slot.queue.drain(..).map(|q| q.plan).collect();
        if let Some((io, start)) = slot.current.take() {
            slot.busy_ns += now - start;
            dead.push(io.plan);
            dead.extend(slot.riders.drain(..).map(|q| q.plan));
        }
        for id in dead {
            if id == lazy::RECORD_IO {
                // (The engine would fail the member and write the list to the next one; the
                // simulated member has failed already.)
                self.record_io_done();
            } else {
                self.io_finished(id, true);
            }
        }
        if let Some(delay) = self.cfg.rebuild_delay_ns {
            self.schedule(now + delay, Kind::RebuildStart);
        }
        // Deferred parity first: then a second failure would be survived again.
        self.maybe_flush();
    }

    /// Hands out rebuild plans while the throttle and the scheduler allow.
    fn kick_rebuild(&mut self) {
        loop {
            let now = self.now_ns;
            let fg_busy = self.fg_plans_in_flight > 0
                || self
                    .last_foreground_ns
                    .is_some_and(|t| now.saturating_sub(t) < self.cfg.foreground_idle_ns);
            if self.rebuild.as_ref().is_some_and(|r| r.active) {
                self.ido_prioritize();
            }
            let Some(r) = self.rebuild.as_mut() else {
                return;
            };
            if !r.active {
                return;
            }
            if r.sched.is_finished(&self.state) {
                r.active = false;
                r.report.end_s = Some(now as f64 / 1e9);
                r.report.time_s = r.report.start_s.map(|s| now as f64 / 1e9 - s);
                self.ido_rebuild_finished();
                return;
            }
            if self.cfg.rebuild_windows > 1 {
                if let RebuildOrder::Parallel { max_in_flight } = self.cfg.rebuild_order {
                    if r.cycle_bytes.is_none() {
                        let (geo, state) = (&self.geo, &self.state);
                        r.cycle_bytes = (0..geo.cycles())
                            .find(|&c| !state.is_clean(c))
                            .and_then(|c| {
                                raidcore::plan_rebuild_cycle(geo, state, c).ok().flatten()
                            })
                            .map(|p| {
                                let n = p.io_counts();
                                (n.read_bytes + n.write_bytes).max(1)
                            });
                    }
                    let total = raidcore::rebuild::cycles_in_flight(
                        raidcore::rebuild::windows_in_flight(self.cfg.rebuild_windows, fg_busy),
                        max_in_flight,
                        self.cfg.rebuild_window_bytes,
                        r.cycle_bytes.unwrap_or(0),
                    );
                    r.sched.set_max_in_flight(if self.cfg.rebuild_read_ahead {
                        (total / 2).max(1)
                    } else {
                        total
                    });
                }
            }
            let delay = r.sched.delay_ns(now, fg_busy);
            if delay > 0 {
                if !r.wake_pending {
                    r.wake_pending = true;
                    // Look again later: the load may have gone.
                    let t = now + delay.min(self.cfg.throttle_recheck_ns);
                    self.schedule(t, Kind::RebuildWake);
                }
                return;
            }
            let (geo, state, memo) = (&self.geo, &self.state, &mut self.memo);
            match r
                .sched
                .next_plans_with(geo, state, |c| memo.rebuild_plan(geo, state, c))
            {
                Ok(plans) => {
                    for (plan, cycle, shift) in plans {
                        let id = self.insert_run(
                            Some(plan),
                            None,
                            cycle,
                            shift,
                            Owner::Rebuild,
                            0,
                            false,
                        );
                        self.submitted(id, cycle, false);
                    }
                    return;
                }
                Err(CoreError::NeedsReplacement { member }) => {
                    self.replace(member);
                }
                Err(e) => {
                    r.active = false;
                    r.report.error = Some(e.to_string());
                    return;
                }
            }
        }
    }

    /// A hot replacement: a blank device of the same model takes the failed member's slot.
    fn replace(&mut self, member: Disk) {
        self.state
            .replace(&self.geo, member)
            .expect("replacing the member the planner asked for");
        self.memo.clear();
        let slot = &mut self.disks[member as usize];
        slot.epoch += 1;
        let fresh = drive_of(&self.cfg, member)
            .build(disk_seed(self.cfg.seed, 0, 0))
            .expect("the drive was built before");
        slot.model =
            new_drive(&self.cfg, &fresh, member, slot.epoch).expect("the drive was built before");
        slot.failed = false;
        debug_assert!(slot.queue.is_empty() && slot.current.is_none());
        if let Some(m) = self.mem.as_mut() {
            m.mem.insert(member, m.member_bytes, 0x5A);
        }
        if let Some(r) = self.rebuild.as_mut() {
            r.report.replaced = Some(member);
        }
    }

    fn report(mut self, skipped: u64, (merged, split): (u64, u64)) -> Report {
        let end_ns = self.now_ns;
        self.timeline.extend_to(end_ns);
        let span_ns = self
            .first_arrival_ns
            .map(|a| self.last_completion_ns.saturating_sub(a))
            .unwrap_or(0);
        let throughput_iops = if span_ns > 0 {
            self.completed as f64 / (span_ns as f64 / 1e9)
        } else {
            0.0
        };
        let per_disk: Vec<DiskStats> = self
            .disks
            .iter()
            .map(|d| DiskStats {
                busy_s: d.busy_ns as f64 / 1e9,
                ..d.stats.clone()
            })
            .collect();
        let present: Vec<f64> = self
            .disks
            .iter()
            .filter(|d| !d.failed)
            .map(|d| d.busy_ns as f64)
            .collect();
        let member_ios = per_disk.iter().map(|d| d.reads + d.writes).sum();
        Report {
            scheme: self.geo.scheme().describe(),
            disks: self.geo.disks(),
            drive: {
                let mut name = self.cfg.drive.name().to_string();
                for (d, p) in &self.cfg.drive_overrides {
                    name.push_str(&format!(", member {d}: {}", p.name()));
                }
                name
            },
            chunk_bytes: self.geo.chunk_bytes(),
            member_bytes: self.geo.member_bytes_used(),
            capacity_bytes: self.capacity_bytes,
            sim_time_s: end_ns as f64 / 1e9,
            requests: self.completed,
            requests_failed: self.failed_requests,
            requests_skipped: self.unmappable + skipped,
            requests_merged: merged,
            requests_split: split,
            throughput_iops,
            phases: Phase::ALL
                .iter()
                .zip(&self.phase_hist)
                .map(|(&p, h)| (p, PhaseStats::from_histogram(h)))
                .collect(),
            per_disk,
            load_cov: cov(&present),
            rebuild: self.rebuild.map(|r| r.report),
            member_ios,
            plans: self.plan_count,
            replans: self.replans,
            plans_memoised: self.memo.hits,
            events: self.event_count,
            check: self.check,
            lazy: (self.cfg.parity == raidcore::ParityPolicy::Lazy).then(|| {
                let mut r = self.lazy.report.clone();
                r.left = self.state.bpgl().len();
                r
            }),
            timeline: self.timeline.points(),
            ido: self.ido.as_ref().map(|i| i.report()),
            lse: self.lse.as_ref().map(|l| l.report.clone()),
            volumes: self
                .volume_hist
                .iter()
                .enumerate()
                .map(|(v, h)| crate::metrics::VolumeStats {
                    volume: v as u32,
                    phases: Phase::ALL
                        .iter()
                        .zip(h)
                        .map(|(&p, h)| (p, PhaseStats::from_histogram(h)))
                        .collect(),
                })
                .collect(),
        }
    }
}

/// `plan` moved to `cycle`, its member offsets shifted by `shift` bytes (what the memo's
/// translation stands for; debug builds compare it with the planner's plan).
fn translated(plan: &Plan, cycle: u64, shift: i64) -> Plan {
    let mut p = plan.clone();
    p.cycle = cycle;
    for m in p.reads.iter_mut().chain(p.writes.iter_mut()) {
        m.offset_bytes = m.offset_bytes.wrapping_add_signed(shift);
    }
    for l in &mut p.locks {
        l.cycle = cycle;
    }
    p
}

fn disk_io(q: &QueuedIo) -> DiskIo {
    if q.write {
        DiskIo::write(q.offset_bytes, q.len_bytes)
    } else {
        DiskIo::read(q.offset_bytes, q.len_bytes)
    }
}

/// A blank drive for member `d` (replacement `epoch`): a clone of the fitted `proto`, or a
/// freshly seeded one when the drive draws random rotational latencies.
fn new_drive(
    cfg: &SimConfig,
    proto: &DiskModel,
    d: Disk,
    epoch: u32,
) -> Result<DiskModel, DiskParamError> {
    let drive = drive_of(cfg, d);
    match drive {
        DriveParams::Hdd(p) if p.rotation == Rotation::Random => {
            drive.build(disk_seed(cfg.seed, d, epoch))
        }
        _ if cfg.drive_overrides.iter().any(|(o, _)| *o == d) => {
            drive.build(disk_seed(cfg.seed, 0, 0))
        }
        _ => Ok(proto.clone()),
    }
}

/// The drive model of member `d`: its override, or the array's drive.
fn drive_of(cfg: &SimConfig, d: Disk) -> &DriveParams {
    cfg.drive_overrides
        .iter()
        .rev()
        .find(|(o, _)| *o == d)
        .map_or(&cfg.drive, |(_, p)| p)
}

/// Seed of member `d`'s drive (replacement `epoch`), derived from the run's seed.
fn disk_seed(seed: u64, d: Disk, epoch: u32) -> u64 {
    let mut r = crate::rng::SplitMix64::new(seed ^ (u64::from(d) << 32) ^ u64::from(epoch));
    r.next_u64()
}

/// What the checker fills scratch buffers with (a plan must never use scratch it did not fill).
const POISON: u8 = 0xE5;

/// The checker's data: a byte that depends on the write and the array byte.
fn pattern_byte(serial: u64, at: u64) -> u8 {
    let x = at
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add(serial.wrapping_mul(0xBF58_476D_1CE4_E5B9));
    (x >> 56) as u8
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Random pushes (never before the last popped time, as the executor schedules) and pops
    /// come out of [`EventQueue`] in the order of one binary heap, whether it is in its sorted
    /// vector, crossing over to its heap (bursts past [`EventQueue::SMALL`]) or back.
    #[test]
    fn the_event_queue_pops_in_time_then_sequence_order() {
        let mut r = crate::rng::SplitMix64::new(5);
        let mut q = EventQueue::default();
        let mut reference: BinaryHeap<Reverse<(u64, u64)>> = BinaryHeap::new();
        let (mut seq, mut now, mut crossings) = (0u64, 0u64, 0);
        for step in 0..50_000u64 {
            // Bursts of pushes now and then, so the queue grows past the vector and drains.
            let pushes = if step % 500 < 20 {
                3
            } else {
                r.next_u64() % 2 + 1
            };
            for _ in 0..pushes {
                seq += 1;
                // Equal times happen (the sequence number orders them).
                let time_ns = now + r.next_u64() % 8;
                q.push(Event {
                    time_ns,
                    seq,
                    kind: Kind::OpsDone { plan: seq as u32 },
                });
                reference.push(Reverse((time_ns, seq)));
            }
            let in_heap = !q.heap.is_empty();
            let pops = if step % 500 < 20 {
                0
            } else {
                r.next_u64() % 3 + 1
            };
            for _ in 0..pops {
                let want = reference.pop().map(|Reverse(k)| k);
                assert_eq!(q.peek(), want);
                let got = q.pop().map(|e| (e.time_ns, e.seq));
                assert_eq!(got, want);
                if let Some((t, _)) = got {
                    now = t;
                }
            }
            // Back from the heap to the vector.
            crossings += usize::from(in_heap && q.heap.is_empty());
        }
        while let Some(Reverse(want)) = reference.pop() {
            assert_eq!(q.pop().map(|e| (e.time_ns, e.seq)), Some(want));
        }
        assert!(q.pop().is_none());
        assert!(crossings > 10, "the heap drained {crossings} times");
    }
}
