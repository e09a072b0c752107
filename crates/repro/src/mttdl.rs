//! Reliability models: mean time to data loss (MTTDL) of RAID5, RAID6, RAID6 with lazy parity
//! update (seed 002), RAID-50, RAID-60 and RAID+ (seed 001, Table 1), as continuous-time Markov
//! chains.
//!
//! Every model is a chain of transient states plus one absorbing "data lost" state; the MTTDL
//! is the expected time to absorption from the healthy state. For a generator restricted to the
//! transient states `Q`, the vector `t` of expected absorption times solves `-Q t = 1`
//! ([`absorption_times`]). The chains here have at most six states, so a small dense Gaussian
//! elimination written out below does the job (no linear-algebra dependency needed).
//!
//! Rates are per hour: a disk fails at `lambda = 1 / MTTF`, a failed disk is rebuilt at
//! `mu = 1 / MTTR` (one rebuild at a time, as in the usual RAID chains).
//!
//! ## Lazy parity update (seed 002, Figure 4)
//!
//! The seed gives the state diagram's rates but not its drawing in text; the chain here is built
//! from its description:
//!
//! - `C0` healthy, every parity current (tolerates two failures);
//! - `D0` healthy, background parity updates pending in the BPGL. The list becomes non-empty at
//!   rate `lambda2` (`1/lambda2 = 0.26 h`) and is drained while the array is idle at rate `mu2`
//!   (`1/mu2 = 0.009 h`);
//! - `C1` one failed disk, parities current (tolerates one more failure); lazy parity is off
//!   while degraded ("both parity groups are treated as foreground");
//! - `D1` one failed disk with updates still pending: the BPGL is flushed at rate `mu3`
//!   (`1/mu3 = 0.74 h`), after which the array is in `C1`; a second failure before the flush
//!   ends loses data (the deferred groups have a single valid parity), as in RAID5;
//! - `C2` two failed disks; a third failure loses data.
//!
//! With `lambda2 -> 0` the chain is RAID6's; when the flush takes forever it is RAID5's after the
//! first failure.

use serde::Serialize;

/// Expected time to absorption from every transient state of a continuous-time Markov chain.
///
/// `rates[i][j]` (i != j) is the transition rate from transient state `i` to transient state
/// `j`; `to_loss[i]` is the rate from `i` into the absorbing state. Returns `t` with `t[i]` the
/// mean time to absorption starting in `i`, or `None` if absorption is not certain from some
/// state (singular system).
pub fn absorption_times(rates: &[Vec<f64>], to_loss: &[f64]) -> Option<Vec<f64>> {
    let n = to_loss.len();
    assert_eq!(rates.len(), n, "one row of rates per state");
    // A = -Q over the transient states: diagonal = total outflow, off-diagonal = -rate.
    let mut a = vec![vec![0.0f64; n + 1]; n];
    for i in 0..n {
        assert_eq!(rates[i].len(), n, "one rate per state in row {i}");
        let mut out = to_loss[i];
        for j in 0..n {
            if i != j {
                out += rates[i][j];
                a[i][j] = -rates[i][j];
            }
        }
        a[i][i] = out;
        a[i][n] = 1.0;
    }
    // Gaussian elimination with partial pivoting on the augmented matrix [A | 1].
    for col in 0..n {
        let piv = (col..n).max_by(|&x, &y| a[x][col].abs().total_cmp(&a[y][col].abs()))?;
        if a[piv][col] == 0.0 || !a[piv][col].is_finite() {
            return None;
        }
        a.swap(col, piv);
        let pivot = a[col].clone();
        for (r, row) in a.iter_mut().enumerate() {
            if r != col && row[col] != 0.0 {
                let f = row[col] / pivot[col];
                for (x, p) in row[col..].iter_mut().zip(&pivot[col..]) {
                    *x -= f * p;
                }
            }
        }
    }
    let t: Vec<f64> = (0..n).map(|i| a[i][n] / a[i][i]).collect();
    t.iter().all(|x| x.is_finite() && *x >= 0.0).then_some(t)
}

