//! XOR parity groups and the peeling decoder (for RM2 and any other layout
//! made of overlapping XOR groups).
//!
//! A *group* is a list of buffer ids (positions in the buffer slice) whose
//! XOR is zero: some data buffers plus the parity covering them. Groups may
//! overlap (in RM2 every data buffer belongs to two). The layout describes
//! the groups; this module only does the arithmetic.
//!
//! [`recover`] peels: while erased buffers remain, it finds a group with
//! exactly one erased member and rebuilds that member as the XOR of the
//! group's other members. If no such group exists while erasures remain, it
//! stops with [`CodecError::Unrecoverable`]. All arguments are checked before
//! anything is written, but a stuck decode may already have rebuilt some
//! buffers (correctly); [`check_recoverable`] answers the question without
//! touching data. Encoding parity is recovery with the parity buffers
//! erased.
//!
//! ```
//! // Buffers 0..4 are data; 4 = 0^1 and 5 = 2^3 (rows), 6 = 0^2 and 7 = 1^3
//! // (columns).
//! let groups: [&[usize]; 4] = [&[0, 1, 4], &[2, 3, 5], &[0, 2, 6], &[1, 3, 7]];
//! let mut bufs: Vec<Vec<u8>> = (0..8u8).map(|i| vec![i; 16]).collect();
//! codec::groups::recover(&groups, &mut bufs, &[4, 5, 6, 7]).unwrap(); // encode
//! let want = bufs.clone();
//! // Lose data 0 and 1, which share a row group: peeling goes via columns.
//! bufs[0].fill(0xee);
//! bufs[1].fill(0xee);
//! codec::groups::recover(&groups, &mut bufs, &[0, 1]).unwrap();
//! assert_eq!(bufs, want);
//! ```

use crate::kernels::{self, Table};
use crate::{gather, gather_mut, require, CodecError, Isa};

/// The most buffers one call may address (a bound that keeps the decoder's
/// pointer table and erasure bitmap on the stack).
pub const MAX_BUFFERS: usize = 1024;

/// Bytes checked per step by [`verify`] (the size of its stack scratch).
const VERIFY_BLOCK: usize = 4096;

/// Rebuilds the `erased` buffers of `bufs` by peeling the XOR `groups`, using
/// [`Isa::best`]. Erased buffers' contents are ignored and overwritten; the
/// others are only read.
///
/// Errors: more than [`MAX_BUFFERS`] buffers; unequal lengths; a group with
/// fewer than two members, a repeated member or a member out of range
/// ([`CodecError::InvalidGroup`], [`CodecError::IndexOutOfRange`]); an erasure
/// out of range or repeated; peeling stuck ([`CodecError::Unrecoverable`]).
pub fn recover<G: AsRef<[usize]>, B: AsMut<[u8]>>(
    groups: &[G],
    bufs: &mut [B],
    erased: &[usize],
) -> Result<(), CodecError> {
    recover_with(Isa::best(), groups, bufs, erased)
}

/// [`recover`] on a chosen instruction set.
pub fn recover_with<G: AsRef<[usize]>, B: AsMut<[u8]>>(
    isa: Isa,
    groups: &[G],
    bufs: &mut [B],
    erased: &[usize],
) -> Result<(), CodecError> {
    require(isa)?;
    let count = bufs.len();
    check_count(count)?;
    let mut ptrs = Table::<*mut u8, MAX_BUFFERS>::new();
    let len = gather_mut(bufs, &mut ptrs)?;
    let ptrs = ptrs.as_slice();
    peel(groups, count, erased, |members, target| {
        debug_assert!(members.contains(&target));
        let sources = members
            .iter()
            .filter(|&&m| m != target)
            .map(|&m| ptrs[m].cast_const());
        // SAFETY: the pointers come from distinct `&mut` slices of `len`
        // bytes (members were checked to be in range and distinct); the
        // target is excluded from the sources.
        unsafe { kernels::xor_many(isa, sources, ptrs[target], len, false) };
    })
}

/// Whether peeling `groups` over `count` buffers can rebuild `erased`, without
/// any data: `Ok(())` exactly when [`recover`] would succeed. For layout
/// property checks ("every pair of failed disks is recoverable").
pub fn check_recoverable<G: AsRef<[usize]>>(
    groups: &[G],
    count: usize,
    erased: &[usize],
) -> Result<(), CodecError> {
    check_count(count)?;
    peel(groups, count, erased, |_, _| {})
}

/// The position of the first group whose members do not XOR to zero, or
/// `None` when every group is consistent; using [`Isa::best`].
///
/// Errors: as for [`recover`], except that there are no erasures.
pub fn verify<G: AsRef<[usize]>, D: AsRef<[u8]>>(
    groups: &[G],
    bufs: &[D],
) -> Result<Option<usize>, CodecError> {
    verify_with(Isa::best(), groups, bufs)
}

