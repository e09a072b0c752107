//! Rebuild: every cycle moved to the newest layout generation. One engine serves the
//! exclusive pool ([`Pool::rebuild`], windows in flight: [`WindowFlow`]) and a served pool (steps run
//! by `crate::serve_support` between client requests, under stripe locks):
//!
//! - [`Pool::plan_rebuild_batch`] picks the next cycles (a policy's zone order first, then
//!   from the cursor on, wrapping around so that cycles a failure left behind are found);
//! - the batch runs (the driver's business: pipelined, or under stripe locks);
//! - [`Pool::end_rebuild_batch`] records the outcome: [`Pool::mark_rebuilt_batch`] on
//!   success, the failed members failed and the blocks that read wrong repaired otherwise;
//! - [`Pool::rebuild_checkpoint`] records progress in the superblocks about once a second,
//!   [`Pool::rebuild_finish`] the final state.
//!
//! Progress is marked in one place, [`Pool::mark_rebuilt_batch`], and made durable in one,
//! [`Pool::rebuild_checkpoint`] (with [`Pool::rebuild_finish`] at the end).

use super::*;

/// Progress of a rebuild, passed to the caller's callback.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub struct RebuildProgress {
    pub cycles_done: u64,
    pub cycles_total: u64,
    pub bytes_written: u64,
    pub elapsed_s: f64,
}

/// Batches a rebuild runs again because survivor blocks read wrong (each time repaired or
/// recorded lost) before it stops: a block that keeps reading wrong after its rewrite (a
/// disk that cannot remap) ends it.
pub(crate) const REBUILD_REPAIRS_MAX: usize = 2 * REPLANS_MAX;

/// Progress is recorded in the superblocks at least this often while a rebuild runs.
pub(crate) const REBUILD_CHECKPOINT_EVERY: Duration = Duration::from_secs(1);

/// Where a rebuild is: the next cycle to look at, and totals so far.
#[derive(Clone, Debug, Default)]
pub struct RebuildCursor {
    next: u64,
    started: Option<Instant>,
    bytes_written: u64,
    /// When progress was last recorded; `None` before the rebuild began and after it ended.
    last_persist: Option<Instant>,
    /// Batches run again after repairs.
    repairs: usize,
    /// Cycles marked rebuilt by this rebuild.
    rebuilt: u64,
    /// A policy rebuild's order: zones (rebuilt in this order, whole cycles of
    /// `zone_cycles` each) before the usual address-order scan.
    pub(crate) zone_order: Option<(Vec<u64>, u64)>,
    /// Cycles marked rebuilt since the caller last took them.
    pub(crate) marked: Vec<u64>,
}

impl RebuildCursor {
    /// A rebuild that has not started.
    pub fn new() -> RebuildCursor {
        RebuildCursor::default()
    }
    /// Rebuild bytes written so far.
    pub fn bytes_written(&self) -> u64 {
        self.bytes_written
    }
    /// Time since the first step.
    pub fn elapsed(&self) -> Duration {
        self.started.map_or(Duration::ZERO, |s| s.elapsed())
    }
}

/// The generation a rebuild plan moves its cycle to.
fn rebuild_target(p: &raidcore::Plan) -> u32 {
    match p.kind {
        raidcore::PlanKind::Rebuild { to, .. } => to,
        _ => unreachable!("rebuild plans only"),
    }
}

/// A batch being rebuilt: its cycles and their plans.
pub(crate) type RebuildBatch = Vec<(u64, raidcore::Plan)>;

/// The plans of `batch` cut into windows of at most `window_bytes` of buffers each
/// ([`raidcore::Plan::windows`]; small pieces of several cycles share a window), each
/// window's member work spread as evenly over the members as the pieces near the front allow
/// ([`pack_windows`]; `speeds` are the members' [`crate::Member::emulated_speed`]s, by member
/// index). Run in any order, or several at once, they do what the batch's plans do: the
/// pieces occupy disjoint member ranges.
pub(crate) fn rebuild_windows(
    batch: &[(u64, raidcore::Plan)],
    window_bytes: usize,
    speeds: &[Option<crate::Speed>],
) -> Vec<Vec<raidcore::Plan>> {
    pack_windows(rebuild_pieces(batch, window_bytes), window_bytes, speeds)
}

/// [`rebuild_windows`] in batch order: each window the next pieces that fit. What a served
/// pool's rebuild runs, as before [`pack_windows`]: its windows run beside clients and the
/// surrogate policies, where the spread was not measured.
pub(crate) fn rebuild_windows_in_order(
    batch: &[(u64, raidcore::Plan)],
    window_bytes: usize,
) -> Vec<Vec<raidcore::Plan>> {
    let window_bytes = window_bytes.max(1);
    let mut out: Vec<Vec<raidcore::Plan>> = Vec::new();
    let mut used = 0usize;
    for piece in rebuild_pieces(batch, window_bytes) {
        let bytes: usize = piece.buffers.iter().sum();
        match out.last_mut() {
            Some(w) if used + bytes <= window_bytes => w.push(piece),
            _ => {
                out.push(vec![piece]);
                used = 0;
            }
        }
        used += bytes;
    }
    out
}

/// The plans of `batch`, each cut into its groups when larger than a window.
fn rebuild_pieces(batch: &[(u64, raidcore::Plan)], window_bytes: usize) -> Vec<raidcore::Plan> {
    let window_bytes = window_bytes.max(1);
    let mut pieces: Vec<raidcore::Plan> = Vec::new();
    for (_, p) in batch {
        // A plan larger than a window is cut into its groups (the finest pieces), which the
        // packing lays into windows filled alike, across cycles. Cut into pieces as
        // large as a window, a cycle of 9 stripes left a window of 7 stripes and one of 2: the
        // pipeline, reading each beside the other's writes, ran both stages at the larger
        // one's pace (RAID5 9+1 over members emulated at 100 MB/s, 256 KiB chunks: 48 MB/s).
        let whole: usize = p.buffers.iter().sum();
        let cut = if whole > window_bytes {
            1
        } else {
            window_bytes
        };
        pieces.extend(p.windows(cut));
    }
    pieces
}

/// The members' [`crate::Member::emulated_speed`]s, by member index (`None` for a failed one).
pub(crate) fn member_speeds(
    members: &[Option<Arc<dyn crate::Member>>],
) -> Vec<Option<crate::Speed>> {
    members
        .iter()
        .map(|m| m.as_ref().and_then(|m| m.emulated_speed()))
        .collect()
}

/// Pieces a window is chosen from: the first this many not yet in a window (in batch order),
/// so that packing costs a bounded scan per window and a piece waits a few windows at most.
const PACK_LOOKAHEAD: usize = 256;

