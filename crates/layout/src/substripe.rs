//! Sub-striping: a layout whose units are split into `r` smaller units striped across the same
//! disks, as RAID+'s prototype (seed 001, section 6) fills a 2 MB allocation unit per disk with
//! 64 KiB stripe units before it moves to the next stripe's disks.
//!
//! [`Substriped`] wraps any scheme whose logical data order is its stripes' data units in
//! stripe order (every scheme but RM2): stripe `s` of the inner cycle becomes `r` stripes
//! `(s, 0) .. (s, r-1)` on the same disks, with the same roles and code, sub-stripe `j` at row
//! `o * r + j` where the inner unit sits at row `o`. Logical data follows: all of stripe `s`'s
//! `r` sub-stripes, then stripe `s + 1`'s. With the chunk `r` times smaller, the inner layout's
//! placement of whole units is unchanged (a unit of the inner layout is `r` consecutive rows of
//! this one), and a request smaller than an inner unit spreads over the inner stripe's disks.
//! Failures relocate exactly as the inner scheme relocates its units, row block by row block.

use std::sync::Arc;

use crate::{Cycle, Disk, LayoutError, Loc, Relocation, Scheme, Stripe, Unit};

/// `inner` with every unit split into `r` sub-units (see the module docs).
#[derive(Debug)]
pub struct Substriped {
    inner: Arc<dyn Scheme>,
    r: u64,
    cycle: Cycle,
}

impl Substriped {
    /// Splits every unit of `inner` into `r >= 1` sub-units. Fails for a scheme whose data order
    /// is not its stripes' (RM2's data units belong to two stripes).
    pub fn new(inner: Arc<dyn Scheme>, r: usize) -> Result<Substriped, LayoutError> {
        if r == 0 {
            return Err(LayoutError::param("substripes", "must be at least 1"));
        }
        let c = inner.cycle();
        let stripe_order: Vec<Loc> = c
            .stripes
            .iter()
            .flat_map(|s| s.data_units().map(Unit::loc))
            .collect();
        if stripe_order != c.data {
            return Err(LayoutError::param(
                "substripes",
                format!(
                    "{} does not store data in stripe order; it cannot be sub-striped",
                    inner.name()
                ),
            ));
        }
        let r64 = r as u64;
        let mut stripes = Vec::with_capacity(c.stripes.len() * r);
        for s in &c.stripes {
            for j in 0..r64 {
                stripes.push(Stripe {
                    code: s.code,
                    units: s
                        .units
                        .iter()
                        .map(|u| Unit {
                            disk: u.disk,
                            offset: u.offset * r64 + j,
                            role: u.role,
                        })
                        .collect(),
                });
            }
        }
        let cycle = Cycle::from_stripes(c.disks, c.rows * r64, stripes);
        Ok(Substriped {
            inner,
            r: r64,
            cycle,
        })
    }

    /// The wrapped scheme.
    pub fn inner(&self) -> &Arc<dyn Scheme> {
        &self.inner
    }

    /// Sub-units per inner unit.
    pub fn substripes(&self) -> usize {
        self.r as usize
    }
}

impl Scheme for Substriped {
    fn name(&self) -> &'static str {
        self.inner.name()
    }
    fn cycle(&self) -> &Cycle {
        &self.cycle
    }
    fn tolerance(&self) -> usize {
        self.inner.tolerance()
    }
    fn spare_disks(&self) -> Vec<Disk> {
        self.inner.spare_disks()
    }
    fn relocate(&self, failed: &[Disk]) -> Result<Relocation, LayoutError> {
        let inner = self.inner.relocate(failed)?;
        let mut moves =
            Relocation::with_capacity_and_hasher(inner.len() * self.r as usize, Default::default());
        for (from, to) in inner {
            for j in 0..self.r {
                moves.insert(
                    Loc {
                        disk: from.disk,
                        offset: from.offset * self.r + j,
                    },
                    Loc {
                        disk: to.disk,
                        offset: to.offset * self.r + j,
                    },
                );
            }
        }
        Ok(moves)
    }
    fn extra_json(&self) -> Option<String> {
        self.inner.extra_json()
    }
    fn describe(&self) -> String {
        format!(
            "{}; each unit split into {} sub-units striped across its stripe's disks",
            self.inner.describe(),
            self.r
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Role;

    /// Roles of the units of `s`.
    fn roles(s: &Stripe) -> Vec<Role> {
        s.units.iter().map(|u| u.role).collect()
    }
    use crate::{build, recovery_plan, Params, SchemeKind};

    fn raidplus(n: usize, k: usize) -> Arc<dyn Scheme> {
        build(
            SchemeKind::RaidPlus,
            &Params {
                disks: Some(n),
                width: Some(k),
                ..Params::default()
            },
        )
        .unwrap()
    }

    #[test]
    fn sub_stripes_keep_disks_roles_and_data_order() {
        let inner = raidplus(5, 3);
        let s = Substriped::new(inner.clone(), 4).unwrap();
        let (a, b) = (inner.cycle(), s.cycle());
        assert_eq!(b.rows, a.rows * 4);
        assert_eq!(b.stripes.len(), a.stripes.len() * 4);
        for (i, st) in a.stripes.iter().enumerate() {
            for j in 0..4 {
                let sub = &b.stripes[i * 4 + j];
                assert_eq!(roles(sub), roles(st));
                for (u, v) in st.units.iter().zip(&sub.units) {
                    assert_eq!((v.disk, v.offset), (u.disk, u.offset * 4 + j as u64));
                }
            }
        }
        // Logical data: r sub-stripes of a stripe, then the next stripe.
        let first: Vec<Disk> = b.data[..8].iter().map(|l| l.disk).collect();
        let inner_first: Vec<Disk> = a.data[..2].iter().map(|l| l.disk).collect();
        assert_eq!(
            first,
            [
                inner_first.clone(),
                inner_first.clone(),
                inner_first.clone(),
                inner_first
            ]
            .concat()
        );
    }

    #[test]
    fn failures_relocate_like_the_inner_scheme_and_recover() {
        for (n, k) in [(5usize, 3usize), (7, 4)] {
            let inner = raidplus(n, k);
            let s = Substriped::new(inner.clone(), 3).unwrap();
            for f in 0..n as Disk {
                let moves = s.relocate(&[f]).unwrap();
                let im = inner.relocate(&[f]).unwrap();
                assert_eq!(moves.len(), im.len() * 3);
                for (from, to) in &im {
                    for j in 0..3 {
                        let got = moves[&Loc {
                            disk: from.disk,
                            offset: from.offset * 3 + j,
                        }];
                        assert_eq!(
                            got,
                            Loc {
                                disk: to.disk,
                                offset: to.offset * 3 + j
                            }
                        );
                    }
                }
                // The generic recovery planner rebuilds every lost unit of the sub-striped cycle.
                let plan = recovery_plan(&s, &[f]).unwrap();
                let lost = s
                    .cycle()
                    .stripes
                    .iter()
                    .flat_map(|st| &st.units)
                    .filter(|u| u.disk == f)
                    .count();
                assert_eq!(plan.repairs.len(), lost);
            }
        }
    }

    #[test]
    fn rm2_and_zero_are_refused() {
        let rm2 = build(
            SchemeKind::Rm2,
            &Params {
                disks: Some(5),
                ..Params::default()
            },
        )
        .unwrap();
        assert!(Substriped::new(rm2, 2)
            .unwrap_err()
            .to_string()
            .contains("stripe order"));
        assert!(Substriped::new(raidplus(5, 3), 0).is_err());
    }
}
