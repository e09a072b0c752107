//! A small, fast, non-cryptographic hasher for the hot tables keyed by small integers: places
//! of a cycle here (RAID+ over 59 disks has 24,000 of them, hashed for every failure set the
//! stride computation considers), stripe locks and per-place values in raidcore, the
//! simulator's tables.
//!
//! Why not `std`'s default: SipHash-1-3 is DoS-resistant, which these tables do not need (their
//! keys are disk, row, cycle, stripe and place numbers computed by the code, not chosen by an
//! attacker), and it showed at 7-25 % in simulator profiles. Why not a crate: this is the whole
//! of it (the multiply-rotate step of rustc's FxHasher), and these crates keep their
//! dependencies minimal.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

/// FxHash: `h = (rotl(h, 5) ^ word) * K` per word written.
#[derive(Clone, Copy, Default)]
pub struct FxHasher {
    hash: u64,
}

const K: u64 = 0x51_7c_c1_b7_27_22_0a_95;

impl FxHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.hash = (self.hash.rotate_left(5) ^ word).wrapping_mul(K);
    }
}

impl Hasher for FxHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut w = [0u8; 8];
            w[..chunk.len()].copy_from_slice(chunk);
            self.add(u64::from_le_bytes(w));
        }
    }
    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }
    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.add(u64::from(i));
    }
    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }
    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }
    #[inline]
    fn finish(&self) -> u64 {
        self.hash
    }
}

/// Builds [`FxHasher`]s.
pub type FxBuildHasher = BuildHasherDefault<FxHasher>;
/// A `HashMap` with [`FxHasher`].
pub type FxHashMap<K, V> = HashMap<K, V, FxBuildHasher>;
/// A `HashSet` with [`FxHasher`].
pub type FxHashSet<K> = HashSet<K, FxBuildHasher>;

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::BuildHasher;

    #[test]
    fn distinct_small_keys_hash_apart_and_maps_work() {
        let b = FxBuildHasher::default();
        let hs: std::collections::BTreeSet<u64> = (0..1000u64).map(|k| b.hash_one(k)).collect();
        assert_eq!(hs.len(), 1000);
        let mut m: FxHashMap<(u64, usize), u32> = FxHashMap::default();
        for i in 0..100u64 {
            m.insert((i, i as usize * 3), i as u32);
        }
        assert_eq!(m[&(7, 21)], 7);
        assert_eq!(m.len(), 100);
    }
}
