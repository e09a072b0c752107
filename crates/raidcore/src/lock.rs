//! Stripe locks: a pure table an executor consults so that plans touching a common stripe run
//! one after the other while plans on different stripes run in parallel.
//!
//! A plan lists the stripes it needs ([`crate::Plan::locks`]: the stripes it writes and the ones
//! it reads to reconstruct; a rebuild locks its whole cycle). [`StripeLocks::try_lock`] takes
//! all of them or none, so two plans can never each hold half of what the other needs (no
//! deadlock, no partial locking); a plan that does not get its locks waits until another plan
//! unlocks and tries again. Reads lock too: a degraded read reconstructs from parity, which must
//! not change under it. The table is bounded by the number of plans in flight.

use crate::array::StripeId;
use crate::fxhash::FxHashMap;

/// The set of stripes currently held.
///
/// Stored per cycle as a bitset over the cycle's stripe indices (a rebuild plan locks every
/// stripe of its cycle, thousands for RAID+ over 59 disks: setting bits is far cheaper than
/// hashing each stripe). A cycle whose held stripes are all below 64 sits in `small`, a small
/// direct-mapped table where a cycle may take one slot only ([`small_index`]), if that slot is
/// free (most runs lock a few cycles at a time, and one comparison is cheaper than hashing and
/// inserting into a map: the simulator takes and releases locks for every request; a linear
/// list, searched until its cycle, mispredicted about once per look-up); the others, and
/// those whose slot is taken, are in a map keyed by cycle with a cheap hasher. A cycle is in
/// one of the two, never both. The first 64 stripes of a mapped cycle are stored inline; the
/// vectors of larger cycles that become free are kept for reuse, so a steady state allocates
/// nothing.
#[derive(Clone, Debug)]
pub struct StripeLocks {
    /// `(cycle, bits)` in slot `small_index(cycle)`: stripe `s < 64` of `cycle` is held if bit
    /// `s` is set. A slot with no bit set is free.
    small: [(u64, u64); SMALL_SLOTS],
    cycles: FxHashMap<u64, CycleBits>,
    held: usize,
    spare: Vec<Vec<u64>>,
}

/// The stripes whose bits are set in a word, lowest first.
#[derive(Clone, Copy)]
struct BitStripes(u64);

impl Iterator for BitStripes {
    type Item = usize;
    fn next(&mut self) -> Option<usize> {
        if self.0 == 0 {
            return None;
        }
        let s = self.0.trailing_zeros() as usize;
        self.0 &= self.0 - 1;
        Some(s)
    }
}

/// Slots of [`StripeLocks`]'s direct-mapped table (a power of two).
const SMALL_SLOTS: usize = 256;

/// The slot a cycle may take in [`StripeLocks`]'s direct-mapped table: the top bits of the
/// cycle times 2^64 / golden ratio (Fibonacci hashing). A trace's cycles are not spread evenly
/// (aligned offsets), and a replay holds dozens at a time: with 32 slots taken by the cycle's
/// low bits, one lock in twelve of the WebSearch replay found its slot taken by another cycle
/// and went to the map; with this hash, one in twenty-five at 64 slots, one in a hundred at
/// 256 (4 KiB).
#[inline]
fn small_index(cycle: u64) -> usize {
    (cycle.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - SMALL_SLOTS.trailing_zeros())) as usize
}

impl Default for StripeLocks {
    fn default() -> StripeLocks {
        StripeLocks {
            small: [(0, 0); SMALL_SLOTS],
            cycles: FxHashMap::default(),
            held: 0,
            spare: Vec::new(),
        }
    }
}

/// The held stripes of one cycle: stripes 0 to 63 in `first` (all of them in a cycle of a
/// classic layout, so taking and releasing its locks touches no other memory), the rest in
/// `rest` (bit `s - 64`), grown on demand.
#[derive(Clone, Debug, Default)]
struct CycleBits {
    first: u64,
    rest: Vec<u64>,
    count: usize,
}

impl CycleBits {
    fn get(&self, stripe: usize) -> bool {
        if stripe < 64 {
            return self.first & (1 << stripe) != 0;
        }
        let s = stripe - 64;
        self.rest
            .get(s / 64)
            .is_some_and(|w| w & (1 << (s % 64)) != 0)
    }

