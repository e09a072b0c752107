//! Members of another drive model: an SSD parity member among HDDs (RAID4S).

use layout::{Params, SchemeKind};
use sim::{simulate, Drive, Report, SimConfig, SimError, SourceOptions, WorkloadSpec};

fn raid4_small_writes(parity_ssd: bool) -> Report {
    let scheme = layout::build(
        SchemeKind::Raid4,
        &Params {
            disks: Some(5),
            ..Params::default()
        },
    )
    .unwrap();
    let mut cfg = SimConfig::new(Drive::WdWd6401aals.params());
    if parity_ssd {
        cfg.drive_overrides.push((4, Drive::IntelX25e64gb.params()));
    }
    let spec = WorkloadSpec::parse("random:read=0:size=4K:qd=8:requests=2000", 1, None).unwrap();
    simulate(
        scheme,
        64 << 10,
        1 << 30,
        cfg,
        &spec,
        &SourceOptions::default(),
    )
    .unwrap()
}

#[test]
fn ssd_parity_member_lifts_raid4_small_writes() {
    let hdd = raid4_small_writes(false);
    let ssd = raid4_small_writes(true);
    // Every small write touches the parity member in RAID4, so it bounds throughput; an SSD
    // there moves the bottleneck to the data HDDs, which share the writes four ways.
    assert!(
        ssd.throughput_iops > 2.0 * hdd.throughput_iops,
        "RAID4 small writes: SSD parity {} IOPS vs HDD parity {} IOPS",
        ssd.throughput_iops,
        hdd.throughput_iops
    );
    assert!(ssd.drive.contains("member 4"), "{}", ssd.drive);
    // The parity member did the most I/Os but is not the busiest member.
    let p = &ssd.per_disk[4];
    assert!(ssd.per_disk[..4].iter().all(|d| d.writes < p.writes));
    assert!(ssd.per_disk[..4].iter().all(|d| d.busy_s > p.busy_s));
}

#[test]
fn override_outside_the_array_is_refused() {
    let scheme = layout::build(
        SchemeKind::Raid5,
        &Params {
            disks: Some(4),
            ..Params::default()
        },
    )
    .unwrap();
    let mut cfg = SimConfig::new(Drive::WdWd6401aals.params());
    cfg.drive_overrides.push((4, Drive::IntelX25e64gb.params()));
    let err = simulate(
        scheme,
        64 << 10,
        1 << 30,
        cfg,
        &WorkloadSpec::None,
        &SourceOptions::default(),
    )
    .unwrap_err();
    assert!(
        matches!(err, SimError::Config(ref m) if m.contains("member 4")),
        "{err}"
    );
}
