//! Shared by the fuzz drivers (`crates/*/examples/fuzz_*.rs`) and the bounded fuzz tests
//! (`crates/*/tests/fuzz_*.rs`), included with `#[path = "../../../fuzz/fuzzutil.rs"] mod
//! fuzzutil;` so that no crate depends on another for it.
//!
//! - [`Rng`]: SplitMix64, one seed per case, so a failing case replays from the seed printed.
//! - [`mutate`]: a structure-unaware byte mutator in the libFuzzer/AFL tradition (bit flips,
//!   random bytes, interesting integers in both byte orders, small arithmetic, insertion,
//!   deletion, duplication, splicing from another input, truncation, dictionary tokens). The
//!   drivers make it structure-aware by starting from valid encodings and by their own
//!   field-level mutations (fixing a checksum, replacing a field of a line).
//! - [`Campaign`]: the loop of a driver: a time or iteration budget, a seed per case, panics
//!   caught and reported with the case's seed (and its input written next to the corpus),
//!   iterations per second and the distinct outcomes at the end, and a small corpus of one
//!   input per outcome kept under `fuzz/corpus/<target>/`.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// The fuzzers' seeded stream: `layout::SplitMix64`, with the draws they need on top.
#[derive(Clone, Debug)]
pub struct Rng(layout::SplitMix64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(layout::SplitMix64::new(seed))
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }
    /// Uniform in `0..n` (`n > 0`; the modulo bias is irrelevant here).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
    pub fn index(&mut self, n: usize) -> usize {
        self.below(n as u64) as usize
    }
    /// True with probability `num / den`.
    pub fn chance(&mut self, num: u64, den: u64) -> bool {
        self.below(den) < num
    }
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.index(items.len())]
    }
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next_u64() as u8).collect()
    }
    /// Small values more often than large ones: a random bit width, then a value of that width.
    pub fn skewed(&mut self) -> u64 {
        let bits = self.below(65);
        if bits == 0 {
            0
        } else if bits == 64 {
            self.next_u64()
        } else {
            self.next_u64() & ((1u64 << bits) - 1)
        }
    }
}

/// Integers at the edges of the usual ranges.
pub const INTERESTING: [u64; 22] = [
    0,
    1,
    2,
    0x7f,
    0x80,
    0xff,
    0x100,
    511,
    512,
    4095,
    4096,
    0x7fff,
    0x8000,
    0xffff,
    0x1_0000,
    0x7fff_ffff,
    0x8000_0000,
    0xffff_ffff,
    0x1_0000_0000,
    0x7fff_ffff_ffff_ffff,
    0x8000_0000_0000_0000,
    u64::MAX,
];

/// One random mutation of `data`, keeping it at most `max_len` bytes. `dict` holds tokens
/// worth inserting or overwriting with; `others` inputs to splice from.
pub fn mutate_once(
    rng: &mut Rng,
    data: &mut Vec<u8>,
    max_len: usize,
    dict: &[&[u8]],
    others: &[&[u8]],
) {
    let len = data.len();
    match rng.below(13) {
        // Flip one bit.
        0 if len > 0 => {
            let at = rng.index(len);
            data[at] ^= 1 << rng.below(8);
        }
        // A random byte.
        1 if len > 0 => {
            let at = rng.index(len);
            data[at] = rng.next_u64() as u8;
        }
        // An interesting integer, 1/2/4/8 bytes, either byte order.
        2 if len > 0 => {
            let width = *rng.pick(&[1usize, 2, 4, 8]);
            let mut v = *rng.pick(&INTERESTING);
            if rng.chance(1, 4) {
                v = v.wrapping_neg();
            }
            let bytes = if rng.chance(1, 2) {
                v.to_le_bytes()
            } else {
                v.to_be_bytes()
            };
            let bytes = if bytes[0] == 0 && width < 8 && rng.chance(1, 2) {
                &bytes[8 - width..]
            } else {
                &bytes[..width]
            };
            let at = rng.index(len);
            let n = bytes.len().min(len - at);
            data[at..at + n].copy_from_slice(&bytes[..n]);
        }
        // Add or subtract a little from one byte.
        3 if len > 0 => {
            let at = rng.index(len);
            let d = 1 + rng.below(16) as u8;
            data[at] = if rng.chance(1, 2) {
                data[at].wrapping_add(d)
            } else {
                data[at].wrapping_sub(d)
            };
        }
        // Insert random bytes.
        4 => {
            let n = 1 + rng.index(16);
            let at = rng.index(len + 1);
            let ins = rng.bytes(n);
            data.splice(at..at, ins);
        }
        // Delete a range.
        5 if len > 0 => {
            let at = rng.index(len);
            let n = 1 + rng.index((len - at).min(64));
            data.drain(at..at + n);
        }
        // Duplicate a range somewhere else.
        6 if len > 0 => {
            let at = rng.index(len);
            let n = 1 + rng.index((len - at).min(128));
            let piece = data[at..at + n].to_vec();
            let to = rng.index(len + 1);
            data.splice(to..to, piece);
        }
        // Splice: a piece of another input, inserted or overwriting.
        7 if !others.is_empty() => {
            let other = *rng.pick(others);
            if !other.is_empty() {
                let at = rng.index(other.len());
                let n = 1 + rng.index((other.len() - at).min(256));
                let piece = &other[at..at + n];
                let to = rng.index(len + 1);
                if rng.chance(1, 2) || to + n > len {
                    data.splice(to..to, piece.iter().copied());
                } else {
                    data[to..to + n].copy_from_slice(piece);
                }
            }
        }
        // Truncate.
        8 if len > 0 => {
            let to = rng.index(len);
            data.truncate(to);
        }
        // A dictionary token, inserted or overwriting.
        9 | 10 if !dict.is_empty() => {
            let token = *rng.pick(dict);
            let to = rng.index(len + 1);
            if rng.chance(1, 2) || to + token.len() > len {
                data.splice(to..to, token.iter().copied());
            } else {
                data[to..to + token.len()].copy_from_slice(token);
            }
        }
        // Swap two bytes.
        11 if len > 1 => {
            let (a, b) = (rng.index(len), rng.index(len));
            data.swap(a, b);
        }
        // Fill a short range with one value.
        12 if len > 0 => {
            let at = rng.index(len);
            let n = 1 + rng.index((len - at).min(32));
            let v = *rng.pick(&[0u8, 0xff, b' ', b',', b'0', b'9', b'\n']);
            data[at..at + n].fill(v);
        }
        _ => {
            // The chosen mutation does not apply to this input: append a byte instead.
            data.push(rng.next_u64() as u8);
        }
    }
    data.truncate(max_len);
}

