//! Long fuzz campaign of the NBD server state machine (see `fuzz/nbd.rs` for the properties):
//! `cargo run --release -p nbd --example fuzz_nbd -- --secs 60` (or `scripts/fuzz.sh`). On a
//! failure it prints the case seed; `--case SEED` replays it.

#[path = "../../../fuzz/fuzzutil.rs"]
mod fuzzutil;
#[path = "../../../fuzz/nbd.rs"]
mod target;

fn main() {
    let campaign = fuzzutil::Campaign::from_args("nbd");
    for (i, input) in fuzzutil::corpus_files("nbd").iter().enumerate() {
        let mut rng = fuzzutil::Rng::new(i as u64);
        let config = target::config(&mut rng);
        if let Err(e) = target::check_stream(&mut rng, &config, input) {
            println!("nbd: corpus input {i} violates a property: {e}");
            std::process::exit(1);
        }
    }
    campaign.run(target::case);
}
