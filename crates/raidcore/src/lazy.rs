//! Lazy parity update (seed 002): two-parity layouts that write like one-parity ones.
//!
//! A small write to a two-parity stripe normally reads and writes the data unit and *both*
//! parities (six member I/Os). Under the **lazy** parity policy a write updates the data and
//! one parity (the *foreground* parity) before it is acknowledged, and only records that the
//! other (*background*) parity of the stripe is out of date. The record is the **background
//! parity group list** (BPGL, [`Bpgl`]): a bounded set of stripes whose background parity is
//! stale. A *flush* ([`plan_flush_cycle`]) recomputes the background parities of listed stripes
//! when the array is idle ([`IdleDetector`]), when the list reaches its bound, and before
//! anything else once a member fails. While a stripe is listed, only its foreground parity
//! protects it: the array tolerates one failure; with an empty list, two again.
//!
//! ## Which parity is deferred ([`LazyGroups`])
//!
//! - **P+Q stripes** (RAID6, RAID+ level 6, random/hash level 6): Q is deferred, P stays in the
//!   foreground, so every data unit keeps one up-to-date parity.
//! - **XOR stripes sharing data units** (RM2: every data unit is in two parity groups): the
//!   parity groups are split into a *foreground parity group set* (FPG) covering every data
//!   unit and the rest (BPG). A minimum FPG is a minimum vertex cover of the graph whose
//!   vertices are the groups and whose edges are the shared data units; computed exactly here
//!   (branch and bound). For RM2 with even `N` its size is `N/2` (the seed's formula). A write
//!   updates every touched FPG group and defers every touched BPG group.
//! - XOR stripes whose data units belong to no other stripe (RAID5), mirrors and RAID0 have
//!   nothing to defer: their parity is always updated.
//!
//! ## The execution contract
//!
//! 1. [`plan_write_lazy`] returns the plans and the stripes it deferred; before running the
//!    plans the executor calls [`crate::ArrayState::defer`] with them (which lists them and
//!    counts the write as in flight on them) and, for a durable engine, persists the list
//!    ([`Bpgl::record`], [`BpglRecord::encode`]) before the plans' member writes (so before
//!    the write is acknowledged). When the plans are done (or abandoned) it calls
//!    [`crate::ArrayState::deferred_write_done`].
//! 2. A flush plan ([`plan_flush_cycle`]) covers the listed stripes of one cycle with no write in
//!    flight. Run it like any plan (locks, then reads, ops, writes), then call
//!    [`crate::ArrayState::flush_done`] with its [`FlushPlan::entries`]: entries re-deferred
//!    since the flush was planned stay listed (their sequence number changed).
//! 3. Planners never read a listed stripe's background parity: [`crate::ArrayState`]'s views
//!    treat it as unavailable, so degraded reads reconstruct from the foreground parity alone,
//!    and a rebuild recomputes it ([`crate::ArrayState::mark_rebuilt`] then drops the cycle's
//!    entries).

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use layout::{Code, Disk, Role};

use crate::array::{ArrayState, Geometry, PlaceId, StripeId};
use crate::plan::{Plan, PlanKind};
use crate::policy::ModePolicy;
use crate::recon::{Builder, Values, View};
use crate::record::Frame;
use crate::CoreError;

/// Whether a write updates both parities of a two-parity stripe (eager) or defers one (lazy).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ParityPolicy {
    /// Every parity is updated before the write completes (the default).
    #[default]
    Eager,
    /// The background parity is deferred to the BPGL (seed 002's lazy parity update).
    Lazy,
}

impl ParityPolicy {
    /// `eager` or `lazy`.
    pub fn as_str(self) -> &'static str {
        match self {
            ParityPolicy::Eager => "eager",
            ParityPolicy::Lazy => "lazy",
        }
    }
}

impl fmt::Display for ParityPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ParityPolicy {
    type Err = String;
    fn from_str(s: &str) -> Result<ParityPolicy, String> {
        match s {
            "eager" => Ok(ParityPolicy::Eager),
            "lazy" => Ok(ParityPolicy::Lazy),
            _ => Err(format!("unknown parity policy '{s}' (eager or lazy)")),
        }
    }
}

/// Largest number of XOR stripes the exact FPG search handles (bit masks); beyond it every XOR
/// stripe stays in the foreground (nothing is deferred for them).
const FPG_SEARCH_MAX: usize = 64;

/// Which parity of each stripe of a cycle a lazy write defers.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Variant {
    /// Per stripe: its background parity place, or `None` when the stripe is always updated in
    /// the foreground.
    background: Vec<Option<PlaceId>>,
    /// XOR stripes that share data units with other XOR stripes and are kept in the
    /// foreground (the FPG), ascending. Empty when no stripes share units.
    fpg: Vec<usize>,
    /// XOR stripes that share data units and are deferred (the BPG), ascending.
    bpg: Vec<usize>,
}

/// Which parity of each stripe a lazy write defers. For layouts whose parity groups share
/// data units (RM2), a minimum FPG and its rotations that are still covers: cycle `c` uses
/// variant `c mod variants`, so the foreground parity work is spread over all members (with
/// one fixed FPG, RM2's parity of group `i` always on disk `i` would make the FPG's disks hot).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LazyGroups {
    variants: Vec<Variant>,
}

