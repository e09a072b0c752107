//! Verification: read every unit of a cycle and check that each stripe's parity (or mirror
//! copies) agrees with its data. An executor runs the reads of [`plan_verify_cycle`] and hands
//! the buffers to [`check_verify`]; or, to hold less than a cycle in memory (a cycle of a wide
//! declustered layout is hundreds of MiB), the same for each run of stripes that
//! [`verify_parts`] gives ([`plan_verify_stripes`], [`check_verify_stripes`]).

use std::collections::HashMap;
use std::ops::Range;

use layout::{Code, Loc, Role};

use crate::array::{ArrayState, Geometry};
use crate::plan::{MemberIo, Plan, PlanKind, Slice};

/// What [`check_verify`] found in one cycle.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VerifyOutcome {
    /// Stripes whose every unit was read and checked.
    pub checked: usize,
    /// Stripes with a unit on a missing member (not checkable).
    pub degraded: usize,
    /// Stripes (indices in the cycle) whose parity or copies disagree.
    pub inconsistent: Vec<usize>,
}

/// The available places of `stripes` of cycle `c`, in stripe order, each once: buffer `i + 1`
/// of the verify plan holds place `i`.
fn places(state: &ArrayState, c: u64, stripes: Range<usize>) -> Vec<Loc> {
    let gen = state.cycle_generation(c);
    let mut seen = HashMap::new();
    let mut out = Vec::new();
    for s in &state.layout_of(c).stripes[stripes] {
        for u in &s.units {
            let l = u.loc();
            if state.member_available(l.disk, gen) && seen.insert(l, ()).is_none() {
                out.push(l);
            }
        }
    }
    out
}

/// A plan that reads every available unit of cycle `c` in full (no ops, no writes; buffer 0 is
/// empty).
pub fn plan_verify_cycle(geo: &Geometry, state: &ArrayState, c: u64) -> Plan {
    plan_verify_stripes(geo, state, c, 0..state.layout_of(c).stripes.len())
}

/// Cycle `c`'s stripes in consecutive runs whose units take at most `max_bytes` each (a stripe
/// larger than that alone), covering every stripe once, in order: verified one run at a time
/// ([`plan_verify_stripes`]), a cycle is held in memory a run at a time.
pub fn verify_parts(
    geo: &Geometry,
    state: &ArrayState,
    c: u64,
    max_bytes: u64,
) -> Vec<Range<usize>> {
    let chunk = geo.chunk_bytes();
    let stripes = &state.layout_of(c).stripes;
    let mut out: Vec<Range<usize>> = Vec::new();
    let mut start = 0;
    let mut bytes = 0u64;
    for (i, s) in stripes.iter().enumerate() {
        let b = s.units.len() as u64 * chunk;
        if i > start && bytes + b > max_bytes {
            out.push(start..i);
            start = i;
            bytes = 0;
        }
        bytes += b;
    }
    if start < stripes.len() {
        out.push(start..stripes.len());
    }
    out
}

/// [`plan_verify_cycle`] for `stripes` of cycle `c` only.
pub fn plan_verify_stripes(
    geo: &Geometry,
    state: &ArrayState,
    c: u64,
    stripes: Range<usize>,
) -> Plan {
    let chunk = geo.chunk_bytes() as usize;
    let locs = places(state, c, stripes);
    let mut buffers = vec![0usize];
    let mut reads = Vec::with_capacity(locs.len());
    for (i, l) in locs.iter().enumerate() {
        buffers.push(chunk);
        reads.push(MemberIo {
            member: l.disk,
            offset_bytes: geo.member_offset(c, *l, 0),
            data: Slice::whole(i + 1, chunk),
        });
    }
    Plan {
        kind: PlanKind::Read,
        cycle: c,
        layout_generation: state.cycle_generation(c),
        state_generation: state.generation(),
        user_offset: 0,
        buffers,
        reads,
        ops: Vec::new(),
        writes: Vec::new(),
        locks: Vec::new(),
        modes: Vec::new(),
        bpgl_removals: None,
    }
}

/// Checks the stripes of the cycle a [`plan_verify_cycle`] plan read. `bufs[i]` is the plan's
/// buffer `i` after its reads.
pub fn check_verify(state: &ArrayState, plan: &Plan, bufs: &[Vec<u8>]) -> VerifyOutcome {
    check_verify_stripes(
        state,
        plan,
        bufs,
        0..state.layout_of(plan.cycle).stripes.len(),
    )
}

