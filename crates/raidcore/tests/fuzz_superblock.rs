//! Bounded fuzzing of the superblock decoder: proptest properties plus a fixed number of the
//! campaign's cases (`fuzz/superblock.rs`; the long campaign is `scripts/fuzz.sh`).

#[path = "../../../fuzz/fuzzutil.rs"]
mod fuzzutil;
#[path = "../../../fuzz/superblock.rs"]
mod target;

use proptest::prelude::*;
use raidcore::superblock::{Superblock, SuperblockError, SUPERBLOCK_BYTES};

fn valid() -> impl Strategy<Value = Superblock> {
    any::<u64>().prop_map(|seed| target::gen_superblock(&mut fuzzutil::Rng::new(seed)))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..5000)) {
        let r = Superblock::decode(&bytes);
        if bytes.len() < SUPERBLOCK_BYTES {
            prop_assert_eq!(r, Err(SuperblockError::Short(bytes.len())));
        }
        target::check(&bytes, None, false).map_err(TestCaseError::fail)?;
    }

    #[test]
    fn arbitrary_body_with_magic_and_a_good_checksum(mut body in proptest::collection::vec(any::<u8>(), SUPERBLOCK_BYTES)) {
        body[..8].copy_from_slice(b"RAIDFRG\0");
        body[8..12].copy_from_slice(&1u32.to_le_bytes());
        body[12..16].copy_from_slice(&4096u32.to_le_bytes());
        target::fix_crc(&mut body);
        target::check(&body, None, true).map_err(TestCaseError::fail)?;
    }

    #[test]
    fn valid_superblocks_round_trip(sb in valid()) {
        let enc = sb.encode().unwrap();
        prop_assert_eq!(enc.len(), SUPERBLOCK_BYTES);
        prop_assert_eq!(Superblock::decode(&enc), Ok(sb.clone()));
        // Trailing bytes are not part of the superblock.
        let mut longer = enc.clone();
        longer.extend_from_slice(&[0xa5; 100]);
        prop_assert_eq!(Superblock::decode(&longer), Ok(sb));
    }

    #[test]
    fn any_single_bit_flip_is_refused(sb in valid(), bit in 0..SUPERBLOCK_BYTES * 8) {
        let mut enc = sb.encode().unwrap();
        enc[bit / 8] ^= 1 << (bit % 8);
        let r = Superblock::decode(&enc);
        let ok = match r {
            Err(SuperblockError::Checksum { .. }) => true,
            Err(SuperblockError::NoMagic) => bit < 64,
            Err(SuperblockError::Version(_)) => (64..96).contains(&bit),
            _ => false,
        };
        prop_assert!(ok, "bit {} flipped: {:?}", bit, r);
    }

    #[test]
    fn every_truncation_is_short(sb in valid(), len in 0..SUPERBLOCK_BYTES) {
        let enc = sb.encode().unwrap();
        prop_assert_eq!(Superblock::decode(&enc[..len]), Err(SuperblockError::Short(len)));
    }
}

/// Every one of the 32,768 single-bit flips of one superblock (the CRC's promise, exhaustively).
#[test]
fn every_bit_flip_of_one_superblock_is_refused() {
    let sb = target::gen_superblock(&mut fuzzutil::Rng::new(7));
    let enc = sb.encode().unwrap();
    for bit in 0..SUPERBLOCK_BYTES * 8 {
        let mut d = enc.clone();
        d[bit / 8] ^= 1 << (bit % 8);
        assert!(Superblock::decode(&d).is_err(), "bit {bit}");
    }
}

/// A bounded slice of the campaign (fixed seed), and the kept corpus.
#[test]
fn campaign_cases() {
    let mut input = Vec::new();
    for i in 0..3000u64 {
        input.clear();
        if let Err(e) = target::case(0x5eed_0000 + i, &mut input) {
            panic!("case {:#x}: {e}", 0x5eed_0000 + i);
        }
    }
    for (i, input) in fuzzutil::kept_corpus("superblock").iter().enumerate() {
        target::check(input, None, false).unwrap_or_else(|e| panic!("corpus input {i}: {e}"));
    }
}
