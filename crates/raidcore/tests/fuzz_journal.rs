//! Bounded fuzzing of the write journal's decoders: proptest properties plus a fixed number of
//! the campaign's cases (`fuzz/journal.rs`; the long campaign is `scripts/fuzz.sh 60 journal`).

#[path = "../../../fuzz/fuzzutil.rs"]
mod fuzzutil;
#[path = "../../../fuzz/journal.rs"]
mod target;

use proptest::prelude::*;
use raidcore::journal::{JournalError, JournalRecord};

fn valid() -> impl Strategy<Value = JournalRecord> {
    any::<u64>().prop_map(|seed| target::gen_record(&mut fuzzutil::Rng::new(seed)))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..6000)) {
        target::check_record(&bytes, None, false).map_err(TestCaseError::fail)?;
        target::check_checkpoint(&bytes).map_err(TestCaseError::fail)?;
    }

    #[test]
    fn arbitrary_body_with_a_header_and_a_good_checksum(
        mut body in proptest::collection::vec(any::<u8>(), 52..3000),
        entries in 0u32..4,
    ) {
        let len = body.len() as u32;
        body[..8].copy_from_slice(b"RFJREC\0\0");
        body[8..12].copy_from_slice(&1u32.to_le_bytes());
        body[12..16].copy_from_slice(&len.to_le_bytes());
        body[40..44].copy_from_slice(&entries.to_le_bytes());
        body[44..48].fill(0);
        target::fix_record_crc(&mut body);
        target::check_record(&body, None, true).map_err(TestCaseError::fail)?;
    }

    #[test]
    fn valid_records_round_trip(r in valid(), junk in proptest::collection::vec(any::<u8>(), 0..100)) {
        let enc = r.encode();
        prop_assert_eq!(enc.len() % 4096, 0);
        prop_assert_eq!(JournalRecord::decode(&enc), Ok(r.clone()));
        let len = JournalRecord::encoded_len(&enc).unwrap();
        let mut other = enc[..len].to_vec();
        other.extend_from_slice(&junk);
        prop_assert_eq!(JournalRecord::decode(&other), Ok(r));
    }

    #[test]
    fn any_single_bit_flip_is_refused(r in valid(), bit in any::<usize>()) {
        let mut enc = r.encode();
        let len = JournalRecord::encoded_len(&enc).unwrap();
        let bit = bit % (len * 8);
        enc[bit / 8] ^= 1 << (bit % 8);
        prop_assert!(JournalRecord::decode(&enc).is_err(), "bit {} flipped", bit);
    }

    #[test]
    fn every_truncation_and_tear_is_refused(r in valid(), cut in any::<usize>()) {
        let enc = r.encode();
        let len = JournalRecord::encoded_len(&enc).unwrap();
        let cut = cut % len;
        prop_assert!(JournalRecord::decode(&enc[..cut]).is_err());
        if cut / 512 * 512 > 0 {
            let mut torn = enc.clone();
            torn[cut / 512 * 512..].fill(0);
            prop_assert_eq!(JournalRecord::decode(&torn), Err(JournalError::Checksum));
        }
    }
}

/// A bounded slice of the campaign (fixed seed), and the kept corpus.
#[test]
fn campaign_cases() {
    let mut input = Vec::new();
    for i in 0..3000u64 {
        input.clear();
        if let Err(e) = target::case(0x10a1_0000 + i, &mut input) {
            panic!("case {:#x}: {e}", 0x10a1_0000 + i);
        }
    }
    let corpus = fuzzutil::kept_corpus("journal");
    for (i, input) in corpus.iter().enumerate() {
        target::check_corpus(input).unwrap_or_else(|e| panic!("corpus input {i}: {e}"));
    }
}
