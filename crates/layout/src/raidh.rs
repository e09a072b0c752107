//! RAIDH: weighted parity placement over heterogeneous devices (seed 004, chapter 6).
//!
//! ## Parity cycle
//!
//! Every device `d` has a parity weight `w_d >= 0`. One parity cycle has `W = sum(w)` stripes and
//! device `d` holds the parity of exactly `w_d` of them. The parity device of each stripe comes
//! from a smooth weighted round-robin: keep a running value per device, starting at 0; for each
//! stripe first add every device's weight to its value, then pick the device with the largest
//! value (the lowest index on ties) and subtract `W` from it.
//!
//! The thesis's Java listing (Figure 6.1) picks the maximum *before* adding the weights, which
//! puts the first parity on device 0 whatever its weight (a weight-0 device included). The
//! thesis's own examples only come out when the weights are added first, and the examples are
//! the specification: `{0,0,0,0,5}` gives `{4,4,4,4,4}` (RAID4), `{1,1,1,1,1}` gives
//! `{0,1,2,3,4}` (RAID5) and `{0,0,1,1,2}` gives `{4,2,3,4}` (section 6.2, the array of
//! Table 6.1).
//!
//! Each device's value stays within `(-W, W]`, and after the whole cycle every value is back at
//! 0 with device `d` chosen exactly `w_d` times, so the cycle repeats exactly.
//!
//! ## Data placement
//!
//! Stripe `i` of the cycle is row `i`. Its parity is on `parities[i]`; its data units are on the
//! other devices in ascending device order, as the kernel listing (Figure 6.4) computes them
//! (the data index is incremented past the parity device), so device order, not parity position,
//! fixes the data order. The code is single XOR parity; one failure is tolerated.
//!
//! Special cases: RAID4 is weights `{0, ..., 0, w}` (parity always on the last device), RAID5-like
//! rotation is `{1, ..., 1}` (parity on device `i` in stripe `i`; the data order is ascending, like
//! MD's left-asymmetric layout rather than its default left-symmetric one), and RAID4S is
//! RAIDH with all the weight on the fast device ([`RaidH::raid4s`]).
//!
//! RAIDE (chapter 5) changes no mapping: it is RAID5 with the faster devices placed at the array
//! edges (device 0 and the last device), which take the extra reads of unaligned small writes.
//! In this crate it is a choice of which physical devices are disks `0` and `n-1`, not a scheme.

use std::fmt::Write as _;

use crate::{Code, Cycle, Disk, LayoutError, Params, Role, Scheme, Stripe, Unit};

/// Largest accepted weight sum (stripes per cycle), to keep cycles a reasonable size.
pub const MAX_WEIGHT_SUM: u64 = 1 << 16;

/// The parity device of each stripe of one cycle, from per-device weights: add the weights,
/// then take the argmax (lowest index on ties) and subtract the weight sum from it.
///
/// Panics if every weight is zero.
pub fn parity_cycle(weights: &[u32]) -> Vec<usize> {
    let sum: i64 = weights.iter().map(|&w| w as i64).sum();
    assert!(sum > 0, "at least one weight must be positive");
    let mut value = vec![0i64; weights.len()];
    let mut parities = Vec::with_capacity(sum as usize);
    for _ in 0..sum {
        for (v, &w) in value.iter_mut().zip(weights) {
            *v += w as i64;
        }
        let mut best = 0;
        for d in 1..value.len() {
            if value[d] > value[best] {
                best = d;
            }
        }
        parities.push(best);
        value[best] -= sum;
    }
    debug_assert!(value.iter().all(|&v| v == 0));
    parities
}

/// RAIDH over the devices named by `weights`, plus dedicated spares (the last disks).
#[derive(Debug)]
pub struct RaidH {
    weights: Vec<u32>,
    parities: Vec<usize>,
    spares: usize,
    cycle: Cycle,
}

impl RaidH {
    /// Builds RAIDH from `--weights` (one per active device), with `--disks` optional (when given,
    /// it must equal the number of weights plus `--spares`).
    pub fn new(p: &Params) -> Result<RaidH, LayoutError> {
        let weights = p.weights.as_ref().ok_or_else(|| {
            LayoutError::param("weights", "raidh needs one parity weight per device")
        })?;
        if let Some(disks) = p.disks {
            if p.spares >= disks {
                return Err(LayoutError::param(
                    "spares",
                    format!("{} spares leave no active disk out of {disks}", p.spares),
                ));
            }
            if weights.len() != disks - p.spares {
                return Err(LayoutError::param(
                    "weights",
                    format!(
                        "{} weights given for {} active devices ({disks} disks, {} spares); give one weight per active device",
                        weights.len(),
                        disks - p.spares,
                        p.spares
                    ),
                ));
            }
        }
        Self::with_weights(weights, p.spares)
    }

