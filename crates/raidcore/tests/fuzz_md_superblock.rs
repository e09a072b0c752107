//! Bounded fuzzing of the Linux MD superblock decoder (`raidcore::md`): proptest properties
//! plus a fixed number of the campaign's cases (`fuzz/md_superblock.rs`; the long campaign is
//! `scripts/fuzz.sh 60 md_superblock`), and the real superblocks of `tests/fixtures/md` with
//! every single bit flipped.

#[path = "../../../fuzz/fuzzutil.rs"]
mod fuzzutil;
#[path = "../../../fuzz/md_superblock.rs"]
mod target;

use proptest::prelude::*;
use raidcore::md::{MdSuperblock, MdSuperblockError};

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..5000)) {
        target::check(&bytes, None, false).map_err(TestCaseError::fail)?;
    }

    #[test]
    fn arbitrary_body_with_magic_and_a_good_checksum(mut body in proptest::collection::vec(any::<u8>(), 256..4096)) {
        body[..4].copy_from_slice(&0xa92b_4efcu32.to_le_bytes());
        body[4..8].copy_from_slice(&1u32.to_le_bytes());
        target::fix_checksum(&mut body);
        target::check(&body, None, true).map_err(TestCaseError::fail)?;
    }

    #[test]
    fn valid_superblocks_round_trip(seed in any::<u64>()) {
        let sb = target::gen_md(&mut fuzzutil::Rng::new(seed));
        let enc = sb.encode().unwrap();
        prop_assert_eq!(MdSuperblock::decode(&enc), Ok(sb.clone()));
        let mut longer = enc.clone();
        longer.extend_from_slice(&[0xa5; 100]);
        prop_assert_eq!(MdSuperblock::decode(&longer), Ok(sb));
    }
}

/// A bounded slice of the campaign (fixed seed), and the kept corpus.
#[test]
fn campaign_cases() {
    let mut input = Vec::new();
    for i in 0..3000u64 {
        input.clear();
        if let Err(e) = target::case(0x3d00_0000 + i, &mut input) {
            panic!("case {:#x}: {e}", 0x3d00_0000 + i);
        }
    }
    for (i, input) in fuzzutil::kept_corpus("md_superblock").iter().enumerate() {
        target::check(input, None, false).unwrap_or_else(|e| panic!("corpus input {i}: {e}"));
    }
}

/// Every single-bit flip of every superblock mdadm wrote is refused.
#[test]
fn every_bit_flip_of_the_real_superblocks_is_refused() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/md");
    let mut n = 0;
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_none_or(|x| x != "sb") {
            continue;
        }
        let block = std::fs::read(&p).unwrap();
        let sb = MdSuperblock::decode(&block).unwrap();
        let len = sb.len();
        for bit in 0..len * 8 {
            let mut d = block.clone();
            d[bit / 8] ^= 1 << (bit % 8);
            let r = MdSuperblock::decode(&d);
            assert!(r.is_err(), "{}: bit {bit} flipped decoded", p.display());
            if (64..200 * 8).contains(&bit) {
                assert!(
                    matches!(r, Err(MdSuperblockError::Checksum { .. })),
                    "{}: bit {bit}: {r:?}",
                    p.display()
                );
            }
        }
        n += 1;
    }
    assert!(n >= 80);
}
