//! Linux MD's layouts: where MD puts every chunk, parity and copy of RAID0/1/4/5/6/10, for every
//! layout value mdadm 4.x writes, as raidforge [`Cycle`]s.
//!
//! - RAID5 and RAID6 (`drivers/md/raid5.c`, `raid5_compute_sector`): stripe (member row) `s`
//!   holds logical chunks `s * data_disks ..`; the layout value says where P (and Q) sit in row
//!   `s` and in which order the data chunks follow ([`Parity`]). RAID4 is parity on the last
//!   member. RAID6's Q is the syndrome of the data chunks in MD's *syndrome order*: starting at
//!   the member after Q (member 0 when Q is the last) and going up, wrapping, skipping P and Q;
//!   the `i`-th chunk in that order has coefficient `g^i`. For the symmetric layouts that is the
//!   logical order; for the others it is not, so a stripe lists its data units in syndrome
//!   order and the cycle's data list gives the logical order.
//! - RAID10 (`drivers/md/raid10.c`, `__raid10_find_phys`): the layout word is near copies
//!   (bits 0-7), far copies (8-15), offset (bit 16) and the far-set version (17-18). Logical chunk
//!   `c` is placed at position `c * near` counted row by row over the members; its near copies
//!   take the next positions; every such copy has `far - 1` far copies, each `near` members
//!   further (within its far set) and `stride` rows further, where `stride` is one row for the
//!   offset layout and `1/far` of the used member rows otherwise ([`Raid10::far_stride_rows`]).
//!   The far layout therefore is not a short repeating cycle on the member: raidforge's cycle
//!   keeps the far copies in rows of its own (section `f` of the cycle = the `f`-th far copy)
//!   and [`MdGeometry::physical_row`] maps them to the member.
//! - RAID0 with members of equal size: chunk `c` on member `c % n`, row `c / n`. RAID1: every
//!   member a copy.
//!
//! [`MdGeometry`] adds the member size: how many rows the array uses, its size, and the row
//! map. Refused: the DDF RAID6 layouts (8, 9, 10: Q coefficients with gaps), and RAID10 words
//! mdadm never writes (near copies combined with far or offset copies, far sets): the kernel
//! accepts them, but where a near copy wraps to the next row it moves it by one member row,
//! onto another copy's row.

use crate::{Code, Cycle, Disk, LayoutError, Loc, Role, Stripe, Unit};

/// A RAID5/RAID6 parity layout (MD's `ALGORITHM_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Parity {
    /// 0: parity walks from the last member down; data in member order.
    LeftAsymmetric,
    /// 1: parity walks from the first member up; data in member order.
    RightAsymmetric,
    /// 2 (MD's default): parity walks down; data starts after parity and wraps.
    LeftSymmetric,
    /// 3: parity walks up; data starts after parity and wraps.
    RightSymmetric,
    /// 4: parity on the first member(s).
    ParityFirst,
    /// 5: parity on the last member(s) (RAID4's placement).
    ParityLast,
    /// 16 (RAID6): RAID5 left-asymmetric over all but the last member, Q on the last.
    LeftAsymmetric6,
    /// 17 (RAID6): RAID5 right-asymmetric, Q on the last member.
    RightAsymmetric6,
    /// 18 (RAID6): RAID5 left-symmetric, Q on the last member.
    LeftSymmetric6,
    /// 19 (RAID6): RAID5 right-symmetric, Q on the last member.
    RightSymmetric6,
    /// 20 (RAID6): RAID5 parity-first, Q on the last member.
    ParityFirst6,
}

impl Parity {
    /// Every layout with MD's number and mdadm's name.
    pub const ALL: [(Parity, u32, &'static str); 11] = [
        (Parity::LeftAsymmetric, 0, "left-asymmetric"),
        (Parity::RightAsymmetric, 1, "right-asymmetric"),
        (Parity::LeftSymmetric, 2, "left-symmetric"),
        (Parity::RightSymmetric, 3, "right-symmetric"),
        (Parity::ParityFirst, 4, "parity-first"),
        (Parity::ParityLast, 5, "parity-last"),
        (Parity::LeftAsymmetric6, 16, "left-asymmetric-6"),
        (Parity::RightAsymmetric6, 17, "right-asymmetric-6"),
        (Parity::LeftSymmetric6, 18, "left-symmetric-6"),
        (Parity::RightSymmetric6, 19, "right-symmetric-6"),
        (Parity::ParityFirst6, 20, "parity-first-6"),
    ];

    /// MD's layout number.
    pub fn md_value(self) -> u32 {
        Self::ALL.iter().find(|e| e.0 == self).expect("listed").1
    }

    /// mdadm's name.
    pub fn name(self) -> &'static str {
        Self::ALL.iter().find(|e| e.0 == self).expect("listed").2
    }