/// 1 to 8 stacked mutations (more often few).
pub fn mutate(rng: &mut Rng, data: &mut Vec<u8>, max_len: usize, dict: &[&[u8]], others: &[&[u8]]) {
    let most = 1 + rng.below(8);
    let n = 1 + rng.below(most);
    for _ in 0..n {
        mutate_once(rng, data, max_len, dict, others);
    }
}

/// Splits `data` into random pieces (of 1 byte up to the whole), for feeding stream parsers.
pub fn random_pieces<'a>(rng: &mut Rng, data: &'a [u8]) -> Vec<&'a [u8]> {
    let mut out = Vec::new();
    let mut rest = data;
    let mode = rng.below(3);
    while !rest.is_empty() {
        let n = match mode {
            0 => 1,
            1 => 1 + rng.index(rest.len().min(40)),
            _ => 1 + rng.index(rest.len()),
        };
        out.push(&rest[..n]);
        rest = &rest[n..];
    }
    out
}

/// What one case found: an outcome name (counted; one input per distinct outcome is kept) or a
/// property violation.
pub type CaseResult = Result<String, String>;

/// Command line of a driver: `--secs S` (default 60), `--iters N`, `--seed S` (default: from
/// the clock), `--case C` (replay one case seed and print what it did), `--corpus DIR`.
pub struct Campaign {
    pub name: &'static str,
    pub secs: f64,
    pub iters: Option<u64>,
    pub seed: u64,
    pub case: Option<u64>,
    pub corpus: Option<PathBuf>,
}

impl Campaign {
    pub fn from_args(name: &'static str) -> Campaign {
        let mut c = Campaign {
            name,
            secs: 60.0,
            iters: None,
            seed: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(1),
            case: None,
            corpus: None,
        };
        let args: Vec<String> = std::env::args().skip(1).collect();
        let mut i = 0;
        let value = |i: usize| -> &str {
            args.get(i + 1)
                .map(String::as_str)
                .unwrap_or_else(|| panic!("{} needs a value", args[i]))
        };
        let num = |s: &str| -> u64 {
            let s = s.replace('_', "");
            match s.strip_prefix("0x") {
                Some(h) => u64::from_str_radix(h, 16).expect("a hexadecimal number"),
                None => s.parse().expect("a number"),
            }
        };
        while i < args.len() {
            match args[i].as_str() {
                "--secs" => c.secs = value(i).parse().expect("seconds"),
                "--iters" => c.iters = Some(num(value(i))),
                "--seed" => c.seed = num(value(i)),
                "--case" => c.case = Some(num(value(i))),
                "--corpus" => c.corpus = Some(PathBuf::from(value(i))),
                "--help" | "-h" => {
                    println!(
                        "usage: {name} [--secs S] [--iters N] [--seed S] [--case C] [--corpus DIR]"
                    );
                    std::process::exit(0);
                }
                other => panic!("unknown argument {other}"),
            }
            i += 2;
        }
        c
    }

    /// The seed of case `i` of this campaign.
    pub fn case_seed(&self, i: u64) -> u64 {
        let mut r = Rng::new(self.seed ^ i.wrapping_mul(0xD6E8_FEB8_6659_FD93));
        r.next_u64()
    }

