//! Properties every scheme must keep, checked on a spread of parameter sets for every scheme:
//! - the cycle is well formed and every stripe sits on distinct disks;
//! - `Layout::locate` maps logical chunks one-to-one onto data places, cycle after cycle;
//! - every failure set the scheme claims to tolerate (exhaustively: all singles, and all pairs for
//!   two-failure schemes) is recoverable, the rebuilt layout has nothing left on a failed disk
//!   (unless rebuilt in place on its replacement), keeps stripes on distinct disks, and every
//!   repair reads only survivors or units rebuilt before it.

use std::collections::HashSet;
use std::sync::Arc;

use layout::{build, recovery_plan, Disk, Layout, Loc, Params, Scheme, SchemeKind, Source};

fn p() -> Params {
    Params::default()
}

fn cases() -> Vec<(SchemeKind, Params)> {
    let d = |n: usize| Params {
        disks: Some(n),
        ..p()
    };
    let mut v = vec![
        (SchemeKind::Raid0, d(4)),
        (SchemeKind::Raid1, d(3)),
        (SchemeKind::Raid10, d(4)),
        (SchemeKind::Raid10, d(5)),
        (SchemeKind::Raid4, d(5)),
        (SchemeKind::Raid5, d(6)),
        (SchemeKind::Raid5, Params { spares: 2, ..d(8) }),
        (SchemeKind::Raid6, d(7)),
        (SchemeKind::Raid6, Params { spares: 1, ..d(7) }),
        (
            SchemeKind::Raid50,
            Params {
                width: Some(3),
                spares: 1,
                ..d(10)
            },
        ),
        (
            SchemeKind::Raid5c,
            Params {
                width: Some(4),
                ..d(8)
            },
        ),
        (
            SchemeKind::Raid60,
            Params {
                width: Some(4),
                spares: 1,
                ..d(9)
            },
        ),
        (
            SchemeKind::Raid60,
            Params {
                width: Some(5),
                ..d(10)
            },
        ),
        (
            SchemeKind::Random,
            Params {
                width: Some(4),
                seed: 3,
                ..d(9)
            },
        ),
        (
            SchemeKind::Random,
            Params {
                width: Some(5),
                level: Some(6),
                seed: 4,
                ..d(9)
            },
        ),
        (
            SchemeKind::Hash,
            Params {
                width: Some(3),
                seed: 5,
                ..d(8)
            },
        ),
        (
            SchemeKind::Hash,
            Params {
                width: Some(4),
                level: Some(6),
                ..d(8)
            },
        ),
        (
            SchemeKind::RaidPlus,
            Params {
                width: Some(3),
                ..d(5)
            },
        ),
        (
            SchemeKind::RaidPlus,
            Params {
                width: Some(4),
                ..d(8)
            },
        ),
        (
            SchemeKind::RaidPlus,
            Params {
                width: Some(4),
                level: Some(6),
                ..d(7)
            },
        ),
        (
            SchemeKind::RaidPlus,
            Params {
                width: Some(5),
                level: Some(6),
                ..d(9)
            },
        ),
        (
            SchemeKind::S2Raid5,
            Params {
                group: Some(3),
                partitions: Some(3),
                ..d(9)
            },
        ),
        (
            SchemeKind::S2Raid10,
            Params {
                group: Some(3),
                partitions: Some(3),
                ..d(9)
            },
        ),
        (SchemeKind::Rm2, d(8)),
        (SchemeKind::Rm2, d(7)),
        (
            SchemeKind::RaidH,
            Params {
                weights: Some(vec![0, 0, 1, 1, 2]),
                ..d(5)
            },
        ),
        (
            SchemeKind::RaidH,
            Params {
                weights: Some(vec![0, 0, 0, 0, 5]),
                ..d(5)
            },
        ),
        (
            SchemeKind::RaidH,
            Params {
                weights: Some(vec![1, 1, 1, 1, 1]),
                ..d(5)
            },
        ),
    ];
    for order in [layout::Order::Read, layout::Order::Write] {
        v.push((
            SchemeKind::RaidPlus,
            Params {
                width: Some(3),
                order,
                ..d(7)
            },
        ));
    }
    v
}

