//! x86-64 SIMD kernels.
//!
//! The loops are written once, generic over a small [`Simd`] trait whose
//! methods are `#[inline(always)]` wrappers around `std::arch` intrinsics.
//! Each public entry point is a `#[target_feature]` function that
//! instantiates a generic loop, so the whole loop (trait methods included) is
//! compiled for that feature set. The entry points may only be called when
//! the features are present ([`crate::Isa::is_available`]).
//!
//! Q generation: the SSE2/AVX2/AVX-512BW paths use Horner's scheme with
//! multiply-by-{02} (add, compare, and-with-0x1d), as Linux MD does. The GFNI
//! path computes `Q = sum g^i * D_i` directly, one `GF2P8AFFINEQB` per source
//! with the matrix for g^i: this costs the same instruction count as Horner's
//! step but has no serial dependency between sources.
//!
//! Outputs of 256 KiB or more that are aligned to the vector width are
//! written with non-temporal (streaming) stores, followed by `SFENCE`: at
//! that size they would be evicted before reuse anyway, and streaming saves
//! the read-for-ownership of every output line (10-20% of the memory traffic
//! of a wide encode). Smaller or unaligned outputs use ordinary stores.

// Every function in this module is an unsafe kernel whose contract is the
// one of `super` (valid pointers, features present); marking each intrinsic
// call would add nothing.
#![allow(unsafe_op_in_unsafe_fn)]

use super::{scalar, DeltaJob, PqJob, PqOut, Table, XorJob};
use crate::gf;
use crate::pq::MAX_DATA;
use core::arch::x86_64::*;

/// Vectors per unrolled block in the XOR and P+Q loops.
const UNROLL: usize = 4;

/// One SIMD register width and the handful of operations the kernels need.
pub(super) trait Simd {
    /// A vector of `LANES` bytes.
    type V: Copy;
    /// A prepared "multiply by constant c".
    type C: Copy;
    /// Bytes per vector.
    const LANES: usize;
    /// Compute Q as `sum g^i D_i` with constant multiplies (true) or by
    /// Horner's scheme with [`Simd::mul2`] (false).
    const DIRECT_Q: bool;
    unsafe fn load(p: *const u8) -> Self::V;
    unsafe fn store(p: *mut u8, v: Self::V);
    /// A non-temporal store; `p` must be aligned to `LANES`.
    unsafe fn stream(p: *mut u8, v: Self::V);
    unsafe fn zero() -> Self::V;
    unsafe fn xor(a: Self::V, b: Self::V) -> Self::V;
    #[inline(always)]
    unsafe fn xor3(a: Self::V, b: Self::V, c: Self::V) -> Self::V {
        Self::xor(Self::xor(a, b), c)
    }
    /// Multiplication of every byte by {02} in GF(2^8)/0x11d.
    unsafe fn mul2(v: Self::V) -> Self::V;
    unsafe fn prep(c: u8) -> Self::C;
    unsafe fn mulc(v: Self::V, c: Self::C) -> Self::V;
    /// `prep(g^i)`; the GFNI path reads a precomputed matrix table.
    #[inline(always)]
    unsafe fn prep_gpow(i: usize) -> Self::C {
        Self::prep(gf::exp(i))
    }
}

/// The `VPSHUFB` tables for "multiply by c": `c * x = lo[x & 15] ^ hi[x >> 4]`.
fn nibble_tables(c: u8) -> ([u8; 16], [u8; 16]) {
    let mut lo = [0u8; 16];
    let mut hi = [0u8; 16];
    for n in 0..16u8 {
        lo[n as usize] = gf::mul(c, n);
        hi[n as usize] = gf::mul(c, n << 4);
    }
    (lo, hi)
}

#[derive(Clone, Copy)]
pub(super) struct Sse2;

