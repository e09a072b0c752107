//! The machinery every planner shares: a view of one cycle in one layout generation (where each
//! place is, whether it is available), a plan builder, and the reconstruction of lost places'
//! values by peeling across the cycle's stripes.
//!
//! Reconstruction works on one byte range `R = [ra, rb)` of the chunk at a time (the same range
//! for every place of the cycle): [`Values`] maps places to slices holding their value over `R`.

use std::collections::BTreeSet;

use crate::fxhash::FxHashMap;

use layout::{Code, Cycle, Disk, Loc, Role};

use crate::array::{ArrayState, Geometry, PlaceId, StripeId};
use crate::plan::{MemberIo, Op, Plan, PlanKind, Slice};
use crate::CoreError;

/// Cycle `c` as laid out in generation `gen`.
pub(crate) struct View<'a> {
    pub geo: &'a Geometry,
    pub c: u64,
    pub layout: &'a Cycle,
    /// Members that hold nothing valid for this generation (failed, or replaced later); empty
    /// in the common, healthy case. A handful at most, so availability is looked up per place
    /// rather than tabulated for the whole cycle on every plan (a RAID+ cycle over 59 disks
    /// has 24,000 places).
    pub impaired: &'a [Disk],
    /// Position of every place in this generation (`ArrayState`'s table).
    locs: &'a [Loc],
    /// Places whose value on the member is stale (deferred background parities, lazy parity):
    /// never read, reconstructed when needed. Empty unless updates are deferred in this cycle.
    stale: Vec<PlaceId>,
}

impl<'a> View<'a> {
    /// Cycle `c` in the generation it is laid out in now.
    pub fn current(geo: &'a Geometry, state: &'a ArrayState, c: u64) -> View<'a> {
        let mut v = Self::in_generation(geo, state, c, state.cycle_generation(c));
        v.stale = state.stale_places(c);
        v
    }

    /// [`View::current`], with `extra` places treated as stale too (what a lazy write leaves
    /// behind).
    pub fn current_deferring(
        geo: &'a Geometry,
        state: &'a ArrayState,
        c: u64,
        extra: &[PlaceId],
    ) -> View<'a> {
        let mut v = Self::current(geo, state, c);
        v.stale.extend_from_slice(extra);
        v
    }

    pub fn in_generation(geo: &'a Geometry, state: &'a ArrayState, c: u64, gen: u32) -> View<'a> {
        let layout: &Cycle = &state.generations()[gen as usize].cycle;
        View {
            geo,
            c,
            layout,
            impaired: state.impaired_slice(gen),
            locs: state.place_locs(gen),
            stale: Vec::new(),
        }
    }

    /// Position of place `p` (offset in rows within the cycle).
    pub fn loc(&self, p: PlaceId) -> Loc {
        debug_assert_eq!(self.locs[p], loc_of(self.geo, self.layout, p));
        self.locs[p]
    }

    pub fn available(&self, p: PlaceId) -> bool {
        (self.impaired.is_empty() || !self.impaired.contains(&self.loc(p).disk))
            && (self.stale.is_empty() || !self.stale.contains(&p))
    }

    pub fn any_lost(&self) -> bool {
        (!self.impaired.is_empty() || !self.stale.is_empty())
            && (0..self.geo.places()).any(|p| !self.available(p))
    }

    /// Member and byte offset of byte `in_chunk` of place `p`.
    pub fn member_offset(&self, p: PlaceId, in_chunk: u64) -> (Disk, u64) {
        let l = self.loc(p);
        (l.disk, self.geo.member_offset(self.c, l, in_chunk))
    }
}

fn loc_of(geo: &Geometry, layout: &Cycle, p: PlaceId) -> Loc {
    let (s, u) = geo.place_units(p)[0];
    layout.stripes[s].units[u].loc()
}

/// Accumulates a plan.
pub(crate) struct Builder {
    pub buffers: Vec<usize>,
    pub reads: Vec<MemberIo>,
    pub ops: Vec<Op>,
    pub writes: Vec<MemberIo>,
    pub stripes: StripeSet,
}