fn failure_sets(s: &dyn Scheme) -> Vec<Vec<Disk>> {
    let n = s.cycle().disks as Disk;
    let spares = s.spare_disks();
    let data_disks: Vec<Disk> = (0..n).filter(|d| !spares.contains(d)).collect();
    let mut sets: Vec<Vec<Disk>> = Vec::new();
    if s.tolerance() >= 1 {
        sets.extend(data_disks.iter().map(|d| vec![*d]));
    }
    if s.tolerance() >= 2 {
        for a in &data_disks {
            for b in &data_disks {
                if a != b {
                    sets.push(vec![*a, *b]);
                }
            }
        }
    }
    sets
}

fn check_scheme(kind: SchemeKind, s: Arc<dyn Scheme>) {
    let c = s.cycle();
    c.assert_well_formed();
    for (i, st) in c.stripes.iter().enumerate() {
        let disks: HashSet<Disk> = st.units.iter().map(|u| u.disk).collect();
        assert_eq!(
            disks.len(),
            st.units.len(),
            "{kind:?}: stripe {i} repeats a disk"
        );
    }
    // locate is a bijection from logical chunks onto data places over three cycles.
    let l = Layout::new(s.clone(), 4096).unwrap();
    let per = c.data_chunks();
    assert!(per > 0, "{kind:?}: a cycle holds data");
    let mut seen: HashSet<Loc> = HashSet::new();
    for chunk in 0..3 * per {
        let at = l.locate(chunk);
        assert!(
            at.loc.offset / c.rows == at.cycle,
            "{kind:?}: chunk {chunk} outside its cycle"
        );
        assert!(
            seen.insert(at.loc),
            "{kind:?}: chunk {chunk} shares a place"
        );
        let units = l.stripe_units(at.cycle, at.stripe);
        assert!(
            units
                .iter()
                .any(|u| u.loc() == at.loc && u.role == layout::Role::Data),
            "{kind:?}: chunk {chunk} not in its stripe"
        );
    }
    // A partial cycle at the end of a member is not used.
    assert_eq!(l.capacity_chunks(10 * c.rows + (c.rows - 1)), 10 * per);
    assert_eq!(l.capacity_chunks(11 * c.rows), 11 * per);

    for failed in failure_sets(&*s) {
        let plan = recovery_plan(&*s, &failed)
            .unwrap_or_else(|e| panic!("{kind:?}: failure {failed:?} not recoverable: {e}"));
        let lost: usize = c
            .places()
            .keys()
            .filter(|l| failed.contains(&l.disk))
            .count();
        let repaired: HashSet<Loc> = plan.repairs.iter().map(|r| r.lost.loc()).collect();
        assert_eq!(
            repaired.len(),
            lost,
            "{kind:?} {failed:?}: every lost unit repaired once"
        );
        let mut done: HashSet<Loc> = HashSet::new();
        for r in &plan.repairs {
            for src in &r.sources {
                match src {
                    Source::Disk(l) => {
                        assert!(!failed.contains(&l.disk), "{kind:?}: reads a failed disk")
                    }
                    Source::Rebuilt(l) => assert!(
                        done.contains(l),
                        "{kind:?}: uses a unit before rebuilding it"
                    ),
                }
            }
            assert!(
                !failed.contains(&r.target.disk) || r.target.disk == r.lost.disk,
                "{kind:?}: writes to another failed disk"
            );
            done.insert(r.target);
        }
        for st in &plan.rebuilt.stripes {
            let disks: HashSet<Disk> = st.units.iter().map(|u| u.disk).collect();
            assert_eq!(
                disks.len(),
                st.units.len(),
                "{kind:?} {failed:?}: rebuilt stripe repeats a disk"
            );
        }
        // The rebuilt layout is itself well formed: no two units share a place.
        plan.rebuilt.assert_well_formed();
    }
}