impl Simd for Sse2 {
    type V = __m128i;
    type C = u8;
    const LANES: usize = 16;
    const DIRECT_Q: bool = false;
    #[inline(always)]
    unsafe fn load(p: *const u8) -> __m128i {
        _mm_loadu_si128(p.cast())
    }
    #[inline(always)]
    unsafe fn store(p: *mut u8, v: __m128i) {
        _mm_storeu_si128(p.cast(), v)
    }
    #[inline(always)]
    unsafe fn stream(p: *mut u8, v: __m128i) {
        _mm_stream_si128(p.cast(), v)
    }
    #[inline(always)]
    unsafe fn zero() -> __m128i {
        _mm_setzero_si128()
    }
    #[inline(always)]
    unsafe fn xor(a: __m128i, b: __m128i) -> __m128i {
        _mm_xor_si128(a, b)
    }
    #[inline(always)]
    unsafe fn mul2(v: __m128i) -> __m128i {
        // Bytes with the top bit set compare "less than zero": they overflow
        // and must be reduced by 0x1d.
        let overflow = _mm_cmpgt_epi8(_mm_setzero_si128(), v);
        let reduce = _mm_and_si128(overflow, _mm_set1_epi8(0x1d));
        _mm_xor_si128(_mm_add_epi8(v, v), reduce)
    }
    #[inline(always)]
    unsafe fn prep(c: u8) -> u8 {
        c
    }
    #[inline(always)]
    unsafe fn mulc(v: __m128i, c: u8) -> __m128i {
        // No byte shuffle in SSE2: shift-and-add over the bits of c.
        let mut acc = _mm_setzero_si128();
        let mut x = v;
        let mut bits = c;
        while bits != 0 {
            if bits & 1 != 0 {
                acc = _mm_xor_si128(acc, x);
            }
            x = Self::mul2(x);
            bits >>= 1;
        }
        acc
    }
}

#[derive(Clone, Copy)]
pub(super) struct Avx2;

impl Simd for Avx2 {
    type V = __m256i;
    type C = [__m256i; 2];
    const LANES: usize = 32;
    const DIRECT_Q: bool = false;
    #[inline(always)]
    unsafe fn load(p: *const u8) -> __m256i {
        _mm256_loadu_si256(p.cast())
    }
    #[inline(always)]
    unsafe fn store(p: *mut u8, v: __m256i) {
        _mm256_storeu_si256(p.cast(), v)
    }
    #[inline(always)]
    unsafe fn stream(p: *mut u8, v: __m256i) {
        _mm256_stream_si256(p.cast(), v)
    }
    #[inline(always)]
    unsafe fn zero() -> __m256i {
        _mm256_setzero_si256()
    }
    #[inline(always)]
    unsafe fn xor(a: __m256i, b: __m256i) -> __m256i {
        _mm256_xor_si256(a, b)
    }
    #[inline(always)]
    unsafe fn mul2(v: __m256i) -> __m256i {
        let overflow = _mm256_cmpgt_epi8(_mm256_setzero_si256(), v);
        let reduce = _mm256_and_si256(overflow, _mm256_set1_epi8(0x1d));
        _mm256_xor_si256(_mm256_add_epi8(v, v), reduce)
    }
    #[inline(always)]
    unsafe fn prep(c: u8) -> [__m256i; 2] {
        let (lo, hi) = nibble_tables(c);
        [
            _mm256_broadcastsi128_si256(_mm_loadu_si128(lo.as_ptr().cast())),
            _mm256_broadcastsi128_si256(_mm_loadu_si128(hi.as_ptr().cast())),
        ]
    }
    #[inline(always)]
    unsafe fn mulc(v: __m256i, c: [__m256i; 2]) -> __m256i {
        let nibble = _mm256_set1_epi8(0x0f);
        let lo = _mm256_and_si256(v, nibble);
        let hi = _mm256_and_si256(_mm256_srli_epi16::<4>(v), nibble);
        _mm256_xor_si256(_mm256_shuffle_epi8(c[0], lo), _mm256_shuffle_epi8(c[1], hi))
    }
}

#[derive(Clone, Copy)]
pub(super) struct Avx512;

