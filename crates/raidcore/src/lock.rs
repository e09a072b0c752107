//! Stripe locks: a pure table an executor consults so that plans touching a common stripe run
//! one after the other while plans on different stripes run in parallel.
//!
//! A plan lists the stripes it needs ([`crate::Plan::locks`]: the stripes it writes and the ones
//! it reads to reconstruct; a rebuild locks its whole cycle). [`StripeLocks::try_lock`] takes
//! all of them or none, so two plans can never each hold half of what the other needs (no
//! deadlock, no partial locking); a plan that does not get its locks waits until another plan
//! unlocks and tries again. Reads lock too: a degraded read reconstructs from parity, which must
//! not change under it. The table is bounded by the number of plans in flight.

use std::collections::HashSet;
use std::hash::{BuildHasherDefault, Hasher};

use crate::array::StripeId;

/// The lock table's hasher: one multiply and rotate per word (the FxHash idea) instead of
/// SipHash, which showed in profiles of small NBD requests (every request looks up and inserts
/// its stripes twice). SipHash's protection against chosen keys buys nothing here: the table
/// never holds more than the plans in flight (bounded by the servers' queues), so even keys
/// that all collide cost a short probe, not a denial of service.
#[derive(Clone, Copy, Debug, Default)]
struct StripeHasher(u64);

impl Hasher for StripeHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }
    fn write_u64(&mut self, n: u64) {
        // An odd constant with well-spread bits (2^64 / golden ratio).
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

/// The set of stripes currently held.
#[derive(Clone, Debug, Default)]
pub struct StripeLocks {
    held: HashSet<StripeId, BuildHasherDefault<StripeHasher>>,
}

impl StripeLocks {
    /// An empty table.
    pub fn new() -> StripeLocks {
        StripeLocks::default()
    }

    /// Takes every stripe of `stripes` if none is held; otherwise takes nothing and returns
    /// false. `stripes` must not repeat a stripe.
    pub fn try_lock(&mut self, stripes: &[StripeId]) -> bool {
        if stripes.iter().any(|s| self.held.contains(s)) {
            return false;
        }
        for s in stripes {
            let fresh = self.held.insert(*s);
            assert!(fresh, "stripe {s:?} listed twice");
        }
        true
    }

    /// Releases stripes taken by one successful [`StripeLocks::try_lock`]. Panics if one of
    /// them is not held (a bug in the executor).
    pub fn unlock(&mut self, stripes: &[StripeId]) {
        for s in stripes {
            assert!(
                self.held.remove(s),
                "unlocking stripe {s:?}, which is not held"
            );
        }
    }

    /// Whether stripe `s` is held.
    pub fn is_locked(&self, s: StripeId) -> bool {
        self.held.contains(&s)
    }

    /// Number of stripes held.
    pub fn held(&self) -> usize {
        self.held.len()
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