impl LazyGroups {
    /// Works out the background parity of every stripe of `geo`'s cycle.
    pub fn new(geo: &Geometry) -> LazyGroups {
        let healthy = geo.healthy();
        let ns = healthy.stripes.len();
        let background: Vec<Option<PlaceId>> = vec![None; ns];
        // XOR stripes: vertex cover over shared data places.
        let xor: Vec<usize> = (0..ns)
            .filter(|&s| healthy.stripes[s].code == Code::Xor)
            .collect();
        let mut xor_index = vec![usize::MAX; ns];
        for (i, &s) in xor.iter().enumerate() {
            xor_index[s] = i;
        }
        let mut edges: Vec<(usize, usize)> = Vec::new();
        let mut forced: Vec<bool> = vec![false; xor.len()];
        let mut shared: Vec<bool> = vec![false; xor.len()];
        for p in 0..geo.places() {
            if geo.role(p) != Role::Data {
                continue;
            }
            let groups: Vec<usize> = geo
                .place_units(p)
                .iter()
                .map(|&(s, _)| s)
                .filter(|&s| healthy.stripes[s].code == Code::Xor)
                .map(|s| xor_index[s])
                .collect();
            match groups.len() {
                0 => {}
                1 => forced[groups[0]] = true,
                2 => {
                    edges.push((groups[0], groups[1]));
                    shared[groups[0]] = true;
                    shared[groups[1]] = true;
                }
                _ => {
                    // A data unit in three or more XOR groups: keep all of them up to date.
                    for g in groups {
                        forced[g] = true;
                    }
                }
            }
        }
        let candidates: Vec<usize> = (0..xor.len()).filter(|&i| shared[i]).collect();
        let mut covers: Vec<u64> = Vec::new();
        let mut edge_masks: Vec<(u64, u64)> = Vec::new();
        if !candidates.is_empty() && candidates.len() <= FPG_SEARCH_MAX {
            let bit: BTreeMap<usize, usize> = candidates
                .iter()
                .enumerate()
                .map(|(b, &i)| (i, b))
                .collect();
            edge_masks = edges
                .iter()
                .map(|&(a, b)| (1u64 << bit[&a], 1u64 << bit[&b]))
                .collect();
            let forced_mask = candidates
                .iter()
                .enumerate()
                .filter(|(_, &i)| forced[i])
                .fold(0u64, |m, (b, _)| m | 1 << b);
            let k = candidates.len();
            let cover = min_vertex_cover(&edge_masks, forced_mask, k);
            // Rotations of the minimum cover that are covers too (all of them for RM2's
            // cyclic construction), each once.
            for r in 0..k {
                let rot = (0..k)
                    .filter(|&b| cover >> b & 1 == 1)
                    .fold(0u64, |m, b| m | 1 << ((b + r) % k));
                let ok = rot & forced_mask == forced_mask
                    && edge_masks.iter().all(|&(a, b)| rot & (a | b) != 0);
                if ok && !covers.contains(&rot) {
                    covers.push(rot);
                }
            }
        }
        if covers.is_empty() {
            covers.push(0);
        }
        let mut variants = Vec::new();
        for cover in covers {
            let mut background = background.clone();
            let (mut fpg, mut bpg) = (Vec::new(), Vec::new());
            if !edge_masks.is_empty() {
                for (b, &i) in candidates.iter().enumerate() {
                    let s = xor[i];
                    if cover >> b & 1 == 1 {
                        fpg.push(s);
                    } else {
                        bpg.push(s);
                        let ps: Vec<PlaceId> = geo
                            .stripe_places(s)
                            .iter()
                            .copied()
                            .filter(|&p| geo.role(p) == Role::P)
                            .collect();
                        assert_eq!(ps.len(), 1, "an XOR stripe has one parity");
                        background[s] = Some(ps[0]);
                    }
                }
            }
            variants.push(Variant {
                background,
                fpg,
                bpg,
            });
        }
        // P+Q stripes: Q in the background.
        for (s, st) in healthy.stripes.iter().enumerate() {
            if st.code == Code::PQ {
                let q = geo
                    .stripe_places(s)
                    .iter()
                    .copied()
                    .find(|&p| geo.role(p) == Role::Q)
                    .expect("a P+Q stripe has a Q");
                for v in &mut variants {
                    v.background[s] = Some(q);
                }
            }
        }
        let lg = LazyGroups { variants };
        if cfg!(debug_assertions) {
            lg.check(geo);
        }
        lg
    }

    /// Asserts the invariant that makes lazy parity safe: every data unit keeps at least one
    /// foreground parity (or belongs to no parity stripe at all).
    pub fn check(&self, geo: &Geometry) {
        for v in &self.variants {
            v.check(geo);
        }
    }

    fn variant(&self, c: u64) -> &Variant {
        &self.variants[(c % self.variants.len() as u64) as usize]
    }

    /// The parity place a lazy write defers for stripe `s` of cycle `c`, if any.
    pub fn background_parity(&self, c: u64, s: usize) -> Option<PlaceId> {
        self.variant(c).background[s]
    }

    /// True when some stripe has a parity that a lazy write can defer.
    pub fn supported(&self) -> bool {
        self.variants[0].background.iter().any(Option::is_some)
    }

    /// XOR groups kept in the foreground (RM2's FPG) in cycle `c`, ascending. Every cycle's
    /// has the minimum size.
    pub fn fpg(&self, c: u64) -> &[usize] {
        &self.variant(c).fpg
    }

    /// XOR groups deferred (RM2's BPG) in cycle `c`, ascending.
    pub fn bpg(&self, c: u64) -> &[usize] {
        &self.variant(c).bpg
    }

    /// How many FPG choices cycles rotate through.
    pub fn variants(&self) -> usize {
        self.variants.len()
    }
}

impl Variant {
    fn check(&self, geo: &Geometry) {
        let healthy = geo.healthy();
        for p in 0..geo.places() {
            if geo.role(p) != Role::Data {
                continue;
            }
            let parity: Vec<usize> = geo
                .place_units(p)
                .iter()
                .map(|&(s, _)| s)
                .filter(|&s| matches!(healthy.stripes[s].code, Code::Xor | Code::PQ))
                .collect();
            assert!(
                parity.is_empty()
                    || parity.iter().any(|&s| {
                        healthy.stripes[s].code == Code::PQ || self.background[s].is_none()
                    }),
                "data place {p} has no foreground parity"
            );
        }
    }
}

