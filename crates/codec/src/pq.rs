//! RAID6 P+Q over GF(2^8) (polynomial 0x11d, generator {02}):
//! `P = sum D_i` and `Q = sum g^i * D_i` for data index i = 0..k-1, byte for
//! byte what Linux MD (`lib/raid6`) and ISA-L (`pq_gen`) produce.
//!
//! Recovery works on one slice `[D_0, .., D_{k-1}, P, Q]` (the order MD and
//! ISA-L use) plus the list of erased positions; any one or two may be lost.
//!
//! ```
//! let data = [vec![1u8; 8], vec![2; 8], vec![3; 8]];
//! let (mut p, mut q) = (vec![0u8; 8], vec![0u8; 8]);
//! codec::pq::encode(&data, &mut p, &mut q).unwrap();
//!
//! // Lose data buffers 0 and 2, rebuild them from D_1, P and Q.
//! let mut bufs = vec![vec![0u8; 8], data[1].clone(), vec![0u8; 8], p, q];
//! codec::pq::recover(&mut bufs, &[0, 2]).unwrap();
//! assert_eq!(bufs[0], data[0]);
//! assert_eq!(bufs[2], data[2]);
//! ```

use crate::gf;
use crate::kernels::{self, DeltaJob, PqJob, PqOut, Table};
use crate::{check_erasures, gather, gather_mut, require, same_len, Buffer, CodecError, Isa};

/// The most data buffers P+Q supports: g^255 = g^0, so a 256th data buffer
/// would share its Q coefficient with buffer 0 and pairs could not be solved.
pub const MAX_DATA: usize = 255;

/// Bytes checked per step by [`verify`] (its stack scratch holds two).
const VERIFY_BLOCK: usize = 4096;

/// Bytes per step of [`update_many`], so that P and Q stay in cache while
/// every delta is applied to them.
const UPDATE_BLOCK: usize = 16 * 1024;

/// The outcome of [`verify`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PqCheck {
    /// P equals the XOR of the data.
    pub p_ok: bool,
    /// Q equals `sum g^i * D_i`.
    pub q_ok: bool,
}

impl PqCheck {
    /// Both parities match the data.
    pub fn is_consistent(&self) -> bool {
        self.p_ok && self.q_ok
    }
}

/// One data buffer's change for [`update_many`]: data buffer `index` goes
/// from `old` to `new`.
#[derive(Debug, Clone, Copy)]
pub struct Delta<'a> {
    /// The data index i (its Q coefficient is g^i).
    pub index: usize,
    /// The contents before the write.
    pub old: &'a [u8],
    /// The contents after the write.
    pub new: &'a [u8],
}

/// Computes P and Q of `data` (1 to [`MAX_DATA`] buffers) in one pass, using
/// [`Isa::best`].
///
/// Errors: no data, more than 255 buffers, unequal lengths (`Buffer::Index`,
/// `Buffer::P`, `Buffer::Q`).
pub fn encode<D: AsRef<[u8]>>(data: &[D], p: &mut [u8], q: &mut [u8]) -> Result<(), CodecError> {
    encode_with(Isa::best(), data, p, q)
}

/// [`encode`] on a chosen instruction set.
pub fn encode_with<D: AsRef<[u8]>>(
    isa: Isa,
    data: &[D],
    p: &mut [u8],
    q: &mut [u8],
) -> Result<(), CodecError> {
    require(isa)?;
    check_data_count(data.len())?;
    let mut ptrs = Table::<*const u8, MAX_DATA>::new();
    let len = gather(data, &mut ptrs)?;
    same_len(Buffer::P, len, p.len())?;
    same_len(Buffer::Q, len, q.len())?;
    let job = PqJob {
        srcs: ptrs.as_slice(),
        len,
        out: PqOut::Gen {
            p: p.as_mut_ptr(),
            q: q.as_mut_ptr(),
        },
    };
    // SAFETY: sources are `data`'s slices, all `len` long; `p` and `q` are
    // distinct `&mut` borrows of `len` bytes.
    unsafe { kernels::pq(isa, &job) };
    Ok(())
}

/// Checks P and Q against `data`, using [`Isa::best`]; works in 4 KiB steps
/// with a stack scratch (no allocation). Errors as for [`encode`].
pub fn verify<D: AsRef<[u8]>>(data: &[D], p: &[u8], q: &[u8]) -> Result<PqCheck, CodecError> {
    verify_with(Isa::best(), data, p, q)
}

