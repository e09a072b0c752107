//! Validation of the disk models against the figures published for the seed documents' drives.
//!
//! Each HDD test runs on all four hard disks of `Drive::ALL`; the figures they check are the
//! data-sheet ones in `src/disk/drives.rs`.

use proptest::prelude::*;
use sim::{Disk, DiskIo, Drive, DriveParams, Hdd, HddParams, Rotation, SplitMix64, Ssd, SsdParams};

fn hdd_params(drive: Drive) -> HddParams {
    match drive.params() {
        DriveParams::Hdd(p) => p,
        _ => panic!("{drive:?} is not a hard disk"),
    }
}

fn hdds() -> impl Iterator<Item = (Drive, HddParams)> {
    Drive::ALL
        .into_iter()
        .filter(|d| d.is_hdd())
        .map(|d| (d, hdd_params(d)))
}

fn x25e() -> SsdParams {
    match Drive::IntelX25e64gb.params() {
        DriveParams::Ssd(p) => p,
        _ => unreachable!(),
    }
}

const SECTOR: u64 = 512;

fn relative_error(measured: f64, published: f64) -> f64 {
    (measured / published - 1.0).abs()
}

#[test]
fn seek_curve_passes_through_single_track_and_full_stroke() {
    for (drive, p) in hdds() {
        let hdd = Hdd::new(p.clone(), 0).unwrap();
        let max = hdd.cylinders() - 1;
        assert_eq!(hdd.seek_ns(0), 0);
        assert_eq!(
            hdd.seek_ns(1),
            (p.seek_ms_track_to_track * 1e6).round() as u64,
            "{drive:?}"
        );
        assert_eq!(
            hdd.seek_ns(max),
            (p.seek_ms_full_stroke * 1e6).round() as u64,
            "{drive:?}"
        );
        let mut last = 0;
        for d in (0..=max).step_by((max / 1000) as usize) {
            let t = hdd.seek_ns(d);
            assert!(t >= last, "{drive:?}: seek curve decreases at {d}");
            last = t;
        }
        let (a, b, c) = hdd.seek_curve_ms();
        println!(
            "{drive:?}: {} cylinders, seek(d) = {a:.5} sqrt(d-1) + {b:.3e} (d-1) + {c} ms",
            hdd.cylinders()
        );
    }
}

/// Random single-sector reads at uniformly random cylinders: the mean seek is the data sheet's
/// average seek (vendors average over all pairs of cylinders).
#[test]
fn mean_seek_over_random_cylinders_is_the_published_average() {
    for (drive, p) in hdds() {
        let mut hdd = Hdd::new(
            p.clone().without_cache().with_rotation(Rotation::Expected),
            0,
        )
        .unwrap();
        let mut rng = SplitMix64::new(1);
        let n = 20_000;
        let mut now = 0;
        let mut seek_total = 0.0;
        for i in 0..n {
            let cylinder = rng.below(hdd.cylinders());
            let offset = hdd.offset_of_cylinder(cylinder).div_ceil(SECTOR) * SECTOR;
            let s = hdd.submit(now, DiskIo::read(offset, SECTOR));
            now = s.completion_ns;
            if i > 0 {
                seek_total += s.seek_ns as f64;
            }
        }
        let mean_ms = seek_total / f64::from(n - 1) / 1e6;
        println!(
            "{drive:?}: mean seek {mean_ms:.3} ms, published {} ms",
            p.seek_ms_avg
        );
        assert!(
            relative_error(mean_ms, p.seek_ms_avg) < 0.02,
            "{drive:?}: {mean_ms} ms"
        );
    }
}

