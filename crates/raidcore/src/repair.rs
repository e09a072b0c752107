//! Repairing parts of units in place: a block that read wrong (a checksum mismatch, a latent
//! sector error) is recomputed from the rest of its cycle and written back where it is.
//!
//! This is the read path's reconstruction, not a second copy of it: [`plan_repair`] plans with
//! the bad places marked unavailable in the cycle's view (as a lazy write marks its deferred
//! parities), so [`crate::recon`] picks the survivors and the codec ops exactly as a degraded
//! read would, and the plan writes the recomputed range back to the bad places. When the
//! remaining redundancy cannot recompute them it fails with the planner's own error
//! ([`CoreError::DataLost`] or a reconstruction error), which the caller reports as lost.
//!
//! [`locate_member_byte`] and [`logical_offset`] translate between member bytes and the
//! logical volume, for naming what was repaired or lost.

use layout::{Loc, Role};

use crate::array::{ArrayState, Geometry, PlaceId};
use crate::plan::{Plan, PlanKind};
use crate::recon::{Builder, Values, View};
use crate::CoreError;

/// Where data-area byte `offset` of member `d` lies in the cycle's current layout: `(cycle,
/// place, byte within the chunk)`, or `None` when no place of that layout is there (rows a
/// layout leaves unused or reserved).
pub fn locate_member_byte(
    geo: &Geometry,
    state: &ArrayState,
    d: layout::Disk,
    offset: u64,
) -> Option<(u64, PlaceId, u64)> {
    let cb = geo.chunk_bytes();
    let row = offset / cb;
    let c = row / geo.stride_rows();
    if c >= geo.cycles() {
        return None;
    }
    let want = Loc {
        disk: d,
        offset: row % geo.stride_rows(),
    };
    let locs = state.place_locs(state.cycle_generation(c));
    let p = locs.iter().position(|l| *l == want)?;
    Some((c, p, offset % cb))
}

/// The logical byte the byte `in_chunk` of place `p` of cycle `c` holds: data places and mirror
/// copies name their data; parities hold no logical byte (`None`).
pub fn logical_offset(geo: &Geometry, c: u64, p: PlaceId, in_chunk: u64) -> Option<u64> {
    let data = match geo.role(p) {
        Role::Data => p,
        Role::Mirror => {
            let (s, _) = geo.place_units(p)[0];
            *geo.stripe_places(s)
                .iter()
                .find(|&&q| geo.role(q) == Role::Data)?
        }
        Role::P | Role::Q => return None,
    };
    let index = (0..geo.data_per_cycle() as usize).find(|&i| geo.data_place(i) == data)?;
    Some((c * geo.data_per_cycle() + index as u64) * geo.chunk_bytes() + in_chunk)
}

/// Plans recomputing bytes `[ra, rb)` (I/O aligned) of `places` of cycle `c` from the rest of
/// the cycle, as if they were unreadable, and writing them back to their positions. Places on
/// members that hold nothing valid (failed, not yet rebuilt) are recomputed but not written.
/// The plan reads only other places; it locks every stripe holding a repaired place.
pub fn plan_repair(
    geo: &Geometry,
    state: &ArrayState,
    c: u64,
    places: &[PlaceId],
    ra: u64,
    rb: u64,
) -> Result<Plan, CoreError> {
    assert!(
        ra < rb && rb <= geo.chunk_bytes() && geo.widen(ra, rb) == (ra, rb),
        "repair range {ra}..{rb} must be inside a chunk and aligned"
    );
    assert!(c < geo.cycles(), "cycle {c} out of range");
    let view = View::current_deferring(geo, state, c, places);
    let plain = View::current(geo, state, c);
    let mut b = Builder::new(0);
    let mut vals = Values::new(ra, rb);
    vals.acquire(&view, &mut b, places)?;
    for &p in places {
        b.lock_place(geo, p);
        if plain.available(p) {
            b.write(geo, c, view.loc(p), ra, vals.get(p));
        }
    }
    Ok(b.finish(PlanKind::Repair, &view, state, 0, Vec::new()))
}

/// The places of cycle `c` that cannot be recomputed once `unreadable` places are lost too:
/// `unreadable` themselves and every unavailable place (on a failed or not yet rebuilt member)
/// whose reconstruction needs one of them. What a rebuild loses when a survivor's block is
/// unreadable and the redundancy is already spent (RAID5 with a member failed).
pub fn lost_with(
    geo: &Geometry,
    state: &ArrayState,
    c: u64,
    unreadable: &[PlaceId],
) -> Vec<PlaceId> {
    let view = View::current_deferring(geo, state, c, unreadable);
    let plain = View::current(geo, state, c);
    let mut out: Vec<PlaceId> = unreadable.to_vec();
    for p in 0..geo.places() {
        if !plain.available(p)
            && !out.contains(&p)
            && crate::recon::schedule(&view, &|_| false, &[p]).is_err()
        {
            out.push(p);
        }
    }
    out
}

/// Where place `p` of cycle `c` is in layout generation `gen` (the cycle may be in another
/// generation now): for tools that look at where a block lived before a rebuild moved it.
pub fn place_loc_in(geo: &Geometry, state: &ArrayState, c: u64, p: PlaceId, gen: u32) -> Loc {
    View::in_generation(geo, state, c, gen).loc(p)
}

/// Where place `p` of cycle `c` is in the cycle's current layout, and whether that member
/// holds valid data for it.
pub fn place_loc(geo: &Geometry, state: &ArrayState, c: u64, p: PlaceId) -> (Loc, bool) {
    let view = View::current(geo, state, c);
    let l = view.loc(p);
    (l, state.member_available(l.disk, state.cycle_generation(c)))
}