    /// The word and bit of `stripe`, growing `rest` to hold it.
    #[inline]
    fn word(&mut self, stripe: usize) -> (&mut u64, u64) {
        if stripe < 64 {
            return (&mut self.first, 1 << stripe);
        }
        let s = stripe - 64;
        if self.rest.len() <= s / 64 {
            self.rest.resize(s / 64 + 1, 0);
        }
        (&mut self.rest[s / 64], 1 << (s % 64))
    }

    /// Takes `stripe`; panics if it is held (a plan listed it twice).
    #[inline]
    fn take(&mut self, cycle: u64, stripe: usize) {
        let (w, m) = self.word(stripe);
        assert!(*w & m == 0, "stripe {stripe} of cycle {cycle} listed twice");
        *w |= m;
        self.count += 1;
    }

    /// Releases `stripe`; panics if it is not held.
    #[inline]
    fn release(&mut self, cycle: u64, stripe: usize) {
        assert!(
            self.get(stripe),
            "unlocking stripe {:?}, which is not held",
            StripeId { cycle, stripe }
        );
        let (w, m) = self.word(stripe);
        *w &= !m;
        self.count -= 1;
    }
}

impl StripeLocks {
    /// The slot of `cycle` in `small`, if the cycle is there.
    #[inline]
    fn small_slot(&self, cycle: u64) -> Option<usize> {
        let k = small_index(cycle);
        let (c, bits) = self.small[k];
        (bits != 0 && c == cycle).then_some(k)
    }

    /// An empty table.
    pub fn new() -> StripeLocks {
        StripeLocks::default()
    }

    /// A free cycle's bitset (with a spare `rest` vector if one is kept).
    fn fresh(spare: &mut Vec<Vec<u64>>) -> CycleBits {
        CycleBits {
            first: 0,
            rest: spare.pop().unwrap_or_default(),
            count: 0,
        }
    }

    /// Takes every stripe of `stripes` if none is held; otherwise takes nothing and returns
    /// false. `stripes` must not repeat a stripe.
    pub fn try_lock(&mut self, stripes: &[StripeId]) -> bool {
        // One look-up per run of stripes of the same cycle (plans list theirs sorted).
        let mut rest = stripes;
        while let Some(first) = rest.first() {
            let run = rest.iter().take_while(|s| s.cycle == first.cycle).count();
            if self.any_held(first.cycle, rest[..run].iter().map(|s| s.stripe)) {
                return false;
            }
            rest = &rest[run..];
        }
        let mut rest = stripes;
        while let Some(first) = rest.first() {
            let run = rest.iter().take_while(|s| s.cycle == first.cycle).count();
            let taken = self.try_lock_in(first.cycle, rest[..run].iter().map(|s| s.stripe));
            debug_assert!(taken, "stripes checked free were refused");
            rest = &rest[run..];
        }
        true
    }

    /// Whether any of `stripes` of `cycle` is held.
    fn any_held(&self, cycle: u64, mut stripes: impl Iterator<Item = usize>) -> bool {
        if let Some(k) = self.small_slot(cycle) {
            let bits = self.small[k].1;
            return stripes.any(|s| s < 64 && bits & (1 << s) != 0);
        }
        match self.cycles.get(&cycle) {
            Some(b) => stripes.any(|s| b.get(s)),
            None => false,
        }
    }

    /// [`StripeLocks::try_lock`] of stripes (indices) of one cycle, without building
    /// [`StripeId`]s: one look-up for the whole plan. `stripes` must not repeat a stripe.
    #[inline]
    pub fn try_lock_in<I>(&mut self, cycle: u64, stripes: I) -> bool
    where
        I: Iterator<Item = usize> + Clone,
    {
        // The common case, kept small enough to inline: stripes below 64 of a cycle in (or
        // joining) the direct-mapped table.
        // (The stripes are counted as they come: `count_ones` is a dozen instructions on a
        // baseline x86-64 target, which has no population count instruction.)
        let (mut add, mut n) = (0u64, 0usize);
        for s in stripes.clone() {
            if s >= 64 {
                return self.try_lock_in_general(cycle, stripes);
            }
            let m = 1u64 << s;
            assert!(add & m == 0, "stripe {s} of cycle {cycle} listed twice");
            add |= m;
            n += 1;
        }
        self.try_lock_bits(cycle, add, n)
    }

