//! Reads hold their stripes shared (`raidcore::Plan::lock_mode`), in the simulator as in the
//! engine: two reads of one stripe arriving together run together, on a healthy array and on a
//! degraded one (where one of them reconstructs from parity), and a write of the stripe still
//! waits for a read of it.
//!
//! Every run here holds two requests at most. Response times come from the report: the exact
//! maximum and mean of the run's phase give both requests' response times, and `sim_time_s` is
//! the last completion. All are simulated time, exact and repeatable.

use layout::{Params, SchemeKind};
use raidcore::{plan_read, plan_write, ArrayState, Geometry, LockMode, WritePolicy};
use sim::{Drive, Failure, Op, Phase, Report, Request, SimConfig, Simulator, TraceError, Workload};

/// A fixed list of requests.
struct List(std::vec::IntoIter<Request>);

impl Workload for List {
    fn next_request(&mut self) -> Option<Result<Request, TraceError>> {
        self.0.next().map(Ok)
    }
}

const CHUNK: u64 = 64 << 10;
const MEMBER: u64 = 64 << 20;

/// RAID5 over 4 members: stripe 0 of cycle 0 holds chunks 0, 1 and 2 (members 0, 1, 2) and
/// their parity (member 3), as the first test checks.
fn geometry() -> Geometry {
    let scheme = layout::build(
        SchemeKind::Raid5,
        &Params {
            disks: Some(4),
            ..Params::default()
        },
    )
    .unwrap();
    Geometry::new(scheme, CHUNK, MEMBER).unwrap()
}

fn req(time_ns: u64, offset_bytes: u64, op: Op) -> Request {
    Request {
        time_ns,
        offset_bytes,
        len_bytes: 4096,
        op,
        volume: 0,
    }
}

/// Runs `requests` on SSD members (member 3 on an HDD when `slow_parity`), member 2 failed at
/// time 0 and never rebuilt when `degraded`, writes as read-modify-writes.
fn run(requests: Vec<Request>, degraded: bool, slow_parity: bool) -> Report {
    let mut cfg = SimConfig::new(Drive::IntelX25e64gb.params());
    // (A write of one chunk then reads its old data and the parity only: no member in common
    // with a read of another chunk.)
    cfg.write_policy = WritePolicy::Rmw;
    if slow_parity {
        cfg.drive_overrides
            .push((3, Drive::SeagateSt3500320as.params()));
    }
    if degraded {
        cfg.failure = Some(Failure {
            member: 2,
            at_ns: 0,
        });
        cfg.rebuild_delay_ns = None;
    }
    let r = Simulator::new(geometry(), cfg)
        .unwrap()
        .run(&mut List(requests.into_iter()))
        .unwrap();
    assert_eq!(r.requests_failed, 0);
    r
}

/// The response times of a run's requests (ms), slowest first: exact for one or two requests
/// (the phase's exact maximum, and the mean for the other).
fn responses(r: &Report, phase: Phase) -> (f64, f64) {
    let p = r.phase(phase);
    assert_eq!(p.count, r.requests);
    match p.count {
        1 => (p.max_ms, p.max_ms),
        2 => (p.max_ms, 2.0 * p.mean_ms - p.max_ms),
        n => panic!("{n} requests"),
    }
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-6 * a.abs().max(b.abs()).max(1e-3)
}

#[test]
fn the_requests_of_these_tests_lock_the_same_stripe() {
    let geo = geometry();
    let state = ArrayState::new(&geo);
    let plans = |off: u64, write: bool| {
        let p = if write {
            plan_write(&geo, &state, off, 4096, &WritePolicy::Rmw).unwrap()
        } else {
            plan_read(&geo, &state, off, 4096).unwrap()
        };
        assert_eq!(p.len(), 1);
        p.into_iter().next().unwrap()
    };
    for (off, member) in [(0, 0), (CHUNK, 1), (2 * CHUNK, 2)] {
        let r = plans(off, false);
        assert_eq!(r.lock_mode(), LockMode::Shared);
        assert_eq!(r.locks, plans(0, false).locks, "one stripe");
        assert_eq!(r.members(), vec![member]);
    }
    let w = plans(CHUNK, true);
    assert_eq!(w.lock_mode(), LockMode::Exclusive);
    assert_eq!(w.locks, plans(0, false).locks);
    assert_eq!(
        w.members(),
        vec![1, 3],
        "a read-modify-write of chunk 1 and parity"
    );
    let mut degraded = ArrayState::new(&geo);
    degraded.fail(&geo, 2).unwrap();
    let d = plan_read(&geo, &degraded, 2 * CHUNK, 4096).unwrap();
    assert_eq!(d[0].members(), vec![0, 1, 3], "chunk 2 reconstructed");
    assert_eq!(d[0].locks, plans(0, false).locks);
}

