//! Long fuzz campaign of the superblock decoder (see `fuzz/superblock.rs` for the properties):
//! `cargo run --release -p raidcore --example fuzz_superblock -- --secs 60` (or
//! `scripts/fuzz.sh`). On a failure it prints the case seed; `--case SEED` replays it.

#[path = "../../../fuzz/fuzzutil.rs"]
mod fuzzutil;
#[path = "../../../fuzz/superblock.rs"]
mod target;

fn main() {
    let campaign = fuzzutil::Campaign::from_args("superblock");
    let corpus: Vec<Vec<u8>> = fuzzutil::corpus_files("superblock");
    // The kept corpus first: every input must still satisfy the properties.
    for (i, input) in corpus.iter().enumerate() {
        if let Err(e) = target::check(input, None, false) {
            println!("superblock: corpus input {i} violates a property: {e}");
            std::process::exit(1);
        }
    }
    campaign.run(target::case);
}