/// Between uniformly random byte offsets the mean seek is slightly shorter (under 1 % for these
/// drives): outer cylinders hold more
/// bytes, so random offsets crowd towards them.
#[test]
fn mean_seek_over_random_offsets_is_slightly_shorter() {
    for (drive, p) in hdds() {
        let mut hdd = Hdd::new(
            p.clone().without_cache().with_rotation(Rotation::Expected),
            0,
        )
        .unwrap();
        let mut rng = SplitMix64::new(2);
        let n = 20_000;
        let mut now = 0;
        let mut seek_total = 0.0;
        for i in 0..n {
            let offset = rng.below(p.capacity_bytes / SECTOR) * SECTOR;
            let s = hdd.submit(now, DiskIo::read(offset, SECTOR));
            now = s.completion_ns;
            if i > 0 {
                seek_total += s.seek_ns as f64;
            }
        }
        let ratio = seek_total / f64::from(n - 1) / 1e6 / p.seek_ms_avg;
        println!("{drive:?}: mean seek between random offsets = {ratio:.3} x average seek");
        assert!((0.85..1.0).contains(&ratio), "{drive:?}: {ratio}");
    }
}

/// Mean rotational latency is half a revolution: 4.17 ms at 7200 rpm, in every mode.
#[test]
fn mean_rotational_latency_is_half_a_revolution() {
    for (drive, p) in hdds() {
        let half_rev_ms = p.revolution_ms() / 2.0;
        assert!(
            (half_rev_ms - 4.1667).abs() < 0.001,
            "{drive:?} is a 7200 rpm drive"
        );
        for rotation in [Rotation::Angular, Rotation::Random, Rotation::Expected] {
            let mut hdd = Hdd::new(p.clone().without_cache().with_rotation(rotation), 7).unwrap();
            let mut rng = SplitMix64::new(3);
            let n = 20_000;
            let mut now = 0;
            let mut total = 0.0;
            for _ in 0..n {
                // Idle gaps of random length, so arrivals are not phase-locked to the platter.
                now += rng.below(20_000_000);
                let offset = rng.below(p.capacity_bytes / SECTOR) * SECTOR;
                let s = hdd.submit(now, DiskIo::read(offset, SECTOR));
                now = s.completion_ns;
                total += s.rotation_ns as f64;
            }
            let mean_ms = total / f64::from(n) / 1e6;
            let tolerance = if rotation == Rotation::Expected {
                1e-6
            } else {
                0.02
            };
            assert!(
                relative_error(mean_ms, half_rev_ms) < tolerance,
                "{drive:?} {rotation:?}: mean rotational latency {mean_ms} ms"
            );
        }
    }
}

fn sequential_rate(
    hdd: &mut Hdd,
    start: u64,
    request_bytes: u64,
    count: u64,
    op_write: bool,
    queued: bool,
) -> f64 {
    let mut now = 0;
    let mut first_done = 0;
    let mut last_done = 0;
    for i in 0..count {
        let offset = start + i * request_bytes;
        let io = if op_write {
            DiskIo::write(offset, request_bytes)
        } else {
            DiskIo::read(offset, request_bytes)
        };
        let s = hdd.submit(now, io);
        if !queued {
            now = s.completion_ns;
        }
        if i == 0 {
            first_done = s.completion_ns;
        }
        last_done = s.completion_ns;
    }
    // The first request pays the positioning; measure the streaming that follows.
    ((count - 1) * request_bytes) as f64 / ((last_done - first_done) as f64 / 1e9)
}