/// What a member I/O costs a window on its member: for an emulated member its service time,
/// without the fixed part when it continues the member's last I/O of the same kind in the
/// window (the executor sends consecutive bytes as one request); for a member of unknown
/// speed, one per I/O.
fn io_cost(speed: Option<crate::Speed>, len: usize, merged: bool) -> u64 {
    match speed {
        None => 1,
        Some(s) if merged => s.service_ns(len) - s.latency_ns,
        Some(s) => s.service_ns(len),
    }
}

/// The members' work in one window being packed: the cost so far on each, and where each
/// member's last read and last write end.
struct WindowLoad {
    cost: Vec<u64>,
    ends: Vec<(u64, u64)>,
}

impl WindowLoad {
    fn new(members: usize) -> WindowLoad {
        WindowLoad {
            cost: vec![0; members],
            ends: vec![(u64::MAX, u64::MAX); members],
        }
    }
    /// What `p` adds, per member (member, cost), and the ends it leaves, given the window so
    /// far: its I/Os in plan order, reads and writes each continuing their own run.
    fn added(
        &self,
        p: &raidcore::Plan,
        speeds: &[Option<crate::Speed>],
        add: &mut Vec<(usize, u64)>,
        ends: &mut Vec<(usize, (u64, u64))>,
    ) {
        add.clear();
        ends.clear();
        for (io, write) in p
            .reads
            .iter()
            .map(|io| (io, false))
            .chain(p.writes.iter().map(|io| (io, true)))
        {
            let m = io.member as usize;
            let at = match ends.iter().rposition(|(e, _)| *e == m) {
                Some(i) => ends[i].1,
                None => self.ends[m],
            };
            let last = if write { at.1 } else { at.0 };
            let speed = speeds.get(m).copied().flatten();
            add.push((m, io_cost(speed, io.data.len, last == io.offset_bytes)));
            let end = io.offset_bytes + io.data.len as u64;
            ends.push((m, if write { (at.0, end) } else { (end, at.1) }));
        }
    }
    fn apply(&mut self, add: &[(usize, u64)], ends: &[(usize, (u64, u64))]) {
        for &(m, c) in add {
            self.cost[m] += c;
        }
        for &(m, e) in ends {
            self.ends[m] = e;
        }
    }
}

/// Lays `pieces` into windows of at most `window_bytes` of buffers (a piece larger than that
/// alone), each window as full as the pieces allow, with the least work on its busiest
/// member: a window's reads, and then its writes, last as long as its busiest member's share,
/// while the others wait for the next window. Work is what the member's I/Os cost
/// ([`io_cost`]: service time on an emulated member, so that requests that merge with the one
/// before them cost only their bytes; a count of I/Os otherwise).
///
/// A window is the next pieces in batch order when that spreads its work evenly already (no
/// member more than one I/O above an even share of the members the batch uses: RAID5's,
/// S2-RAID's conflict-free pieces), so that consecutive member bytes still merge. Otherwise
/// pieces are taken in batch order whenever they keep every member at or below a level, the
/// level rising by one I/O at a time until the window is full, among the first
/// [`PACK_LOOKAHEAD`] pieces left; unless that window's work per byte is more than a tenth
/// above batch order's (the runs it broke up cost more than the spread saves).
///
/// Taken in batch order alone, a window of RAID+ n=31 k=7 (nine stripes of seven units) put
/// four to six I/Os on some members and none on others, and the rebuild over members emulated
/// at 100 MB/s ran at 1.77x RAID5's rate against the layout's 4.29x.
pub(crate) fn pack_windows(
    pieces: Vec<raidcore::Plan>,
    window_bytes: usize,
    speeds: &[Option<crate::Speed>],
) -> Vec<Vec<raidcore::Plan>> {
    let window_bytes = window_bytes.max(1);
    let bytes_of = |p: &raidcore::Plan| -> usize { p.buffers.iter().sum() };
    let members = pieces
        .iter()
        .flat_map(|p| p.reads.iter().chain(&p.writes))
        .map(|io| io.member as usize + 1)
        .max()
        .unwrap_or(0);
    let active = {
        let mut seen = vec![false; members];
        for io in pieces.iter().flat_map(|p| p.reads.iter().chain(&p.writes)) {
            seen[io.member as usize] = true;
        }
        seen.iter().filter(|&&s| s).count().max(1) as u64
    };
    let mut left: std::collections::VecDeque<Option<raidcore::Plan>> =
        pieces.into_iter().map(Some).collect();
    let mut out: Vec<Vec<raidcore::Plan>> = Vec::new();
    let mut add: Vec<(usize, u64)> = Vec::new();
    let mut ends: Vec<(usize, (u64, u64))> = Vec::new();
    let mut extra = vec![0u64; members];
    while let Some(first) = left.iter().flatten().next() {
        // One I/O's worth of work: the dearest I/O of the first piece, unmerged.
        let step = first
            .reads
            .iter()
            .chain(&first.writes)
            .map(|io| {
                io_cost(
                    speeds.get(io.member as usize).copied().flatten(),
                    io.data.len,
                    false,
                )
            })
            .max()
            .unwrap_or(1)
            .max(1);
        // The window batch order gives.
        let mut load = WindowLoad::new(members);
        let mut used = 0usize;
        let mut taken = 0usize;
        for p in left.iter().flatten() {
            let b = bytes_of(p);
            if taken > 0 && used + b > window_bytes {
                break;
            }
            load.added(p, speeds, &mut add, &mut ends);
            load.apply(&add, &ends);
            used += b;
            taken += 1;
        }
        let order_sum: u64 = load.cost.iter().sum();
        let order_bytes = used;
        let even = order_sum.div_ceil(active);
        let mut window: Vec<raidcore::Plan> = Vec::new();
        // The spread window: its pieces' places in `left`, unless batch order is even.
        let mut chosen: Vec<usize> = Vec::new();
        if load.cost.iter().any(|&c| c > even + step) {
            let mut load = WindowLoad::new(members);
            let mut used = 0usize;
            let mut level = 0u64;
            let mut is_chosen = vec![false; left.len()];
            loop {
                level += step;
                // Whether a piece left in the lookahead still fits the window's bytes.
                let mut fits_later = false;
                for (i, p) in left
                    .iter()
                    .enumerate()
                    .filter_map(|(i, s)| s.as_ref().map(|p| (i, p)))
                    .take(PACK_LOOKAHEAD)
                {
                    if is_chosen[i] {
                        continue;
                    }
                    let b = bytes_of(p);
                    if !chosen.is_empty() && used + b > window_bytes {
                        continue;
                    }
                    load.added(p, speeds, &mut add, &mut ends);
                    // (`extra` is zero outside the piece's members, before and after.)
                    let mut over = false;
                    for &(m, x) in &add {
                        extra[m] += x;
                        over |= load.cost[m] + extra[m] > level;
                    }
                    for &(m, _) in &add {
                        extra[m] = 0;
                    }
                    if over && !chosen.is_empty() {
                        fits_later = true;
                        continue;
                    }
                    load.apply(&add, &ends);
                    used += b;
                    chosen.push(i);
                    is_chosen[i] = true;
                }
                if !fits_later {
                    break;
                }
            }
            // Spreading may cost more in all than it saves on the busiest member: pieces taken
            // from further on merge less with each other (on members emulated as 4 ms disks,
            // RAID+ n=31 k=7 at 64 KiB chunks rebuilt at 51 MB/s spread against 74 MB/s in
            // batch order, with eight windows in flight evening out the members' queues).
            // Spread only when the work per byte stays within a tenth of batch order's.
            let sum: u64 = load.cost.iter().sum();
            if sum as f64 / used.max(1) as f64 > 1.1 * order_sum as f64 / order_bytes.max(1) as f64
            {
                chosen.clear();
            }
        }
        if chosen.is_empty() {
            while window.len() < taken {
                if let Some(p) = left.pop_front().expect("counted above") {
                    window.push(p);
                }
            }
        } else {
            for &i in &chosen {
                window.push(left[i].take().expect("chosen once"));
            }
        }
        while matches!(left.front(), Some(None)) {
            left.pop_front();
        }
        debug_assert!(!window.is_empty());
        out.push(window);
    }
    out
}

