//! Arithmetic in GF(2^8) with the RAID6 polynomial x^8 + x^4 + x^3 + x^2 + 1
//! (0x11d) and generator g = {02}, as used by Linux MD (`lib/raid6`) and ISA-L.
//!
//! Addition is XOR. Multiplication goes through logarithm tables (or, for the
//! reference code, a full 64 KiB product table). All tables are computed at
//! compile time, so nothing here allocates or can fail.

/// The reducing polynomial, including the x^8 term.
pub const POLY: u16 = 0x11d;

/// The generator used for Q: g = {02}.
pub const GENERATOR: u8 = 2;

/// Multiplies by {02} without tables (the shift-and-reduce step of Horner's
/// scheme).
#[inline]
pub const fn mul2(a: u8) -> u8 {
    let shifted = (a as u16) << 1;
    if shifted & 0x100 != 0 {
        (shifted ^ POLY) as u8
    } else {
        shifted as u8
    }
}

/// Multiplication by shift-and-add; used only to build the tables at compile
/// time (and as an independent check in tests).
pub(crate) const fn mul_slow(a: u8, b: u8) -> u8 {
    let mut result = 0u8;
    let mut x = a;
    let mut bits = b;
    while bits != 0 {
        if bits & 1 != 0 {
            result ^= x;
        }
        x = mul2(x);
        bits >>= 1;
    }
    result
}

/// `EXP[i] = g^i` for i in 0..510 (doubled so that `EXP[log a + log b]` never
/// needs a reduction modulo 255).
static EXP: [u8; 510] = {
    let mut table = [0u8; 510];
    let mut x = 1u8;
    let mut i = 0;
    while i < 510 {
        table[i] = x;
        x = mul2(x);
        i += 1;
    }
    table
};

/// `LOG[a]` = i such that g^i = a, for a != 0. `LOG[0]` is unused (0).
static LOG: [u8; 256] = {
    let mut table = [0u8; 256];
    let mut x = 1u8;
    let mut i = 0;
    while i < 255 {
        table[x as usize] = i as u8;
        x = mul2(x);
        i += 1;
    }
    table
};

/// The full product table, `MUL[a][b] = a * b`. 64 KiB, used by the scalar
/// reference kernels (one lookup per byte per source).
pub(crate) static MUL: [[u8; 256]; 256] = {
    let mut table = [[0u8; 256]; 256];
    let mut a = 1;
    while a < 256 {
        let log_a = LOG[a] as usize;
        let mut b = 1;
        while b < 256 {
            table[a][b] = EXP[log_a + LOG[b] as usize];
            b += 1;
        }
        a += 1;
    }
    table
};

/// `g^i`, for any `i` (the exponent is taken modulo 255).
#[inline]
pub fn exp(i: usize) -> u8 {
    EXP[i % 255]
}

/// The discrete logarithm of `a` to base g, or `None` for `a == 0`.
#[inline]
pub fn log(a: u8) -> Option<u8> {
    if a == 0 {
        None
    } else {
        Some(LOG[a as usize])
    }
}

/// The product `a * b`.
#[inline]
pub fn mul(a: u8, b: u8) -> u8 {
    MUL[a as usize][b as usize]
}

/// The multiplicative inverse of `a`, or `None` for `a == 0`.
#[inline]
pub fn inv(a: u8) -> Option<u8> {
    if a == 0 {
        None
    } else {
        Some(EXP[(255 - LOG[a as usize] as usize) % 255])
    }
}

/// The quotient `a / b`, or `None` when `b == 0`.
#[inline]
pub fn div(a: u8, b: u8) -> Option<u8> {
    inv(b).map(|ib| mul(a, ib))
}

/// The 8x8 bit matrix for "multiply by `c`", in the layout expected by the
/// x86 GFNI instruction `GF2P8AFFINEQB` (`_mm*_gf2p8affine_epi64_epi8`).
///
/// That instruction computes, for each byte `x`, output bit `i` as the parity
/// of `matrix.byte[7 - i] & x`. Since `c * x = XOR over j of x_j * (c * 2^j)`,
/// row `i` (stored in byte `7 - i`) has bit `j` set when bit `i` of
/// `c * 2^j` is set.
pub const fn affine_matrix(c: u8) -> u64 {
    let mut matrix = 0u64;
    let mut i = 0;
    while i < 8 {
        let mut row = 0u64;
        let mut j = 0;
        while j < 8 {
            let column = mul_slow(c, 1 << j);
            row |= (((column >> i) & 1) as u64) << j;
            j += 1;
        }
        matrix |= row << (8 * (7 - i));
        i += 1;
    }
    matrix
}

/// `AFFINE_GPOW[i]` = the GFNI matrix for multiplication by g^i, i < 255.
/// Used by the GFNI kernels to form Q = sum of g^i * D_i directly (without
/// Horner's serial dependency chain).
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
pub(crate) static AFFINE_GPOW: [u64; 255] = {
    let mut table = [0u64; 255];
    let mut i = 0;
    while i < 255 {
        table[i] = affine_matrix(EXP[i]);
        i += 1;
    }
    table
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_agree_with_shift_and_add() {
        for a in 0..=255u8 {
            for b in 0..=255u8 {
                assert_eq!(mul(a, b), mul_slow(a, b), "{a} * {b}");
            }
        }
    }

    #[test]
    fn generator_has_order_255() {
        let mut seen = [false; 256];
        for i in 0..255 {
            let x = exp(i);
            assert!(!seen[x as usize], "g^{i} repeats");
            seen[x as usize] = true;
        }
        assert!(!seen[0]);
        assert_eq!(exp(255), 1);
        // Known values of the 0x11d field.
        assert_eq!(exp(8), 0x1d);
        assert_eq!(mul2(0x80), 0x1d);
        assert_eq!(mul(0x53, 0xca), mul_slow(0x53, 0xca));
    }

    #[test]
    fn inverse_and_division() {
        assert_eq!(inv(0), None);
        assert_eq!(div(5, 0), None);
        assert_eq!(log(0), None);
        for a in 1..=255u8 {
            let ia = inv(a).unwrap();
            assert_eq!(mul(a, ia), 1, "inverse of {a}");
            assert_eq!(exp(log(a).unwrap() as usize), a);
            assert_eq!(div(mul(a, 7), 7), Some(a));
        }
    }

    #[test]
    fn affine_matrix_multiplies() {
        // Software model of GF2P8AFFINEQB on one byte.
        fn affine(matrix: u64, x: u8) -> u8 {
            let mut out = 0u8;
            for i in 0..8 {
                let row = (matrix >> (8 * (7 - i))) as u8;
                out |= (((row & x).count_ones() & 1) as u8) << i;
            }
            out
        }
        for c in 0..=255u8 {
            let m = affine_matrix(c);
            for x in 0..=255u8 {
                assert_eq!(affine(m, x), mul(c, x), "{c} * {x}");
            }
        }
        assert_eq!(AFFINE_GPOW[1], affine_matrix(2));
    }
}
