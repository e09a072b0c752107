//! The classic levels (RAID0/1/10/4/5/6 as Linux MD lays them out) and the grouped baselines
//! of the RAID+ paper (RAID-50 and RAID-5C).

use crate::{Code, Cycle, Disk, LayoutError, Params, Role, Scheme, Stripe, Unit};

/// Which classic level.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClassicKind {
    Raid0,
    Raid1,
    Raid10,
    Raid4,
    Raid5,
    Raid6,
}

/// A classic MD level over `disks - spares` active disks and `spares` dedicated spares (the last
/// disks).
#[derive(Debug)]
pub struct Classic {
    kind: ClassicKind,
    active: usize,
    spares: usize,
    cycle: Cycle,
}

fn unit(disk: usize, offset: u64, role: Role) -> Unit {
    Unit {
        disk: disk as Disk,
        offset,
        role,
    }
}

/// One row of MD's left-symmetric RAID5 (algorithm 2, MD's default) over disks `base..base+n`:
/// parity walks from the last disk to the first, data starts just after parity and wraps.
fn raid5_ls_row(base: usize, n: usize, row: u64) -> Stripe {
    let pd = n - 1 - (row % n as u64) as usize;
    let mut units: Vec<Unit> = (0..n - 1)
        .map(|i| unit(base + (pd + 1 + i) % n, row, Role::Data))
        .collect();
    units.push(unit(base + pd, row, Role::P));
    Stripe {
        units,
        code: Code::Xor,
    }
}

/// One row of MD's left-symmetric RAID6: P as in RAID5, Q on the disk after P, data after Q.
/// Data index i gets Q coefficient g^i, which is MD's syndrome order for this layout.
fn raid6_ls_row(n: usize, row: u64) -> Stripe {
    let pd = n - 1 - (row % n as u64) as usize;
    let qd = (pd + 1) % n;
    let mut units: Vec<Unit> = (0..n - 2)
        .map(|i| unit((pd + 2 + i) % n, row, Role::Data))
        .collect();
    units.push(unit(pd, row, Role::P));
    units.push(unit(qd, row, Role::Q));
    Stripe {
        units,
        code: Code::PQ,
    }
}

fn spares_ok(
    disks: usize,
    spares: usize,
    min_active: usize,
    what: &str,
) -> Result<usize, LayoutError> {
    if spares >= disks || disks - spares < min_active {
        return Err(LayoutError::param(
            "disks",
            format!(
                "{what} needs at least {min_active} active disks; {disks} disks with {spares} spares leaves {}",
                disks.saturating_sub(spares)
            ),
        ));
    }
    Ok(disks - spares)
}

impl Classic {
    pub fn new(kind: ClassicKind, p: &Params) -> Result<Classic, LayoutError> {
        let disks = p.need_disks()?;
        let min = match kind {
            ClassicKind::Raid0 => 1,
            ClassicKind::Raid1 | ClassicKind::Raid10 => 2,
            ClassicKind::Raid4 | ClassicKind::Raid5 => 3,
            ClassicKind::Raid6 => 4,
        };
        let name = format!("{kind:?}").to_lowercase();
        let active = spares_ok(disks, p.spares, min, &name)?;
        if kind == ClassicKind::Raid0 && p.spares > 0 {
            return Err(LayoutError::param(
                "spares",
                "raid0 has no redundancy, so spares cannot be used",
            ));
        }
        let n = active;
        let (rows, stripes) = match kind {
            ClassicKind::Raid0 => (
                1,
                vec![Stripe {
                    units: (0..n).map(|d| unit(d, 0, Role::Data)).collect(),
                    code: Code::None,
                }],
            ),
            ClassicKind::Raid1 => (
                1,
                vec![Stripe {
                    units: (0..n)
                        .map(|d| unit(d, 0, if d == 0 { Role::Data } else { Role::Mirror }))
                        .collect(),
                    code: Code::Mirror,
                }],
            ),
            ClassicKind::Raid10 => {
                // MD's "near 2" layout: chunk c's two copies occupy consecutive positions 2c,
                // 2c+1 of the disks read row by row; with an odd disk count a pair wraps onto the
                // next row, so the cycle is two rows.
                let rows = if n % 2 == 0 { 1 } else { 2 };
                let pairs = rows * n / 2;
                let pos = |p: usize| (p % n, (p / n) as u64);
                let stripes = (0..pairs)
                    .map(|c| {
                        let (d0, o0) = pos(2 * c);
                        let (d1, o1) = pos(2 * c + 1);
                        Stripe {
                            units: vec![unit(d0, o0, Role::Data), unit(d1, o1, Role::Mirror)],
                            code: Code::Mirror,
                        }
                    })
                    .collect();
                (rows as u64, stripes)
            }
            ClassicKind::Raid4 => {
                // MD's RAID4: parity on the last active disk.
                let mut units: Vec<Unit> = (0..n - 1).map(|d| unit(d, 0, Role::Data)).collect();
                units.push(unit(n - 1, 0, Role::P));
                (
                    1,
                    vec![Stripe {
                        units,
                        code: Code::Xor,
                    }],
                )
            }
            ClassicKind::Raid5 => (
                n as u64,
                (0..n as u64).map(|r| raid5_ls_row(0, n, r)).collect(),
            ),
            ClassicKind::Raid6 => (
                n as u64,
                (0..n as u64).map(|r| raid6_ls_row(n, r)).collect(),
            ),
        };
        Ok(Classic {
            kind,
            active,
            spares: p.spares,
            cycle: Cycle::from_stripes(disks, rows, stripes),
        })
    }