/// The stripes a plan locks: collected in any order with repeats, sorted and deduplicated once
/// in [`Builder::finish`] (a `BTreeSet` allocated a node per plan and showed in profiles).
#[derive(Default)]
pub(crate) struct StripeSet(Vec<usize>);

impl StripeSet {
    pub fn insert(&mut self, s: usize) {
        if self.0.last() != Some(&s) {
            self.0.push(s);
        }
    }
    pub fn extend(&mut self, it: impl IntoIterator<Item = usize>) {
        for s in it {
            self.insert(s);
        }
    }
    fn into_sorted(mut self) -> Vec<usize> {
        if self.0.windows(2).any(|w| w[0] >= w[1]) {
            self.0.sort_unstable();
            self.0.dedup();
        }
        self.0
    }
}

impl Builder {
    pub fn new(user_len: usize) -> Builder {
        Builder {
            buffers: vec![user_len],
            reads: Vec::new(),
            ops: Vec::new(),
            writes: Vec::new(),
            stripes: StripeSet::default(),
        }
    }

    /// A new scratch buffer of `len` bytes.
    pub fn alloc(&mut self, len: usize) -> Slice {
        self.buffers.push(len);
        Slice::whole(self.buffers.len() - 1, len)
    }

    /// Reads bytes `[a, a + dst.len)` of place `p` into `dst`.
    pub fn read(&mut self, view: &View<'_>, p: PlaceId, a: u64, dst: Slice) {
        assert!(view.available(p), "planner read an unavailable place {p}");
        let (member, offset_bytes) = view.member_offset(p, a);
        self.reads.push(MemberIo {
            member,
            offset_bytes,
            data: dst,
        });
    }

    /// Writes `src` to member position `loc` of cycle `c` at byte `a` of the chunk.
    pub fn write(&mut self, geo: &Geometry, c: u64, loc: Loc, a: u64, src: Slice) {
        self.writes.push(MemberIo {
            member: loc.disk,
            offset_bytes: geo.member_offset(c, loc, a),
            data: src,
        });
    }

    /// Locks every stripe holding place `p`.
    pub fn lock_place(&mut self, geo: &Geometry, p: PlaceId) {
        self.stripes
            .extend(geo.place_units(p).iter().map(|(s, _)| *s));
    }

    pub fn finish(
        self,
        kind: PlanKind,
        view: &View<'_>,
        state: &ArrayState,
        user_offset: u64,
        modes: Vec<(usize, crate::WriteMode)>,
    ) -> Plan {
        let plan = Plan {
            kind,
            cycle: view.c,
            layout_generation: state.cycle_generation(view.c),
            state_generation: state.generation(),
            user_offset,
            buffers: self.buffers,
            reads: self.reads,
            ops: self.ops,
            writes: self.writes,
            locks: self
                .stripes
                .into_sorted()
                .into_iter()
                .map(|stripe| StripeId {
                    cycle: view.c,
                    stripe,
                })
                .collect(),
            modes,
            bpgl_removals: (!view.stale.is_empty()).then(|| state.bpgl().removals_of(view.c)),
        };
        if cfg!(debug_assertions) {
            plan.validate();
            plan.assert_avoids(state.failed());
        }
        plan
    }
}

/// Values of places over the chunk range `[ra, rb)`.
pub(crate) struct Values {
    pub ra: u64,
    pub rb: u64,
    /// Slices holding a place's value over the range.
    pub have: FxHashMap<PlaceId, Slice>,
    /// Slices of buffer 0 that already hold an available place's value over the range (the
    /// user's own read of it); used instead of a second read.
    pub presets: FxHashMap<PlaceId, Slice>,
    /// Where a lost place's reconstructed value should go (a slice of buffer 0 for reads).
    pub sinks: FxHashMap<PlaceId, Slice>,
}

impl Values {
    pub fn new(ra: u64, rb: u64) -> Values {
        assert!(ra < rb);
        Values {
            ra,
            rb,
            have: FxHashMap::default(),
            presets: FxHashMap::default(),
            sinks: FxHashMap::default(),
        }
    }