    /// From MD's number for `level` (5 or 6); the `-6` layouts exist for RAID6 only.
    pub fn from_md(level: u8, v: u32) -> Result<Parity, LayoutError> {
        let p = Self::ALL.iter().find(|e| e.1 == v).map(|e| e.0);
        match (p, level) {
            (Some(p), 6) => Ok(p),
            (Some(p), 5) if !p.is_raid6_only() => Ok(p),
            _ if level == 6 && (8..=10).contains(&v) => Err(LayoutError::param(
                "layout",
                format!("RAID6 layout {v} is one of the DDF layouts, which raidforge does not implement"),
            )),
            _ => Err(LayoutError::param(
                "layout",
                format!("{v} is not a RAID{level} layout MD defines"),
            )),
        }
    }

    /// From mdadm's name or short name (`la`, `ra`, `ls`, `rs`), for `level` (5 or 6).
    pub fn parse(level: u8, s: &str) -> Result<Parity, LayoutError> {
        let long = match s {
            "la" => "left-asymmetric",
            "ra" => "right-asymmetric",
            "ls" => "left-symmetric",
            "rs" => "right-symmetric",
            other => other,
        };
        let p = Self::ALL.iter().find(|e| e.2 == long).map(|e| e.0);
        match p {
            Some(p) if level == 6 || !p.is_raid6_only() => Ok(p),
            _ => {
                let names: Vec<&str> = Self::ALL
                    .iter()
                    .filter(|e| level == 6 || !e.0.is_raid6_only())
                    .map(|e| e.2)
                    .collect();
                Err(LayoutError::param(
                    "layout",
                    format!(
                        "unknown RAID{level} layout '{s}'; choose one of {}",
                        names.join(" ")
                    ),
                ))
            }
        }
    }

    fn is_raid6_only(self) -> bool {
        self.md_value() >= 16
    }

    /// Rows after which the layout repeats on `n` members.
    pub fn period(self, n: usize) -> usize {
        match self {
            Parity::ParityFirst | Parity::ParityLast | Parity::ParityFirst6 => 1,
            Parity::LeftAsymmetric6
            | Parity::RightAsymmetric6
            | Parity::LeftSymmetric6
            | Parity::RightSymmetric6 => n - 1,
            _ => n,
        }
    }
}

/// One row (stripe) of a RAID4/5/6 layout: where P and Q are, the data members in logical order,
/// and the data members in syndrome order (Q's coefficient order).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParityRow {
    /// The P member.
    pub p: usize,
    /// The Q member (RAID6).
    pub q: Option<usize>,
    /// Data members, logical chunk order.
    pub data: Vec<usize>,
    /// Data members in syndrome order: the `i`-th has Q coefficient `g^i`.
    pub syndrome: Vec<usize>,
}

