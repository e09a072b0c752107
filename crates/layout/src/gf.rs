//! # Finite fields GF(p^m)
//!
//! RAID+ builds its Latin squares as `L_i[x, y] = i * x + y`, where `*` and `+` are the
//! operations of the finite field with `n` elements. Such a field exists exactly when `n` is a
//! prime power `p^m`; for a prime (`m = 1`) it is arithmetic modulo `p`, for `m > 1` it is
//! polynomial arithmetic over GF(p) modulo an irreducible polynomial of degree `m`.
//!
//! ## Element numbering
//!
//! An element is an integer `0..q` (`q = p^m`). Its base-`p` digits are the coefficients of a
//! polynomial of degree below `m`, least significant digit first: with `p = 3`, the integer
//! `7 = 2*3 + 1` is `2x + 1`. Zero is `0`, one is `1`, and for `m = 1` the numbering is the
//! ordinary residues modulo `p`. Addition is digit-wise modulo `p` (XOR for `p = 2`).
//!
//! ## Choice of modulus
//!
//! [`Field::new`] takes the *primitive* monic polynomial of degree `m` whose lower coefficients,
//! read as a base-`p` number (constant term as the least significant digit), are smallest.
//! Primitive means the element `x` generates the multiplicative group, so every product is a
//! table lookup through discrete logarithms. A primitive polynomial is irreducible (the ring it
//! defines has `q - 1` invertible elements), and [`is_irreducible`] checks it independently by
//! trial division. For `p = 2, m = 8` the choice is `x^8 + x^4 + x^3 + x^2 + 1` (0x11d), the
//! RAID6 field. For `m = 1` the modulus `x + c` only picks the generator `-c` of the log
//! tables (the largest primitive root modulo `p`); the arithmetic is plain residues.
//!
//! All operations are lookups in tables built once per field (`q * q` entries for addition and
//! multiplication), so fields are limited to [`MAX_ORDER`] elements.

/// Largest field order supported (the addition and multiplication tables hold `q * q` entries).
pub const MAX_ORDER: usize = 1024;

/// `Some((p, m))` when `n = p^m` for a prime `p` and `m >= 1`, else `None` (including `n < 2`).
pub fn prime_power(n: usize) -> Option<(u32, u32)> {
    if n < 2 {
        return None;
    }
    // `d` divides `v` (written without `%` so the MSRV 1.80 build needs no newer helper).
    let divides = |d: usize, v: usize| v / d * d == v;
    let mut p = 2usize;
    while p * p <= n && !divides(p, n) {
        p += 1;
    }
    if !divides(p, n) {
        p = n; // no factor up to sqrt(n): n is prime
    }
    let mut rest = n;
    let mut m = 0u32;
    while divides(p, rest) {
        rest /= p;
        m += 1;
    }
    (rest == 1).then_some((p as u32, m))
}

/// True when the monic polynomial `x^m + c[m-1] x^(m-1) + ... + c[0]` over GF(p) is irreducible
/// (`c` lists the lower coefficients, constant term first; `m = c.len() >= 1`). Trial division
/// by every monic polynomial of degree `1..=m/2`; meant for checking, not for speed.
pub fn is_irreducible(p: u32, c: &[u32]) -> bool {
    let m = c.len();
    assert!(
        m >= 1 && c.iter().all(|&d| d < p),
        "coefficients must be digits mod {p}"
    );
    let mut f: Vec<u32> = c.to_vec();
    f.push(1);
    for d in 1..=m / 2 {
        // Every monic divisor candidate of degree d: lower coefficients from 0..p^d.
        let count = (p as u64).pow(d as u32);
        for code in 0..count {
            let mut g = digits(code, p, d);
            g.push(1);
            if poly_rem(&f, &g, p).iter().all(|&r| r == 0) {
                return false;
            }
        }
    }
    true
}

fn digits(mut v: u64, p: u32, m: usize) -> Vec<u32> {
    (0..m)
        .map(|_| {
            let d = (v % p as u64) as u32;
            v /= p as u64;
            d
        })
        .collect()
}

/// Remainder of `f` divided by the monic `g` over GF(p) (coefficients constant term first).
fn poly_rem(f: &[u32], g: &[u32], p: u32) -> Vec<u32> {
    let mut r = f.to_vec();
    let dg = g.len() - 1;
    while r.len() > dg {
        let lead = *r.last().unwrap();
        let shift = r.len() - 1 - dg;
        if lead != 0 {
            for (i, &gi) in g.iter().enumerate() {
                let sub = (lead as u64 * gi as u64 % p as u64) as u32;
                r[shift + i] = (r[shift + i] + p - sub) % p;
            }
        }
        r.pop();
    }
    r
}

