//! IDO and the other rebuild policies of seed 003 in the real engine: a served pool
//! (`SharedPool`) with a RAID1 surrogate pool, a skewed workload learned in normal state, a
//! member failure, a policy rebuild driven step by step (and in the background), and every
//! byte compared with a reference volume throughout, across restarts in the middle of the
//! rebuild and of the reclaim, and across a surrogate failure.

use dev::ido::{IdoStatus, RebuildPolicy};
use dev::serve_support::{PolicyStep, RebuildCursor};

#[path = "support/ido_rig.rs"]
mod rig;
use rig::*;

#[test]
fn ido_hot_zones_first_redirected_reclaimed_across_restarts() {
    let (mut rig, mut sp) = Rig::new("ido");
    // Popularity was learned in normal state and survives a restart.
    let before = ido_status(&sp);
    assert_eq!(before.phase, "normal");
    let top: Vec<u64> = before.popular.iter().take(3).map(|&(z, _)| z).collect();
    let mut hot_sorted = HOT.to_vec();
    hot_sorted.sort();
    let mut top_sorted = top.clone();
    top_sorted.sort();
    assert_eq!(top_sorted, hot_sorted, "popular zones {:?}", before.popular);
    sp = restart(&rig, sp);
    assert_eq!(ido_status(&sp).popular, before.popular);

    rig.begin_policy(&sp, RebuildPolicy::Ido);
    let s = ido_status(&sp);
    assert_eq!(s.policy, "ido");
    assert_eq!(s.phase, "rebuilding");
    let mut hot_first: Vec<u64> = s.hot_zones.iter().take(3).copied().collect();
    hot_first.sort();
    assert_eq!(hot_first, hot_sorted, "hot zones {:?}", s.hot_zones);

    let mut cur = RebuildCursor::new();
    let mut steps = 0;
    let mut restarted_rebuild = false;
    let mut restarted_reclaim = false;
    let mut max_migrated = 0;
    let mut saw_dmap = 0;
    let mut saw_redirected = (false, false);
    loop {
        rig.workload(&sp, 12);
        let step = sp.policy_step(&opts(), &mut cur).unwrap();
        steps += 1;
        let s = ido_status(&sp);
        max_migrated = max_migrated.max(s.zones_migrated);
        saw_dmap = saw_dmap.max(s.dmap_entries);
        // (Request counters start over at a restart.)
        saw_redirected.0 |= s.redirected_reads > 0;
        saw_redirected.1 |= s.redirected_writes > 0;
        // The core's zone flags follow the seed's states: `11` = on the surrogate, `10` or
        // `11` = rebuilt.
        if s.phase == "rebuilding" {
            assert_eq!(s.zones_flag_migrated, s.zones_migrated, "{s:?}");
        }
        // (Before the restart only: after it, status counts zones rebuilt since the resume.)
        if s.phase == "rebuilding" && !restarted_rebuild {
            assert_eq!(
                s.zones_flag_rebuilt + s.zones_flag_migrated,
                s.zones_rebuilt,
                "{s:?}"
            );
        }
        if matches!(step, PolicyStep::Done) {
            break;
        }
        // The hot zones are rebuilt before any other (2 cycles each, one cycle per step).
        if !restarted_rebuild && s.zones_rebuilt >= 3 && s.zones_rebuilt < 6 {
            let n = s.hot_zones.len().min(s.rebuilt_order.len());
            assert_eq!(
                &s.rebuilt_order[..n],
                &s.hot_zones[..n],
                "rebuild order {:?}, hot {:?}",
                s.rebuilt_order,
                s.hot_zones
            );
        }
        if !restarted_rebuild && s.zones_rebuilt == 10 {
            // Restart in the middle of the rebuild: everything redirected so far is found
            // again, and the rebuild resumes with the recorded policy.
            restarted_rebuild = true;
            assert!(s.dmap_entries > 0 && s.zones_migrated >= 3, "{s:?}");
            sp = crash(&rig, sp);
            let again = ido_status(&sp);
            assert_eq!(again.phase, "rebuilding");
            assert_eq!(again.dmap_entries, s.dmap_entries);
            assert_eq!(again.zones_migrated, s.zones_migrated);
            assert_eq!(again.zones_flag_migrated, s.zones_flag_migrated);
            assert_eq!(again.epochs, s.epochs);
            rig.check_all(&sp);
            assert!(sp.begin_policy_rebuild(None, None).unwrap());
            cur = RebuildCursor::new();
        }
        if !restarted_reclaim && s.phase == "reclaiming" && s.reclaim_steps == 1 {
            restarted_reclaim = true;
            assert!(s.reclaim_ranges_left > 0, "{s:?}");
            sp = restart(&rig, sp);
            assert_eq!(ido_status(&sp).phase, "reclaiming");
            rig.check_all(&sp);
            assert!(sp.begin_policy_rebuild(None, None).unwrap());
            cur = RebuildCursor::new();
        }
        assert!(steps < 10_000, "the rebuild does not end");
    }
    assert!(restarted_rebuild && restarted_reclaim);
    let s = ido_status(&sp);
    assert_eq!(s.phase, "normal");
    assert_eq!(s.dmap_entries, 0, "{s:?}");
    assert_eq!(s.dmap_bytes, 0);
    assert_eq!(s.zones_rebuilt, 32);
    assert_eq!(
        s.zones_flag_migrated, 0,
        "reclaimed zones are no longer `11`: {s:?}"
    );
    assert!(
        max_migrated >= 3,
        "hot zones were migrated ({max_migrated})"
    );
    assert!(saw_dmap > 0);
    assert_eq!(saw_redirected, (true, true), "{s:?}");
    assert!(s.reclaimed_bytes > 0);
    assert_eq!(sp.status().unwrap().state, "clean");
    rig.check_all(&sp);
    let v = sp.verify().unwrap();
    assert!(v.inconsistent.is_empty(), "{:?}", v.inconsistent);
    assert!(rig.checked > 500);
    sp = restart(&rig, sp);
    rig.check_all(&sp);
    sp.close().unwrap();
}

