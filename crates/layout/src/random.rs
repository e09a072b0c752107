//! Random (RAID_R) and hash (RAID_H) placement, the declustered baselines of the RAID+ paper.
//!
//! Both place each k-wide stripe on k distinct disks out of n and keep no spare disks: a lost unit
//! is rebuilt onto a surviving disk outside its stripe, in space after the cycle's data rows
//! (distributed spare space). Offsets on a disk are handed out in stripe order, so disks that
//! receive more units than others have more rows: that imbalance is the point of the comparison.

use crate::{Code, Cycle, Disk, LayoutError, Loc, Params, Relocation, Role, Scheme, Stripe, Unit};

/// SplitMix64: a tiny, well-studied generator whose output is fixed by its definition, so a
/// layout built from a seed is the same on every machine and every version. Written here
/// because no crate promises that stability for its default generators. Public so that tests
/// and tools needing a seeded stream take it from here instead of writing it again.
#[derive(Clone, Debug)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// A generator whose stream is fixed by `seed`.
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }
    /// The next 64 bits of the stream.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in `0..bound` (Lemire's multiply-shift; the bias is below 2^-32 for our sizes).
    pub fn below(&mut self, bound: usize) -> usize {
        ((self.next_u64() >> 32) * bound as u64 >> 32) as usize
    }
}

/// Bob Jenkins' 96-bit mix, as CRUSH's rjenkins1 hash uses it. Written here because it is a
/// dozen lines and must match the published function exactly.
fn jenkins_mix(mut a: u32, mut b: u32, mut c: u32) -> (u32, u32, u32) {
    a = a.wrapping_sub(b).wrapping_sub(c) ^ (c >> 13);
    b = b.wrapping_sub(c).wrapping_sub(a) ^ (a << 8);
    c = c.wrapping_sub(a).wrapping_sub(b) ^ (b >> 13);
    a = a.wrapping_sub(b).wrapping_sub(c) ^ (c >> 12);
    b = b.wrapping_sub(c).wrapping_sub(a) ^ (a << 16);
    c = c.wrapping_sub(a).wrapping_sub(b) ^ (b >> 5);
    a = a.wrapping_sub(b).wrapping_sub(c) ^ (c >> 3);
    b = b.wrapping_sub(c).wrapping_sub(a) ^ (a << 10);
    c = c.wrapping_sub(a).wrapping_sub(b) ^ (b >> 15);
    (a, b, c)
}

/// CRUSH's three-input rjenkins1 hash.
pub(crate) fn jenkins_hash3(a: u32, b: u32, c: u32) -> u32 {
    let h: u32 = 1_315_423_911 ^ a ^ b ^ c;
    let (x, y): (u32, u32) = (231_232, 1_232);
    let (a, b, h) = jenkins_mix(a, b, h);
    let (c, x, h) = jenkins_mix(c, x, h);
    let (y, _, h) = jenkins_mix(y, a, h);
    let (_, _, h) = jenkins_mix(b, x, h);
    let (_, _, h) = jenkins_mix(y, c, h);
    h
}

struct Common {
    n: usize,
    k: usize,
    level: u8,
    stripes: usize,
}

fn common(p: &Params, what: &str) -> Result<Common, LayoutError> {
    let n = p.need_disks()?;
    let k = p.need_width()?;
    let level = p.level_or(5)?;
    let parity = if level == 6 { 2 } else { 1 };
    if p.spares > 0 {
        return Err(LayoutError::param(
            "spares",
            format!("{what} placement uses distributed spare space, not spare disks"),
        ));
    }
    if k <= parity || k >= n {
        return Err(LayoutError::param(
            "width",
            format!(
                "{what} placement needs {} <= width < disks; got width {k} over {n} disks",
                parity + 1
            ),
        ));
    }
    let stripes = p.stripes.unwrap_or(n * (n - 1));
    if stripes == 0 {
        return Err(LayoutError::param(
            "stripes",
            "need at least one stripe per cycle",
        ));
    }
    Ok(Common {
        n,
        k,
        level,
        stripes,
    })
}