    /// [`StripeLocks::try_lock_in`] of the stripes below 64 whose bits are set in `bits`, `n`
    /// of them. For a caller that keeps a plan's locks as a bit set (the simulator's memoised
    /// plans): no loop over the stripes, and the count comes with it (a population count is a
    /// dozen instructions on a baseline x86-64 target).
    #[inline]
    pub fn try_lock_bits(&mut self, cycle: u64, bits: u64, n: usize) -> bool {
        debug_assert_eq!(bits.count_ones() as usize, n, "the count of `bits`");
        if bits == 0 {
            return true;
        }
        let e = &mut self.small[small_index(cycle)];
        if e.1 != 0 && e.0 == cycle {
            if e.1 & bits != 0 {
                return false;
            }
            e.1 |= bits;
            self.held += n;
            return true;
        }
        // A free slot, unless the cycle is in the map (it went there while its slot was taken).
        if e.1 == 0 && (self.cycles.is_empty() || !self.cycles.contains_key(&cycle)) {
            *e = (cycle, bits);
            self.held += n;
            return true;
        }
        self.try_lock_in_general(cycle, BitStripes(bits))
    }

    /// [`StripeLocks::try_lock_in`] in every case (the map, a cycle moving from the table to
    /// the map).
    #[inline(never)]
    fn try_lock_in_general<I>(&mut self, cycle: u64, stripes: I) -> bool
    where
        I: Iterator<Item = usize> + Clone,
    {
        if stripes.clone().next().is_none() {
            return true;
        }
        if let Some(k) = self.small_slot(cycle) {
            let bits = self.small[k].1;
            if stripes.clone().any(|s| s < 64 && bits & (1 << s) != 0) {
                return false;
            }
            // A stripe past 63 (the fast path took all others): the cycle moves to the map.
            self.small[k].1 = 0;
            let mut moved = Self::fresh(&mut self.spare);
            moved.first = bits;
            moved.count = bits.count_ones() as usize;
            self.cycles.insert(cycle, moved);
        }
        let n = match self.cycles.entry(cycle) {
            std::collections::hash_map::Entry::Occupied(mut e) => {
                let bits = e.get_mut();
                if stripes.clone().any(|s| bits.get(s)) {
                    return false;
                }
                let before = bits.count;
                for s in stripes {
                    bits.take(cycle, s);
                }
                bits.count - before
            }
            std::collections::hash_map::Entry::Vacant(v) => {
                let bits = v.insert(Self::fresh(&mut self.spare));
                for s in stripes {
                    bits.take(cycle, s);
                }
                bits.count
            }
        };
        self.held += n;
        true
    }

    /// Releases stripes taken by one successful [`StripeLocks::try_lock`]. Panics if one of
    /// them is not held (a bug in the executor).
    pub fn unlock(&mut self, stripes: &[StripeId]) {
        // One look-up per run of stripes of the same cycle (plans list theirs sorted; a
        // rebuild plan lists thousands of one cycle).
        let mut rest = stripes;
        while let Some(first) = rest.first() {
            let run = rest.iter().take_while(|s| s.cycle == first.cycle).count();
            self.unlock_in(first.cycle, rest[..run].iter().map(|s| s.stripe));
            rest = &rest[run..];
        }
    }

    /// [`StripeLocks::unlock`] of stripes (indices) of one cycle, taken by one successful
    /// [`StripeLocks::try_lock_in`] (or [`StripeLocks::try_lock`]).
    #[inline]
    pub fn unlock_in(&mut self, cycle: u64, stripes: impl Iterator<Item = usize>) {
        if let Some(k) = self.small_slot(cycle) {
            let bits = &mut self.small[k].1;
            for stripe in stripes {
                assert!(
                    stripe < 64 && *bits & (1 << stripe) != 0,
                    "unlocking stripe {:?}, which is not held",
                    StripeId { cycle, stripe }
                );
                *bits &= !(1 << stripe);
                self.held -= 1;
            }
            // (A slot whose bits are all clear is free.)
            return;
        }
        self.unlock_in_map(cycle, stripes);
    }

