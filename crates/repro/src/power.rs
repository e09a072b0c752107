//! Seed 004 sections 3.6-3.7 (part of the `raid4s` reproduction): the thesis's power and
//! disk-time models, from the device figures it gives (Table 3.1: power in each state; Table
//! 3.2: throughput and seek time), for Figures 3.8-3.10 and 3.12-3.13.
//!
//! The model is the thesis's: a workload of fixed-size requests at a fixed rate; each request
//! keeps its device busy for a seek (random requests on a disk; none on the SSD or for
//! sequential ones) plus the transfer at the device's throughput; a device draws its read or
//! write power while busy, its idle power otherwise, and its sleep power when it holds no data
//! of the workload. The seek's power is the read power ("the disk is spinning while the seek
//! takes place").

use sim::svg::{BarChart, LineChart, Series};

use crate::{Claim, Experiment, Plot, Row};

/// One device's figures (Tables 3.1 and 3.2).
#[derive(Clone, Copy, Debug)]
pub struct PowerDevice {
    /// Name.
    pub name: &'static str,
    /// Watts while reading.
    pub read_w: f64,
    /// Watts while writing.
    pub write_w: f64,
    /// Watts while idle.
    pub idle_w: f64,
    /// Watts asleep.
    pub sleep_w: f64,
    /// Sustained throughput, bytes per second.
    pub bytes_per_sec: f64,
    /// Average seek, seconds.
    pub seek_s: f64,
}

/// Western Digital WD20EADS (Tables 3.1 and 3.2).
pub const WD20EADS: PowerDevice = PowerDevice {
    name: "WD20EADS disk",
    read_w: 6.0,
    write_w: 6.0,
    idle_w: 3.7,
    sleep_w: 0.8,
    bytes_per_sec: 77.9e6,
    seek_s: 13.2e-3,
};

/// Samsung 64 GB SLC SSD (Tables 3.1 and 3.2).
pub const SAMSUNG_SLC: PowerDevice = PowerDevice {
    name: "Samsung SLC SSD",
    read_w: 0.5,
    write_w: 0.35,
    idle_w: 0.2,
    sleep_w: 0.2,
    bytes_per_sec: 100.0e6,
    seek_s: 0.0,
};

/// The workload of Figures 3.8-3.10: 1.5 MB/s of 64 KiB requests.
const RATE: f64 = 1.5e6;
const REQ: f64 = 65536.0;

/// The busy fraction of `d` serving `bytes_per_sec` of `req`-byte requests.
pub fn busy(d: &PowerDevice, bytes_per_sec: f64, req: f64, random: bool) -> f64 {
    let per = if random { d.seek_s } else { 0.0 } + req / d.bytes_per_sec;
    (bytes_per_sec / req * per).min(1.0)
}

/// Watts of `d` serving that load (`write` picks the write power); asleep without load.
pub fn watts(d: &PowerDevice, bytes_per_sec: f64, req: f64, random: bool, write: bool) -> f64 {
    if bytes_per_sec == 0.0 {
        return d.sleep_w;
    }
    let b = busy(d, bytes_per_sec, req, random);
    b * if write { d.write_w } else { d.read_w } + (1.0 - b) * d.idle_w
}

fn config(what: &str) -> Vec<(&'static str, String)> {
    vec![
        ("devices", "WD20EADS disk: read/write 6.0 W, idle 3.7 W, sleep 0.8 W, 77.9 MB/s, 13.2 ms seek; Samsung 64 GB SLC SSD: read 0.5 W, write 0.35 W, idle and sleep 0.2 W, 100 MB/s, no seek (Tables 3.1-3.2)".into()),
        ("workload", what.to_string()),
        ("model", "busy time per request = seek (random requests on the disk) + size / throughput; power = busy x read (or write) power + idle x idle power; a device holding none of the data sleeps".into()),
    ]
}