/// Exact minimum vertex cover of a graph on `n <= 64` vertices (edges as pairs of one-bit
/// masks) that contains `forced`. Depth-first over the vertices in order: a vertex is either in
/// the cover, or out of it and then all its neighbours are in. Pruned by a lower bound: the
/// vertices decided in (or forced in) so far plus, for the edges among the undecided ones,
/// edges divided by the largest degree.
fn min_vertex_cover(edges: &[(u64, u64)], forced: u64, n: usize) -> u64 {
    assert!(n <= FPG_SEARCH_MAX);
    let mut nb = vec![0u64; n];
    for &(a, b) in edges {
        let (x, y) = (a.trailing_zeros() as usize, b.trailing_zeros() as usize);
        nb[x] |= b;
        nb[y] |= a;
    }
    let all = if n == 64 { u64::MAX } else { (1u64 << n) - 1 };
    struct Search<'a> {
        nb: &'a [u64],
        n: usize,
        best: u64,
        best_len: u32,
    }
    impl Search<'_> {
        fn bound(&self, v: usize, taken: u64) -> u32 {
            let below = if v >= 64 { u64::MAX } else { (1u64 << v) - 1 };
            let mut free = !below & !taken;
            if self.n < 64 {
                free &= (1u64 << self.n) - 1;
            }
            let (mut edges2, mut maxdeg) = (0u32, 0u32);
            let mut f = free;
            while f != 0 {
                let g = f.trailing_zeros() as usize;
                f &= f - 1;
                let d = (self.nb[g] & free).count_ones();
                edges2 += d;
                maxdeg = maxdeg.max(d);
            }
            if maxdeg == 0 {
                0
            } else {
                (edges2 / 2).div_ceil(maxdeg)
            }
        }
        fn go(&mut self, v: usize, cover: u64, forced: u64) {
            let below = if v >= 64 { u64::MAX } else { (1u64 << v) - 1 };
            let pending = forced & !cover & !below;
            let lower = (cover | pending).count_ones() + self.bound(v, cover | forced);
            if lower >= self.best_len {
                return;
            }
            if v == self.n {
                self.best = cover;
                self.best_len = cover.count_ones();
                return;
            }
            let bit = 1u64 << v;
            if forced & bit != 0 {
                self.go(v + 1, cover | bit, forced);
                return;
            }
            // In, unless every neighbour is in already (then v is redundant).
            if self.nb[v] & !(cover | forced) != 0 {
                self.go(v + 1, cover | bit, forced);
            }
            // Out: every neighbour in; the earlier ones were decided already.
            if self.nb[v] & below & !cover == 0 {
                self.go(v + 1, cover, forced | self.nb[v]);
            }
        }
    }
    let mut s = Search {
        nb: &nb,
        n,
        best: all,
        best_len: n as u32 + 1,
    };
    s.go(0, 0, forced & all);
    debug_assert!(edges.iter().all(|&(a, b)| s.best & (a | b) != 0));
    debug_assert_eq!(s.best & forced, forced);
    s.best
}

/// One BPGL entry's in-memory bookkeeping.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Entry {
    /// Bumped every time the stripe is deferred again: a flush planned before then must not
    /// drop the entry.
    seq: u64,
    /// Lazy writes planned against the stripe that have not finished: a flush waits for them.
    in_flight: u32,
}

/// The background parity group list: stripes whose background parity is stale, bounded.
#[derive(Clone, Debug, Default)]
pub struct Bpgl {
    capacity: usize,
    entries: BTreeMap<StripeId, Entry>,
    next_seq: u64,
    /// Times the whole list was replaced (restored from a record): every plan made while it
    /// assumed some background parity stale is stale then.
    removals: u64,
    /// Entries dropped so far (by flushes and rebuilds), counted per bucket of cycles
    /// (`cycle % REMOVAL_BUCKETS`; empty until the first): a plan made while it assumed some
    /// background parity of its cycle stale is current only while neither this count of its
    /// cycle nor `removals` has moved (see [`crate::Plan::bpgl_removals`]). Counted for the
    /// whole list, every flush of another cycle made waiting plans stale: lazy RM2 over 8
    /// members under random writes, its list full, re-planned 1,329 of 2,552 writes in the
    /// simulator while they waited for the list's record.
    removals_by_cycle: Vec<u64>,
}

/// Buckets of cycles [`Bpgl`] counts its dropped entries in (a plan of one cycle goes stale
/// only when an entry of a cycle in its bucket is dropped: rarely of another).
const REMOVAL_BUCKETS: usize = 1024;

/// Magic of a persisted BPGL slot.
pub const BPGL_MAGIC: &[u8; 8] = b"RFBPGL\0\0";
/// Format version of a persisted BPGL slot.
pub const BPGL_VERSION: u32 = 1;
/// Bytes of one persisted slot (two slots, written alternately, follow the superblock).
pub const BPGL_SLOT_BYTES: usize = 128 * 1024;
const BPGL_HEADER: usize = 48;
/// Largest BPGL a slot holds.
pub const BPGL_MAX_CAPACITY: usize = (BPGL_SLOT_BYTES - BPGL_HEADER - 4) / 12;
/// The bound used when none is given.
pub const BPGL_DEFAULT_CAPACITY: usize = 1024;
/// A persisted slot's frame ([`crate::record`]), padded to whole 4 KiB blocks.
const BPGL_FRAME: Frame = Frame {
    magic: BPGL_MAGIC,
    version: BPGL_VERSION,
    header_bytes: BPGL_HEADER,
    max_bytes: BPGL_SLOT_BYTES,
    align: 4096,
};

/// A persisted BPGL slot, decoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BpglRecord {
    /// Array UUID (a slot of another array is ignored).
    pub uuid: [u8; 16],
    /// Write sequence: the valid slot with the highest sequence on any member is current.
    pub sequence: u64,
    /// The list's bound.
    pub capacity: u32,
    /// The listed stripes, ascending.
    pub stripes: Vec<StripeId>,
}

