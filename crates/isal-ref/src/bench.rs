//! The parity benchmark: `codec` against ISA-L on the same buffers, on the
//! calling thread (one core).
//!
//! For each shape k+p (data + parity buffers) and chunk size it measures:
//! - `xor_gen` (p = 1) or `pq_gen` (p = 2): encode, ours and ISA-L's;
//! - `decode_1`: one data buffer lost, rebuilt (from P);
//! - `decode_2` (p = 2): two data buffers lost, rebuilt from P and Q.
//!
//! Throughput is data bytes per second, `k * chunk / time`, in decimal GB/s.
//! Each figure is the best of many short repetitions; in an encode case ours
//! and ISA-L's calls alternate repetition by repetition and write the *same*
//! parity buffers, so that load changes during the run and the placement of
//! the outputs relative to the inputs (which decides how well a CPU streams
//! them: see `codec`'s kernels) are the same for both. Each case names the
//! codec path that ran (`scalar`, `sse2`, `avx2`, `avx512`, `gfni`). ISA-L
//! has no RAID decode, so decode cases have no ISA-L figure; instead
//! `decode_vs_encode` is our decode time divided by our encode time for the
//! same shape.

use crate::AlignedBuf;
use std::cell::RefCell;
use std::hint::black_box;
use std::time::Instant;

/// What to measure.
#[derive(Debug, Clone)]
pub struct BenchConfig {
    /// (k data buffers, p parity buffers) pairs; p is 1 (XOR) or 2 (P+Q).
    pub shapes: Vec<(usize, usize)>,
    /// Chunk (buffer) sizes in bytes.
    pub chunk_sizes: Vec<usize>,
    /// Wall time spent per measured figure, in seconds (split over the
    /// repetitions).
    pub case_secs: f64,
    /// Repetitions per figure; the best is kept.
    pub repetitions: usize,
    /// Force a codec path (`None`: `codec::Isa::best()`).
    pub isa: Option<codec::Isa>,
    /// Measure ISA-L too when it can be loaded.
    pub with_isal: bool,
    /// Which of ISA-L's kernels to measure against.
    pub isal_kernels: crate::IsalKernels,
}

impl Default for BenchConfig {
    /// 4+1, 8+1, 8+2, 16+2 with 4 KiB, 64 KiB, 1 MiB and 4 MiB chunks,
    /// 0.25 s per figure, best of 40 (short repetitions find the quiet moments
    /// of a shared machine): about 20 s in all.
    fn default() -> Self {
        BenchConfig {
            shapes: vec![(4, 1), (8, 1), (8, 2), (16, 2)],
            chunk_sizes: vec![4 * 1024, 64 * 1024, 1024 * 1024, 4 * 1024 * 1024],
            case_secs: 0.25,
            repetitions: 40,
            isa: None,
            with_isal: true,
            isal_kernels: crate::IsalKernels::Dispatched,
        }
    }
}

/// One measured operation.
#[derive(Debug, Clone, PartialEq)]
pub struct BenchCase {
    /// "xor_gen", "pq_gen", "decode_1" or "decode_2".
    pub op: &'static str,
    /// Data buffers.
    pub k: usize,
    /// Parity buffers.
    pub p: usize,
    /// Bytes per buffer.
    pub chunk: usize,
    /// The codec path that ran.
    pub isa: codec::Isa,
    /// Our throughput, data GB/s (1e9 bytes).
    pub ours_gbps: f64,
    /// ISA-L's throughput on the same buffers (encode cases, when loaded).
    pub isal_gbps: Option<f64>,
    /// `ours_gbps / isal_gbps`.
    pub ratio: Option<f64>,
    /// For decode cases: our decode time / our encode time, same shape.
    pub decode_vs_encode: Option<f64>,
}

/// The benchmark's result.
#[derive(Debug, Clone, PartialEq)]
pub struct BenchReport {
    /// The CPU model (from /proc/cpuinfo), if known.
    pub cpu: Option<String>,
    /// The codec path measured.
    pub isa: codec::Isa,
    /// `Ok(())` when ISA-L was measured, otherwise why not.
    pub isal: Result<(), String>,
    /// Which of ISA-L's kernels were measured.
    pub isal_kernels: crate::IsalKernels,
    /// The figures.
    pub cases: Vec<BenchCase>,
}

