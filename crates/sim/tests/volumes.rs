//! Multi-volume workloads (`SimConfig::volumes`, a `VolumeLayout`) and closed-loop replay of
//! any workload (`ClosedLoop`), several workloads merged onto their volumes (`Merged`).

use std::sync::Arc;

use layout::{Params, Scheme, SchemeKind};
use raidcore::Geometry;
use sim::{
    ClosedLoop, Drive, Merged, Op, Phase, Request, SimConfig, Simulator, TraceError, VolumeLayout,
    Workload,
};

/// A fixed list of requests.
struct List(std::vec::IntoIter<Request>);

impl Workload for List {
    fn next_request(&mut self) -> Option<Result<Request, TraceError>> {
        self.0.next().map(Ok)
    }
}

fn req(time_ms: u64, volume: u32, offset: u64, op: Op) -> Request {
    Request {
        time_ns: time_ms * 1_000_000,
        offset_bytes: offset,
        len_bytes: 4096,
        op,
        volume,
    }
}

/// Three RAID-5 arrays of 3 disks, concatenated (RAID-5C): one cycle holds 3 rows of 2 data
/// chunks of each array, array after array.
fn raid5c() -> Arc<dyn Scheme> {
    layout::build(
        SchemeKind::Raid5c,
        &Params {
            disks: Some(9),
            width: Some(3),
            ..Params::default()
        },
    )
    .unwrap()
}

const CHUNK: u64 = 64 << 10;

fn run(requests: Vec<Request>, volumes: Option<VolumeLayout>) -> sim::Report {
    let geo = Geometry::new(raid5c(), CHUNK, 64 << 20).unwrap();
    let mut cfg = SimConfig::new(Drive::SeagateSt3500320as.params());
    cfg.volumes = volumes;
    Simulator::new(geo, cfg)
        .unwrap()
        .run(&mut List(requests.into_iter()))
        .unwrap()
}

#[test]
fn extents_are_dealt_round_robin() {
    let v = VolumeLayout {
        count: 4,
        extent_bytes: 4096,
    };
    assert_eq!(v.array_offset(0, 0), 0);
    assert_eq!(v.array_offset(1, 0), 4096);
    assert_eq!(v.array_offset(3, 10), 3 * 4096 + 10);
    // Byte 4096 of volume 2 is the first byte of its second extent, extent 4 + 2.
    assert_eq!(v.array_offset(2, 4096), 6 * 4096);
    // A volume number past the count wraps.
    assert_eq!(v.array_offset(6, 0), v.array_offset(2, 0));
    assert_eq!(v.volume_bytes(10 * 4096), 2 * 4096);
    assert_eq!(v.volume_bytes(16 * 4096), 4 * 4096);
}

#[test]
fn a_volume_of_a_concatenated_array_stays_on_its_disks() {
    // One array's share of a cycle: 3 rows of 2 data chunks.
    let layout = VolumeLayout {
        count: 3,
        extent_bytes: 6 * CHUNK,
    };
    // Volume 1 only, spread over its whole size, reads and writes.
    let requests: Vec<Request> = (0..300u64)
        .map(|i| {
            let op = if i % 3 == 0 { Op::Write } else { Op::Read };
            req(i, 1, (i * 7919 * 4096) % (20 << 20), op)
        })
        .collect();
    let r = run(requests, Some(layout));
    assert_eq!(r.requests, 300);
    for (d, s) in r.per_disk.iter().enumerate() {
        let ios = s.reads + s.writes;
        // Array 1 is disks 3, 4, 5.
        assert_eq!(ios > 0, (3..6).contains(&d), "disk {d}: {ios} I/Os");
    }
    assert_eq!(r.volumes.len(), 3);
    assert_eq!(r.volumes[1].overall().0, 300);
    assert_eq!(r.volumes[0].overall().0 + r.volumes[2].overall().0, 0);
    assert!(r.volumes[1].phase(Phase::Normal).mean_ms > 0.0);
}

#[test]
fn per_volume_statistics_add_up_and_a_busy_volume_is_slower() {
    let layout = VolumeLayout {
        count: 3,
        extent_bytes: 6 * CHUNK,
    };
    // Volume 0 gets a request every millisecond, volume 2 one every 50 ms.
    let mut requests: Vec<Request> = (0..1000u64)
        .map(|i| req(i, 0, (i * 104_729 * 4096) % (20 << 20), Op::Read))
        .collect();
    requests.extend((0..20u64).map(|i| req(i * 50 + 1, 2, (i * 7 * 4096) % (20 << 20), Op::Read)));
    requests.sort_by_key(|r| r.time_ns);
    let r = run(requests, Some(layout));
    let counts: Vec<u64> = r.volumes.iter().map(|v| v.overall().0).collect();
    assert_eq!(counts, [1000, 0, 20]);
    assert_eq!(counts.iter().sum::<u64>(), r.requests);
    // Three disks serving a request a millisecond queue up; the light volume's do not.
    assert!(r.volumes[0].overall().1 > 2.0 * r.volumes[2].overall().1);
}