/// Rebuild windows in flight ([`Pool::rebuild`], the served pool's background rebuild), each
/// read, computed and written on a thread of its own, so that no window waits for another:
/// the members' queues hold the I/O of several windows, and a member done with its part of
/// one window goes on with the next. The windows in flight occupy disjoint member ranges
/// (different cycles, or groups of one plan that reads nothing it writes,
/// [`raidcore::Plan::windows`]), so they may run in any order and finish in any order. The
/// caller bounds the memory: it starts at most as many windows as it allows
/// ([`RebuildOpts::windows_in_flight`]); their buffers are recycled through a shared free
/// list.
///
/// Replaces a two-stage pipeline whose stages ended together (a window read beside the
/// one before it written, then both waited for): each stage lasted as long as its busiest
/// member, and a window's units are spread unevenly over the members. Measured with
/// bench/calibrate.py (members emulated at 150 MB/s and 4 ms, 64 KiB chunks, no client):
/// RAID+ n=13 k=4 rebuilt in 4.8 s and S2-RAID5 9+1 in 2.8 s against the simulator's 4.0 s and
/// 2.1 s, with fewer member requests than the simulator counted (per member about 620
/// reads and 100 writes, strace): the members idled between stages.
pub(crate) struct WindowFlow<T> {
    events: std::sync::mpsc::Sender<Event<T>>,
    done_rx: std::sync::mpsc::Receiver<Event<T>>,
    in_flight: usize,
    reading: usize,
    /// Whether the last window started writes members it also reads
    /// ([`raidcore::rebuild::reading_windows`]).
    writes_where_read: bool,
    /// Whether windows that write where they read may all read at once
    /// ([`WindowFlow::reading_by_writes`]); off, half of them read at most.
    reading_by_writes: bool,
    free: Arc<std::sync::Mutex<Vec<Vec<u8>>>>,
    /// What the windows started with `capture` read and wrote, once written.
    images: Vec<MemberImage>,
}

/// The member contents a written window read and wrote, per plan: (cycle, the array state's
/// event count it was planned at, member, byte offset in its data area, the bytes). IDO's
/// migration of a hot zone takes the zone's data from them rather than reading the zone
/// again.
pub(crate) type MemberImage = Vec<(u64, u64, layout::Disk, u64, Vec<u8>)>;

/// What a window's thread reports: its reads done (computing and writing now), then its
/// outcome (or its thread's panic).
enum Event<T> {
    Read,
    Done(
        T,
        std::thread::Result<std::result::Result<(), crate::exec::BatchErrors>>,
        Option<MemberImage>,
    ),
}

/// What [`WindowFlow::wait`] saw.
pub(crate) enum Step<T> {
    /// A window's reads are done: the members it read may take the next window's reads.
    Read,
    /// A window is written (or failed).
    Done(T, std::result::Result<(), crate::exec::BatchErrors>),
}

