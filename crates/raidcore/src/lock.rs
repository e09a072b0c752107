//! Stripe locks: a pure table an executor consults so that a plan that changes a stripe runs
//! alone on it, plans that only read a stripe run together, and plans on different stripes run
//! in parallel.
//!
//! A plan lists the stripes it needs ([`crate::Plan::locks`]: the stripes it writes and the ones
//! it reads to reconstruct; a rebuild locks its whole cycle) and says how it holds them
//! ([`crate::Plan::lock_mode`]): a read holds them *shared* ([`LockMode::Shared`]), any number
//! of reads of a stripe at once, healthy or degraded (a degraded read reconstructs from parity,
//! which only a plan that writes could change under it); a write, a rebuild cycle, a
//! deferred-parity flush and a repair hold theirs *exclusively* ([`LockMode::Exclusive`]). An
//! exclusive lock is refused while anybody holds one of its stripes, a shared one while a plan
//! holds one of them exclusively. [`StripeLocks::try_lock`] and
//! [`StripeLocks::try_lock_shared`] take all of a plan's stripes or none, so two plans can never
//! each hold half of what the other needs (no deadlock, no partial locking); a plan that does not
//! get its locks waits until another plan unlocks and tries again. The table is bounded by the
//! number of plans in flight.
//!
//! **Writer starvation** is the executor's business: the table has no queue, and readers that
//! keep overlapping on a stripe would keep a writer of it out forever. The simulator never lets
//! a plan overtake an older waiting plan of its cycle (a read that arrives after a waiting write
//! of its cycle waits behind it); the engine's served pool marks the stripes a waiting exclusive
//! locker wants and refuses new shared lockers of them until it got them
//! (`dev::serve_support`). Both are fair to writers at the price of a read arriving behind a
//! waiting write waiting for it, as with a writer-preferring read-write lock.
//!
//! Unlocking says the mode the stripes were taken in; unlocking a stripe that is not held in that
//! mode is a bug in the executor and panics (no stripe is ever both held shared and held
//! exclusively, and no reader count goes below zero).

use crate::array::StripeId;
use crate::fxhash::FxHashMap;

/// How a plan holds its stripes ([`crate::Plan::lock_mode`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LockMode {
    /// Alone: no other plan holds any of its stripes, in either mode (plans that write).
    Exclusive,
    /// Beside other shared holders, never beside an exclusive one (plans that only read).
    Shared,
}