/// Row `s` of `parity` over `n` members, with Q when `raid6`.
pub fn parity_row(parity: Parity, raid6: bool, n: usize, s: u64) -> ParityRow {
    use Parity::*;
    let rot = |m: usize| (s % m as u64) as usize;
    // The members the RAID5 part (P and data) rotates over: all, or all but Q's last one.
    let six = matches!(
        parity,
        LeftAsymmetric6 | RightAsymmetric6 | LeftSymmetric6 | RightSymmetric6 | ParityFirst6
    );
    let m = if six { n - 1 } else { n };
    let (p, q) = match parity {
        LeftAsymmetric | LeftSymmetric | LeftAsymmetric6 | LeftSymmetric6 => (m - 1 - rot(m), None),
        RightAsymmetric | RightSymmetric | RightAsymmetric6 | RightSymmetric6 => (rot(m), None),
        ParityFirst | ParityFirst6 => (0, None),
        ParityLast => (if raid6 { n - 2 } else { n - 1 }, None),
    };
    let q = if !raid6 {
        q
    } else if six {
        Some(n - 1)
    } else {
        match parity {
            ParityFirst => Some(1),
            ParityLast => Some(n - 1),
            _ => Some((p + 1) % n),
        }
    };
    let is_parity = |d: usize| d == p || Some(d) == q;
    let data: Vec<usize> = match parity {
        // Data after the parity, wrapping (within the RAID5 part).
        LeftSymmetric | RightSymmetric | LeftSymmetric6 | RightSymmetric6 => {
            let first = if six || !raid6 { p + 1 } else { p + 2 };
            (0..m)
                .map(|i| (first + i) % m)
                .filter(|&d| !is_parity(d))
                .take(n - 1 - usize::from(raid6))
                .collect()
        }
        // Data in member order, parity skipped.
        _ => (0..n).filter(|&d| !is_parity(d)).collect(),
    };
    let syndrome = match q {
        None => data.clone(),
        Some(q) => {
            let d0 = (q + 1) % n;
            (0..n)
                .map(|i| (d0 + i) % n)
                .filter(|&d| !is_parity(d))
                .collect()
        }
    };
    ParityRow {
        p,
        q,
        data,
        syndrome,
    }
}

/// A RAID10 layout word.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Raid10 {
    /// Near copies (copies on consecutive positions of a row).
    pub near: usize,
    /// Far copies.
    pub far: usize,
    /// Far copies one row apart instead of `1/far` of the member apart.
    pub offset: bool,
    /// Far-set version (bits 17-18): 0, the far copies rotate over all members (the only one
    /// mdadm writes and raidforge implements; 1 and 2 rotate within sets of members).
    pub version: u8,
}

impl Raid10 {
    /// From MD's layout word, checked against `n` members as the kernel's `setup_geo` does.
    pub fn from_md(v: u32, n: usize) -> Result<Raid10, LayoutError> {
        let r = Raid10 {
            near: (v & 0xff) as usize,
            far: ((v >> 8) & 0xff) as usize,
            offset: v & (1 << 16) != 0,
            version: (v >> 17) as u8,
        };
        if v >> 19 != 0 || r.version == 3 {
            return Err(LayoutError::param(
                "layout",
                format!("{v:#x} is not a RAID10 layout MD defines"),
            ));
        }
        r.check(n)?;
        Ok(r)
    }

    /// MD's layout word.
    pub fn md_value(self) -> u32 {
        self.near as u32
            | (self.far as u32) << 8
            | u32::from(self.offset) << 16
            | u32::from(self.version) << 17
    }

    /// mdadm's short form: "n2", "f2", "o3" (a combination, which [`Raid10::from_md`] refuses,
    /// would read "n2f2"; a far-set version 2 word ends in "+sets").
    pub fn name(self) -> String {
        let mut s = String::new();
        if self.near > 1 || self.far == 1 {
            s += &format!("n{}", self.near);
        }
        if self.far > 1 {
            s += &format!("{}{}", if self.offset { 'o' } else { 'f' }, self.far);
        }
        if self.version == 2 {
            s += "+sets";
        }
        s
    }

    /// Parses mdadm's `nN`, `fN`, `oN` (checked like [`Raid10::from_md`]).
    pub fn parse(s: &str, n: usize) -> Result<Raid10, LayoutError> {
        let bad = || {
            LayoutError::param(
                "layout",
                format!("unknown RAID10 layout '{s}'; use nN, fN or oN (N copies), e.g. n2, f2, o3, or n2f2"),
            )
        };
        let (body, version) = match s.strip_suffix("+sets") {
            Some(b) => (b, 2),
            None => (s, 0),
        };
        let mut r = Raid10 {
            near: 1,
            far: 1,
            offset: false,
            version,
        };
        let mut rest = body;
        let mut seen_near = false;
        let mut seen_far = false;
        while !rest.is_empty() {
            let kind = rest.chars().next().ok_or_else(bad)?;
            let digits: String = rest[1..].chars().take_while(char::is_ascii_digit).collect();
            let count: usize = digits.parse().map_err(|_| bad())?;
            match kind {
                'n' if !seen_near => {
                    r.near = count;
                    seen_near = true;
                }
                'f' | 'o' if !seen_far => {
                    r.far = count;
                    r.offset = kind == 'o';
                    seen_far = true;
                }
                _ => return Err(bad()),
            }
            rest = &rest[1 + digits.len()..];
        }
        if !seen_near && !seen_far {
            return Err(bad());
        }
        r.check(n)?;
        Ok(r)
    }