    pub fn kind(&self) -> ClassicKind {
        self.kind
    }
}

impl Scheme for Classic {
    fn name(&self) -> &'static str {
        match self.kind {
            ClassicKind::Raid0 => "raid0",
            ClassicKind::Raid1 => "raid1",
            ClassicKind::Raid10 => "raid10",
            ClassicKind::Raid4 => "raid4",
            ClassicKind::Raid5 => "raid5",
            ClassicKind::Raid6 => "raid6",
        }
    }
    fn cycle(&self) -> &Cycle {
        &self.cycle
    }
    fn tolerance(&self) -> usize {
        match self.kind {
            ClassicKind::Raid0 => 0,
            ClassicKind::Raid1 => self.active - 1,
            // Any one disk; some pairs survive too, recovery_plan says which.
            ClassicKind::Raid10 | ClassicKind::Raid4 | ClassicKind::Raid5 => 1,
            ClassicKind::Raid6 => 2,
        }
    }
    fn spare_disks(&self) -> Vec<Disk> {
        (self.active..self.active + self.spares)
            .map(|d| d as Disk)
            .collect()
    }
    fn describe(&self) -> String {
        format!(
            "{} over {} active disks + {} spares",
            self.name(),
            self.active,
            self.spares
        )
    }
}

/// Which grouped baseline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GroupedKind {
    /// RAID0 striped over RAID5 groups.
    Raid50,
    /// RAID5 groups concatenated.
    Raid5c,
}

/// RAID5 groups of `width` disks over the active disks, with dedicated spares, as the RAID+
/// paper's baselines (e.g. 56+3: eight 7-disk groups and 3 spares).
#[derive(Debug)]
pub struct Grouped {
    kind: GroupedKind,
    groups: usize,
    width: usize,
    active: usize,
    spares: usize,
    cycle: Cycle,
}

impl Grouped {
    pub fn new(kind: GroupedKind, p: &Params) -> Result<Grouped, LayoutError> {
        let disks = p.need_disks()?;
        let width = p.need_width()?;
        if width < 3 {
            return Err(LayoutError::param(
                "width",
                format!("a RAID5 group needs at least 3 disks, got {width}"),
            ));
        }
        let active = spares_ok(disks, p.spares, width, "raid50/raid5c")?;
        if active % width != 0 {
            return Err(LayoutError::param(
                "width",
                format!(
                    "{active} active disks ({disks} minus {} spares) do not split into groups of {width}",
                    p.spares
                ),
            ));
        }
        let groups = active / width;
        let mut stripes = Vec::new();
        match kind {
            // RAID0 over the groups: row r of group 0, row r of group 1, ...
            GroupedKind::Raid50 => {
                for r in 0..width as u64 {
                    for g in 0..groups {
                        stripes.push(raid5_ls_row(g * width, width, r));
                    }
                }
            }
            // Concatenation: all of group 0's rows, then group 1's, ... Within one cycle; the
            // engine's interleaved repetition repeats this order every cycle.
            GroupedKind::Raid5c => {
                for g in 0..groups {
                    for r in 0..width as u64 {
                        stripes.push(raid5_ls_row(g * width, width, r));
                    }
                }
            }
        }
        Ok(Grouped {
            kind,
            groups,
            width,
            active,
            spares: p.spares,
            cycle: Cycle::from_stripes(disks, width as u64, stripes),
        })
    }

    pub fn groups(&self) -> usize {
        self.groups
    }
}

impl Scheme for Grouped {
    fn name(&self) -> &'static str {
        match self.kind {
            GroupedKind::Raid50 => "raid50",
            GroupedKind::Raid5c => "raid5c",
        }
    }
    fn cycle(&self) -> &Cycle {
        &self.cycle
    }
    fn tolerance(&self) -> usize {
        1
    }
    fn spare_disks(&self) -> Vec<Disk> {
        (self.active..self.active + self.spares)
            .map(|d| d as Disk)
            .collect()
    }
    fn describe(&self) -> String {
        format!(
            "{} of {} groups x {} disks + {} spares",
            self.name(),
            self.groups,
            self.width,
            self.spares
        )
    }
}