/// Sequential transfers at the outer zone run at the published sustained rate, whether the
/// requests are queued, issued one at a time through the read-ahead cache, or written one at a
/// time; at the inner zone they run at the inner rate.
#[test]
fn sequential_rate_is_the_sustained_rate() {
    let mib = 1 << 20;
    for (drive, p) in hdds() {
        let outer = p.bytes_per_sec_outer as f64;
        let cases = [
            (
                "queued reads, no cache",
                p.clone().without_cache(),
                false,
                true,
            ),
            (
                "one-at-a-time reads via read-ahead",
                p.clone(),
                false,
                false,
            ),
            ("one-at-a-time writes", p.clone(), true, false),
            ("queued writes", p.clone(), true, true),
        ];
        for (what, params, write, queued) in cases {
            let mut hdd = Hdd::new(params, 0).unwrap();
            let rate = sequential_rate(&mut hdd, 0, mib, 200, write, queued);
            println!(
                "{drive:?} {what}: {:.1} MB/s (published {:.1})",
                rate / 1e6,
                outer / 1e6
            );
            assert!(
                relative_error(rate, outer) < 0.01,
                "{drive:?} {what}: {rate}"
            );
        }
        let mut hdd = Hdd::new(p.clone(), 0).unwrap();
        let start = (p.capacity_bytes - 201 * mib) / SECTOR * SECTOR;
        let rate = sequential_rate(&mut hdd, start, mib, 200, false, false);
        let inner = p.bytes_per_sec_inner as f64;
        assert!(
            relative_error(rate, inner) < 0.01,
            "{drive:?} inner zone: {rate}"
        );
    }
}

/// Without read-ahead, a sequential read issued after the previous one completed has missed
/// its sector: it waits almost a whole revolution (the reason drives read ahead).
#[test]
fn late_sequential_read_without_cache_loses_a_revolution() {
    let p = hdd_params(Drive::SeagateSt3500320as).without_cache();
    let mut hdd = Hdd::new(p.clone(), 0).unwrap();
    let first = hdd.submit(0, DiskIo::read(0, 4096));
    let second = hdd.submit(first.completion_ns + 1, DiskIo::read(4096, 4096));
    assert_eq!(second.seek_ns, 0);
    let rev_ns = p.revolution_ms() * 1e6;
    assert!(second.rotation_ns as f64 > 0.9 * rev_ns, "{second:?}");
}

#[test]
fn read_after_read_is_a_cache_hit() {
    let p = hdd_params(Drive::WdWd1600aajs);
    let mut hdd = Hdd::new(p.clone(), 0).unwrap();
    let miss = hdd.submit(0, DiskIo::read(10 << 30, 65_536));
    assert!(!miss.cache_hit);
    let hit = hdd.submit(
        miss.completion_ns + 50_000_000,
        DiskIo::read(10 << 30, 65_536),
    );
    assert!(hit.cache_hit);
    let expected = (p.overhead_ms * 1e6).round() as u64
        + (65_536.0 * 1e9 / p.interface_bytes_per_sec as f64).round() as u64;
    assert_eq!(hit.service_ns(), expected);
    // A write over the cached data invalidates it.
    let w = hdd.submit(hit.completion_ns, DiskIo::write(10 << 30, 4096));
    assert!(!w.cache_hit);
    let again = hdd.submit(w.completion_ns + 50_000_000, DiskIo::read(10 << 30, 65_536));
    assert!(!again.cache_hit);
}

#[test]
fn writes_pay_the_write_settle_penalty() {
    let p = hdd_params(Drive::SeagateSt3500320as)
        .without_cache()
        .with_rotation(Rotation::Expected);
    let mut reader = Hdd::new(p.clone(), 0).unwrap();
    let mut writer = Hdd::new(p.clone(), 0).unwrap();
    let offset = 300 << 30;
    let r = reader.submit(0, DiskIo::read(offset, 4096));
    let w = writer.submit(0, DiskIo::write(offset, 4096));
    assert_eq!(
        w.seek_ns - r.seek_ns,
        (p.seek_ms_write_extra * 1e6).round() as u64
    );
}