/// The baselines: every byte right during and after the rebuild, the D-Map emptied.
fn policy_run(policy: RebuildPolicy) -> IdoStatus {
    let (mut rig, sp) = Rig::new(policy.name());
    rig.begin_policy(&sp, policy);
    let mut cur = RebuildCursor::new();
    let mut first = Vec::new();
    let mut max_dmap = 0;
    loop {
        rig.workload(&sp, 12);
        let step = sp.policy_step(&opts(), &mut cur).unwrap();
        let s = ido_status(&sp);
        max_dmap = max_dmap.max(s.dmap_entries);
        if first.is_empty() && !s.rebuilt_order.is_empty() {
            first = s.rebuilt_order.clone();
        }
        if matches!(step, PolicyStep::Done) {
            break;
        }
    }
    rig.check_all(&sp);
    let mut s = ido_status(&sp);
    assert_eq!(s.phase, "normal");
    assert_eq!(s.dmap_entries, 0);
    assert!(sp.verify().unwrap().inconsistent.is_empty());
    sp.close().unwrap();
    s.rebuilt_order = first;
    s.dmap_entries = max_dmap;
    s
}

#[test]
fn pr_rebuilds_in_address_order_without_redirection() {
    let s = policy_run(RebuildPolicy::Pr);
    assert_eq!(s.redirected_requests, 0);
    assert_eq!(s.rebuilt_order.first(), Some(&0));
}

#[test]
fn pro_rebuilds_popular_zones_first() {
    let s = policy_run(RebuildPolicy::Pro);
    assert!(HOT.contains(&s.rebuilt_order[0]), "{:?}", s.rebuilt_order);
    assert_eq!(s.redirected_requests, 0);
}

#[test]
fn workout_redirects_writes_and_popular_reads() {
    let s = policy_run(RebuildPolicy::Workout);
    assert!(s.redirected_writes > 0 && s.redirected_reads > 0, "{s:?}");
    assert!(s.dmap_entries > 0);
}

/// VDF is a read cache (the core's, as in the simulator): reads hit it, writes stay on the
/// pool (and invalidate cached blocks).
#[test]
fn vdf_caches_reads_and_keeps_writes_on_the_pool() {
    let s = policy_run(RebuildPolicy::Vdf);
    assert!(s.redirected_reads > 0, "{s:?}");
    assert_eq!(s.redirected_writes, 0, "{s:?}");
}

#[test]
fn surrogate_failure_during_an_ido_rebuild_loses_nothing() {
    let (mut rig, sp) = Rig::new("surfail");
    rig.begin_policy(&sp, RebuildPolicy::Ido);
    let mut cur = RebuildCursor::new();
    let mut failed = false;
    loop {
        rig.workload(&sp, 12);
        let step = sp.policy_step(&opts(), &mut cur).unwrap();
        let s = ido_status(&sp);
        if !failed && s.zones_rebuilt == 8 {
            assert!(s.dmap_dirty_bytes > 0 && s.zones_migrated > 0, "{s:?}");
            // A surrogate member dies: the redirected data is copied home at the next
            // request, the surrogate dropped, the rebuild goes on as PR.
            sp.ido().fail_surrogate_member(0).unwrap();
            failed = true;
            rig.workload(&sp, 30);
            let s = ido_status(&sp);
            assert!(s.surrogate_state.starts_with("dropped"), "{s:?}");
            assert_eq!(s.dmap_entries, 0);
            rig.check_all(&sp);
        }
        if matches!(step, PolicyStep::Done) {
            break;
        }
    }
    assert!(failed);
    rig.check_all(&sp);
    let s = ido_status(&sp);
    assert_eq!(s.phase, "normal");
    assert_eq!(sp.status().unwrap().state, "clean");
    sp.close().unwrap();
}

