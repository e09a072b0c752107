//! Bounded fuzzing of the NBD server state machine: proptest properties plus a fixed number of
//! the campaign's cases (`fuzz/nbd.rs`; the long campaign is `scripts/fuzz.sh`).

#[path = "../../../fuzz/fuzzutil.rs"]
mod fuzzutil;
#[path = "../../../fuzz/nbd.rs"]
mod target;

use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Any bytes, in any pieces: no panic, split-invariant, no reply it should not send.
    #[test]
    fn arbitrary_streams(bytes in proptest::collection::vec(any::<u8>(), 0..600), seed in any::<u64>()) {
        let mut rng = fuzzutil::Rng::new(seed);
        let config = target::config(&mut rng);
        target::check_stream(&mut rng, &config, &bytes).map_err(TestCaseError::fail)?;
    }

    /// Any bytes after a valid handshake (so they reach the request parser).
    #[test]
    fn arbitrary_requests(bytes in proptest::collection::vec(any::<u8>(), 0..600), seed in any::<u64>(), structured in any::<bool>()) {
        let mut rng = fuzzutil::Rng::new(seed);
        let config = target::config(&mut rng);
        let mut stream = 3u32.to_be_bytes().to_vec();
        if structured {
            stream.extend(target::opt(nbd::proto::OPT_STRUCTURED_REPLY, &[]));
        }
        stream.extend(target::opt(nbd::proto::OPT_GO, &target::go_data("c", &[])));
        stream.extend_from_slice(&bytes);
        target::check_stream(&mut rng, &config, &stream).map_err(TestCaseError::fail)?;
    }

    /// A valid handshake and random commands: the predicted option replies, requests, and
    /// error replies (handles in order, errors the protocol allows), in any pieces.
    #[test]
    fn valid_conversations(seed in any::<u64>()) {
        let mut rng = fuzzutil::Rng::new(seed);
        let config = target::config(&mut rng);
        let conv = target::conversation(&mut rng, &config);
        let pieces = fuzzutil::random_pieces(&mut rng, &conv.stream);
        let run = target::feed(&config, pieces, true, None);
        target::check_conversation(&config, &conv, &run).map_err(TestCaseError::fail)?;
        target::check_stream(&mut rng, &config, &conv.stream).map_err(TestCaseError::fail)?;
    }
}

/// A bounded slice of the campaign (fixed seed), and the kept corpus.
#[test]
fn campaign_cases() {
    let mut input = Vec::new();
    for i in 0..1500u64 {
        input.clear();
        if let Err(e) = target::case(0x5eed_0000 + i, &mut input) {
            panic!("case {:#x}: {e}", 0x5eed_0000 + i);
        }
    }
    for (i, input) in fuzzutil::kept_corpus("nbd").iter().enumerate() {
        let mut rng = fuzzutil::Rng::new(i as u64);
        let config = target::config(&mut rng);
        target::check_stream(&mut rng, &config, input)
            .unwrap_or_else(|e| panic!("corpus input {i}: {e}"));
    }
}