/// [`verify`] on a chosen instruction set.
pub fn verify_with<G: AsRef<[usize]>, D: AsRef<[u8]>>(
    isa: Isa,
    groups: &[G],
    bufs: &[D],
) -> Result<Option<usize>, CodecError> {
    require(isa)?;
    let count = bufs.len();
    check_count(count)?;
    let mut ptrs = Table::<*const u8, MAX_BUFFERS>::new();
    let len = gather(bufs, &mut ptrs)?;
    let ptrs = ptrs.as_slice();
    let mut seen = BitSet::new();
    for (g, group) in groups.iter().enumerate() {
        check_group(g, group.as_ref(), count, &mut seen)?;
    }
    let mut scratch = [0u8; VERIFY_BLOCK];
    for (g, group) in groups.iter().enumerate() {
        let members = group.as_ref();
        let mut off = 0;
        while off < len {
            let n = VERIFY_BLOCK.min(len - off);
            // A member index could only be out of range here if `as_ref`
            // answered differently than during the check above.
            if members.iter().any(|&m| m >= count) {
                return Err(CodecError::InvalidGroup {
                    group: g,
                    reason: "members changed during the call",
                });
            }
            // SAFETY: members are in range, so each pointer is a buffer of
            // `len >= off + n` bytes; the scratch is local.
            unsafe {
                kernels::xor_many(
                    isa,
                    members.iter().map(|&m| ptrs[m].add(off)),
                    scratch.as_mut_ptr(),
                    n,
                    false,
                )
            };
            if scratch[..n].iter().any(|&b| b != 0) {
                return Ok(Some(g));
            }
            off += n;
        }
    }
    Ok(None)
}

fn check_count(count: usize) -> Result<(), CodecError> {
    if count > MAX_BUFFERS {
        Err(CodecError::TooManyBuffers {
            count,
            max: MAX_BUFFERS,
        })
    } else {
        Ok(())
    }
}

/// Checks one group: at least two members, all below `count`, none repeated.
/// `seen` must be empty on entry and is left empty.
fn check_group(
    g: usize,
    members: &[usize],
    count: usize,
    seen: &mut BitSet,
) -> Result<(), CodecError> {
    if members.len() < 2 {
        return Err(CodecError::InvalidGroup {
            group: g,
            reason: "fewer than two members",
        });
    }
    let mut result = Ok(());
    for &m in members {
        if m >= count {
            result = Err(CodecError::IndexOutOfRange { index: m, count });
            break;
        }
        if seen.contains(m) {
            result = Err(CodecError::InvalidGroup {
                group: g,
                reason: "a member is listed twice",
            });
            break;
        }
        seen.insert(m);
    }
    for &m in members {
        if m < count {
            seen.remove(m);
        }
    }
    debug_assert!(seen.is_empty());
    result
}

/// The peeling loop. Validates everything first, then calls
/// `rebuild(group members, target)` once per erased buffer, in an order in
/// which each target's group has no other erased member at that moment.
fn peel<G: AsRef<[usize]>>(
    groups: &[G],
    count: usize,
    erased: &[usize],
    mut rebuild: impl FnMut(&[usize], usize),
) -> Result<(), CodecError> {
    debug_assert!(count <= MAX_BUFFERS);
    let mut missing = BitSet::new();
    for (g, group) in groups.iter().enumerate() {
        check_group(g, group.as_ref(), count, &mut missing)?;
    }
    for &e in erased {
        if e >= count {
            return Err(CodecError::IndexOutOfRange { index: e, count });
        }
        if missing.contains(e) {
            return Err(CodecError::DuplicateErasure { index: e });
        }
        missing.insert(e);
    }
    let mut remaining = erased.len();
    while remaining > 0 {
        let mut progress = false;
        for (g, group) in groups.iter().enumerate() {
            let members = group.as_ref();
            let mut target = None;
            let mut lost = 0;
            for &m in members {
                if m >= count {
                    // Only possible if `as_ref` changed its answer.
                    return Err(CodecError::InvalidGroup {
                        group: g,
                        reason: "members changed during the call",
                    });
                }
                if missing.contains(m) {
                    lost += 1;
                    target = Some(m);
                    if lost > 1 {
                        break;
                    }
                }
            }
            if let (1, Some(t)) = (lost, target) {
                rebuild(members, t);
                missing.remove(t);
                remaining -= 1;
                progress = true;
            }
        }
        if !progress {
            return Err(CodecError::Unrecoverable {
                remaining,
                first: missing.first().unwrap_or(0),
            });
        }
    }
    debug_assert!(missing.is_empty());
    Ok(())
}

/// A fixed-size set of buffer ids below [`MAX_BUFFERS`].
struct BitSet([u64; MAX_BUFFERS / 64]);

impl BitSet {
    fn new() -> Self {
        BitSet([0; MAX_BUFFERS / 64])
    }
    fn contains(&self, i: usize) -> bool {
        self.0[i / 64] & (1 << (i % 64)) != 0
    }
    fn insert(&mut self, i: usize) {
        self.0[i / 64] |= 1 << (i % 64);
    }
    fn remove(&mut self, i: usize) {
        self.0[i / 64] &= !(1 << (i % 64));
    }
    fn is_empty(&self) -> bool {
        self.0.iter().all(|&w| w == 0)
    }
    fn first(&self) -> Option<usize> {
        self.0
            .iter()
            .enumerate()
            .find(|(_, &w)| w != 0)
            .map(|(i, w)| i * 64 + w.trailing_zeros() as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bitset_basics() {
        let mut s = BitSet::new();
        assert!(s.is_empty());
        assert_eq!(s.first(), None);
        s.insert(1000);
        s.insert(70);
        assert!(s.contains(70) && s.contains(1000) && !s.contains(71));
        assert_eq!(s.first(), Some(70));
        s.remove(70);
        assert_eq!(s.first(), Some(1000));
        s.remove(1000);
        assert!(s.is_empty());
    }
}