impl Simd for Avx512 {
    type V = __m512i;
    type C = [__m512i; 2];
    const LANES: usize = 64;
    const DIRECT_Q: bool = false;
    #[inline(always)]
    unsafe fn load(p: *const u8) -> __m512i {
        _mm512_loadu_si512(p.cast())
    }
    #[inline(always)]
    unsafe fn store(p: *mut u8, v: __m512i) {
        _mm512_storeu_si512(p.cast(), v)
    }
    #[inline(always)]
    unsafe fn stream(p: *mut u8, v: __m512i) {
        _mm512_stream_si512(p.cast(), v)
    }
    #[inline(always)]
    unsafe fn zero() -> __m512i {
        _mm512_setzero_si512()
    }
    #[inline(always)]
    unsafe fn xor(a: __m512i, b: __m512i) -> __m512i {
        _mm512_xor_si512(a, b)
    }
    #[inline(always)]
    unsafe fn xor3(a: __m512i, b: __m512i, c: __m512i) -> __m512i {
        _mm512_ternarylogic_epi64::<0x96>(a, b, c)
    }
    #[inline(always)]
    unsafe fn mul2(v: __m512i) -> __m512i {
        let overflow = _mm512_movepi8_mask(v);
        let reduce = _mm512_maskz_mov_epi8(overflow, _mm512_set1_epi8(0x1d));
        _mm512_xor_si512(_mm512_add_epi8(v, v), reduce)
    }
    #[inline(always)]
    unsafe fn prep(c: u8) -> [__m512i; 2] {
        let (lo, hi) = nibble_tables(c);
        [
            _mm512_broadcast_i32x4(_mm_loadu_si128(lo.as_ptr().cast())),
            _mm512_broadcast_i32x4(_mm_loadu_si128(hi.as_ptr().cast())),
        ]
    }
    #[inline(always)]
    unsafe fn mulc(v: __m512i, c: [__m512i; 2]) -> __m512i {
        let nibble = _mm512_set1_epi8(0x0f);
        let lo = _mm512_and_si512(v, nibble);
        let hi = _mm512_and_si512(_mm512_srli_epi16::<4>(v), nibble);
        _mm512_xor_si512(_mm512_shuffle_epi8(c[0], lo), _mm512_shuffle_epi8(c[1], hi))
    }
}

/// The GFNI matrix for multiplication by {02}.
const MUL2_MATRIX: u64 = gf::affine_matrix(2);

#[derive(Clone, Copy)]
pub(super) struct Gfni;

impl Simd for Gfni {
    type V = __m512i;
    type C = __m512i;
    const LANES: usize = 64;
    const DIRECT_Q: bool = true;
    #[inline(always)]
    unsafe fn load(p: *const u8) -> __m512i {
        _mm512_loadu_si512(p.cast())
    }
    #[inline(always)]
    unsafe fn store(p: *mut u8, v: __m512i) {
        _mm512_storeu_si512(p.cast(), v)
    }
    #[inline(always)]
    unsafe fn stream(p: *mut u8, v: __m512i) {
        _mm512_stream_si512(p.cast(), v)
    }
    #[inline(always)]
    unsafe fn zero() -> __m512i {
        _mm512_setzero_si512()
    }
    #[inline(always)]
    unsafe fn xor(a: __m512i, b: __m512i) -> __m512i {
        _mm512_xor_si512(a, b)
    }
    #[inline(always)]
    unsafe fn xor3(a: __m512i, b: __m512i, c: __m512i) -> __m512i {
        _mm512_ternarylogic_epi64::<0x96>(a, b, c)
    }
    #[inline(always)]
    unsafe fn mul2(v: __m512i) -> __m512i {
        _mm512_gf2p8affine_epi64_epi8::<0>(v, _mm512_set1_epi64(MUL2_MATRIX as i64))
    }
    #[inline(always)]
    unsafe fn prep(c: u8) -> __m512i {
        _mm512_set1_epi64(gf::affine_matrix(c) as i64)
    }
    #[inline(always)]
    unsafe fn mulc(v: __m512i, c: __m512i) -> __m512i {
        _mm512_gf2p8affine_epi64_epi8::<0>(v, c)
    }
    #[inline(always)]
    unsafe fn prep_gpow(i: usize) -> __m512i {
        _mm512_set1_epi64(gf::AFFINE_GPOW[i] as i64)
    }
}

/// Outputs at least this long, and aligned to the vector width, are written
/// with non-temporal stores: such buffers do not stay in cache anyway, and
/// streaming them avoids reading each output line before overwriting it.
const STREAM_MIN_LEN: usize = 256 * 1024;

#[inline(always)]
unsafe fn put<S: Simd, const NT: bool>(p: *mut u8, v: S::V) {
    if NT {
        S::stream(p, v)
    } else {
        S::store(p, v)
    }
}

