//! S2-RAID: skewed sub-arrays for conflict-free parallel reconstruction (seed 000, section 2).
//!
//! ## Construction
//!
//! The `R` active disks are split into `N = R / G` groups of `G` consecutive disks (group `i` is
//! disks `i*G .. (i+1)*G`), and every disk is cut into `K` partitions. A *sub-array* takes one
//! partition from each group, so it has `N` members; logical disk `L` of a sub-array lives in
//! group `L`. There are `K * G` sub-arrays, numbered `s = j*G + u` for `j` in `0..K` and `u` in
//! `0..G`.
//!
//! The paper's mapping table `M = (m_0, ..., m_{N-1})` says which sub-array owns partition `j` of
//! each disk. Row `j` of `m_0` is `(jG, jG+1, ..., jG+G-1)`, and row `j` of `m_i` is row `j` of
//! `m_{i-1}` cyclically shifted right by `j` positions. Unrolled, row `j` of `m_i` is row `j` of
//! `m_0` shifted right by `i*j`, so sub-array `s = j*G + u` uses partition `j` of disk
//! `i*G + (u + i*j) mod G` in every group `i`.
//!
//! Two different sub-arrays `(j, u)` and `(j', u')` meet in group `i` exactly when
//! `u - u' = i (j' - j) (mod G)`. With `G` prime, `N <= G` and `K <= G`, the differences
//! `j' - j` are non-zero modulo `G`, so at most one group index `i < N` solves the equation: two
//! sub-arrays share at most one disk. That is what makes the rebuild conflict-free: the `K`
//! sub-arrays hit by a failed disk have pairwise disjoint sets of surviving members, so the
//! rebuild reads `K (N - 1)` distinct disks in parallel. The constraints checked here are the
//! paper's: `G` prime, `R = N * G` with `N <= G`, and `1 < K <= G` (`K > G` would repeat a shift
//! pattern and make two sub-arrays share all their disks). Primality only matters when a pair of
//! group indices can differ by a factor of `G`; with exactly two groups any `G >= 2` works, which
//! the mirrored layout of Figure 2 (8 disks, two groups of 4) needs, so S2-RAID10 with `N = 2`
//! accepts a non-prime `G`. S2-RAID5 always requires a prime `G` and at least 3 members per
//! sub-array (2 data + parity).
//!
//! Defaults: `G` is the smallest group size that satisfies the constraints (the widest
//! sub-arrays, hence the most disks read in parallel); `K = G` (the most sub-arrays per disk).
//!
//! ## Sub-array levels
//!
//! - **S2-RAID5**: each sub-array is a RAID5 over its `N` members, left-symmetric like Linux MD:
//!   its `N` stripes per cycle put parity on logical disk `N-1-r` for stripe `r` and the data on
//!   the following logical disks, wrapping. Each disk then holds exactly one parity chunk per
//!   partition per cycle.
//! - **S2-RAID10**: each sub-array is a RAID10 over its `N` members laid out like Linux MD's
//!   "near 2" (as the classic raid10 scheme of this crate): the two copies of mirrored chunk `c`
//!   take positions `2c` and `2c+1` when the sub-array's members are read row by row, so with an
//!   odd `N` a pair wraps onto the next row and a partition is two rows. With `N = 2` this is
//!   Figure 2: group 0 (`D0..D{G-1}`) holds the data, group 1 the mirrors, and the mirror of
//!   partition `j` is shifted by `j` positions, so one data disk's partitions are mirrored on `K`
//!   different mirror disks.
//!
//! ## Representation as a cycle
//!
//! One cycle holds the `K` partitions of every disk. A partition is `rows_per_partition()`
//! consecutive rows of the cycle (`N` for S2-RAID5 so that each sub-array rotates its parity over
//! all its members; for S2-RAID10 1 with `N` even, 2 with `N` odd): partition `j` is rows
//! `j*rpp .. (j+1)*rpp`. Because the engine
//! repeats cycles interleaved, a "partition" of the paper is striped over the disk at chunk
//! granularity rather than being one contiguous extent; membership of sub-arrays, and with it
//! the conflict-free property, is unchanged.
//!
//! LUN order follows Figure 3 (RAID0 over sub-arrays): the `G` sub-arrays of partition row `j`
//! (`jG .. jG+G-1`, which together cover every disk once) are striped round-robin, one sub-array
//! stripe (S2-RAID10: one mirrored chunk) at a time; then the next partition row. Figure 3 fills `K` units of a batch before
//! moving to the next batch; here a batch holds `rows_per_partition()` units per sub-array per
//! cycle before moving on, and the pattern repeats every cycle.
//!
//! ## Relocation
//!
//! The `K` lost partitions of a failed disk belong to `K` different sub-arrays, all rebuilt at the
//! same time. Destinations, per failed disk (in failure order): the candidate list is the live
//! dedicated spare disks (ascending), then the live data disks that share no sub-array with the
//! failed disk, hence serve no rebuild read (its group-mates first, ascending, then the others,
//! ascending). Lost partition `j` goes to candidate `j mod len`, so the `K` rebuilt partitions are
//! written to `min(K, len)` disks in parallel. On a spare disk a partition keeps its offsets; on a
//! data disk it takes the next free partition after the cycle's data rows (offsets
//! `rows + slot * rpp ..`, the paper's "available partitions on other data disks"). With no
//! candidate at all the rebuild is in place on the replacement disk.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;