impl BpglRecord {
    /// Encodes the slot: the used bytes only, padded with zeros to a multiple of 4096.
    ///
    /// ```text
    /// offset  size  field
    ///      0     8  magic "RFBPGL\0\0"
    ///      8     4  version (1)
    ///     12     4  encoded length in bytes before padding (header + entries + CRC)
    ///     16    16  array UUID
    ///     32     8  sequence (bumped on every write; highest valid slot wins)
    ///     40     4  capacity (the list's bound)
    ///     44     4  entry count E (<= capacity)
    ///     48  E*12  entries: cycle u64, stripe u32, ascending
    ///  48+12E    4  CRC-32C of every byte before it
    /// ```
    pub fn encode(&self) -> Vec<u8> {
        assert!(self.stripes.len() <= BPGL_MAX_CAPACITY, "BPGL too long");
        let mut b = BPGL_FRAME.begin(Self::bytes_for(self.stripes.len()));
        b.extend_from_slice(&self.uuid);
        b.extend_from_slice(&self.sequence.to_le_bytes());
        b.extend_from_slice(&self.capacity.to_le_bytes());
        b.extend_from_slice(&(self.stripes.len() as u32).to_le_bytes());
        for s in &self.stripes {
            b.extend_from_slice(&s.cycle.to_le_bytes());
            b.extend_from_slice(&(s.stripe as u32).to_le_bytes());
        }
        BPGL_FRAME.seal(b)
    }

    /// Bytes [`BpglRecord::encode`] writes for a list of `stripes` entries (what a record
    /// write costs the simulator).
    pub fn bytes_for(stripes: usize) -> usize {
        BPGL_FRAME.padded(BPGL_HEADER + 12 * stripes + 4)
    }

    /// Decodes a slot; `None` when it holds no valid record (never written, torn, damaged or
    /// of a future version).
    pub fn decode(b: &[u8]) -> Option<BpglRecord> {
        let r = BPGL_FRAME.open(b).ok()?;
        let count = r.u32_at(44) as usize;
        if r.len() != BPGL_HEADER + 12 * count + 4 || count > BPGL_MAX_CAPACITY {
            return None;
        }
        let mut uuid = [0u8; 16];
        uuid.copy_from_slice(&r.bytes()[16..32]);
        let stripes = (0..count)
            .map(|i| StripeId {
                cycle: r.u64_at(BPGL_HEADER + 12 * i),
                stripe: r.u32_at(BPGL_HEADER + 12 * i + 8) as usize,
            })
            .collect();
        Some(BpglRecord {
            uuid,
            sequence: r.u64_at(32),
            capacity: r.u32_at(40),
            stripes,
        })
    }

    /// Bytes to read to decode a slot whose first 4096 bytes are `head` (`None`: no record).
    pub fn encoded_len(head: &[u8]) -> Option<usize> {
        let len = BPGL_FRAME.peek(head)?.len;
        (len <= BPGL_SLOT_BYTES).then_some(BPGL_FRAME.padded(len))
    }
}

impl Bpgl {
    /// An empty list holding at most `capacity` stripes (0: lazy writes defer nothing).
    pub fn new(capacity: usize) -> Bpgl {
        Bpgl {
            capacity: capacity.min(BPGL_MAX_CAPACITY),
            entries: BTreeMap::new(),
            next_seq: 1,
            removals: 0,
            removals_by_cycle: Vec::new(),
        }
    }
    /// What a plan of cycle `c` records of the list's removals ([`crate::Plan::bpgl_removals`]):
    /// a count that grows whenever an entry of `c` (or of a cycle sharing its bucket) is
    /// dropped or the whole list is replaced.
    pub fn removals_of(&self, c: u64) -> u64 {
        let bucket = (c % REMOVAL_BUCKETS as u64) as usize;
        self.removals + self.removals_by_cycle.get(bucket).copied().unwrap_or(0)
    }
    /// An entry of cycle `c` was dropped.
    fn removed(&mut self, c: u64) {
        if self.removals_by_cycle.is_empty() {
            self.removals_by_cycle = vec![0; REMOVAL_BUCKETS];
        }
        self.removals_by_cycle[(c % REMOVAL_BUCKETS as u64) as usize] += 1;
    }
    /// The bound.
    pub fn capacity(&self) -> usize {
        self.capacity
    }
    /// Stripes listed.
    pub fn len(&self) -> usize {
        self.entries.len()
    }
    /// Nothing deferred.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
    /// Whether stripe `s` is listed.
    pub fn contains(&self, s: StripeId) -> bool {
        self.entries.contains_key(&s)
    }
    /// Listed stripes, ascending.
    pub fn stripes(&self) -> impl Iterator<Item = StripeId> + '_ {
        self.entries.keys().copied()
    }
    /// Listed stripes of cycle `c`.
    pub fn stripes_of(&self, c: u64) -> impl Iterator<Item = usize> + '_ {
        self.entries
            .range(
                StripeId {
                    cycle: c,
                    stripe: 0,
                }..StripeId {
                    cycle: c,
                    stripe: usize::MAX,
                },
            )
            .map(|(s, _)| s.stripe)
    }
    /// Cycles with at least one listed stripe that no lazy write is in flight on, ascending,
    /// at most `max` of them: what a flush works on next.
    pub fn flushable_cycles(&self, max: usize) -> Vec<u64> {
        let mut out: Vec<u64> = Vec::new();
        for (s, e) in &self.entries {
            if out.len() >= max {
                break;
            }
            if e.in_flight == 0 && out.last() != Some(&s.cycle) {
                out.push(s.cycle);
            }
        }
        out
    }
    /// The persistent form.
    pub fn record(&self, uuid: [u8; 16], sequence: u64) -> BpglRecord {
        BpglRecord {
            uuid,
            sequence,
            capacity: self.capacity as u32,
            stripes: self.stripes().collect(),
        }
    }
    /// Restores the list from its persistent form (nothing in flight).
    pub fn from_record(r: &BpglRecord) -> Bpgl {
        let mut b = Bpgl::new(r.capacity as usize);
        for &s in &r.stripes {
            b.insert(s);
        }
        b.capacity = b.capacity.max(b.len());
        b
    }
    fn insert(&mut self, s: StripeId) -> bool {
        let seq = self.next_seq;
        self.next_seq += 1;
        match self.entries.get_mut(&s) {
            Some(e) => {
                e.seq = seq;
                false
            }
            None => {
                self.entries.insert(s, Entry { seq, in_flight: 0 });
                true
            }
        }
    }
}

