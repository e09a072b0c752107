//! The inner loops, on raw pointers, behind the safe APIs of [`crate::xor`],
//! [`crate::pq`] and [`crate::groups`].
//!
//! Three kernels cover every operation:
//! - [`XorJob`]: `dst = XOR srcs` or `dst ^= XOR srcs`;
//! - [`PqJob`]: one pass computing `P' = sum D_i` and `Q' = sum g^i D_i` over
//!   the present sources, followed by a small 2x2 GF(2^8) linear map that turns
//!   them (and optionally a stored P and Q) into one or two outputs; this is
//!   encode, Q-only regeneration and every two-erasure recovery;
//! - [`DeltaJob`]: `P ^= old ^ new`, `Q ^= c * (old ^ new)`.
//!
//! Each has a scalar reference ([`scalar`]) and, on x86-64, SIMD versions
//! (`x86`) that handle whole vectors and hand the remaining tail bytes to the
//! scalar code.
//!
//! Safety contract shared by all jobs: every non-null pointer is valid for
//! `len` bytes (reads for `*const`, reads and writes for `*mut`); no output
//! overlaps any input or other output, except that a [`DeltaJob`] reads and
//! writes `p`/`q` in place.

use crate::Isa;
use core::mem::MaybeUninit;

pub(crate) mod scalar;
#[cfg(target_arch = "x86_64")]
mod x86;

/// A list of at most `N` small `Copy` values (pointers, indices) in an
/// uninitialised stack array: building one costs nothing per call, unlike a
/// zero-filled `[T; N]` (which for 1024 pointers is an 8 KiB memset).
pub(crate) struct Table<T: Copy, const N: usize> {
    items: [MaybeUninit<T>; N],
    len: usize,
}

impl<T: Copy, const N: usize> Table<T, N> {
    #[inline]
    pub(crate) fn new() -> Self {
        Table {
            items: [const { MaybeUninit::uninit() }; N],
            len: 0,
        }
    }

    /// Appends; callers check counts first, so a full table is a bug (and a
    /// bounds-check panic, never an out-of-bounds write).
    #[inline]
    pub(crate) fn push(&mut self, value: T) {
        debug_assert!(self.len < N, "table of {N} overflows");
        self.items[self.len] = MaybeUninit::new(value);
        self.len += 1;
    }

    #[inline]
    pub(crate) fn clear(&mut self) {
        self.len = 0;
    }

    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    #[inline]
    pub(crate) fn as_slice(&self) -> &[T] {
        // SAFETY: the first `len` items were written by `push`.
        unsafe { core::slice::from_raw_parts(self.items.as_ptr().cast::<T>(), self.len) }
    }
}

/// How many source pointers a [`XorJob`] takes at once; callers batch larger
/// source lists with `accumulate`.
pub(crate) const XOR_BATCH: usize = 64;

/// `dst = XOR of srcs` (or `dst ^= XOR of srcs` when `accumulate`).
pub(crate) struct XorJob<'a> {
    pub srcs: &'a [*const u8],
    pub dst: *mut u8,
    pub len: usize,
    pub accumulate: bool,
}

/// What a [`PqJob`] does with the syndromes `P'`, `Q'` of its sources.
#[derive(Clone, Copy)]
pub(crate) enum PqOut {
    /// Store `P'` to `p` and `Q'` to `q` (a null pointer skips that output).
    Gen { p: *mut u8, q: *mut u8 },
    /// With `u = P' ^ p_in` and `v = Q' ^ q_in` (a null input counts as zero):
    /// `out1 = m[0]*u ^ m[1]*v` and `out2 = m[2]*u ^ m[3]*v` (null `out2` is
    /// skipped).
    Combine {
        p_in: *const u8,
        q_in: *const u8,
        out1: *mut u8,
        out2: *mut u8,
        m: [u8; 4],
    },
}

/// One pass of P/Q syndrome computation over `srcs`, where `srcs[i]` is data
/// buffer i (coefficient g^i) and a null pointer is a missing buffer taken as
/// zero.
pub(crate) struct PqJob<'a> {
    pub srcs: &'a [*const u8],
    pub len: usize,
    pub out: PqOut,
}