#[test]
fn every_scheme_keeps_its_invariants() {
    for (kind, params) in cases() {
        let s = build(kind, &params).unwrap_or_else(|e| panic!("{kind:?} {params:?}: {e}"));
        check_scheme(kind, s);
    }
}

#[test]
fn too_many_failures_is_an_error_not_a_panic() {
    for (kind, params) in cases() {
        let s = build(kind, &params).unwrap();
        let n = s.cycle().disks as Disk;
        let spares = s.spare_disks();
        let too_many: Vec<Disk> = (0..n)
            .filter(|d| !spares.contains(d))
            .take(s.tolerance() + 1)
            .collect();
        if too_many.len() == s.tolerance() + 1 {
            assert!(recovery_plan(&*s, &too_many).is_err(), "{kind:?}");
        }
    }
}

/// `recovery_rows` (what array geometries size their cycles with) answers what `recovery_plan`
/// builds, errors included: every single failure and every pair of every case, and triples of
/// the first disks.
#[test]
fn recovery_rows_is_the_rebuilt_cycles_rows() {
    for (kind, params) in cases() {
        let s = build(kind, &params).unwrap();
        let n = s.cycle().disks as Disk;
        let mut sets: Vec<Vec<Disk>> = vec![vec![], vec![n], vec![0, 0]];
        for a in 0..n {
            sets.push(vec![a]);
            for b in 0..n {
                sets.push(vec![a, b]);
            }
        }
        sets.extend([vec![0, 1, 2], vec![2, 0, 1], vec![n - 1, 0, n / 2]]);
        for failed in sets {
            assert_eq!(
                layout::recovery_rows(&*s, &failed),
                recovery_plan(&*s, &failed).map(|p| p.rebuilt.rows),
                "{kind:?} {failed:?}"
            );
        }
    }
}

/// A scheme that says its relocations keep offsets (so that arrays skip relocating to size
/// their cycles) keeps them for every failure set it relocates; the classic schemes say so.
#[test]
fn relocation_keeps_offsets_when_it_says_so() {
    for (kind, params) in cases() {
        let s = build(kind, &params).unwrap();
        let claims = s.relocation_keeps_offsets();
        let classic = matches!(
            kind,
            SchemeKind::Raid0
                | SchemeKind::Raid1
                | SchemeKind::Raid10
                | SchemeKind::Raid4
                | SchemeKind::Raid5
                | SchemeKind::Raid6
                | SchemeKind::Raid50
                | SchemeKind::Raid60
        );
        if classic {
            assert!(claims, "{kind:?}");
        }
        if !claims {
            continue;
        }
        let n = s.cycle().disks as Disk;
        for a in 0..n {
            for b in 0..n {
                let failed = if a == b { vec![a] } else { vec![a, b] };
                let Ok(moves) = s.relocate(&failed) else {
                    continue;
                };
                for (from, to) in &moves {
                    assert_eq!(from.offset, to.offset, "{kind:?} {failed:?}");
                }
            }
        }
    }
}

mod no_panics {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(400))]
        /// Arbitrary (often invalid) parameters and failure lists: building either fails with an
        /// error or gives a scheme whose checks and recovery either succeed or fail with an
        /// error. Nothing panics.
        #[test]
        fn arbitrary_parameters_never_panic(
            kind in 0usize..15,
            disks in prop::option::of(0usize..20),
            width in prop::option::of(0usize..20),
            spares in 0usize..4,
            level in prop::option::of(0u8..8),
            group in prop::option::of(0usize..8),
            partitions in prop::option::of(0usize..8),
            weights in prop::option::of(prop::collection::vec(0u32..4, 0..9)),
            failed in prop::collection::vec(0u32..22, 0..4),
        ) {
            let kind = SchemeKind::ALL[kind].1;
            let params = Params { disks, width, spares, level, group, partitions, weights, ..Params::default() };
            if let Ok(s) = build(kind, &params) {
                let _ = layout::check(&*s, &failed, 16);
                prop_assert_eq!(
                    layout::recovery_rows(&*s, &failed),
                    recovery_plan(&*s, &failed).map(|p| p.rebuilt.rows)
                );
            }
        }
    }
}
