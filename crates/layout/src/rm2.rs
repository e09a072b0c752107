//! RM2: every data unit in two XOR parity groups, any two disks may fail (seed 002, after
//! Park's RM2).
//!
//! ## The layout
//!
//! `N` disks, stripe group size `M`. One stripe group (one cycle) is `M` rows: rows `0..M-1` are
//! data rows (data unit `k` of every disk, `k` in `0..M-1`) and row `M-1` is the parity row
//! (disk `i` holds `P_i`, the parity of parity group `i`). So each disk holds `M-1` data units
//! and one parity unit per stripe group, there are `N` parity groups, and parity is uniform.
//! Each data unit belongs to exactly two parity groups; each parity group is an XOR stripe of
//! its data units (in logical order) followed by its parity.
//!
//! The seed describes the redundancy matrix (a column per disk, a row per parity group, a `-1`
//! where the disk holds the group's parity and a pair of `k`s for the two groups of its `k`-th
//! data unit) but not how to build one. This module uses a *cyclic* redundancy matrix: data
//! unit `k` of disk `j` belongs to groups `(j + a_k) mod N` and `(j + b_k) mod N`, so the matrix is
//! determined by `M-1` offset pairs `(a_k, b_k)`.
//!
//! **Offsets.** The main family is the *nested* one, `(a_k, b_k) = (k, 2M-1-k)` for
//! `k = 1..M-1` (paper numbering): offsets `1, 2, ..., 2M-2` paired from the outside in. For
//! example `N = 8, M = 3` gives `(1, 4), (2, 3)`. Properties:
//! - the offsets `0, 1, ..., 2M-2` are distinct mod `N` whenever `2M-1 <= N`, so a parity group's
//!   `2(M-1)` data units and its parity lie on `2M-1` distinct disks;
//! - every pair difference `2M-1-2k` is odd, so for even `N` each data unit joins an even and an
//!   odd group: the even groups cover every data unit, which gives `|FPG_min| = N/2` and the
//!   seed's Figure 2 (`N = 8, M = 3`: `FPG = {P0, P2, P4, P6}`);
//! - every two-disk failure is recoverable by peeling (checked exhaustively, see below) at least
//!   whenever `4(M-1) <= N` (checked offline for every `N <= 120`), and for larger `M` at some `N`
//!   (e.g. `N = 11, M = 5`; `N = 13, M = 6`).
//!
//! For a few odd `N` a larger `M` is possible with other offsets, found by an offline exhaustive
//! search over all offset pairings, restricted to pairings whose `|FPG_min|` equals the seed's
//! odd-`N` formula: `N = 9, M = 4`; `N = 15, M = 6` and `M = 7` ([`EXTRA`]).
//!
//! **Checked, not trusted.** The constructor verifies the chosen offsets: distinct offsets, and
//! every two-disk failure `(x, y)` recoverable by peeling (a group with one unknown unit solves
//! it, repeat); by the cyclic symmetry it suffices to check `x = 0, y = 1..=N/2`, but the tests
//! also run the crate's generic [`crate::recovery_plan`] on every pair.
//!
//! **Supported sizes.** `4 <= N <= 32` (the FPG search uses bit masks). The supported `M` for a
//! given `N` are those with a verified construction; without `--width`, `M` is the largest of
//! them. An offline search over *all* cyclic offset pairings (`N <= 16`) found that this is the
//! largest `M` of any cyclic construction for every odd `N` (`N = 5`: 2; `N >= 7`: `(N-1)/2`)
//! and the largest with odd pair differences (hence `|FPG_min| = N/2`) for every even `N`
//! (`floor(N/4) + 1`: 2, 2, 3, 3, 4, 4, 5 for `N = 4..16`). Cyclic pairings with an even
//! difference allow larger `M` for some even `N` (e.g. `N = 6, M = 3`; `N = 10, M = 4, 5`), but
//! their `|FPG_min|` exceeds `N/2`, so they are not offered.
//!
//! **Minimum foreground parity group set.** [`Rm2::fpg_min`] computes a minimum set of parity
//! groups covering every data unit exactly (a minimum vertex cover of the graph whose vertices
//! are parity groups and whose edges are data units), lexicographically smallest among the
//! minimum ones. For every supported `(N, M)` with `N <= 32` its size equals the seed's formula:
//! `N/2` for even `N` (the even groups) and `ceil(N/2) + M - 2` for odd `N` (tests/rm2.rs).
//!
//! **Relation to the seed's Figure 1.** The seed's example parity group `P_5` covers `D_{2,5}`,
//! `D_{4,5}`, `D_{5,6}` and `D_{5,0}` (`D_{a,b}` is the data unit in groups `a` and `b`). With
//! `N = 8, M = 3` (Figure 2's array) the nested offsets `(1, 4), (2, 3)` give group 5 exactly
//! these four data units.