/// The finite field GF(p^m) with lookup tables for every operation.
#[derive(Clone, PartialEq, Eq)]
pub struct Field {
    p: u32,
    m: u32,
    q: u32,
    /// Lower coefficients of the monic modulus, constant term first.
    poly: Vec<u32>,
    add: Vec<u16>,
    mul: Vec<u16>,
    neg: Vec<u16>,
    inv: Vec<u16>,
}

impl std::fmt::Debug for Field {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Field")
            .field("p", &self.p)
            .field("m", &self.m)
            .field("poly", &self.poly)
            .finish_non_exhaustive()
    }
}

impl Field {
    /// The field with `q` elements, or `None` when `q` is not a prime power or exceeds
    /// [`MAX_ORDER`].
    pub fn new(q: usize) -> Option<Field> {
        if q > MAX_ORDER {
            return None;
        }
        let (p, m) = prime_power(q)?;
        let poly = primitive_poly(p, m);
        Some(Field::with_poly(p, m, poly))
    }

    /// Builds the tables for the modulus `x^m + poly` (which must be primitive).
    fn with_poly(p: u32, m: u32, poly: Vec<u32>) -> Field {
        let q = p.pow(m);
        let qs = q as usize;
        // Addition and negation digit by digit (XOR when p = 2).
        let digit_add = |mut a: u32, mut b: u32, neg_b: bool| {
            let (mut r, mut scale) = (0u32, 1u32);
            for _ in 0..m {
                let db = if neg_b { (p - b % p) % p } else { b % p };
                r += (a % p + db) % p * scale;
                a /= p;
                b /= p;
                scale *= p;
            }
            r
        };
        let mut add = vec![0u16; qs * qs];
        let mut neg = vec![0u16; qs];
        for a in 0..q {
            neg[a as usize] = digit_add(0, a, true) as u16;
            for b in 0..q {
                add[a as usize * qs + b as usize] = if p == 2 {
                    (a ^ b) as u16
                } else {
                    digit_add(a, b, false) as u16
                };
            }
        }
        // Powers of the generator x: exp[i] = x^i, log[x^i] = i.
        let exp = powers_of_x(p, m, &poly).expect("modulus must be primitive");
        let mut log = vec![u32::MAX; qs];
        for (i, &e) in exp.iter().enumerate() {
            log[e as usize] = i as u32;
        }
        let order = q - 1;
        let mut mul = vec![0u16; qs * qs];
        let mut inv = vec![0u16; qs];
        for a in 1..q {
            let la = log[a as usize];
            inv[a as usize] = exp[((order - la) % order) as usize] as u16;
            for b in 1..q {
                let lb = log[b as usize];
                mul[a as usize * qs + b as usize] = exp[((la + lb) % order) as usize] as u16;
            }
        }
        Field {
            p,
            m,
            q,
            poly,
            add,
            mul,
            neg,
            inv,
        }
    }

    /// The characteristic `p`.
    pub fn p(&self) -> u32 {
        self.p
    }
    /// The degree `m` of the extension (1 for a prime field).
    pub fn m(&self) -> u32 {
        self.m
    }
    /// The number of elements `q = p^m`.
    pub fn order(&self) -> u32 {
        self.q
    }
    /// Lower coefficients of the monic modulus `x^m + ...`, constant term first.
    pub fn modulus(&self) -> &[u32] {
        &self.poly
    }
    /// The generator of the multiplicative group used for the tables (the class of `x`).
    pub fn generator(&self) -> u32 {
        if self.m == 1 {
            // x = -poly[0] modulo x + poly[0].
            (self.p - self.poly[0]) % self.p
        } else {
            self.p
        }
    }

    #[inline]
    fn idx(&self, a: u32, b: u32) -> usize {
        debug_assert!(a < self.q && b < self.q, "element out of range");
        a as usize * self.q as usize + b as usize
    }
    /// `a + b`.
    #[inline]
    pub fn add(&self, a: u32, b: u32) -> u32 {
        self.add[self.idx(a, b)] as u32
    }
    /// `-a`.
    #[inline]
    pub fn neg(&self, a: u32) -> u32 {
        self.neg[a as usize] as u32
    }
    /// `a - b`.
    #[inline]
    pub fn sub(&self, a: u32, b: u32) -> u32 {
        self.add(a, self.neg(b))
    }
    /// `a * b`.
    #[inline]
    pub fn mul(&self, a: u32, b: u32) -> u32 {
        self.mul[self.idx(a, b)] as u32
    }
    /// `1 / a`, or `None` for `a = 0`.
    #[inline]
    pub fn inv(&self, a: u32) -> Option<u32> {
        (a != 0).then(|| self.inv[a as usize] as u32)
    }
    /// `a / b`, or `None` for `b = 0`.
    pub fn div(&self, a: u32, b: u32) -> Option<u32> {
        self.inv(b).map(|ib| self.mul(a, ib))
    }
}

