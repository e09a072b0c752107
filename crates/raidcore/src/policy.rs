//! Read-modify-write versus reconstruct-write, per stripe.
//!
//! A write that covers part of a parity stripe can update the parity two ways:
//!
//! - **RMW** (read-modify-write, the "small write"): read the old contents of the touched data
//!   units and the old parities, apply the difference (`P ^= old ^ new`, `Q ^= g^i (old ^ new)`).
//!   Feasible only when every touched data unit and at least one parity is available.
//! - **RCW** (reconstruct-write, the "large write"): get the old contents of every data unit the
//!   write does not fully cover (read it, or reconstruct it when lost), then encode the parities
//!   from scratch. Feasible whenever those old contents can be obtained; it is the only way to
//!   record a write to a lost data unit (its new value is then implied by the parity).
//!
//! The planner works out, for each stripe, which modes are feasible and what each would read
//! ([`StripeWrite`]); a [`ModePolicy`] picks one when both are feasible (an infeasible mode is
//! never chosen). [`WritePolicy`] provides the policies of the issue: MD's rule, RAID4S-
//! modthresh, always-RMW and a per-member cost model.
//!
//! ## Extension points
//!
//! - *Lazy (deferred) parity* (defer Q, or one RM2 group) is a decision about which parities a
//!   write updates now; it belongs next to [`ModePolicy::choose`] as a further method (a
//!   `ParityFilter`) consulted by `planner::plan_write` where it builds each stripe's parity ops
//!   (`write_parities`), together with a dirty-stripe log in the array state for the deferred
//!   parities. Nothing else in the planner needs to change: lost parities are already skipped
//!   exactly that way.
//! - *IDO redirection* (writes to a surrogate set) changes where data goes, i.e. the layout
//!   generation of a region; it plugs in as an extra generation kind in `array.rs`, not here.

use layout::{Code, Disk};

use crate::array::StripeId;
use crate::CoreError;

/// How a stripe's parity is updated.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WriteMode {
    /// Read-modify-write: delta update from the old data and old parity.
    Rmw,
    /// Reconstruct-write: encode from the whole stripe's new data.
    Rcw,
}

/// The member reads a mode needs for one stripe (each over the cycle's write range).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct ModeCost {
    /// Total unit reads.
    pub reads: usize,
    /// Reads per member (members with none are absent), sorted by member.
    pub per_member: Vec<(Disk, usize)>,
}

impl ModeCost {
    pub(crate) fn from_members(members: impl IntoIterator<Item = Disk>) -> ModeCost {
        let mut v: Vec<(Disk, usize)> = Vec::new();
        for m in members {
            match v.iter_mut().find(|(d, _)| *d == m) {
                Some((_, n)) => *n += 1,
                None => v.push((m, 1)),
            }
        }
        v.sort_unstable();
        ModeCost {
            reads: v.iter().map(|(_, n)| n).sum(),
            per_member: v,
        }
    }
}

/// What a policy sees about one stripe of a write when both modes are feasible.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StripeWrite {
    /// The stripe.
    pub stripe: StripeId,
    /// Its code (XOR or P+Q).
    pub code: Code,
    /// Data units in the stripe.
    pub data_units: usize,
    /// Data units the write touches.
    pub touched: usize,
    /// Touched data units the write covers over the whole write range.
    pub covered: usize,
    /// Parity units RMW reads (the available parities).
    pub rmw_parity_reads: usize,
    /// What RMW reads.
    pub rmw: ModeCost,
    /// What RCW reads (reconstruction sources of lost units included).
    pub rcw: ModeCost,
}

/// Chooses between RMW and RCW for a stripe on which both are feasible.
pub trait ModePolicy {
    /// The mode for this stripe.
    fn choose(&self, w: &StripeWrite) -> WriteMode;
    /// Checks the policy against the array (called once per `plan_write`).
    fn check(&self, _disks: usize) -> Result<(), CoreError> {
        Ok(())
    }
}

/// The built-in policies.
#[derive(Clone, Debug, PartialEq)]
pub enum WritePolicy {
    /// Linux MD (`handle_stripe_dirtying`): count the member reads each mode needs; RMW when
    /// `rmw < rcw`, otherwise RCW (RCW wins ties).
    Md,
    /// RAID4S-modthresh (seed 004, chapter 4, section 4.3): MD's counts, but RMW while
    /// `rmw <= rcw + 1`, so writes spanning up to half of the stripe's data units stay
    /// read-modify-writes even when RCW reads fewer units (a 2-of-4 write on RAID4S: rmw = 3,
    /// rcw = 2, RMW; MD picks RCW). The `+ 1` is the thesis's correction for the parity drive
    /// MD counts on the RMW side; for P+Q stripes it generalises to the number of parities RMW
    /// reads (`+ 2`), which keeps the "up to half the data units" rule.
    Modthresh,
    /// Always RMW when it is feasible.
    Rmw,
    /// The mode whose busiest member spends the least time reading: each member's reads times
    /// `read_cost[member]` (e.g. seconds per chunk read), maximum over members; ties go to RCW.
    /// `read_cost` has one entry per member.
    Cost {
        /// Cost of one unit read on each member.
        read_cost: Vec<f64>,
    },
}