/// `p ^= old ^ new` and `q ^= coef * (old ^ new)`; a null `p` or `q` is
/// skipped.
pub(crate) struct DeltaJob {
    pub old: *const u8,
    pub new: *const u8,
    pub p: *mut u8,
    pub q: *mut u8,
    pub coef: u8,
    pub len: usize,
}

/// Runs a [`XorJob`] on the given path.
///
/// # Safety
/// The job's pointers satisfy the module's safety contract, `isa` is
/// available, and `srcs` is non-empty unless `accumulate`.
pub(crate) unsafe fn xor(isa: Isa, job: &XorJob<'_>) {
    debug_assert!(isa.is_available());
    debug_assert!(job.accumulate || !job.srcs.is_empty());
    debug_assert!(job.srcs.len() <= XOR_BATCH);
    debug_assert!(job.srcs.iter().all(|s| !s.is_null()));
    // SAFETY: forwarded from the caller; the SIMD variants need `isa`'s
    // features, which the caller checked.
    unsafe {
        match isa {
            #[cfg(target_arch = "x86_64")]
            Isa::Sse2 => x86::xor_sse2(job),
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => x86::xor_avx2(job),
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => x86::xor_avx512(job),
            #[cfg(target_arch = "x86_64")]
            Isa::Gfni => x86::xor_gfni(job),
            _ => scalar::xor(job, 0),
        }
    }
}

/// Runs a [`PqJob`] on the given path.
///
/// # Safety
/// The job's pointers satisfy the module's safety contract, `isa` is
/// available, and `1 <= srcs.len() <= 255`.
pub(crate) unsafe fn pq(isa: Isa, job: &PqJob<'_>) {
    debug_assert!(isa.is_available());
    debug_assert!(!job.srcs.is_empty() && job.srcs.len() <= crate::pq::MAX_DATA);
    // SAFETY: as in `xor`.
    unsafe {
        match isa {
            #[cfg(target_arch = "x86_64")]
            Isa::Sse2 => x86::pq_sse2(job),
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => x86::pq_avx2(job),
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => x86::pq_avx512(job),
            #[cfg(target_arch = "x86_64")]
            Isa::Gfni => x86::pq_gfni(job),
            _ => scalar::pq(job, 0),
        }
    }
}

/// Runs a [`DeltaJob`] on the given path.
///
/// # Safety
/// The job's pointers satisfy the module's safety contract and `isa` is
/// available.
pub(crate) unsafe fn delta(isa: Isa, job: &DeltaJob) {
    debug_assert!(isa.is_available());
    // SAFETY: as in `xor`.
    unsafe {
        match isa {
            #[cfg(target_arch = "x86_64")]
            Isa::Sse2 => x86::delta_sse2(job),
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => x86::delta_avx2(job),
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => x86::delta_avx512(job),
            #[cfg(target_arch = "x86_64")]
            Isa::Gfni => x86::delta_gfni(job),
            _ => scalar::delta(job, 0),
        }
    }
}

/// XORs any number of sources into `dst`, batching [`XOR_BATCH`] pointers at
/// a time on the stack (no allocation). With `accumulate == false` the first
/// batch overwrites `dst`; if `srcs` yields nothing, `dst` is zeroed.
///
/// # Safety
/// As for [`xor`]: every pointer yielded and `dst` are valid for `len` bytes
/// and `dst` overlaps no source.
pub(crate) unsafe fn xor_many(
    isa: Isa,
    srcs: impl Iterator<Item = *const u8>,
    dst: *mut u8,
    len: usize,
    mut accumulate: bool,
) {
    let mut batch = Table::<*const u8, XOR_BATCH>::new();
    for s in srcs {
        batch.push(s);
        if batch.len() == XOR_BATCH {
            let job = XorJob {
                srcs: batch.as_slice(),
                dst,
                len,
                accumulate,
            };
            // SAFETY: forwarded from the caller.
            unsafe { xor(isa, &job) };
            accumulate = true;
            batch.clear();
        }
    }
    if batch.len() > 0 {
        let job = XorJob {
            srcs: batch.as_slice(),
            dst,
            len,
            accumulate,
        };
        // SAFETY: forwarded from the caller.
        unsafe { xor(isa, &job) };
    } else if !accumulate {
        // SAFETY: `dst` is valid for `len` bytes of writes.
        unsafe { core::ptr::write_bytes(dst, 0, len) };
    }
}