/// Random 4 KiB reads cost overhead + seek + half a revolution + transfer: about 75-80 IOPS for
/// a 7200 rpm drive with an 8.5-8.9 ms average seek.
#[test]
fn random_4k_read_iops_are_plausible() {
    for (drive, p) in hdds() {
        let mut hdd = Hdd::new(p.clone(), 11).unwrap();
        let mut rng = SplitMix64::new(5);
        let mut now = 0;
        let n = 5_000;
        for _ in 0..n {
            let offset = rng.below((p.capacity_bytes - 4096) / 4096) * 4096;
            now = hdd.submit(now, DiskIo::read(offset, 4096)).completion_ns;
        }
        let iops = f64::from(n) / (now as f64 / 1e9);
        println!("{drive:?}: {iops:.1} random 4 KiB read IOPS at queue depth 1");
        assert!((65.0..95.0).contains(&iops), "{drive:?}: {iops}");
    }
}

#[test]
fn queued_requests_wait_their_turn() {
    let mut hdd = Hdd::new(hdd_params(Drive::SeagateSt32000645ns), 0).unwrap();
    let a = hdd.submit(1000, DiskIo::read(1 << 40, 4096));
    let b = hdd.submit(1000, DiskIo::read(1 << 30, 4096));
    assert_eq!(a.start_ns, 1000);
    assert_eq!(b.start_ns, a.completion_ns);
    assert_eq!(b.queue_ns(), a.completion_ns - 1000);
    assert_eq!(hdd.busy_until_ns(), b.completion_ns);
}