/// [`verify`] on a chosen instruction set.
pub fn verify_with<D: AsRef<[u8]>>(
    isa: Isa,
    data: &[D],
    p: &[u8],
    q: &[u8],
) -> Result<PqCheck, CodecError> {
    require(isa)?;
    check_data_count(data.len())?;
    let mut ptrs = Table::<*const u8, MAX_DATA>::new();
    let len = gather(data, &mut ptrs)?;
    same_len(Buffer::P, len, p.len())?;
    same_len(Buffer::Q, len, q.len())?;
    let mut shifted = Table::<*const u8, MAX_DATA>::new();
    let mut scratch_p = [0u8; VERIFY_BLOCK];
    let mut scratch_q = [0u8; VERIFY_BLOCK];
    let mut check = PqCheck {
        p_ok: true,
        q_ok: true,
    };
    let mut off = 0;
    while off < len && (check.p_ok || check.q_ok) {
        let n = VERIFY_BLOCK.min(len - off);
        shifted.clear();
        for &base in ptrs.as_slice() {
            // SAFETY: `off < len`, inside each source.
            shifted.push(unsafe { base.add(off) });
        }
        let job = PqJob {
            srcs: shifted.as_slice(),
            len: n,
            out: PqOut::Gen {
                p: scratch_p.as_mut_ptr(),
                q: scratch_q.as_mut_ptr(),
            },
        };
        // SAFETY: each shifted source has `len - off >= n` bytes left; the
        // scratch arrays are local and `n <= VERIFY_BLOCK` long.
        unsafe { kernels::pq(isa, &job) };
        check.p_ok &= scratch_p[..n] == p[off..off + n];
        check.q_ok &= scratch_q[..n] == q[off..off + n];
        off += n;
    }
    Ok(check)
}

/// Rebuilds up to two erased buffers of `bufs = [D_0, .., D_{k-1}, P, Q]`
/// (k = `bufs.len() - 2`, 1 to 255), using [`Isa::best`]. Erased buffers'
/// contents are ignored and overwritten; the others are only read.
///
/// | erased | method |
/// |---|---|
/// | P | P = XOR of data |
/// | Q, or P and Q | one encode pass |
/// | D_x | D_x = P ^ XOR of the other data |
/// | D_x and P | one pass: `D_x = g^-x (Q ^ Q')`, `P = P' ^ D_x` |
/// | D_x and Q | one pass: `D_x = P ^ P'`, `Q = Q' ^ g^x D_x` |
/// | D_x and D_y | one pass: `D_y = (g^x Pxy ^ Qxy) / (g^x ^ g^y)`, `D_x = Pxy ^ D_y` |
///
/// where `P'`, `Q'` are the parities of the surviving data (the lost taken as
/// zero), `Pxy = P ^ P'`, `Qxy = Q ^ Q'`.
///
/// Errors: fewer than 3 or more than 257 buffers, unequal lengths, an
/// erasure index out of range or repeated, more than two erasures.
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
    if n < 3 {
        return Err(CodecError::TooFewBuffers { actual: n, min: 3 });
    }
    let k = n - 2;
    check_data_count(k)?;
    let [a, b] = check_erasures(erased, n, 2)?;
    let mut ptrs = Table::<*mut u8, { MAX_DATA + 2 }>::new();
    let len = gather_mut(bufs, &mut ptrs)?;
    let ptrs = ptrs.as_slice();
    let (p_idx, q_idx) = (k, k + 1);

    // The data sources, with erased ones replaced by null (= zero).
    let mut srcs = Table::<*const u8, MAX_DATA>::new();
    for (i, &d) in ptrs[..k].iter().enumerate() {
        srcs.push(if erased.contains(&i) {
            core::ptr::null()
        } else {
            d.cast_const()
        });
    }
    let srcs = srcs.as_slice();

    // SAFETY (for every kernel call below): all pointers come from distinct
    // `&mut` slices of `len` bytes; each output is an erased buffer, and
    // erased buffers are never used as inputs (they are null in `srcs` and
    // never passed as `p_in`/`q_in`).
    match erased.len() {
        0 => {}
        1 if a == p_idx => unsafe {
            kernels::xor_many(isa, srcs.iter().copied(), ptrs[p_idx], len, false)
        },
        1 if a == q_idx => unsafe {
            let out = PqOut::Gen {
                p: core::ptr::null_mut(),
                q: ptrs[q_idx],
            };
            kernels::pq(isa, &PqJob { srcs, len, out })
        },
        1 => unsafe {
            // D_a = P ^ the other data.
            let others = srcs.iter().copied().filter(|s| !s.is_null());
            let sources = others.chain(core::iter::once(ptrs[p_idx].cast_const()));
            kernels::xor_many(isa, sources, ptrs[a], len, false)
        },
        _ => {
            debug_assert!(a < b && b < n);
            let out = if a == p_idx {
                debug_assert_eq!(b, q_idx);
                PqOut::Gen {
                    p: ptrs[p_idx],
                    q: ptrs[q_idx],
                }
            } else if b == p_idx {
                // D_a and P: u = P', v = Q ^ Q' = g^a D_a.
                let c = inv_nonzero(gf::exp(a));
                PqOut::Combine {
                    p_in: core::ptr::null(),
                    q_in: ptrs[q_idx],
                    out1: ptrs[a],
                    out2: ptrs[p_idx],
                    m: [0, c, 1, c],
                }
            } else if b == q_idx {
                // D_a and Q: u = P ^ P' = D_a, v = Q'.
                PqOut::Combine {
                    p_in: ptrs[p_idx],
                    q_in: core::ptr::null(),
                    out1: ptrs[a],
                    out2: ptrs[q_idx],
                    m: [1, 0, gf::exp(a), 1],
                }
            } else {
                // D_a and D_b: u = Pxy, v = Qxy.
                let (ga, gb) = (gf::exp(a), gf::exp(b));
                debug_assert_ne!(ga, gb);
                let denom = inv_nonzero(ga ^ gb);
                let ga_denom = gf::mul(ga, denom);
                PqOut::Combine {
                    p_in: ptrs[p_idx],
                    q_in: ptrs[q_idx],
                    out1: ptrs[b],
                    out2: ptrs[a],
                    m: [ga_denom, denom, 1 ^ ga_denom, denom],
                }
            };
            unsafe { kernels::pq(isa, &PqJob { srcs, len, out }) }
        }
    }
    Ok(())
}