    /// Copies of every chunk.
    pub fn copies(self) -> usize {
        self.near * self.far
    }

    fn check(self, n: usize) -> Result<(), LayoutError> {
        if self.near == 0 || self.far == 0 {
            return Err(LayoutError::param(
                "layout",
                format!(
                    "RAID10 needs at least one near and one far copy (layout {})",
                    self.md_value()
                ),
            ));
        }
        if self.near > 1 && self.far > 1 {
            // The kernel accepts such words, but mdadm never writes them, and where a near copy
            // wraps to the next row the kernel moves it by one member row, onto a far or
            // offset copy's row: some of these arrays overlap themselves.
            return Err(LayoutError::param(
                "layout",
                format!(
                    "RAID10 layout {:#x} combines near and far/offset copies, which raidforge does not implement (mdadm creates nN, fN or oN)",
                    self.md_value()
                ),
            ));
        }
        if self.version != 0 {
            return Err(LayoutError::param(
                "layout",
                format!(
                    "RAID10 layout {:#x} uses far sets (version {}), which raidforge does not implement (mdadm creates version 0)",
                    self.md_value(),
                    self.version
                ),
            ));
        }
        if self.copies() < 2 || self.copies() > n {
            return Err(LayoutError::param(
                "layout",
                format!(
                    "RAID10 layout {} keeps {} copies of every chunk; it needs 2..={n} (the member count)",
                    self.name(),
                    self.copies()
                ),
            ));
        }
        Ok(())
    }

    /// The member holding far copy `f` of the near copy on member `d`: `near` members further
    /// per far copy, wrapping (far-set version 0: one set of all members).
    fn far_member(self, n: usize, d: usize, f: usize) -> usize {
        (d + f * self.near) % n
    }

    /// Rows of section 0 (the near layout) in one cycle: until positions `chunk * near` come
    /// back to member 0 at a row start.
    fn near_rows(self, n: usize) -> usize {
        lcm(n, self.near) / n
    }

    /// The far copies' distance in member rows, for `used_rows` rows of each member in use:
    /// one row for the offset layout, else `used_rows / far`.
    pub fn far_stride_rows(self, used_rows: u64) -> u64 {
        if self.offset {
            1
        } else {
            used_rows / self.far as u64
        }
    }
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

fn lcm(a: usize, b: usize) -> usize {
    a / gcd(a, b) * b
}

/// An MD layout: level and layout word, parsed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MdLayout {
    /// RAID0 (members of equal size).
    Raid0,
    /// RAID1: every member a copy.
    Raid1,
    /// RAID4: parity on the last member.
    Raid4,
    /// RAID5 with its parity layout.
    Raid5(Parity),
    /// RAID6 with its parity layout.
    Raid6(Parity),
    /// RAID10 with its copies.
    Raid10(Raid10),
}

impl MdLayout {
    /// From an MD superblock's level and layout word, for `n` members.
    pub fn from_md(level: i32, layout: u32, n: usize) -> Result<MdLayout, LayoutError> {
        Ok(match level {
            0 => MdLayout::Raid0,
            1 => MdLayout::Raid1,
            4 => MdLayout::Raid4,
            5 => MdLayout::Raid5(Parity::from_md(5, layout)?),
            6 => MdLayout::Raid6(Parity::from_md(6, layout)?),
            10 => MdLayout::Raid10(Raid10::from_md(layout, n)?),
            other => {
                return Err(LayoutError::param(
                    "level",
                    format!("MD level {other} is not one raidforge implements (0, 1, 4, 5, 6, 10)"),
                ))
            }
        })
    }

