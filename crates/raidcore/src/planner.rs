//! Requests to plans: [`plan_read`], [`plan_write`] and [`plan_rebuild_cycle`].
//!
//! Every function is pure: it looks at the geometry and the state and returns plans (or a
//! [`CoreError`]) without changing anything. Requests are split per cycle: **one plan per cycle
//! touched**, with `Plan::user_offset` saying where its part of the caller's buffer starts. A
//! cycle is the natural unit: its units lie in one layout generation, its stripes may share
//! units (RM2), and reconstruction peels across its stripes.
//!
//! ## Reads
//!
//! Available units are read straight into buffer 0. Lost units are reconstructed over the union
//! `R` of the lost units' requested in-chunk ranges: mirrors read one copy, XOR stripes read the
//! others, P+Q stripes read `k` survivors (data first, then P, then Q, like MD; an unread
//! survivor is computed into scratch), and stripes that cannot fix their losses alone wait for
//! other stripes to rebuild shared units first (peeling, RM2). A survivor the caller reads over
//! all of `R` anyway is not read twice, and a lost unit requested over exactly `R` is rebuilt
//! straight into buffer 0.
//!
//! ## Writes
//!
//! Per cycle, `R` is the union of the in-chunk ranges written (shared by all the cycle's
//! stripes: simple and correct; a write confined to one chunk has `R` = its own range). Every
//! stripe holding a touched data unit is updated, by the mode a [`ModePolicy`] picks among the
//! feasible ones (see [`crate::policy`]). Buffers are per place: a data unit in two RM2 groups is
//! read once, merged once and written once. New data goes from buffer 0 straight to every
//! available copy; parities go from scratch. Lost parities are not written; a lost touched data
//! unit is recorded through an RCW of a stripe with an available parity (or the write fails
//! with [`CoreError::DataLost`] before anything is planned).
//!
//! ## Rebuild
//!
//! [`plan_rebuild_cycle`] moves one cycle from its generation to the target: every place whose
//! position changes, or whose position holds nothing valid, is copied from its old position if
//! that is available and reconstructed otherwise, whole chunks at a time.

use std::collections::{BTreeMap, BTreeSet};

use layout::{Code, Disk, Role};

use crate::array::{ArrayState, Geometry, PlaceId, StripeId};
use crate::plan::{Op, Plan, PlanKind, Slice};
use crate::policy::{ModeCost, ModePolicy, StripeWrite, WriteMode};
use crate::recon::{Builder, Values, View};
use crate::CoreError;

/// A piece of a request inside one chunk.
#[derive(Clone, Copy, Debug)]
struct Piece {
    place: PlaceId,
    /// In-chunk byte range `[a, b)`.
    a: u64,
    b: u64,
    /// Offset of the piece in the plan's buffer 0.
    uoff: usize,
}

impl Piece {
    fn user(&self) -> Slice {
        Slice::new(0, self.uoff, (self.b - self.a) as usize)
    }
    /// The piece's range widened to the I/O alignment.
    fn wide(&self, geo: &Geometry) -> (u64, u64) {
        geo.widen(self.a, self.b)
    }
    fn aligned(&self, geo: &Geometry) -> bool {
        self.wide(geo) == (self.a, self.b)
    }
}

/// The part of a request inside one cycle.
pub(crate) struct Part {
    pub(crate) cycle: u64,
    user_offset: u64,
    len: usize,
    pieces: Vec<Piece>,
}

impl Part {
    /// The data places the part touches.
    pub(crate) fn places(&self) -> impl Iterator<Item = PlaceId> + '_ {
        self.pieces.iter().map(|p| p.place)
    }

    /// Each piece of the part (one chunk's worth at most): its data place, and its offset
    /// and length in bytes from the start of the range that was split.
    pub(crate) fn pieces(&self) -> impl Iterator<Item = (PlaceId, u64, u64)> + '_ {
        self.pieces
            .iter()
            .map(|p| (p.place, self.user_offset + p.uoff as u64, p.b - p.a))
    }
}