/// Read-modify-write of one data buffer: `P ^= old ^ new`,
/// `Q ^= g^index * (old ^ new)`, using [`Isa::best`]; one pass, reading only
/// `old`, `new`, P and Q.
///
/// Errors: `index >= 255`, or `q`, `old`, `new` not as long as `p`.
pub fn update(
    p: &mut [u8],
    q: &mut [u8],
    index: usize,
    old: &[u8],
    new: &[u8],
) -> Result<(), CodecError> {
    update_many_with(Isa::best(), p, q, &[Delta { index, old, new }])
}

/// [`update`] on a chosen instruction set.
pub fn update_with(
    isa: Isa,
    p: &mut [u8],
    q: &mut [u8],
    index: usize,
    old: &[u8],
    new: &[u8],
) -> Result<(), CodecError> {
    update_many_with(isa, p, q, &[Delta { index, old, new }])
}

/// Read-modify-write of several data buffers at once: applies every delta to
/// P and Q, block by block so that P and Q stay in cache, using
/// [`Isa::best`]. Deltas with the same index compose (apply in order).
///
/// Errors: an index `>= 255`, or any buffer not as long as `p`
/// (`Buffer::Q`, `Buffer::Old(i)`, `Buffer::New(i)`). Nothing is written on
/// error.
pub fn update_many(p: &mut [u8], q: &mut [u8], deltas: &[Delta<'_>]) -> Result<(), CodecError> {
    update_many_with(Isa::best(), p, q, deltas)
}

/// [`update_many`] on a chosen instruction set.
pub fn update_many_with(
    isa: Isa,
    p: &mut [u8],
    q: &mut [u8],
    deltas: &[Delta<'_>],
) -> Result<(), CodecError> {
    require(isa)?;
    let len = p.len();
    same_len(Buffer::Q, len, q.len())?;
    for (i, d) in deltas.iter().enumerate() {
        if d.index >= MAX_DATA {
            return Err(CodecError::IndexOutOfRange {
                index: d.index,
                count: MAX_DATA,
            });
        }
        same_len(Buffer::Old(i), len, d.old.len())?;
        same_len(Buffer::New(i), len, d.new.len())?;
    }
    let mut off = 0;
    while off < len {
        let n = UPDATE_BLOCK.min(len - off);
        for d in deltas {
            // SAFETY: every buffer is `len >= off + n` bytes long; `p` and
            // `q` are `&mut` borrows, so they overlap neither input nor each
            // other, and are updated in place.
            unsafe {
                let job = DeltaJob {
                    old: d.old.as_ptr().add(off),
                    new: d.new.as_ptr().add(off),
                    p: p.as_mut_ptr().add(off),
                    q: q.as_mut_ptr().add(off),
                    coef: gf::exp(d.index),
                    len: n,
                };
                kernels::delta(isa, &job);
            }
        }
        off += n;
    }
    Ok(())
}

fn check_data_count(k: usize) -> Result<(), CodecError> {
    if k == 0 {
        Err(CodecError::TooFewBuffers { actual: 0, min: 1 })
    } else if k > MAX_DATA {
        Err(CodecError::TooManyData { k, max: MAX_DATA })
    } else {
        Ok(())
    }
}

/// The inverse of a value known to be non-zero (a power of g, or the sum of
/// two distinct powers).
fn inv_nonzero(a: u8) -> u8 {
    debug_assert_ne!(a, 0);
    gf::inv(a).unwrap_or(0)
}