/// Figures 3.8 and 3.9: read power vs the share of the data on the SSD.
pub fn fig3_8_9(random: bool) -> Experiment {
    let (id, kind) = if random {
        ("fig3.8", "random")
    } else {
        ("fig3.9", "sequential")
    };
    let mut e = Experiment::new(
        id,
        &format!("Power of a {kind} read workload vs the share of the data on the SSD (Figure {})", &id[3..]),
        &config(&format!("{kind} 64 KiB reads at 1.5 MB/s; a share f of the data (and of the reads) on the SSD, the rest on the disk")),
    );
    let mut pts = Vec::new();
    for i in 0..=4 {
        let f = i as f64 / 4.0;
        let w = watts(&WD20EADS, (1.0 - f) * RATE, REQ, random, false)
            + watts(&SAMSUNG_SLC, f * RATE, REQ, random, false);
        e.rows.push(Row::new(
            format!("{:.0} % on the SSD: power", f * 100.0),
            None,
            w,
            "W",
        ));
        pts.push((f * 100.0, w));
    }
    e.rows.push(Row::new(
        "disk busy fraction, all data on disk",
        None,
        busy(&WD20EADS, RATE, REQ, random) * 100.0,
        "%",
    ));
    e.claims.push(Claim::new(
        "Moving data to the SSD lowers the power at every step",
        pts.windows(2).all(|w| w[1].1 < w[0].1),
        pts.iter()
            .map(|p| format!("{:.0} %: {:.2} W", p.0, p.1))
            .collect::<Vec<_>>()
            .join(", "),
    ));
    let ssd_same = (watts(&SAMSUNG_SLC, RATE, REQ, true, false)
        - watts(&SAMSUNG_SLC, RATE, REQ, false, false))
    .abs()
        < 1e-12;
    let disk_random = watts(&WD20EADS, RATE, REQ, true, false);
    let disk_seq = watts(&WD20EADS, RATE, REQ, false, false);
    if random {
        e.claims.push(Claim::new(
            "The random workload costs the disk more than the sequential one (a seek per read)",
            disk_random > disk_seq,
            format!("disk alone: random {disk_random:.3} W, sequential {disk_seq:.3} W"),
        ));
    } else {
        e.claims.push(Claim::new(
            "The SSD's power does not depend on the access pattern",
            ssd_same,
            format!(
                "SSD alone: {:.3} W random and sequential",
                watts(&SAMSUNG_SLC, RATE, REQ, false, false)
            ),
        ));
    }
    e.plots.push(Plot {
        caption: format!("Figure {}: power vs share on the SSD", &id[3..]),
        svg: LineChart {
            title: format!("{kind} reads, 1.5 MB/s"),
            x_label: "data on the SSD (%)".into(),
            y_label: "power (W)".into(),
            series: vec![Series::line("disk + SSD", pts)],
            markers: Vec::new(),
            log_y: false,
            ..Default::default()
        }
        .to_svg(),
    });
    e
}

/// Figure 3.10: a two-device mirror under writes.
pub fn fig3_10() -> Experiment {
    let mut e = Experiment::new(
        "fig3.10",
        "Power of a two-device mirror under a write workload: disk + disk vs disk + SSD (Figure 3.10)",
        &config("random 64 KiB writes at 1.5 MB/s, every write to both devices of a mirror"),
    );
    let dd = 2.0 * watts(&WD20EADS, RATE, REQ, true, true);
    let ds = watts(&WD20EADS, RATE, REQ, true, true) + watts(&SAMSUNG_SLC, RATE, REQ, true, true);
    e.rows.push(Row::new("disk + disk power", None, dd, "W"));
    e.rows.push(Row::new("disk + SSD power", None, ds, "W"));
    e.rows.push(Row::new(
        "disk + SSD / disk + disk",
        Some(0.5),
        ds / dd,
        "x",
    ));
    e.claims.push(Claim::new(
        "A mirror on an SSD almost halves the power (within 60 % of disk + disk)",
        ds / dd < 0.6 && ds / dd > 0.5,
        format!("{ds:.2} W vs {dd:.2} W: {:.3}", ds / dd),
    ));
    e.notes.push("Published: \"reduced almost by half\" (section 3.6), entered as 0.5; the model gives slightly more than half because the disk stays.".into());
    e.plots.push(Plot {
        caption: "Figure 3.10: mirror power".into(),
        svg: BarChart {
            title: "Two-device mirror, 1.5 MB/s of writes".into(),
            x_label: "mirror pair".into(),
            y_label: "power (W)".into(),
            categories: vec!["disk + disk".into(), "disk + SSD".into()],
            series: vec![("power".into(), vec![dd, ds])],
            notes: crate::published_notes(&e, |_| true),
            ..Default::default()
        }
        .to_svg(),
    });
    e
}

