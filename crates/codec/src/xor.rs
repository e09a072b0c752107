//! XOR parity (RAID4/RAID5): `P = D_0 ^ D_1 ^ ... ^ D_{k-1}`.
//!
//! The data buffers and P together XOR to zero, so [`recover`] treats them
//! alike: any one of them is the XOR of the others.
//!
//! ```
//! let data = [vec![1u8, 2, 3], vec![4, 5, 6]];
//! let mut parity = vec![0u8; 3];
//! codec::xor::encode(&data, &mut parity).unwrap();
//! assert_eq!(parity, [1 ^ 4, 2 ^ 5, 3 ^ 6]);
//!
//! // Lose data buffer 0 and rebuild it.
//! let mut bufs = [vec![0u8; 3], data[1].clone(), parity.clone()];
//! codec::xor::recover(&mut bufs, &[0]).unwrap();
//! assert_eq!(bufs[0], data[0]);
//!
//! // Read-modify-write of buffer 1: only the old and new contents are read.
//! codec::xor::update(&mut parity, &data[1], &[9, 9, 9]).unwrap();
//! assert!(codec::xor::verify(&[&data[0][..], &[9, 9, 9]], &parity).unwrap());
//! ```

use crate::kernels::{self, DeltaJob, Table};
use crate::{check_erasures, gather, gather_mut, require, same_len, Buffer, CodecError, Isa};

/// The most data buffers one call accepts (a bound that keeps the pointer
/// table on the stack; any RAID5 width is far below it).
pub const MAX_DATA: usize = 1024;

/// Bytes checked per step by [`verify`] (the size of its stack scratch).
const VERIFY_BLOCK: usize = 4096;

/// Computes `parity = XOR of data`, using [`Isa::best`].
///
/// Errors: no data buffer, more than [`MAX_DATA`], or a length differing from
/// `data[0]` (reported as `Buffer::Index(i)` or `Buffer::P`).
pub fn encode<D: AsRef<[u8]>>(data: &[D], parity: &mut [u8]) -> Result<(), CodecError> {
    encode_with(Isa::best(), data, parity)
}

/// [`encode`] on a chosen instruction set.
pub fn encode_with<D: AsRef<[u8]>>(
    isa: Isa,
    data: &[D],
    parity: &mut [u8],
) -> Result<(), CodecError> {
    require(isa)?;
    check_count(data.len())?;
    let mut ptrs = Table::<*const u8, MAX_DATA>::new();
    let len = gather(data, &mut ptrs)?;
    same_len(Buffer::P, len, parity.len())?;
    // SAFETY: the pointers come from `data`'s slices, all `len` long; the
    // parity is borrowed mutably, so it overlaps none of them.
    unsafe {
        kernels::xor_many(
            isa,
            ptrs.as_slice().iter().copied(),
            parity.as_mut_ptr(),
            len,
            false,
        )
    };
    Ok(())
}

/// Whether `parity` equals the XOR of `data`, using [`Isa::best`]. Errors as
/// for [`encode`].
pub fn verify<D: AsRef<[u8]>>(data: &[D], parity: &[u8]) -> Result<bool, CodecError> {
    verify_with(Isa::best(), data, parity)
}

/// [`verify`] on a chosen instruction set.
pub fn verify_with<D: AsRef<[u8]>>(
    isa: Isa,
    data: &[D],
    parity: &[u8],
) -> Result<bool, CodecError> {
    require(isa)?;
    check_count(data.len())?;
    let mut ptrs = Table::<*const u8, MAX_DATA>::new();
    let len = gather(data, &mut ptrs)?;
    same_len(Buffer::P, len, parity.len())?;
    let ptrs = ptrs.as_slice();
    let mut scratch = [0u8; VERIFY_BLOCK];
    let mut off = 0;
    while off < len {
        let n = VERIFY_BLOCK.min(len - off);
        // SAFETY: every source is valid for `len >= off + n` bytes; the
        // scratch is a distinct local array of at least `n` bytes.
        unsafe {
            kernels::xor_many(
                isa,
                ptrs.iter()
                    .map(|p| p.add(off))
                    .chain(core::iter::once(parity.as_ptr().add(off))),
                scratch.as_mut_ptr(),
                n,
                false,
            )
        };
        if scratch[..n].iter().any(|&b| b != 0) {
            return Ok(false);
        }
        off += n;
    }
    Ok(true)
}