/// `x^0, x^1, ..., x^(q-2)` modulo `x^m + poly` when `x` has multiplicative order exactly
/// `q - 1` (the polynomial is primitive), else `None`.
fn powers_of_x(p: u32, m: u32, poly: &[u32]) -> Option<Vec<u32>> {
    let q = p.pow(m);
    if poly[0] == 0 {
        return None; // divisible by x
    }
    let m = m as usize;
    let mut cur = vec![0u32; m];
    cur[0] = 1;
    let mut out = Vec::with_capacity(q as usize - 1);
    for i in 0..q - 1 {
        let v = cur.iter().rev().fold(0u32, |acc, &x| acc * p + x);
        if i > 0 && v == 1 {
            return None; // order of x divides q - 1 strictly
        }
        out.push(v);
        // cur *= x: shift up, then reduce the x^m term with x^m = -poly.
        let top = cur[m - 1];
        for j in (1..m).rev() {
            cur[j] = cur[j - 1];
        }
        cur[0] = 0;
        if top != 0 {
            for j in 0..m {
                cur[j] = (cur[j] + p - top * poly[j] % p) % p;
            }
        }
    }
    let back = cur.iter().rev().fold(0u32, |acc, &x| acc * p + x);
    (back == 1).then_some(out)
}

/// The primitive monic polynomial of degree `m` over GF(p) with the smallest code (see the
/// module docs). One always exists.
fn primitive_poly(p: u32, m: u32) -> Vec<u32> {
    let q = p.pow(m);
    (0..q as u64)
        .map(|code| digits(code, p, m as usize))
        .find(|c| powers_of_x(p, m, c).is_some())
        .expect("a primitive polynomial exists for every degree")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prime_powers_up_to_64() {
        let want = [
            2, 3, 4, 5, 7, 8, 9, 11, 13, 16, 17, 19, 23, 25, 27, 29, 31, 32, 37, 41, 43, 47, 49,
            53, 59, 61, 64,
        ];
        let got: Vec<usize> = (0..=64).filter(|&n| prime_power(n).is_some()).collect();
        assert_eq!(got, want);
        assert_eq!(prime_power(1024), Some((2, 10)));
        assert_eq!(prime_power(243), Some((3, 5)));
        assert_eq!(prime_power(1021), Some((1021, 1)));
        assert_eq!(prime_power(1000), None);
    }

    #[test]
    fn known_moduli() {
        assert_eq!(Field::new(4).unwrap().modulus(), &[1, 1]); // x^2 + x + 1
        assert_eq!(Field::new(8).unwrap().modulus(), &[1, 1, 0]); // x^3 + x + 1
        assert_eq!(
            Field::new(256).unwrap().modulus(),
            &[1, 0, 1, 1, 1, 0, 0, 0]
        ); // 0x11d
        assert_eq!(Field::new(5).unwrap().generator(), 3);
        assert_eq!(Field::new(7).unwrap().generator(), 5);
        assert!(Field::new(6).is_none());
        assert!(Field::new(2048).is_none());
    }

    #[test]
    fn prime_field_is_residue_arithmetic() {
        for p in [2u32, 3, 5, 7, 11, 13, 31, 127] {
            let f = Field::new(p as usize).unwrap();
            for a in 0..p {
                for b in 0..p {
                    assert_eq!(f.add(a, b), (a + b) % p);
                    assert_eq!(f.mul(a, b), a * b % p);
                }
            }
        }
    }

    #[test]
    fn gf256_matches_the_raid6_field() {
        // Carry-less multiplication reduced by 0x11d, as Linux MD computes it.
        fn slow(mut a: u32, mut b: u32) -> u32 {
            let mut r = 0;
            while b != 0 {
                if b & 1 != 0 {
                    r ^= a;
                }
                a <<= 1;
                if a & 0x100 != 0 {
                    a ^= 0x11d;
                }
                b >>= 1;
            }
            r
        }
        let f = Field::new(256).unwrap();
        for a in 0..256 {
            for b in 0..256 {
                assert_eq!(f.mul(a, b), slow(a, b));
                assert_eq!(f.add(a, b), a ^ b);
            }
        }
    }
}