/// The background rebuild thread with clients running beside it (the served path). The
/// rebuild is slowed (5 MiB members at 2 MiB/s) so that client rounds overlap it; rounds that
/// end while it still runs, and IDO redirecting requests meanwhile, show that they did.
#[test]
fn ido_in_the_background_with_concurrent_clients() {
    let (mut rig, sp) = Rig::new("bg");
    rig.fail_and_replace(&sp);
    let slowed = dev::pool::RebuildOpts {
        speed_max_bytes_per_sec: Some(2 << 20),
        ..opts()
    };
    sp.start_rebuild_with(slowed, Some(RebuildPolicy::Ido), None)
        .unwrap();
    let mut rounds = 0;
    let mut rounds_during = 0;
    let mut redirected_during = 0;
    let mut migrated_bytes = 0;
    while sp.rebuild_info().running {
        rig.workload(&sp, 20);
        rounds += 1;
        let s = ido_status(&sp);
        if sp.rebuild_info().running && s.phase == "rebuilding" {
            rounds_during += 1;
            redirected_during = s.redirected_requests;
        }
        migrated_bytes = migrated_bytes.max(s.migrated_bytes);
        assert!(rounds < 100_000);
    }
    assert!(
        rounds_during > 0 && redirected_during > 0,
        "{rounds_during} client rounds ended while the rebuild ran, {redirected_during} requests redirected"
    );
    // Hot zones were migrated as the pipelined rebuild finished them.
    assert!(
        migrated_bytes >= ZONE,
        "migrated {migrated_bytes} bytes; at the end {:?}",
        ido_status(&sp)
    );
    let info = sp.rebuild_info();
    assert!(info.finished, "{info:?}");
    // When every cycle was rebuilt, within the whole run (which adds the reclaim).
    let rebuilt = info.rebuilt_s.expect("the time the pool was rebuilt");
    let total = info.progress.expect("a last progress").elapsed_s;
    assert!(rebuilt > 0.0 && rebuilt <= total, "{info:?}");
    rig.check_all(&sp);
    let s = ido_status(&sp);
    assert_eq!(s.phase, "normal");
    assert_eq!(s.dmap_entries, 0);
    assert_eq!(sp.status().unwrap().state, "clean");
    sp.close().unwrap();
}

