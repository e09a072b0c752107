//! `ArrayState::fault_tolerance` against what the bytes say, for every scheme and every state a
//! pool goes through: healthy, degraded, replaced but not rebuilt, part-rebuilt, rebuilt (into
//! spare space or onto a replacement) and, for two-parity layouts, with deferred (lazy)
//! parity. The figure `t` it reports must be exact: every set of `t` more failures leaves every
//! byte readable (checked by reading the whole volume back against a model from a `MemArray`
//! that lost those members), and when `t` is below the scheme's tolerance some set of `t + 1`
//! loses data.

mod common;

use common::{geometry, scheme, sequence, Harness, Rng};
use layout::{Disk, Params, SchemeKind};
use raidcore::{
    plan_write, plan_write_lazy, CoreError, LazyGroups, RebuildOrder, RebuildScheduler,
    SpeedLimits, WritePolicy,
};

fn d(n: usize) -> Params {
    Params {
        disks: Some(n),
        ..Params::default()
    }
}

fn schemes() -> Vec<(&'static str, SchemeKind, Params)> {
    vec![
        ("raid0", SchemeKind::Raid0, d(4)),
        ("raid1", SchemeKind::Raid1, d(3)),
        ("raid10", SchemeKind::Raid10, d(5)),
        ("raid4", SchemeKind::Raid4, d(5)),
        ("raid5", SchemeKind::Raid5, d(4)),
        (
            "raid5+spare",
            SchemeKind::Raid5,
            Params { spares: 1, ..d(5) },
        ),
        ("raid6", SchemeKind::Raid6, d(6)),
        (
            "raid50",
            SchemeKind::Raid50,
            Params {
                width: Some(3),
                spares: 1,
                ..d(7)
            },
        ),
        (
            "raid60",
            SchemeKind::Raid60,
            Params {
                width: Some(4),
                spares: 1,
                ..d(9)
            },
        ),
        (
            "random",
            SchemeKind::Random,
            Params {
                width: Some(4),
                seed: 3,
                stripes: Some(12),
                ..d(7)
            },
        ),
        (
            "random6",
            SchemeKind::Random,
            Params {
                width: Some(4),
                level: Some(6),
                seed: 4,
                stripes: Some(10),
                ..d(6)
            },
        ),
        (
            "hash",
            SchemeKind::Hash,
            Params {
                width: Some(3),
                seed: 5,
                stripes: Some(12),
                ..d(6)
            },
        ),
        (
            "raidplus",
            SchemeKind::RaidPlus,
            Params {
                width: Some(3),
                ..d(5)
            },
        ),
        (
            "raidplus6",
            SchemeKind::RaidPlus,
            Params {
                width: Some(4),
                level: Some(6),
                ..d(7)
            },
        ),
        (
            "s2raid5",
            SchemeKind::S2Raid5,
            Params {
                group: Some(3),
                partitions: Some(3),
                ..d(9)
            },
        ),
        ("rm2", SchemeKind::Rm2, d(8)),
        (
            "raidh",
            SchemeKind::RaidH,
            Params {
                weights: Some(vec![0, 0, 1, 1, 2]),
                ..d(5)
            },
        ),
    ]
}

/// Every `k`-subset of `items`.
fn subsets(items: &[Disk], k: usize) -> Vec<Vec<Disk>> {
    if k == 0 {
        return vec![Vec::new()];
    }
    let mut out = Vec::new();
    for (i, &x) in items.iter().enumerate() {
        for mut rest in subsets(&items[i + 1..], k - 1) {
            rest.insert(0, x);
            out.push(rest);
        }
    }
    out
}

/// Fails `set` in a copy of `h`: `true` when every byte still reads back as written.
fn survives(h: &Harness, set: &[Disk]) -> bool {
    let mut h = h.clone();
    for &d in set {
        let out = h.state.fail(&h.geo, d).unwrap();
        if out.data_lost {
            return false;
        }
        h.mem.remove(d);
    }
    let cap = h.geo.capacity_bytes();
    match h.try_read(0, cap) {
        Ok(got) => {
            assert!(
                got == h.model,
                "failing {set:?} was reported survivable but reads back wrong bytes"
            );
            true
        }
        Err(CoreError::DataLost { .. }) => false,
        Err(e) => panic!("read after failing {set:?}: {e}"),
    }
}

/// The reported tolerance is exact (see the module comment).
fn check(name: &str, what: &str, h: &Harness, expect: Option<usize>) -> usize {
    let t = h.state.fault_tolerance(&h.geo);
    let present: Vec<Disk> = (0..h.geo.disks() as Disk)
        .filter(|d| !h.state.failed().contains(d))
        .collect();
    for set in subsets(&present, t) {
        assert!(
            survives(h, &set),
            "{name} {what}: reported {t} more failures, but failing {set:?} loses data"
        );
    }
    if t < h.geo.scheme().tolerance() && t < present.len() {
        assert!(
            subsets(&present, t + 1).iter().any(|s| !survives(h, s)),
            "{name} {what}: reported {t}, but every {} more failures are survived",
            t + 1
        );
    }
    if let Some(e) = expect {
        assert_eq!(t, e, "{name} {what}");
    }
    t
}

