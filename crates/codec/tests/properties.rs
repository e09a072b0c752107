//! Every instruction-set path against the plain specification, for XOR and
//! P+Q: encode, verify, recover, delta update. Buffers are random, of random
//! counts and lengths (including 0, 1, 31, non-multiples of 64), and start at
//! random (mis)alignments inside larger allocations.

use codec::{gf, pq, xor, Isa};
use proptest::prelude::*;

// ------------------------------------------------------------ helpers ---

/// A deterministic byte stream (xorshift64*), so a proptest case is a seed.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Rng(seed | 1)
    }
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn fill(&mut self, buf: &mut [u8]) {
        for b in buf {
            *b = self.next() as u8;
        }
    }
}

/// `count` buffers of `len` bytes, each starting at a random offset (0..64)
/// inside its own allocation, so SIMD loads are misaligned in every way.
struct Bufs {
    backing: Vec<Vec<u8>>,
    offsets: Vec<usize>,
    len: usize,
}

impl Bufs {
    fn random(count: usize, len: usize, rng: &mut Rng) -> Self {
        let mut backing = Vec::new();
        let mut offsets = Vec::new();
        for _ in 0..count {
            let off = rng.below(64);
            let mut v = vec![0u8; off + len + 64];
            rng.fill(&mut v);
            backing.push(v);
            offsets.push(off);
        }
        Bufs {
            backing,
            offsets,
            len,
        }
    }
    fn get(&self, i: usize) -> &[u8] {
        &self.backing[i][self.offsets[i]..self.offsets[i] + self.len]
    }
    fn all(&self) -> Vec<&[u8]> {
        (0..self.backing.len()).map(|i| self.get(i)).collect()
    }
    fn all_mut(&mut self) -> Vec<&mut [u8]> {
        let len = self.len;
        self.backing
            .iter_mut()
            .zip(&self.offsets)
            .map(|(b, &o)| &mut b[o..o + len])
            .collect()
    }
    /// The bytes around each buffer, which no call may touch.
    fn guards(&self) -> Vec<(Vec<u8>, Vec<u8>)> {
        self.backing
            .iter()
            .zip(&self.offsets)
            .map(|(b, &o)| (b[..o].to_vec(), b[o + self.len..].to_vec()))
            .collect()
    }
}

fn spec_p(data: &[&[u8]], len: usize) -> Vec<u8> {
    let mut p = vec![0u8; len];
    for d in data {
        for (p, &x) in p.iter_mut().zip(*d) {
            *p ^= x;
        }
    }
    p
}

/// Q as the definition reads: sum of g^i * D_i.
fn spec_q(data: &[&[u8]], len: usize) -> Vec<u8> {
    let mut q = vec![0u8; len];
    for (i, d) in data.iter().enumerate() {
        let c = gf::exp(i);
        for (q, &x) in q.iter_mut().zip(*d) {
            *q ^= gf::mul(c, x);
        }
    }
    q
}

/// Q as Linux MD computes it: Horner's scheme with multiply-by-2.
fn horner_q(data: &[&[u8]], len: usize) -> Vec<u8> {
    let mut q = vec![0u8; len];
    for d in data.iter().rev() {
        for (q, &x) in q.iter_mut().zip(*d) {
            *q = gf::mul2(*q) ^ x;
        }
    }
    q
}

fn lengths() -> impl Strategy<Value = usize> {
    prop_oneof![
        3 => 0usize..=70,
        3 => 0usize..=700,
        1 => Just(1usize),
        1 => Just(31usize),
        1 => 4096usize..=4096 + 130,
    ]
}

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 96,
        ..ProptestConfig::default()
    }
}

#[test]
fn scalar_is_always_available_and_best_is_available() {
    assert!(Isa::Scalar.is_available());
    assert!(Isa::best().is_available());
    assert_eq!(Isa::available().next(), Some(Isa::Scalar));
    assert!(Isa::available().all(|isa| isa.is_available()));
    assert_eq!(Isa::available().last(), Some(Isa::best()));
    if cfg!(target_arch = "x86_64") {
        assert!(Isa::Sse2.is_available(), "SSE2 is baseline on x86-64");
    }
}