/// Runs the benchmark (see the module docs). Panics only on a bug (a codec
/// or ISA-L call that fails on valid buffers).
pub fn run_parity_bench(cfg: &BenchConfig) -> BenchReport {
    let isa = cfg.isa.unwrap_or_else(codec::Isa::best);
    let isal = if !cfg.with_isal {
        Err("not requested".to_string())
    } else {
        crate::kernels_available(cfg.isal_kernels).map_err(|e| e.to_string())
    };
    let mut cases = Vec::new();
    for &chunk in &cfg.chunk_sizes {
        for &(k, p) in &cfg.shapes {
            assert!(p == 1 || p == 2, "parity count must be 1 or 2, got {p}");
            bench_shape(cfg, isa, isal.is_ok(), k, p, chunk, &mut cases);
        }
    }
    BenchReport {
        cpu: cpu_model(),
        isa,
        isal,
        isal_kernels: cfg.isal_kernels,
        cases,
    }
}

const PAGE: usize = 4096;

/// Buffer i of a case starts `i * PLACEMENT_STEP` bytes past a page
/// boundary (modulo a page). Where buffers sit relative to each other
/// modulo 4 KiB changes encode speed several-fold on some CPUs, for ISA-L and
/// for us alike: an output that starts less than one loop step (ISA-L's
/// `pq_gen`: 96 bytes) past an input makes each load of that input wait for
/// the output's non-temporal stores (ISA-L then runs 4-8 times slower;
/// `codec` checks for it and stores normally instead), and buffers that all
/// start at the same page offset share L1 sets. Consecutive `malloc` blocks
/// produce either case depending on size and history, so the benchmark
/// places the buffers itself, in a layout that avoids both: a comparison of
/// the kernels, not of allocator luck.
const PLACEMENT_STEP: usize = 256;

fn bench_shape(
    cfg: &BenchConfig,
    isa: codec::Isa,
    isal: bool,
    k: usize,
    p: usize,
    chunk: usize,
    out: &mut Vec<BenchCase>,
) {
    let mut seed = 0x9e37_79b9_7f4a_7c15_u64 ^ (k * 31 + p) as u64 ^ chunk as u64;
    // [D_0 .. D_{k-1}, P, (Q)], each in its own allocation, placed (see
    // `PLACEMENT_STEP`).
    let mut raw: Vec<AlignedBuf> = (0..k + p)
        .map(|_| AlignedBuf::zeroed(chunk + PAGE))
        .collect();
    let mut bufs: Vec<&mut [u8]> = raw
        .iter_mut()
        .enumerate()
        .map(|(i, b)| {
            let want = i * PLACEMENT_STEP % PAGE;
            let start = (want + PAGE - b.as_ptr() as usize % PAGE) % PAGE;
            let b = &mut b[start..start + chunk];
            fill_random(b, &mut seed);
            b
        })
        .collect();
    let bytes = (k * chunk) as f64;
    let gbps = |secs: f64| bytes / secs / 1e9;
    let measure = |fs: &mut [&mut dyn FnMut()]| best_times(fs, cfg.case_secs, cfg.repetitions);

    // Encode: ours and ISA-L's measured in alternation, writing the same
    // parity buffers.
    let (op, ours_enc, isal_enc) = {
        let (data, parity) = bufs.split_at_mut(k);
        let data: Vec<&[u8]> = data.iter().map(|b| &b[..]).collect();
        let parity = RefCell::new(parity);
        let ours = &mut || {
            let mut parity = parity.borrow_mut();
            encode_ours(isa, &data, &mut parity);
        };
        let isal_fn = &mut || {
            let mut parity = parity.borrow_mut();
            encode_isal(cfg.isal_kernels, &data, &mut parity);
        };
        let times = if isal {
            measure(&mut [ours, isal_fn])
        } else {
            measure(&mut [ours])
        };
        let parity = parity.into_inner();
        if isal {
            encode_isal(cfg.isal_kernels, &data, parity);
            let theirs: Vec<Vec<u8>> = parity.iter().map(|b| b.to_vec()).collect();
            encode_ours(isa, &data, parity);
            for (ours, theirs) in parity.iter().zip(&theirs) {
                assert!(ours[..] == theirs[..], "codec and ISA-L parities differ");
            }
        } else {
            encode_ours(isa, &data, parity);
        }
        let op = if p == 1 { "xor_gen" } else { "pq_gen" };
        (op, times[0], times.get(1).copied())
    };
    out.push(BenchCase {
        op,
        k,
        p,
        chunk,
        isa,
        ours_gbps: gbps(ours_enc),
        isal_gbps: isal_enc.map(gbps),
        ratio: isal_enc.map(|t| t / ours_enc),
        decode_vs_encode: None,
    });

    // Decodes, on the same buffers (now holding valid parity).
    let views = &mut bufs;
    let mut decode = |op: &'static str, erased: &[usize]| {
        let secs = measure(&mut [&mut || {
            if p == 1 {
                codec::xor::recover_with(isa, views, erased).expect("xor recover");
            } else {
                codec::pq::recover_with(isa, views, erased).expect("pq recover");
            }
        }])[0];
        out.push(BenchCase {
            op,
            k,
            p,
            chunk,
            isa,
            ours_gbps: gbps(secs),
            isal_gbps: None,
            ratio: None,
            decode_vs_encode: Some(secs / ours_enc),
        });
    };
    decode("decode_1", &[0]);
    if p == 2 {
        decode("decode_2", &[0, 1]);
    }
    black_box(&raw);
}