use crate::{Code, Cycle, Disk, LayoutError, Loc, Params, Relocation, Role, Scheme, Stripe, Unit};

/// One S2-RAID sub-array: its members as (disk, partition) in logical-disk order (member `L`
/// lives in group `L`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct S2Subarray {
    pub id: usize,
    pub members: Vec<(u32, usize)>,
}

/// S2-RAID5 or S2-RAID10 over `R = N * G` active disks plus dedicated spares (the last disks).
#[derive(Debug)]
pub struct S2Raid {
    mirror: bool,
    /// Active (data) disks R.
    active: usize,
    spares: usize,
    /// Group size G.
    g: usize,
    /// Number of groups N (the sub-array size).
    n: usize,
    /// Partitions per disk K.
    k: usize,
    /// Cycle rows per partition.
    rpp: u64,
    subarrays: Vec<S2Subarray>,
    /// `owner[disk][partition]` = sub-array id.
    owner: Vec<Vec<usize>>,
    cycle: Cycle,
}

fn is_prime(x: usize) -> bool {
    x >= 2 && (2..).take_while(|d| d * d <= x).all(|d| x % d != 0)
}

/// Checks one candidate (G, K) against the construction's constraints; returns the failed
/// constraint as (parameter, reason).
fn check_shape(
    mirror: bool,
    r: usize,
    g: usize,
    k: usize,
) -> Result<usize, (&'static str, String)> {
    let level = if mirror { "S2-RAID10" } else { "S2-RAID5" };
    if g < 2 {
        return Err(("group", format!("group size G must be at least 2, got {g}")));
    }
    if r % g != 0 {
        return Err((
            "group",
            format!("{r} active disks do not split into groups of G = {g} (R must equal N * G)"),
        ));
    }
    let n = r / g;
    if n > g {
        return Err((
            "group",
            format!(
                "{r} active disks in groups of {g} give N = {n} groups, but section 2 requires N <= G"
            ),
        ));
    }
    if mirror {
        if n < 2 {
            return Err((
                "group",
                format!(
                    "{level} sub-arrays need at least 2 members (data + mirror), but R/G = {n}"
                ),
            ));
        }
        if n > 2 && !is_prime(g) {
            return Err((
                "group",
                format!("group size G = {g} must be prime when there are more than two groups (N = {n})"),
            ));
        }
    } else {
        if !is_prime(g) {
            return Err(("group", format!("group size G = {g} must be prime")));
        }
        if n < 3 {
            return Err((
                "group",
                format!(
                    "{level} sub-arrays need at least 3 members (2 data + parity), but R/G = {n}"
                ),
            ));
        }
    }
    if k < 2 {
        return Err((
            "partitions",
            format!("K = {k} partitions per disk: section 2 requires 1 < K"),
        ));
    }
    if k > g {
        return Err((
            "partitions",
            format!(
                "K = {k} partitions per disk exceeds G = {g}: partitions j and j+G would get the same shift and two sub-arrays would share {n} disks"
            ),
        ));
    }
    Ok(n)
}