/// Disk and repair parameters, hours.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct DiskRates {
    /// Mean time to failure of one disk (`1/lambda`).
    pub mttf_h: f64,
    /// Mean time to repair (rebuild) one failed disk (`1/mu`).
    pub mttr_h: f64,
}

impl DiskRates {
    /// Seed 002's parameters: MTTF 30,000 h, MTTR 24 h.
    pub const SEED_002: DiskRates = DiskRates {
        mttf_h: 30_000.0,
        mttr_h: 24.0,
    };
    fn lambda(&self) -> f64 {
        1.0 / self.mttf_h
    }
    fn mu(&self) -> f64 {
        1.0 / self.mttr_h
    }
}

/// The background-parity-list rates of lazy parity update, hours (seed 002, section 3).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct LpuRates {
    /// `1/lambda2`: mean time until the list becomes non-empty again once drained.
    pub fill_h: f64,
    /// `1/mu2`: mean time to drain the list while the array is healthy and idle.
    pub drain_h: f64,
    /// `1/mu3`: mean time to flush the list after a disk failure.
    pub flush_h: f64,
}

impl LpuRates {
    /// Seed 002's values from the cello traces: 0.26 h, 0.009 h, 0.74 h.
    pub const SEED_002: LpuRates = LpuRates {
        fill_h: 0.26,
        drain_h: 0.009,
        flush_h: 0.74,
    };
    /// Long-run share of healthy time with updates pending: `lambda2 / (lambda2 + mu2)`.
    pub fn pending_fraction(&self) -> f64 {
        self.drain_h / (self.fill_h + self.drain_h)
    }
}

fn check(n: usize, min: usize, d: &DiskRates) {
    assert!(n >= min, "the model needs at least {min} disks, got {n}");
    assert!(
        d.mttf_h > 0.0 && d.mttr_h > 0.0 && d.mttf_h.is_finite() && d.mttr_h.is_finite(),
        "MTTF and MTTR must be positive"
    );
}

fn solve(rates: &[Vec<f64>], to_loss: &[f64]) -> f64 {
    absorption_times(rates, to_loss).expect("every chain here reaches data loss")[0]
}

/// Any single-parity array of `n` disks in which, while one failed disk is rebuilt, a failure
/// of any of `losers` others loses data: `0 -n.lambda-> 1 -losers.lambda-> lost`, `1 -mu-> 0`.
/// Hours. (RAID5: `n - 1` losers; RAID-50: the `k - 1` others of the group; a mirror: 1.)
pub fn single_failure(n: usize, losers: usize, d: DiskRates) -> f64 {
    check(n, 2, &d);
    assert!((1..n).contains(&losers), "losers must be in 1..n");
    let (l, m, nf) = (d.lambda(), d.mu(), n as f64);
    solve(
        &[vec![0.0, nf * l], vec![m, 0.0]],
        &[0.0, losers as f64 * l],
    )
}

/// RAID5 of `n` disks ([`single_failure`] with `n - 1` losers). Hours.
pub fn raid5(n: usize, d: DiskRates) -> f64 {
    single_failure(n, n - 1, d)
}

/// Any double-parity array of `n` disks in which a first failure makes `second` disks able to
/// take the array to two failures, and then `third` disks able to lose data, one rebuild at a
/// time at rate `mu`: `0 -n.l-> 1 -second.l-> 2 -third.l-> lost`, `2 -mu-> 1 -mu-> 0`. Hours.
/// (RAID6: `n - 1` then `n - 2`; RAID-60 in groups of `k`: `k - 1` then `k - 2`, a failure in
/// another group being rebuilt on its own.)
pub fn double_failure(n: usize, second: usize, third: usize, d: DiskRates) -> f64 {
    check(n, 3, &d);
    assert!(
        third < second && second < n,
        "need third < second < n, got {third}, {second}, {n}"
    );
    let (l, m, nf) = (d.lambda(), d.mu(), n as f64);
    solve(
        &[
            vec![0.0, nf * l, 0.0],
            vec![m, 0.0, second as f64 * l],
            vec![0.0, m, 0.0],
        ],
        &[0.0, 0.0, third as f64 * l],
    )
}

