//! Long fuzz campaign of the Linux MD superblock decoder (see `fuzz/md_superblock.rs` for the
//! properties): `cargo run --release -p raidcore --example fuzz_md_superblock -- --secs 60`
//! (or `scripts/fuzz.sh 60 md_superblock`). On a failure it prints the case seed; `--case SEED`
//! replays it.

#[path = "../../../fuzz/fuzzutil.rs"]
mod fuzzutil;
#[path = "../../../fuzz/md_superblock.rs"]
mod target;

fn main() {
    let campaign = fuzzutil::Campaign::from_args("md_superblock");
    for (i, input) in fuzzutil::corpus_files("md_superblock").iter().enumerate() {
        if let Err(e) = target::check(input, None, false) {
            println!("md_superblock: corpus input {i} violates a property: {e}");
            std::process::exit(1);
        }
    }
    campaign.run(target::case);
}