impl S2Raid {
    /// Builds S2-RAID5 (`mirror = false`) or S2-RAID10 (`mirror = true`) from `--disks`,
    /// `--spares`, `--group` (G) and `--partitions` (K).
    pub fn new(mirror: bool, p: &Params) -> Result<S2Raid, LayoutError> {
        let disks = p.need_disks()?;
        if p.spares >= disks {
            return Err(LayoutError::param(
                "spares",
                format!("{} spares leave no active disk out of {disks}", p.spares),
            ));
        }
        let r = disks - p.spares;
        let (g, k, n) = match p.group {
            Some(g) => {
                let k = p.partitions.unwrap_or(g);
                let n = check_shape(mirror, r, g, k).map_err(|(w, m)| LayoutError::param(w, m))?;
                (g, k, n)
            }
            None => {
                // The smallest G that works (with K = G unless K is given).
                let found = (2..=r).find_map(|g| {
                    let k = p.partitions.unwrap_or(g);
                    check_shape(mirror, r, g, k).ok().map(|n| (g, k, n))
                });
                match found {
                    Some(x) => x,
                    None => {
                        let why = match p.partitions {
                            Some(k) => format!(" with K = {k} partitions"),
                            None => String::new(),
                        };
                        return Err(LayoutError::param(
                            "group",
                            format!(
                                "no group size G fits {r} active disks{why}: S2-RAID needs R = N * G with G prime, N <= G, {} and 1 < K <= G",
                                if mirror { "N >= 2" } else { "N >= 3" }
                            ),
                        ));
                    }
                }
            }
        };
        Ok(Self::build(mirror, r, p.spares, g, n, k))
    }

    fn build(mirror: bool, r: usize, spares: usize, g: usize, n: usize, k: usize) -> S2Raid {
        // Sub-array (j, u) uses partition j of disk i*G + (u + i*j) mod G in group i.
        let mut subarrays = Vec::with_capacity(k * g);
        let mut owner = vec![vec![usize::MAX; k]; r];
        for j in 0..k {
            for u in 0..g {
                let id = j * g + u;
                let members: Vec<(u32, usize)> = (0..n)
                    .map(|i| ((i * g + (u + i * j) % g) as u32, j))
                    .collect();
                for &(d, part) in &members {
                    assert_eq!(
                        owner[d as usize][part],
                        usize::MAX,
                        "partition {part} of disk {d} given to two sub-arrays"
                    );
                    owner[d as usize][part] = id;
                }
                subarrays.push(S2Subarray { id, members });
            }
        }
        assert!(
            owner.iter().flatten().all(|&s| s != usize::MAX),
            "every partition belongs to a sub-array"
        );

        let rpp: u64 = match (mirror, n % 2) {
            (false, _) => n as u64,
            (true, 0) => 1,
            (true, _) => 2,
        };
        let unit = |d: u32, offset: u64, role: Role| Unit {
            disk: d,
            offset,
            role,
        };
        let mut stripes = Vec::new();
        for j in 0..k {
            if mirror {
                // Near-2 over the members: position q is member q mod N, row q / N.
                let at = |m: &[(u32, usize)], q: usize, role: Role| {
                    unit(m[q % n].0, j as u64 * rpp + (q / n) as u64, role)
                };
                for c in 0..(rpp as usize * n) / 2 {
                    for u in 0..g {
                        let m = &subarrays[j * g + u].members;
                        stripes.push(Stripe {
                            units: vec![at(m, 2 * c, Role::Data), at(m, 2 * c + 1, Role::Mirror)],
                            code: Code::Mirror,
                        });
                    }
                }
            } else {
                for row in 0..n {
                    let offset = j as u64 * rpp + row as u64;
                    let pd = n - 1 - row;
                    for u in 0..g {
                        let m = &subarrays[j * g + u].members;
                        let mut units: Vec<Unit> = (0..n - 1)
                            .map(|i| unit(m[(pd + 1 + i) % n].0, offset, Role::Data))
                            .collect();
                        units.push(unit(m[pd].0, offset, Role::P));
                        stripes.push(Stripe {
                            units,
                            code: Code::Xor,
                        });
                    }
                }
            }
        }
        let cycle = Cycle::from_stripes(r + spares, k as u64 * rpp, stripes);
        let s = S2Raid {
            mirror,
            active: r,
            spares,
            g,
            n,
            k,
            rpp,
            subarrays,
            owner,
            cycle,
        };
        assert!(
            s.max_disks_shared_by_two_subarrays() <= 1,
            "S2-RAID skew property violated for R={r} G={g} K={k}"
        );
        s
    }

