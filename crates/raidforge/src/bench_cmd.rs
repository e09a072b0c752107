//! `raidforge bench ...`: speed measurements (the codec crate does the work).

use clap::Subcommand;

#[derive(Subcommand, Debug)]
pub enum BenchCommand {
    /// Parity math speed: XOR and P+Q encode, one- and two-erasure decode, beside ISA-L when
    /// libisal.so.2 is installed. Runs on one core.
    Parity {
        /// Print one JSON object: {"cases": [{"op", "k", "p", "chunk", "ours_gbps", "isal_gbps", "ratio"}]}.
        #[arg(long)]
        json: bool,
    },
}

pub fn run(c: BenchCommand) -> anyhow::Result<()> {
    match c {
        BenchCommand::Parity { json } => {
            let _ = json;
            anyhow::bail!("the parity benchmark is not wired yet")
        }
    }
}