/// Builds a cycle from per-stripe disk choices: offsets handed out in stripe order per disk.
fn build_cycle(n: usize, level: u8, choices: &[Vec<usize>]) -> Cycle {
    let parity = if level == 6 { 2 } else { 1 };
    let mut next = vec![0u64; n];
    let stripes: Vec<Stripe> = choices
        .iter()
        .map(|disks| {
            let k = disks.len();
            let units = disks
                .iter()
                .enumerate()
                .map(|(i, &d)| {
                    let role = if i < k - parity {
                        Role::Data
                    } else if i == k - parity {
                        Role::P
                    } else {
                        Role::Q
                    };
                    let off = next[d];
                    next[d] += 1;
                    Unit {
                        disk: d as Disk,
                        offset: off,
                        role,
                    }
                })
                .collect();
            Stripe {
                units,
                code: if level == 6 { Code::PQ } else { Code::Xor },
            }
        })
        .collect();
    let rows = next.iter().copied().max().unwrap_or(0).max(1);
    Cycle::from_stripes(n, rows, stripes)
}

/// Relocates the units of `cycle` on `failed` disks, stripe by stripe: `pick(stripe, unit,
/// excluded)` chooses the destination disk outside `excluded` (the failed disks, the
/// stripe's disks and the destinations of its units placed so far), and `put(from,
/// to)` receives each move, its destination at the next spare row of its disk.
fn relocate_each(
    cycle: &Cycle,
    failed: &[Disk],
    mut pick: impl FnMut(usize, usize, &Excluded) -> Option<usize>,
    mut put: impl FnMut(Loc, Loc),
) -> Result<(), LayoutError> {
    let mut spare_next = vec![cycle.rows; cycle.disks];
    let mut excluded = Excluded::new(cycle.disks);
    // Destinations of the current stripe's units placed so far (a place belongs to one
    // stripe in these layouts, so no other stripe moves it).
    let mut placed: Vec<usize> = Vec::new();
    for si in cycle.stripes_on_any(failed) {
        let s = &cycle.stripes[si];
        placed.clear();
        for (ui, u) in s.units.iter().enumerate() {
            if !failed.contains(&u.disk) {
                continue;
            }
            // Recomputed per lost unit (a stripe loses at most a few units).
            excluded.clear();
            for d in failed
                .iter()
                .chain(s.units.iter().map(|u| &u.disk))
                .map(|&d| d as usize)
                .chain(placed.iter().copied())
            {
                excluded.insert(d);
            }
            let d = pick(si, ui, &excluded).ok_or_else(|| {
                LayoutError::NoSpareSpace(format!(
                    "stripe {si} has no surviving disk outside it to rebuild onto"
                ))
            })?;
            debug_assert!(!excluded.contains(d));
            put(
                u.loc(),
                Loc {
                    disk: d as Disk,
                    offset: spare_next[d],
                },
            );
            spare_next[d] += 1;
            placed.push(d);
        }
    }
    Ok(())
}

/// [`relocate_each`]'s moves as a [`Relocation`].
fn relocate_with(
    cycle: &Cycle,
    failed: &[Disk],
    pick: impl FnMut(usize, usize, &Excluded) -> Option<usize>,
) -> Result<Relocation, LayoutError> {
    let mut moves = Relocation::default();
    relocate_each(cycle, failed, pick, |from, to| {
        moves.insert(from, to);
    })?;
    Ok(moves)
}

/// [`layout::recovery_rows`](crate::recovery_rows) without building the relocation: the rows
/// of the cycle once [`relocate_each`] has placed every lost unit. Only for failures the
/// layout survives ([`crate::validate_failures`]: each stripe is an independent code
/// tolerating that many erasures, so the peeling always succeeds there); `None` otherwise,
/// or if the relocation fails.
fn rows_after(
    scheme: &dyn Scheme,
    failed: &[Disk],
    pick: impl FnMut(usize, usize, &Excluded) -> Option<usize>,
) -> Option<u64> {
    if failed.is_empty() || crate::validate_failures(scheme, failed).is_err() {
        return None;
    }
    let cycle = scheme.cycle();
    let mut rows = cycle.rows;
    relocate_each(cycle, failed, pick, |_, to| rows = rows.max(to.offset + 1)).ok()?;
    Some(rows)
}