    /// Group size G.
    pub fn group_size(&self) -> usize {
        self.g
    }
    /// Number of groups N, which is also the number of members of every sub-array.
    pub fn groups(&self) -> usize {
        self.n
    }
    /// Partitions per disk K.
    pub fn partitions(&self) -> usize {
        self.k
    }
    /// Active (non-spare) disks R.
    pub fn active_disks(&self) -> usize {
        self.active
    }
    /// Rows of the cycle that one partition occupies (N for S2-RAID5; for S2-RAID10 1 when N is
    /// even, 2 when N is odd).
    pub fn rows_per_partition(&self) -> u64 {
        self.rpp
    }
    /// The partition a cycle offset belongs to (offsets past the data rows are free space).
    pub fn partition_of(&self, offset: u64) -> Option<usize> {
        let p = (offset / self.rpp) as usize;
        (p < self.k).then_some(p)
    }
    /// All `K * G` sub-arrays, by id.
    pub fn subarrays(&self) -> &[S2Subarray] {
        &self.subarrays
    }
    /// The sub-array that owns partition `partition` of active disk `disk`.
    pub fn subarray_at(&self, disk: Disk, partition: usize) -> Option<usize> {
        self.owner
            .get(disk as usize)
            .and_then(|row| row.get(partition))
            .copied()
    }
    /// The paper's mapping table M: `K` rows, one column per active disk; entry `[j][d]` is the
    /// sub-array that owns partition `j` of disk `d`. Columns `i*G .. (i+1)*G` are `m_i`.
    pub fn mapping_table(&self) -> Vec<Vec<usize>> {
        (0..self.k)
            .map(|j| (0..self.active).map(|d| self.owner[d][j]).collect())
            .collect()
    }
    /// The largest number of disks any two distinct sub-arrays have in common (1 for every
    /// valid S2-RAID with K >= 2: the conflict-free property).
    pub fn max_disks_shared_by_two_subarrays(&self) -> usize {
        // Two sub-arrays share a disk only if they own partitions of it, so count co-owned disks
        // per pair over each disk's K owners: O(R K^2).
        let mut shared: HashMap<(usize, usize), usize> = HashMap::new();
        for parts in &self.owner {
            for a in 0..parts.len() {
                for b in a + 1..parts.len() {
                    let key = (parts[a].min(parts[b]), parts[a].max(parts[b]));
                    *shared.entry(key).or_insert(0) += 1;
                }
            }
        }
        shared.values().copied().max().unwrap_or(0)
    }
    /// Disks that hold a member of a sub-array also held by `disk` (the disks a rebuild of
    /// `disk` may read), ascending, without `disk` itself.
    pub fn partner_disks(&self, disk: Disk) -> Vec<Disk> {
        let mut v: Vec<Disk> = self
            .owner
            .get(disk as usize)
            .into_iter()
            .flatten()
            .flat_map(|&s| self.subarrays[s].members.iter().map(|m| m.0))
            .filter(|&d| d != disk)
            .collect();
        v.sort_unstable();
        v.dedup();
        v
    }
}