use std::collections::VecDeque;
use std::fmt::Write as _;

use crate::{Code, Cycle, Disk, LayoutError, Loc, Params, Role, Scheme, Stripe, Unit};

/// Smallest supported array.
pub const MIN_DISKS: usize = 4;
/// Largest supported array.
pub const MAX_DISKS: usize = 32;

/// One searched construction: `(N, M, offset pairs)`.
pub type Searched = (usize, usize, &'static [(usize, usize)]);

/// Offset pairs beyond the nested family, from an offline exhaustive search (each satisfies the
/// seed's `|FPG_min|` formula; the constructor re-verifies them).
pub const EXTRA: &[Searched] = &[
    (9, 4, &[(1, 4), (2, 3), (5, 7)]),
    (15, 6, &[(1, 2), (3, 10), (4, 7), (5, 9), (6, 8)]),
    (15, 7, &[(1, 3), (2, 9), (4, 10), (5, 6), (7, 12), (8, 11)]),
];

/// The nested offset family `(k, 2M-1-k)`, `k = 1..M-1`.
fn nested(m: usize) -> Vec<(usize, usize)> {
    (1..m).map(|k| (k, 2 * m - 1 - k)).collect()
}

/// True when the cyclic layout with these offsets puts every parity group on distinct disks and
/// survives every two-disk failure by peeling.
pub(crate) fn offsets_valid(n: usize, pairs: &[(usize, usize)]) -> bool {
    let mut seen = vec![false; n];
    seen[0] = true;
    for &(a, b) in pairs {
        for o in [a, b] {
            if o == 0 || o >= n || seen[o] {
                return false;
            }
            seen[o] = true;
        }
    }
    (1..=n / 2).all(|d| peel(n, pairs, 0, d))
}

/// Peels the XOR groups after disks `x` and `y` fail; true if every lost unit is recovered.
fn peel(n: usize, pairs: &[(usize, usize)], x: usize, y: usize) -> bool {
    let m1 = pairs.len();
    // Item ids: parity of group i is i; data unit k of disk j is n + j*m1 + k.
    let item_groups = |it: usize| -> [Option<usize>; 2] {
        if it < n {
            [Some(it), None]
        } else {
            let (j, k) = ((it - n) / m1, (it - n) % m1);
            let (a, b) = pairs[k];
            [Some((j + a) % n), Some((j + b) % n)]
        }
    };
    let mut lost: Vec<usize> = vec![x, y];
    for z in [x, y] {
        lost.extend((0..m1).map(|k| n + z * m1 + k));
    }
    let mut unknown_in = vec![0usize; n];
    for &it in &lost {
        for g in item_groups(it).into_iter().flatten() {
            unknown_in[g] += 1;
        }
    }
    let mut is_lost = vec![false; n + n * m1];
    for &it in &lost {
        is_lost[it] = true;
    }
    // Members of each group that can be lost: its parity and its data units from x and y.
    let members = |g: usize| -> Vec<usize> {
        let mut v = vec![g];
        for (k, &(a, b)) in pairs.iter().enumerate() {
            for o in [a, b] {
                let j = (g + n - o) % n;
                v.push(n + j * m1 + k);
            }
        }
        v
    };
    let mut left = lost.len();
    let mut queue: VecDeque<usize> = (0..n).filter(|&g| unknown_in[g] == 1).collect();
    while let Some(g) = queue.pop_front() {
        if unknown_in[g] != 1 {
            continue;
        }
        let it = members(g).into_iter().find(|&it| is_lost[it]).unwrap();
        is_lost[it] = false;
        left -= 1;
        for h in item_groups(it).into_iter().flatten() {
            unknown_in[h] -= 1;
            if unknown_in[h] == 1 {
                queue.push_back(h);
            }
        }
    }
    left == 0
}

/// The verified offsets for `(n, m)`, if the construction supports it.
pub(crate) fn offsets_for(n: usize, m: usize) -> Option<Vec<(usize, usize)>> {
    if m < 2 || 2 * m - 1 > n {
        return None;
    }
    let nest = nested(m);
    if offsets_valid(n, &nest) {
        return Some(nest);
    }
    EXTRA
        .iter()
        .find(|(en, em, _)| *en == n && *em == m)
        .map(|(_, _, p)| p.to_vec())
        .filter(|p| offsets_valid(n, p))
}

/// RM2 over `N` active disks (plus dedicated spares, the last disks) with stripe group size `M`.
#[derive(Debug)]
pub struct Rm2 {
    n: usize,
    m: usize,
    spares: usize,
    offsets: Vec<(usize, usize)>,
    cycle: Cycle,
}

impl Rm2 {
    /// Builds RM2 from `--disks` (N, plus `--spares`) and `--width` (the stripe group size M;
    /// default: the largest supported).
    pub fn new(p: &Params) -> Result<Rm2, LayoutError> {
        let disks = p.need_disks()?;
        if p.spares >= disks {
            return Err(LayoutError::param(
                "spares",
                format!("{} spares leave no active disk out of {disks}", p.spares),
            ));
        }
        let n = disks - p.spares;
        if !(MIN_DISKS..=MAX_DISKS).contains(&n) {
            return Err(LayoutError::param(
                "disks",
                format!(
                    "rm2 supports {MIN_DISKS}..={MAX_DISKS} active disks, got {n} ({disks} disks, {} spares)",
                    p.spares
                ),
            ));
        }
        let m = match p.width {
            Some(m) => m,
            None => *Self::supported_m(n).last().ok_or_else(|| {
                LayoutError::param("disks", format!("rm2 has no construction for {n} disks"))
            })?,
        };
        Self::with_shape(n, m, p.spares)
    }

    /// Builds RM2 with `n` active disks, stripe group size `m` and `spares` dedicated spares.
    pub fn with_shape(n: usize, m: usize, spares: usize) -> Result<Rm2, LayoutError> {
        if !(MIN_DISKS..=MAX_DISKS).contains(&n) {
            return Err(LayoutError::param(
                "disks",
                format!("rm2 supports {MIN_DISKS}..={MAX_DISKS} active disks, got {n}"),
            ));
        }
        let offsets = offsets_for(n, m).ok_or_else(|| {
            let ok: Vec<String> = Self::supported_m(n).iter().map(|m| m.to_string()).collect();
            LayoutError::param(
                "width",
                format!(
                    "rm2 over {n} disks has no verified two-failure-tolerant construction with stripe group size M = {m}; supported M: {}",
                    ok.join(", ")
                ),
            )
        })?;
        let m1 = m - 1;
        let unit = |d: usize, offset: usize, role: Role| Unit {
            disk: d as Disk,
            offset: offset as u64,
            role,
        };
        let stripes: Vec<Stripe> = (0..n)
            .map(|g| {
                // Data units of group g: unit k of disk g - a_k and of disk g - b_k, listed in
                // logical order (row, then disk).
                let mut data: Vec<(usize, usize)> = offsets
                    .iter()
                    .enumerate()
                    .flat_map(|(k, &(a, b))| [(k, (g + n - a) % n), (k, (g + n - b) % n)])
                    .collect();
                data.sort_unstable();
                let mut units: Vec<Unit> = data
                    .into_iter()
                    .map(|(k, d)| unit(d, k, Role::Data))
                    .collect();
                units.push(unit(g, m1, Role::P));
                Stripe {
                    units,
                    code: Code::Xor,
                }
            })
            .collect();
        let data: Vec<Loc> = (0..m1)
            .flat_map(|k| {
                (0..n).map(move |d| Loc {
                    disk: d as Disk,
                    offset: k as u64,
                })
            })
            .collect();
        let cycle = Cycle::with_data(n + spares, m as u64, stripes, data);
        cycle.assert_well_formed();
        // Every data unit in exactly two groups, every group on distinct disks.
        let mut count = vec![0u8; n * m1];
        for s in &cycle.stripes {
            let mut disks: Vec<Disk> = s.units.iter().map(|u| u.disk).collect();
            disks.sort_unstable();
            disks.dedup();
            assert_eq!(disks.len(), s.units.len(), "parity group on repeated disks");
            assert_eq!(s.units.len(), 2 * m - 1);
            for u in s.data_units() {
                count[u.offset as usize * n + u.disk as usize] += 1;
            }
        }
        assert!(
            count.iter().all(|&c| c == 2),
            "a data unit not in two groups"
        );
        Ok(Rm2 {
            n,
            m,
            spares,
            offsets,
            cycle,
        })
    }

    /// Stripe group sizes M with a verified construction for `n` disks, ascending.
    pub fn supported_m(n: usize) -> Vec<usize> {
        if !(MIN_DISKS..=MAX_DISKS).contains(&n) {
            return Vec::new();
        }
        (2..=n.div_ceil(2))
            .filter(|&m| offsets_for(n, m).is_some())
            .collect()
    }

    /// Active disks N.
    pub fn disks(&self) -> usize {
        self.n
    }
    /// Stripe group size M (M-1 data rows and one parity row).
    pub fn stripe_group(&self) -> usize {
        self.m
    }
    /// The offset pair `(a_k, b_k)` of each data row `k`: data unit `k` of disk `j` belongs to
    /// parity groups `(j + a_k) mod N` and `(j + b_k) mod N`.
    pub fn offsets(&self) -> &[(usize, usize)] {
        &self.offsets
    }
    /// The two parity groups of data unit `row` of disk `disk`.
    pub fn groups_of(&self, disk: usize, row: usize) -> (usize, usize) {
        let (a, b) = self.offsets[row];
        ((disk + a) % self.n, (disk + b) % self.n)
    }
    /// The redundancy matrix in the seed's notation: `rm[i][j]` is `-1` if disk `j` holds the
    /// parity of group `i`, `k` (1-based) if data unit `k` of disk `j` belongs to group `i`, else 0.
    pub fn redundancy_matrix(&self) -> Vec<Vec<i32>> {
        let mut rm = vec![vec![0i32; self.n]; self.n];
        for (j, row) in rm.iter_mut().enumerate() {
            row[j] = -1;
        }
        for (j, k) in (0..self.n).flat_map(|j| (0..self.m - 1).map(move |k| (j, k))) {
            let (g1, g2) = self.groups_of(j, k);
            rm[g1][j] = k as i32 + 1;
            rm[g2][j] = k as i32 + 1;
        }
        rm
    }

    /// A minimum set of parity groups covering every data unit (FPG_min), ascending; the
    /// lexicographically smallest such set. Exact branch and bound over the groups in order.
    pub fn fpg_min(&self) -> Vec<usize> {
        let n = self.n;
        // Neighbour masks: groups sharing a data unit.
        let mut nb = vec![0u64; n];
        for j in 0..n {
            for k in 0..self.m - 1 {
                let (g1, g2) = self.groups_of(j, k);
                nb[g1] |= 1 << g2;
                nb[g2] |= 1 << g1;
            }
        }
        let mut best: u64 = (1u64 << n) - 1; // all groups cover everything
        let mut best_len = n as u32 + 1; // force the search to record a first solution
        cover_search(&nb, 0, 0, 0, &mut best, &mut best_len);
        (0..n).filter(|g| best >> g & 1 == 1).collect()
    }
}

/// Depth-first search deciding group `v`: include it first (which yields the lexicographically
/// smallest optimum first), else exclude it and force all its neighbours in. `forced` holds the
/// groups that must be in the cover. Prunes on `|cover| + |forced not yet decided| >= best`.
fn cover_search(nb: &[u64], v: usize, cover: u64, forced: u64, best: &mut u64, best_len: &mut u32) {
    let n = nb.len();
    let pending = forced & !cover & !((1u64 << v) - 1);
    let lower = (cover | pending).count_ones() + remaining_bound(nb, v, cover | forced);
    if lower >= *best_len {
        return;
    }
    if v == n {
        *best = cover;
        *best_len = cover.count_ones();
        return;
    }
    let bit = 1u64 << v;
    if forced & bit != 0 {
        cover_search(nb, v + 1, cover | bit, forced, best, best_len);
        return;
    }
    // Include v, unless every neighbour is already in (then v is redundant in a minimum cover).
    if nb[v] & !(cover | forced) != 0 {
        cover_search(nb, v + 1, cover | bit, forced, best, best_len);
    }
    // Exclude v: every neighbour must be in; earlier neighbours were decided already.
    let earlier = nb[v] & (bit - 1);
    if earlier & !cover == 0 {
        cover_search(nb, v + 1, cover, forced | nb[v], best, best_len);
    }
}

/// A lower bound on the extra groups needed to cover edges among undecided, unforced groups
/// `>= v`: edges / max degree.
fn remaining_bound(nb: &[u64], v: usize, taken: u64) -> u32 {
    let n = nb.len();
    let free: u64 = if v >= 64 { 0 } else { !((1u64 << v) - 1) } & ((1u64 << n) - 1) & !taken;
    let mut edges2 = 0u32;
    let mut maxdeg = 0u32;
    let mut f = free;
    while f != 0 {
        let g = f.trailing_zeros() as usize;
        f &= f - 1;
        let d = (nb[g] & free).count_ones();
        edges2 += d;
        maxdeg = maxdeg.max(d);
    }
    if maxdeg == 0 {
        0
    } else {
        (edges2 / 2).div_ceil(maxdeg)
    }
}

impl Scheme for Rm2 {
    fn relocation_keeps_offsets(&self) -> bool {
        true
    }
    fn name(&self) -> &'static str {
        "rm2"
    }
    fn cycle(&self) -> &Cycle {
        &self.cycle
    }
    fn tolerance(&self) -> usize {
        2
    }
    fn spare_disks(&self) -> Vec<Disk> {
        (self.n..self.n + self.spares).map(|d| d as Disk).collect()
    }
    fn extra_json(&self) -> Option<String> {
        let mut s = format!("\"stripe_group\": {}, \"offsets\": [", self.m);
        for (i, (a, b)) in self.offsets.iter().enumerate() {
            if i > 0 {
                s.push_str(", ");
            }
            let _ = write!(s, "[{a}, {b}]");
        }
        let fpg: Vec<String> = self.fpg_min().iter().map(|g| g.to_string()).collect();
        let _ = write!(s, "], \"fpg_min\": [{}]", fpg.join(", "));
        Some(s)
    }
    fn describe(&self) -> String {
        format!(
            "rm2 over {} disks, stripe group M = {} ({} data rows + 1 parity row) + {} spares",
            self.n,
            self.m,
            self.m - 1,
            self.spares
        )
    }
}