    /// MD's level number.
    pub fn level(self) -> i32 {
        match self {
            MdLayout::Raid0 => 0,
            MdLayout::Raid1 => 1,
            MdLayout::Raid4 => 4,
            MdLayout::Raid5(_) => 5,
            MdLayout::Raid6(_) => 6,
            MdLayout::Raid10(_) => 10,
        }
    }

    /// MD's layout word as mdadm 4.2 writes it: 0 for RAID1 and RAID4, 1 for RAID0 (its
    /// "original" multi-zone layout, which matters only to RAID0 over members of different
    /// sizes, and only with the RAID0-layout feature bit).
    pub fn md_value(self) -> u32 {
        match self {
            MdLayout::Raid0 => 1,
            MdLayout::Raid1 | MdLayout::Raid4 => 0,
            MdLayout::Raid5(p) | MdLayout::Raid6(p) => p.md_value(),
            MdLayout::Raid10(r) => r.md_value(),
        }
    }

    /// The layout's name ("left-symmetric", "f2", ...), None for levels with one layout.
    pub fn name(self) -> Option<String> {
        match self {
            MdLayout::Raid5(p) | MdLayout::Raid6(p) => Some(p.name().to_string()),
            MdLayout::Raid10(r) => Some(r.name()),
            _ => None,
        }
    }

    /// Failures any set of which the layout survives.
    pub fn tolerance(self, n: usize) -> usize {
        match self {
            MdLayout::Raid0 => 0,
            MdLayout::Raid1 => n - 1,
            MdLayout::Raid4 | MdLayout::Raid5(_) => 1,
            MdLayout::Raid6(_) => 2,
            MdLayout::Raid10(r) => r.copies() - 1,
        }
    }

    /// The layout's cycle over its `n` active members (plus `spares` spare members after them):
    /// stripes in logical order, data units of a parity stripe in syndrome order, the data
    /// list in MD's logical chunk order.
    pub fn cycle(self, n: usize, spares: usize) -> Cycle {
        let unit = |d: usize, row: usize, role: Role| Unit {
            disk: d as Disk,
            offset: row as u64,
            role,
        };
        let (rows, stripes, data) = match self {
            MdLayout::Raid0 => {
                let s = Stripe {
                    units: (0..n).map(|d| unit(d, 0, Role::Data)).collect(),
                    code: Code::None,
                };
                (1, vec![s], None)
            }
            MdLayout::Raid1 => {
                let s = Stripe {
                    units: (0..n)
                        .map(|d| unit(d, 0, if d == 0 { Role::Data } else { Role::Mirror }))
                        .collect(),
                    code: Code::Mirror,
                };
                (1, vec![s], None)
            }
            MdLayout::Raid4 | MdLayout::Raid5(_) | MdLayout::Raid6(_) => {
                let (parity, raid6) = match self {
                    MdLayout::Raid5(p) => (p, false),
                    MdLayout::Raid6(p) => (p, true),
                    _ => (Parity::ParityLast, false),
                };
                let period = parity.period(n);
                let mut stripes = Vec::with_capacity(period);
                let mut data = Vec::new();
                for r in 0..period {
                    let row = parity_row(parity, raid6, n, r as u64);
                    let mut units: Vec<Unit> = row
                        .syndrome
                        .iter()
                        .map(|&d| unit(d, r, Role::Data))
                        .collect();
                    units.push(unit(row.p, r, Role::P));
                    if let Some(q) = row.q {
                        units.push(unit(q, r, Role::Q));
                    }
                    data.extend(row.data.iter().map(|&d| Loc {
                        disk: d as Disk,
                        offset: r as u64,
                    }));
                    stripes.push(Stripe {
                        units,
                        code: if raid6 { Code::PQ } else { Code::Xor },
                    });
                }
                (period, stripes, Some(data))
            }
            MdLayout::Raid10(r10) => {
                // Section 0 (near layout) has `near_rows` rows; far copy f of section-0 row
                // `row` is cycle row `f * near_rows + row` (for the offset layout the member
                // interleaves them: `row * far + f`, see `cycle_row`).
                let nr = r10.near_rows(n);
                let chunks = nr * n / r10.near;
                let cycle_row = |row: usize, f: usize| {
                    if r10.offset {
                        row * r10.far + f
                    } else {
                        f * nr + row
                    }
                };
                let stripes = (0..chunks)
                    .map(|c| {
                        let mut units = Vec::with_capacity(r10.copies());
                        for k in 0..r10.near {
                            let pos = c * r10.near + k;
                            let (d, row) = (pos % n, pos / n);
                            for f in 0..r10.far {
                                let role = if k == 0 && f == 0 {
                                    Role::Data
                                } else {
                                    Role::Mirror
                                };
                                units.push(unit(r10.far_member(n, d, f), cycle_row(row, f), role));
                            }
                        }
                        Stripe {
                            units,
                            code: Code::Mirror,
                        }
                    })
                    .collect();
                (nr * r10.far, stripes, None)
            }
        };
        let mut c = Cycle::from_stripes(n + spares, rows as u64, stripes);
        if let Some(data) = data {
            c.data = data;
            c.assert_well_formed();
        }
        c
    }
}