#[test]
fn random_rotation_is_deterministic_for_a_seed() {
    let p = hdd_params(Drive::WdWd6401aals).with_rotation(Rotation::Random);
    let run = |seed| {
        let mut hdd = Hdd::new(p.clone(), seed).unwrap();
        let mut rng = SplitMix64::new(9);
        (0..200)
            .map(|_| {
                hdd.submit(0, DiskIo::read(rng.below(1 << 30) * 512, 4096))
                    .completion_ns
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(run(1), run(1));
    assert_ne!(run(1), run(2));
}

#[test]
fn bad_parameters_are_errors_not_panics() {
    let mut p = hdd_params(Drive::SeagateSt3500320as);
    p.seek_ms_avg = 16.9;
    assert!(Hdd::new(p, 0).is_err());
    let mut p = hdd_params(Drive::SeagateSt3500320as);
    p.bytes_per_sec_inner = p.bytes_per_sec_outer + 1;
    assert!(Hdd::new(p, 0).is_err());
    let mut p = hdd_params(Drive::SeagateSt3500320as);
    p.rpm = 0;
    assert!(Hdd::new(p, 0).is_err());
    let mut s = x25e();
    s.channels = 0;
    assert!(Ssd::new(s).is_err());
}

#[test]
#[should_panic(expected = "beyond the capacity")]
fn requests_off_the_end_are_a_bug() {
    let mut hdd = Hdd::new(hdd_params(Drive::WdWd1600aajs), 0).unwrap();
    let cap = hdd.capacity_bytes();
    hdd.submit(0, DiskIo::read(cap - 512, 1024));
}

// --- SSD -------------------------------------------------------------------------------------

#[test]
fn ssd_idle_latency_is_latency_plus_transfer() {
    let p = x25e();
    let mut ssd = Ssd::new(p.clone()).unwrap();
    let r = ssd.submit(0, DiskIo::read(0, 4096));
    assert_eq!(
        r.response_ns(),
        75_000 + (4096.0 * 1e9 / 250e6_f64).round() as u64
    );
    let w = ssd.submit(1_000_000, DiskIo::write(8192, 4096));
    assert_eq!(
        w.response_ns(),
        85_000 + (4096.0 * 1e9 / 170e6_f64).round() as u64
    );
}

fn ssd_saturated_rate(op_write: bool, request_bytes: u64, n: u64) -> (f64, f64) {
    let mut ssd = Ssd::new(x25e()).unwrap();
    let mut rng = SplitMix64::new(4);
    let mut last = 0;
    for _ in 0..n {
        let offset = rng.below(ssd.capacity_bytes() / request_bytes) * request_bytes;
        let io = if op_write {
            DiskIo::write(offset, request_bytes)
        } else {
            DiskIo::read(offset, request_bytes)
        };
        last = last.max(ssd.submit(0, io).completion_ns);
    }
    let seconds = last as f64 / 1e9;
    (n as f64 / seconds, (n * request_bytes) as f64 / seconds)
}

/// With many requests outstanding the X25-E model delivers its published random IOPS and
/// sequential bandwidth.
#[test]
fn ssd_saturated_throughput_matches_the_data_sheet() {
    let (read_iops, _) = ssd_saturated_rate(false, 4096, 50_000);
    let (write_iops, _) = ssd_saturated_rate(true, 4096, 10_000);
    let (_, read_bw) = ssd_saturated_rate(false, 1 << 20, 2_000);
    let (_, write_bw) = ssd_saturated_rate(true, 1 << 20, 2_000);
    println!(
        "X25-E: {read_iops:.0} / {write_iops:.0} IOPS, {:.1} / {:.1} MB/s",
        read_bw / 1e6,
        write_bw / 1e6
    );
    assert!(relative_error(read_iops, 35_000.0) < 0.02, "{read_iops}");
    assert!(relative_error(write_iops, 3_300.0) < 0.02, "{write_iops}");
    assert!(relative_error(read_bw, 250e6) < 0.02, "{read_bw}");
    assert!(relative_error(write_bw, 170e6) < 0.02, "{write_bw}");
}

/// At queue depth 1 the channels' parallelism does not help: one request at a time.
#[test]
fn ssd_queue_depth_one_is_latency_bound() {
    let mut ssd = Ssd::new(x25e()).unwrap();
    let mut now = 0;
    for i in 0..10_000u64 {
        now = ssd.submit(now, DiskIo::read(i * 4096, 4096)).completion_ns;
    }
    let iops = 10_000.0 / (now as f64 / 1e9);
    assert!(relative_error(iops, 1e9 / 91_384.0) < 0.01, "{iops}");
}

// --- Properties common to every model ---------------------------------------------------------

fn any_model() -> impl Strategy<Value = (usize, u8)> {
    (0..Drive::ALL.len(), 0u8..3)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, failure_persistence: None, ..ProptestConfig::default() })]

    /// For any request sequence: components add up, time never runs backwards, and estimate
    /// predicts submit exactly.
    #[test]
    fn services_are_consistent_and_estimates_exact(
        (drive_index, rotation) in any_model(),
        ios in prop::collection::vec((0u64..1_000_000, 0u64..4096, 0u64..256, any::<bool>(), 0u64..5_000_000), 1..60),
    ) {
        let drive = Drive::ALL[drive_index];
        let params = match drive.params() {
            DriveParams::Hdd(p) => DriveParams::Hdd(p.with_rotation([Rotation::Angular, Rotation::Random, Rotation::Expected][rotation as usize])),
            ssd => ssd,
        };
        let mut disk = params.build(3).unwrap();
        let capacity = disk.capacity_bytes();
        let mut now = 0;
        let mut last_completion = 0;
        for (block, near, sectors, write, gap) in ios {
            // Mix far and near (sequential-ish) offsets.
            let offset = ((block * 7_919 + near) * 512) % (capacity - (1 << 20));
            let io = DiskIo { op: if write { sim::Op::Write } else { sim::Op::Read }, offset_bytes: offset, len_bytes: sectors * 512 };
            now += gap;
            let predicted = disk.estimate(now, io);
            let s = disk.submit(now, io);
            prop_assert_eq!(predicted, s);
            prop_assert_eq!(s.arrival_ns, now);
            prop_assert!(s.start_ns >= now);
            prop_assert_eq!(s.start_ns + s.overhead_ns + s.seek_ns + s.rotation_ns + s.transfer_ns, s.completion_ns);
            if drive.is_hdd() {
                prop_assert!(s.start_ns >= last_completion);
            }
            last_completion = s.completion_ns;
        }
    }
}