/// The background rebuild keeps what it read and wrote of the hot zones' cycles, and their
/// migrations copy that rather than reading the zones from the pool again (as the seed and
/// the simulator migrate the data the rebuild fetched); every byte reads back afterwards.
#[test]
fn hot_zones_are_migrated_from_the_rebuilds_own_reads() {
    let (rig, sp) = Rig::new("fromrebuild");
    rig.fail_and_replace(&sp);
    let member_reads = |sp: &dev::serve_support::SharedPool| -> u64 {
        sp.status()
            .unwrap()
            .members
            .iter()
            .map(|m| m.read_bytes)
            .sum()
    };
    let reads_before = member_reads(&sp);
    sp.start_rebuild_with(opts(), Some(RebuildPolicy::Ido), None)
        .unwrap();
    while sp.rebuild_info().running {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(sp.rebuild_info().finished, "{:?}", sp.rebuild_info());
    let s = ido_status(&sp);
    assert!(s.migrated_bytes >= ZONE, "{s:?}");
    // A 4-member RAID5 with a replacement: every data unit of a hot cycle was read or
    // written by the rebuild.
    assert_eq!(s.migrated_from_rebuild_bytes, s.migrated_bytes, "{s:?}");
    let reads = member_reads(&sp);
    // The rebuild reads the three other members once (the pool's capacity in all), and no
    // hot zone again.
    let capacity = rig.reference.len() as u64;
    assert!(
        reads - reads_before < capacity + ZONE / 2,
        "{} bytes read for a {capacity}-byte pool",
        reads - reads_before
    );
    rig.check_all(&sp);
    sp.close().unwrap();
}

/// Every policy in the background with a client beside it: the rebuild runs through the
/// served pipeline (the stripes of the batches in flight held) while the client's requests hold IDO's lock
/// and wait for stripes; the rebuild never waits for that lock while it holds stripes, so
/// it ends, and every byte reads back.
#[test]
fn every_policy_in_the_background_with_a_client() {
    for policy in RebuildPolicy::ALL {
        let (mut rig, sp) = Rig::new(&format!("bg-{}", policy.name()));
        rig.fail_and_replace(&sp);
        let slowed = dev::pool::RebuildOpts {
            speed_max_bytes_per_sec: Some(4 << 20),
            ..opts()
        };
        sp.start_rebuild_with(slowed, Some(policy), None).unwrap();
        let (mut rounds, mut rounds_during) = (0, 0);
        while sp.rebuild_info().running {
            rig.workload(&sp, 20);
            rounds += 1;
            if sp.rebuild_info().running && ido_status(&sp).phase == "rebuilding" {
                rounds_during += 1;
            }
            assert!(rounds < 100_000);
        }
        assert!(
            rounds_during > 0,
            "{policy:?}: no client round ended during the rebuild"
        );
        let info = sp.rebuild_info();
        assert!(info.finished, "{policy:?}: {info:?}");
        rig.check_all(&sp);
        let s = ido_status(&sp);
        assert_eq!(s.phase, "normal");
        assert_eq!(s.dmap_entries, 0, "{s:?}");
        assert_eq!(
            s.redirected_requests > 0,
            policy.uses_surrogate(),
            "{policy:?}: {s:?}"
        );
        assert_eq!(sp.status().unwrap().state, "clean");
        sp.close().unwrap();
    }
}

/// The record's order around single writes: a redirected write is listed before it is
/// acknowledged, and a write to the pool over a redirected range (during the reclaim) is
/// recorded as unmapping it; a crash right after either one reads the newest data.
#[test]
fn a_crash_right_after_a_write_keeps_the_newest_data() {
    let (mut rig, mut sp) = Rig::new("crashwrite");
    rig.begin_policy(&sp, RebuildPolicy::Ido);
    // A zone that is not hot: its write goes to the surrogate's log.
    let at = 3 * ZONE + 8192;
    let put = |rig: &mut Rig, sp: &dev::serve_support::SharedPool, fill: u8| {
        let data = vec![fill; 12288];
        sp.write(at, &data).unwrap();
        rig.reference[at as usize..at as usize + data.len()].copy_from_slice(&data);
    };
    put(&mut rig, &sp, 0xA1);
    assert!(ido_status(&sp).redirected_writes > 0);
    sp = crash(&rig, sp);
    assert!(ido_status(&sp).dmap_dirty_bytes >= 12288);
    rig.check_all(&sp);
    assert!(sp.begin_policy_rebuild(None, None).unwrap());
    let mut cur = RebuildCursor::new();
    while ido_status(&sp).phase == "rebuilding" {
        sp.policy_step(&opts(), &mut cur).unwrap();
    }
    let s = ido_status(&sp);
    assert_eq!(s.phase, "reclaiming");
    assert!(s.dmap_dirty_bytes > 0, "{s:?}");
    put(&mut rig, &sp, 0xB2);
    let s = ido_status(&sp);
    if s.phase == "normal" {
        // The write ended the reclaim: nothing is left on the surrogate, which is closed.
        assert_eq!(
            (s.dmap_entries, s.surrogate_state.as_str()),
            (0, "closed"),
            "{s:?}"
        );
    }
    sp = crash(&rig, sp);
    rig.check_all(&sp);
    // (The write may have unmapped the last dirty range: the reclaim is then over.)
    if ido_status(&sp).phase == "reclaiming" {
        assert!(sp.begin_policy_rebuild(None, None).unwrap());
        let mut cur = RebuildCursor::new();
        while !matches!(sp.policy_step(&opts(), &mut cur).unwrap(), PolicyStep::Done) {}
    }
    assert_eq!(ido_status(&sp).phase, "normal");
    assert_eq!(ido_status(&sp).dmap_entries, 0);
    rig.check_all(&sp);
    sp.close().unwrap();
}

/// Random interleavings: for every policy and a few seeds (`RAIDFORGE_IDO_SEEDS=N` for more), requests and rebuild steps with
/// crashes (no close), clean restarts and a surrogate member failure at random points; every
/// read is compared with the reference, the whole volume after each restart, and each run ends
/// with an empty D-Map, a clean pool and consistent parity.
#[test]
fn random_crashes_restarts_and_surrogate_failures_lose_nothing() {
    use layout::SplitMix64;
    let (mut all_restarts, mut all_sur_failures, mut all_redirected) = (0, 0, 0);
    // Seeds per policy: 6 in CI; more with RAIDFORGE_IDO_SEEDS=N (a soak run).
    let seeds: u64 = std::env::var("RAIDFORGE_IDO_SEEDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(6);
    for policy in [
        RebuildPolicy::Ido,
        RebuildPolicy::Workout,
        RebuildPolicy::Vdf,
        RebuildPolicy::Pro,
    ] {
        for seed in 0..seeds {
            let tag = format!("rand-{}-{seed}", policy.name());
            let (mut rig, mut sp) = Rig::new(&tag);
            rig.rng = SplitMix64::new(0xc0ffee ^ seed);
            let mut dice = SplitMix64::new(seed.wrapping_mul(0x9E37_79B9) ^ 0x5eed);
            rig.begin_policy(&sp, policy);
            let mut cur = RebuildCursor::new();
            let mut sur_failed = false;
            let mut restarts = 0;
            for step in 0.. {
                assert!(step < 5_000, "{tag}: the rebuild does not end");
                let n = dice.below(20);
                rig.workload(&sp, n);
                match dice.below(40) {
                    0 | 1 => {
                        sp = if dice.below(2) == 0 {
                            crash(&rig, sp)
                        } else {
                            restart(&rig, sp)
                        };
                        restarts += 1;
                        rig.check_all(&sp);
                        if ido_status(&sp).phase != "normal" {
                            assert!(sp.begin_policy_rebuild(None, None).unwrap(), "{tag}");
                        }
                        cur = RebuildCursor::new();
                    }
                    2 if !sur_failed && ido_status(&sp).surrogate_state == "attached" => {
                        sp.ido().fail_surrogate_member(dice.below(2)).unwrap();
                        sur_failed = true;
                        all_sur_failures += 1;
                    }
                    _ => {}
                }
                all_redirected += ido_status(&sp).redirected_requests.min(1);
                if matches!(sp.policy_step(&opts(), &mut cur).unwrap(), PolicyStep::Done) {
                    break;
                }
            }
            all_restarts += restarts;
            let s = ido_status(&sp);
            assert_eq!(s.phase, "normal", "{tag}: {s:?}");
            assert_eq!(s.dmap_entries, 0, "{tag}: {s:?}");
            assert_eq!(
                sp.status().unwrap().state,
                "clean",
                "{tag} ({restarts} restarts)"
            );
            rig.check_all(&sp);
            let v = sp.verify().unwrap();
            assert!(v.inconsistent.is_empty(), "{tag}: {:?}", v.inconsistent);
            sp.close().unwrap();
        }
    }
    eprintln!(
        "random IDO runs: {all_restarts} restarts, {all_sur_failures} surrogate failures, \
         {all_redirected} steps with redirected requests"
    );
    // The runs did what they are for.
    assert!(
        all_restarts >= 10 && all_sur_failures >= 3 && all_redirected > 0,
        "restarts {all_restarts}, surrogate failures {all_sur_failures}"
    );
}

/// A main-pool member whose flushes fail while `flush_fails` is set (its writes still land):
/// a record that reaches a member although the member reported it failed.
struct FlushFails {
    inner: std::sync::Arc<dyn dev::Member>,
    flush_fails: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl dev::Member for FlushFails {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        self.inner.read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> std::io::Result<()> {
        self.inner.write_at(buf, offset)
    }
    fn flush(&self) -> std::io::Result<()> {
        if self.flush_fails.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(std::io::Error::other("injected flush failure"));
        }
        self.inner.flush()
    }
    fn size_bytes(&self) -> u64 {
        self.inner.size_bytes()
    }
    fn describe(&self) -> String {
        self.inner.describe()
    }
}

/// A write that must record the IDO state first, when no member takes the record (every
/// flush fails, though the record's bytes land): the write fails, and ranges keep reading what
/// the members' records say, before and after a restart. Reads wait until a record is written
/// again (the failed one may have reached a member, which only a restart would show), and the
/// next record outnumbers the failed one (served fault harness, seed 0x6b0773f2: a RAID1 that
/// lost every member kept redirected writes in memory only; a read returned them and a
/// restart an older state). Redirected writes carry their own mapping in the surrogate's log;
/// one needs a record before it when something else took log space since the last one (here
/// a WorkOut fill).
#[test]
fn a_write_whose_record_fails_is_taken_back() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let (mut rig, sp) = Rig::new("recfail");
    rig.begin_policy(&sp, RebuildPolicy::Workout);
    sp.close().unwrap();
    drop(sp);
    let flush_fails = std::sync::Arc::new(AtomicBool::new(false));
    let ff = std::sync::Arc::clone(&flush_fails);
    let wrap: dev::pool::MemberWrap = std::sync::Arc::new(move |_, m| {
        std::sync::Arc::new(FlushFails {
            inner: m,
            flush_fails: std::sync::Arc::clone(&ff),
        }) as std::sync::Arc<dyn dev::Member>
    });
    let p = dev::pool::Pool::open_forced(&rig.main(), Some(wrap)).unwrap();
    let sp =
        dev::serve_support::SharedPool::new(p, dev::serve_support::Concurrency::Stripes).unwrap();
    assert_eq!(ido_status(&sp).phase, "rebuilding");
    let at = 3 * ZONE + 8192;
    let elsewhere = 11 * ZONE;
    let acked = vec![0xA1u8; 12288];
    sp.write(at, &acked).unwrap();
    rig.reference[at as usize..at as usize + acked.len()].copy_from_slice(&acked);
    let s = ido_status(&sp);
    assert_eq!((s.redirected_writes, s.log_writes), (1, 1), "{s:?}");
    let seq = s.record_seq;
    // A read seen twice: WorkOut copies it to the surrogate's log.
    let popular = 20 * ZONE;
    let mut buf = vec![0u8; 8192];
    for _ in 0..2 {
        sp.read(popular, &mut buf).unwrap();
    }
    let s = ido_status(&sp);
    assert!(s.dmap_bytes >= 12288 + 8192, "no fill: {s:?}");
    assert_eq!(s.record_seq, seq, "a fill wrote a record");

    flush_fails.store(true, Ordering::SeqCst);
    let refused = sp.write(at, &[0xB2u8; 12288]);
    assert!(
        refused.is_err(),
        "a write whose record failed was acknowledged"
    );
    let mut buf = vec![0u8; 4096];
    let read = sp.read(at, &mut buf);
    assert!(
        read.is_err(),
        "a read while no record is written returned {:02x?}",
        &buf[..4]
    );

    flush_fails.store(false, Ordering::SeqCst);
    let later = vec![0xC3u8; 8192];
    sp.write(elsewhere, &later).unwrap();
    rig.reference[elsewhere as usize..elsewhere as usize + later.len()].copy_from_slice(&later);
    let s = ido_status(&sp);
    assert!(s.record_seq >= seq + 2, "{s:?}");
    assert_eq!(s.log_writes, 1, "{s:?}");
    rig.check_all(&sp);
    // A crash: the members' newest record is the one written after the failure.
    drop(sp);
    let sp = reopen(&rig);
    rig.check_all(&sp);
    assert_eq!(ido_status(&sp).phase, "rebuilding");
    sp.close().unwrap();
}

/// Redirected writes write no record: each carries its mapping in front of its data in the
/// surrogate's log, and a start after a crash maps them again from there, stopping at the
/// first write that did not land whole (its data's CRC), which was never acknowledged.
#[test]
fn a_crash_finds_the_redirected_writes_after_the_last_record_in_the_log() {
    let (mut rig, sp) = Rig::new("logreplay");
    rig.begin_policy(&sp, RebuildPolicy::Ido);
    let seq = ido_status(&sp).record_seq;
    // Zones that are not hot, some writes over others.
    let writes: Vec<(u64, usize, u8)> = vec![
        (3 * ZONE + 8192, 12288, 0xA1),
        (11 * ZONE, 65536, 0xA2),
        (3 * ZONE + 4096, 8192, 0xA3),
        (5 * ZONE + 4096, 4096, 0xA4),
        (11 * ZONE + 16384, 4096, 0xA5),
        (13 * ZONE, 20480, 0xA6),
    ];
    let before = rig.reference.clone();
    for &(at, len, fill) in &writes {
        let data: Vec<u8> = (0..len).map(|i| fill ^ i as u8).collect();
        sp.write(at, &data).unwrap();
        rig.reference[at as usize..at as usize + len].copy_from_slice(&data);
    }
    let s = ido_status(&sp);
    assert_eq!(
        s.record_seq, seq,
        "a redirected write wrote a record: {s:?}"
    );
    assert_eq!(s.log_writes, writes.len() as u64, "{s:?}");
    let (dirty, used) = (s.dmap_dirty_bytes, s.surrogate_used_bytes);
    let sp = crash(&rig, sp);
    let s = ido_status(&sp);
    assert_eq!(
        (s.log_writes, s.dmap_dirty_bytes, s.surrogate_used_bytes),
        (writes.len() as u64, dirty, used),
        "{s:?}"
    );
    rig.check_all(&sp);

    // The last write's data torn on the surrogate (both copies): a crash then reads the
    // older data there, and every write before it.
    drop(sp);
    let (last_at, last_len, _) = *writes.last().unwrap();
    let mut sur = dev::pool::Pool::open_forced(&rig.dir.0.join("sur.json"), None).unwrap();
    sur.write(used - 4096, &[0x5Au8; 4096]).unwrap();
    sur.close().unwrap();
    let r = last_at as usize..last_at as usize + last_len;
    rig.reference[r.clone()].copy_from_slice(&before[r]);
    let sp = reopen(&rig);
    let s = ido_status(&sp);
    assert_eq!(s.log_writes, writes.len() as u64 - 1, "{s:?}");
    rig.check_all(&sp);
    // The next write goes where the torn one was, and the rebuild and reclaim end with every
    // byte home.
    let again = vec![0x77u8; 4096];
    sp.write(last_at, &again).unwrap();
    rig.reference[last_at as usize..last_at as usize + 4096].copy_from_slice(&again);
    let sp = crash(&rig, sp);
    rig.check_all(&sp);
    assert!(sp.begin_policy_rebuild(None, None).unwrap());
    let mut cur = RebuildCursor::new();
    while !matches!(sp.policy_step(&opts(), &mut cur).unwrap(), PolicyStep::Done) {}
    let s = ido_status(&sp);
    assert_eq!((s.phase.as_str(), s.dmap_entries), ("normal", 0), "{s:?}");
    rig.check_all(&sp);
    sp.close().unwrap();
}

/// A crash tears a redirected write in the middle of the log and keeps the one after it
/// (written in the same group, never acknowledged). The start maps the writes before the
/// torn one; the next redirected write must not continue the old chain where a write of the
/// torn one's length would end right at the stale one's header: the start after the next
/// crash would map the stale write again, over the data the client read back meanwhile.
#[test]
fn a_write_left_beyond_a_torn_one_in_the_log_is_never_mapped_later() {
    let (mut rig, sp) = Rig::new("logstale");
    rig.begin_policy(&sp, RebuildPolicy::Ido);
    let header = raidcore::ido::LOG_HEADER_BYTES;
    // Zones that are not hot: `torn` then `stale` go to the end of the log.
    let (torn, stale) = ((5 * ZONE + 4096, 4096usize), (13 * ZONE, 20480usize));
    let before = rig.reference.clone();
    for (i, &(at, len)) in [(3 * ZONE + 8192, 12288usize), torn, stale]
        .iter()
        .enumerate()
    {
        let data = vec![0xB0 + i as u8; len];
        sp.write(at, &data).unwrap();
        rig.reference[at as usize..at as usize + len].copy_from_slice(&data);
    }
    let used = ido_status(&sp).surrogate_used_bytes;
    drop(sp);
    // `torn`'s data never reached the surrogate; `stale`, after it, did.
    let torn_data_at = used - stale.1 as u64 - header - torn.1 as u64;
    let mut sur = dev::pool::Pool::open_forced(&rig.dir.0.join("sur.json"), None).unwrap();
    sur.write(torn_data_at, &vec![0x5Au8; torn.1]).unwrap();
    sur.close().unwrap();
    for (at, len) in [torn, stale] {
        let r = at as usize..at as usize + len;
        rig.reference[r.clone()].copy_from_slice(&before[r]);
    }
    let sp = reopen(&rig);
    assert_eq!(ido_status(&sp).log_writes, 1);
    rig.check_all(&sp);
    // A write of the torn one's length, redirected (a zone that is not hot), then a crash.
    let again = (7 * ZONE, vec![0x77u8; torn.1]);
    sp.write(again.0, &again.1).unwrap();
    rig.reference[again.0 as usize..again.0 as usize + torn.1].copy_from_slice(&again.1);
    let sp = crash(&rig, sp);
    // `stale` is still not there.
    rig.check_all(&sp);
    sp.close().unwrap();
}

/// Concurrent redirected writes go to the surrogate together (group commit): several in one
/// request and one sync, their headers chained in the log; all of them read back, and after a
/// crash the log maps every one again.
#[test]
fn concurrent_redirected_writes_share_surrogate_requests() {
    let (mut rig, sp) = Rig::with_surrogate("group", |dir| {
        // A surrogate whose every request takes 2 ms: writers queue behind one another.
        let sur = dir.join("slow.json");
        dev::pool::Pool::create(
            &sur,
            dev::pool::CreateOpts {
                members: (0..2).map(|i| dir.join(format!("slow{i}.img"))).collect(),
                chunk_bytes: 16 << 10,
                emulate: Some("hdd:200MB/s:2ms".into()),
                ..dev::pool::test_opts(layout::SchemeKind::Raid1, dir, 2, 4 << 20)
            },
        )
        .unwrap()
        .close()
        .unwrap();
        sur
    });
    rig.begin_policy(&sp, RebuildPolicy::Ido);
    let before = ido_status(&sp);
    // Six writers, 24 blocks each, in zones that are not hot.
    let (threads, each) = (6u64, 24u64);
    let block = |t: u64, i: u64| (1 + 2 * t) * ZONE + i * 8192;
    let fill = |t: u64, i: u64| vec![(t * 31 + i) as u8 | 1; 4096];
    std::thread::scope(|s| {
        for t in 0..threads {
            let sp = &sp;
            s.spawn(move || {
                for i in 0..each {
                    sp.write(block(t, i), &fill(t, i)).unwrap();
                }
            });
        }
    });
    for t in 0..threads {
        for i in 0..each {
            let at = block(t, i) as usize;
            rig.reference[at..at + 4096].copy_from_slice(&fill(t, i));
        }
    }
    let s = ido_status(&sp);
    let writes = s.redirected_writes - before.redirected_writes;
    let requests = s.redirected_write_requests - before.redirected_write_requests;
    assert_eq!(writes, threads * each, "{s:?}");
    assert!(
        requests < writes,
        "{writes} concurrent redirected writes took {requests} surrogate requests"
    );
    rig.check_all(&sp);
    let logged = s.log_writes;
    let sp = crash(&rig, sp);
    assert_eq!(ido_status(&sp).log_writes, logged);
    rig.check_all(&sp);
    sp.close().unwrap();
}

/// VDF under concurrent readers (admitting and evicting cache blocks) and writers of the very
/// same blocks: a block cached from the pool while a write of it was under way must not stay
/// cached with the old bytes. Once the writers are done, every block reads the last write,
/// from the cache or the pool.
#[test]
fn vdf_concurrent_writes_and_admissions_leave_no_stale_block() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let (mut rig, sp) = Rig::new("vdfrace");
    rig.begin_policy(&sp, RebuildPolicy::Vdf);
    // Blocks in zones 4, 7 and 10, each written by one writer only.
    let (writers, blocks, rounds) = (3u64, 16u64, 60u64);
    let block = |w: u64, i: u64| (4 + w * 3) * ZONE + i * 4096;
    let fill = |w: u64, i: u64, r: u64| vec![(w * 64 + i * 3 + r) as u8; 4096];
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let mut wh = Vec::new();
        for w in 0..writers {
            let sp = &sp;
            wh.push(s.spawn(move || {
                for r in 0..rounds {
                    for i in 0..blocks {
                        sp.write(block(w, i), &fill(w, i, r)).unwrap();
                    }
                }
            }));
        }
        for t in 0..3u64 {
            let (sp, stop) = (&sp, &stop);
            s.spawn(move || {
                let mut buf = vec![0u8; 4096];
                let mut k = t + 1;
                while !stop.load(Ordering::Relaxed) {
                    k = k
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    let (w, i) = ((k >> 33) % writers, (k >> 40) % blocks);
                    sp.read(block(w, i), &mut buf).unwrap();
                }
            });
        }
        for h in wh {
            h.join().unwrap();
        }
        stop.store(true, Ordering::Relaxed);
    });
    for w in 0..writers {
        for i in 0..blocks {
            let at = block(w, i) as usize;
            rig.reference[at..at + 4096].copy_from_slice(&fill(w, i, rounds - 1));
        }
    }
    // Twice: the first pass admits every block the cache lacks, the second reads them back
    // from it.
    rig.check_all(&sp);
    rig.check_all(&sp);
    // The cache still serves: a block read twice with no write between is a hit the second
    // time. (How many of the racing reads hit depends on how the threads interleave: 0 to
    // 66 in 24 runs with the surrogate's requests side by side, so the race itself asserts
    // none.)
    let mut buf = vec![0u8; 4096];
    sp.read(block(1, 5), &mut buf).unwrap();
    let before = ido_status(&sp).redirected_reads;
    sp.read(block(1, 5), &mut buf).unwrap();
    assert_eq!(buf, fill(1, 5, rounds - 1));
    let s = ido_status(&sp);
    assert_eq!(
        s.redirected_reads,
        before + 1,
        "the second read was not served by the cache: {s:?}"
    );
    sp.close().unwrap();
}