/// An MD array's geometry on its members: layout, members, chunk and the sectors of each
/// member it uses (the superblock's `size`; for RAID0 each member's `data_size`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MdGeometry {
    /// The layout.
    pub layout: MdLayout,
    /// Active members (`raid_disks`).
    pub raid_disks: usize,
    /// Chunk size in sectors (RAID1: the unit raidforge uses, any power of two).
    pub chunk_sectors: u64,
    /// Sectors of each member the array may use.
    pub dev_sectors: u64,
}

impl MdGeometry {
    /// Member rows (chunks) holding array data, as the kernel computes them (RAID10's
    /// `calc_sectors`: rounded to whole rows of the near layout and shared out over the far
    /// copies).
    pub fn used_rows(&self) -> u64 {
        let n = self.raid_disks as u64;
        let chunks = self.dev_sectors / self.chunk_sectors;
        match self.layout {
            MdLayout::Raid10(r) => {
                let (near, far) = (r.near as u64, r.far as u64);
                let array_chunks = chunks / far * n / near;
                (array_chunks * near * far).div_ceil(n)
            }
            _ => chunks,
        }
    }

    /// The array's size in sectors (MD's `*_size` functions).
    pub fn array_sectors(&self) -> u64 {
        let n = self.raid_disks as u64;
        let chunks = self.dev_sectors / self.chunk_sectors;
        let c = self.chunk_sectors;
        match self.layout {
            MdLayout::Raid0 => chunks * n * c,
            MdLayout::Raid1 => self.dev_sectors,
            MdLayout::Raid4 | MdLayout::Raid5(_) => chunks * (n - 1) * c,
            MdLayout::Raid6(_) => chunks * (n - 2) * c,
            MdLayout::Raid10(r) => chunks / r.far as u64 * n / r.near as u64 * c,
        }
    }

    /// The far copies' distance in member rows (RAID10 far layouts; 0 otherwise).
    pub fn far_stride_rows(&self) -> u64 {
        match self.layout {
            MdLayout::Raid10(r) if r.far > 1 => r.far_stride_rows(self.used_rows()),
            _ => 0,
        }
    }

    /// The member row holding row `row` of a layout whose cycles (of `cycle_rows` rows, see
    /// [`MdLayout::cycle`]) are packed back to back, or None when the array leaves that row
    /// unused (past the used rows, or past a far section). Identity except for RAID10 far:
    /// there cycle `c`'s section-`f` row `r` is member row `f * stride + c * near_rows + r`.
    pub fn physical_row(&self, row: u64, cycle_rows: u64) -> Option<u64> {
        let used = self.used_rows();
        let phys = match self.layout {
            MdLayout::Raid10(r) if r.far > 1 && !r.offset => {
                let nr = cycle_rows / r.far as u64;
                let (c, in_cycle) = (row / cycle_rows, row % cycle_rows);
                let (f, rr) = (in_cycle / nr, in_cycle % nr);
                let in_section = c * nr + rr;
                let stride = self.far_stride_rows();
                if in_section >= stride {
                    return None;
                }
                f * stride + in_section
            }
            _ => row,
        };
        (phys < used).then_some(phys)
    }
}