    /// [`StripeLocks::unlock_in`] of the stripes below 64 whose bits are set in `bits`, `n` of
    /// them, taken by one successful [`StripeLocks::try_lock_bits`] (or `try_lock_in`).
    #[inline]
    pub fn unlock_bits(&mut self, cycle: u64, bits: u64, n: usize) {
        debug_assert_eq!(bits.count_ones() as usize, n, "the count of `bits`");
        if let Some(k) = self.small_slot(cycle) {
            let held = &mut self.small[k].1;
            assert!(
                *held & bits == bits,
                "unlocking stripe {:?}, which is not held",
                StripeId {
                    cycle,
                    stripe: (bits & !*held).trailing_zeros() as usize
                }
            );
            *held &= !bits;
            self.held -= n;
            // (A slot whose bits are all clear is free.)
            return;
        }
        self.unlock_in_map(cycle, BitStripes(bits));
    }

    /// [`StripeLocks::unlock_in`] of a cycle in the map.
    #[inline(never)]
    fn unlock_in_map(&mut self, cycle: u64, stripes: impl Iterator<Item = usize>) {
        let mut stripes = stripes.peekable();
        let Some(&first) = stripes.peek() else {
            return;
        };
        let std::collections::hash_map::Entry::Occupied(mut entry) = self.cycles.entry(cycle)
        else {
            panic!(
                "unlocking stripe {:?}, which is not held",
                StripeId {
                    cycle,
                    stripe: first
                }
            );
        };
        let bits = entry.get_mut();
        let before = bits.count;
        for stripe in stripes {
            bits.release(cycle, stripe);
        }
        self.held -= before - bits.count;
        if bits.count == 0 {
            let mut words = entry.remove().rest;
            debug_assert!(words.iter().all(|&w| w == 0));
            if words.capacity() > 0 && self.spare.len() < 64 {
                words.fill(0);
                self.spare.push(words);
            }
        }
    }

    /// Whether stripe `s` is held.
    pub fn is_locked(&self, s: StripeId) -> bool {
        if let Some(k) = self.small_slot(s.cycle) {
            let bits = self.small[k].1;
            return s.stripe < 64 && bits & (1 << s.stripe) != 0;
        }
        self.cycles.get(&s.cycle).is_some_and(|b| b.get(s.stripe))
    }