/// RAID6 of `n` disks: up to two failed disks, one rebuilt at a time at rate `mu`. Hours.
pub fn raid6(n: usize, d: DiskRates) -> f64 {
    double_failure(n, n - 1, n - 2, d)
}

/// RAID-60 of `n` disks in groups of `k` (each a RAID6 of width `k`): data is lost when a third
/// disk of one group fails while two of it are down. Hours.
pub fn raid60(n: usize, k: usize, d: DiskRates) -> f64 {
    assert!((4..=n).contains(&k), "group width k must be in 4..=n");
    double_failure(n, k - 1, k - 2, d)
}

/// RAID6 of `n` disks with lazy parity update (the chain in the module docs). Hours.
pub fn raid6_lpu(n: usize, d: DiskRates, b: LpuRates) -> f64 {
    check(n, 3, &d);
    assert!(
        b.fill_h > 0.0 && b.drain_h > 0.0 && b.flush_h > 0.0,
        "BPGL times must be positive"
    );
    let (l, m, nf) = (d.lambda(), d.mu(), n as f64);
    let (l2, m2, m3) = (1.0 / b.fill_h, 1.0 / b.drain_h, 1.0 / b.flush_h);
    // States: 0 = C0, 1 = D0, 2 = C1, 3 = D1, 4 = C2.
    let mut q = vec![vec![0.0; 5]; 5];
    q[0][1] = l2;
    q[0][2] = nf * l;
    q[1][0] = m2;
    q[1][3] = nf * l;
    q[2][0] = m;
    q[2][4] = (nf - 1.0) * l;
    q[3][2] = m3;
    q[4][2] = m;
    let loss = [0.0, 0.0, 0.0, (nf - 1.0) * l, (nf - 2.0) * l];
    solve(&q, &loss)
}

/// RAID-50 of `n` disks in groups of `k` (each a RAID5 of width `k`): data is lost when a second
/// disk of the failed disk's group fails during its rebuild (`C/B`, i.e. MTTR). Hours.
pub fn raid50(n: usize, k: usize, d: DiskRates) -> f64 {
    assert!((2..=n).contains(&k), "group width k must be in 2..=n");
    single_failure(n, k - 1, d)
}

/// RAID+ (level 5) of `n` disks with stripes of width `k` (seed 001, Table 1): every surviving
/// disk shares the rebuild, which takes `k/(n-1)` of a RAID5 rebuild, but any second failure
/// during it loses data (some stripe holds both disks). Hours.
pub fn raidplus(n: usize, k: usize, d: DiskRates) -> f64 {
    check(n, 2, &d);
    assert!((2..=n).contains(&k), "stripe width k must be in 2..=n");
    let (l, nf, kf) = (d.lambda(), n as f64, k as f64);
    let m = d.mu() * (nf - 1.0) / kf;
    solve(&[vec![0.0, nf * l], vec![m, 0.0]], &[0.0, (nf - 1.0) * l])
}

/// Seed 001's Table 1 bound for RAID+: `MTTDL > t * (k-1)/k`, with `t` the MTTDL of RAID-50
/// (and RAID-5C) of the same disks and width. It holds to first order in `MTTR/MTTF`; the exact
/// chain of [`raidplus`] sits within a few percent of it (below it by terms of that order when
/// `n` is much larger than `k`). Hours.
pub fn raidplus_bound(n: usize, k: usize, d: DiskRates) -> f64 {
    raid50(n, k, d) * (k as f64 - 1.0) / k as f64
}

/// One row of the MTTDL table: every model at `disks` disks, hours.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MttdlRow {
    /// Number of disks.
    pub disks: usize,
    /// RAID-50 group width and RAID+ stripe width `k` used (the requested one, capped at
    /// `disks`).
    pub width: usize,
    /// RAID5.
    pub raid5_h: f64,
    /// RAID6.
    pub raid6_h: f64,
    /// RAID6 with lazy parity update.
    pub raid6_lpu_h: f64,
    /// RAID-50 in groups of `k` (the RAID+ baseline `t` of seed 001).
    pub raid50_h: f64,
    /// RAID+ with stripes of width `k` (chain above).
    pub raidplus_h: f64,
    /// Seed 001's lower bound `t * (k-1)/k`.
    pub raidplus_bound_h: f64,
}