/// Two reads of one stripe (chunks 0 and 1, members 0 and 1) arriving at the same instant end
/// when each would alone: the second did not wait for the first. Under exclusive read locks
/// the second would start when the first ended (its response the sum of both).
#[test]
fn two_reads_of_a_stripe_run_together() {
    let a = run(vec![req(0, 0, Op::Read)], false, false);
    let b = run(vec![req(0, CHUNK, Op::Read)], false, false);
    let both = run(
        vec![req(0, 0, Op::Read), req(0, CHUNK, Op::Read)],
        false,
        false,
    );
    let (ta, tb) = (
        responses(&a, Phase::Normal).0,
        responses(&b, Phase::Normal).0,
    );
    let (slow, fast) = responses(&both, Phase::Normal);
    assert!(
        close(slow, ta.max(tb)) && close(fast, ta.min(tb)),
        "together {slow} and {fast} ms, alone {ta} and {tb} ms"
    );
    assert!(slow < 0.75 * (ta + tb));
    assert!(close(both.sim_time_s, a.sim_time_s.max(b.sim_time_s)));
}

/// Degraded: member 2 failed, a read of chunk 2 reconstructs from members 0, 1 and 3 (the
/// parity, on a slow HDD) and a read of chunk 0 (member 0, an SSD) arrives just after it, on
/// the same stripe. The second ends long before the first: it queued behind the first's
/// member-0 read only, not behind the whole reconstruction.
#[test]
fn a_read_beside_a_degraded_read_of_its_stripe_does_not_wait_for_it() {
    let t = 1_000_000;
    let recon = run(vec![req(t, 2 * CHUNK, Op::Read)], true, true);
    let plain = run(vec![req(t, 0, Op::Read)], true, true);
    let both = run(
        vec![req(t, 2 * CHUNK, Op::Read), req(t, 0, Op::Read)],
        true,
        true,
    );
    let t_recon = responses(&recon, Phase::Degraded).0;
    let t_plain = responses(&plain, Phase::Degraded).0;
    assert!(
        t_plain * 5.0 < t_recon,
        "the HDD parity makes the reconstruction slow: {t_plain} vs {t_recon} ms"
    );
    let (slow, fast) = responses(&both, Phase::Degraded);
    assert!(
        close(slow, t_recon),
        "the reconstruction: {slow} vs {t_recon} ms"
    );
    // At most its own read and the reconstruction's read of member 0 (each an SSD 4 KiB read).
    assert!(
        fast <= 2.0 * t_plain * (1.0 + 1e-6),
        "the plain read took {fast} ms beside the reconstruction ({t_recon} ms), {t_plain} ms alone"
    );
}

/// A write of a stripe waits for a read of it that arrived first, though they touch different
/// members (the read member 0, the write members 1 and 3): writes stay exclusive.
#[test]
fn a_write_waits_for_a_read_of_its_stripe() {
    let r = run(vec![req(0, 0, Op::Read)], false, false);
    let w = run(vec![req(0, CHUNK, Op::Write)], false, false);
    let both = run(
        vec![req(0, 0, Op::Read), req(0, CHUNK, Op::Write)],
        false,
        false,
    );
    let (tr, tw) = (
        responses(&r, Phase::Normal).0,
        responses(&w, Phase::Normal).0,
    );
    let (slow, _) = responses(&both, Phase::Normal);
    assert!(
        close(slow, tr + tw),
        "the write took {slow} ms after the read; alone {tw} ms, the read {tr} ms"
    );
    assert!(close(both.sim_time_s, r.sim_time_s + w.sim_time_s));
}
