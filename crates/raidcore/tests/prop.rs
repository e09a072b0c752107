//! Property test: arbitrary writes and reads (any offset, any length) on healthy and degraded
//! arrays read back what the reference model holds, and leave every checkable stripe
//! consistent.

mod common;

use common::{geometry, scheme, Harness};
use layout::{Params, SchemeKind};
use proptest::prelude::*;
use raidcore::WritePolicy;

fn harness(which: u8) -> Harness {
    let d = |n: usize| Params {
        disks: Some(n),
        ..Params::default()
    };
    let (kind, p) = match which % 4 {
        0 => (SchemeKind::Raid5, d(5)),
        1 => (SchemeKind::Raid6, d(6)),
        2 => (SchemeKind::Rm2, d(8)),
        _ => (
            SchemeKind::RaidPlus,
            Params {
                width: Some(4),
                level: Some(6),
                ..d(7)
            },
        ),
    };
    let policy = match which / 4 % 3 {
        0 => WritePolicy::Md,
        1 => WritePolicy::Modthresh,
        _ => WritePolicy::Rmw,
    };
    Harness::new(geometry(scheme(kind, p), 512, 2), policy)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn writes_and_reads_match_the_model(
        which in 0u8..12,
        failures in prop::collection::vec(0u32..8, 0..3),
        ops in prop::collection::vec((0.0f64..1.0, 1u64..3000, any::<u8>()), 1..12),
    ) {
        let mut h = harness(which);
        let cap = h.geo.capacity_bytes();
        let tolerance = h.geo.scheme().tolerance();
        let disks = h.geo.disks() as u32;
        let mut failed = Vec::new();
        for f in failures {
            let f = f % disks;
            if failed.len() < tolerance && !failed.contains(&f) {
                failed.push(f);
            }
        }
        for (i, (pos, len, byte)) in ops.iter().enumerate() {
            if i == ops.len() / 2 {
                for &f in &failed {
                    h.fail(f);
                }
            }
            let off = ((*pos * cap as f64) as u64).min(cap - 1);
            let len = (*len).min(cap - off);
            let data: Vec<u8> = (0..len).map(|j| byte.wrapping_add(j as u8)).collect();
            h.write(off, &data);
            h.check_read(off.saturating_sub(100), (len + 200).min(cap - off.saturating_sub(100)));
        }
        h.check_all_reads();
        h.check_consistent();
    }
}