/// Runs rebuild plans until `stop` says so (or the rebuild is done), replacing members when
/// the layout needs it. Returns whether it finished.
fn rebuild_until(h: &mut Harness, stop: impl Fn(&Harness) -> bool) -> bool {
    let mut sched = RebuildScheduler::new(RebuildOrder::Sequential, SpeedLimits::default());
    loop {
        if stop(h) {
            return false;
        }
        match sched.next_plans(&h.geo, &h.state) {
            Ok(plans) if plans.is_empty() => return true,
            Ok(plans) => {
                for p in plans.iter().rev() {
                    h.mem.run(p, &mut []).unwrap();
                    sched.complete(&mut h.state, p);
                }
            }
            Err(CoreError::NeedsReplacement { member }) => h.replace(member),
            Err(e) => panic!("rebuild: {e}"),
        }
    }
}

#[test]
fn fault_tolerance_is_exact_in_every_state_of_every_scheme() {
    for (seed, (name, kind, p)) in schemes().into_iter().enumerate() {
        let geo = geometry(scheme(kind, p), 512, 4);
        let nominal = geo.scheme().tolerance();
        let mut h = Harness::new(geo.clone(), WritePolicy::Md);
        h.run(&sequence(&geo, seed as u64, 30));
        check(name, "healthy", &h, Some(nominal));
        if nominal == 0 {
            continue;
        }
        let victim: Disk = 1;
        let mut degraded = h.clone();
        degraded.fail(victim);
        check(name, "degraded", &degraded, Some(nominal - 1));

        // Replaced, nothing rebuilt yet: the new member holds nothing, so the pool is exactly
        // as fragile as a degraded one (the complaint of issue 22: RAID5 said "1 more").
        let mut replaced = degraded.clone();
        replaced.replace(victim);
        check(name, "replaced, not rebuilt", &replaced, Some(nominal - 1));
        let mut rebuilt = replaced.clone();
        assert!(rebuild_until(&mut rebuilt, |_| false));
        check(name, "replaced and rebuilt", &rebuilt, Some(nominal));

        // Rebuilt without a replacement where the layout allows it (spare space or a spare
        // disk): redundancy is back although the member is still missing.
        let mut spare = degraded.clone();
        let total = geo.cycles();
        let mut part = spare.clone();
        let finished = rebuild_until(&mut part, |h| {
            h.state.clean_cycles() >= total / 2 || !h.replaced.is_empty()
        });
        if !finished && part.replaced.is_empty() {
            check(
                name,
                "part-rebuilt into spare space",
                &part,
                Some(nominal - 1),
            );
        }
        assert!(rebuild_until(&mut spare, |_| false));
        let into_spare = spare.replaced.is_empty();
        let t = check(name, "rebuilt", &spare, None);
        if into_spare {
            assert_eq!(
                t, nominal,
                "{name}: rebuilt into spare space restores redundancy"
            );
        }
    }
}

#[test]
fn deferred_parity_protects_one_failure_until_flushed() {
    let cases = [
        ("raid6", SchemeKind::Raid6, d(6)),
        ("rm2", SchemeKind::Rm2, d(8)),
        (
            "raidplus6",
            SchemeKind::RaidPlus,
            Params {
                width: Some(4),
                level: Some(6),
                ..d(7)
            },
        ),
    ];
    for (name, kind, p) in cases {
        let geo = geometry(scheme(kind, p), 512, 4);
        assert!(LazyGroups::new(&geo).supported(), "{name}");
        let mut h = Harness::new(geo.clone(), WritePolicy::Md);
        let mut rng = Rng(7);
        let data = rng.bytes(700);
        let lw = plan_write_lazy(&geo, &h.state, 1000, 700, &h.policy).unwrap();
        assert!(!lw.deferred.is_empty(), "{name}: the write defers a parity");
        h.state.defer(&lw.deferred);
        for p in &lw.plans {
            let at = p.user_offset as usize;
            let mut user = data[at..at + p.buffers[0]].to_vec();
            h.mem.run(p, &mut user).unwrap();
        }
        h.state.deferred_write_done(&lw.deferred);
        for p in plan_write(&geo, &h.shadow_state, 1000, 700, &h.policy).unwrap() {
            let at = p.user_offset as usize;
            let mut user = data[at..at + p.buffers[0]].to_vec();
            h.shadow.run(&p, &mut user).unwrap();
        }
        h.model[1000..1700].copy_from_slice(&data);
        check(name, "deferred parity", &h, Some(1));
    }
}