    pub fn len(&self) -> usize {
        (self.rb - self.ra) as usize
    }

    fn in_hand(&self, p: PlaceId) -> bool {
        self.have.contains_key(&p) || self.presets.contains_key(&p)
    }

    /// The slice holding `p`'s value; panics if it was not acquired.
    pub fn get(&self, p: PlaceId) -> Slice {
        *self
            .have
            .get(&p)
            .unwrap_or_else(|| panic!("value of place {p} not acquired"))
    }

    /// Makes the value of every place in `targets` available in `have`, reading available
    /// places and reconstructing lost ones (peeling across stripes when needed).
    pub fn acquire(
        &mut self,
        view: &View<'_>,
        b: &mut Builder,
        targets: &[PlaceId],
    ) -> Result<(), CoreError> {
        let lost: Vec<PlaceId> = targets
            .iter()
            .copied()
            .filter(|&p| !self.have.contains_key(&p) && !view.available(p))
            .collect();
        let repairs = if lost.is_empty() {
            Vec::new()
        } else {
            schedule(view, &|p| self.in_hand(p), &lost)?
        };
        for &p in targets {
            if view.available(p) {
                self.fetch(view, b, p);
            }
        }
        for r in &repairs {
            self.emit(view, b, r);
        }
        for &p in targets {
            assert!(self.have.contains_key(&p), "place {p} not acquired");
        }
        Ok(())
    }

    /// The available places [`Values::acquire`] would read for `targets` (for cost estimates),
    /// or the error it would return.
    pub fn reads_for(
        &self,
        view: &View<'_>,
        targets: &[PlaceId],
    ) -> Result<BTreeSet<PlaceId>, CoreError> {
        let mut reads = BTreeSet::new();
        let mut lost = Vec::new();
        for &p in targets {
            if self.in_hand(p) {
                continue;
            }
            if view.available(p) {
                reads.insert(p);
            } else {
                lost.push(p);
            }
        }
        if !lost.is_empty() {
            for r in schedule(view, &|p| self.in_hand(p), &lost)? {
                for s in r.sources {
                    if view.available(s) && !self.in_hand(s) {
                        reads.insert(s);
                    }
                }
            }
        }
        Ok(reads)
    }

    /// Reads available place `p` unless its value is in hand.
    fn fetch(&mut self, view: &View<'_>, b: &mut Builder, p: PlaceId) {
        if self.have.contains_key(&p) {
            return;
        }
        let s = match self.presets.get(&p) {
            Some(s) => *s,
            None => {
                let s = b.alloc(self.len());
                b.read(view, p, self.ra, s);
                s
            }
        };
        assert_eq!(s.len, self.len());
        self.have.insert(p, s);
    }

    fn output(&mut self, b: &mut Builder, p: PlaceId) -> Slice {
        match self.sinks.get(&p) {
            Some(s) => *s,
            None => b.alloc(self.len()),
        }
    }

