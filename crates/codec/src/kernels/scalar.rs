//! The reference kernels: plain Rust, byte by byte, with the GF(2^8) product
//! table. Q is formed directly as `sum g^i * D_i` (not by Horner's scheme), so
//! the SIMD kernels, which use Horner or GFNI matrices, are checked against
//! an independent formulation. The SIMD kernels also call these for the tail
//! bytes that do not fill a whole vector, passing `start`.

use super::{DeltaJob, PqJob, PqOut, XorJob};
use crate::gf;
use core::slice;

/// Bytes processed per step; the step's partial results live on the stack.
const CHUNK: usize = 256;

/// [`XorJob`] over bytes `start..job.len`.
///
/// # Safety
/// The job satisfies the safety contract of [`super`]; `start <= job.len`.
pub(crate) unsafe fn xor(job: &XorJob<'_>, start: usize) {
    debug_assert!(start <= job.len);
    let mut acc = [0u8; CHUNK];
    let mut off = start;
    while off < job.len {
        let n = CHUNK.min(job.len - off);
        let acc = &mut acc[..n];
        if job.accumulate {
            // SAFETY: `dst` is valid for `len` bytes and `off + n <= len`.
            acc.copy_from_slice(unsafe { slice::from_raw_parts(job.dst.add(off), n) });
        } else {
            acc.fill(0);
        }
        for &src in job.srcs {
            // SAFETY: each source is valid for `len` bytes.
            let src = unsafe { slice::from_raw_parts(src.add(off), n) };
            for (a, s) in acc.iter_mut().zip(src) {
                *a ^= s;
            }
        }
        // SAFETY: `dst` is valid for writes and overlaps no source.
        unsafe { core::ptr::copy_nonoverlapping(acc.as_ptr(), job.dst.add(off), n) };
        off += n;
    }
}

/// [`PqJob`] over bytes `start..job.len`.
///
/// # Safety
/// The job satisfies the safety contract of [`super`]; `start <= job.len`.
pub(crate) unsafe fn pq(job: &PqJob<'_>, start: usize) {
    debug_assert!(start <= job.len);
    debug_assert!(job.srcs.len() <= crate::pq::MAX_DATA);
    let mut p = [0u8; CHUNK];
    let mut q = [0u8; CHUNK];
    let mut off = start;
    while off < job.len {
        let n = CHUNK.min(job.len - off);
        let (p, q) = (&mut p[..n], &mut q[..n]);
        p.fill(0);
        q.fill(0);
        for (i, &src) in job.srcs.iter().enumerate() {
            if src.is_null() {
                continue;
            }
            // SAFETY: each non-null source is valid for `len` bytes.
            let src = unsafe { slice::from_raw_parts(src.add(off), n) };
            let times_gi = &gf::MUL[gf::exp(i) as usize];
            for ((p, q), &d) in p.iter_mut().zip(q.iter_mut()).zip(src) {
                *p ^= d;
                *q ^= times_gi[d as usize];
            }
        }
        // SAFETY: outputs are valid for `len` bytes and overlap no input.
        unsafe { finish(&job.out, p, q, off) };
        off += n;
    }
}

/// Applies a [`PqOut`] to the syndromes of bytes `off..off + p.len()`.
///
/// # Safety
/// The pointers in `out` are valid for `off + p.len()` bytes.
unsafe fn finish(out: &PqOut, p: &[u8], q: &[u8], off: usize) {
    let n = p.len();
    match *out {
        PqOut::Gen { p: p_out, q: q_out } => {
            // SAFETY: per the caller's contract.
            unsafe {
                if !p_out.is_null() {
                    core::ptr::copy_nonoverlapping(p.as_ptr(), p_out.add(off), n);
                }
                if !q_out.is_null() {
                    core::ptr::copy_nonoverlapping(q.as_ptr(), q_out.add(off), n);
                }
            }
        }
        PqOut::Combine {
            p_in,
            q_in,
            out1,
            out2,
            m,
        } => {
            for j in 0..n {
                // SAFETY: per the caller's contract; every access is at
                // `off + j < len`.
                unsafe {
                    let u = p[j]
                        ^ if p_in.is_null() {
                            0
                        } else {
                            *p_in.add(off + j)
                        };
                    let v = q[j]
                        ^ if q_in.is_null() {
                            0
                        } else {
                            *q_in.add(off + j)
                        };
                    *out1.add(off + j) = gf::mul(m[0], u) ^ gf::mul(m[1], v);
                    if !out2.is_null() {
                        *out2.add(off + j) = gf::mul(m[2], u) ^ gf::mul(m[3], v);
                    }
                }
            }
        }
    }
}

/// [`DeltaJob`] over bytes `start..job.len`.
///
/// # Safety
/// The job satisfies the safety contract of [`super`]; `start <= job.len`.
pub(crate) unsafe fn delta(job: &DeltaJob, start: usize) {
    debug_assert!(start <= job.len);
    let times_c = &gf::MUL[job.coef as usize];
    for j in start..job.len {
        // SAFETY: every pointer is valid for `len` bytes; `p` and `q` are
        // read and written in place, one byte at a time.
        unsafe {
            let d = *job.old.add(j) ^ *job.new.add(j);
            if !job.p.is_null() {
                *job.p.add(j) ^= d;
            }
            if !job.q.is_null() {
                *job.q.add(j) ^= times_c[d as usize];
            }
        }
    }
}