    /// Builds RAIDH from per-device weights and a number of dedicated spares.
    pub fn with_weights(weights: &[u32], spares: usize) -> Result<RaidH, LayoutError> {
        if weights.len() < 2 {
            return Err(LayoutError::param(
                "weights",
                format!(
                    "raidh needs at least 2 devices (one data + parity), got {} weight(s)",
                    weights.len()
                ),
            ));
        }
        let sum: u64 = weights.iter().map(|&w| w as u64).sum();
        if sum == 0 {
            return Err(LayoutError::param(
                "weights",
                "all weights are zero: at least one device must hold parity",
            ));
        }
        if sum > MAX_WEIGHT_SUM {
            return Err(LayoutError::param(
                "weights",
                format!(
                    "weights sum to {sum}, one cycle would have that many stripes; keep the sum at most {MAX_WEIGHT_SUM} (scale the weights down)"
                ),
            ));
        }
        let n = weights.len();
        let parities = parity_cycle(weights);
        let stripes: Vec<Stripe> = parities
            .iter()
            .enumerate()
            .map(|(row, &pd)| {
                let unit = |d: usize, role: Role| Unit {
                    disk: d as Disk,
                    offset: row as u64,
                    role,
                };
                let mut units: Vec<Unit> = (0..n)
                    .filter(|&d| d != pd)
                    .map(|d| unit(d, Role::Data))
                    .collect();
                units.push(unit(pd, Role::P));
                Stripe {
                    units,
                    code: Code::Xor,
                }
            })
            .collect();
        let cycle = Cycle::from_stripes(n + spares, sum, stripes);
        for (d, &w) in weights.iter().enumerate() {
            let count = parities.iter().filter(|&&p| p == d).count();
            assert_eq!(count as u64, w as u64, "device {d} parity count != weight");
        }
        Ok(RaidH {
            weights: weights.to_vec(),
            parities,
            spares,
            cycle,
        })
    }

    /// RAID4S: `disks` devices with all parity on the fast device `fast` (weight 1 there, 0
    /// elsewhere, so the cycle is one stripe).
    pub fn raid4s(disks: usize, fast: usize, spares: usize) -> Result<RaidH, LayoutError> {
        if fast >= disks {
            return Err(LayoutError::param(
                "weights",
                format!("fast device {fast} is not one of the {disks} devices"),
            ));
        }
        let mut w = vec![0u32; disks];
        w[fast] = 1;
        Self::with_weights(&w, spares)
    }

    /// The per-device weights.
    pub fn weights(&self) -> &[u32] {
        &self.weights
    }
    /// The parity device of each stripe of the cycle.
    pub fn parities(&self) -> &[usize] {
        &self.parities
    }
}

impl Scheme for RaidH {
    fn relocation_keeps_offsets(&self) -> bool {
        true
    }
    fn name(&self) -> &'static str {
        "raidh"
    }
    fn cycle(&self) -> &Cycle {
        &self.cycle
    }
    fn tolerance(&self) -> usize {
        1
    }
    fn spare_disks(&self) -> Vec<Disk> {
        let n = self.weights.len();
        (n..n + self.spares).map(|d| d as Disk).collect()
    }
    fn extra_json(&self) -> Option<String> {
        let list = |v: &mut String, xs: &mut dyn Iterator<Item = u64>| {
            for (i, x) in xs.enumerate() {
                if i > 0 {
                    v.push_str(", ");
                }
                let _ = write!(v, "{x}");
            }
        };
        let mut s = String::from("\"weights\": [");
        list(&mut s, &mut self.weights.iter().map(|&w| w as u64));
        s.push_str("], \"parities\": [");
        list(&mut s, &mut self.parities.iter().map(|&p| p as u64));
        s.push(']');
        Some(s)
    }
    fn describe(&self) -> String {
        let w: Vec<String> = self.weights.iter().map(|w| w.to_string()).collect();
        format!(
            "raidh over {} devices, weights {{{}}}, {} stripes per cycle + {} spares",
            self.weights.len(),
            w.join(","),
            self.parities.len(),
            self.spares
        )
    }
}
