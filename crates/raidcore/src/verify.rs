//! Verification: read every unit of a cycle and check that each stripe's parity (or mirror
//! copies) agrees with its data. An executor runs the reads of [`plan_verify_cycle`] and hands
//! the buffers to [`check_verify`].

use std::collections::HashMap;

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

/// The available places of cycle `c`, in stripe order, each once: buffer `i + 1` of the verify
/// plan holds place `i`.
fn places(state: &ArrayState, c: u64) -> Vec<Loc> {
    let gen = state.cycle_generation(c);
    let mut seen = HashMap::new();
    let mut out = Vec::new();
    for s in &state.layout_of(c).stripes {
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
    let chunk = geo.chunk_bytes() as usize;
    let locs = places(state, c);
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
    let c = plan.cycle;
    assert_eq!(
        plan.layout_generation,
        state.cycle_generation(c),
        "verify plan is stale"
    );
    let index: HashMap<Loc, usize> = places(state, c)
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