pub(crate) fn split(geo: &Geometry, offset: u64, len: u64) -> Result<Vec<Part>, CoreError> {
    let capacity = geo.capacity_bytes();
    let end = offset.checked_add(len);
    if end.is_none_or(|e| e > capacity) {
        return Err(CoreError::OutOfRange {
            offset,
            len,
            capacity,
        });
    }
    let end = offset + len;
    let cb = geo.chunk_bytes();
    let mut parts: Vec<Part> = Vec::new();
    let mut pos = offset;
    while pos < end {
        let (cycle, index) = geo.locate_chunk(pos / cb);
        let a = pos % cb;
        let b = cb.min(a + (end - pos));
        if parts.last().is_none_or(|p| p.cycle != cycle) {
            parts.push(Part {
                cycle,
                user_offset: pos - offset,
                len: 0,
                pieces: Vec::new(),
            });
        }
        let part = parts.last_mut().expect("just pushed");
        part.pieces.push(Piece {
            place: geo.data_place(index),
            a,
            b,
            uoff: part.len,
        });
        part.len += (b - a) as usize;
        pos += b - a;
    }
    Ok(parts)
}

/// Plans a read of `len` bytes at logical byte `offset`: one plan per cycle touched, in order.
/// A unit with copies is read from its first available copy; [`plan_read_balanced`] spreads
/// such reads over the copies.
pub fn plan_read(
    geo: &Geometry,
    state: &ArrayState,
    offset: u64,
    len: u64,
) -> Result<Vec<Plan>, CoreError> {
    split(geo, offset, len)?
        .into_iter()
        .map(|part| plan_read_cycle(geo, state, &part, None))
        .collect()
}

/// What an executor knows of one member when it asks for a read plan: the I/Os it has queued
/// or in flight, and the member byte just past its last I/O (where a disk's head is). The
/// planner knows nothing of disks; these hints are all it uses to choose among copies.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemberLoad {
    /// I/Os queued at the member or in flight.
    pub queued: u32,
    /// Member byte just past the member's last I/O.
    pub head: u64,
}

/// [`plan_read`], with every unit that has copies (mirrors: RAID1, RAID10, S2-RAID10) read
/// from the copy chosen the way Linux MD's `read_balance` does: the copy whose member's last
/// I/O ended where this read starts (a sequential reader stays on one copy); otherwise the
/// copy whose member has the fewest I/Os queued, nearest head first among equals, then the
/// first copy. `loads` is indexed by member; the plan's own reads count as queued for the
/// pieces chosen after them, so one large read spreads too. An empty `loads` gives
/// [`plan_read`]'s plans.
pub fn plan_read_balanced(
    geo: &Geometry,
    state: &ArrayState,
    offset: u64,
    len: u64,
    loads: &[MemberLoad],
) -> Result<Vec<Plan>, CoreError> {
    if loads.is_empty() {
        return plan_read(geo, state, offset, len);
    }
    let mut loads = loads.to_vec();
    split(geo, offset, len)?
        .into_iter()
        .map(|part| plan_read_cycle(geo, state, &part, Some(&mut loads)))
        .collect()
}

/// The copy of data place `p` to read byte `a` from, and the chosen member's load updated
/// (see [`plan_read_balanced`]). `p` itself when it has no other available copy.
fn choose_copy(
    geo: &Geometry,
    view: &View<'_>,
    p: PlaceId,
    a: u64,
    len: u64,
    loads: &mut [MemberLoad],
) -> PlaceId {
    let healthy = geo.healthy();
    let mut best: Option<(PlaceId, (bool, u32, u64))> = None;
    for &(s, _) in geo.place_units(p) {
        if healthy.stripes[s].code != Code::Mirror {
            continue;
        }
        for &u in geo.stripe_places(s) {
            if !view.available(u) {
                continue;
            }
            let (m, off) = view.member_offset(u, a);
            let l = loads.get(m as usize).copied().unwrap_or_default();
            // Smaller is better: not sequential, queue, head distance.
            let key = (l.head != off, l.queued, l.head.abs_diff(off));
            if best.is_none_or(|(_, k)| key < k) {
                best = Some((u, key));
            }
        }
    }
    let chosen = best.map_or(p, |(u, _)| u);
    debug_assert!(view.available(chosen));
    let (m, off) = view.member_offset(chosen, a);
    if let Some(l) = loads.get_mut(m as usize) {
        l.queued = l.queued.saturating_add(1);
        l.head = off + len;
    }
    chosen
}