/// The disks of `0..n` one relocated unit may not go to, as a bit set (sorting a list of
/// them per unit was a fifth of opening a 255-member level-6 declustered pool). Disks past
/// `n` are ignored: no pick can choose them.
struct Excluded {
    n: usize,
    words: Vec<u64>,
    count: usize,
}

impl Excluded {
    fn new(n: usize) -> Excluded {
        Excluded {
            n,
            words: vec![0; n.div_ceil(64)],
            count: 0,
        }
    }
    fn clear(&mut self) {
        self.words.fill(0);
        self.count = 0;
    }
    fn insert(&mut self, d: usize) {
        if d < self.n && !self.contains(d) {
            self.words[d / 64] |= 1 << (d % 64);
            self.count += 1;
        }
    }
    fn contains(&self, d: usize) -> bool {
        d < self.n && self.words[d / 64] & (1 << (d % 64)) != 0
    }
    /// How many disks of `0..n` are allowed.
    fn allowed(&self) -> usize {
        self.n - self.count
    }
    /// The `i`-th allowed disk in increasing order, if there is one.
    fn nth_allowed(&self, mut i: usize) -> Option<usize> {
        for (w, &word) in self.words.iter().enumerate() {
            let width = (self.n - w * 64).min(64);
            let mask = if width == 64 {
                u64::MAX
            } else {
                (1u64 << width) - 1
            };
            let mut free = !word & mask;
            let here = free.count_ones() as usize;
            if i >= here {
                i -= here;
                continue;
            }
            for _ in 0..i {
                free &= free - 1;
            }
            return Some(w * 64 + free.trailing_zeros() as usize);
        }
        None
    }
}

/// RAID_R: each stripe on k disks drawn uniformly at random (seeded).
#[derive(Debug)]
pub struct RandomPlacement {
    seed: u64,
    level: u8,
    cycle: Cycle,
}

impl RandomPlacement {
    pub fn new(p: &Params) -> Result<RandomPlacement, LayoutError> {
        let c = common(p, "random")?;
        let mut rng = SplitMix64::new(p.seed);
        let choices: Vec<Vec<usize>> = (0..c.stripes)
            .map(|_| {
                // Partial Fisher-Yates: the first k of a shuffled 0..n.
                let mut all: Vec<usize> = (0..c.n).collect();
                for i in 0..c.k {
                    let j = i + rng.below(c.n - i);
                    all.swap(i, j);
                }
                all.truncate(c.k);
                all
            })
            .collect();
        Ok(RandomPlacement {
            seed: p.seed,
            level: c.level,
            cycle: build_cycle(c.n, c.level, &choices),
        })
    }
}

impl Scheme for RandomPlacement {
    fn name(&self) -> &'static str {
        "random"
    }
    fn cycle(&self) -> &Cycle {
        &self.cycle
    }
    fn tolerance(&self) -> usize {
        if self.level == 6 {
            2
        } else {
            1
        }
    }
    fn relocate(&self, failed: &[Disk]) -> Result<Relocation, LayoutError> {
        relocate_with(&self.cycle, failed, self.rebuild_picks())
    }
    /// A level-6 pool over 255 members sizes its cycles from 1,020 failure sets; counting
    /// the rows takes no table of moves (and no peeling, which cannot fail here).
    fn recovery_rows_hint(&self, failed: &[Disk]) -> Option<u64> {
        rows_after(self, failed, self.rebuild_picks())
    }
}

impl RandomPlacement {
    /// The destination picks of a relocation: uniform over the allowed disks, from a
    /// generator seeded for rebuilds.
    fn rebuild_picks(&self) -> impl FnMut(usize, usize, &Excluded) -> Option<usize> {
        let mut rng = SplitMix64::new(self.seed ^ 0x5245_4255_494C_44); // "REBUILD"
        move |_, _, excluded: &Excluded| {
            // Counted without listing them.
            let allowed = excluded.allowed();
            (allowed > 0).then(|| excluded.nth_allowed(rng.below(allowed)).unwrap())
        }
    }
}