/// VDF's cache under concurrent readers of more blocks than it holds: admissions evict
/// blocks other readers were just routed to. Every read must return its own block's bytes.
#[test]
fn vdf_concurrent_readers_over_an_evicting_cache_read_their_own_blocks() {
    let (rig, sp) = Rig::new("vdfevict");
    rig.begin_policy(&sp, RebuildPolicy::Vdf);
    let cap = rig.reference.len() as u64;
    let blocks = cap / 4096;
    let bad = std::sync::atomic::AtomicU64::new(0);
    std::thread::scope(|s| {
        for t in 0..6u64 {
            let (sp, rig, bad) = (&sp, &rig, &bad);
            s.spawn(move || {
                let mut buf = vec![0u8; 4096];
                let mut k = t + 11;
                for _ in 0..4000 {
                    k = k
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    let at = ((k >> 20) % blocks) * 4096;
                    sp.read(at, &mut buf).unwrap();
                    if buf[..] != rig.reference[at as usize..at as usize + 4096] {
                        bad.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                }
            });
        }
    });
    let s = ido_status(&sp);
    assert!(s.redirected_reads > 0, "{s:?}");
    assert_eq!(
        bad.into_inner(),
        0,
        "reads returned another block's bytes ({s:?})"
    );
    sp.close().unwrap();
}