impl<T: Send + 'static> WindowFlow<T> {
    pub(crate) fn new() -> WindowFlow<T> {
        let (events, done_rx) = std::sync::mpsc::channel();
        WindowFlow {
            events,
            done_rx,
            in_flight: 0,
            reading: 0,
            writes_where_read: false,
            reading_by_writes: false,
            free: Default::default(),
            images: Vec::new(),
        }
    }

    /// The member images of the windows done since the last call (those started with
    /// `capture` that were written).
    pub(crate) fn take_images(&mut self) -> Vec<MemberImage> {
        std::mem::take(&mut self.images)
    }

    /// Windows started and not yet done.
    pub(crate) fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// A window may start now: fewer than `max` in flight, and fewer than
    /// [`raidcore::rebuild::reading_windows`] of them still reading: all of them when the
    /// windows write members they also read (spare space on the survivors) and the flow
    /// allows it ([`WindowFlow::reading_by_writes`]), otherwise half (at least one). Windows
    /// started together read together and then write together, leaving the members that only
    /// read (or only write) idle in turn; starting the next window when one is done reading
    /// keeps the readers busy while it writes, as the simulator's rebuild read-ahead does
    /// (`sim::SimConfig::rebuild_read_ahead`).
    pub(crate) fn has_room(&self, max: usize) -> bool {
        let max = max.max(1);
        let all = self.reading_by_writes && self.writes_where_read;
        self.in_flight < max && self.reading < raidcore::rebuild::reading_windows(max, all)
    }

    /// Lets every window read at once when the windows write members they also read (see
    /// [`WindowFlow::has_room`]). The exclusive rebuild ([`Pool::rebuild`]) does; a served
    /// pool's background rebuild keeps at most half reading, as before this was measured
    /// (only unserved, on emulated members), beside clients and the surrogate policies.
    pub(crate) fn reading_by_writes(mut self) -> WindowFlow<T> {
        self.reading_by_writes = true;
        self
    }

    /// Starts `plans` (one window) on `members`; [`WindowFlow::wait`] hands back `tag` with
    /// the outcome. With `capture`, what the window read and wrote is kept once it is
    /// written ([`WindowFlow::take_images`]).
    pub(crate) fn start(
        &mut self,
        plans: Vec<raidcore::Plan>,
        members: crate::exec::OwnedMembers,
        tag: T,
        capture: bool,
    ) {
        self.writes_where_read = writes_where_read(&plans);
        let events = self.events.clone();
        let free = Arc::clone(&self.free);
        std::thread::Builder::new()
            .name("rebuild-window".into())
            .spawn(move || {
                let mut read_sent = false;
                let mut image = capture.then(Vec::new);
                let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    run_window(&plans, &members, &free, image.as_mut(), || {
                        read_sent = true;
                        let _ = events.send(Event::Read);
                    })
                }));
                if !read_sent {
                    let _ = events.send(Event::Read);
                }
                if !matches!(outcome, Ok(Ok(()))) {
                    image = None;
                }
                // The receiver lives as long as the flow, which waits for every window.
                let _ = events.send(Event::Done(tag, outcome, image));
            })
            .expect("spawning a rebuild window thread");
        self.in_flight += 1;
        self.reading += 1;
    }

    /// Waits for a window to finish reading or to be done; `None` when none is in flight. A
    /// window's panic is raised here.
    pub(crate) fn wait(&mut self) -> Option<Step<T>> {
        if self.in_flight == 0 {
            return None;
        }
        let event = self
            .done_rx
            .recv()
            .expect("the flow holds a sender while windows are in flight");
        match event {
            Event::Read => {
                self.reading -= 1;
                Some(Step::Read)
            }
            Event::Done(tag, outcome, image) => {
                self.in_flight -= 1;
                self.images.extend(image);
                match outcome {
                    Ok(o) => Some(Step::Done(tag, o)),
                    Err(panic) => std::panic::resume_unwind(panic),
                }
            }
        }
    }

    /// Waits for every window in flight, their errors together (none: `Ok`).
    pub(crate) fn wait_all(&mut self) -> std::result::Result<(), crate::exec::BatchErrors> {
        let mut errors = crate::exec::BatchErrors::default();
        while let Some(step) = self.wait() {
            if let Step::Done(_, Err(e)) = step {
                errors.absorb(e);
            }
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors)
        }
    }
}

impl<T: Send + 'static> Default for WindowFlow<T> {
    fn default() -> WindowFlow<T> {
        WindowFlow::new()
    }
}

impl<T> Drop for WindowFlow<T> {
    /// No window outlives its flow: a rebuild that stops on an error returns only once the
    /// member writes it started are done.
    fn drop(&mut self) {
        while self.in_flight > 0 {
            match self.done_rx.recv() {
                Ok(Event::Done(..)) => self.in_flight -= 1,
                Ok(Event::Read) => {}
                Err(_) => break,
            }
        }
    }
}

/// Whether `plans` write a member that they also read.
fn writes_where_read(plans: &[raidcore::Plan]) -> bool {
    let mut read: Vec<bool> = Vec::new();
    for io in plans.iter().flat_map(|p| &p.reads) {
        let m = io.member as usize;
        if read.len() <= m {
            read.resize(m + 1, false);
        }
        read[m] = true;
    }
    plans
        .iter()
        .flat_map(|p| &p.writes)
        .any(|io| read.get(io.member as usize) == Some(&true))
}

/// One window: read, computed and written, its buffers given back to `free` (taken from it
/// first: the old bytes are never read, see [`crate::exec::read_only`]); `read` is called
/// once its reads are done. With `image`, every member range it read or wrote is copied
/// there once computed.
fn run_window(
    plans: &[raidcore::Plan],
    members: &crate::exec::OwnedMembers,
    free: &std::sync::Mutex<Vec<Vec<u8>>>,
    image: Option<&mut MemberImage>,
    read: impl FnOnce(),
) -> std::result::Result<(), crate::exec::BatchErrors> {
    let need: usize = plans.iter().map(|p| p.buffers.len()).sum();
    let mut mine: Vec<Vec<u8>> = {
        let mut f = free.lock().unwrap_or_else(|e| e.into_inner());
        let at = f.len().saturating_sub(need);
        f.split_off(at)
    };
    let view = members.view();
    let outcome = crate::exec::read_only(plans, &view, &mut mine);
    read();
    let outcome = outcome.and_then(|mut bufs| {
        crate::exec::compute(plans, &mut bufs);
        if let Some(img) = image {
            for (p, b) in plans.iter().zip(&bufs) {
                for io in p.reads.iter().chain(&p.writes) {
                    let d = &io.data;
                    img.push((
                        p.cycle,
                        p.state_generation,
                        io.member,
                        io.offset_bytes,
                        b[d.buf][d.off..d.off + d.len].to_vec(),
                    ));
                }
            }
        }
        let written = crate::exec::commit(plans, &bufs, &view);
        mine.extend(bufs.into_iter().flatten());
        written
    });
    free.lock().unwrap_or_else(|e| e.into_inner()).extend(mine);
    outcome
}

/// A window of batch `id` is written: the batches (planned in key order, each with its
/// windows not yet written) whose windows are all written, taken in planning order up to
/// the first that is not. Both rebuild drivers mark batches in this order, whatever order
/// their windows end in: a policy's hot zones, planned first, are marked first.
pub(crate) fn written_in_order<B>(
    batches: &mut std::collections::BTreeMap<u64, (B, usize)>,
    id: u64,
) -> Vec<B> {
    let (_, left) = batches.get_mut(&id).expect("a window's batch is held");
    *left -= 1;
    let mut done = Vec::new();
    while let Some(e) = batches.first_entry() {
        if e.get().1 > 0 {
            break;
        }
        done.push(e.remove().0);
    }
    done
}

/// Runs `batch`'s plans a window at a time ([`rebuild_windows`]), stopping at the first
/// window that fails.
pub(crate) fn run_rebuild_windows(
    batch: &[(u64, raidcore::Plan)],
    window_bytes: usize,
    view: &crate::exec::Members<'_>,
) -> std::result::Result<(), crate::exec::BatchErrors> {
    for w in rebuild_windows_in_order(batch, window_bytes) {
        let mut empty: Vec<Vec<u8>> = w.iter().map(|_| Vec::new()).collect();
        let mut users: Vec<&mut [u8]> = empty.iter_mut().map(|v| v.as_mut_slice()).collect();
        run_plans(&w, &mut users, view)?;
    }
    Ok(())
}

