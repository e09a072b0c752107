//! Measured properties of a scheme: what `raidforge layout check` prints and the tests assert.

use std::collections::HashSet;

use crate::{recovery_plan, Disk, LayoutError, Role, Scheme, Source};

/// Coefficient of variation (population standard deviation over mean) of `v`; 0 for an empty
/// or all-zero sample.
pub fn cov(v: &[f64]) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    if mean == 0.0 {
        return 0.0;
    }
    let var = v.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n;
    var.sqrt() / mean
}

/// CoV of rebuild load measured over consecutive windows of stripes.
#[derive(Clone, Debug, PartialEq)]
pub struct WindowStats {
    /// Stripes per window.
    pub window: usize,
    /// Number of windows that contain at least one repair.
    pub windows: usize,
    /// Worst (largest) read CoV over the windows.
    pub read_cov_max: f64,
    /// Mean read CoV over the windows.
    pub read_cov_mean: f64,
    /// Worst write CoV over the windows.
    pub write_cov_max: f64,
    /// Mean write CoV over the windows.
    pub write_cov_mean: f64,
}

/// What `layout check` reports.
#[derive(Clone, Debug, PartialEq)]
pub struct CheckReport {
    pub scheme: String,
    pub disks: usize,
    pub stripes: usize,
    pub rows: u64,
    pub failed: Vec<Disk>,
    pub stripes_on_distinct_disks: bool,
    pub data_units_per_disk: Vec<u64>,
    /// P, Q and mirror units per disk.
    pub parity_units_per_disk: Vec<u64>,
    /// Units read from each disk to rebuild the failed disks (0 on failed disks).
    pub rebuild_reads_per_disk: Vec<u64>,
    /// Units written to each disk by the rebuild.
    pub rebuild_writes_per_disk: Vec<u64>,
    /// CoV of reads over surviving disks that are not dedicated spares, whole cycle.
    pub rebuild_read_cov: f64,
    /// CoV of writes over the disks that receive rebuilt units' possible destinations (surviving
    /// disks, spares included when the scheme has them), whole cycle.
    pub rebuild_write_cov: f64,
    pub windowed: WindowStats,
    /// Number of disks that serve rebuild reads.
    pub disks_read: usize,
    /// Number of disks that receive rebuild writes.
    pub disks_written: usize,
}

/// Measures `scheme` after `failed` disks are lost (disk 0 when `failed` is empty), with windows
/// of `window` stripes for the windowed CoV.
pub fn check(
    scheme: &dyn Scheme,
    failed: &[Disk],
    window: usize,
) -> Result<CheckReport, LayoutError> {
    let cycle = scheme.cycle();
    let n = cycle.disks;
    let failed: Vec<Disk> = if failed.is_empty() {
        // Disk 0 by default, or the first disk that holds data (a dedicated spare holds none).
        let spares = scheme.spare_disks();
        vec![(0..n as Disk).find(|d| !spares.contains(d)).unwrap_or(0)]
    } else {
        failed.to_vec()
    };
    let distinct = cycle.stripes.iter().all(|s| {
        let set: HashSet<Disk> = s.units.iter().map(|u| u.disk).collect();
        set.len() == s.units.len()
    });
    let mut data = vec![0u64; n];
    let mut parity = vec![0u64; n];
    for (loc, role) in cycle.places() {
        if role == Role::Data {
            data[loc.disk as usize] += 1;
        } else {
            parity[loc.disk as usize] += 1;
        }
    }
    let plan = recovery_plan(scheme, &failed)?;
    let mut reads = vec![0u64; n];
    let mut writes = vec![0u64; n];
    // Per-window counts, keyed by the stripe index of the repair.
    let window = window.max(1);
    let nwin = cycle.stripes.len().div_ceil(window);
    let mut wreads = vec![vec![0u64; n]; nwin];
    let mut wwrites = vec![vec![0u64; n]; nwin];
    // A source read by several repairs of the same stripe is read once.
    let mut read_once: HashSet<(usize, crate::Loc)> = HashSet::new();
    for r in &plan.repairs {
        writes[r.target.disk as usize] += 1;
        wwrites[r.stripe / window][r.target.disk as usize] += 1;
        for s in &r.sources {
            if let Source::Disk(l) = s {
                if read_once.insert((r.stripe, *l)) {
                    reads[l.disk as usize] += 1;
                    wreads[r.stripe / window][l.disk as usize] += 1;
                }
            }
        }
    }
    let spares = scheme.spare_disks();
    let survivor = |d: usize| !failed.contains(&(d as Disk));
    let reader = |d: usize| survivor(d) && !spares.contains(&(d as Disk));
    // Writes are measured over the disks that can receive them: every survivor when the scheme
    // writes rebuilt units onto surviving data disks (distributed spare space: RAID+, random,
    // hash, S2-RAID free partitions), else the live dedicated spares, else the replacement disks
    // of an in-place rebuild.
    let live_spares: Vec<usize> = spares
        .iter()
        .map(|s| *s as usize)
        .filter(|s| survivor(*s))
        .collect();
    let onto_data_disks = (0..n).any(|d| reader(d) && writes[d] > 0);
    let writer = |d: usize| {
        if onto_data_disks {
            survivor(d)
        } else if !live_spares.is_empty() {
            live_spares.contains(&d)
        } else {
            !survivor(d)
        }
    };
    let read_cov = crate::counts_cov(&reads, reader);
    let write_cov = crate::counts_cov(&writes, writer);
    let mut rc = Vec::new();
    let mut wc = Vec::new();
    for w in 0..nwin {
        if wreads[w].iter().sum::<u64>() == 0 && wwrites[w].iter().sum::<u64>() == 0 {
            continue;
        }
        rc.push(crate::counts_cov(&wreads[w], reader));
        wc.push(crate::counts_cov(&wwrites[w], writer));
    }
    let max = |v: &[f64]| v.iter().cloned().fold(0.0, f64::max);
    let mean = |v: &[f64]| {
        if v.is_empty() {
            0.0
        } else {
            v.iter().sum::<f64>() / v.len() as f64
        }
    };
    Ok(CheckReport {
        scheme: scheme.name().to_string(),
        disks: n,
        stripes: cycle.stripes.len(),
        rows: cycle.rows,
        failed: failed.clone(),
        stripes_on_distinct_disks: distinct,
        data_units_per_disk: data,
        parity_units_per_disk: parity,
        disks_read: reads.iter().filter(|r| **r > 0).count(),
        disks_written: writes.iter().filter(|w| **w > 0).count(),
        rebuild_reads_per_disk: reads,
        rebuild_writes_per_disk: writes,
        rebuild_read_cov: read_cov,
        rebuild_write_cov: write_cov,
        windowed: WindowStats {
            window,
            windows: rc.len(),
            read_cov_max: max(&rc),
            read_cov_mean: mean(&rc),
            write_cov_max: max(&wc),
            write_cov_mean: mean(&wc),
        },
    })
}