    fn emit(&mut self, view: &View<'_>, b: &mut Builder, r: &Repair) {
        let geo = view.geo;
        let stripe = &geo.healthy().stripes[r.stripe];
        let places = geo.stripe_places(r.stripe);
        b.stripes.insert(r.stripe);
        for &s in &r.sources {
            if view.available(s) {
                self.fetch(view, b, s);
            }
            assert!(self.have.contains_key(&s), "source {s} not ready for {r:?}");
        }
        match stripe.code {
            Code::None => unreachable!("a stripe without redundancy repairs nothing"),
            Code::Mirror => {
                let src = self.get(r.sources[0]);
                for &o in &r.outputs {
                    let dst = self.output(b, o);
                    b.ops.push(Op::Copy { src, dst });
                    self.have.insert(o, dst);
                }
            }
            Code::Xor => {
                assert_eq!(r.outputs.len(), 1);
                let o = r.outputs[0];
                let dst = self.output(b, o);
                let erased = places
                    .iter()
                    .position(|&p| p == o)
                    .expect("output in stripe");
                let units = places
                    .iter()
                    .map(|&p| if p == o { dst } else { self.get(p) })
                    .collect();
                b.ops.push(Op::XorRecover { units, erased });
                self.have.insert(o, dst);
            }
            Code::PQ => {
                let k = places.len() - 2;
                assert!(
                    stripe.units[k].role == Role::P && stripe.units[k + 1].role == Role::Q,
                    "P+Q stripes list data, then P, then Q"
                );
                let mut units = Vec::with_capacity(places.len());
                let mut erased = Vec::new();
                let mut scratch = Vec::new();
                let mut outs = Vec::new();
                for (j, &p) in places.iter().enumerate() {
                    if r.outputs.contains(&p) {
                        let dst = self.output(b, p);
                        units.push(dst);
                        erased.push(j);
                        outs.push((p, dst));
                    } else if r.sources.contains(&p) {
                        units.push(self.get(p));
                    } else {
                        // A survivor we chose not to read: computed into scratch.
                        let dst = b.alloc(self.len());
                        units.push(dst);
                        erased.push(j);
                        scratch.push((p, dst));
                    }
                }
                assert!(!erased.is_empty() && erased.len() <= 2);
                b.ops.push(Op::PqRecover { units, erased });
                self.have.extend(outs);
                for (p, dst) in scratch {
                    self.have.entry(p).or_insert(dst);
                }
            }
        }
    }
}

/// One step of a reconstruction: stripe `stripe`'s code rebuilds `outputs` from `sources`.
#[derive(Clone, Debug)]
pub(crate) struct Repair {
    pub stripe: usize,
    pub outputs: Vec<PlaceId>,
    pub sources: Vec<PlaceId>,
}

/// Peels the cycle's stripes (like `layout::recovery_plan`, but on availability) and returns
/// the repairs needed for `targets` (lost places) in an executable order. Sources prefer values
/// already in hand, then unit order (data first, then P, then Q: what MD reads). Errors with
/// the first stripe holding a target that cannot be rebuilt.
pub(crate) fn schedule(
    view: &View<'_>,
    in_hand: &dyn Fn(PlaceId) -> bool,
    targets: &[PlaceId],
) -> Result<Vec<Repair>, CoreError> {
    let geo = view.geo;
    let healthy = geo.healthy();
    // Only the stripes the targets can depend on take part: the targets' stripes and, through
    // every lost place of a stripe taking part, every other stripe holding that place (the
    // only ones that can rebuild it). Peeling the whole cycle gives the same repairs for
    // these (the others' repairs are dropped below), but a RAID+ cycle over 59 disks has
    // 24,000 places and 3,400 stripes, and a degraded read needs one or two of them.
    let mut pending: Vec<usize> = Vec::new();
    let mut grow: Vec<usize> = targets
        .iter()
        .flat_map(|&t| geo.place_units(t).iter().map(|&(s, _)| s))
        .collect();
    let mut taking_part = vec![false; healthy.stripes.len()];
    while let Some(s) = grow.pop() {
        if std::mem::replace(&mut taking_part[s], true) {
            continue;
        }
        pending.push(s);
        for &p in geo.stripe_places(s) {
            if !view.available(p) {
                grow.extend(geo.place_units(p).iter().map(|&(s2, _)| s2));
            }
        }
    }
    pending.sort_unstable();
    pending.retain(|&s| geo.stripe_places(s).iter().any(|&p| !view.available(p)));
    // Places known so far: the available ones, plus those rebuilt by an earlier repair.
    let mut rebuilt: FxHashMap<PlaceId, ()> = FxHashMap::default();
    let mut known = Known {
        view,
        rebuilt: &mut rebuilt,
    };
    let mut all = Vec::new();
    loop {
        let mut progressed = false;
        let mut still = Vec::new();
        for &s in &pending {
            let st = &healthy.stripes[s];
            let places = geo.stripe_places(s);
            let unknown: Vec<PlaceId> = places.iter().copied().filter(|&p| !known.get(p)).collect();
            if unknown.is_empty() {
                continue;
            }
            let have: Vec<PlaceId> = places.iter().copied().filter(|&p| known.get(p)).collect();
            if unknown.len() > st.code.tolerance(places.len()) || have.len() < st.units_needed() {
                still.push(s);
                continue;
            }
            let need = st.units_needed();
            let sources = match st.code {
                Code::None => unreachable!("tolerance 0"),
                Code::Xor => have,
                Code::Mirror | Code::PQ => {
                    // In-hand values first, then unit order; then lost-but-rebuilt ones last
                    // (they are free too, but reading order among equals follows MD).
                    let mut h = have;
                    h.sort_by_key(|&p| {
                        (
                            !in_hand(p),
                            places.iter().position(|&q| q == p).expect("in stripe"),
                        )
                    });
                    h.truncate(need);
                    h
                }
            };
            for &u in &unknown {
                known.set(u);
            }
            all.push(Repair {
                stripe: s,
                outputs: unknown,
                sources,
            });
            progressed = true;
        }
        pending = still;
        if pending.is_empty() || !progressed {
            break;
        }
    }
    // Keep only the repairs the targets depend on.
    let mut needed: BTreeSet<PlaceId> = targets.iter().copied().collect();
    for &t in targets {
        if !known.get(t) {
            let stripe = geo.place_units(t)[0].0;
            return Err(CoreError::DataLost {
                cycle: view.c,
                stripe,
            });
        }
    }
    let mut keep = vec![false; all.len()];
    for (i, r) in all.iter().enumerate().rev() {
        if r.outputs.iter().any(|o| needed.contains(o)) {
            keep[i] = true;
            needed.extend(r.sources.iter().copied().filter(|&s| !view.available(s)));
        }
    }
    Ok(all
        .into_iter()
        .zip(keep)
        .filter(|(_, k)| *k)
        .map(|(r, _)| r)
        .collect())
}