    /// Runs `case(seed, &mut input)` until the budget is spent. `case` builds the input it
    /// tests into the vector (so a failing input can be saved) and returns its outcome. Exits
    /// the process with status 1 on the first failure or panic.
    pub fn run(&self, mut case: impl FnMut(u64, &mut Vec<u8>) -> CaseResult) {
        if let Some(seed) = self.case {
            let mut input = Vec::new();
            let r = case(seed, &mut input);
            println!(
                "{}: case {seed:#x}: {r:?} ({} bytes of input)",
                self.name,
                input.len()
            );
            if let Some(dir) = &self.corpus {
                save(dir, &format!("case-{seed:016x}"), &input);
            }
            std::process::exit(i32::from(r.is_err()));
        }
        println!(
            "{}: seed {:#x}, budget {} s{}",
            self.name,
            self.seed,
            self.secs,
            self.iters
                .map(|n| format!(" or {n} iterations"))
                .unwrap_or_default()
        );
        let start = Instant::now();
        let budget = Duration::from_secs_f64(self.secs);
        let mut outcomes: BTreeMap<String, u64> = BTreeMap::new();
        // Outcomes with an input kept in the corpus (the first one small enough).
        let mut kept = std::collections::BTreeSet::new();
        let mut i = 0u64;
        let mut input = Vec::new();
        let mut input_bytes = 0u64;
        loop {
            if self.iters.is_some_and(|n| i >= n)
                || (i.is_multiple_of(64) && start.elapsed() >= budget)
            {
                break;
            }
            let seed = self.case_seed(i);
            input.clear();
            let r = catch_unwind(AssertUnwindSafe(|| case(seed, &mut input)));
            input_bytes += input.len() as u64;
            let failure = match r {
                Ok(Ok(outcome)) => {
                    if input.len() <= CORPUS_INPUT_MAX && !kept.contains(&outcome) {
                        if let Some(dir) = &self.corpus {
                            save(dir, &sanitize(&outcome), &input);
                        }
                        kept.insert(outcome.clone());
                    }
                    *outcomes.entry(outcome).or_insert(0) += 1;
                    None
                }
                Ok(Err(violation)) => Some(format!("property violated: {violation}")),
                Err(panic) => {
                    let msg = panic
                        .downcast_ref::<String>()
                        .cloned()
                        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                        .unwrap_or_else(|| "(non-string panic)".into());
                    Some(format!("panic: {msg}"))
                }
            };
            if let Some(f) = failure {
                println!("{}: FAILED at iteration {i}: {f}", self.name);
                println!(
                    "{}: replay with --case {seed:#x} (campaign --seed {:#x})",
                    self.name, self.seed
                );
                if let Some(dir) = &self.corpus {
                    let path = save(&dir.join("crashes"), &format!("case-{seed:016x}"), &input);
                    println!("{}: input saved to {}", self.name, path.display());
                }
                std::process::exit(1);
            }
            i += 1;
        }
        let secs = start.elapsed().as_secs_f64();
        println!(
            "{}: {i} iterations in {secs:.1} s ({:.0}/s, {:.1} MB of input), no failure; {} distinct outcomes:",
            self.name,
            i as f64 / secs,
            input_bytes as f64 / 1e6,
            outcomes.len()
        );
        for (k, n) in &outcomes {
            println!("  {n:>10}  {k}");
        }
    }
}

/// Larger inputs are not kept in the corpus (it lives in the repository).
pub const CORPUS_INPUT_MAX: usize = 8 << 10;

fn sanitize(s: &str) -> String {
    let t: String = s
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(80)
        .collect();
    t
}

fn save(dir: &std::path::Path, name: &str, data: &[u8]) -> PathBuf {
    let _ = std::fs::create_dir_all(dir);
    let path = dir.join(name);
    let _ = std::fs::write(&path, data);
    path
}

/// Inputs kept in `fuzz/corpus/<target>/` and in its `crashes/` (inputs that once failed: kept
/// as regression cases once fixed), if any.
pub fn corpus_files(target: &str) -> Vec<Vec<u8>> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(target);
    let mut all = files_in(&dir);
    all.extend(files_in(&dir.join("crashes")));
    all
}

/// [`corpus_files`] for the CI replays: the corpus is kept in the repository, so a missing or
/// empty one is a broken checkout, and a replay of nothing would pass without testing.
pub fn kept_corpus(target: &str) -> Vec<Vec<u8>> {
    let files = corpus_files(target);
    assert!(
        !files.is_empty(),
        "fuzz/corpus/{target} is missing or empty (it is part of the repository)"
    );
    files
}

fn files_in(dir: &std::path::Path) -> Vec<Vec<u8>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.path())
                .filter(|p| p.is_file())
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    files.iter().filter_map(|p| std::fs::read(p).ok()).collect()
}
