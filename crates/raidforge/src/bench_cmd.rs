//! `raidforge bench ...`: speed measurements. The measuring code lives in `isal-ref` (beside the
//! ISA-L loader it compares against); this only chooses the cases and prints.

use clap::Subcommand;
use isal_ref::bench::{run_parity_bench, BenchConfig};

#[derive(Subcommand, Debug)]
pub enum BenchCommand {
    /// Parity math speed on one core: XOR and P+Q encode, one- and two-erasure decode, each encode
    /// beside ISA-L's xor_gen / pq_gen on the same buffers when libisal.so.2 is installed, for k+p
    /// in {4+1, 8+1, 8+2, 16+2} and 4 KiB, 64 KiB, 1 MiB and 4 MiB chunks. Each line names the
    /// instruction-set path that ran (scalar, sse2, avx2, avx512, gfni). Takes about 20 seconds;
    /// on a busy machine compare the ratios, which are measured side by side.
    Parity {
        /// Print one JSON object: {"cpu", "isa", "isal", "isal_functions", "cases": [{"op", "k",
        /// "p", "chunk", "isa",
        /// "ours_gbps", "isal_gbps", "ratio", "decode_vs_encode"}]}.
        #[arg(long)]
        json: bool,
        /// Seconds per measured case (longer is steadier on a busy machine).
        #[arg(long)]
        case_secs: Option<f64>,
        /// Instruction set to force: scalar, sse2, avx2, avx512, gfni (default: the best this CPU has).
        #[arg(long)]
        isa: Option<String>,
        /// ISA-L's kernels to compare with: `dispatched` (xor_gen / pq_gen: ISA-L's choice for
        /// this CPU) or `avx2` (xor_gen_avx / pq_gen_avx2, called directly: what ISA-L runs on a
        /// CPU with AVX2 and no AVX-512). Default: `avx2` with `--isa avx2`, so that the two
        /// sides are what an AVX2-only machine runs; `dispatched` otherwise.
        #[arg(long)]
        isal_kernels: Option<String>,
    },
}

pub fn run(c: BenchCommand) -> anyhow::Result<()> {
    match c {
        BenchCommand::Parity {
            json,
            case_secs,
            isa,
            isal_kernels,
        } => {
            let mut cfg = BenchConfig::default();
            if let Some(s) = case_secs {
                if !(s > 0.0 && s <= 60.0) {
                    anyhow::bail!("--case-secs must be between 0 and 60, got {s}");
                }
                cfg.case_secs = s;
            }
            if let Some(name) = isa {
                let found = codec::Isa::ALL.iter().copied().find(|i| i.name() == name);
                match found {
                    Some(i) if i.is_available() => cfg.isa = Some(i),
                    Some(_) => anyhow::bail!("instruction set {name} is not available on this CPU"),
                    None => {
                        let names: Vec<&str> = codec::Isa::ALL.iter().map(|i| i.name()).collect();
                        anyhow::bail!(
                            "unknown instruction set '{name}'; choose one of {}",
                            names.join(", ")
                        )
                    }
                }
            }
            cfg.isal_kernels = match isal_kernels.as_deref() {
                None if cfg.isa == Some(codec::Isa::Avx2) => isal_ref::IsalKernels::Avx2Machine,
                None => isal_ref::IsalKernels::Dispatched,
                Some(name) => isal_ref::IsalKernels::from_name(name).ok_or_else(|| {
                    anyhow::anyhow!("unknown ISA-L kernels '{name}'; choose dispatched or avx2")
                })?,
            };
            if !json {
                eprintln!("measuring parity speed on one core (about 20 seconds)...");
            }
            let report = run_parity_bench(&cfg);
            if json {
                println!("{}", report.to_json());
            } else {
                print!("{}", report.to_table());
            }
            Ok(())
        }
    }
}
