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
//! multiply-by-{02}, as Linux MD does: add, compare, and-with-0x1d, XOR on
//! SSE2 and AVX-512BW; on AVX2 one operation fewer, add, `VPSHUFB`, XOR, on
//! an accumulator kept at a constant offset ([`Q_OFFSET`]). Each step of the
//! loop covers a few vectors of every source (4, or 2 on the 64-byte paths),
//! the accumulators staying in registers; a source list without gaps (encode) gets a loop without the
//! per-source null test that recovery needs. The GFNI path computes
//! `Q = sum g^i * D_i` directly, one `GF2P8AFFINEQB` per source with the
//! matrix for g^i: this costs the same instruction count as Horner's step but
//! has no serial dependency between sources.
//!
//! Outputs of 256 KiB or more that are aligned to the vector width are
//! written with non-temporal (streaming) stores, followed by `SFENCE`: at
//! that size they would be evicted before reuse anyway, and streaming saves
//! the read-for-ownership of every output line (10-20% of the memory traffic
//! of a wide encode). Smaller or unaligned outputs use ordinary stores, and
//! so do outputs placed just past or just before a source modulo 4 KiB
//! ([`stream_hazard`]), where streaming is several times slower.

// Every function in this module is an unsafe kernel whose contract is the
// one of `super` (valid pointers, features present); marking each intrinsic
// call would add nothing.
#![allow(unsafe_op_in_unsafe_fn)]

use super::{scalar, DeltaJob, PqJob, PqOut, Table, XorJob};
use crate::gf;
use crate::pq::MAX_DATA;
use core::arch::x86_64::*;

// Vectors of every source per unrolled step of the XOR and P+Q loops (`U` of the kernels,
// chosen per path in `entry_points!`): 4 on the 16- and 32-byte paths, 2 on the 64-byte
// ones. Measured on AMD EPYC (Zen 4) with `raidforge bench parity`: the 64-byte paths with
// 4 vectors per step (256 bytes of each source) encoded 16+2 chunks of 1 and 4 MiB at
// 0.9-1.0x ISA-L, with 2 at 1.4-1.8x, and no worse elsewhere; the AVX2 path gains nothing
// from 2 (and loses at 1 MiB P+Q).

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
    /// Whether Horner's scheme keeps Q in the offset form `t = Q ^ Q_OFFSET`
    /// and steps it with [`Simd::mul2_offset`] (one operation cheaper than
    /// [`Simd::mul2`] where a byte shuffle exists).
    const OFFSET_Q: bool = false;
    /// Every byte set to `b`.
    unsafe fn splat(b: u8) -> Self::V;
    /// Horner's multiply-by-{02} in offset form: given `t = q ^ Q_OFFSET`
    /// (every byte), returns `mul2(q) ^ Q_OFFSET`. Only called when
    /// [`Simd::OFFSET_Q`] is set.
    #[inline(always)]
    unsafe fn mul2_offset(t: Self::V) -> Self::V {
        let e = Self::splat(Q_OFFSET);
        Self::xor(Self::mul2(Self::xor(t, e)), e)
    }
    unsafe fn prep(c: u8) -> Self::C;
    unsafe fn mulc(v: Self::V, c: Self::C) -> Self::V;
    /// `prep(g^i)`; the GFNI path reads a precomputed matrix table.
    #[inline(always)]
    unsafe fn prep_gpow(i: usize) -> Self::C {
        Self::prep(gf::exp(i))
    }
}