/// Whether outputs of `len` bytes at these addresses are to be streamed.
#[inline(always)]
fn use_streaming<S: Simd>(len: usize, outputs: &[*mut u8]) -> bool {
    len >= STREAM_MIN_LEN
        && outputs
            .iter()
            .all(|p| p.is_null() || (*p as usize).is_multiple_of(S::LANES))
}

// ---------------------------------------------------------------- XOR ----

#[inline(always)]
unsafe fn xor_kernel<S: Simd>(job: &XorJob<'_>) {
    let lanes = S::LANES;
    let vec_end = job.len - job.len % lanes;
    // The first operand is loaded, the rest are XORed in.
    let (first, rest): (*const u8, &[*const u8]) = if job.accumulate {
        (job.dst.cast_const(), job.srcs)
    } else {
        (job.srcs[0], &job.srcs[1..])
    };
    let mut off = 0;
    if use_streaming::<S>(job.len, &[job.dst]) {
        while off + UNROLL * lanes <= vec_end {
            xor_block::<S, UNROLL, true>(first, rest, job.dst, off);
            off += UNROLL * lanes;
        }
        _mm_sfence();
    }
    while off + UNROLL * lanes <= vec_end {
        xor_block::<S, UNROLL, false>(first, rest, job.dst, off);
        off += UNROLL * lanes;
    }
    while off < vec_end {
        xor_block::<S, 1, false>(first, rest, job.dst, off);
        off += lanes;
    }
    debug_assert_eq!(off, vec_end);
    if vec_end < job.len {
        scalar::xor(job, vec_end);
    }
}

#[inline(always)]
unsafe fn xor_block<S: Simd, const U: usize, const NT: bool>(
    first: *const u8,
    rest: &[*const u8],
    dst: *mut u8,
    off: usize,
) {
    let lanes = S::LANES;
    let mut acc = [S::zero(); U];
    for (u, a) in acc.iter_mut().enumerate() {
        *a = S::load(first.add(off + u * lanes));
    }
    let mut pairs = rest.chunks_exact(2);
    for pair in &mut pairs {
        let (s0, s1) = (pair[0], pair[1]);
        for (u, a) in acc.iter_mut().enumerate() {
            let at = off + u * lanes;
            *a = S::xor3(*a, S::load(s0.add(at)), S::load(s1.add(at)));
        }
    }
    for &s in pairs.remainder() {
        for (u, a) in acc.iter_mut().enumerate() {
            *a = S::xor(*a, S::load(s.add(off + u * lanes)));
        }
    }
    for (u, a) in acc.iter().enumerate() {
        put::<S, NT>(dst.add(off + u * lanes), *a);
    }
}

// ---------------------------------------------------------------- P+Q ----

/// A prepared coefficient of the final 2x2 map, with 0 and 1 special-cased so
/// that encode-like uses cost nothing extra.
#[derive(Clone, Copy)]
enum Coef<C> {
    Zero,
    One,
    Mul(C),
}

impl<C: Copy> Coef<C> {
    #[inline(always)]
    unsafe fn new<S: Simd<C = C>>(c: u8) -> Self {
        match c {
            0 => Coef::Zero,
            1 => Coef::One,
            _ => Coef::Mul(S::prep(c)),
        }
    }

    #[inline(always)]
    unsafe fn apply<S: Simd<C = C>>(self, v: S::V) -> S::V {
        match self {
            Coef::Zero => S::zero(),
            Coef::One => v,
            Coef::Mul(c) => S::mulc(v, c),
        }
    }
}

/// [`PqOut`] with its constants prepared for `S`.
enum Finish<S: Simd> {
    Gen {
        p: *mut u8,
        q: *mut u8,
    },
    Combine {
        p_in: *const u8,
        q_in: *const u8,
        out1: *mut u8,
        out2: *mut u8,
        m: [Coef<S::C>; 4],
    },
}