/// Which places [`schedule`] knows the value of.
struct Known<'v, 'a> {
    view: &'v View<'a>,
    rebuilt: &'v mut FxHashMap<PlaceId, ()>,
}

impl Known<'_, '_> {
    fn get(&self, p: PlaceId) -> bool {
        self.view.available(p) || self.rebuilt.contains_key(&p)
    }
    fn set(&mut self, p: PlaceId) {
        self.rebuilt.insert(p, ());
    }
}

/// The first stripe of a cycle in generation `gen` that cannot be reconstructed, if any (the
/// answer is the same for every cycle in that generation).
/// Whether every stripe of a cycle laid out in generation `gen` can still be reconstructed
/// with members `extra` lost as well as those `gen` cannot read, and places `stale` unreadable
/// (deferred background parities of the cycle in question).
pub(crate) fn recoverable_without(
    geo: &Geometry,
    state: &ArrayState,
    gen: u32,
    extra: &[Disk],
    stale: Vec<PlaceId>,
) -> bool {
    let mut impaired = state.impaired_slice(gen).to_vec();
    impaired.extend(
        extra
            .iter()
            .filter(|d| !impaired.contains(d))
            .collect::<Vec<_>>(),
    );
    let view = View {
        geo,
        c: 0,
        layout: &state.generations()[gen as usize].cycle,
        impaired: &impaired,
        locs: state.place_locs(gen),
        stale,
    };
    if !view.any_lost() {
        return true;
    }
    let lost: Vec<PlaceId> = (0..geo.places()).filter(|&p| !view.available(p)).collect();
    schedule(&view, &|_| false, &lost).is_ok()
}

pub(crate) fn unrecoverable_stripe(geo: &Geometry, state: &ArrayState, gen: u32) -> Option<usize> {
    let view = View::in_generation(geo, state, 0, gen);
    if !view.any_lost() {
        return None;
    }
    let lost: Vec<PlaceId> = (0..geo.places()).filter(|&p| !view.available(p)).collect();
    match schedule(&view, &|_| false, &lost) {
        Ok(_) => None,
        Err(CoreError::DataLost { stripe, .. }) => Some(stripe),
        Err(e) => unreachable!("schedule only reports data loss: {e}"),
    }
}