impl Pool {
    /// The progress of the rebuild at `cur`.
    pub(crate) fn rebuild_progress(&self, cur: &RebuildCursor) -> RebuildProgress {
        RebuildProgress {
            cycles_done: self.state.clean_cycles(),
            cycles_total: self.geo.cycles(),
            bytes_written: cur.bytes_written,
            elapsed_s: cur.elapsed().as_secs_f64(),
        }
    }

    /// Refuses when the rebuild cannot start (a member must be replaced first, too many
    /// failures), before anything is touched; `false` when there is nothing to rebuild.
    pub(crate) fn rebuild_can_start(&self) -> Result<bool> {
        match (0..self.geo.cycles()).find(|&c| !self.state.is_clean(c)) {
            Some(first) => {
                plan_rebuild_cycle(&self.geo, &self.state, first)?;
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// Starts the rebuild at `cur` if it has not started: the superblocks say `Rebuilding`.
    pub(crate) fn rebuild_begin(&mut self, cur: &mut RebuildCursor) -> Result<()> {
        cur.started.get_or_insert_with(Instant::now);
        if cur.last_persist.is_none() {
            self.persist(ArrayStateTag::Rebuilding)?;
            cur.last_persist = Some(Instant::now());
        }
        Ok(())
    }

    /// Plans up to `batch` cycles that are not in the target layout and not `in_flight`:
    /// a policy's zone order first (IDO: hot zones; PRO: popular ones), then from the
    /// cursor on, wrapping around once (cycles left behind by a failure during the rebuild
    /// are found on the next pass).
    pub(crate) fn plan_rebuild_batch(
        &self,
        cur: &mut RebuildCursor,
        batch: usize,
        in_flight: &[u64],
    ) -> Result<RebuildBatch> {
        let total = self.geo.cycles();
        let batch = batch.max(1);
        let wanted = |c: u64| !self.state.is_clean(c) && !in_flight.contains(&c);
        let mut out = Vec::new();
        if let Some((zones, zc)) = &cur.zone_order {
            let cycles = zones
                .iter()
                .flat_map(|&z| z * zc..((z + 1) * zc).min(total));
            for c in cycles.filter(|&c| wanted(c)) {
                if out.len() >= batch {
                    break;
                }
                if let Some(p) = plan_rebuild_cycle(&self.geo, &self.state, c)? {
                    out.push((c, p));
                }
            }
            if !out.is_empty() {
                return Ok(out);
            }
        }
        let mut scanned = 0u64;
        while scanned < total && out.len() < batch {
            let c = cur.next % total;
            if wanted(c) {
                if let Some(p) = plan_rebuild_cycle(&self.geo, &self.state, c)? {
                    out.push((c, p));
                }
            }
            cur.next = (c + 1) % total;
            scanned += 1;
        }
        Ok(out)
    }

    /// Marks the cycles of a batch whose writes completed as rebuilt (in their target
    /// generation) in the array state: the one place rebuild progress is marked. Plans that
    /// are no longer current (an event since they were made) are left for the next pass.
    /// The superblocks learn of it at the next [`Pool::rebuild_checkpoint`].
    pub(crate) fn mark_rebuilt_batch(&mut self, cur: &mut RebuildCursor, batch: &RebuildBatch) {
        for (c, p) in batch {
            if self.state.plan_is_current(p) {
                cur.bytes_written += p.writes.iter().map(|w| w.data.len as u64).sum::<u64>();
                let to = rebuild_target(p);
                // A move that leaves a readable old copy (a copy-back) is recorded before the
                // cycle takes writes in its new places (`Pool::record_layout_before_writes`).
                // So is every move under lazy parity: a write that defers a background
                // parity in the new layout leaves the stripe short of it in the old one,
                // where the members the rebuild wrote count for nothing, and a crash before
                // the record brings the cycle back there (served fault harness, seed
                // 0x6b079f70: a RAID6 whose two replacements were rebuilt took lazy writes,
                // lost power, and came back with those stripes unrecoverable).
                if self.state.move_leaves_old_copy(*c, to) || self.lazy.parity == ParityPolicy::Lazy
                {
                    self.sb.rebuilt_unrecorded.insert(*c);
                }
                self.sb.moved_unrecorded |= self.state.cycle_generation(*c) != to;
                self.state.mark_rebuilt(*c, to);
                cur.marked.push(*c);
                cur.rebuilt += 1;
            }
        }
    }

    /// A batch failed: the members that failed are failed (the rebuild goes on toward the
    /// new target), survivor blocks that read wrong are repaired or recorded lost. Stops
    /// the rebuild (its progress recorded) after [`REBUILD_REPAIRS_MAX`] repairs.
    pub(crate) fn rebuild_batch_failed(
        &mut self,
        cur: &mut RebuildCursor,
        e: crate::exec::BatchErrors,
    ) -> Result<()> {
        let failed = e.failed_members();
        if !failed.is_empty() {
            self.fail_members(&failed)?;
        }
        if let Some(b) = e.bad.first() {
            cur.repairs += 1;
            if cur.repairs > REBUILD_REPAIRS_MAX {
                self.persist(ArrayStateTag::Rebuilding)?;
                return Err(PoolError::Io(format!(
                    "rebuild stopped: survivor blocks keep reading wrong after being \
                     rewritten (last: member {} byte {}); the progress so far is \
                     recorded: replace that member too",
                    b.member,
                    self.map.data_offset_bytes + b.offset_bytes
                )));
            }
            // Only blocks marked lost read wrong: the cycles may rebuild through them,
            // checked against the replaced member's old checksums.
            if e.read_errors.is_empty()
                && self.only_marked(&e.bad)
                && self.rebuild_through_marked(cur, &e.bad)
            {
                return Ok(());
            }
            self.repair_in_rebuild(&e.bad)?;
        }
        Ok(())
    }

    /// The cycles of `bad` (blocks marked lost, read as rebuild sources) rebuilt taking the
    /// marked blocks as stored, since their stored bytes are what their rows' parity was
    /// computed with, and marked rebuilt; but only if every block written matches the entry
    /// its member had before it was replaced ([`Checksums::matches_before_reset`]). Returns
    /// false, having marked nothing (cycles written before a mismatch are rebuilt again, the
    /// usual way), when one does not (a block rewritten while the member was missing, a rebuild
    /// into spare space, a pool opened since the replacement) or a plan fails: the caller then
    /// records the loss as before. Without this, the unit of a row beside marked blocks was
    /// recorded lost by the rebuild of its member although the row still held it. (Runs
    /// under the pool mutex when served: a rare path.)
    fn rebuild_through_marked(
        &mut self,
        cur: &mut RebuildCursor,
        bad: &[crate::exec::BadRange],
    ) -> bool {
        let Some(cs) = self.integrity.checksums.clone() else {
            return false;
        };
        let cycles: std::collections::BTreeSet<u64> = bad
            .iter()
            .filter_map(|b| {
                raidcore::locate_member_byte(
                    &self.geo,
                    &self.state,
                    b.member as layout::Disk,
                    b.offset_bytes,
                )
                .map(|(c, _, _)| c)
            })
            .collect();
        let mut done: RebuildBatch = Vec::new();
        for c in cycles {
            let Ok(Some(plan)) = plan_rebuild_cycle(&self.geo, &self.state, c) else {
                return false;
            };
            let view = crate::exec::Members {
                marked_lost_as_stored: true,
                ..self.members_view()
            };
            let mut none: [u8; 0] = [];
            let prepared = {
                let users = [&mut none[..]];
                crate::exec::prepare(std::slice::from_ref(&plan), &users, &view)
            };
            let Ok(mut bufs) = prepared else {
                return false;
            };
            let bufs = bufs.pop().expect("one plan");
            let checked = plan.writes.iter().all(|w| {
                let bytes = &bufs[w.data.buf][w.data.off..w.data.end()];
                cs.matches_before_reset(w.member as usize, w.offset_bytes, bytes)
            });
            if !checked
                || crate::exec::commit(
                    std::slice::from_ref(&plan),
                    std::slice::from_ref(&bufs),
                    &self.members_view(),
                )
                .is_err()
            {
                return false;
            }
            done.push((c, plan));
        }
        self.mark_rebuilt_batch(cur, &done);
        !done.is_empty()
    }

    /// Records the outcome of a batch run as a whole: marked on success, failures handled
    /// otherwise. Then a checkpoint when one is due.
    pub(crate) fn end_rebuild_batch(
        &mut self,
        cur: &mut RebuildCursor,
        batch: &RebuildBatch,
        outcome: std::result::Result<(), crate::exec::BatchErrors>,
    ) -> Result<RebuildProgress> {
        match outcome {
            Ok(()) => self.mark_rebuilt_batch(cur, batch),
            Err(e) => self.rebuild_batch_failed(cur, e)?,
        }
        self.rebuild_checkpoint(cur)?;
        Ok(self.rebuild_progress(cur))
    }

    /// Records the progress marked so far in the superblocks when the last record is more
    /// than [`REBUILD_CHECKPOINT_EVERY`] old (so an interrupted rebuild resumes about where
    /// it was). [`Pool::persist`] makes the rebuilt data durable before any superblock says
    /// it is rebuilt.
    pub(crate) fn rebuild_checkpoint(&mut self, cur: &mut RebuildCursor) -> Result<()> {
        if cur
            .last_persist
            .is_some_and(|t| t.elapsed() > REBUILD_CHECKPOINT_EVERY)
        {
            self.persist(ArrayStateTag::Rebuilding)?;
            cur.last_persist = Some(Instant::now());
        }
        Ok(())
    }

    /// Ends a rebuild that began: blocks lost on the way are marked (reads of them fail from
    /// now on) and the final state recorded.
    pub(crate) fn rebuild_finish(&mut self, cur: &mut RebuildCursor) -> Result<()> {
        if cur.last_persist.take().is_some() {
            self.poison_pending()?;
            let tag = self.tag();
            self.persist(tag)?;
        }
        if self.state.all_clean() {
            if let Some(cs) = self.integrity.checksums.clone() {
                self.mark_again_after_reset()?;
                cs.forget_before_reset();
            }
        }
        Ok(())
    }

    /// Moves every cycle to the newest layout generation: rebuilds lost units into their
    /// destinations (spares, spare space, a replacement) and copies units back after a
    /// replacement. Calls `progress` after every window.
    ///
    /// Batches of `opts.parallel_cycles` cycles are cut into windows of
    /// `opts.window_bytes` ([`rebuild_windows`]), and up to `opts.windows_in_flight` windows
    /// run at once ([`WindowFlow`]), each read, computed and written on its own, of one batch
    /// or the next; their cycles, or their groups of buffers within a cycle, occupy disjoint
    /// member ranges. A batch is marked rebuilt once all its windows are written. With one
    /// window in flight a rebuild into one spare alternates between reading the survivors
    /// and writing the spare; without the windows it holds whole cycles in memory.
    pub fn rebuild(
        &mut self,
        opts: &RebuildOpts,
        mut progress: impl FnMut(RebuildProgress),
    ) -> Result<RebuildProgress> {
        let mut cur = RebuildCursor::new();
        cur.started = Some(Instant::now());
        if !self.rebuild_can_start()? {
            let pr = self.rebuild_progress(&cur);
            progress(pr);
            return Ok(pr);
        }
        self.rebuild_begin(&mut cur)?;
        let max_cycles = opts.max_cycles.unwrap_or(u64::MAX);
        // No client here: only a speed limit paces it.
        let in_flight_max = opts.windows(false, self.geo.disks());
        // Windows not yet started, each with its batch.
        let mut queue: std::collections::VecDeque<(Vec<raidcore::Plan>, u64)> = Default::default();
        // Batches planned and not yet marked: their plans and windows not yet written.
        let mut batches: std::collections::BTreeMap<u64, (RebuildBatch, usize)> =
            Default::default();
        let mut next_batch = 0u64;
        let mut flow: WindowFlow<u64> = WindowFlow::new().reading_by_writes();
        // A cycle that cannot be planned stops the rebuild; what was done before it is
        // still committed and recorded.
        let mut stop: Option<PoolError> = None;
        loop {
            while flow.has_room(in_flight_max) {
                if queue.is_empty() && stop.is_none() {
                    let unmarked: Vec<u64> = batches
                        .values()
                        .flat_map(|(b, _)| b.iter().map(|x| x.0))
                        .collect();
                    let room = max_cycles.saturating_sub(cur.rebuilt + unmarked.len() as u64);
                    if room > 0 {
                        let n = (opts.parallel_cycles as u64).min(room) as usize;
                        match self.plan_rebuild_batch(&mut cur, n, &unmarked) {
                            Ok(b) if !b.is_empty() => {
                                let ws = rebuild_windows(
                                    &b,
                                    opts.window_bytes,
                                    &member_speeds(&self.members.handles),
                                );
                                batches.insert(next_batch, (b, ws.len()));
                                queue.extend(ws.into_iter().map(|w| (w, next_batch)));
                                next_batch += 1;
                            }
                            Ok(_) => {}
                            Err(e) => stop = Some(e),
                        }
                    }
                }
                let Some((w, batch)) = queue.pop_front() else {
                    break;
                };
                flow.start(w, self.owned_members(), batch, false);
            }
            // With the windows running: a checkpoint's flush and superblock writes (about
            // 100 ms over members emulated at 4 ms, with the host writing back the rebuild's
            // data) would otherwise leave the members idle once the windows in flight end.
            self.rebuild_checkpoint(&mut cur)?;
            let (batch, outcome) = match flow.wait() {
                None => break,
                Some(Step::Read) => continue,
                Some(Step::Done(batch, outcome)) => (batch, outcome),
            };
            if let Err(mut e) = outcome {
                // Plan again with the new failure set, once the windows in flight are done;
                // batches not marked are found again.
                if let Err(more) = flow.wait_all() {
                    e.absorb(more);
                }
                queue.clear();
                batches.clear();
                self.rebuild_batch_failed(&mut cur, e)?;
                continue;
            }
            for done in written_in_order(&mut batches, batch) {
                self.mark_rebuilt_batch(&mut cur, &done);
            }
            progress(self.rebuild_progress(&cur));
            if let Some(max) = opts.speed_max_bytes_per_sec {
                let due = Duration::from_secs_f64(cur.bytes_written as f64 / max as f64);
                std::thread::sleep(due.saturating_sub(cur.elapsed()));
            }
        }
        debug_assert!(batches.is_empty() && queue.is_empty());
        self.rebuild_finish(&mut cur)?;
        match stop {
            Some(e) => Err(e),
            None => Ok(self.rebuild_progress(&cur)),
        }
    }

    /// Starts a step of a stepwise rebuild: `None` (after recording the final state) when
    /// every cycle is in the target layout, else the batch to run.
    pub(crate) fn begin_rebuild_step(
        &mut self,
        opts: &RebuildOpts,
        cur: &mut RebuildCursor,
    ) -> Result<Option<RebuildBatch>> {
        self.begin_rebuild_step_beside(opts, cur, &[])
    }

    /// [`Pool::begin_rebuild_step`] leaving out the cycles `in_flight` (read, not yet
    /// written and marked); an empty batch when every cycle left is in flight.
    pub(crate) fn begin_rebuild_step_beside(
        &mut self,
        opts: &RebuildOpts,
        cur: &mut RebuildCursor,
        in_flight: &[u64],
    ) -> Result<Option<RebuildBatch>> {
        if self.state.all_clean() {
            debug_assert!(in_flight.is_empty(), "cycles in flight are not clean");
            self.rebuild_finish(cur)?;
            return Ok(None);
        }
        self.rebuild_begin(cur)?;
        self.plan_rebuild_batch(cur, opts.parallel_cycles, in_flight)
            .map(Some)
    }

    /// One step of a rebuild: plans up to `opts.parallel_cycles` cycles that are not yet in
    /// the target layout (continuing from `cur`), runs them, and marks them rebuilt. Returns
    /// the progress, or `None` once every cycle is in the target layout (the final state is
    /// then recorded). A member that fails during the step is failed and the rebuild goes on
    /// toward the new target at the next step. The caller paces the steps
    /// (`speed_max_bytes_per_sec` is not applied here), which is how client I/O interleaves
    /// with a rebuild.
    pub fn rebuild_step(
        &mut self,
        opts: &RebuildOpts,
        cur: &mut RebuildCursor,
    ) -> Result<Option<RebuildProgress>> {
        let Some(batch) = self.begin_rebuild_step(opts, cur)? else {
            return Ok(None);
        };
        let outcome = run_rebuild_windows(&batch, opts.window_bytes, &self.members_view());
        self.end_rebuild_batch(cur, &batch, outcome).map(Some)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The busiest member's I/O count in a window, and the window's I/Os in all.
    fn loads(w: &[raidcore::Plan]) -> (usize, usize) {
        let mut per: std::collections::HashMap<u32, usize> = Default::default();
        for io in w.iter().flat_map(|p| p.reads.iter().chain(&p.writes)) {
            *per.entry(io.member as u32).or_default() += 1;
        }
        (per.values().copied().max().unwrap_or(0), per.values().sum())
    }

    /// The rebuild batch of the first two cycles of RAID+ n=31 k=7 with `chunk` byte chunks and
    /// member 0 failed (rebuilt into spare space), and the pieces it is cut into.
    fn raidplus_31_7_batch(chunk: u64, member_bytes: u64) -> (RebuildBatch, Vec<raidcore::Plan>) {
        let params = layout::Params {
            disks: Some(31),
            width: Some(7),
            ..layout::Params::default()
        };
        let scheme = layout::build(layout::SchemeKind::RaidPlus, &params).unwrap();
        let geo = raidcore::Geometry::new(scheme, chunk, member_bytes).unwrap();
        let mut state = raidcore::ArrayState::new(&geo);
        state.fail(&geo, 0).unwrap();
        let batch: RebuildBatch = (0..2)
            .map(|c| (c, plan_rebuild_cycle(&geo, &state, c).unwrap().unwrap()))
            .collect();
        let pieces = batch.iter().flat_map(|(_, p)| p.windows(1)).collect();
        (batch, pieces)
    }

    /// A declustered rebuild (RAID+ n=31 k=7 into its spare space) packed into windows of
    /// nine stripes: every piece lands in exactly one window, every window but the last few
    /// is full, and the busiest member of each carries at most one I/O more than an even
    /// spread would give it (taken in batch order, windows put up to six on one member while
    /// others had none: the window then lasts six I/Os while the spread needs three).
    #[test]
    fn windows_spread_a_declustered_rebuild_over_the_members() {
        let chunk = 4096u64;
        let (batch, pieces) = raidplus_31_7_batch(chunk, 1 << 30);
        let group = 7 * chunk as usize;
        let window = 9 * group;
        let ws = rebuild_windows(&batch, window, &[]);
        assert!(pieces.len() > 100, "{} pieces", pieces.len());
        // Every piece once: the windows' pieces are the batch's, as a multiset.
        let key = |p: &raidcore::Plan| {
            let mut k: Vec<(u32, u64, bool)> = p
                .reads
                .iter()
                .map(|io| (io.member as u32, io.offset_bytes, false))
                .chain(
                    p.writes
                        .iter()
                        .map(|io| (io.member as u32, io.offset_bytes, true)),
                )
                .collect();
            k.sort();
            (p.cycle, k)
        };
        let mut want: Vec<_> = pieces.iter().map(key).collect();
        let mut got: Vec<_> = ws.iter().flatten().map(key).collect();
        want.sort();
        got.sort();
        assert_eq!(got, want);
        let tail = 3;
        let mut worst_in_order = 0;
        for (i, w) in ws.iter().enumerate() {
            let bytes: usize = w.iter().map(|p| p.buffers.iter().sum::<usize>()).sum();
            assert!(bytes <= window, "window {i}: {bytes} bytes");
            if i + tail >= ws.len() {
                continue;
            }
            assert_eq!(w.len(), 9, "window {i} is not full");
            let (busiest, ios) = loads(w);
            let even = ios.div_ceil(31);
            assert!(
                busiest <= even + 1,
                "window {i}: {busiest} I/Os on one member, {ios} in all"
            );
        }
        for w in rebuild_windows_in_order(&batch, window) {
            worst_in_order = worst_in_order.max(loads(&w).0);
        }
        // The property above is not the layout's own: batch order is worse.
        assert!(
            worst_in_order > 4,
            "in batch order the busiest member had {worst_in_order}"
        );
    }

    /// On members that pay a large fixed cost per request (emulated 4 ms disks), spreading a
    /// declustered rebuild must not break up the runs of consecutive member bytes that batch
    /// order makes: the windows send at most a tenth more requests than batch order's windows
    /// of the same bytes would (each request after the first of a run merges, as the executor
    /// sends consecutive bytes of a member as one request).
    #[test]
    fn windows_keep_runs_together_on_members_that_seek() {
        let chunk = 64u64 << 10;
        let (batch, _) = raidplus_31_7_batch(chunk, 1 << 34);
        let hdd = crate::Speed::parse("hdd:120MB/s:4ms").unwrap();
        let speeds = vec![Some(hdd); 31];
        let window = 36 * 7 * chunk as usize;
        // Requests a window sends: I/Os that do not continue their member's last one.
        let requests = |w: &[&raidcore::Plan]| -> usize {
            let mut ends: std::collections::HashMap<(u32, bool), u64> = Default::default();
            let mut n = 0;
            for p in w {
                for (io, write) in p
                    .reads
                    .iter()
                    .map(|io| (io, false))
                    .chain(p.writes.iter().map(|io| (io, true)))
                {
                    let k = (io.member as u32, write);
                    if ends.get(&k) != Some(&io.offset_bytes) {
                        n += 1;
                    }
                    ends.insert(k, io.offset_bytes + io.data.len as u64);
                }
            }
            n
        };
        let packed: usize = rebuild_windows(&batch, window, &speeds)
            .iter()
            .map(|w| requests(&w.iter().collect::<Vec<_>>()))
            .sum();
        let in_order: usize = rebuild_windows_in_order(&batch, window)
            .iter()
            .map(|w| requests(&w.iter().collect::<Vec<_>>()))
            .sum();
        assert!(
            packed * 10 <= in_order * 11,
            "{packed} requests packed, {in_order} in batch order"
        );
        // Counted alike (no speeds), the same batch is spread regardless of runs: the rule
        // above is what keeps them.
        let counted: usize = rebuild_windows(&batch, window, &[])
            .iter()
            .map(|w| requests(&w.iter().collect::<Vec<_>>()))
            .sum();
        assert!(counted * 10 > in_order * 11, "{counted} against {in_order}");
    }

    /// RAID5 pieces all touch every member: packing keeps them in batch order, so that the
    /// members' reads of consecutive bytes still merge.
    #[test]
    fn a_layout_touching_every_member_packs_in_batch_order() {
        let params = layout::Params {
            disks: Some(6),
            spares: 1,
            ..layout::Params::default()
        };
        let scheme = layout::build(layout::SchemeKind::Raid5, &params).unwrap();
        let chunk = 4096u64;
        let geo = raidcore::Geometry::new(scheme, chunk, 64 * 5 * chunk).unwrap();
        let mut state = raidcore::ArrayState::new(&geo);
        state.fail(&geo, 0).unwrap();
        let batch: RebuildBatch = (0..4)
            .map(|c| (c, plan_rebuild_cycle(&geo, &state, c).unwrap().unwrap()))
            .collect();
        let pieces: Vec<raidcore::Plan> = batch.iter().flat_map(|(_, p)| p.windows(1)).collect();
        let ws = rebuild_windows(&batch, 3 * 6 * chunk as usize, &[]);
        let flat: Vec<&raidcore::Plan> = ws.iter().flatten().collect();
        assert_eq!(flat.len(), pieces.len());
        for (a, b) in flat.iter().zip(&pieces) {
            assert_eq!(
                (a.cycle, &a.reads, &a.writes),
                (b.cycle, &b.reads, &b.writes)
            );
        }
    }

    /// Cycles larger than a window are laid into windows filled alike across cycles: every
    /// window holds at most the window's bytes, and every one but the last has no room for
    /// one more group. (Cut at window size, a 9-stripe RAID5 cycle made windows of 7 stripes
    /// and of 2, and the pipeline ran at the pace of the larger in both of its stages.)
    #[test]
    fn windows_are_filled_alike_across_cycles() {
        let params = layout::Params {
            disks: Some(10),
            spares: 1,
            ..layout::Params::default()
        };
        let scheme = layout::build(layout::SchemeKind::Raid5, &params).unwrap();
        let chunk = 4096u64;
        let geo = raidcore::Geometry::new(scheme, chunk, 64 * 9 * chunk).unwrap();
        let mut state = raidcore::ArrayState::new(&geo);
        state.fail(&geo, 0).unwrap();
        let batch: RebuildBatch = (0..6)
            .map(|c| (c, plan_rebuild_cycle(&geo, &state, c).unwrap().unwrap()))
            .collect();
        let cycle_bytes: usize = batch[0].1.buffers.iter().sum();
        // A stripe's group: 8 survivors read, 1 unit rebuilt.
        let group = 9 * chunk as usize;
        let window = 7 * group + group / 2;
        assert!(cycle_bytes > window, "the cycles must not fit a window");
        let ws = rebuild_windows(&batch, window, &[]);
        let bytes = |w: &Vec<raidcore::Plan>| -> usize {
            w.iter().map(|p| p.buffers.iter().sum::<usize>()).sum()
        };
        let total: usize = ws.iter().map(bytes).sum();
        assert_eq!(total, 6 * cycle_bytes);
        for (i, w) in ws.iter().enumerate() {
            assert!(bytes(w) <= window, "window {i}: {} bytes", bytes(w));
            if i + 1 < ws.len() {
                assert!(bytes(w) + group > window, "window {i} has room left");
            }
        }
        assert_eq!(ws.len(), (6 * 9usize).div_ceil(7));
    }
}