impl ArrayState {
    /// The background parity group list.
    pub fn bpgl(&self) -> &Bpgl {
        &self.bpgl
    }
    /// Which parity each stripe defers under lazy parity.
    pub fn lazy_groups(&self) -> &LazyGroups {
        &self.lazy
    }
    /// Sets the list's bound (it never drops entries: a smaller bound only stops new ones).
    pub fn set_bpgl_capacity(&mut self, capacity: usize) {
        self.bpgl.capacity = capacity.min(BPGL_MAX_CAPACITY);
    }
    /// Replaces the list by a persisted one (assembly after a crash).
    pub fn restore_bpgl(&mut self, r: &BpglRecord) {
        let cap = self.bpgl.capacity;
        let removals = self.bpgl.removals;
        let by_cycle = std::mem::take(&mut self.bpgl.removals_by_cycle);
        self.bpgl = Bpgl::from_record(r);
        self.bpgl.capacity = self.bpgl.capacity.max(cap);
        // Whatever was planned against the list before is stale now (the counts only grow,
        // so no plan's count comes round again).
        self.bpgl.removals = removals + 1;
        self.bpgl.removals_by_cycle = by_cycle;
    }
    /// Takes over `other`'s list (a state rebuilt from compacted history keeps it).
    pub fn adopt_bpgl(&mut self, other: &ArrayState) {
        self.bpgl = other.bpgl.clone();
    }
    /// Records the stripes a lazy write defers (from [`LazyWrite::deferred`]) and counts the
    /// write as in flight on them. Returns how many were not listed before (a durable
    /// executor persists the list when this is non-zero).
    pub fn defer(&mut self, stripes: &[StripeId]) -> usize {
        let mut added = 0;
        for &s in stripes {
            if self.bpgl.insert(s) {
                added += 1;
            }
            self.bpgl.entries.get_mut(&s).expect("inserted").in_flight += 1;
        }
        added
    }
    /// The lazy write that deferred `stripes` has finished (or was abandoned).
    pub fn deferred_write_done(&mut self, stripes: &[StripeId]) {
        for s in stripes {
            if let Some(e) = self.bpgl.entries.get_mut(s) {
                e.in_flight = e.in_flight.saturating_sub(1);
            }
        }
    }
    /// A flush plan's writes are durable: drop its entries unless re-deferred since.
    pub fn flush_done(&mut self, entries: &[(StripeId, u64)]) -> usize {
        let mut removed = 0;
        for (s, seq) in entries {
            if self
                .bpgl
                .entries
                .get(s)
                .is_some_and(|e| e.seq == *seq && e.in_flight == 0)
            {
                self.bpgl.entries.remove(s);
                self.bpgl.removed(s.cycle);
                removed += 1;
            }
        }
        removed
    }
    /// How many more member failures, whichever they are, the array survives now without
    /// losing data: the largest `k` such that failing any `k` of the members still present
    /// leaves every stripe of every cycle reconstructible in the layout it is in now. Computed
    /// from the layout and the state, never from the scheme's nominal tolerance alone: a
    /// replacement that is not rebuilt yet holds nothing for the cycles still in the old
    /// layout (a RAID5 with a replaced member survives no further failure), a rebuild into
    /// spare space restores redundancy before any replacement (a RAID+ rebuilt into its spare
    /// space survives another failure), a stripe whose background parity is deferred (lazy
    /// parity) is protected by its foreground parity only. 0 when data is already lost.
    ///
    /// Every `k`-subset of present members is checked against every layout generation a
    /// cycle is in (and every cycle with deferred parity): `C(members, k)` reconstruction
    /// schedules for each `k` up to the scheme's tolerance (a healthy array's).
    pub fn fault_tolerance(&self, geo: &Geometry) -> usize {
        if self.data_lost(geo) {
            return 0;
        }
        // A layout derived by rebuilds never protects better than the healthy one.
        let bound = geo.scheme().tolerance();
        let present: Vec<Disk> = (0..geo.disks() as Disk)
            .filter(|d| !self.failed().contains(d))
            .collect();
        let gens: Vec<u32> = (0..self.generations().len() as u32)
            .filter(|&g| self.cycles_in_gen[g as usize] > 0)
            .collect();
        // The common case, a healthy array: every cycle in the healthy layout, every member
        // readable, nothing deferred. The scheme's tolerance is that layout's by definition.
        let healthy = &self.generations()[0].cycle;
        if self.bpgl.is_empty()
            && gens.iter().all(|&g| {
                self.impaired_slice(g).is_empty()
                    && std::sync::Arc::ptr_eq(&self.generations()[g as usize].cycle, healthy)
            })
        {
            return bound;
        }
        // Every place in one stripe and nothing deferred: each stripe stands or falls on its
        // own, and the count is per stripe ([`ArrayState::fewest_failures_losing_data`]).
        // The subsets below are `C(members, k)` reconstruction schedules: on 255 members at
        // RAID6 with a member failed, 32,385 schedules of 2,550 stripes, 4.9 s of `status`.
        if self.bpgl.is_empty() && (0..geo.places()).all(|p| geo.place_units(p).len() == 1) {
            let fewest = self.fewest_failures_losing_data(geo, &gens);
            let t = bound.min(present.len()).min(fewest.saturating_sub(1));
            // Small arrays (every test's) check the count against the schedules.
            debug_assert!(
                geo.disks() > 16 || t == self.tolerance_by_subsets(geo, &gens, bound, &present),
                "per-stripe tolerance {t} disagrees with the reconstruction schedules"
            );
            return t;
        }
        self.tolerance_by_subsets(geo, &gens, bound, &present)
    }