/// Every model for each number of disks in `disks` (RAID-50/RAID+ width `k`, clamped to the
/// number of disks).
pub fn table(disks: &[usize], k: usize, d: DiskRates, b: LpuRates) -> Vec<MttdlRow> {
    disks
        .iter()
        .map(|&n| {
            let k = k.min(n);
            MttdlRow {
                disks: n,
                width: k,
                raid5_h: raid5(n, d),
                raid6_h: raid6(n, d),
                raid6_lpu_h: raid6_lpu(n, d, b),
                raid50_h: raid50(n, k, d),
                raidplus_h: raidplus(n, k, d),
                raidplus_bound_h: raidplus_bound(n, k, d),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rel(a: f64, b: f64) -> f64 {
        ((a - b) / b).abs()
    }

    const D: DiskRates = DiskRates::SEED_002;

    #[test]
    fn solver_matches_a_hand_solved_chain() {
        // Pure death chain 0 -a-> 1 -b-> lost: mean time 1/a + 1/b.
        let t = absorption_times(&[vec![0.0, 2.0], vec![0.0, 0.0]], &[0.0, 4.0]).unwrap();
        assert!((t[0] - 0.75).abs() < 1e-12 && (t[1] - 0.25).abs() < 1e-12);
        // A state with no way out never reaches loss: singular.
        assert!(absorption_times(&[vec![0.0, 1.0], vec![1.0, 0.0]], &[0.0, 0.0]).is_none());
    }

    #[test]
    fn raid5_matches_its_closed_form() {
        // Exact two-state result: ((2n-1) lambda + mu) / (n (n-1) lambda^2).
        for n in [3usize, 5, 8, 16] {
            let (l, m, nf) = (1.0 / D.mttf_h, 1.0 / D.mttr_h, n as f64);
            let exact = ((2.0 * nf - 1.0) * l + m) / (nf * (nf - 1.0) * l * l);
            assert!(rel(raid5(n, D), exact) < 1e-12, "n={n}");
            // And the textbook approximation MTTF^2 / (n (n-1) MTTR) within (2n-1) MTTR/MTTF.
            let approx = D.mttf_h * D.mttf_h / (nf * (nf - 1.0) * D.mttr_h);
            let slack = (2.0 * nf - 1.0) * D.mttr_h / D.mttf_h;
            assert!(rel(raid5(n, D), approx) <= slack * 1.01, "n={n}");
        }
    }

    #[test]
    fn raid6_matches_the_approximation() {
        // MTTF^3 / (n (n-1) (n-2) MTTR^2) when MTTR << MTTF.
        for n in [4usize, 6, 10] {
            let nf = n as f64;
            let approx = D.mttf_h.powi(3) / (nf * (nf - 1.0) * (nf - 2.0) * D.mttr_h.powi(2));
            assert!(rel(raid6(n, D), approx) < 0.02, "n={n}");
        }
    }

    #[test]
    fn raid60_matches_its_approximation_and_sits_between_raid6_widths() {
        // First order: MTTF^3 / (n (k-1) (k-2) MTTR^2): the first failure anywhere, then two
        // more in its group during the repairs.
        for (n, k) in [(16usize, 4usize), (16, 8), (24, 6)] {
            let (nf, kf) = (n as f64, k as f64);
            let approx = D.mttf_h.powi(3) / (nf * (kf - 1.0) * (kf - 2.0) * D.mttr_h.powi(2));
            let r60 = raid60(n, k, D);
            // The neglected terms are of order n MTTR / MTTF (1.9 % at n = 24).
            let slack = 2.0 * nf * D.mttr_h / D.mttf_h;
            assert!(rel(r60, approx) < slack, "n={n} k={k}: {r60} vs {approx}");
            // Better than one RAID6 over all n, worse than one RAID6 group alone.
            assert!(raid6(n, D) < r60 && r60 < raid6(k, D), "n={n} k={k}");
        }
        // One group is RAID6.
        assert!(rel(raid60(8, 8, D), raid6(8, D)) < 1e-12);
    }

    #[test]
    fn lpu_lies_between_raid5_and_raid6_and_tends_to_both() {
        let b = LpuRates::SEED_002;
        for n in 4..=16 {
            let (r5, r6, lpu) = (raid5(n, D), raid6(n, D), raid6_lpu(n, D, b));
            assert!(r5 < lpu && lpu < r6, "n={n}: {r5} {lpu} {r6}");
        }
        // Updates almost never pending: RAID6.
        let rare = LpuRates { fill_h: 1e12, ..b };
        assert!(rel(raid6_lpu(8, D, rare), raid6(8, D)) < 1e-6);
        // Always pending and the flush never ending: after the first failure it is RAID5 without
        // repair, n lambda then (n-1) lambda: 1/(n lambda) + 1/((n-1) lambda).
        let never = LpuRates {
            fill_h: 1e-12,
            drain_h: 1e12,
            flush_h: 1e15,
        };
        let expect = D.mttf_h / 8.0 + D.mttf_h / 7.0;
        assert!(rel(raid6_lpu(8, D, never), expect) < 1e-3);
        // Small-rate check: loss rate adds the RAID5-like path weighted by the pending share
        // and by the chance of a failure during the flush.
        let n = 8.0;
        let (l, m) = (1.0 / D.mttf_h, 1.0 / D.mttr_h);
        let p = b.pending_fraction();
        let loss = n * l * ((n - 1.0) * l / m * (n - 2.0) * l / m + p * (n - 1.0) * l * b.flush_h);
        assert!(rel(raid6_lpu(8, D, b), 1.0 / loss) < 0.02);
    }

    #[test]
    fn models_are_monotone() {
        let b = LpuRates::SEED_002;
        for n in 4..16 {
            assert!(raid5(n + 1, D) < raid5(n, D));
            assert!(raid6(n + 1, D) < raid6(n, D));
            assert!(raid6_lpu(n + 1, D, b) < raid6_lpu(n, D, b));
        }
        let better = DiskRates {
            mttf_h: 60_000.0,
            ..D
        };
        let faster = DiskRates { mttr_h: 12.0, ..D };
        for f in [raid5, raid6] {
            assert!(f(8, better) > f(8, D) && f(8, faster) > f(8, D));
        }
        let slow_flush = LpuRates { flush_h: 2.0, ..b };
        assert!(raid6_lpu(8, D, slow_flush) < raid6_lpu(8, D, b));
    }

    #[test]
    fn raidplus_meets_its_bound_to_first_order() {
        // Seed 001 Table 1: RAID+ MTTDL ~ t (k-1)/k with t = RAID-50's. The bound comes from the
        // first-order forms MTTF^2 / (n (n-1) MTTR k/(n-1)) and MTTF^2 / (n (k-1) MTTR); the
        // exact chains differ from it by terms of order MTTR/MTTF only.
        for (n, k) in [(59usize, 7usize), (31, 3), (12, 4)] {
            let (plus, bound) = (raidplus(n, k, D), raidplus_bound(n, k, D));
            assert!(rel(plus, bound) < 0.05, "n={n} k={k}: {plus} vs {bound}");
            let reliable = DiskRates { mttf_h: 3e8, ..D };
            let r = raidplus(n, k, reliable) / raidplus_bound(n, k, reliable);
            assert!((r - 1.0).abs() < 1e-4, "n={n} k={k}: {r}");
            // RAID-50, exactly ((n+k-1) lambda + mu) / (n (k-1) lambda^2).
            let (l, m, nf, kf) = (1.0 / D.mttf_h, 1.0 / D.mttr_h, n as f64, k as f64);
            let t = ((nf + kf - 1.0) * l + m) / (nf * (kf - 1.0) * l * l);
            assert!(rel(raid50(n, k, D), t) < 1e-12);
            // Wider pools rebuild faster: RAID+ gains on RAID5 of the same disks by (n-1)/k.
            assert!(rel(raidplus(n, k, D) / raid5(n, D), (n as f64 - 1.0) / k as f64) < 0.1);
        }
    }
}
