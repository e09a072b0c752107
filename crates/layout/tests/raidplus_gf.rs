//! GF(p^m) arithmetic behind the RAID+ Latin squares: field axioms, inverses and the choice of
//! modulus, for every prime power the RAID+ paper's pool sizes need (and up to 256).

use layout::gf::{is_irreducible, prime_power, Field};

fn prime_powers(range: std::ops::RangeInclusive<usize>) -> Vec<usize> {
    range.filter(|&q| prime_power(q).is_some()).collect()
}

#[test]
fn prime_power_decomposes() {
    assert_eq!(prime_power(0), None);
    assert_eq!(prime_power(1), None);
    assert_eq!(prime_power(2), Some((2, 1)));
    assert_eq!(prime_power(6), None);
    assert_eq!(prime_power(12), None);
    assert_eq!(prime_power(49), Some((7, 2)));
    assert_eq!(prime_power(81), Some((3, 4)));
    assert_eq!(prime_power(128), Some((2, 7)));
    assert_eq!(prime_power(121), Some((11, 2)));
    assert_eq!(prime_power(127), Some((127, 1)));
    for q in 2..=1024usize {
        if let Some((p, m)) = prime_power(q) {
            assert_eq!((p as usize).pow(m), q);
            assert!((2..p).all(|d| p % d != 0), "{p} is prime");
        }
    }
}

/// Every field axiom, checked on all pairs and triples, for every field of order <= 32.
#[test]
fn field_axioms_exhaustive_up_to_32() {
    for q in prime_powers(2..=32) {
        let f = Field::new(q).unwrap();
        let q = q as u32;
        for a in 0..q {
            assert_eq!(f.add(a, 0), a);
            assert_eq!(f.mul(a, 1), a);
            assert_eq!(f.mul(a, 0), 0);
            assert_eq!(f.add(a, f.neg(a)), 0, "q={q} a={a}");
            if a != 0 {
                assert_eq!(f.mul(a, f.inv(a).unwrap()), 1, "q={q} a={a}");
            }
            for b in 0..q {
                assert_eq!(f.add(a, b), f.add(b, a));
                assert_eq!(f.mul(a, b), f.mul(b, a));
                assert_eq!(f.add(f.sub(a, b), b), a);
                if a != 0 && b != 0 {
                    assert_ne!(f.mul(a, b), 0, "no zero divisors: q={q} {a}*{b}");
                }
                for c in 0..q {
                    assert_eq!(f.add(f.add(a, b), c), f.add(a, f.add(b, c)));
                    assert_eq!(f.mul(f.mul(a, b), c), f.mul(a, f.mul(b, c)));
                    assert_eq!(f.mul(a, f.add(b, c)), f.add(f.mul(a, b), f.mul(a, c)));
                }
            }
        }
        assert_eq!(f.inv(0), None);
    }
}

/// For every prime power up to 256: the modulus is irreducible (trial division), every nonzero
/// element has an inverse, addition is digit-wise mod p, the tables are Latin (each row of `+`
/// and of `*` by a nonzero element is a permutation), and distributivity holds on a sample.
#[test]
fn every_field_up_to_256() {
    for q in prime_powers(2..=256) {
        let f = Field::new(q).unwrap();
        let (p, m) = (f.p(), f.m());
        assert_eq!((p as usize).pow(m), q);
        assert_eq!(f.modulus().len(), m as usize);
        assert!(is_irreducible(p, f.modulus()), "q={q}: {:?}", f.modulus());
        let q = q as u32;
        // The generator's powers reach every nonzero element.
        let g = f.generator();
        let mut seen = vec![false; q as usize];
        let mut v = 1;
        for _ in 0..q - 1 {
            assert!(!seen[v as usize], "q={q}: generator order too small");
            seen[v as usize] = true;
            v = f.mul(v, g);
        }
        assert_eq!(v, 1);
        for a in 0..q {
            if a != 0 {
                let i = f.inv(a).unwrap();
                assert_eq!(f.mul(a, i), 1, "q={q} a={a}");
                assert_eq!(f.div(a, a), Some(1));
            }
            let mut row_add = vec![false; q as usize];
            let mut row_mul = vec![false; q as usize];
            for b in 0..q {
                // Digit-wise addition.
                let (mut x, mut y, mut s, mut scale) = (a, b, 0, 1);
                for _ in 0..m {
                    s += (x % p + y % p) % p * scale;
                    x /= p;
                    y /= p;
                    scale *= p;
                }
                assert_eq!(f.add(a, b), s, "q={q} {a}+{b}");
                row_add[f.add(a, b) as usize] = true;
                row_mul[f.mul(a, b) as usize] = true;
                let c = (a * 7 + b * 13 + 5) % q;
                assert_eq!(f.mul(a, f.add(b, c)), f.add(f.mul(a, b), f.mul(a, c)));
            }
            assert!(row_add.iter().all(|&s| s));
            if a != 0 {
                assert!(
                    row_mul.iter().all(|&s| s),
                    "q={q}: {a} * _ is a permutation"
                );
            }
        }
    }
}

#[test]
fn irreducibility_check_itself() {
    assert!(is_irreducible(2, &[1, 1])); // x^2 + x + 1
    assert!(!is_irreducible(2, &[1, 0])); // x^2 + 1 = (x + 1)^2
    assert!(!is_irreducible(2, &[0, 1])); // x^2 + x
    assert!(is_irreducible(3, &[1, 0])); // x^2 + 1 over GF(3)
    assert!(!is_irreducible(5, &[1, 0])); // x^2 + 1 = (x + 2)(x + 3) over GF(5)
    assert!(is_irreducible(2, &[1, 1, 0, 1, 1, 0, 0, 0])); // AES 0x11b
    assert!(!is_irreducible(2, &[1, 0, 0, 0, 1, 0, 0, 0])); // x^8 + x^4 + 1
                                                            // Gauss's count of monic irreducible polynomials: 3 of degree 4 over GF(2), 3 of degree 2
                                                            // over GF(3), 30 of degree 8 over GF(2).
    let count = |p: u32, m: usize| {
        (0..(p as u64).pow(m as u32))
            .filter(|&code| {
                let mut c = Vec::new();
                let mut v = code;
                for _ in 0..m {
                    c.push((v % p as u64) as u32);
                    v /= p as u64;
                }
                is_irreducible(p, &c)
            })
            .count()
    };
    assert_eq!(count(2, 4), 3);
    assert_eq!(count(3, 2), 3);
    assert_eq!(count(2, 8), 30);
}

#[test]
fn unsupported_orders() {
    for q in [0, 1, 6, 10, 12, 100, 1000, 2048] {
        assert!(Field::new(q).is_none(), "{q}");
    }
    assert!(Field::new(1024).is_some());
}