fn plan_read_cycle(
    geo: &Geometry,
    state: &ArrayState,
    part: &Part,
    mut loads: Option<&mut Vec<MemberLoad>>,
) -> Result<Plan, CoreError> {
    let view = View::current(geo, state, part.cycle);
    let mut b = Builder::new(part.len);
    // Filtered in place rather than partitioned into vectors: the healthy case (nothing lost)
    // then allocates nothing here.
    let avail = || part.pieces.iter().filter(|p| view.available(p.place));
    let lost: Vec<Piece> = if view.impaired.is_empty() {
        Vec::new()
    } else {
        part.pieces
            .iter()
            .filter(|p| !view.available(p.place))
            .copied()
            .collect()
    };
    for p in avail() {
        b.lock_place(geo, p.place);
        let (wa, wb) = if p.aligned(geo) {
            (p.a, p.b)
        } else {
            p.wide(geo)
        };
        let from = match loads.as_deref_mut() {
            Some(l) => choose_copy(geo, &view, p.place, wa, wb - wa, l),
            None => p.place,
        };
        if p.aligned(geo) {
            b.read(&view, from, p.a, p.user());
        } else {
            // Whole aligned blocks into scratch, then the requested bytes.
            let s = b.alloc((wb - wa) as usize);
            b.read(&view, from, wa, s);
            let src = s.sub((p.a - wa) as usize, (p.b - p.a) as usize);
            b.ops.push(Op::Copy { src, dst: p.user() });
        }
    }
    if !lost.is_empty() {
        let ra = lost.iter().map(|p| p.wide(geo).0).min().expect("non-empty");
        let rb = lost.iter().map(|p| p.wide(geo).1).max().expect("non-empty");
        let mut vals = Values::new(ra, rb);
        for p in avail() {
            // Only pieces read straight into buffer 0 (filled in phase 1) can stand in.
            if p.aligned(geo) && p.a <= ra && rb <= p.b {
                let s = Slice::new(0, p.uoff + (ra - p.a) as usize, (rb - ra) as usize);
                vals.presets.insert(p.place, s);
            }
        }
        for p in &lost {
            if p.a == ra && p.b == rb {
                vals.sinks.insert(p.place, p.user());
            }
        }
        let targets: Vec<PlaceId> = lost.iter().map(|p| p.place).collect();
        vals.acquire(&view, &mut b, &targets)?;
        for p in &lost {
            b.lock_place(geo, p.place);
            let v = vals.get(p.place);
            if v != p.user() {
                let src = v.sub((p.a - ra) as usize, (p.b - p.a) as usize);
                b.ops.push(Op::Copy { src, dst: p.user() });
            }
        }
    }
    Ok(b.finish(PlanKind::Read, &view, state, part.user_offset, Vec::new()))
}

/// Plans a write of `len` bytes at logical byte `offset` (buffer 0 of each plan is the part of
/// the caller's data for its cycle), choosing RMW or RCW per stripe with `policy`. One plan per
/// cycle touched, in order. Fails before planning anything if some cycle cannot record it.
pub fn plan_write(
    geo: &Geometry,
    state: &ArrayState,
    offset: u64,
    len: u64,
    policy: &dyn ModePolicy,
) -> Result<Vec<Plan>, CoreError> {
    policy.check(geo.disks())?;
    split(geo, offset, len)?
        .into_iter()
        .map(|part| plan_write_part(geo, state, &part, policy, &[]))
        .collect()
}