#[test]
fn horner_and_direct_q_agree_and_match_known_vectors() {
    let mut rng = Rng::new(7);
    let bufs = Bufs::random(9, 100, &mut rng);
    let data = bufs.all();
    assert_eq!(spec_q(&data, 100), horner_q(&data, 100));
    // Hand-checked: D_0 = 1, D_1 = 1, D_2 = 0x80 gives
    // P = 0x80, Q = 1 ^ 2 ^ 4*0x80 = 3 ^ 0x3a (0x80*2 = 0x1d, *2 = 0x3a).
    let d: [&[u8]; 3] = [&[1], &[1], &[0x80]];
    let (mut p, mut q) = ([0u8], [0u8]);
    for isa in Isa::available() {
        pq::encode_with(isa, &d, &mut p, &mut q).unwrap();
        assert_eq!((p[0], q[0]), (0x80, 3 ^ 0x3a), "{isa}");
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn xor_encode_and_verify_match_spec(k in 1usize..=20, len in lengths(), seed in any::<u64>()) {
        let mut rng = Rng::new(seed);
        let mut bufs = Bufs::random(k + 1, len, &mut rng);
        let want = spec_p(&bufs.all()[..k], len);
        for isa in Isa::available() {
            let guards = bufs.guards();
            {
                let mut all = bufs.all_mut();
                let (data, parity) = all.split_at_mut(k);
                let data: Vec<&[u8]> = data.iter().map(|d| &**d).collect();
                xor::encode_with(isa, &data, parity[0]).unwrap();
            }
            prop_assert_eq!(bufs.get(k), &want[..], "{}", isa);
            prop_assert_eq!(bufs.guards(), guards);
            let all = bufs.all();
            prop_assert!(xor::verify_with(isa, &all[..k], all[k]).unwrap());
            if len > 0 {
                let mut bad = all[k].to_vec();
                bad[rng.below(len)] ^= 1 << rng.below(8);
                prop_assert!(!xor::verify_with(isa, &all[..k], &bad).unwrap());
            }
        }
    }

    #[test]
    fn pq_encode_matches_spec(k in 1usize..=24, len in lengths(), seed in any::<u64>()) {
        let mut rng = Rng::new(seed);
        let mut bufs = Bufs::random(k + 2, len, &mut rng);
        let data = bufs.all()[..k].to_vec();
        let (want_p, want_q) = (spec_p(&data, len), spec_q(&data, len));
        for isa in Isa::available() {
            let guards = bufs.guards();
            {
                let mut all = bufs.all_mut();
                let (data, parity) = all.split_at_mut(k);
                let data: Vec<&[u8]> = data.iter().map(|d| &**d).collect();
                let (p, q) = parity.split_at_mut(1);
                pq::encode_with(isa, &data, p[0], q[0]).unwrap();
            }
            prop_assert_eq!(bufs.get(k), &want_p[..], "P on {}", isa);
            prop_assert_eq!(bufs.get(k + 1), &want_q[..], "Q on {}", isa);
            prop_assert_eq!(bufs.guards(), guards);
        }
    }

    #[test]
    fn pq_verify_locates_the_bad_parity(k in 1usize..=12, len in 1usize..=300, seed in any::<u64>()) {
        let mut rng = Rng::new(seed);
        let bufs = Bufs::random(k, len, &mut rng);
        let data = bufs.all();
        let (p, q) = (spec_p(&data, len), spec_q(&data, len));
        let at = rng.below(len);
        let mut bad_p = p.clone();
        bad_p[at] ^= 0x40;
        let mut bad_q = q.clone();
        bad_q[at] ^= 0x01;
        for isa in Isa::available() {
            let ok = pq::verify_with(isa, &data, &p, &q).unwrap();
            prop_assert!(ok.is_consistent());
            let r = pq::verify_with(isa, &data, &bad_p, &q).unwrap();
            prop_assert_eq!((r.p_ok, r.q_ok), (false, true));
            let r = pq::verify_with(isa, &data, &p, &bad_q).unwrap();
            prop_assert_eq!((r.p_ok, r.q_ok), (true, false));
            let r = pq::verify_with(isa, &data, &bad_p, &bad_q).unwrap();
            prop_assert!(!r.p_ok && !r.q_ok);
        }
    }

    #[test]
    fn xor_recovers_any_one_buffer(k in 1usize..=20, len in lengths(), seed in any::<u64>()) {
        let mut rng = Rng::new(seed);
        let mut bufs = Bufs::random(k + 1, len, &mut rng);
        let p = spec_p(&bufs.all()[..k], len);
        bufs.all_mut()[k].copy_from_slice(&p);
        let want: Vec<Vec<u8>> = bufs.all().iter().map(|b| b.to_vec()).collect();
        for isa in Isa::available() {
            let lost = rng.below(k + 1);
            let guards = bufs.guards();
            bufs.all_mut()[lost].fill(0xa5);
            xor::recover_with(isa, &mut bufs.all_mut(), &[lost]).unwrap();
            prop_assert_eq!(bufs.get(lost), &want[lost][..], "buffer {} on {}", lost, isa);
            prop_assert_eq!(bufs.guards(), guards);
        }
    }

    #[test]
    fn pq_recovers_any_one_or_two(k in 1usize..=20, len in lengths(), seed in any::<u64>()) {
        let mut rng = Rng::new(seed);
        let n = k + 2;
        let mut bufs = Bufs::random(n, len, &mut rng);
        let data = bufs.all()[..k].to_vec();
        let (p, q) = (spec_p(&data, len), spec_q(&data, len));
        bufs.all_mut()[k].copy_from_slice(&p);
        bufs.all_mut()[k + 1].copy_from_slice(&q);
        let want: Vec<Vec<u8>> = bufs.all().iter().map(|b| b.to_vec()).collect();
        for isa in Isa::available() {
            for _ in 0..3 {
                let a = rng.below(n);
                let erased = match rng.below(3) {
                    0 => vec![a],
                    _ => {
                        let b = (a + 1 + rng.below(n - 1)) % n;
                        vec![a, b]
                    }
                };
                let guards = bufs.guards();
                for &e in &erased {
                    bufs.all_mut()[e].fill(0x5a);
                }
                pq::recover_with(isa, &mut bufs.all_mut(), &erased).unwrap();
                for &e in &erased {
                    prop_assert_eq!(bufs.get(e), &want[e][..], "buffer {} of {:?} on {}", e, erased, isa);
                }
                prop_assert_eq!(bufs.guards(), guards);
            }
        }
    }

    #[test]
    fn pq_delta_updates_match_reencode(k in 1usize..=16, len in lengths(), seed in any::<u64>()) {
        let mut rng = Rng::new(seed);
        let bufs = Bufs::random(k, len, &mut rng);
        let mut data: Vec<Vec<u8>> = bufs.all().iter().map(|b| b.to_vec()).collect();
        for isa in Isa::available() {
            let refs: Vec<&[u8]> = data.iter().map(|d| &d[..]).collect();
            let (mut p, mut q) = (spec_p(&refs, len), spec_q(&refs, len));
            // One buffer through `update`, then a batch through `update_many`
            // (which may name the same buffer twice: the deltas compose).
            let i = rng.below(k);
            let mut new = vec![0u8; len];
            rng.fill(&mut new);
            pq::update_with(isa, &mut p, &mut q, i, &data[i], &new).unwrap();
            data[i] = new;
            let count = 1 + rng.below(4);
            let mut olds = Vec::new();
            let mut news = Vec::new();
            let mut idx = Vec::new();
            for _ in 0..count {
                let j = rng.below(k);
                let mut new = vec![0u8; len];
                rng.fill(&mut new);
                olds.push(data[j].clone());
                news.push(new.clone());
                idx.push(j);
                data[j] = new;
            }
            let deltas: Vec<pq::Delta<'_>> = (0..count)
                .map(|t| pq::Delta { index: idx[t], old: &olds[t], new: &news[t] })
                .collect();
            pq::update_many_with(isa, &mut p, &mut q, &deltas).unwrap();
            let refs: Vec<&[u8]> = data.iter().map(|d| &d[..]).collect();
            prop_assert_eq!(&p, &spec_p(&refs, len), "P on {}", isa);
            prop_assert_eq!(&q, &spec_q(&refs, len), "Q on {}", isa);
        }
    }

    #[test]
    fn xor_delta_update_matches_reencode(k in 1usize..=10, len in lengths(), seed in any::<u64>()) {
        let mut rng = Rng::new(seed);
        let bufs = Bufs::random(k + 1, len, &mut rng);
        let mut data: Vec<Vec<u8>> = bufs.all()[..k].iter().map(|b| b.to_vec()).collect();
        for isa in Isa::available() {
            let refs: Vec<&[u8]> = data.iter().map(|d| &d[..]).collect();
            let mut p = spec_p(&refs, len);
            let i = rng.below(k);
            let new = bufs.get(k).to_vec();
            // Misaligned inputs: views into the random-offset buffer.
            xor::update_with(isa, &mut p, &data[i], &new).unwrap();
            data[i] = new;
            let refs: Vec<&[u8]> = data.iter().map(|d| &d[..]).collect();
            prop_assert_eq!(&p, &spec_p(&refs, len), "{}", isa);
        }
    }
}

/// Every erasure pattern of up to two among k+2 buffers, for several k and
/// lengths straddling the vector widths, on every path.
#[test]
fn pq_recovers_every_pattern_exhaustively() {
    let mut rng = Rng::new(42);
    for &(k, len) in &[(1, 65), (2, 64), (3, 1), (5, 200), (8, 257), (13, 1000)] {
        let n = k + 2;
        let mut bufs = Bufs::random(n, len, &mut rng);
        let data = bufs.all()[..k].to_vec();
        let (p, q) = (spec_p(&data, len), spec_q(&data, len));
        bufs.all_mut()[k].copy_from_slice(&p);
        bufs.all_mut()[k + 1].copy_from_slice(&q);
        let want: Vec<Vec<u8>> = bufs.all().iter().map(|b| b.to_vec()).collect();
        for isa in Isa::available() {
            let mut patterns: Vec<Vec<usize>> = vec![vec![]];
            patterns.extend((0..n).map(|a| vec![a]));
            for a in 0..n {
                for b in 0..n {
                    if a != b {
                        patterns.push(vec![a, b]);
                    }
                }
            }
            for erased in patterns {
                for &e in &erased {
                    bufs.all_mut()[e].fill(0xff);
                }
                pq::recover_with(isa, &mut bufs.all_mut(), &erased).unwrap();
                for (i, w) in want.iter().enumerate() {
                    assert_eq!(
                        bufs.get(i),
                        &w[..],
                        "k={k} len={len} {erased:?} buffer {i} on {isa}"
                    );
                }
            }
        }
    }
}

/// The largest code: 255 data buffers, lost pairs at the top indices (where
/// g^i wraps near g^255 = 1).
#[test]
fn pq_at_maximum_width() {
    let k = pq::MAX_DATA;
    let len = 64 + 7;
    let mut rng = Rng::new(3);
    let mut bufs = Bufs::random(k + 2, len, &mut rng);
    let data = bufs.all()[..k].to_vec();
    let (p, q) = (spec_p(&data, len), spec_q(&data, len));
    for isa in Isa::available() {
        {
            let mut all = bufs.all_mut();
            let (data, parity) = all.split_at_mut(k);
            let data: Vec<&[u8]> = data.iter().map(|d| &**d).collect();
            let (pp, qq) = parity.split_at_mut(1);
            pq::encode_with(isa, &data, pp[0], qq[0]).unwrap();
        }
        assert_eq!(bufs.get(k), &p[..]);
        assert_eq!(bufs.get(k + 1), &q[..]);
        let want: Vec<Vec<u8>> = bufs.all().iter().map(|b| b.to_vec()).collect();
        for erased in [[253, 254], [0, 254], [254, k], [254, k + 1], [0, 1]] {
            for &e in &erased {
                bufs.all_mut()[e].fill(0);
            }
            pq::recover_with(isa, &mut bufs.all_mut(), &erased).unwrap();
            for &e in &erased {
                assert_eq!(bufs.get(e), &want[e][..], "{erased:?} on {isa}");
            }
        }
    }
}

/// Vec<Vec<u8>> and arrays work as buffer containers, not only slices.
#[test]
fn owned_buffers_are_accepted() {
    let data = vec![vec![1u8, 2, 3, 4], vec![5, 6, 7, 8]];
    let (mut p, mut q) = (vec![0u8; 4], [0u8; 4]);
    pq::encode(&data, &mut p, &mut q).unwrap();
    let mut all = vec![data[0].clone(), data[1].clone(), p.clone(), q.to_vec()];
    all[0].fill(0);
    all[1].fill(0);
    pq::recover(&mut all, &[1, 0]).unwrap();
    assert_eq!(all[..2], data[..]);
    let mut parity = [0u8; 4];
    xor::encode(&data, &mut parity).unwrap();
    assert_eq!(parity, [1 ^ 5, 2 ^ 6, 3 ^ 7, 4 ^ 8]);
    assert!(xor::verify(&data, &parity).unwrap());
}

/// `k` buffers of `len` random bytes, each aligned to 64 bytes.
fn random_aligned(k: usize, len: usize, rng: &mut Rng) -> Vec<isal_ref::AlignedBuf> {
    (0..k)
        .map(|_| {
            let mut b = isal_ref::AlignedBuf::zeroed(len);
            rng.fill(&mut b);
            b
        })
        .collect()
}

/// Buffers of 256 KiB and more, aligned to 64 bytes, take the non-temporal
/// store path of the SIMD kernels (with a tail that is not a whole block).
#[test]
fn large_aligned_buffers_take_the_streaming_path() {
    use isal_ref::AlignedBuf;
    let len = 256 * 1024 + 3 * 64 + 17;
    let k = 6;
    let mut rng = Rng::new(99);
    let data = random_aligned(k, len, &mut rng);
    let refs: Vec<&[u8]> = data.iter().map(|d| &d[..]).collect();
    let (want_p, want_q) = (spec_p(&refs, len), spec_q(&refs, len));
    for isa in Isa::available() {
        let (mut p, mut q) = (AlignedBuf::zeroed(len), AlignedBuf::zeroed(len));
        xor::encode_with(isa, &refs, &mut p).unwrap();
        assert!(p[..] == want_p[..], "xor on {isa}");
        pq::encode_with(isa, &refs, &mut p, &mut q).unwrap();
        assert!(p[..] == want_p[..] && q[..] == want_q[..], "pq on {isa}");
        let mut bufs: Vec<AlignedBuf> = data.iter().cloned().chain([p, q]).collect();
        for erased in [[1, 4], [2, k], [3, k + 1], [k, k + 1]] {
            for &e in &erased {
                bufs[e].fill(0);
            }
            pq::recover_with(isa, &mut bufs, &erased).unwrap();
            assert!(
                bufs[1][..] == data[1][..] && bufs[4][..] == data[4][..],
                "{erased:?} on {isa}"
            );
            assert!(
                bufs[k][..] == want_p[..] && bufs[k + 1][..] == want_q[..],
                "{erased:?} on {isa}"
            );
            assert!(
                bufs[2][..] == data[2][..] && bufs[3][..] == data[3][..],
                "{erased:?} on {isa}"
            );
        }
        xor::recover_with(isa, &mut bufs[..=k], &[0]).unwrap();
        assert!(bufs[0][..] == data[0][..], "xor recover on {isa}");
    }
}

/// Wide codes over long buffers (the streaming stores, every unrolled step size): encode, and
/// recovery with gaps in the sources (Horner's scheme stepping over them, or the direct form
/// skipping them), with a length that leaves part steps and a scalar tail; every path
/// against the specification.
#[test]
fn wide_codes_over_long_buffers_encode_and_recover() {
    use isal_ref::AlignedBuf;
    let len = 256 * 1024 + 3 * 2048 + 5 * 64 + 17;
    let mut rng = Rng::new(2048);
    for k in [8usize, 11, 16] {
        let data = random_aligned(k, len, &mut rng);
        let refs: Vec<&[u8]> = data.iter().map(|d| &d[..]).collect();
        let (want_p, want_q) = (spec_p(&refs, len), spec_q(&refs, len));
        for isa in Isa::available() {
            let (mut p, mut q) = (AlignedBuf::zeroed(len), AlignedBuf::zeroed(len));
            pq::encode_with(isa, &refs, &mut p, &mut q).unwrap();
            assert!(p[..] == want_p[..], "P k={k} on {isa}");
            assert!(q[..] == want_q[..], "Q k={k} on {isa}");
            let mut bufs: Vec<AlignedBuf> = data.iter().cloned().chain([p, q]).collect();
            for erased in [[0, k - 1], [1, 5], [k - 1, k], [2, k + 1], [k, k + 1]] {
                for &e in &erased {
                    bufs[e].fill(0x77);
                }
                pq::recover_with(isa, &mut bufs, &erased).unwrap();
                for (i, d) in data.iter().enumerate() {
                    assert!(
                        bufs[i][..] == d[..],
                        "D{i} after {erased:?}, k={k} on {isa}"
                    );
                }
                assert!(
                    bufs[k][..] == want_p[..],
                    "P after {erased:?}, k={k} on {isa}"
                );
                assert!(
                    bufs[k + 1][..] == want_q[..],
                    "Q after {erased:?}, k={k} on {isa}"
                );
            }
        }
    }
}

/// Every length from 0 to 600 bytes, on every path: each residue of the
/// SIMD steps (16 to 256 bytes) and of the vector widths, so every split
/// between unrolled steps, single vectors and the scalar tail is taken, for
/// encode (sources without gaps) and recovery (with gaps).
#[test]
fn every_length_up_to_600_splits_correctly_between_steps_and_tail() {
    let mut rng = Rng::new(600);
    for k in [1usize, 2, 3, 5, 16] {
        for len in 0..=600 {
            let bufs = Bufs::random(k, len, &mut rng);
            let data = bufs.all();
            let (want_p, want_q) = (spec_p(&data, len), spec_q(&data, len));
            for isa in Isa::available() {
                let (mut p, mut q) = (vec![0x5a; len], vec![0xa5; len]);
                pq::encode_with(isa, &data, &mut p, &mut q).unwrap();
                assert!(p == want_p && q == want_q, "pq k={k} len={len} on {isa}");
                let mut x = vec![0x5a; len];
                xor::encode_with(isa, &data, &mut x).unwrap();
                assert!(x == want_p, "xor k={k} len={len} on {isa}");
                let mut all: Vec<Vec<u8>> = data.iter().map(|d| d.to_vec()).collect();
                all.extend([want_p.clone(), want_q.clone()]);
                let erased = if k >= 2 { [0, k - 1] } else { [0, k] };
                for &e in &erased {
                    all[e].fill(0x33);
                }
                pq::recover_with(isa, &mut all, &erased).unwrap();
                assert!(
                    all[..k].iter().zip(&data).all(|(a, d)| a[..] == d[..]),
                    "recover {erased:?} k={k} len={len} on {isa}"
                );
            }
        }
    }
}

/// Large aligned outputs placed at many offsets from the sources modulo
/// 4 KiB, just past them, just before them and far away: whether the kernels
/// stream the outputs or not (they do not when an output is close to a
/// source), the bytes are the same.
#[test]
fn output_placement_relative_to_sources_never_changes_the_result() {
    use isal_ref::AlignedBuf;
    let len: usize = 256 * 1024 + 160;
    let k = 5;
    let mut rng = Rng::new(4096);
    // Sources start at page offsets 0, 256, 512, ...; the outputs follow
    // the last source at `gap` bytes modulo 4 KiB.
    let stride = len.next_multiple_of(4096) + 4096;
    for gap in [
        0usize,
        32,
        64,
        96,
        128,
        192,
        256,
        2048,
        4096 - 128,
        4096 - 64,
        4096 - 32,
    ] {
        let mut arena = AlignedBuf::zeroed((k + 3) * stride + 8192);
        let base = arena.as_ptr() as usize;
        let page = (4096 - base % 4096) % 4096;
        let last = page + (k - 1) * stride + (k - 1) * 256;
        let mut starts: Vec<usize> = (0..k).map(|i| page + i * stride + i * 256).collect();
        starts.push(last + stride + gap);
        starts.push(last + 2 * stride + gap);
        let mut views: Vec<&mut [u8]> = Vec::new();
        let mut rest = &mut arena[..];
        let mut consumed = 0;
        for &s in &starts {
            let (_, tail) = rest.split_at_mut(s - consumed);
            let (buf, tail) = tail.split_at_mut(len);
            views.push(buf);
            rest = tail;
            consumed = s + len;
        }
        for v in views.iter_mut().take(k) {
            rng.fill(v);
        }
        let data: Vec<Vec<u8>> = views[..k].iter().map(|v| v.to_vec()).collect();
        let refs: Vec<&[u8]> = data.iter().map(|d| &d[..]).collect();
        let (want_p, want_q) = (spec_p(&refs, len), spec_q(&refs, len));
        for isa in Isa::available() {
            let (src, out) = views.split_at_mut(k);
            let src: Vec<&[u8]> = src.iter().map(|s| &s[..]).collect();
            let (p, q) = out.split_at_mut(1);
            pq::encode_with(isa, &src, p[0], q[0]).unwrap();
            assert!(p[0][..] == want_p[..], "P, gap {gap}, on {isa}");
            assert!(q[0][..] == want_q[..], "Q, gap {gap}, on {isa}");
            xor::encode_with(isa, &src, p[0]).unwrap();
            assert!(p[0][..] == want_p[..], "XOR, gap {gap}, on {isa}");
            // Rebuild P and data 1 (written at their own placements).
            views[1].fill(0);
            views[k].fill(0);
            pq::recover_with(isa, &mut views, &[1, k]).unwrap();
            assert!(views[1][..] == data[1][..], "D1, gap {gap}, on {isa}");
            assert!(views[k][..] == want_p[..], "P rebuilt, gap {gap}, on {isa}");
        }
    }
}