/// The offset of Horner's accumulator in [`Simd::mul2_offset`].
///
/// `mul2(q) = (q << 1) ^ (0x1d if q >= 0x80 else 0)`. A byte shuffle
/// (`PSHUFB` with a table of sixteen 0x1d) gives `0 if t >= 0x80 else 0x1d`
/// in one instruction: the reduction term inverted, `red(q) ^ 0x1d`. The
/// stray 0x1d is absorbed by keeping the accumulator as `t = q ^ e` with
/// `e = (e << 1) ^ 0x1d` and `e < 0x80` (so that `t` and `q` have the same
/// top bit): `(t << 1) ^ shuffle(t) = (q << 1) ^ (e << 1) ^ red(q) ^ 0x1d =
/// mul2(q) ^ e`. Solving bit by bit gives `e = 0x0b` (`0x16 ^ 0x1d`). The
/// step is then shift, shuffle, XOR: three operations where compare, AND,
/// shift, XOR are four, and Horner's step is most of the work of encoding.
const Q_OFFSET: u8 = 0x0b;
const _: () = assert!(Q_OFFSET < 0x80 && ((Q_OFFSET << 1) ^ 0x1d) == Q_OFFSET);

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
    unsafe fn splat(b: u8) -> __m128i {
        _mm_set1_epi8(b as i8)
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
    unsafe fn splat(b: u8) -> __m256i {
        _mm256_set1_epi8(b as i8)
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
    const OFFSET_Q: bool = true;
    #[inline(always)]
    unsafe fn mul2_offset(t: __m256i) -> __m256i {
        // VPSHUFB yields 0 for bytes with the top bit set, else table[t & 15].
        let reduce = _mm256_shuffle_epi8(_mm256_set1_epi8(0x1d), t);
        _mm256_xor_si256(_mm256_add_epi8(t, t), reduce)
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
    unsafe fn splat(b: u8) -> __m512i {
        _mm512_set1_epi8(b as i8)
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
    unsafe fn splat(b: u8) -> __m512i {
        _mm512_set1_epi8(b as i8)
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

/// Whether outputs of `len` bytes at these addresses are to be streamed:
/// long enough, aligned, and not at a 4 KiB offset close to a source's (see
/// [`stream_hazard`]).
#[inline(always)]
fn use_streaming<S: Simd, const U: usize>(
    len: usize,
    srcs: &[*const u8],
    outputs: &[*mut u8],
) -> bool {
    len >= STREAM_MIN_LEN
        && outputs
            .iter()
            .all(|p| p.is_null() || (*p as usize).is_multiple_of(S::LANES))
        && !stream_hazard(srcs, outputs, U * S::LANES)
}

/// Whether some output lies, modulo 4 KiB, less than two loop steps (`step`
/// bytes each) ahead of some source, or less than one step behind it.
///
/// Ahead: the loop reads that source right after writing the output at an
/// address that the CPU's store-to-load check, which compares the low 12
/// bits, cannot tell apart from one it has just written; with non-temporal
/// stores each such read waits for the write to drain. Measured on AMD EPYC
/// (AVX2, 1 MiB chunks, 8+2, 128-byte steps): output 32, 64 or 96 bytes past
/// the last source modulo 4 KiB, 5-7 GB/s; 128 bytes or more, 40-50 GB/s
/// (ISA-L's `pq_gen`, 96-byte steps, collapses the same way). Behind: a
/// milder loss (0.7-0.85 of ordinary stores at 32-96 bytes). Ordinary stores
/// suffer neither measurably, so such calls simply do not stream.
#[inline(always)]
fn stream_hazard(srcs: &[*const u8], outputs: &[*mut u8], step: usize) -> bool {
    const PAGE: usize = 4096;
    outputs.iter().filter(|o| !o.is_null()).any(|&o| {
        srcs.iter().filter(|s| !s.is_null()).any(|&s| {
            let ahead = (o as usize).wrapping_sub(s as usize) % PAGE;
            ahead != 0 && (ahead < 2 * step || ahead > PAGE - step)
        })
    })
}

// ---------------------------------------------------------------- XOR ----

#[inline(always)]
unsafe fn xor_kernel<S: Simd, const U: usize>(job: &XorJob<'_>) {
    let lanes = S::LANES;
    let vec_end = job.len - job.len % lanes;
    // The first operand is loaded, the rest are XORed in.
    let (first, rest): (*const u8, &[*const u8]) = if job.accumulate {
        (job.dst.cast_const(), job.srcs)
    } else {
        (job.srcs[0], &job.srcs[1..])
    };
    let mut off = 0;
    if use_streaming::<S, U>(job.len, job.srcs, &[job.dst]) {
        while off + U * lanes <= vec_end {
            xor_block::<S, U, true>(first, rest, job.dst, off);
            off += U * lanes;
        }
        _mm_sfence();
    }
    while off + U * lanes <= vec_end {
        xor_block::<S, U, false>(first, rest, job.dst, off);
        off += U * lanes;
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
    /// Encode: both outputs present.
    Both { p: *mut u8, q: *mut u8 },
    /// One output may be null (Q-only regeneration).
    Gen { p: *mut u8, q: *mut u8 },
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
            PqOut::Gen { p, q } if !p.is_null() && !q.is_null() => Finish::Both { p, q },
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
            Finish::Both { p, q } | Finish::Gen { p, q } => [p, q],
            Finish::Combine { out1, out2, .. } => [out1, out2],
        }
    }

    /// Writes the outputs for the `U` vectors at `off`, given their
    /// syndromes.
    #[inline(always)]
    unsafe fn store_block<const NT: bool, const U: usize>(
        &self,
        p: [S::V; U],
        q: [S::V; U],
        off: usize,
    ) {
        let lanes = S::LANES;
        match *self {
            Finish::Both { p: p_out, q: q_out } => {
                for (u, &p) in p.iter().enumerate() {
                    put::<S, NT>(p_out.add(off + u * lanes), p);
                }
                for (u, &q) in q.iter().enumerate() {
                    put::<S, NT>(q_out.add(off + u * lanes), q);
                }
            }
            _ => {
                for u in 0..U {
                    self.store::<NT>(p[u], q[u], off + u * lanes);
                }
            }
        }
    }

    /// Writes the outputs for the vector at `off`, given its syndromes.
    #[inline(always)]
    unsafe fn store<const NT: bool>(&self, p: S::V, q: S::V, off: usize) {
        match *self {
            Finish::Both { p: p_out, q: q_out } => {
                put::<S, NT>(p_out.add(off), p);
                put::<S, NT>(q_out.add(off), q);
            }
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

/// Where a [`PqJob`]'s sources are, in the form its syndrome loop wants.
enum Sources<'a> {
    /// Horner's scheme over `srcs`, none of them null (encode).
    Dense(&'a [*const u8]),
    /// Horner's scheme over `srcs`, some null (recovery).
    Sparse(&'a [*const u8]),
    /// The direct form: the present sources and their data indices.
    Direct(&'a [*const u8], &'a [u8]),
}

/// P' and Q' of `U` vectors at `off`.
#[inline(always)]
unsafe fn syndromes<S: Simd, const U: usize>(
    sources: &Sources<'_>,
    off: usize,
) -> ([S::V; U], [S::V; U]) {
    match *sources {
        Sources::Dense(srcs) => horner_block::<S, U, true>(srcs, off),
        Sources::Sparse(srcs) => horner_block::<S, U, false>(srcs, off),
        Sources::Direct(present, index) => direct_block::<S, U>(present, index, off),
    }
}

#[inline(always)]
unsafe fn pq_kernel<S: Simd, const U: usize>(job: &PqJob<'_>) {
    let lanes = S::LANES;
    let vec_end = job.len - job.len % lanes;
    let finish = Finish::<S>::new(&job.out);
    // For the direct form, the present sources and their data indices, last
    // source first, as Horner's scheme reads them. Read first to last, each
    // step began with the source whose stores the previous step had just
    // streamed out at the same place modulo 4 KiB whenever the outputs sat
    // at a source's page offset (as page-aligned buffers always do): on AMD
    // EPYC (Zen 5, `raidforge bench parity`, GFNI path) 16+2 at 1 MiB ran at
    // 0.44-0.56x ISA-L, 8+2 at 0.54-0.55x; in this order 1.04-1.27x and
    // 1.04-1.10x, page-aligned or staggered by 256 bytes, and no case lost.
    let mut present = Table::<*const u8, MAX_DATA>::new();
    let mut index = Table::<u8, MAX_DATA>::new();
    let sources = if S::DIRECT_Q {
        for (i, &s) in job.srcs.iter().enumerate().rev() {
            if !s.is_null() {
                present.push(s);
                index.push(i as u8);
            }
        }
        Sources::Direct(present.as_slice(), index.as_slice())
    } else if job.srcs.iter().all(|s| !s.is_null()) {
        Sources::Dense(job.srcs)
    } else {
        Sources::Sparse(job.srcs)
    };

    let mut off = 0;
    if use_streaming::<S, U>(job.len, job.srcs, &finish.outputs()) {
        while off + U * lanes <= vec_end {
            let (p, q) = syndromes::<S, U>(&sources, off);
            finish.store_block::<true, U>(p, q, off);
            off += U * lanes;
        }
        _mm_sfence();
    }
    while off + U * lanes <= vec_end {
        let (p, q) = syndromes::<S, U>(&sources, off);
        finish.store_block::<false, U>(p, q, off);
        off += U * lanes;
    }
    while off < vec_end {
        let (p, q) = syndromes::<S, 1>(&sources, off);
        finish.store::<false>(p[0], q[0], off);
        off += lanes;
    }
    debug_assert_eq!(off, vec_end);
    if vec_end < job.len {
        scalar::pq(job, vec_end);
    }
}

/// P' and Q' for `U` vectors at `off` by Horner's scheme, from the last data
/// index down: `Q = Q * 2 ^ D_i` (a null source contributes only the `* 2`;
/// with `DENSE` there is none). With [`Simd::OFFSET_Q`] the accumulator is
/// kept as `Q ^ Q_OFFSET` in between.
#[inline(always)]
unsafe fn horner_block<S: Simd, const U: usize, const DENSE: bool>(
    srcs: &[*const u8],
    off: usize,
) -> ([S::V; U], [S::V; U]) {
    let lanes = S::LANES;
    let (&last, lower) = srcs.split_last().unwrap_or((&core::ptr::null(), &[]));
    debug_assert!(!DENSE || srcs.iter().all(|s| !s.is_null()));
    let mut p = [S::zero(); U];
    if DENSE || !last.is_null() {
        for (u, p) in p.iter_mut().enumerate() {
            *p = S::load(last.add(off + u * lanes));
        }
    }
    let mut q = p;
    if S::OFFSET_Q {
        let e = S::splat(Q_OFFSET);
        for q in q.iter_mut() {
            *q = S::xor(*q, e);
        }
    }
    for &s in lower.iter().rev() {
        for q in q.iter_mut() {
            *q = if S::OFFSET_Q {
                S::mul2_offset(*q)
            } else {
                S::mul2(*q)
            };
        }
        if DENSE || !s.is_null() {
            for u in 0..U {
                let d = S::load(s.add(off + u * lanes));
                p[u] = S::xor(p[u], d);
                q[u] = S::xor(q[u], d);
            }
        }
    }
    if S::OFFSET_Q {
        let e = S::splat(Q_OFFSET);
        for q in q.iter_mut() {
            *q = S::xor(*q, e);
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
    ($simd:ty, $features:literal, $unroll:literal, $xor:ident, $pq:ident, $delta:ident) => {
        /// # Safety
        /// The CPU has the named features; the job obeys `super`'s contract.
        #[target_feature(enable = $features)]
        pub(super) unsafe fn $xor(job: &XorJob<'_>) {
            xor_kernel::<$simd, $unroll>(job)
        }

        /// # Safety
        /// The CPU has the named features; the job obeys `super`'s contract.
        #[target_feature(enable = $features)]
        pub(super) unsafe fn $pq(job: &PqJob<'_>) {
            pq_kernel::<$simd, $unroll>(job)
        }

        /// # Safety
        /// The CPU has the named features; the job obeys `super`'s contract.
        #[target_feature(enable = $features)]
        pub(super) unsafe fn $delta(job: &DeltaJob) {
            delta_kernel::<$simd>(job)
        }
    };
}

entry_points!(Sse2, "sse2", 4, xor_sse2, pq_sse2, delta_sse2);
entry_points!(Avx2, "avx2", 4, xor_avx2, pq_avx2, delta_avx2);
entry_points!(
    Avx512,
    "avx512f,avx512bw",
    2,
    xor_avx512,
    pq_avx512,
    delta_avx512
);
entry_points!(
    Gfni,
    "avx512f,avx512bw,gfni",
    2,
    xor_gfni,
    pq_gfni,
    delta_gfni
);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Isa;

    /// `mul2` is the field's multiplication by {02}, and `mul2_offset` keeps
    /// the offset form, for every byte value.
    #[inline(always)]
    unsafe fn check_mul2<S: Simd>() {
        let bytes: [u8; 256] = core::array::from_fn(|i| i as u8);
        let (mut plain, mut offset) = ([0u8; 256], [0u8; 256]);
        for at in (0..256).step_by(S::LANES) {
            let q = S::load(bytes.as_ptr().add(at));
            S::store(plain.as_mut_ptr().add(at), S::mul2(q));
            let t = S::xor(q, S::splat(Q_OFFSET));
            S::store(offset.as_mut_ptr().add(at), S::mul2_offset(t));
        }
        for x in 0..=255u8 {
            let want = gf::mul(2, x);
            assert_eq!(plain[x as usize], want, "mul2({x:#04x})");
            assert_eq!(offset[x as usize], want ^ Q_OFFSET, "mul2_offset({x:#04x})");
        }
    }

    #[target_feature(enable = "sse2")]
    unsafe fn check_sse2() {
        check_mul2::<Sse2>()
    }
    #[target_feature(enable = "avx2")]
    unsafe fn check_avx2() {
        check_mul2::<Avx2>()
    }
    #[target_feature(enable = "avx512f,avx512bw")]
    unsafe fn check_avx512() {
        check_mul2::<Avx512>()
    }
    #[target_feature(enable = "avx512f,avx512bw,gfni")]
    unsafe fn check_gfni() {
        check_mul2::<Gfni>()
    }

    #[test]
    fn multiply_by_two_in_both_forms_on_every_available_path() {
        for isa in Isa::available() {
            // SAFETY: each check runs only where its features are present.
            unsafe {
                match isa {
                    Isa::Sse2 => check_sse2(),
                    Isa::Avx2 => check_avx2(),
                    Isa::Avx512 => check_avx512(),
                    Isa::Gfni => check_gfni(),
                    _ => {}
                }
            }
        }
    }

    #[test]
    fn streaming_hazard_is_an_output_close_to_a_source_modulo_4k() {
        // Addresses only: `stream_hazard` never dereferences them.
        let src = 0x7000_0000usize;
        let at = |a: usize| a as *const u8;
        let out = |a: usize| a as *mut u8;
        let step = 128;
        let hazard = |o: usize| stream_hazard(&[at(src)], &[out(o)], step);
        // Same offset in another page, or far away modulo 4 KiB: no hazard.
        assert!(!hazard(src + 5 * 4096));
        assert!(!hazard(src + 5 * 4096 + 2 * step));
        assert!(!hazard(src + 5 * 4096 + 2048));
        assert!(!hazard(src + 5 * 4096 - step));
        // Less than two steps ahead, or less than one behind: a hazard.
        for d in [32, 64, 96, 128, 224] {
            assert!(hazard(src + (1 << 20) + d), "{d} ahead");
        }
        for d in [32, 96] {
            assert!(hazard(src + (1 << 20) - d), "{d} behind");
        }
        // Any pair counts; null pointers (absent buffers) do not.
        let far = src + 2048;
        assert!(stream_hazard(
            &[at(far), at(src)],
            &[out(far + 4096), out(src + 64)],
            step
        ));
        assert!(!stream_hazard(
            &[core::ptr::null(), at(far)],
            &[out(src + 64), core::ptr::null_mut()],
            step
        ));
    }
}