/// How one affected stripe is handled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum StripeMode {
    /// No parity to maintain (RAID0 stripes, mirrors, or every parity lost): data only.
    Direct,
    /// Parity updated by this mode.
    Parity(WriteMode),
}

/// Plans one cycle's part of a write. `defer`: parity places left stale (lazy parity): they
/// are neither read nor written, exactly as if their member were missing.
pub(crate) fn plan_write_part(
    geo: &Geometry,
    state: &ArrayState,
    part: &Part,
    policy: &dyn ModePolicy,
    defer: &[PlaceId],
) -> Result<Plan, CoreError> {
    let c = part.cycle;
    let view = View::current_deferring(geo, state, c, defer);
    let healthy = geo.healthy();
    let touched: BTreeMap<PlaceId, Piece> = part.pieces.iter().map(|p| (p.place, *p)).collect();
    assert_eq!(touched.len(), part.pieces.len(), "a place written twice");
    let ra = part
        .pieces
        .iter()
        .map(|p| p.wide(geo).0)
        .min()
        .expect("non-empty part");
    let rb = part
        .pieces
        .iter()
        .map(|p| p.wide(geo).1)
        .max()
        .expect("non-empty part");
    let covered = |p: PlaceId| touched.get(&p).is_some_and(|t| t.a == ra && t.b == rb);
    let stripes: BTreeSet<usize> = touched
        .keys()
        .flat_map(|&p| geo.place_units(p).iter().map(|(s, _)| *s))
        .collect();
    let mut b = Builder::new(part.len);
    let mut vals = Values::new(ra, rb);

    // 1. Pick each stripe's mode.
    let mut modes: BTreeMap<usize, StripeMode> = BTreeMap::new();
    for &s in &stripes {
        let st = &healthy.stripes[s];
        let places = geo.stripe_places(s);
        let mode = match st.code {
            Code::None | Code::Mirror => StripeMode::Direct,
            Code::Xor | Code::PQ => {
                let data = data_places(geo, s);
                let parities = parity_places(geo, s);
                let ap: Vec<PlaceId> = parities
                    .iter()
                    .copied()
                    .filter(|&p| view.available(p))
                    .collect();
                if ap.is_empty() {
                    StripeMode::Direct
                } else {
                    let touched_in: Vec<PlaceId> = data
                        .iter()
                        .copied()
                        .filter(|p| touched.contains_key(p))
                        .collect();
                    let rmw_ok = touched_in.iter().all(|&p| view.available(p));
                    let rcw_targets: Vec<PlaceId> =
                        data.iter().copied().filter(|&p| !covered(p)).collect();
                    let rcw = vals.reads_for(&view, &rcw_targets);
                    let chosen = match (rmw_ok, rcw) {
                        (false, Err(e)) => return Err(e),
                        (false, Ok(_)) => WriteMode::Rcw,
                        (true, Err(_)) => WriteMode::Rmw,
                        (true, Ok(rcw_reads)) => {
                            let member = |p: &PlaceId| view.loc(*p).disk;
                            let w = StripeWrite {
                                stripe: StripeId {
                                    cycle: c,
                                    stripe: s,
                                },
                                code: st.code,
                                data_units: data.len(),
                                touched: touched_in.len(),
                                covered: touched_in.iter().filter(|&&p| covered(p)).count(),
                                rmw_parity_reads: ap.len(),
                                rmw: ModeCost::from_members(
                                    touched_in.iter().chain(&ap).map(member),
                                ),
                                rcw: ModeCost::from_members(rcw_reads.iter().map(member)),
                            };
                            policy.choose(&w)
                        }
                    };
                    StripeMode::Parity(chosen)
                }
            }
        };
        debug_assert!(places.len() == st.units.len());
        modes.insert(s, mode);
    }

    // 2. A lost touched unit's new value must be implied by what the write leaves behind:
    //    every stripe with an available parity ends consistent (RCW is forced on the lost
    //    unit's stripes), so it is exactly when the unit is reconstructible in this cycle's
    //    availability pattern (peeling included). Two lost units under one XOR parity are not.
    for &p in touched.keys().filter(|&&p| !view.available(p)) {
        crate::recon::schedule(&view, &|_| false, &[p])?;
        debug_assert!(geo.place_units(p).iter().any(|&(s, _)| {
            healthy.stripes[s].code == Code::Mirror
                || modes[&s] == StripeMode::Parity(WriteMode::Rcw)
        }));
    }

    // 3. Old values: RMW needs the touched data and the parities, RCW every data unit the
    //    write does not cover, and a touched unit written partly into an aligned block needs
    //    its old block to merge with.
    let mut need_old: BTreeSet<PlaceId> = touched
        .values()
        .filter(|t| !t.aligned(geo))
        .map(|t| t.place)
        .collect();
    for (&s, &m) in &modes {
        match m {
            StripeMode::Direct => {}
            StripeMode::Parity(WriteMode::Rmw) => {
                need_old.extend(
                    data_places(geo, s)
                        .into_iter()
                        .filter(|p| touched.contains_key(p)),
                );
                need_old.extend(
                    parity_places(geo, s)
                        .into_iter()
                        .filter(|&p| view.available(p)),
                );
            }
            StripeMode::Parity(WriteMode::Rcw) => {
                need_old.extend(data_places(geo, s).into_iter().filter(|&p| !covered(p)));
            }
        }
    }
    let need_old: Vec<PlaceId> = need_old.into_iter().collect();
    vals.acquire(&view, &mut b, &need_old)?;

    // 4. New values (over R) of touched units that a parity computation uses or that are
    //    written as merged aligned blocks.
    let mut uses_new: BTreeSet<PlaceId> = touched
        .values()
        .filter(|t| !t.aligned(geo))
        .map(|t| t.place)
        .collect();
    for (&s, &m) in &modes {
        if m != StripeMode::Direct {
            uses_new.extend(
                data_places(geo, s)
                    .into_iter()
                    .filter(|p| touched.contains_key(p)),
            );
        }
    }
    let mut new_val: BTreeMap<PlaceId, Slice> = BTreeMap::new();
    for &p in &uses_new {
        let t = &touched[&p];
        let v = if covered(p) {
            Slice::new(0, t.uoff, vals.len())
        } else {
            let merged = b.alloc(vals.len());
            b.ops.push(Op::Copy {
                src: vals.get(p),
                dst: merged,
            });
            b.ops.push(Op::Copy {
                src: t.user(),
                dst: merged.sub((t.a - ra) as usize, (t.b - t.a) as usize),
            });
            merged
        };
        new_val.insert(p, v);
    }

    // 5. Parities.
    let mut chosen_modes = Vec::new();
    for (&s, &m) in &modes {
        b.stripes.insert(s);
        if let StripeMode::Parity(mode) = m {
            write_parities(&view, &mut b, &vals, &new_val, &touched, s, mode);
            chosen_modes.push((s, mode));
        }
    }

    // 6. New data to every available copy: straight from buffer 0, or the merged aligned
    //    blocks when the piece is not aligned.
    let mut written: BTreeSet<PlaceId> = BTreeSet::new();
    for (&p, t) in &touched {
        let (wa, wb) = t.wide(geo);
        let (at, src) = if t.aligned(geo) {
            (t.a, t.user())
        } else {
            let merged = new_val[&p].sub((wa - ra) as usize, (wb - wa) as usize);
            (wa, merged)
        };
        for &(s, _) in geo.place_units(p) {
            let copies: Vec<PlaceId> = if healthy.stripes[s].code == Code::Mirror {
                geo.stripe_places(s).to_vec()
            } else {
                vec![p]
            };
            for u in copies {
                if view.available(u) && written.insert(u) {
                    b.write(geo, c, view.loc(u), at, src);
                }
            }
        }
    }
    Ok(b.finish(
        PlanKind::Write,
        &view,
        state,
        part.user_offset,
        chosen_modes,
    ))
}