/// Our encode of `data` into `parity` (P, or P and Q).
fn encode_ours(isa: codec::Isa, data: &[&[u8]], parity: &mut [&mut [u8]]) {
    match parity {
        [p] => codec::xor::encode_with(isa, data, p).expect("xor encode"),
        [p, q] => codec::pq::encode_with(isa, data, p, q).expect("pq encode"),
        _ => unreachable!("one or two parity buffers"),
    }
}

/// ISA-L's encode of `data` into `parity`, with `kernels`.
fn encode_isal(kernels: crate::IsalKernels, data: &[&[u8]], parity: &mut [&mut [u8]]) {
    match parity {
        [p] => crate::xor_gen_with(kernels, data, p).expect("ISA-L xor_gen"),
        [p, q] => crate::pq_gen_with(kernels, data, p, q).expect("ISA-L pq_gen"),
        _ => unreachable!("one or two parity buffers"),
    }
}

/// The best seconds per call of each function: one warm-up call each to size
/// the repetitions, then `repetitions` rounds in which every function runs a
/// timed loop of about `case_secs / repetitions` (so the functions alternate).
fn best_times(fs: &mut [&mut dyn FnMut()], case_secs: f64, repetitions: usize) -> Vec<f64> {
    let repetitions = repetitions.max(1);
    let iterations: Vec<u64> = fs
        .iter_mut()
        .map(|f| {
            f();
            let start = Instant::now();
            f();
            let once = start.elapsed().as_secs_f64().max(1e-9);
            ((case_secs / repetitions as f64) / once).ceil().max(1.0) as u64
        })
        .collect();
    let mut best = vec![f64::INFINITY; fs.len()];
    for _ in 0..repetitions {
        for ((f, &n), best) in fs.iter_mut().zip(&iterations).zip(best.iter_mut()) {
            let start = Instant::now();
            for _ in 0..n {
                f();
            }
            *best = best.min(start.elapsed().as_secs_f64() / n as f64);
        }
    }
    best
}

fn fill_random(buf: &mut [u8], state: &mut u64) {
    for chunk in buf.chunks_mut(8) {
        // xorshift64*
        *state ^= *state >> 12;
        *state ^= *state << 25;
        *state ^= *state >> 27;
        let word = state.wrapping_mul(0x2545_f491_4f6c_dd1d).to_le_bytes();
        chunk.copy_from_slice(&word[..chunk.len()]);
    }
}

