//! Long fuzz campaign of the trace readers (see `fuzz/traces.rs` for the properties):
//! `cargo run --release -p sim --example fuzz_traces -- --secs 60` (or `scripts/fuzz.sh`).
//! Mutates generated lines of every format and the first 64 KiB of the traces in the
//! repository's `data/traces` (real MQSim traces and synthetic MSR, Tencent and SYSTOR files). On a failure it prints the case seed; `--case SEED`
//! replays it.

#[path = "../../../fuzz/fuzzutil.rs"]
mod fuzzutil;
#[path = "../../../fuzz/traces.rs"]
mod target;

fn main() {
    let campaign = fuzzutil::Campaign::from_args("traces");
    let samples = target::real_samples(64 << 10);
    println!("traces: {} sample prefixes from data/traces", samples.len());
    for (i, input) in fuzzutil::corpus_files("traces").iter().enumerate() {
        for format in sim::TraceFormat::ALL {
            if let Err(e) = target::read_checked(input, format, sim::ReadOptions::default()) {
                println!("traces: corpus input {i} as {format} violates a property: {e}");
                std::process::exit(1);
            }
        }
    }
    campaign.run(|seed, input| target::case(seed, input, &samples));
}