    /// [`ArrayState::fault_tolerance`] by trying every subset of `present` of each size up to
    /// `bound` against the reconstruction schedules of `gens` (and of the cycles with deferred
    /// parity).
    fn tolerance_by_subsets(
        &self,
        geo: &Geometry,
        gens: &[u32],
        bound: usize,
        present: &[Disk],
    ) -> usize {
        let survives = |extra: &[Disk]| self.survives_losing_in(geo, gens, extra);
        let mut t = 0;
        for k in 1..=bound.min(present.len()) {
            let mut idx: Vec<usize> = (0..k).collect();
            loop {
                let subset: Vec<Disk> = idx.iter().map(|&i| present[i]).collect();
                if !survives(&subset) {
                    return t;
                }
                // Next k-combination of 0..present.len(), in lexicographic order.
                let Some(i) = (0..k).rev().find(|&i| idx[i] < present.len() - k + i) else {
                    break;
                };
                idx[i] += 1;
                for j in i + 1..k {
                    idx[j] = idx[j - 1] + 1;
                }
            }
            t = k;
        }
        t
    }
    /// The fewest members still readable whose failure loses a stripe of a cycle in one of
    /// `gens`, when every place belongs to one stripe (so a stripe is lost exactly when more of
    /// its units are unreadable than its code corrects: none for plain striping, one for XOR,
    /// two for P+Q, all copies but one for a mirror); `usize::MAX` when no failure can. Per
    /// stripe: the units already unreadable in its generation use up part of what its code
    /// corrects, and the rest is taken by the members holding most of its other units first.
    /// `fault_tolerance` is one less (tests/fault_tolerance.rs checks it against the bytes).
    fn fewest_failures_losing_data(&self, geo: &Geometry, gens: &[u32]) -> usize {
        let mut fewest = usize::MAX;
        let mut per_disk: Vec<(Disk, usize)> = Vec::new();
        for &g in gens {
            let layout = &self.generations()[g as usize].cycle;
            let impaired = self.impaired_slice(g);
            let locs = self.place_locs(g);
            for (si, stripe) in layout.stripes.iter().enumerate() {
                let places = geo.stripe_places(si);
                let corrects = match stripe.code {
                    Code::None => 0,
                    Code::Xor => 1,
                    Code::PQ => 2,
                    Code::Mirror => places.len().saturating_sub(1),
                };
                per_disk.clear();
                let mut lost = 0usize;
                for &p in places {
                    let d = locs[p].disk;
                    if impaired.contains(&d) {
                        lost += 1;
                    } else {
                        match per_disk.iter_mut().find(|(x, _)| *x == d) {
                            Some((_, n)) => *n += 1,
                            None => per_disk.push((d, 1)),
                        }
                    }
                }
                if lost > corrects {
                    return 0;
                }
                per_disk.sort_unstable_by(|a, b| b.1.cmp(&a.1));
                let mut more = 0;
                let mut members = 0;
                for &(_, n) in per_disk.iter() {
                    more += n;
                    members += 1;
                    if lost + more > corrects {
                        fewest = fewest.min(members);
                        break;
                    }
                }
            }
        }
        fewest
    }

    /// Whether every byte stays readable if members `extra` fail too (on top of those failed
    /// now): what `raidforge fail` asks before failing a member.
    pub fn survives_losing(&self, geo: &Geometry, extra: &[Disk]) -> bool {
        let gens: Vec<u32> = (0..self.generations().len() as u32)
            .filter(|&g| self.cycles_in_gen[g as usize] > 0)
            .collect();
        self.survives_losing_in(geo, &gens, extra)
    }

    /// [`ArrayState::survives_losing`] for the generations `gens` cycles are in.
    fn survives_losing_in(&self, geo: &Geometry, gens: &[u32], extra: &[Disk]) -> bool {
        let mut stale_cycles: Vec<u64> = self.bpgl.entries.keys().map(|s| s.cycle).collect();
        stale_cycles.dedup();
        gens.iter()
            .all(|&g| crate::recon::recoverable_without(geo, self, g, extra, Vec::new()))
            && stale_cycles.iter().all(|&c| {
                crate::recon::recoverable_without(
                    geo,
                    self,
                    self.cycle_generation(c),
                    extra,
                    self.stale_places(c),
                )
            })
    }
    /// Lazy writes may defer parity now: nothing failed, every cycle in the target layout.
    pub fn lazy_allowed(&self) -> bool {
        self.failed().is_empty() && self.all_clean() && self.lazy.supported()
    }
    pub(crate) fn clear_cycle_bpgl(&mut self, c: u64) {
        let listed: Vec<StripeId> = self
            .bpgl
            .stripes_of(c)
            .map(|stripe| StripeId { cycle: c, stripe })
            .collect();
        for s in listed {
            if self.bpgl.entries[&s].in_flight == 0 {
                self.bpgl.entries.remove(&s);
                self.bpgl.removed(c);
            }
        }
    }
    /// Background parity places of cycle `c` that are stale.
    pub(crate) fn stale_places(&self, c: u64) -> Vec<PlaceId> {
        if self.bpgl.is_empty() {
            return Vec::new();
        }
        self.bpgl
            .stripes_of(c)
            .filter_map(|s| self.lazy.background_parity(c, s))
            .collect()
    }
}

/// What [`plan_write_lazy`] returns.
#[derive(Clone, Debug)]
pub struct LazyWrite {
    /// One plan per cycle touched, as [`crate::plan_write`].
    pub plans: Vec<Plan>,
    /// Stripes whose background parity the plans leave stale: pass to
    /// [`ArrayState::defer`] before running the plans.
    pub deferred: Vec<StripeId>,
}