/// RAID_H: CRUSH-style placement; position r of stripe s goes to disk
/// `hash(s, r', seed) mod n`, where r' starts at r and is bumped past collisions.
#[derive(Debug)]
pub struct HashPlacement {
    seed: u32,
    level: u8,
    cycle: Cycle,
}

/// The CRUSH retry: the `r`-th distinct choice for stripe `s` that `ok` accepts, trying
/// successive hash inputs. `None` if no disk is acceptable.
fn crush_choose(
    n: usize,
    s: usize,
    start: u32,
    seed: u32,
    ok: &dyn Fn(usize) -> bool,
) -> Option<usize> {
    if !(0..n).any(ok) {
        return None;
    }
    let mut r = start;
    loop {
        let d = (jenkins_hash3(s as u32, r, seed) % n as u32) as usize;
        if ok(d) {
            return Some(d);
        }
        r += 1;
    }
}

impl HashPlacement {
    pub fn new(p: &Params) -> Result<HashPlacement, LayoutError> {
        let c = common(p, "hash")?;
        let seed = p.seed as u32;
        let choices: Vec<Vec<usize>> = (0..c.stripes)
            .map(|s| {
                let mut chosen: Vec<usize> = Vec::with_capacity(c.k);
                let mut r = 0u32;
                while chosen.len() < c.k {
                    let d = (jenkins_hash3(s as u32, r, seed) % c.n as u32) as usize;
                    if !chosen.contains(&d) {
                        chosen.push(d);
                    }
                    r += 1;
                }
                chosen
            })
            .collect();
        Ok(HashPlacement {
            seed,
            level: c.level,
            cycle: build_cycle(c.n, c.level, &choices),
        })
    }
}

impl Scheme for HashPlacement {
    fn name(&self) -> &'static str {
        "hash"
    }
    fn cycle(&self) -> &Cycle {
        &self.cycle
    }
    fn tolerance(&self) -> usize {
        if self.level == 6 {
            2
        } else {
            1
        }
    }
    fn relocate(&self, failed: &[Disk]) -> Result<Relocation, LayoutError> {
        relocate_with(&self.cycle, failed, self.rebuild_picks())
    }
    /// As for random placement: rows counted without a table of moves.
    fn recovery_rows_hint(&self, failed: &[Disk]) -> Option<u64> {
        rows_after(self, failed, self.rebuild_picks())
    }
}

impl HashPlacement {
    /// The destination picks of a relocation: each stripe's hash sequence continued past
    /// its k placements.
    fn rebuild_picks(&self) -> impl FnMut(usize, usize, &Excluded) -> Option<usize> + '_ {
        let n = self.cycle.disks;
        let k = self.cycle.stripes.first().map_or(0, |s| s.units.len()) as u32;
        move |s, ui, excluded: &Excluded| {
            let ok = |d: usize| !excluded.contains(d);
            crush_choose(n, s, k + 64 * ui as u32, self.seed, &ok)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Excluded;

    /// The bit set answers as a sorted list of the excluded disks would, for every size
    /// around the word boundaries and a spread of excluded sets (disks past `n` included,
    /// which no pick may choose).
    #[test]
    fn excluded_disks_count_and_rank_the_allowed_ones() {
        for n in [1usize, 2, 5, 63, 64, 65, 127, 128, 129, 255] {
            for seed in 0..40u64 {
                let mut ex = Excluded::new(n);
                let mut list: Vec<usize> = Vec::new();
                let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
                for _ in 0..(seed as usize % 16) {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let d = (x % (n as u64 + 3)) as usize;
                    ex.insert(d);
                    list.push(d);
                }
                let allowed: Vec<usize> = (0..n).filter(|d| !list.contains(d)).collect();
                assert_eq!(ex.allowed(), allowed.len(), "n {n} {list:?}");
                for (i, &d) in allowed.iter().enumerate() {
                    assert_eq!(ex.nth_allowed(i), Some(d), "n {n} i {i} {list:?}");
                }
                assert_eq!(ex.nth_allowed(allowed.len()), None);
                for d in 0..n + 3 {
                    assert_eq!(ex.contains(d), d < n && list.contains(&d));
                }
                ex.clear();
                assert_eq!((ex.allowed(), ex.nth_allowed(0)), (n, Some(0)));
            }
        }
    }
}