    /// Number of stripes held.
    pub fn held(&self) -> usize {
        self.held
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(v: &[(u64, usize)]) -> Vec<StripeId> {
        v.iter()
            .map(|&(cycle, stripe)| StripeId { cycle, stripe })
            .collect()
    }

    #[test]
    fn all_or_nothing() {
        let mut l = StripeLocks::new();
        let a = ids(&[(0, 1), (0, 2)]);
        let b = ids(&[(0, 2), (0, 3)]);
        let c = ids(&[(1, 2)]);
        assert!(l.try_lock(&a));
        // b overlaps a on (0, 2): refused, and (0, 3) stays free.
        assert!(!l.try_lock(&b));
        assert!(!l.is_locked(StripeId {
            cycle: 0,
            stripe: 3
        }));
        // Same stripe index in another cycle is another stripe.
        assert!(l.try_lock(&c));
        assert_eq!(l.held(), 3);
        l.unlock(&a);
        assert!(l.try_lock(&b));
        l.unlock(&b);
        l.unlock(&c);
        assert_eq!(l.held(), 0);
        assert!(l.try_lock(&[]));
    }

    #[test]
    #[should_panic(expected = "not held")]
    fn unlocking_what_is_not_held_is_a_bug() {
        let mut l = StripeLocks::new();
        l.unlock(&ids(&[(0, 0)]));
    }

    #[test]
    fn per_cycle_calls_match_the_general_ones() {
        // The same random plans (stripes of one cycle each) through try_lock/unlock and
        // through try_lock_in/unlock_in (or, for stripes below 64, try_lock_bits/unlock_bits
        // in a third table): the same answers and the same stripes held, always, and those of
        // a plain set of held stripes. Twelve cycles, four of them on each of three slots of
        // the direct-mapped table (so that cycles find their slot taken), and stripes up to
        // 150 (past the inline word) move cycles between the table and the map both ways.
        let mut by_slot: std::collections::BTreeMap<usize, Vec<u64>> = Default::default();
        for c in 0..10_000u64 {
            by_slot.entry(small_index(c)).or_default().push(c);
        }
        let cycles: Vec<u64> = by_slot
            .values()
            .take(3)
            .flat_map(|v| v[..4].iter().copied())
            .collect();
        assert_eq!(cycles.len(), 12);
        let (mut a, mut b, mut c) = (StripeLocks::new(), StripeLocks::new(), StripeLocks::new());
        // The bits and count of stripes all below 64, if they are.
        let bits = |stripes: &[usize]| {
            stripes
                .iter()
                .all(|&s| s < 64)
                .then(|| (stripes.iter().fold(0u64, |b, &s| b | 1 << s), stripes.len()))
        };
        let mut model: std::collections::HashSet<StripeId> = std::collections::HashSet::new();
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let mut rnd = |m: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % m
        };
        let mut held: Vec<(u64, Vec<usize>)> = Vec::new();
        for _ in 0..4000 {
            if rnd(3) > 0 || held.is_empty() {
                let cycle = cycles[rnd(12) as usize];
                let wide = rnd(4) == 0;
                let mut stripes: Vec<usize> = (0..rnd(5))
                    .map(|_| rnd(if wide { 150 } else { 64 }) as usize)
                    .collect();
                stripes.sort_unstable();
                stripes.dedup();
                let ids: Vec<StripeId> = stripes
                    .iter()
                    .map(|&stripe| StripeId { cycle, stripe })
                    .collect();
                let got = a.try_lock(&ids);
                assert_eq!(got, b.try_lock_in(cycle, stripes.iter().copied()));
                let by_bits = match bits(&stripes) {
                    Some((w, n)) => c.try_lock_bits(cycle, w, n),
                    None => c.try_lock_in(cycle, stripes.iter().copied()),
                };
                assert_eq!(got, by_bits);
                assert_eq!(got, ids.iter().all(|s| !model.contains(s)));
                if got {
                    model.extend(ids.iter().copied());
                    held.push((cycle, stripes));
                }
            } else {
                let (cycle, stripes) = held.swap_remove(rnd(held.len() as u64) as usize);
                let ids: Vec<StripeId> = stripes
                    .iter()
                    .map(|&stripe| StripeId { cycle, stripe })
                    .collect();
                a.unlock(&ids);
                match bits(&stripes) {
                    Some((w, n)) => c.unlock_bits(cycle, w, n),
                    None => c.unlock_in(cycle, stripes.iter().copied()),
                }
                b.unlock_in(cycle, stripes.into_iter());
                for s in &ids {
                    model.remove(s);
                }
            }
            assert_eq!(a.held(), b.held());
            assert_eq!(a.held(), c.held());
            assert_eq!(a.held(), model.len());
            for &cycle in &cycles {
                for stripe in 0..150 {
                    let s = StripeId { cycle, stripe };
                    assert_eq!(a.is_locked(s), b.is_locked(s));
                    assert_eq!(a.is_locked(s), c.is_locked(s));
                    assert_eq!(a.is_locked(s), model.contains(&s));
                }
            }
        }
    }

    #[test]
    #[should_panic(expected = "not held")]
    fn unlocking_a_stripe_twice_in_one_call_is_a_bug() {
        let mut l = StripeLocks::new();
        assert!(l.try_lock(&ids(&[(0, 1), (0, 2)])));
        l.unlock(&ids(&[(0, 1), (0, 1)]));
    }

    #[test]
    fn serialises_a_random_interleaving() {
        // Plans over 6 stripes; a tiny deterministic scheduler starts whatever can lock, and we
        // check that no two running plans ever share a stripe.
        let plans: Vec<Vec<StripeId>> = (0..40u64)
            .map(|i| {
                let mut v = ids(&[(0, (i % 6) as usize), (0, ((i * 7 + 3) % 6) as usize)]);
                v.sort();
                v.dedup();
                v
            })
            .collect();
        let mut l = StripeLocks::new();
        let mut running: Vec<usize> = Vec::new();
        let mut next = 0;
        let mut done = 0;
        let mut tick = 0u64;
        while done < plans.len() {
            tick += 1;
            while next < plans.len() && l.try_lock(&plans[next]) {
                running.push(next);
                next += 1;
            }
            for (i, &a) in running.iter().enumerate() {
                for &b in &running[i + 1..] {
                    assert!(plans[a].iter().all(|s| !plans[b].contains(s)));
                }
            }
            // Finish the oldest running plan.
            let finished = running.remove((tick as usize) % running.len());
            l.unlock(&plans[finished]);
            done += 1;
        }
        assert_eq!(l.held(), 0);
    }
}