/// [`check_verify`] of the `stripes` a [`plan_verify_stripes`] plan read; the inconsistent
/// stripes are reported by their index in the cycle.
pub fn check_verify_stripes(
    state: &ArrayState,
    plan: &Plan,
    bufs: &[Vec<u8>],
    stripes: Range<usize>,
) -> VerifyOutcome {
    let c = plan.cycle;
    assert_eq!(
        plan.layout_generation,
        state.cycle_generation(c),
        "verify plan is stale"
    );
    let index: HashMap<Loc, usize> = places(state, c, stripes.clone())
        .into_iter()
        .enumerate()
        .map(|(i, l)| (l, i + 1))
        .collect();
    assert_eq!(
        index.len() + 1,
        bufs.len(),
        "one buffer per available place"
    );
    let mut out = VerifyOutcome::default();
    let first = stripes.start;
    for (si, s) in state.layout_of(c).stripes[stripes]
        .iter()
        .enumerate()
        .map(|(i, s)| (first + i, s))
    {
        let got: Option<Vec<&[u8]>> = s
            .units
            .iter()
            .map(|u| index.get(&u.loc()).map(|&b| bufs[b].as_slice()))
            .collect();
        let Some(units) = got else {
            out.degraded += 1;
            continue;
        };
        let data: Vec<&[u8]> = s
            .units
            .iter()
            .zip(&units)
            .filter(|(u, _)| u.role == Role::Data)
            .map(|(_, b)| *b)
            .collect();
        let role = |r: Role| {
            s.units
                .iter()
                .zip(&units)
                .find(|(u, _)| u.role == r)
                .map(|(_, b)| *b)
        };
        let ok = match s.code {
            Code::None => true,
            Code::Mirror => units.windows(2).all(|w| w[0] == w[1]),
            Code::Xor => {
                let p = role(Role::P).expect("an XOR stripe has P");
                codec::xor::verify(&data, p).expect("equal lengths")
            }
            Code::PQ => {
                let p = role(Role::P).expect("a P+Q stripe has P");
                let q = role(Role::Q).expect("a P+Q stripe has Q");
                codec::pq::verify(&data, p, q)
                    .expect("equal lengths")
                    .is_consistent()
            }
        };
        out.checked += 1;
        if !ok {
            out.inconsistent.push(si);
        }
    }
    out
}

/// What [`resync_cycle`] decided for one cycle.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Resync {
    /// Member writes that make every stripe whose units are all present consistent:
    /// `(member, member data-area offset, bytes)`, whole units.
    pub writes: Vec<(layout::Disk, u64, Vec<u8>)>,
    /// Stripes with a unit on a missing member: left as they are (their parity cannot be
    /// recomputed from data a member no longer has).
    pub degraded: usize,
    /// Stripes (indices in the cycle) that were not consistent and are rewritten.
    pub rewritten: Vec<usize>,
}

/// A resync of cycle `c` after an unclean shutdown without a write journal: a write the crash
/// interrupted may have reached some members of a stripe and not others (the RAID write
/// hole), so the stripe's parity may disagree with its data. Like MD's resync, the data are
/// taken as they are and every parity is recomputed from them (a mirror's copies from its
/// first copy). Takes the buffers of a [`plan_verify_cycle`] plan after its reads; returns
/// the writes to make (only units that differ).
pub fn resync_cycle(geo: &Geometry, state: &ArrayState, plan: &Plan, bufs: &[Vec<u8>]) -> Resync {
    let c = plan.cycle;
    assert_eq!(
        plan.layout_generation,
        state.cycle_generation(c),
        "resync plan is stale"
    );
    let locs = places(state, c, 0..state.layout_of(c).stripes.len());
    assert_eq!(locs.len() + 1, bufs.len(), "one buffer per available place");
    let index: HashMap<Loc, usize> = locs.iter().enumerate().map(|(i, l)| (*l, i + 1)).collect();
    let mut out = Resync::default();
    let fix = |out: &mut Resync, loc: Loc, want: &[u8]| {
        let got = &bufs[index[&loc]];
        if got.as_slice() != want {
            out.writes
                .push((loc.disk, geo.member_offset(c, loc, 0), want.to_vec()));
            true
        } else {
            false
        }
    };
    for (si, s) in state.layout_of(c).stripes.iter().enumerate() {
        let got: Option<Vec<&[u8]>> = s
            .units
            .iter()
            .map(|u| index.get(&u.loc()).map(|&b| bufs[b].as_slice()))
            .collect();
        let Some(units) = got else {
            out.degraded += 1;
            continue;
        };
        let data: Vec<&[u8]> = s
            .units
            .iter()
            .zip(&units)
            .filter(|(u, _)| u.role == Role::Data)
            .map(|(_, b)| *b)
            .collect();
        let loc_of = |r: Role| s.units.iter().find(|u| u.role == r).map(|u| u.loc());
        let len = units[0].len();
        let changed = match s.code {
            Code::None => false,
            Code::Mirror => {
                let first = units[0].to_vec();
                let mut any = false;
                for u in &s.units[1..] {
                    any |= fix(&mut out, u.loc(), &first);
                }
                any
            }
            Code::Xor => {
                let mut p = vec![0u8; len];
                codec::xor::encode(&data, &mut p).expect("equal lengths");
                fix(&mut out, loc_of(Role::P).expect("an XOR stripe has P"), &p)
            }
            Code::PQ => {
                let (mut p, mut q) = (vec![0u8; len], vec![0u8; len]);
                codec::pq::encode(&data, &mut p, &mut q).expect("equal lengths");
                let a = fix(&mut out, loc_of(Role::P).expect("a P+Q stripe has P"), &p);
                let b = fix(&mut out, loc_of(Role::Q).expect("a P+Q stripe has Q"), &q);
                a || b
            }
        };
        if changed {
            out.rewritten.push(si);
        }
    }
    out
}

/// Stripes of cycle `c` (as laid out now) with a unit on a missing member: what
/// [`resync_cycle`] would leave as they are.
pub fn unavailable_stripes(state: &ArrayState, c: u64) -> usize {
    let gen = state.cycle_generation(c);
    state
        .layout_of(c)
        .stripes
        .iter()
        .filter(|s| {
            s.units
                .iter()
                .any(|u| !state.member_available(u.loc().disk, gen))
        })
        .count()
}
