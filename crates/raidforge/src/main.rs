//! raidforge: the command line. Parsing, printing and JSON live here; every decision is made by
//! the library crates (layout, codec).

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod bench_cmd;
mod layout_cmd;

/// raidforge: a software RAID engine and disk-array simulator sharing one core.
///
/// Start with `raidforge layout show --scheme raid5 --disks 5` to see where data and parity
/// live, or `raidforge layout compare` to see why RAID+ rebuilds faster than RAID-50.
#[derive(Parser, Debug)]
#[command(name = "raidforge", version, about, long_about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Show, check and compare data/parity placement schemes.
    #[command(subcommand)]
    Layout(layout_cmd::LayoutCommand),
    /// Measure speed (parity math).
    #[command(subcommand)]
    Bench(bench_cmd::BenchCommand),
}

/// Output piped into `head` and the like should end the program quietly, as it does for other
/// command-line tools, instead of panicking on the broken pipe.
fn restore_default_sigpipe() {
    // SAFETY: called first thing in main, before any thread exists; SIG_DFL is a valid handler.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

fn main() -> ExitCode {
    restore_default_sigpipe();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Layout(c) => layout_cmd::run(c),
        Command::Bench(c) => bench_cmd::run(c),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("raidforge: error: {e:#}");
            ExitCode::from(2)
        }
    }
}