impl<S: Simd> Finish<S> {
    #[inline(always)]
    unsafe fn new(out: &PqOut) -> Self {
        match *out {
            PqOut::Gen { p, q } => Finish::Gen { p, q },
            PqOut::Combine {
                p_in,
                q_in,
                out1,
                out2,
                m,
            } => Finish::Combine {
                p_in,
                q_in,
                out1,
                out2,
                m: [
                    Coef::new::<S>(m[0]),
                    Coef::new::<S>(m[1]),
                    Coef::new::<S>(m[2]),
                    Coef::new::<S>(m[3]),
                ],
            },
        }
    }

    /// The output pointers (null when unused).
    #[inline(always)]
    fn outputs(&self) -> [*mut u8; 2] {
        match *self {
            Finish::Gen { p, q } => [p, q],
            Finish::Combine { out1, out2, .. } => [out1, out2],
        }
    }

    /// Writes the outputs for the vector at `off`, given its syndromes.
    #[inline(always)]
    unsafe fn store<const NT: bool>(&self, p: S::V, q: S::V, off: usize) {
        match *self {
            Finish::Gen { p: p_out, q: q_out } => {
                if !p_out.is_null() {
                    put::<S, NT>(p_out.add(off), p);
                }
                if !q_out.is_null() {
                    put::<S, NT>(q_out.add(off), q);
                }
            }
            Finish::Combine {
                p_in,
                q_in,
                out1,
                out2,
                m,
            } => {
                let u = if p_in.is_null() {
                    p
                } else {
                    S::xor(p, S::load(p_in.add(off)))
                };
                let v = if q_in.is_null() {
                    q
                } else {
                    S::xor(q, S::load(q_in.add(off)))
                };
                put::<S, NT>(
                    out1.add(off),
                    S::xor(m[0].apply::<S>(u), m[1].apply::<S>(v)),
                );
                if !out2.is_null() {
                    put::<S, NT>(
                        out2.add(off),
                        S::xor(m[2].apply::<S>(u), m[3].apply::<S>(v)),
                    );
                }
            }
        }
    }
}

#[inline(always)]
unsafe fn pq_kernel<S: Simd>(job: &PqJob<'_>) {
    let lanes = S::LANES;
    let vec_end = job.len - job.len % lanes;
    let finish = Finish::<S>::new(&job.out);
    // For the direct form, the present sources and their data indices.
    let mut present = Table::<*const u8, MAX_DATA>::new();
    let mut index = Table::<u8, MAX_DATA>::new();
    if S::DIRECT_Q {
        for (i, &s) in job.srcs.iter().enumerate() {
            if !s.is_null() {
                present.push(s);
                index.push(i as u8);
            }
        }
    }
    let (present, index) = (present.as_slice(), index.as_slice());

    let mut off = 0;
    if use_streaming::<S>(job.len, &finish.outputs()) {
        while off + UNROLL * lanes <= vec_end {
            let (p, q) = if S::DIRECT_Q {
                direct_block::<S, UNROLL>(present, index, off)
            } else {
                horner_block::<S, UNROLL>(job.srcs, off)
            };
            for u in 0..UNROLL {
                finish.store::<true>(p[u], q[u], off + u * lanes);
            }
            off += UNROLL * lanes;
        }
        _mm_sfence();
    }
    while off + UNROLL * lanes <= vec_end {
        let (p, q) = if S::DIRECT_Q {
            direct_block::<S, UNROLL>(present, index, off)
        } else {
            horner_block::<S, UNROLL>(job.srcs, off)
        };
        for u in 0..UNROLL {
            finish.store::<false>(p[u], q[u], off + u * lanes);
        }
        off += UNROLL * lanes;
    }
    while off < vec_end {
        let (p, q) = if S::DIRECT_Q {
            direct_block::<S, 1>(present, index, off)
        } else {
            horner_block::<S, 1>(job.srcs, off)
        };
        finish.store::<false>(p[0], q[0], off);
        off += lanes;
    }
    debug_assert_eq!(off, vec_end);
    if vec_end < job.len {
        scalar::pq(job, vec_end);
    }
}