/// The set of stripes currently held, and how.
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
///
/// The bitsets say which stripes are held at all, in either mode, so the exclusive paths
/// (a conflict is any bit set) read exactly what they read before shared locks existed. Who
/// holds a stripe shared is kept beside them: for a cycle in `small`, in `small_shared`
/// (same slot: the stripes held shared, and those of them with two readers or more, whose
/// count is in `readers`; one reader, the usual case, costs no map entry); for a cycle in the
/// map, every stripe held shared has its reader count in `readers`. A held stripe not marked
/// shared is held exclusively.
#[derive(Clone, Debug)]
pub struct StripeLocks {
    /// `(cycle, bits)` in slot `small_index(cycle)`: stripe `s < 64` of `cycle` is held if bit
    /// `s` is set. A slot with no bit set is free.
    small: [(u64, u64); SMALL_SLOTS],
    /// `(shared, multi)` of the cycle in the same slot of `small`: the held stripes held shared,
    /// and those of them held by two readers or more (counted in `readers`). Both zero for a
    /// free slot; `multi` within `shared` within the slot's bits.
    small_shared: [(u64, u64); SMALL_SLOTS],
    cycles: FxHashMap<u64, CycleBits>,
    /// Reader counts: of a `small` cycle's stripes with two readers or more, of every stripe of
    /// a mapped cycle held shared.
    readers: FxHashMap<StripeId, u32>,
    /// Stripes held, in either mode.
    held: usize,
    /// Stripes held shared (each once, whatever its number of readers).
    held_shared: usize,
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
            small_shared: [(0, 0); SMALL_SLOTS],
            cycles: FxHashMap::default(),
            readers: FxHashMap::default(),
            held: 0,
            held_shared: 0,
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

/// How many stripes at the start of `stripes` (not empty) are of its first stripe's cycle.
fn run_of(stripes: &[StripeId]) -> usize {
    let c = stripes[0].cycle;
    stripes.iter().take_while(|s| s.cycle == c).count()
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

    /// Moves the cycle in slot `k` of `small` to the map (a stripe past 63 is being locked),
    /// its single readers counted in `readers` from now on.
    fn small_to_map(&mut self, k: usize, cycle: u64) {
        let bits = std::mem::take(&mut self.small[k].1);
        let (shared, multi) = std::mem::take(&mut self.small_shared[k]);
        for stripe in BitStripes(shared & !multi) {
            let had = self.readers.insert(StripeId { cycle, stripe }, 1);
            debug_assert!(had.is_none(), "a single reader has no count yet");
        }
        let mut moved = Self::fresh(&mut self.spare);
        moved.first = bits;
        moved.count = bits.count_ones() as usize;
        self.cycles.insert(cycle, moved);
    }

    // ---- Taking ----------------------------------------------------------------------------

    /// Takes every stripe of `stripes` exclusively if none is held (in either mode); otherwise
    /// takes nothing and returns false. `stripes` must not repeat a stripe. Release with
    /// [`StripeLocks::unlock`].
    pub fn try_lock(&mut self, stripes: &[StripeId]) -> bool {
        self.try_lock_as(LockMode::Exclusive, stripes)
    }

    /// Takes every stripe of `stripes` shared if none is held exclusively (stripes other plans
    /// hold shared are joined); otherwise takes nothing and returns false. `stripes` must not
    /// repeat a stripe. Release with [`StripeLocks::unlock_shared`].
    pub fn try_lock_shared(&mut self, stripes: &[StripeId]) -> bool {
        self.try_lock_as(LockMode::Shared, stripes)
    }

    /// [`StripeLocks::try_lock`] or [`StripeLocks::try_lock_shared`], by `mode`.
    pub fn try_lock_as(&mut self, mode: LockMode, stripes: &[StripeId]) -> bool {
        // One look-up per run of stripes of the same cycle (plans list theirs sorted).
        let mut rest = stripes;
        while !rest.is_empty() {
            let run = run_of(rest);
            if self.any_conflict(mode, rest[0].cycle, rest[..run].iter().map(|s| s.stripe)) {
                return false;
            }
            rest = &rest[run..];
        }
        let mut rest = stripes;
        while !rest.is_empty() {
            let run = run_of(rest);
            let taken =
                self.try_lock_in_as(mode, rest[0].cycle, rest[..run].iter().map(|s| s.stripe));
            debug_assert!(taken, "stripes checked free were refused");
            rest = &rest[run..];
        }
        true
    }

    /// Whether a plan locking `stripes` of `cycle` in `mode` is refused: one of them is held
    /// (exclusive), or held exclusively (shared).
    fn any_conflict(
        &self,
        mode: LockMode,
        cycle: u64,
        mut stripes: impl Iterator<Item = usize>,
    ) -> bool {
        if let Some(k) = self.small_slot(cycle) {
            let mut bits = self.small[k].1;
            if mode == LockMode::Shared {
                bits &= !self.small_shared[k].0;
            }
            return stripes.any(|s| s < 64 && bits & (1 << s) != 0);
        }
        match self.cycles.get(&cycle) {
            Some(b) => stripes.any(|stripe| {
                b.get(stripe)
                    && (mode == LockMode::Exclusive
                        || !self.readers.contains_key(&StripeId { cycle, stripe }))
            }),
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
        self.try_lock_in_as(LockMode::Exclusive, cycle, stripes)
    }

    /// [`StripeLocks::try_lock_shared`] of stripes (indices) of one cycle.
    #[inline]
    pub fn try_lock_shared_in<I>(&mut self, cycle: u64, stripes: I) -> bool
    where
        I: Iterator<Item = usize> + Clone,
    {
        self.try_lock_in_as(LockMode::Shared, cycle, stripes)
    }

    /// [`StripeLocks::try_lock_in`] or [`StripeLocks::try_lock_shared_in`], by `mode`.
    #[inline]
    pub fn try_lock_in_as<I>(&mut self, mode: LockMode, cycle: u64, stripes: I) -> bool
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
                return self.try_lock_general(mode, cycle, stripes);
            }
            let m = 1u64 << s;
            assert!(add & m == 0, "stripe {s} of cycle {cycle} listed twice");
            add |= m;
            n += 1;
        }
        self.try_lock_bits_as(mode, cycle, add, n)
    }

    /// [`StripeLocks::try_lock_in`] of the stripes below 64 whose bits are set in `bits`, `n`
    /// of them. For a caller that keeps a plan's locks as a bit set (the simulator's memoised
    /// plans): no loop over the stripes, and the count comes with it (a population count is a
    /// dozen instructions on a baseline x86-64 target).
    #[inline]
    pub fn try_lock_bits(&mut self, cycle: u64, bits: u64, n: usize) -> bool {
        self.try_lock_bits_as(LockMode::Exclusive, cycle, bits, n)
    }

    /// [`StripeLocks::try_lock_shared_in`] of the stripes below 64 whose bits are set in
    /// `bits`, `n` of them (see [`StripeLocks::try_lock_bits`]).
    #[inline]
    pub fn try_lock_shared_bits(&mut self, cycle: u64, bits: u64, n: usize) -> bool {
        self.try_lock_bits_as(LockMode::Shared, cycle, bits, n)
    }

    /// [`StripeLocks::try_lock_bits`] or [`StripeLocks::try_lock_shared_bits`], by `mode`.
    /// One body for both, the mode tested where they differ: a caller that passes its mode
    /// at run time (the simulator) inlines one copy of the common path.
    // (Always: the simulator calls it with its mode known only at run time, and an out-of-line
    // call cost more than both modes' code.)
    #[inline(always)]
    pub fn try_lock_bits_as(&mut self, mode: LockMode, cycle: u64, bits: u64, n: usize) -> bool {
        debug_assert_eq!(bits.count_ones() as usize, n, "the count of `bits`");
        if bits == 0 {
            return true;
        }
        let k = small_index(cycle);
        let e = &mut self.small[k];
        if e.1 != 0 && e.0 == cycle {
            if e.1 & bits != 0 {
                // Held: refused, unless all of them are held shared and so is this plan.
                return mode == LockMode::Shared && self.join_readers(k, cycle, bits);
            }
            e.1 |= bits;
            if mode == LockMode::Shared {
                self.small_shared[k].0 |= bits;
                self.held_shared += n;
            }
            self.held += n;
            return true;
        }
        // A free slot, unless the cycle is in the map (it went there while its slot was taken).
        if e.1 == 0 && (self.cycles.is_empty() || !self.cycles.contains_key(&cycle)) {
            *e = (cycle, bits);
            debug_assert_eq!(self.small_shared[k], (0, 0), "a free slot has no readers");
            if mode == LockMode::Shared {
                self.small_shared[k].0 = bits;
                self.held_shared += n;
            }
            self.held += n;
            return true;
        }
        self.try_lock_general(mode, cycle, BitStripes(bits))
    }

    /// Slot `k` (cycle `cycle`) takes `bits` shared, some of them held already: if none is
    /// held exclusively, those count one reader more and the others are taken; otherwise
    /// nothing changes and the answer is false.
    #[inline(never)]
    fn join_readers(&mut self, k: usize, cycle: u64, bits: u64) -> bool {
        let joined = self.small[k].1 & bits;
        let (shared, multi) = &mut self.small_shared[k];
        if joined & !*shared != 0 {
            return false;
        }
        for stripe in BitStripes(joined) {
            let id = StripeId { cycle, stripe };
            if *multi & (1 << stripe) != 0 {
                let n = self
                    .readers
                    .get_mut(&id)
                    .expect("a stripe with two readers or more is counted");
                *n = n.checked_add(1).expect("reader count overflows");
            } else {
                *multi |= 1 << stripe;
                let had = self.readers.insert(id, 2);
                debug_assert!(had.is_none(), "a single reader has no count");
            }
        }
        let fresh = bits & !joined;
        self.small[k].1 |= fresh;
        *shared |= fresh;
        let n = fresh.count_ones() as usize;
        self.held += n;
        self.held_shared += n;
        true
    }

    /// [`StripeLocks::try_lock_in_as`] in every case (the map, a cycle moving from the table
    /// to the map).
    #[inline]
    fn try_lock_general<I>(&mut self, mode: LockMode, cycle: u64, stripes: I) -> bool
    where
        I: Iterator<Item = usize> + Clone,
    {
        match mode {
            LockMode::Exclusive => self.try_lock_in_general(cycle, stripes),
            LockMode::Shared => self.try_lock_shared_general(cycle, stripes),
        }
    }

    /// [`StripeLocks::try_lock_general`], exclusive.
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
            self.small_to_map(k, cycle);
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

    /// [`StripeLocks::try_lock_general`], shared.
    #[inline(never)]
    fn try_lock_shared_general<I>(&mut self, cycle: u64, stripes: I) -> bool
    where
        I: Iterator<Item = usize> + Clone,
    {
        if stripes.clone().next().is_none() {
            return true;
        }
        if let Some(k) = self.small_slot(cycle) {
            let writers = self.small[k].1 & !self.small_shared[k].0;
            if stripes.clone().any(|s| s < 64 && writers & (1 << s) != 0) {
                return false;
            }
            self.small_to_map(k, cycle);
        }
        let readers = &mut self.readers;
        let bits = match self.cycles.entry(cycle) {
            std::collections::hash_map::Entry::Occupied(e) => {
                let bits = e.into_mut();
                if stripes.clone().any(|stripe| {
                    bits.get(stripe) && !readers.contains_key(&StripeId { cycle, stripe })
                }) {
                    return false;
                }
                bits
            }
            std::collections::hash_map::Entry::Vacant(v) => v.insert(Self::fresh(&mut self.spare)),
        };
        let mut n = 0;
        for stripe in stripes {
            let id = StripeId { cycle, stripe };
            if bits.get(stripe) {
                let c = readers
                    .get_mut(&id)
                    .expect("a stripe held shared is counted");
                *c = c.checked_add(1).expect("reader count overflows");
            } else {
                bits.take(cycle, stripe);
                readers.insert(id, 1);
                n += 1;
            }
        }
        self.held += n;
        self.held_shared += n;
        true
    }

    // ---- Releasing -------------------------------------------------------------------------

    /// Releases stripes taken by one successful [`StripeLocks::try_lock`]. Panics if one of
    /// them is not held exclusively (a bug in the executor).
    pub fn unlock(&mut self, stripes: &[StripeId]) {
        self.unlock_as(LockMode::Exclusive, stripes)
    }

    /// Releases stripes taken by one successful [`StripeLocks::try_lock_shared`]. Panics if one
    /// of them is not held shared (a bug in the executor).
    pub fn unlock_shared(&mut self, stripes: &[StripeId]) {
        self.unlock_as(LockMode::Shared, stripes)
    }

    /// [`StripeLocks::unlock`] or [`StripeLocks::unlock_shared`], by `mode`.
    pub fn unlock_as(&mut self, mode: LockMode, stripes: &[StripeId]) {
        // One look-up per run of stripes of the same cycle (plans list theirs sorted; a
        // rebuild plan lists thousands of one cycle).
        let mut rest = stripes;
        while !rest.is_empty() {
            let run = run_of(rest);
            self.unlock_in_as(mode, rest[0].cycle, rest[..run].iter().map(|s| s.stripe));
            rest = &rest[run..];
        }
    }

    /// [`StripeLocks::unlock`] of stripes (indices) of one cycle, taken by one successful
    /// [`StripeLocks::try_lock_in`] (or [`StripeLocks::try_lock`]).
    #[inline]
    pub fn unlock_in(&mut self, cycle: u64, stripes: impl Iterator<Item = usize>) {
        self.unlock_in_as(LockMode::Exclusive, cycle, stripes)
    }

    /// [`StripeLocks::unlock_shared`] of stripes (indices) of one cycle, taken by one
    /// successful [`StripeLocks::try_lock_shared_in`] (or `try_lock_shared`).
    #[inline]
    pub fn unlock_shared_in(&mut self, cycle: u64, stripes: impl Iterator<Item = usize>) {
        self.unlock_in_as(LockMode::Shared, cycle, stripes)
    }

    /// [`StripeLocks::unlock_in`] or [`StripeLocks::unlock_shared_in`], by `mode`.
    #[inline]
    pub fn unlock_in_as(
        &mut self,
        mode: LockMode,
        cycle: u64,
        stripes: impl Iterator<Item = usize>,
    ) {
        if let Some(k) = self.small_slot(cycle) {
            let (mut bits, mut n) = (0u64, 0usize);
            for stripe in stripes {
                assert!(
                    stripe < 64 && bits & (1 << stripe) == 0,
                    "unlocking stripe {:?}, which is not held",
                    StripeId { cycle, stripe }
                );
                bits |= 1 << stripe;
                n += 1;
            }
            self.unlock_slot(mode, k, cycle, bits, n);
            return;
        }
        self.unlock_in_map(mode, cycle, stripes);
    }

    /// [`StripeLocks::unlock_in`] of the stripes below 64 whose bits are set in `bits`, `n` of
    /// them, taken by one successful [`StripeLocks::try_lock_bits`] (or `try_lock_in`).
    #[inline]
    pub fn unlock_bits(&mut self, cycle: u64, bits: u64, n: usize) {
        self.unlock_bits_as(LockMode::Exclusive, cycle, bits, n)
    }

    /// [`StripeLocks::unlock_shared_in`] of the stripes below 64 whose bits are set in `bits`,
    /// `n` of them, taken by one successful [`StripeLocks::try_lock_shared_bits`] (or
    /// `try_lock_shared_in`).
    #[inline]
    pub fn unlock_shared_bits(&mut self, cycle: u64, bits: u64, n: usize) {
        self.unlock_bits_as(LockMode::Shared, cycle, bits, n)
    }

    /// [`StripeLocks::unlock_bits`] or [`StripeLocks::unlock_shared_bits`], by `mode`.
    #[inline]
    pub fn unlock_bits_as(&mut self, mode: LockMode, cycle: u64, bits: u64, n: usize) {
        debug_assert_eq!(bits.count_ones() as usize, n, "the count of `bits`");
        if let Some(k) = self.small_slot(cycle) {
            self.unlock_slot(mode, k, cycle, bits, n);
            return;
        }
        self.unlock_in_map(mode, cycle, BitStripes(bits));
    }

    /// Releases `bits` (`n` stripes) of the cycle in slot `k`, held in `mode` by one plan.
    // (Always: the simulator calls it with its mode known only at run time, and an out-of-line
    // call cost more than both modes' code.)
    #[inline(always)]
    fn unlock_slot(&mut self, mode: LockMode, k: usize, cycle: u64, bits: u64, n: usize) {
        let held = self.small[k].1;
        let first = |w: u64| StripeId {
            cycle,
            stripe: w.trailing_zeros() as usize,
        };
        assert!(
            held & bits == bits,
            "unlocking stripe {:?}, which is not held",
            first(bits & !held)
        );
        match mode {
            LockMode::Exclusive => {
                // (Read only while some stripe is held shared at all: an exclusive-only run
                // touches nothing more than before shared locks existed.)
                assert!(
                    self.held_shared == 0 || self.small_shared[k].0 & bits == 0,
                    "unlocking stripe {:?} as exclusive, which is held shared",
                    first(bits & self.small_shared[k].0)
                );
            }
            LockMode::Shared => {
                let (shared, multi) = self.small_shared[k];
                assert!(
                    shared & bits == bits,
                    "unlocking stripe {:?}, which is not held shared",
                    first(bits & !shared)
                );
                if multi & bits != 0 {
                    return self.leave_readers(k, cycle, bits);
                }
                self.small_shared[k].0 = shared & !bits;
                self.held_shared -= n;
            }
        }
        // (A slot whose bits are all clear is free.)
        self.small[k].1 = held & !bits;
        self.held -= n;
    }

    /// [`StripeLocks::unlock_slot`] of stripes held shared when some of them have other
    /// readers left.
    #[inline(never)]
    fn leave_readers(&mut self, k: usize, cycle: u64, bits: u64) {
        let (shared, multi) = &mut self.small_shared[k];
        let mut gone = bits;
        for stripe in BitStripes(*multi & bits) {
            let id = StripeId { cycle, stripe };
            let n = self
                .readers
                .get_mut(&id)
                .expect("a stripe with two readers or more is counted");
            debug_assert!(*n >= 2);
            *n -= 1;
            if *n == 1 {
                self.readers.remove(&id);
                *multi &= !(1 << stripe);
            }
            gone &= !(1 << stripe);
        }
        self.small[k].1 &= !gone;
        *shared &= !gone;
        let n = gone.count_ones() as usize;
        self.held -= n;
        self.held_shared -= n;
    }

    /// [`StripeLocks::unlock_in_as`] of a cycle in the map.
    #[inline(never)]
    fn unlock_in_map(&mut self, mode: LockMode, cycle: u64, stripes: impl Iterator<Item = usize>) {
        let mut stripes = stripes.peekable();
        let Some(&first) = stripes.peek() else {
            return;
        };
        let std::collections::hash_map::Entry::Occupied(mut entry) = self.cycles.entry(cycle)
        else {
            panic!(
                "unlocking stripe {:?}, which is not held{}",
                StripeId {
                    cycle,
                    stripe: first
                },
                if mode == LockMode::Shared {
                    " shared"
                } else {
                    ""
                }
            );
        };
        let bits = entry.get_mut();
        let before = bits.count;
        let mut shared_gone = 0;
        match mode {
            LockMode::Exclusive => {
                // (A map look-up per stripe only while some stripe of a mapped cycle, or some
                // stripe with two readers, is held shared.)
                let any_readers = !self.readers.is_empty();
                for stripe in stripes {
                    let id = StripeId { cycle, stripe };
                    assert!(
                        !any_readers || !self.readers.contains_key(&id),
                        "unlocking stripe {id:?} as exclusive, which is held shared"
                    );
                    bits.release(cycle, stripe);
                }
            }
            LockMode::Shared => {
                for stripe in stripes {
                    let id = StripeId { cycle, stripe };
                    let Some(n) = self.readers.get_mut(&id) else {
                        panic!("unlocking stripe {id:?}, which is not held shared");
                    };
                    // (An entry counts one reader or more: it is removed at zero.)
                    *n -= 1;
                    if *n == 0 {
                        self.readers.remove(&id);
                        bits.release(cycle, stripe);
                        shared_gone += 1;
                    }
                }
            }
        }
        self.held -= before - bits.count;
        self.held_shared -= shared_gone;
        if bits.count == 0 {
            let mut words = entry.remove().rest;
            debug_assert!(words.iter().all(|&w| w == 0));
            if words.capacity() > 0 && self.spare.len() < 64 {
                words.fill(0);
                self.spare.push(words);
            }
        }
    }

    // ---- Questions -------------------------------------------------------------------------

    /// Whether stripe `s` is held, in either mode.
    pub fn is_locked(&self, s: StripeId) -> bool {
        if let Some(k) = self.small_slot(s.cycle) {
            let bits = self.small[k].1;
            return s.stripe < 64 && bits & (1 << s.stripe) != 0;
        }
        self.cycles.get(&s.cycle).is_some_and(|b| b.get(s.stripe))
    }

    /// How many plans hold stripe `s` shared (0: free, or held exclusively).
    pub fn readers(&self, s: StripeId) -> usize {
        if let Some(k) = self.small_slot(s.cycle) {
            if s.stripe >= 64 {
                return 0;
            }
            let m = 1u64 << s.stripe;
            let (shared, multi) = self.small_shared[k];
            return if shared & m == 0 {
                0
            } else if multi & m == 0 {
                1
            } else {
                self.readers[&s] as usize
            };
        }
        // (A cycle not in `small` has counts only if it is in the map.)
        self.readers.get(&s).map_or(0, |&n| n as usize)
    }

    /// Whether stripe `s` is held exclusively.
    pub fn is_locked_exclusive(&self, s: StripeId) -> bool {
        self.is_locked(s) && self.readers(s) == 0
    }

    /// Whether a plan locking stripe `s` in `mode` would be refused because of it.
    pub fn conflicts(&self, mode: LockMode, s: StripeId) -> bool {
        match mode {
            LockMode::Exclusive => self.is_locked(s),
            LockMode::Shared => self.is_locked_exclusive(s),
        }
    }

    /// Number of stripes held, in either mode (a stripe with several readers counts once).
    pub fn held(&self) -> usize {
        self.held
    }

    /// Number of stripes held shared (each once, whatever its number of readers).
    pub fn held_shared(&self) -> usize {
        self.held_shared
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

    // ---- Shared locks ----------------------------------------------------------------------

    /// The table's internal invariants (see [`StripeLocks`]), checked from scratch.
    fn assert_consistent(l: &StripeLocks) {
        let (mut held, mut shared) = (0usize, 0usize);
        let mut counted = 0usize;
        for (k, (&(cycle, bits), &(sh, multi))) in l.small.iter().zip(&l.small_shared).enumerate() {
            if bits == 0 {
                assert_eq!((sh, multi), (0, 0), "free slot {k} has readers");
                continue;
            }
            assert_eq!(
                small_index(cycle),
                k,
                "cycle {cycle} in another cycle's slot"
            );
            assert!(!l.cycles.contains_key(&cycle), "cycle {cycle} in both");
            assert_eq!(sh & !bits, 0, "slot {k}: a stripe shared but not held");
            assert_eq!(multi & !sh, 0, "slot {k}: a stripe counted but not shared");
            for stripe in BitStripes(multi) {
                let n = l.readers[&StripeId { cycle, stripe }];
                assert!(n >= 2, "a counted stripe has {n} readers");
                counted += 1;
            }
            held += bits.count_ones() as usize;
            shared += sh.count_ones() as usize;
        }
        for (&cycle, b) in &l.cycles {
            let mut n = b.first.count_ones() as usize;
            n += b
                .rest
                .iter()
                .map(|w| w.count_ones() as usize)
                .sum::<usize>();
            assert_eq!(n, b.count, "cycle {cycle}'s count");
            assert!(n > 0, "an empty cycle is kept in the map");
            held += n;
        }
        for (s, &n) in &l.readers {
            assert!(n >= 1, "{s:?} counted with no reader");
            if l.cycles.contains_key(&s.cycle) {
                assert!(l.cycles[&s.cycle].get(s.stripe), "{s:?} counted, not held");
                shared += 1;
                counted += 1;
            }
        }
        assert_eq!(counted, l.readers.len(), "reader counts of nothing held");
        assert_eq!(held, l.held, "stripes held");
        assert_eq!(shared, l.held_shared, "stripes held shared");
    }

    #[test]
    fn readers_share_and_writers_wait_for_them() {
        use LockMode::{Exclusive, Shared};
        let mut l = StripeLocks::new();
        let a = ids(&[(0, 1), (0, 2)]);
        let b = ids(&[(0, 2), (0, 3)]);
        assert!(l.try_lock_shared(&a));
        assert!(l.try_lock_shared(&b), "two readers of stripe (0, 2)");
        let two = StripeId {
            cycle: 0,
            stripe: 2,
        };
        assert_eq!(l.readers(two), 2);
        assert_eq!((l.held(), l.held_shared()), (3, 3));
        // A writer of any of them waits; a writer of another stripe does not.
        assert!(!l.try_lock(&ids(&[(0, 3)])));
        assert!(!l.try_lock_bits(0, 1 << 1, 1));
        assert!(l.try_lock(&ids(&[(0, 4)])));
        // A reader of a stripe held exclusively waits, and takes nothing else meanwhile.
        assert!(!l.try_lock_shared(&ids(&[(0, 3), (0, 4)])));
        assert_eq!(l.readers(two), 2);
        assert!(l.conflicts(Shared, ids(&[(0, 4)])[0]));
        assert!(!l.conflicts(Shared, two));
        assert!(l.conflicts(Exclusive, two));
        assert_consistent(&l);
        l.unlock_shared(&a);
        assert_eq!(l.readers(two), 1);
        assert!(!l.is_locked(ids(&[(0, 1)])[0]));
        assert!(!l.try_lock(&ids(&[(0, 2)])), "b still reads (0, 2)");
        l.unlock_shared(&b);
        assert!(l.try_lock(&ids(&[(0, 2)])));
        assert!(l.is_locked_exclusive(two));
        l.unlock(&ids(&[(0, 2), (0, 4)]));
        assert_eq!((l.held(), l.held_shared()), (0, 0));
        assert_consistent(&l);
    }

    #[test]
    #[should_panic(expected = "held shared")]
    fn unlocking_a_shared_stripe_as_exclusive_is_a_bug() {
        let mut l = StripeLocks::new();
        assert!(l.try_lock_shared(&ids(&[(0, 1)])));
        l.unlock(&ids(&[(0, 1)]));
    }

    #[test]
    #[should_panic(expected = "held shared")]
    fn unlocking_a_mapped_shared_stripe_as_exclusive_is_a_bug() {
        let mut l = StripeLocks::new();
        assert!(l.try_lock_shared(&ids(&[(0, 100)])));
        l.unlock(&ids(&[(0, 100)]));
    }

    #[test]
    #[should_panic(expected = "not held shared")]
    fn unlocking_an_exclusive_stripe_as_shared_is_a_bug() {
        let mut l = StripeLocks::new();
        assert!(l.try_lock(&ids(&[(0, 1)])));
        l.unlock_shared(&ids(&[(0, 1)]));
    }

    #[test]
    #[should_panic(expected = "not held shared")]
    fn unlocking_more_readers_than_there_are_is_a_bug() {
        let mut l = StripeLocks::new();
        assert!(l.try_lock_shared(&ids(&[(0, 100)])));
        assert!(l.try_lock_shared(&ids(&[(0, 100)])));
        l.unlock_shared(&ids(&[(0, 100)]));
        l.unlock_shared(&ids(&[(0, 100)]));
        l.unlock_shared(&ids(&[(0, 100)]));
    }

    /// Who holds a stripe in the model.
    #[derive(Clone, Copy, Debug, PartialEq)]
    enum Holder {
        Writer,
        Readers(u32),
    }

    /// Twelve cycles, four on each of three slots of the direct-mapped table (so that cycles
    /// find their slot taken and go to the map).
    fn colliding_cycles() -> Vec<u64> {
        let mut by_slot: std::collections::BTreeMap<usize, Vec<u64>> = Default::default();
        for c in 0..10_000u64 {
            by_slot.entry(small_index(c)).or_default().push(c);
        }
        by_slot
            .values()
            .take(3)
            .flat_map(|v| v[..4].iter().copied())
            .collect()
    }

    /// Stripes the property test locks: a few low ones (sharing is frequent), some around 64
    /// and some past the inline word (cycles move from the table to the map).
    const PROBED: [std::ops::Range<usize>; 3] = [0..8, 60..68, 140..146];

    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

        /// Random plans in either mode, locked and unlocked through the three forms of the
        /// API (slices of `StripeId`s, per-cycle indices, bit sets) on three tables, answer as
        /// a plain model does (a writer alone, readers counted), hold what it holds, and keep
        /// the table's invariants after every step.
        #[test]
        fn shared_and_exclusive_locks_match_a_model(
            steps in proptest::collection::vec(
                (
                    0..4u8,
                    0..12usize,
                    proptest::collection::vec(
                        prop_oneof![6 => PROBED[0].clone(), 2 => PROBED[1].clone(), 1 => PROBED[2].clone()],
                        0..5,
                    ),
                    any::<bool>(),
                    any::<prop::sample::Index>(),
                ),
                1..200,
            )
        ) {
            let cycles = colliding_cycles();
            let mut t = [StripeLocks::new(), StripeLocks::new(), StripeLocks::new()];
            let mut model: std::collections::HashMap<StripeId, Holder> = Default::default();
            let mut held: Vec<(LockMode, u64, Vec<usize>)> = Vec::new();
            let bits_of = |stripes: &[usize]| {
                stripes
                    .iter()
                    .all(|&s| s < 64)
                    .then(|| (stripes.iter().fold(0u64, |b, &s| b | 1 << s), stripes.len()))
            };
            for (what, ci, mut stripes, shared, pick) in steps {
                if what > 0 || held.is_empty() {
                    let mode = if shared { LockMode::Shared } else { LockMode::Exclusive };
                    let cycle = cycles[ci];
                    stripes.sort_unstable();
                    stripes.dedup();
                    let v: Vec<StripeId> =
                        stripes.iter().map(|&stripe| StripeId { cycle, stripe }).collect();
                    let want = v.iter().all(|s| {
                        matches!(
                            (mode, model.get(s)),
                            (_, None) | (LockMode::Shared, Some(Holder::Readers(_)))
                        )
                    });
                    let got = [
                        t[0].try_lock_as(mode, &v),
                        t[1].try_lock_in_as(mode, cycle, stripes.iter().copied()),
                        match bits_of(&stripes) {
                            Some((b, n)) => t[2].try_lock_bits_as(mode, cycle, b, n),
                            None => t[2].try_lock_in_as(mode, cycle, stripes.iter().copied()),
                        },
                    ];
                    prop_assert_eq!(got, [want; 3], "{:?} of {:?}", mode, v);
                    if want {
                        for s in v {
                            let h = match (mode, model.get(&s)) {
                                (LockMode::Exclusive, _) => Holder::Writer,
                                (LockMode::Shared, Some(Holder::Readers(n))) => Holder::Readers(n + 1),
                                (LockMode::Shared, _) => Holder::Readers(1),
                            };
                            model.insert(s, h);
                        }
                        held.push((mode, cycle, stripes));
                    }
                } else {
                    let (mode, cycle, stripes) = held.swap_remove(pick.index(held.len()));
                    let v: Vec<StripeId> =
                        stripes.iter().map(|&stripe| StripeId { cycle, stripe }).collect();
                    t[0].unlock_as(mode, &v);
                    t[1].unlock_in_as(mode, cycle, stripes.iter().copied());
                    match bits_of(&stripes) {
                        Some((b, n)) => t[2].unlock_bits_as(mode, cycle, b, n),
                        None => t[2].unlock_in_as(mode, cycle, stripes.iter().copied()),
                    }
                    for s in v {
                        match model[&s] {
                            Holder::Readers(n) if n > 1 => {
                                model.insert(s, Holder::Readers(n - 1));
                            }
                            _ => {
                                model.remove(&s);
                            }
                        }
                    }
                }
                let shared_held = model.values().filter(|h| matches!(h, Holder::Readers(_))).count();
                for l in &t {
                    assert_consistent(l);
                    prop_assert_eq!(l.held(), model.len());
                    prop_assert_eq!(l.held_shared(), shared_held);
                    for &cycle in &cycles {
                        for stripe in PROBED.iter().cloned().flatten() {
                            let s = StripeId { cycle, stripe };
                            let m = model.get(&s);
                            prop_assert_eq!(l.is_locked(s), m.is_some());
                            let readers = match m {
                                Some(Holder::Readers(n)) => *n as usize,
                                _ => 0,
                            };
                            prop_assert_eq!(l.readers(s), readers);
                            prop_assert_eq!(l.is_locked_exclusive(s), m == Some(&Holder::Writer));
                        }
                    }
                }
            }
            for (mode, cycle, stripes) in held {
                for l in &mut t {
                    l.unlock_in_as(mode, cycle, stripes.iter().copied());
                }
            }
            for l in &t {
                assert_consistent(l);
                prop_assert_eq!(l.held(), 0);
                prop_assert!(l.readers.is_empty() && l.cycles.is_empty());
            }
        }
    }

    #[test]
    fn readers_run_together_and_writers_alone_in_a_random_interleaving() {
        // Plans over 6 stripes, one in three a writer; a tiny deterministic scheduler starts
        // whatever can lock, and we check that a running writer never shares a stripe with
        // another running plan, and that readers did run side by side on a stripe.
        let plans: Vec<(LockMode, Vec<StripeId>)> = (0..60u64)
            .map(|i| {
                let mut v = ids(&[(0, (i % 6) as usize), (0, ((i * 7 + 3) % 6) as usize)]);
                v.sort();
                v.dedup();
                let mode = if i % 3 == 0 {
                    LockMode::Exclusive
                } else {
                    LockMode::Shared
                };
                (mode, v)
            })
            .collect();
        let mut l = StripeLocks::new();
        let mut running: Vec<usize> = Vec::new();
        let (mut next, mut done, mut tick, mut overlapped) = (0, 0, 0u64, 0);
        while done < plans.len() {
            tick += 1;
            while next < plans.len() && l.try_lock_as(plans[next].0, &plans[next].1) {
                running.push(next);
                next += 1;
            }
            for (i, &a) in running.iter().enumerate() {
                for &b in &running[i + 1..] {
                    let share = plans[a].1.iter().any(|s| plans[b].1.contains(s));
                    if share {
                        assert!(
                            plans[a].0 == LockMode::Shared && plans[b].0 == LockMode::Shared,
                            "a writer ran beside another plan of its stripes"
                        );
                        overlapped += 1;
                    }
                }
            }
            let finished = running.remove((tick as usize) % running.len());
            l.unlock_as(plans[finished].0, &plans[finished].1);
            done += 1;
        }
        assert_eq!(l.held(), 0);
        assert!(
            overlapped > 0,
            "no two readers of a stripe ever ran together"
        );
    }
}
