//! Bad requests and impossible situations come back as typed errors, before anything is
//! planned or changed.

mod common;

use common::{geometry, scheme, Harness};
use layout::{Params, SchemeKind};
use raidcore::{
    plan_read, plan_rebuild_cycle, plan_write, ArrayState, CoreError, Geometry, WritePolicy,
};

fn raid5(disks: usize, spares: usize) -> Harness {
    let p = Params {
        disks: Some(disks),
        spares,
        ..Params::default()
    };
    Harness::new(
        geometry(scheme(SchemeKind::Raid5, p), 512, 3),
        WritePolicy::Md,
    )
}

#[test]
fn ranges_beyond_the_end() {
    let h = raid5(5, 0);
    let cap = h.geo.capacity_bytes();
    let oob = |r: Result<_, CoreError>| matches!(r, Err(CoreError::OutOfRange { .. }));
    assert!(oob(plan_read(&h.geo, &h.state, cap, 1)));
    assert!(oob(plan_read(&h.geo, &h.state, cap - 1, 2)));
    assert!(oob(plan_read(&h.geo, &h.state, u64::MAX, 2)));
    assert!(oob(plan_write(
        &h.geo,
        &h.state,
        cap - 10,
        11,
        &WritePolicy::Md
    )));
    assert!(plan_read(&h.geo, &h.state, cap - 1, 1).is_ok());
    assert_eq!(plan_read(&h.geo, &h.state, cap, 0).unwrap(), vec![]);
    assert!(matches!(
        plan_rebuild_cycle(&h.geo, &h.state, 3),
        Err(CoreError::OutOfRange { .. })
    ));
    let bad_cost = WritePolicy::Cost {
        read_cost: vec![1.0; 3],
    };
    assert!(matches!(
        plan_write(&h.geo, &h.state, 0, 1, &bad_cost),
        Err(CoreError::BadPolicy(_))
    ));
}

#[test]
fn geometry_and_event_errors() {
    let s = scheme(
        SchemeKind::Raid5,
        Params {
            disks: Some(5),
            ..Params::default()
        },
    );
    assert_eq!(
        Geometry::new(s.clone(), 512, 5 * 512 - 1).unwrap_err(),
        CoreError::MemberTooSmall {
            member_bytes: 5 * 512 - 1,
            needed_bytes: 5 * 512
        }
    );
    assert_eq!(
        Geometry::new(s.clone(), 0, 1 << 20).unwrap_err(),
        CoreError::BadChunk { chunk_bytes: 0 }
    );
    let geo4k = Geometry::new(s.clone(), 4096, 1 << 20).unwrap();
    for bad in [0, 3, 8192] {
        assert_eq!(
            geo4k.clone().with_io_align(bad).unwrap_err(),
            CoreError::BadAlign {
                align: bad,
                chunk_bytes: 4096
            }
        );
    }
    assert_eq!(
        geo4k.with_io_align(512).unwrap().widen(700, 1100),
        (512, 1536)
    );
    let geo = Geometry::new(s, 512, 1 << 20).unwrap();
    let mut st = ArrayState::new(&geo);
    assert_eq!(
        st.fail(&geo, 5).unwrap_err(),
        CoreError::UnknownMember {
            member: 5,
            members: 5
        }
    );
    assert_eq!(
        st.replace(&geo, 1).unwrap_err(),
        CoreError::NotFailed { member: 1 }
    );
    st.fail(&geo, 1).unwrap();
    assert_eq!(
        st.fail(&geo, 1).unwrap_err(),
        CoreError::AlreadyFailed { member: 1 }
    );
    // Errors change nothing.
    assert_eq!(st.generation(), 1);
    assert_eq!(st.failed(), &[1]);
}

#[test]
fn too_many_failures_lose_data() {
    let mut h = raid5(5, 0);
    h.write(0, &vec![3; 20 * 512]);
    h.fail(0);
    let out = h.state.fail(&h.geo, 1).unwrap();
    assert!(out.data_lost && out.blocked.is_some());
    h.mem.remove(1);
    // Stripe 0 (chunks 0..4) lost disks 0 and 1.
    assert_eq!(
        plan_read(&h.geo, &h.state, 0, 512).unwrap_err(),
        CoreError::DataLost {
            cycle: 0,
            stripe: 0
        }
    );
    assert!(matches!(
        plan_write(&h.geo, &h.state, 0, 4 * 512, &WritePolicy::Md),
        Err(CoreError::DataLost { cycle: 0, .. })
    ));
    assert!(matches!(
        plan_rebuild_cycle(&h.geo, &h.state, 0),
        Err(CoreError::RebuildBlocked(_))
    ));
    // A three-way mirror survives two failures but not three.
    let p = Params {
        disks: Some(3),
        ..Params::default()
    };
    let mut m = Harness::new(
        geometry(scheme(SchemeKind::Raid1, p), 512, 2),
        WritePolicy::Md,
    );
    m.write(0, &[9; 1024]);
    m.fail(0);
    m.fail(2);
    m.check_all_reads();
    assert!(m.state.fail(&m.geo, 1).unwrap().data_lost);
    assert!(matches!(
        plan_read(&m.geo, &m.state, 0, 1),
        Err(CoreError::DataLost { .. })
    ));
}

#[test]
fn in_place_rebuild_needs_the_replacement_first() {
    let mut h = raid5(5, 0);
    h.write(100, &vec![5; 3000]);
    h.fail(2);
    assert_eq!(
        plan_rebuild_cycle(&h.geo, &h.state, 0).unwrap_err(),
        CoreError::NeedsReplacement { member: 2 }
    );
    h.replace(2);
    let plan = plan_rebuild_cycle(&h.geo, &h.state, 0).unwrap().unwrap();
    // Every unit of disk 2 is rebuilt onto the replacement; nothing else is written.
    assert!(plan.writes.iter().all(|w| w.member == 2));
    assert_eq!(plan.writes.len(), 5);
    // With a spare there is no need to wait.
    let mut s = raid5(6, 1);
    s.fail(2);
    let plan = plan_rebuild_cycle(&s.geo, &s.state, 0).unwrap().unwrap();
    assert!(plan.writes.iter().all(|w| w.member == 5));
    // A clean cycle has nothing to do.
    assert_eq!(
        plan_rebuild_cycle(&s.geo, &ArrayState::new(&s.geo), 0).unwrap(),
        None
    );
}