/// P' and Q' for `U` vectors at `off` by Horner's scheme, from the last data
/// index down: `Q = Q * 2 ^ D_i` (a null source contributes only the `* 2`).
#[inline(always)]
unsafe fn horner_block<S: Simd, const U: usize>(
    srcs: &[*const u8],
    off: usize,
) -> ([S::V; U], [S::V; U]) {
    let lanes = S::LANES;
    let (&last, lower) = srcs.split_last().unwrap_or((&core::ptr::null(), &[]));
    let mut p = [S::zero(); U];
    if !last.is_null() {
        for (u, p) in p.iter_mut().enumerate() {
            *p = S::load(last.add(off + u * lanes));
        }
    }
    let mut q = p;
    for &s in lower.iter().rev() {
        for q in q.iter_mut() {
            *q = S::mul2(*q);
        }
        if !s.is_null() {
            for u in 0..U {
                let d = S::load(s.add(off + u * lanes));
                p[u] = S::xor(p[u], d);
                q[u] = S::xor(q[u], d);
            }
        }
    }
    (p, q)
}

/// P' and Q' for `U` vectors at `off` as `sum D_i` and `sum g^i D_i`, two
/// sources at a time (three-way XORs).
#[inline(always)]
unsafe fn direct_block<S: Simd, const U: usize>(
    present: &[*const u8],
    index: &[u8],
    off: usize,
) -> ([S::V; U], [S::V; U]) {
    let lanes = S::LANES;
    let mut p = [S::zero(); U];
    let mut q = [S::zero(); U];
    let mut i = 0;
    while i + 2 <= present.len() {
        let (s0, s1) = (present[i], present[i + 1]);
        let c0 = S::prep_gpow(index[i] as usize);
        let c1 = S::prep_gpow(index[i + 1] as usize);
        for u in 0..U {
            let at = off + u * lanes;
            let d0 = S::load(s0.add(at));
            let d1 = S::load(s1.add(at));
            p[u] = S::xor3(p[u], d0, d1);
            q[u] = S::xor3(q[u], S::mulc(d0, c0), S::mulc(d1, c1));
        }
        i += 2;
    }
    if i < present.len() {
        let s = present[i];
        let c = S::prep_gpow(index[i] as usize);
        for u in 0..U {
            let d = S::load(s.add(off + u * lanes));
            p[u] = S::xor(p[u], d);
            q[u] = S::xor(q[u], S::mulc(d, c));
        }
    }
    (p, q)
}

// -------------------------------------------------------------- delta ----

#[inline(always)]
unsafe fn delta_kernel<S: Simd>(job: &DeltaJob) {
    let lanes = S::LANES;
    let vec_end = job.len - job.len % lanes;
    let c = S::prep(job.coef);
    let mut off = 0;
    while off < vec_end {
        let d = S::xor(S::load(job.old.add(off)), S::load(job.new.add(off)));
        if !job.p.is_null() {
            let at = job.p.add(off);
            S::store(at, S::xor(S::load(at), d));
        }
        if !job.q.is_null() {
            let at = job.q.add(off);
            S::store(at, S::xor(S::load(at), S::mulc(d, c)));
        }
        off += lanes;
    }
    if vec_end < job.len {
        scalar::delta(job, vec_end);
    }
}

// -------------------------------------------------------- entry points ---

macro_rules! entry_points {
    ($simd:ty, $features:literal, $xor:ident, $pq:ident, $delta:ident) => {
        /// # Safety
        /// The CPU has the named features; the job obeys `super`'s contract.
        #[target_feature(enable = $features)]
        pub(super) unsafe fn $xor(job: &XorJob<'_>) {
            xor_kernel::<$simd>(job)
        }

        /// # Safety
        /// The CPU has the named features; the job obeys `super`'s contract.
        #[target_feature(enable = $features)]
        pub(super) unsafe fn $pq(job: &PqJob<'_>) {
            pq_kernel::<$simd>(job)
        }

        /// # Safety
        /// The CPU has the named features; the job obeys `super`'s contract.
        #[target_feature(enable = $features)]
        pub(super) unsafe fn $delta(job: &DeltaJob) {
            delta_kernel::<$simd>(job)
        }
    };
}

entry_points!(Sse2, "sse2", xor_sse2, pq_sse2, delta_sse2);
entry_points!(Avx2, "avx2", xor_avx2, pq_avx2, delta_avx2);
entry_points!(
    Avx512,
    "avx512f,avx512bw",
    xor_avx512,
    pq_avx512,
    delta_avx512
);
entry_points!(Gfni, "avx512f,avx512bw,gfni", xor_gfni, pq_gfni, delta_gfni);
