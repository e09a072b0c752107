//! The classic levels (RAID0/1/10/4/5/6 as Linux MD lays them out, in every MD layout:
//! [`crate::md`]) and the grouped baselines of the RAID+ paper (RAID-50 and RAID-5C).

use crate::md::{parity_row, MdLayout, Parity, Raid10};
use crate::{Code, Cycle, Disk, LayoutError, Loc, Params, Role, Scheme, Stripe, Unit};

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
    md: MdLayout,
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
        let md = match (kind, p.md_layout.as_deref()) {
            (ClassicKind::Raid0, None) => MdLayout::Raid0,
            (ClassicKind::Raid1, None) => MdLayout::Raid1,
            (ClassicKind::Raid4, None) => MdLayout::Raid4,
            (ClassicKind::Raid5, l) => {
                MdLayout::Raid5(l.map_or(Ok(Parity::LeftSymmetric), |l| Parity::parse(5, l))?)
            }
            (ClassicKind::Raid6, l) => {
                MdLayout::Raid6(l.map_or(Ok(Parity::LeftSymmetric), |l| Parity::parse(6, l))?)
            }
            (ClassicKind::Raid10, l) => MdLayout::Raid10(Raid10::parse(l.unwrap_or("n2"), n)?),
            (_, Some(l)) => {
                return Err(LayoutError::param(
                    "layout",
                    format!("{name} has one layout; '{l}' applies to raid5, raid6 and raid10"),
                ))
            }
        };
        Ok(Classic {
            kind,
            md,
            active,
            spares: p.spares,
            cycle: md.cycle(n, p.spares),
        })
    }

    /// The array as Linux MD lays it out (level and layout).
    pub fn md_layout(&self) -> MdLayout {
        self.md
    }

    pub fn kind(&self) -> ClassicKind {
        self.kind
    }
}

impl Scheme for Classic {
    fn relocation_keeps_offsets(&self) -> bool {
        true
    }
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
        // RAID10: any copies - 1 members (each chunk's copies are on distinct members); some
        // larger sets survive too, recovery_plan says which.
        self.md.tolerance(self.active)
    }
    fn spare_disks(&self) -> Vec<Disk> {
        (self.active..self.active + self.spares)
            .map(|d| d as Disk)
            .collect()
    }
    fn describe(&self) -> String {
        format!(
            "{}{} over {} active disks + {} spares",
            self.name(),
            self.md
                .name()
                .map(|l| format!(" ({l})"))
                .unwrap_or_default(),
            self.active,
            self.spares
        )
    }
}

/// One row of MD's left-symmetric RAID6 over disks `base..base+n`: the stripe lists its data
/// units in syndrome order (Q's coefficient order, as `Code::PQ` reads them) and the row's
/// data in logical order, as `mdadm --level=6` over those disks would.
fn raid6_ls_row(base: usize, n: usize, row: u64) -> (Stripe, Vec<Loc>) {
    let r = parity_row(Parity::LeftSymmetric, true, n, row);
    let q = r.q.expect("a RAID6 row has Q");
    let mut units: Vec<Unit> = r
        .syndrome
        .iter()
        .map(|&d| unit(base + d, row, Role::Data))
        .collect();
    units.push(unit(base + r.p, row, Role::P));
    units.push(unit(base + q, row, Role::Q));
    let data = r
        .data
        .iter()
        .map(|&d| Loc {
            disk: (base + d) as Disk,
            offset: row,
        })
        .collect();
    (
        Stripe {
            units,
            code: Code::PQ,
        },
        data,
    )
}

/// Which grouped baseline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GroupedKind {
    /// RAID0 striped over RAID5 groups.
    Raid50,
    /// RAID5 groups concatenated.
    Raid5c,
    /// RAID0 striped over RAID6 groups (any two members of each group may fail).
    Raid60,
}

impl GroupedKind {
    /// The fewest members one group may have.
    fn group_min(self) -> usize {
        match self {
            GroupedKind::Raid50 | GroupedKind::Raid5c => 3,
            GroupedKind::Raid60 => 4,
        }
    }
}

/// RAID5 (RAID6 for RAID-60) groups of `width` disks over the active disks, with dedicated
/// spares, as the RAID+ paper's baselines (e.g. 56+3: eight 7-disk groups and 3 spares).
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
        let min = kind.group_min();
        let level = if kind == GroupedKind::Raid60 {
            "RAID6"
        } else {
            "RAID5"
        };
        if width < min {
            return Err(LayoutError::param(
                "width",
                format!("a {level} group needs at least {min} disks, got {width}"),
            ));
        }
        let active = spares_ok(disks, p.spares, width, "raid50/raid5c/raid60")?;
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
        let mut data = Vec::new();
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
            // RAID0 over RAID6 groups, as RAID-50 over RAID5 groups.
            GroupedKind::Raid60 => {
                for r in 0..width as u64 {
                    for g in 0..groups {
                        let (s, d) = raid6_ls_row(g * width, width, r);
                        stripes.push(s);
                        data.extend(d);
                    }
                }
            }
        }
        let mut cycle = Cycle::from_stripes(disks, width as u64, stripes);
        if !data.is_empty() {
            cycle.data = data;
            cycle.assert_well_formed();
        }
        Ok(Grouped {
            kind,
            groups,
            width,
            active,
            spares: p.spares,
            cycle,
        })
    }

    pub fn groups(&self) -> usize {
        self.groups
    }
}

impl Scheme for Grouped {
    fn relocation_keeps_offsets(&self) -> bool {
        true
    }
    fn name(&self) -> &'static str {
        match self.kind {
            GroupedKind::Raid50 => "raid50",
            GroupedKind::Raid5c => "raid5c",
            GroupedKind::Raid60 => "raid60",
        }
    }
    fn cycle(&self) -> &Cycle {
        &self.cycle
    }
    fn tolerance(&self) -> usize {
        match self.kind {
            GroupedKind::Raid50 | GroupedKind::Raid5c => 1,
            GroupedKind::Raid60 => 2,
        }
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