fn cpu_model() -> Option<String> {
    let info = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    info.lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_string())
}

impl BenchReport {
    /// The report as one JSON object:
    /// `{"cpu": .., "isa": .., "isal": "ok" | "<reason>", "isal_functions": ["xor_gen",
    /// "pq_gen"] (or the AVX2-machine kernels' names), "cases": [{"op",
    /// "k", "p", "chunk", "isa", "ours_gbps", "isal_gbps", "ratio",
    /// "decode_vs_encode"}, ..]}` with `null` for absent values; a case's
    /// `isa` is the codec path that ran it.
    pub fn to_json(&self) -> String {
        let mut s = String::from("{");
        s += &format!(
            "\"cpu\":{},\"isa\":{},\"isal\":{},\"isal_functions\":[{},{}],\"cases\":[",
            self.cpu.as_deref().map_or("null".to_string(), json_string),
            json_string(self.isa.name()),
            json_string(match &self.isal {
                Ok(()) => "ok",
                Err(e) => e,
            }),
            json_string(self.isal_kernels.functions().0),
            json_string(self.isal_kernels.functions().1),
        );
        for (i, c) in self.cases.iter().enumerate() {
            if i > 0 {
                s.push(',');
            }
            s += &format!(
                "{{\"op\":{},\"k\":{},\"p\":{},\"chunk\":{},\"isa\":{},\"ours_gbps\":{},\"isal_gbps\":{},\"ratio\":{},\"decode_vs_encode\":{}}}",
                json_string(c.op),
                c.k,
                c.p,
                c.chunk,
                json_string(c.isa.name()),
                json_number(Some(c.ours_gbps)),
                json_number(c.isal_gbps),
                json_number(c.ratio),
                json_number(c.decode_vs_encode),
            );
        }
        s += "]}";
        s
    }

    /// The report as an aligned text table, one line per case.
    pub fn to_table(&self) -> String {
        let mut s = format!(
            "cpu: {}\ncodec path: {}\nISA-L: {} ({} / {})\n",
            self.cpu.as_deref().unwrap_or("unknown"),
            self.isa,
            match &self.isal {
                Ok(()) => "loaded",
                Err(e) => e,
            },
            self.isal_kernels.functions().0,
            self.isal_kernels.functions().1,
        );
        s += &format!(
            "{:<9} {:>4} {:>8} {:>7} {:>10} {:>10} {:>7} {:>10}\n",
            "op", "k+p", "chunk", "path", "ours GB/s", "isal GB/s", "ratio", "vs encode"
        );
        let opt =
            |v: Option<f64>, prec: usize| v.map_or("-".to_string(), |v| format!("{v:.prec$}"));
        for c in &self.cases {
            s += &format!(
                "{:<9} {:>4} {:>8} {:>7} {:>10.2} {:>10} {:>7} {:>10}\n",
                c.op,
                format!("{}+{}", c.k, c.p),
                if c.chunk % (1024 * 1024) == 0 {
                    format!("{}MiB", c.chunk / (1024 * 1024))
                } else {
                    format!("{}KiB", c.chunk / 1024)
                },
                c.isa.name(),
                c.ours_gbps,
                opt(c.isal_gbps, 2),
                opt(c.ratio, 2),
                opt(c.decode_vs_encode, 2),
            );
        }
        s
    }
}

fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for ch in s.chars() {
        match ch {
            '"' => out += "\\\"",
            '\\' => out += "\\\\",
            '\n' => out += "\\n",
            '\r' => out += "\\r",
            '\t' => out += "\\t",
            c if (c as u32) < 0x20 => out += &format!("\\u{:04x}", c as u32),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn json_number(v: Option<f64>) -> String {
    match v {
        Some(v) if v.is_finite() => format!("{v:.4}"),
        _ => "null".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiny_bench_reports_every_case() {
        let cfg = BenchConfig {
            shapes: vec![(3, 1), (4, 2)],
            chunk_sizes: vec![4096],
            case_secs: 0.002,
            repetitions: 2,
            isa: None,
            with_isal: false,
            isal_kernels: crate::IsalKernels::Dispatched,
        };
        let report = run_parity_bench(&cfg);
        let ops: Vec<_> = report.cases.iter().map(|c| (c.op, c.k, c.p)).collect();
        assert_eq!(
            ops,
            [
                ("xor_gen", 3, 1),
                ("decode_1", 3, 1),
                ("pq_gen", 4, 2),
                ("decode_1", 4, 2),
                ("decode_2", 4, 2)
            ]
        );
        assert!(report
            .cases
            .iter()
            .all(|c| c.ours_gbps > 0.0 && c.isal_gbps.is_none()));
        assert_eq!(report.isal, Err("not requested".to_string()));
        let json = report.to_json();
        assert!(json.starts_with('{') && json.ends_with("]}"), "{json}");
        assert!(json.contains("\"op\":\"decode_2\",\"k\":4,\"p\":2,\"chunk\":4096"));
        assert!(json.contains("\"isal_gbps\":null"));
        assert_eq!(report.to_table().lines().count(), 4 + report.cases.len());
        let best = codec::Isa::best();
        assert!(report.cases.iter().all(|c| c.isa == best));
        assert!(json.contains(&format!("\"chunk\":4096,\"isa\":\"{best}\"")));
    }

    #[test]
    fn each_case_names_the_path_that_ran() {
        let cfg = BenchConfig {
            shapes: vec![(2, 2)],
            chunk_sizes: vec![64],
            case_secs: 0.001,
            repetitions: 1,
            isa: Some(codec::Isa::Scalar),
            with_isal: false,
            isal_kernels: crate::IsalKernels::Dispatched,
        };
        let report = run_parity_bench(&cfg);
        assert_eq!(report.cases.len(), 3);
        assert!(report.cases.iter().all(|c| c.isa == codec::Isa::Scalar));
        let table = report.to_table();
        let rows: Vec<&str> = table.lines().skip(4).collect();
        assert!(
            rows.iter()
                .all(|r| r.split_whitespace().nth(3) == Some("scalar")),
            "{table}"
        );
        assert_eq!(report.to_json().matches("\"isa\":\"scalar\"").count(), 4);
    }

    /// Against ISA-L's AVX2-machine kernels, every encode case is measured beside them (when
    /// this machine can run them) and the report names the functions called.
    #[test]
    fn avx2_machine_kernels_are_measured_and_named() {
        let cfg = BenchConfig {
            shapes: vec![(3, 1), (4, 2)],
            chunk_sizes: vec![4096],
            case_secs: 0.002,
            repetitions: 2,
            isa: None,
            with_isal: true,
            isal_kernels: crate::IsalKernels::Avx2Machine,
        };
        let report = run_parity_bench(&cfg);
        let json = report.to_json();
        assert!(
            json.contains("\"isal_functions\":[\"xor_gen_avx\",\"pq_gen_avx2\"]"),
            "{json}"
        );
        assert!(report.to_table().contains("(xor_gen_avx / pq_gen_avx2)"));
        match crate::kernels_available(crate::IsalKernels::Avx2Machine) {
            Ok(()) => {
                assert_eq!(report.isal, Ok(()));
                let encodes: Vec<&BenchCase> = report
                    .cases
                    .iter()
                    .filter(|c| c.op.ends_with("_gen"))
                    .collect();
                assert_eq!(encodes.len(), 2);
                assert!(encodes.iter().all(|c| c.isal_gbps.is_some_and(|g| g > 0.0)));
            }
            // (No ISA-L here, or a CPU without AVX2: the report says why.)
            Err(e) => assert_eq!(report.isal, Err(e.to_string())),
        }
    }

    #[test]
    fn json_strings_are_escaped() {
        assert_eq!(json_string("a\"b\\c\n\u{1}"), "\"a\\\"b\\\\c\\n\\u0001\"");
        assert_eq!(json_number(Some(f64::NAN)), "null");
        assert_eq!(json_number(Some(1.5)), "1.5000");
    }
}