impl ModePolicy for WritePolicy {
    fn choose(&self, w: &StripeWrite) -> WriteMode {
        let (rmw, rcw) = (w.rmw.reads, w.rcw.reads);
        let rmw_wins = match self {
            WritePolicy::Md => rmw < rcw,
            WritePolicy::Modthresh => rmw <= rcw + w.rmw_parity_reads,
            WritePolicy::Rmw => true,
            WritePolicy::Cost { read_cost } => {
                let busiest = |c: &ModeCost| {
                    c.per_member
                        .iter()
                        .map(|&(d, n)| n as f64 * read_cost[d as usize])
                        .fold(0.0, f64::max)
                };
                busiest(&w.rmw) < busiest(&w.rcw)
            }
        };
        if rmw_wins {
            WriteMode::Rmw
        } else {
            WriteMode::Rcw
        }
    }

    fn check(&self, disks: usize) -> Result<(), CoreError> {
        if let WritePolicy::Cost { read_cost } = self {
            if read_cost.len() != disks {
                return Err(CoreError::BadPolicy(format!(
                    "cost needs one read cost per member: got {}, the array has {disks}",
                    read_cost.len()
                )));
            }
            if read_cost.iter().any(|c| !c.is_finite() || *c < 0.0) {
                return Err(CoreError::BadPolicy(
                    "read costs must be finite and non-negative".into(),
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A healthy single-parity stripe of `k` data units, `t` of them fully written, with MD's
    /// counts: RMW reads the touched units and P; RCW reads the untouched ones.
    fn xor_write(k: usize, t: usize) -> StripeWrite {
        let rmw = ModeCost::from_members((0..t as Disk).chain([k as Disk]));
        let rcw = ModeCost::from_members(t as Disk..k as Disk);
        StripeWrite {
            stripe: StripeId {
                cycle: 0,
                stripe: 0,
            },
            code: Code::Xor,
            data_units: k,
            touched: t,
            covered: t,
            rmw_parity_reads: 1,
            rmw,
            rcw,
        }
    }

    #[test]
    fn md_and_modthresh_follow_the_thesis_example() {
        // Seed 004, section 4.3: 4 data drives + parity. 64 KB (1 drive): both RMW. 128 KB
        // (2 drives): rmw = 3, rcw = 2: MD RCW, modthresh RMW. 3 drives: both RCW.
        let cases = [
            (1, WriteMode::Rmw, WriteMode::Rmw),
            (2, WriteMode::Rcw, WriteMode::Rmw),
        ];
        for (t, md, mt) in cases {
            let w = xor_write(4, t);
            assert_eq!(WritePolicy::Md.choose(&w), md, "md, {t} drives");
            assert_eq!(
                WritePolicy::Modthresh.choose(&w),
                mt,
                "modthresh, {t} drives"
            );
        }
        for t in 3..=4 {
            assert_eq!(WritePolicy::Md.choose(&xor_write(4, t)), WriteMode::Rcw);
            assert_eq!(
                WritePolicy::Modthresh.choose(&xor_write(4, t)),
                WriteMode::Rcw
            );
        }
        assert_eq!(WritePolicy::Rmw.choose(&xor_write(4, 3)), WriteMode::Rmw);
        // MD breaks ties toward RCW: 5 data units, 2 written: rmw = 3 = rcw.
        assert_eq!(WritePolicy::Md.choose(&xor_write(5, 2)), WriteMode::Rcw);
    }

    #[test]
    fn cost_looks_at_the_busiest_member() {
        // One write to unit 0 of a 4+1 stripe whose parity member (4) is very slow: RMW reads
        // unit 0 and P, RCW reads units 1..3.
        let w = xor_write(4, 1);
        let slow_parity = WritePolicy::Cost {
            read_cost: vec![1.0, 1.0, 1.0, 1.0, 10.0],
        };
        assert_eq!(slow_parity.choose(&w), WriteMode::Rcw);
        let fast_parity = WritePolicy::Cost {
            read_cost: vec![1.0, 1.0, 1.0, 1.0, 0.1],
        };
        // Both modes' busiest member costs 1.0: a tie goes to RCW.
        assert_eq!(fast_parity.choose(&w), WriteMode::Rcw);
        let slow_data = WritePolicy::Cost {
            read_cost: vec![1.0, 1.0, 5.0, 1.0, 0.1],
        };
        assert_eq!(slow_data.choose(&w), WriteMode::Rmw);
        assert!(slow_data.check(5).is_ok());
        assert!(matches!(slow_data.check(4), Err(CoreError::BadPolicy(_))));
    }
}