/// Plans a write under the lazy parity policy: like [`crate::plan_write`], but a touched stripe
/// with a background parity ([`LazyGroups`]) has only its foreground parity updated and is
/// returned in [`LazyWrite::deferred`]. Falls back to eager planning (nothing deferred) when
/// the array is not healthy and clean ([`ArrayState::lazy_allowed`]) and, per cycle, when the
/// list has no room for the cycle's new entries.
pub fn plan_write_lazy(
    geo: &Geometry,
    state: &ArrayState,
    offset: u64,
    len: u64,
    policy: &dyn ModePolicy,
) -> Result<LazyWrite, CoreError> {
    policy.check(geo.disks())?;
    let parts = crate::planner::split(geo, offset, len)?;
    let lazy = state.lazy_allowed();
    let mut plans = Vec::with_capacity(parts.len());
    let mut deferred = Vec::new();
    let mut room = state.bpgl.capacity.saturating_sub(state.bpgl.len());
    for part in &parts {
        let mut defer: Vec<PlaceId> = Vec::new();
        let mut ids: Vec<StripeId> = Vec::new();
        if lazy {
            let mut stripes: Vec<usize> = part
                .places()
                .flat_map(|p| geo.place_units(p).iter().map(|&(s, _)| s))
                .filter(|&s| state.lazy.background_parity(part.cycle, s).is_some())
                .collect();
            stripes.sort_unstable();
            stripes.dedup();
            let new = stripes
                .iter()
                .filter(|&&s| {
                    !state.bpgl.contains(StripeId {
                        cycle: part.cycle,
                        stripe: s,
                    })
                })
                .count();
            if new <= room {
                room -= new;
                for s in stripes {
                    defer.push(
                        state
                            .lazy
                            .background_parity(part.cycle, s)
                            .expect("filtered"),
                    );
                    ids.push(StripeId {
                        cycle: part.cycle,
                        stripe: s,
                    });
                }
            }
        }
        plans.push(crate::planner::plan_write_part(
            geo, state, part, policy, &defer,
        )?);
        deferred.extend(ids);
    }
    Ok(LazyWrite { plans, deferred })
}

/// A flush plan: recomputes the background parity of the listed stripes of one cycle.
#[derive(Clone, Debug)]
pub struct FlushPlan {
    /// The plan (kind [`PlanKind::Flush`]); run it like any plan.
    pub plan: Plan,
    /// The entries it covers with their sequence numbers: pass to [`ArrayState::flush_done`].
    pub entries: Vec<(StripeId, u64)>,
}

/// Plans recomputing the background parities of cycle `c`'s listed stripes with no lazy write
/// in flight; `None` when there are none. Stale parities on missing members are not written
/// (the rebuild recomputes them); their entries are covered all the same. Lost data units are
/// reconstructed through the foreground parities first (one failure is tolerated).
pub fn plan_flush_cycle(
    geo: &Geometry,
    state: &ArrayState,
    c: u64,
) -> Result<Option<FlushPlan>, CoreError> {
    if c >= geo.cycles() {
        return Err(CoreError::OutOfRange {
            offset: c,
            len: 1,
            capacity: geo.cycles(),
        });
    }
    let entries: Vec<(StripeId, u64)> = state
        .bpgl
        .entries
        .range(
            StripeId {
                cycle: c,
                stripe: 0,
            }..StripeId {
                cycle: c,
                stripe: usize::MAX,
            },
        )
        .filter(|(_, e)| e.in_flight == 0)
        .map(|(s, e)| (*s, e.seq))
        .collect();
    if entries.is_empty() {
        return Ok(None);
    }
    let view = View::current(geo, state, c);
    let gen = state.cycle_generation(c);
    let mut b = Builder::new(0);
    let targets: Vec<PlaceId> = entries
        .iter()
        .filter_map(|(s, _)| state.lazy.background_parity(c, s.stripe))
        .filter(|&p| state.member_available(view.loc(p).disk, gen))
        .collect();
    if !targets.is_empty() {
        let mut vals = Values::new(0, geo.chunk_bytes());
        vals.acquire(&view, &mut b, &targets)?;
        for &p in &targets {
            b.write(geo, c, view.loc(p), 0, vals.get(p));
        }
    }
    for (s, _) in &entries {
        b.stripes.insert(s.stripe);
    }
    Ok(Some(FlushPlan {
        plan: b.finish(PlanKind::Flush, &view, state, 0, Vec::new()),
        entries,
    }))
}

/// What the idle detector advises.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlushAdvice {
    /// Leave the list alone (foreground I/O is running or recent, and the list has room).
    Wait,
    /// The array is idle: flush.
    Idle,
    /// The list reached its bound: flush now even though foreground I/O is running, until it
    /// is back under the low watermark.
    Full,
}

/// Quiet time after the last client request before a served pool processes deferred parity
/// (what the simulator's `LazyModel::Engine` assumes too).
pub const FLUSH_IDLE_AFTER_NS: u64 = 200_000_000;
/// How often a served pool's flusher asks the [`IdleDetector`]; each time it says flush, one
/// step of at most [`FLUSH_STEP_CYCLES`] cycles runs (their flush plans side by side), and the
/// shorter list is recorded.
pub const FLUSH_TICK_NS: u64 = 20_000_000;
/// Cycles one flush step processes (a step holds their stripe locks).
pub const FLUSH_STEP_CYCLES: usize = 8;

/// Decides when deferred parity is processed: when the array has been idle (no foreground
/// request in flight and none finished for `idle_after_ns`), or when the list is full.
///
/// Hysteresis both ways: the array becomes idle only after a quiet period, and once flushing
/// because idle it keeps going while no foreground request arrives (a request ends idleness at
/// once; another quiet period is then needed); a flush because the list is full starts at the
/// bound and continues until the list is down to `low_watermark` (half the bound by default),
/// so a full list does not flip between flushing and not on every write. Times are
/// nanoseconds on the caller's clock (the simulated one, or a monotonic clock).
#[derive(Clone, Debug)]
pub struct IdleDetector {
    idle_after_ns: u64,
    in_flight: u64,
    last_activity_ns: u64,
    draining: bool,
    low_watermark_fraction: (usize, usize),
}

