//! Bounded fuzzing of the trace readers: proptest properties plus a fixed number of the
//! campaign's cases (`fuzz/traces.rs`; the long campaign is `scripts/fuzz.sh`).

#[path = "../../../fuzz/fuzzutil.rs"]
mod fuzzutil;
#[path = "../../../fuzz/traces.rs"]
mod target;

use proptest::prelude::*;
use sim::{ReadOptions, TimeOrder, TraceFormat};

fn format() -> impl Strategy<Value = TraceFormat> {
    (0..TraceFormat::ALL.len()).prop_map(|i| TraceFormat::ALL[i])
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// Any bytes: no panic, every line accounted for, every error placed.
    #[test]
    fn arbitrary_bytes(format in format(), bytes in proptest::collection::vec(any::<u8>(), 0..2000), seed in any::<u64>()) {
        let options = target::options(&mut fuzzutil::Rng::new(seed));
        target::read_checked(&bytes, format, options).map_err(TestCaseError::fail)?;
        let _ = TraceFormat::detect(None, &bytes);
    }

    /// Text made of the formats' own tokens (digits, separators, opcodes): reaches the field
    /// checks far more often than random bytes.
    #[test]
    fn token_soup(format in format(), tokens in proptest::collection::vec(0..target::DICT.len() + 10, 0..200), seed in any::<u64>()) {
        let mut bytes = Vec::new();
        for t in tokens {
            match target::DICT.get(t) {
                Some(tok) => bytes.extend_from_slice(tok),
                None => bytes.extend_from_slice((t - target::DICT.len()).to_string().as_bytes()),
            }
        }
        let options = target::options(&mut fuzzutil::Rng::new(seed));
        target::read_checked(&bytes, format, options).map_err(TestCaseError::fail)?;
        let _ = TraceFormat::detect(None, &bytes);
    }

    /// Lines generated from known values read back as exactly those values; noise lines are
    /// skipped and counted, broken lines are errors on their line.
    #[test]
    fn generated_lines_round_trip(format in format(), seed in any::<u64>(), errors in any::<bool>(), clamp in any::<bool>()) {
        let g = target::generate(&mut fuzzutil::Rng::new(seed), format, errors);
        let order = if clamp { TimeOrder::Clamp } else { TimeOrder::AsRecorded };
        target::check_generated(&g, format, order).map_err(TestCaseError::fail)?;
    }

    /// Mutated lines of the real traces (a bounded prefix of each).
    #[test]
    fn mutated_real_lines(seed in any::<u64>()) {
        let samples = samples();
        let mut input = Vec::new();
        target::case(seed, &mut input, samples).map_err(TestCaseError::fail)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Through the simulator's workload source (a file, as `raidforge sim` reads it): strict
    /// mode stops at the first broken line with an error naming the file and the line;
    /// lenient mode skips every broken line, counts them, and returns every good request.
    #[test]
    fn lenient_and_strict_sources(format in format(), seed in any::<u64>()) {
        use sim::{SourceOptions, Workload, WorkloadSpec};
        let g = target::generate(&mut fuzzutil::Rng::new(seed), format, true);
        let path = std::env::temp_dir().join(format!(
            "raidforge-fuzz-traces-{}-{seed:016x}.trace",
            std::process::id()
        ));
        std::fs::write(&path, &g.text).unwrap();
        let spec = WorkloadSpec::Trace { path: path.clone(), format: Some(format) };
        let want = target::expected(&g.requests, TimeOrder::Clamp);

        // (The model does not merge: blkparse Q replays are merged by default.)
        let plain = SourceOptions { merge: sim::MergeChoice::Off, ..SourceOptions::default() };
        let mut lenient = spec.open(1 << 40, &SourceOptions { lenient: true, ..plain.clone() }).unwrap();
        let got: Vec<_> = std::iter::from_fn(|| lenient.next_request()).collect::<Result<_, _>>().unwrap();
        prop_assert_eq!(&got, &want);
        prop_assert_eq!(lenient.skipped(), g.error_lines.len() as u64);

        let mut strict = spec.open(1 << 40, &plain).unwrap();
        let mut good = 0;
        let mut first_error = None;
        while let Some(r) = strict.next_request() {
            match r {
                Ok(_) => good += 1,
                Err(e) => {
                    first_error = Some(e);
                    break;
                }
            }
        }
        std::fs::remove_file(&path).unwrap();
        match (g.error_lines.first(), first_error) {
            (None, None) => prop_assert_eq!(good, want.len()),
            (Some(line), Some(e)) => {
                let place = format!("{}:{line}: ", path.display());
                prop_assert!(e.to_string().starts_with(&place), "{} does not start with {}", e, place);
            }
            (want_line, got) => prop_assert!(false, "broken line {:?}, error {:?}", want_line, got),
        }
    }
}

fn samples() -> &'static [(TraceFormat, Vec<u8>)] {
    static SAMPLES: std::sync::OnceLock<Vec<(TraceFormat, Vec<u8>)>> = std::sync::OnceLock::new();
    SAMPLES.get_or_init(|| target::real_samples(16 << 10))
}

/// The trace prefixes of `data/traces` are all there (two real MQSim traces and the three
/// synthetic fixtures), and read without an error, every line accounted for.
#[test]
fn real_prefixes_read_cleanly() {
    let formats: Vec<TraceFormat> = samples().iter().map(|(f, _)| *f).collect();
    assert_eq!(
        formats,
        [
            TraceFormat::Msr,
            TraceFormat::Systor,
            TraceFormat::Tencent,
            TraceFormat::MqSim,
            TraceFormat::MqSim
        ],
        "the traces of {} (sorted by name)",
        target::traces_dir().display()
    );
    for (format, text) in samples() {
        let read = target::read_checked(text, *format, ReadOptions::default()).unwrap();
        assert!(read.errors.is_empty(), "{format}: {}", read.errors[0]);
        assert!(
            read.requests.len() >= 100,
            "{format}: {}",
            read.requests.len()
        );
    }
}

/// A bounded slice of the campaign (fixed seed), and the kept corpus read as every format.
#[test]
fn campaign_cases() {
    let mut input = Vec::new();
    for i in 0..4000u64 {
        input.clear();
        if let Err(e) = target::case(0x5eed_0000 + i, &mut input, samples()) {
            panic!("case {:#x}: {e}", 0x5eed_0000 + i);
        }
    }
    let corpus = fuzzutil::kept_corpus("traces");
    for (i, input) in corpus.iter().enumerate() {
        for format in TraceFormat::ALL {
            target::read_checked(input, format, ReadOptions::default())
                .unwrap_or_else(|e| panic!("corpus input {i} as {format}: {e}"));
        }
    }
}