fn data_places(geo: &Geometry, s: usize) -> Vec<PlaceId> {
    geo.stripe_places(s)
        .iter()
        .copied()
        .filter(|&p| geo.role(p) == Role::Data)
        .collect()
}

fn parity_places(geo: &Geometry, s: usize) -> Vec<PlaceId> {
    geo.stripe_places(s)
        .iter()
        .copied()
        .filter(|&p| matches!(geo.role(p), Role::P | Role::Q))
        .collect()
}

/// Emits stripe `s`'s parity computation and the writes of its available parities. A parity
/// deferred by lazy parity ([`crate::lazy`]) is unavailable in the view, so it is neither read
/// nor written here.
fn write_parities(
    view: &View<'_>,
    b: &mut Builder,
    vals: &Values,
    new_val: &BTreeMap<PlaceId, Slice>,
    touched: &BTreeMap<PlaceId, Piece>,
    s: usize,
    mode: WriteMode,
) {
    let geo = view.geo;
    let code = geo.healthy().stripes[s].code;
    let data = data_places(geo, s);
    let parities = parity_places(geo, s);
    let (p_place, q_place) = (parities[0], parities.get(1).copied());
    assert!(matches!(code, Code::Xor | Code::PQ));
    assert_eq!(q_place.is_some(), code == Code::PQ);
    let len = vals.len();
    let mut outputs: Vec<(PlaceId, Slice)> = Vec::new();
    match mode {
        WriteMode::Rmw => {
            let p_ok = view.available(p_place);
            let q_ok = q_place.is_some_and(|q| view.available(q));
            let deltas: Vec<(usize, PlaceId)> = data
                .iter()
                .enumerate()
                .filter(|(_, p)| touched.contains_key(p))
                .map(|(i, &p)| (i, p))
                .collect();
            if q_ok {
                let q = q_place.expect("q available");
                let pslice = if p_ok {
                    vals.get(p_place)
                } else {
                    let z = b.alloc(len);
                    b.ops.push(Op::Zero { dst: z });
                    z
                };
                for &(index, d) in &deltas {
                    b.ops.push(Op::PqUpdate {
                        p: pslice,
                        q: vals.get(q),
                        index,
                        old: vals.get(d),
                        new: new_val[&d],
                    });
                }
                outputs.push((q, vals.get(q)));
            } else {
                assert!(p_ok, "RMW needs an available parity");
                for &(_, d) in &deltas {
                    b.ops.push(Op::XorUpdate {
                        parity: vals.get(p_place),
                        old: vals.get(d),
                        new: new_val[&d],
                    });
                }
            }
            if p_ok {
                outputs.push((p_place, vals.get(p_place)));
            }
        }
        WriteMode::Rcw => {
            let slices: Vec<Slice> = data
                .iter()
                .map(|p| new_val.get(p).copied().unwrap_or_else(|| vals.get(*p)))
                .collect();
            let pbuf = b.alloc(len);
            match q_place {
                None => b.ops.push(Op::XorEncode {
                    data: slices,
                    p: pbuf,
                }),
                Some(q) => {
                    let qbuf = b.alloc(len);
                    b.ops.push(Op::PqEncode {
                        data: slices,
                        p: pbuf,
                        q: qbuf,
                    });
                    outputs.push((q, qbuf));
                }
            }
            outputs.push((p_place, pbuf));
        }
    }
    for (place, src) in outputs {
        if view.available(place) {
            b.write(geo, view.c, view.loc(place), vals.ra, src);
        }
    }
}

