//! Prints the parity benchmark (codec vs ISA-L) as a table, then as JSON.
//!
//! `cargo run --release -p isal-ref --example bench [-- OPTIONS]` with
//! options `--isa NAME` (scalar, sse2, avx2, avx512, gfni), `--shape K+P`
//! and `--chunk BYTES` (each repeatable; they replace the default sets),
//! `--secs S` (time per figure), `--isal-kernels dispatched|avx2` (ISA-L's own
//! choice, or its AVX2 kernels called directly), `--json` (JSON only).

use codec::Isa;
use isal_ref::bench::{run_parity_bench, BenchConfig};

fn main() {
    let mut cfg = BenchConfig::default();
    let (mut shapes, mut chunks) = (Vec::new(), Vec::new());
    let mut json_only = false;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || {
            args.next()
                .unwrap_or_else(|| fail(&format!("{arg} needs a value")))
        };
        match arg.as_str() {
            "--isa" => {
                let name = value();
                match Isa::ALL.into_iter().find(|isa| isa.name() == name) {
                    Some(isa) if isa.is_available() => cfg.isa = Some(isa),
                    _ => fail(&format!("unknown or unavailable ISA {name:?}")),
                }
            }
            "--shape" => {
                let v = value();
                let parsed = v
                    .split_once('+')
                    .and_then(|(k, p)| Some((k.parse().ok()?, p.parse().ok()?)));
                match parsed {
                    Some((k, p)) if k >= 2 && (p == 1 || p == 2) => shapes.push((k, p)),
                    _ => fail(&format!("bad shape {v:?}, want K+1 or K+2 with K >= 2")),
                }
            }
            "--chunk" => {
                let v = value();
                match v.parse() {
                    Ok(c) if c > 0 => chunks.push(c),
                    _ => fail(&format!("bad chunk size {v:?}")),
                }
            }
            "--secs" => {
                let v = value();
                match v.parse() {
                    Ok(s) if s > 0.0 => cfg.case_secs = s,
                    _ => fail(&format!("bad time {v:?}")),
                }
            }
            "--isal-kernels" => {
                cfg.isal_kernels = match value().as_str() {
                    "dispatched" => isal_ref::IsalKernels::Dispatched,
                    "avx2" => isal_ref::IsalKernels::Avx2Machine,
                    v => fail(&format!("unknown ISA-L kernels {v:?} (dispatched, avx2)")),
                }
            }
            "--json" => json_only = true,
            other => fail(&format!("unknown option {other:?}")),
        }
    }
    if !shapes.is_empty() {
        cfg.shapes = shapes;
    }
    if !chunks.is_empty() {
        cfg.chunk_sizes = chunks;
    }
    let report = run_parity_bench(&cfg);
    if !json_only {
        print!("{}", report.to_table());
    }
    println!("{}", report.to_json());
}

fn fail(msg: &str) -> ! {
    eprintln!("bench: {msg}");
    std::process::exit(2)
}