#[test]
fn without_a_layout_there_are_no_volume_statistics() {
    let r = run(vec![req(0, 5, 0, Op::Read)], None);
    assert!(r.volumes.is_empty());
    assert_eq!(r.requests, 1);
}

#[test]
fn impossible_layouts_are_refused() {
    let geo = || Geometry::new(raid5c(), CHUNK, 64 << 20).unwrap();
    for v in [
        VolumeLayout {
            count: 0,
            extent_bytes: 4096,
        },
        VolumeLayout {
            count: 2,
            extent_bytes: 1000,
        },
        VolumeLayout {
            count: 2,
            extent_bytes: 1 << 40,
        },
    ] {
        let mut cfg = SimConfig::new(Drive::SeagateSt3500320as.params());
        cfg.volumes = Some(v);
        let e = Simulator::new(geo(), cfg)
            .err()
            .expect("refused")
            .to_string();
        assert!(e.contains("volume layout"), "{e}");
    }
}

#[test]
fn closed_loop_replay_ignores_the_recorded_times() {
    // 200 reads recorded one second apart.
    let requests: Vec<Request> = (0..200u64)
        .map(|i| req(i * 1000, 0, (i * 7919 * 4096) % (20 << 20), Op::Read))
        .collect();
    let paced = run(requests.clone(), None);
    assert!(paced.sim_time_s > 199.0, "{}", paced.sim_time_s);
    let geo = Geometry::new(raid5c(), CHUNK, 64 << 20).unwrap();
    let cfg = SimConfig::new(Drive::SeagateSt3500320as.params());
    let mut w = ClosedLoop::new(List(requests.into_iter()), 4);
    assert_eq!(w.closed_loop_depth(), Some(4));
    let fast = Simulator::new(geo, cfg).unwrap().run(&mut w).unwrap();
    assert_eq!(fast.requests, 200);
    // 200 random reads, four at a time on nine disks: seconds, not minutes.
    assert!(fast.sim_time_s < 5.0, "{}", fast.sim_time_s);
    assert!(fast.throughput_iops > 40.0 * paced.throughput_iops);
}

#[test]
fn merged_workloads_interleave_by_time_each_on_its_volume() {
    let a = List(
        vec![
            req(0, 9, 0, Op::Read),
            req(5, 9, 4096, Op::Read),
            req(9, 9, 0, Op::Write),
        ]
        .into_iter(),
    );
    let b = List(vec![req(1, 0, 8192, Op::Write), req(5, 0, 0, Op::Read)].into_iter());
    let mut m = Merged::new(vec![(Box::new(a), 2), (Box::new(b), 1)]).unwrap();
    let mut got = Vec::new();
    while let Some(r) = m.next_request() {
        let r = r.unwrap();
        got.push((r.time_ns / 1_000_000, r.volume, r.offset_bytes));
    }
    // By time; the tie at 5 ms goes to the first part.
    assert_eq!(
        got,
        [(0, 2, 0), (1, 1, 8192), (5, 2, 4096), (5, 1, 0), (9, 2, 0)]
    );
    // Run on three volumes of the concatenated array: per-volume counts follow the parts.
    let a = List(
        (0..50u64)
            .map(|i| req(i, 0, i * 4096, Op::Read))
            .collect::<Vec<_>>()
            .into_iter(),
    );
    let b = List(
        (0..10u64)
            .map(|i| req(i * 3, 0, i * 4096, Op::Write))
            .collect::<Vec<_>>()
            .into_iter(),
    );
    let geo = Geometry::new(raid5c(), CHUNK, 64 << 20).unwrap();
    let mut cfg = SimConfig::new(Drive::SeagateSt3500320as.params());
    cfg.volumes = Some(VolumeLayout {
        count: 3,
        extent_bytes: 6 * CHUNK,
    });
    let mut m = Merged::new(vec![(Box::new(a), 0), (Box::new(b), 2)]).unwrap();
    let r = Simulator::new(geo, cfg).unwrap().run(&mut m).unwrap();
    let counts: Vec<u64> = r.volumes.iter().map(|v| v.overall().0).collect();
    assert_eq!(counts, [50, 0, 10]);
    // Closed-loop parts have no times to merge by.
    let closed = ClosedLoop::new(List(Vec::new().into_iter()), 2);
    assert!(Merged::new(vec![(Box::new(closed), 0)]).is_err());
}