impl Scheme for S2Raid {
    fn name(&self) -> &'static str {
        if self.mirror {
            "s2raid10"
        } else {
            "s2raid5"
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
    fn relocate(&self, failed: &[Disk]) -> Result<Relocation, LayoutError> {
        let rows = self.cycle.rows;
        let spares = self.spare_disks();
        let live = |d: &Disk| !failed.contains(d);
        // Next free partition slot past the data rows, per disk; and which partition slots of
        // each spare already took a rebuilt partition at its home offsets.
        let mut next_free = vec![0u64; self.cycle.disks];
        let mut spare_home_used: HashSet<(Disk, usize)> = HashSet::new();
        let mut moves = Relocation::default();
        for &f in failed {
            if f as usize >= self.active {
                continue; // a spare holds nothing
            }
            let partners = self.partner_disks(f);
            let group = f as usize / self.g;
            let uninvolved = |d: &Disk| {
                (*d as usize) < self.active && *d != f && live(d) && !partners.contains(d)
            };
            let mut cands: Vec<Disk> = spares.iter().copied().filter(live).collect();
            cands.extend(
                (group * self.g..(group + 1) * self.g)
                    .map(|d| d as Disk)
                    .filter(uninvolved),
            );
            cands.extend(
                (0..self.active)
                    .filter(|d| d / self.g != group)
                    .map(|d| d as Disk)
                    .filter(uninvolved),
            );
            for j in 0..self.k {
                let (dest, base) = if cands.is_empty() {
                    (f, j as u64 * self.rpp) // in place on the replacement
                } else {
                    let d = cands[j % cands.len()];
                    let home = (d as usize) >= self.active && spare_home_used.insert((d, j));
                    if home {
                        (d, j as u64 * self.rpp)
                    } else {
                        let slot = next_free[d as usize];
                        next_free[d as usize] += 1;
                        (d, rows + slot * self.rpp)
                    }
                };
                for row in 0..self.rpp {
                    moves.insert(
                        Loc {
                            disk: f,
                            offset: j as u64 * self.rpp + row,
                        },
                        Loc {
                            disk: dest,
                            offset: base + row,
                        },
                    );
                }
            }
        }
        Ok(moves)
    }
    fn check_extra_json(&self) -> Option<String> {
        Some(format!(
            "\"max_disks_shared_by_two_subarrays\": {}",
            self.max_disks_shared_by_two_subarrays()
        ))
    }
    fn extra_json(&self) -> Option<String> {
        let mut s = String::from("\"subarrays\": [");
        for (i, sa) in self.subarrays.iter().enumerate() {
            if i > 0 {
                s.push_str(", ");
            }
            let _ = write!(s, "{{\"id\": {}, \"members\": [", sa.id);
            for (m, (d, part)) in sa.members.iter().enumerate() {
                if m > 0 {
                    s.push_str(", ");
                }
                let _ = write!(s, "{{\"disk\": {d}, \"partition\": {part}}}");
            }
            s.push_str("]}");
        }
        s.push(']');
        Some(s)
    }
    fn describe(&self) -> String {
        format!(
            "{} over {} disks in {} groups of {} (K = {} partitions, {} sub-arrays of {}) + {} spares",
            self.name(),
            self.active,
            self.n,
            self.g,
            self.k,
            self.subarrays.len(),
            self.n,
            self.spares
        )
    }
}