impl IdleDetector {
    /// A detector that calls the array idle after `idle_after_ns` without foreground I/O.
    pub fn new(idle_after_ns: u64) -> IdleDetector {
        IdleDetector {
            idle_after_ns,
            in_flight: 0,
            last_activity_ns: 0,
            draining: false,
            low_watermark_fraction: (1, 2),
        }
    }
    /// The quiet period.
    pub fn idle_after_ns(&self) -> u64 {
        self.idle_after_ns
    }
    /// A foreground request started at `now`.
    #[inline]
    pub fn foreground_start(&mut self, now_ns: u64) {
        self.in_flight += 1;
        self.last_activity_ns = self.last_activity_ns.max(now_ns);
    }
    /// A foreground request finished at `now`.
    #[inline]
    pub fn foreground_end(&mut self, now_ns: u64) {
        debug_assert!(self.in_flight > 0, "foreground_end without a start");
        self.in_flight = self.in_flight.saturating_sub(1);
        self.last_activity_ns = self.last_activity_ns.max(now_ns);
    }
    /// Whether the array is idle at `now`.
    pub fn is_idle(&self, now_ns: u64) -> bool {
        self.in_flight == 0 && now_ns.saturating_sub(self.last_activity_ns) >= self.idle_after_ns
    }
    /// When the array becomes idle if nothing else happens (`None` while I/O is in flight).
    pub fn idle_at(&self) -> Option<u64> {
        (self.in_flight == 0).then(|| self.last_activity_ns + self.idle_after_ns)
    }
    /// What to do at `now` with `len` entries listed under bound `capacity`.
    pub fn advise(&mut self, now_ns: u64, len: usize, capacity: usize) -> FlushAdvice {
        if len == 0 {
            self.draining = false;
            return FlushAdvice::Wait;
        }
        let low = capacity * self.low_watermark_fraction.0 / self.low_watermark_fraction.1;
        if len >= capacity.max(1) {
            self.draining = true;
        } else if len <= low {
            self.draining = false;
        }
        if self.is_idle(now_ns) {
            FlushAdvice::Idle
        } else if self.draining {
            FlushAdvice::Full
        } else {
            FlushAdvice::Wait
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vertex_cover_is_minimum_on_small_graphs() {
        // A path a-b-c: {b}. A triangle: two vertices. A 6-cycle: three.
        let e = |a: u32, b: u32| (1u64 << a, 1u64 << b);
        assert_eq!(min_vertex_cover(&[e(0, 1), e(1, 2)], 0, 3), 0b010);
        assert_eq!(
            min_vertex_cover(&[e(0, 1), e(1, 2), e(0, 2)], 0, 3).count_ones(),
            2
        );
        let ring: Vec<_> = (0..6).map(|i| e(i, (i + 1) % 6)).collect();
        assert_eq!(min_vertex_cover(&ring, 0, 6).count_ones(), 3);
        // Forced vertices stay in.
        assert_eq!(min_vertex_cover(&[e(0, 1), e(1, 2)], 0b001, 3), 0b011);
    }

    #[test]
    fn vertex_cover_matches_brute_force_on_random_graphs() {
        let mut x = 0x1234_5678_9abc_def0u64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for _ in 0..400 {
            let n = 1 + (next() % 10) as usize;
            let mut edges = Vec::new();
            for a in 0..n {
                for b in a + 1..n {
                    if next() % 3 == 0 {
                        edges.push((1u64 << a, 1u64 << b));
                    }
                }
            }
            let forced = next() & next() & ((1u64 << n) - 1);
            let is_cover =
                |c: u64| c & forced == forced && edges.iter().all(|&(a, b)| c & (a | b) != 0);
            let brute = (0..1u64 << n)
                .filter(|&c| is_cover(c))
                .map(|c| c.count_ones())
                .min()
                .unwrap();
            let got = min_vertex_cover(&edges, forced, n);
            assert!(
                is_cover(got),
                "not a cover: {got:b} of {edges:?} forced {forced:b}"
            );
            assert_eq!(
                got.count_ones(),
                brute,
                "n {n} edges {edges:?} forced {forced:b}"
            );
        }
    }

    #[test]
    fn bpgl_record_round_trip_and_damage() {
        let r = BpglRecord {
            uuid: [7; 16],
            sequence: 42,
            capacity: 100,
            stripes: vec![
                StripeId {
                    cycle: 0,
                    stripe: 3,
                },
                StripeId {
                    cycle: 9,
                    stripe: 1,
                },
            ],
        };
        let b = r.encode();
        assert_eq!(b.len(), 4096);
        assert_eq!(BpglRecord::encoded_len(&b), Some(4096));
        assert_eq!(BpglRecord::decode(&b), Some(r.clone()));
        for at in [0, 9, 20, 33, 50, 71] {
            let mut d = b.clone();
            d[at] ^= 1;
            assert_eq!(BpglRecord::decode(&d), None, "damage at byte {at}");
        }
        assert_eq!(BpglRecord::decode(&[0u8; 4096]), None);
    }

    #[test]
    fn idle_detector_has_hysteresis() {
        let ms = 1_000_000;
        let mut d = IdleDetector::new(50 * ms);
        assert_eq!(d.advise(0, 0, 10), FlushAdvice::Wait);
        d.foreground_start(0);
        assert_eq!(
            d.advise(100 * ms, 5, 10),
            FlushAdvice::Wait,
            "I/O in flight"
        );
        d.foreground_end(100 * ms);
        assert_eq!(
            d.advise(120 * ms, 5, 10),
            FlushAdvice::Wait,
            "quiet too short"
        );
        assert_eq!(d.idle_at(), Some(150 * ms));
        assert_eq!(d.advise(150 * ms, 5, 10), FlushAdvice::Idle);
        // A request ends idleness at once, and a new quiet period is needed.
        d.foreground_start(160 * ms);
        d.foreground_end(161 * ms);
        assert_eq!(d.advise(170 * ms, 5, 10), FlushAdvice::Wait);
        // Full: flush while busy until down to half the bound.
        d.foreground_start(171 * ms);
        assert_eq!(d.advise(172 * ms, 10, 10), FlushAdvice::Full);
        assert_eq!(
            d.advise(173 * ms, 7, 10),
            FlushAdvice::Full,
            "above low mark"
        );
        assert_eq!(d.advise(174 * ms, 5, 10), FlushAdvice::Wait, "at low mark");
        assert_eq!(
            d.advise(175 * ms, 8, 10),
            FlushAdvice::Wait,
            "not full again"
        );
    }
}