/// Rebuilds the erased buffer (at most one) as the XOR of the others, using
/// [`Isa::best`].
///
/// `bufs` holds the data buffers and the parity in any order (for RAID5:
/// `[D_0, .., D_{k-1}, P]`); only their XOR being zero matters. The erased
/// buffer's contents are ignored and overwritten; the others are only read.
/// An empty `erased` does nothing.
///
/// Errors: fewer than 2 or more than `MAX_DATA + 1` buffers, unequal lengths,
/// an erasure index out of range or repeated, more than one erasure.
pub fn recover<B: AsMut<[u8]>>(bufs: &mut [B], erased: &[usize]) -> Result<(), CodecError> {
    recover_with(Isa::best(), bufs, erased)
}

/// [`recover`] on a chosen instruction set.
pub fn recover_with<B: AsMut<[u8]>>(
    isa: Isa,
    bufs: &mut [B],
    erased: &[usize],
) -> Result<(), CodecError> {
    require(isa)?;
    let n = bufs.len();
    if n < 2 {
        return Err(CodecError::TooFewBuffers { actual: n, min: 2 });
    }
    check_count(n - 1)?;
    let [lost, _] = check_erasures(erased, n, 1)?;
    let mut ptrs = Table::<*mut u8, { MAX_DATA + 1 }>::new();
    let len = gather_mut(bufs, &mut ptrs)?;
    if erased.is_empty() {
        return Ok(());
    }
    debug_assert!(lost < n);
    let ptrs = ptrs.as_slice();
    // SAFETY: the pointers come from distinct `&mut` slices of `len` bytes;
    // the destination is excluded from the sources.
    unsafe {
        kernels::xor_many(
            isa,
            ptrs.iter()
                .enumerate()
                .filter(|&(i, _)| i != lost)
                .map(|(_, p)| p.cast_const()),
            ptrs[lost],
            len,
            false,
        )
    };
    Ok(())
}

/// Read-modify-write: `parity ^= old ^ new`, for a data buffer changing from
/// `old` to `new`, using [`Isa::best`]. No other data buffer is needed.
///
/// Errors: `old` (`Buffer::Old(0)`) or `new` (`Buffer::New(0)`) not as long
/// as `parity`.
pub fn update(parity: &mut [u8], old: &[u8], new: &[u8]) -> Result<(), CodecError> {
    update_with(Isa::best(), parity, old, new)
}

/// [`update`] on a chosen instruction set.
pub fn update_with(isa: Isa, parity: &mut [u8], old: &[u8], new: &[u8]) -> Result<(), CodecError> {
    require(isa)?;
    let len = parity.len();
    same_len(Buffer::Old(0), len, old.len())?;
    same_len(Buffer::New(0), len, new.len())?;
    let job = DeltaJob {
        old: old.as_ptr(),
        new: new.as_ptr(),
        p: parity.as_mut_ptr(),
        q: core::ptr::null_mut(),
        coef: 0,
        len,
    };
    // SAFETY: all three are `len` long; `parity` is borrowed mutably so it
    // overlaps neither input; it is updated in place.
    unsafe { kernels::delta(isa, &job) };
    Ok(())
}

fn check_count(k: usize) -> Result<(), CodecError> {
    if k == 0 {
        Err(CodecError::TooFewBuffers { actual: 0, min: 1 })
    } else if k > MAX_DATA {
        Err(CodecError::TooManyData { k, max: MAX_DATA })
    } else {
        Ok(())
    }
}
