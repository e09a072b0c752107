//! Long fuzz campaign of the write journal's decoders (see `fuzz/journal.rs` for the
//! properties): `cargo run --release -p raidcore --example fuzz_journal -- --secs 60` (or
//! `scripts/fuzz.sh 60 journal`). On a failure it prints the case seed; `--case SEED` replays it.

#[path = "../../../fuzz/fuzzutil.rs"]
mod fuzzutil;
#[path = "../../../fuzz/journal.rs"]
mod target;

fn main() {
    let campaign = fuzzutil::Campaign::from_args("journal");
    // The kept corpus first: every input must still satisfy the properties.
    for (i, input) in fuzzutil::corpus_files("journal").iter().enumerate() {
        if let Err(e) = target::check_corpus(input) {
            println!("journal: corpus input {i} violates a property: {e}");
            std::process::exit(1);
        }
    }
    campaign.run(target::case);
}