/// Plans moving cycle `c` from the generation it is in to the target generation. `None` when
/// it is already there. After the plan has run (all writes durable), call
/// `state.mark_rebuilt(c, to)` with the plan's `PlanKind::Rebuild { to, .. }`.
pub fn plan_rebuild_cycle(
    geo: &Geometry,
    state: &ArrayState,
    c: u64,
) -> Result<Option<Plan>, CoreError> {
    if c >= geo.cycles() {
        return Err(CoreError::OutOfRange {
            offset: c,
            len: 1,
            capacity: geo.cycles(),
        });
    }
    let from = state.cycle_generation(c);
    let mut to = state.target_generation();
    if from == to {
        return Ok(None);
    }
    if let Some(e) = &state.generations()[to as usize].blocked {
        return Err(CoreError::RebuildBlocked(e.clone()));
    }
    // A move that would overwrite units the cycle's layout still reads goes through the
    // staging generation first (copy-back only); without one, it is refused rather than
    // made unsafe.
    if state.move_overwrites_live(c, to) {
        match state.staging_before(to) {
            Some(s) if s > from && !state.move_overwrites_live(c, s) => to = s,
            _ => {
                return Err(CoreError::RebuildBlocked(
                    layout::LayoutError::NoSpareSpace(format!(
                        "moving cycle {c} from layout generation {from} to {to} would \
                         overwrite units it still reads"
                    )),
                ))
            }
        }
    }
    let target = &state.generations()[to as usize];
    let view = View::current(geo, state, c);
    let target_locs = state.place_locs(to);
    let new_loc = |p: PlaceId| {
        debug_assert_eq!(target_locs[p], {
            let (s, u) = geo.place_units(p)[0];
            target.cycle.stripes[s].units[u].loc()
        });
        target_locs[p]
    };
    // Units whose place in the target lies on a failed member are not written: they stay
    // lost there until the member is replaced, and the stripe's code carries them. Into a
    // staging generation that is its purpose (a relocated copy is dropped and the next move
    // relocates it); into any other, it is a rebuild that goes on degraded: a second member
    // failing during a RAID6 rebuild onto a replacement leaves the replacement's units to
    // rebuild (from the members left), and the second member's units wait for its own
    // replacement. A cycle with nothing to write but units of failed members moves without
    // writes (its layout is the same, a failed member's units are unreadable in both) while
    // the rebuild toward `to` is under way: some cycle is in `to` already or has something to
    // write. When none is (a failed member of an in-place layout and no replacement yet, or a
    // second failure after the first rebuild ended), the rebuild asks for the replacement.
    let mut moving: Vec<PlaceId> = Vec::new();
    let mut lost_on: Option<Disk> = None;
    for p in 0..geo.places() {
        if view.available(p) && view.loc(p) == new_loc(p) {
            continue;
        }
        let l = new_loc(p);
        assert!(l.offset < geo.stride_rows(), "rebuilt unit past the stride");
        if state.failed().contains(&l.disk) {
            // A copy readable elsewhere (relocated) is never dropped for a place on a failed
            // member: the move waits for that member's replacement.
            if view.available(p) && !target.staging {
                return Err(CoreError::NeedsReplacement { member: l.disk });
            }
            lost_on.get_or_insert(l.disk);
        } else {
            moving.push(p);
        }
    }
    if let Some(member) = lost_on {
        if !target.staging
            && moving.is_empty()
            && state.cycles_in_generation(to) == 0
            && !state.rebuild_writes_somewhere(to)
        {
            return Err(CoreError::NeedsReplacement { member });
        }
    }
    let mut b = Builder::new(0);
    let mut vals = Values::new(0, geo.chunk_bytes());
    vals.acquire(&view, &mut b, &moving)?;
    for &p in &moving {
        b.write(geo, c, new_loc(p), 0, vals.get(p));
    }
    b.stripes.extend(0..geo.healthy().stripes.len());
    Ok(Some(b.finish(
        PlanKind::Rebuild { from, to },
        &view,
        state,
        0,
        Vec::new(),
    )))
}