/// Figures 3.12 and 3.13: time breakdown of each disk of a RAID0 under writes.
pub fn fig3_12_13(random: bool) -> Experiment {
    let (id, kind, rate) = if random {
        ("fig3.12", "random", 1.5e6)
    } else {
        ("fig3.13", "sequential", 50e6)
    };
    let widths = [1usize, 2, 3, 4, 5, 6, 8, 10];
    let mut e = Experiment::new(
        id,
        &format!("Time each disk of a RAID0 spends seeking, transferring and idle: {kind} writes at {:.1} MB/s (Figure {})", rate / 1e6, &id[3..]),
        &[
            ("disk", "WD20EADS: 77.9 MB/s, 13.2 ms average seek (Table 3.2)".into()),
            ("array", "RAID0 (no redundancy), stripe widths 1-10 disks, 64 KiB chunks".into()),
            ("workload", format!("{kind} 64 KiB writes at {:.1} MB/s, spread evenly over the disks; {}", rate / 1e6, if random { "a seek per write" } else { "no seeks" })),
            ("model", "per disk: seek = writes/s x 13.2 ms, transfer = bytes/s / 77.9 MB/s, idle = the rest".into()),
        ],
    );
    let mut idle = Vec::new();
    let (mut s_seek, mut s_xfer, mut s_idle) = (Vec::new(), Vec::new(), Vec::new());
    for &w in &widths {
        let per_disk = rate / w as f64;
        let seek = if random {
            per_disk / REQ * WD20EADS.seek_s
        } else {
            0.0
        };
        let xfer = per_disk / WD20EADS.bytes_per_sec;
        let idl = (1.0 - seek - xfer).max(0.0);
        e.rows.push(Row::new(
            format!("width {w}: seeking"),
            None,
            seek * 100.0,
            "%",
        ));
        e.rows.push(Row::new(
            format!("width {w}: transferring"),
            None,
            xfer * 100.0,
            "%",
        ));
        e.rows
            .push(Row::new(format!("width {w}: idle"), None, idl * 100.0, "%"));
        idle.push((w, idl));
        s_seek.push(seek * 100.0);
        s_xfer.push(xfer * 100.0);
        s_idle.push(idl * 100.0);
    }
    e.claims.push(Claim::new(
        "Wider stripes leave each disk idle for a larger share of the time",
        idle.windows(2).all(|p| p[1].1 > p[0].1),
        idle.iter()
            .map(|(w, i)| format!("{w}: {:.1} %", i * 100.0))
            .collect::<Vec<_>>()
            .join(", "),
    ));
    e.plots.push(Plot {
        caption: format!("Figure {}: disk time breakdown", &id[3..]),
        svg: BarChart {
            title: format!("{kind} writes, {:.1} MB/s", rate / 1e6),
            x_label: "array width".into(),
            y_label: "% of time".into(),
            categories: widths.iter().map(|w| format!("{w} disks")).collect(),
            series: vec![
                ("seeking".into(), s_seek),
                ("transferring".into(), s_xfer),
                ("idle".into(), s_idle),
            ],
            ..Default::default()
        }
        .to_svg(),
    });
    e
}
