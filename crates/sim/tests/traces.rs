//! Trace readers on the traces of the repository's `data/traces` (two real MQSim traces and
//! synthetic MSR, Tencent and SYSTOR fixtures, always), on the real SNIA samples when
//! `RAIDFORGE_TRACES` names a folder holding them (extra checks), and on inline fixtures.

use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

use sim::trace::open;
use sim::{
    BlkEvent, Fold, Op, ReadOptions, Request, TimeOrder, TraceError, TraceFormat, TraceReader,
};

/// A trace of the repository's `data/traces`.
fn repo(file: &str) -> PathBuf {
    let path = sim::repository_traces_dir().join(file);
    assert!(
        path.is_file(),
        "{} is missing (data/traces is part of the repository)",
        path.display()
    );
    path
}

/// The real SNIA samples that `RAIDFORGE_TRACES` holds, if it names a folder: each one of
/// `names` found there. Naming a folder that holds none of them is an error (the variable was
/// set to run these checks).
fn snia(names: &[&str]) -> Vec<PathBuf> {
    let Some(dir) = std::env::var_os("RAIDFORGE_TRACES").filter(|d| !d.is_empty()) else {
        return Vec::new();
    };
    let dir = PathBuf::from(dir);
    assert!(
        dir.is_dir(),
        "RAIDFORGE_TRACES={} is not a directory",
        dir.display()
    );
    let found: Vec<PathBuf> = names
        .iter()
        .map(|n| dir.join(n))
        .filter(|p| p.is_file())
        .collect();
    assert!(
        !found.is_empty(),
        "RAIDFORGE_TRACES={} holds none of {names:?}",
        dir.display()
    );
    found
}

const SNIA_SAMPLES: [&str; 4] = [
    "msr-hm_0-head1000.csv",
    "tencent-cbs-sample.csv",
    "systor17-sample-a.csv",
    "systor17-sample-b.csv",
];

struct Stats {
    count: u64,
    reads: u64,
    bytes: u64,
    times: Vec<u64>,
    requests: Vec<Request>,
}

impl Stats {
    fn read_fraction(&self) -> f64 {
        self.reads as f64 / self.count as f64
    }

    fn mean_kib(&self) -> f64 {
        self.bytes as f64 / self.count as f64 / 1024.0
    }

    fn monotonic(&self) -> bool {
        self.times.windows(2).all(|w| w[0] <= w[1])
    }
}

fn collect(reader: impl Iterator<Item = Result<Request, TraceError>>) -> Stats {
    let mut s = Stats {
        count: 0,
        reads: 0,
        bytes: 0,
        times: Vec::new(),
        requests: Vec::new(),
    };
    for r in reader {
        let r = r.unwrap_or_else(|e| panic!("unexpected trace error: {e}"));
        s.count += 1;
        s.reads += u64::from(r.op == Op::Read);
        s.bytes += r.len_bytes;
        s.times.push(r.time_ns);
        if s.requests.len() < 10 {
            s.requests.push(r);
        }
    }
    s
}

/// What a trace must read as.
enum Expect {
    /// Published statistics (the real traces): request count, read fraction within half a
    /// percentage point, mean size within `kib_tolerance` KiB.
    Published {
        requests: u64,
        read_fraction: f64,
        mean_kib: f64,
        kib_tolerance: f64,
    },
    /// Exact figures, as `data/traces/make-synthetic.py` generated them (the fixtures).
    Exact {
        requests: u64,
        reads: u64,
        bytes: u64,
    },
}

struct Sample {
    file: &'static str,
    format: TraceFormat,
    expect: Expect,
    /// Already in time order in the file.
    sorted: bool,
}

/// The traces of `data/traces`: statistics from its README (the MQSim traces as MQSim
/// publishes them; the fixtures as the generator printed them).
const REPO_SAMPLES: [Sample; 5] = [
    Sample {
        file: "websearch-head.mqsim",
        format: TraceFormat::MqSim,
        expect: Expect::Published {
            requests: 24_783,
            read_fraction: 1.0,
            mean_kib: 15.1,
            kib_tolerance: 0.06,
        },
        sorted: true,
    },
    Sample {
        file: "tpcc-small.mqsim",
        format: TraceFormat::MqSim,
        expect: Expect::Published {
            requests: 6_999,
            read_fraction: 0.626,
            mean_kib: 8.3,
            kib_tolerance: 0.06,
        },
        sorted: true,
    },
    Sample {
        file: "synthetic-msr.csv",
        format: TraceFormat::Msr,
        expect: Expect::Exact {
            requests: 240,
            reads: 130,
            bytes: 4_252_672,
        },
        sorted: true,
    },
    Sample {
        file: "synthetic-tencent-cbs.csv",
        format: TraceFormat::Tencent,
        expect: Expect::Exact {
            requests: 300,
            reads: 138,
            bytes: 10_268_672,
        },
        sorted: false,
    },
    Sample {
        file: "synthetic-systor17.csv",
        format: TraceFormat::Systor,
        expect: Expect::Exact {
            requests: 250,
            reads: 189,
            bytes: 9_675_776,
        },
        sorted: false,
    },
];

/// The real SNIA samples (read only when `RAIDFORGE_TRACES` holds them): statistics as
/// published with them. Their README gives the SYSTOR mean sizes in whole KiB.
const SNIA_STATS: [Sample; 4] = [
    Sample {
        file: "msr-hm_0-head1000.csv",
        format: TraceFormat::Msr,
        expect: Expect::Published {
            requests: 1_000,
            read_fraction: 0.508,
            mean_kib: 9.5,
            kib_tolerance: 0.06,
        },
        sorted: true,
    },
    Sample {
        file: "tencent-cbs-sample.csv",
        format: TraceFormat::Tencent,
        expect: Expect::Published {
            requests: 50_000,
            read_fraction: 0.490,
            mean_kib: 29.7,
            kib_tolerance: 0.06,
        },
        sorted: false,
    },
    Sample {
        file: "systor17-sample-a.csv",
        format: TraceFormat::Systor,
        expect: Expect::Published {
            requests: 999,
            read_fraction: 0.827,
            mean_kib: 38.0,
            kib_tolerance: 0.6,
        },
        sorted: false,
    },
    Sample {
        file: "systor17-sample-b.csv",
        format: TraceFormat::Systor,
        expect: Expect::Published {
            requests: 999,
            read_fraction: 0.701,
            mean_kib: 20.0,
            kib_tolerance: 0.6,
        },
        sorted: false,
    },
];

fn check_sample(sample: &Sample, path: &Path) {
    // Format detected from content.
    let reader = open(path, None, ReadOptions::default()).unwrap();
    assert_eq!(reader.format(), sample.format, "{}", sample.file);
    let stats = collect(reader);
    println!(
        "{}: {} requests, {:.1} % reads, mean {:.2} KiB",
        path.display(),
        stats.count,
        100.0 * stats.read_fraction(),
        stats.mean_kib()
    );
    match sample.expect {
        Expect::Published {
            requests,
            read_fraction,
            mean_kib,
            kib_tolerance,
        } => {
            assert_eq!(stats.count, requests, "{}", sample.file);
            assert!(
                (stats.read_fraction() - read_fraction).abs() < 0.005,
                "{}",
                sample.file
            );
            assert!(
                (stats.mean_kib() - mean_kib).abs() < kib_tolerance,
                "{}: {}",
                sample.file,
                stats.mean_kib()
            );
        }
        Expect::Exact {
            requests,
            reads,
            bytes,
        } => assert_eq!(
            (stats.count, stats.reads, stats.bytes),
            (requests, reads, bytes),
            "{}",
            sample.file
        ),
    }
    assert_eq!(stats.times[0], 0, "{}: time starts at 0", sample.file);
    // The default order clamps: times never go backwards.
    assert!(stats.monotonic(), "{}", sample.file);
    // Sorted traces are the same with AsRecorded.
    let options = ReadOptions {
        order: TimeOrder::AsRecorded,
        ..ReadOptions::default()
    };
    let raw = collect(open(path, Some(sample.format), options).unwrap());
    assert_eq!(raw.count, stats.count);
    if sample.sorted {
        assert_eq!(raw.times, stats.times, "{}", sample.file);
    }
}

#[test]
fn samples_match_their_statistics() {
    for sample in &REPO_SAMPLES {
        check_sample(sample, &repo(sample.file));
    }
    let real = snia(&SNIA_SAMPLES);
    for path in &real {
        let name = path.file_name().unwrap().to_str().unwrap();
        let sample = SNIA_STATS.iter().find(|s| s.file == name).unwrap();
        check_sample(sample, path);
    }
    println!(
        "checked the {} traces of data/traces and {} real SNIA samples",
        REPO_SAMPLES.len(),
        real.len()
    );
}

#[test]
fn prefixes_are_bounded() {
    let mut cases = vec![
        (repo("websearch-head.mqsim"), 2_000, (0.99, 1.0)),
        (repo("tpcc-small.mqsim"), 2_000, (0.5, 0.75)),
        (repo("synthetic-tencent-cbs.csv"), 200, (0.35, 0.65)),
    ];
    for p in snia(&["tencent-cbs-sample.csv"]) {
        cases.push((p, 2_000, (0.35, 0.65)));
    }
    for (path, limit, read_fraction) in cases {
        let options = ReadOptions {
            limit: Some(limit),
            ..ReadOptions::default()
        };
        let stats = collect(open(&path, None, options).unwrap());
        assert_eq!(stats.count, limit, "{}", path.display());
        let f = stats.read_fraction();
        assert!(
            f >= read_fraction.0 && f <= read_fraction.1,
            "{}: {f}",
            path.display()
        );
    }
}

/// MSR times are 100 ns ticks, relative to the first request; the first lines read as the
/// fields they hold.
#[test]
fn msr_times_are_relative_100ns_ticks() {
    let check = |path: &Path, second_tick: u64, first: (Op, u64, u64, u32)| {
        let stats = collect(open(path, None, ReadOptions::default()).unwrap());
        let r = &stats.requests;
        assert_eq!(r[0].time_ns, 0);
        assert_eq!(r[1].time_ns, second_tick * 100, "{}", path.display());
        assert_eq!(
            (r[0].op, r[0].offset_bytes, r[0].len_bytes, r[0].volume),
            first,
            "{}",
            path.display()
        );
    };
    // The fixture's first two lines: ticks ...000000000 and ...000000250.
    check(
        &repo("synthetic-msr.csv"),
        250,
        (Op::Write, 4_294_967_296, 4096, 0),
    );
    for p in snia(&["msr-hm_0-head1000.csv"]) {
        // 128166385295514878 - 128166385295514663 ticks of 100 ns.
        check(&p, 215, (Op::Write, 9_056_014_336, 2048, 0));
    }
}

/// Tencent's traces are stamped in whole seconds and not sorted: the first line of the real
/// sample says second ...200, the next hundreds say ...199 (the fixture does the same: one line
/// of second S+1, 180 of second S, 119 of S+1). A sort window restores the order.
#[test]
fn tencent_unsorted_seconds() {
    let check = |path: &Path, total: u64, early_late: Option<(usize, usize)>| {
        let as_recorded = ReadOptions {
            order: TimeOrder::AsRecorded,
            ..ReadOptions::default()
        };
        let raw = collect(open(path, None, as_recorded).unwrap());
        // Relative to the first line (the later second); earlier stamps saturate at 0.
        assert!(raw.times.iter().all(|&t| t == 0));

        let clamp = collect(open(path, None, ReadOptions::default()).unwrap());
        assert!(clamp.monotonic());
        assert!(clamp.times.iter().all(|&t| t == 0));

        let window = ReadOptions {
            order: TimeOrder::Window(65_536),
            ..ReadOptions::default()
        };
        let sorted = collect(open(path, None, window).unwrap());
        assert_eq!(sorted.count, total);
        assert!(sorted.monotonic());
        let late = sorted.times.iter().filter(|&&t| t == 1_000_000_000).count();
        let early = sorted.times.iter().filter(|&&t| t == 0).count();
        println!(
            "{} sorted: {early} requests in the earlier second, {late} in the later",
            path.display()
        );
        assert_eq!((early + late) as u64, total);
        match early_late {
            Some(want) => assert_eq!((early, late), want),
            None => assert!(early > 0 && late > 0),
        }
        // A small window still never goes backwards.
        let small = ReadOptions {
            order: TimeOrder::Window(64),
            ..ReadOptions::default()
        };
        let small = collect(open(path, None, small).unwrap());
        assert!(small.monotonic());
        assert_eq!(small.count, total);
    };
    check(&repo("synthetic-tencent-cbs.csv"), 300, Some((180, 120)));
    for p in snia(&["tencent-cbs-sample.csv"]) {
        check(&p, 50_000, None);
    }
}

#[test]
fn speedup_and_fold_on_a_real_trace() {
    let path = repo("tpcc-small.mqsim");
    let normal = collect(open(&path, None, ReadOptions::default()).unwrap());
    let fast = collect(
        open(
            &path,
            None,
            ReadOptions {
                speedup: 2.0,
                ..ReadOptions::default()
            },
        )
        .unwrap(),
    );
    assert_eq!((normal.count, fast.count), (6_999, 6_999));
    for (a, b) in normal.times.iter().zip(&fast.times) {
        assert!((*a as f64 / 2.0 - *b as f64).abs() <= 0.5 + 1e-9, "{a} {b}");
    }
    let fold = Fold {
        capacity_bytes: 1 << 30,
        align_bytes: 4096,
    };
    let options = ReadOptions {
        fold: Some(fold),
        ..ReadOptions::default()
    };
    let mut n = 0;
    for r in open(&path, None, options).unwrap() {
        let r = r.unwrap();
        assert!(
            r.offset_bytes % 4096 == 0 && r.offset_bytes + r.len_bytes <= 1 << 30,
            "{r:?}"
        );
        n += 1;
    }
    assert_eq!(n, 6_999);
}

// --- Inline fixtures -------------------------------------------------------------------------

fn read_all(
    format: TraceFormat,
    text: &str,
    options: ReadOptions,
) -> Vec<Result<Request, TraceError>> {
    TraceReader::new(text.as_bytes(), format, options)
        .unwrap()
        .with_file_name("fixture")
        .collect()
}

fn ok_all(format: TraceFormat, text: &str) -> Vec<Request> {
    read_all(format, text, ReadOptions::default())
        .into_iter()
        .map(|r| r.unwrap())
        .collect()
}

/// SPC lines in the style of Financial1 (ASU, LBA, size, opcode, seconds).
const SPC_FIXTURE: &str = "\
0,303567,3584,w,0.000000
1,55590,3072,w,0.000000
0,303574,3584,W,0.026214
3,2180,512,r,0.026214,extra,fields
2,198888,8192,R,1.000001
";

#[test]
fn spc_fixture() {
    let r = ok_all(TraceFormat::Spc, SPC_FIXTURE);
    assert_eq!(r.len(), 5);
    assert_eq!(
        r[0],
        Request {
            time_ns: 0,
            offset_bytes: 303_567 * 512,
            len_bytes: 3584,
            op: Op::Write,
            volume: 0
        }
    );
    assert_eq!(r[2].time_ns, 26_214_000);
    assert_eq!((r[3].op, r[3].volume, r[3].len_bytes), (Op::Read, 3, 512));
    assert_eq!(r[4].time_ns, 1_000_001_000);
    assert_eq!(
        TraceFormat::detect(None, SPC_FIXTURE.as_bytes()),
        Some(TraceFormat::Spc)
    );
}

/// blkparse default output: Q, G, I, D, C events for two I/Os, a flush, a discard, a message
/// and the summary that blkparse prints at the end.
const BLKPARSE_FIXTURE: &str = "\
  8,0    3        1     0.000000000  4162  Q  WS 3417048 + 8 [kjournald]
  8,0    3        2     0.000002409  4162  G  WS 3417048 + 8 [kjournald]
  8,0    3        3     0.000003527  4162  I  WS 3417048 + 8 [kjournald]
  8,0    0        0     0.000004000     0  m   N cfq4162 insert_request
  8,0    1        4     0.000100000  5000  Q   R 1000 + 256 [cat]
  8,0    3        5     0.000150000  4162  D  WS 3417048 + 8 [kjournald]
  8,0    1        6     0.000160000  5000  D   R 1000 + 256 [cat]
  8,0    1        7     0.000170000  5000  Q FWS [jbd2/sda1-8]
  8,0    1        8     0.000180000  5000  Q   D 5000 + 2048 [fstrim]
  8,0    3        9     0.000500000     0  C  WS 3417048 + 8 [0]
  8,16   2       10     0.000600000  6000  Q   W 77 + 16 [dd]
CPU0 (8,0):
 Reads Queued:           1,      128KiB\t Writes Queued:           1,        4KiB
 Read Dispatches:        1,      128KiB\t Write Dispatches:        1,        4KiB
Total (8,0):
 Reads Queued:           1,      128KiB\t Writes Queued:           1,        4KiB

Throughput (R/W): 256000KiB/s / 8000KiB/s
Events (8,0): 11 entries
Skips: 0 forward (0 -   0.0%)
";

#[test]
fn blkparse_fixture_queue_and_issue_events() {
    let q = ok_all(TraceFormat::Blkparse(BlkEvent::Queue), BLKPARSE_FIXTURE);
    assert_eq!(q.len(), 3);
    assert_eq!(
        q[0],
        Request {
            time_ns: 0,
            offset_bytes: 3_417_048 * 512,
            len_bytes: 4096,
            op: Op::Write,
            volume: 8 << 20
        }
    );
    assert_eq!(
        q[1],
        Request {
            time_ns: 100_000,
            offset_bytes: 512_000,
            len_bytes: 131_072,
            op: Op::Read,
            volume: 8 << 20
        }
    );
    assert_eq!(
        (q[2].time_ns, q[2].volume, q[2].op),
        (600_000, (8 << 20) | 16, Op::Write)
    );

    let d = ok_all(TraceFormat::Blkparse(BlkEvent::Issue), BLKPARSE_FIXTURE);
    assert_eq!(d.len(), 2);
    // Times are relative to the first D event.
    assert_eq!((d[0].time_ns, d[1].time_ns), (0, 10_000));
    assert_eq!(d[1].len_bytes, 131_072);
    assert_eq!(
        TraceFormat::detect(
            Some(std::path::Path::new("x.txt")),
            BLKPARSE_FIXTURE.as_bytes()
        ),
        Some(TraceFormat::Blkparse(BlkEvent::Queue))
    );
}

const FIO_V2_FIXTURE: &str = "\
fio version 2 iolog
/dev/sdb add
/dev/sdc add
/dev/sdb open
/dev/sdc open
/dev/sdb write 0 4096
/dev/sdb wait 1500 0
/dev/sdc read 8192 65536
/dev/sdb sync 0 0
/dev/sdb trim 0 4096
/dev/sdb wait 500 0
/dev/sdb read 4096 4096
/dev/sdb close
/dev/sdc close
";

const FIO_V3_FIXTURE: &str = "\
fio version 3 iolog
2 /dev/nvme0n1 add
872 /dev/nvme0n1 open
878 /dev/nvme0n1 write 0 16384
888 /dev/nvme0n1 write 16384 16384
1891 /dev/nvme0n1 read 0 4096
10001677 /dev/nvme0n1 close
";

#[test]
fn fio_iolog_fixtures() {
    let mut reader = TraceReader::new(
        FIO_V2_FIXTURE.as_bytes(),
        TraceFormat::FioIolog,
        ReadOptions::default(),
    )
    .unwrap();
    let v2: Vec<Request> = reader.by_ref().map(|r| r.unwrap()).collect();
    assert_eq!(reader.skipped_lines(), 11);
    assert_eq!(v2.len(), 3);
    assert_eq!(
        v2[0],
        Request {
            time_ns: 0,
            offset_bytes: 0,
            len_bytes: 4096,
            op: Op::Write,
            volume: 0
        }
    );
    assert_eq!(
        v2[1],
        Request {
            time_ns: 1_500_000,
            offset_bytes: 8192,
            len_bytes: 65_536,
            op: Op::Read,
            volume: 1
        }
    );
    assert_eq!(
        v2[2],
        Request {
            time_ns: 2_000_000,
            offset_bytes: 4096,
            len_bytes: 4096,
            op: Op::Read,
            volume: 0
        }
    );

    let v3 = ok_all(TraceFormat::FioIolog, FIO_V3_FIXTURE);
    assert_eq!(v3.len(), 3);
    // Microsecond stamps, relative to the first request (878 us).
    assert_eq!(
        v3.iter().map(|r| r.time_ns).collect::<Vec<_>>(),
        [0, 10_000, 1_013_000]
    );
    assert_eq!(
        TraceFormat::detect(None, FIO_V3_FIXTURE.as_bytes()),
        Some(TraceFormat::FioIolog)
    );
}

#[test]
fn fold_and_limit_on_fixtures() {
    let options = ReadOptions {
        fold: Some(Fold {
            capacity_bytes: 1 << 20,
            align_bytes: 4096,
        }),
        limit: Some(4),
        ..ReadOptions::default()
    };
    let r: Vec<Request> = read_all(TraceFormat::Spc, SPC_FIXTURE, options)
        .into_iter()
        .map(|r| r.unwrap())
        .collect();
    assert_eq!(r.len(), 4);
    assert_eq!(r[0].offset_bytes, (303_567 * 512) % (1 << 20) / 4096 * 4096);
    for x in &r {
        assert!(x.offset_bytes % 4096 == 0 && x.offset_bytes + x.len_bytes <= 1 << 20);
    }
    // A request that cannot fit is an error, not a panic.
    let tiny = ReadOptions {
        fold: Some(Fold {
            capacity_bytes: 4096,
            align_bytes: 512,
        }),
        ..ReadOptions::default()
    };
    let results = read_all(TraceFormat::Spc, SPC_FIXTURE, tiny);
    assert!(matches!(results[4], Err(TraceError::TooLargeToFold { .. })));
    assert!(results[..4].iter().all(|r| r.is_ok()));
}

#[test]
fn bad_options_are_rejected() {
    for options in [
        ReadOptions {
            speedup: 0.0,
            ..ReadOptions::default()
        },
        ReadOptions {
            speedup: f64::NAN,
            ..ReadOptions::default()
        },
        ReadOptions {
            fold: Some(Fold {
                capacity_bytes: 1000,
                align_bytes: 512,
            }),
            ..ReadOptions::default()
        },
        ReadOptions {
            order: TimeOrder::Window(0),
            ..ReadOptions::default()
        },
    ] {
        assert!(matches!(
            TraceReader::new(&b""[..], TraceFormat::Spc, options),
            Err(TraceError::InvalidOption { .. })
        ));
    }
}

// --- Malformed input -------------------------------------------------------------------------

/// Each malformed line gives an error naming the file, the line and the problem; the reader
/// continues with the next line.
#[test]
fn malformed_lines_are_located_errors() {
    let cases: [(TraceFormat, &str, &str); 15] = [
        (TraceFormat::Spc, "0,100,4096,x,0.5", "bad opcode \"x\""),
        (
            TraceFormat::Spc,
            "0,100,4096",
            "needs at least 5 fields, found 3",
        ),
        (TraceFormat::Spc, "0,-5,4096,r,0.5", "bad LBA \"-5\""),
        (
            TraceFormat::Spc,
            "0,100,4096,r,1e-3",
            "bad timestamp \"1e-3\"",
        ),
        (
            TraceFormat::Spc,
            "0,36028797018963968,4096,r,1",
            "does not fit in 64 bits",
        ),
        (
            TraceFormat::Msr,
            "128166385295514663,hm,0,Erase,0,512,1",
            "bad type \"Erase\"",
        ),
        (TraceFormat::MqSim, "100 0 5 8 2", "bad type \"2\""),
        (TraceFormat::MqSim, "100 0 5 8", "needs 5 fields, found 4"),
        (
            TraceFormat::Tencent,
            "1538323199,10,8,0,abc",
            "bad volume \"abc\"",
        ),
        (
            TraceFormat::Systor,
            "1.0,0.1,R,0,0",
            "needs 6 fields, found 5",
        ),
        (
            TraceFormat::Blkparse(BlkEvent::Queue),
            "  8,0  1  1  0.5  7  Q  R 100 [cat]",
            "at least 10 (sector + count)",
        ),
        (
            TraceFormat::Blkparse(BlkEvent::Queue),
            "  8,0  1  1  x.5  7  Q  R 100 + 8 [cat]",
            "bad time \"x.5\"",
        ),
        (
            TraceFormat::FioIolog,
            "fio version 9 iolog",
            "expected \"fio version 2 iolog\"",
        ),
        (
            TraceFormat::Spc,
            "0,36028797018963967,4096,r,0",
            "offset + length does not fit in 64 bits",
        ),
        (
            TraceFormat::Alibaba,
            "3,T,8192,4096,1577808000000123",
            "bad op \"T\"",
        ),
    ];
    for (format, bad_line, message) in cases {
        let good = match format {
            TraceFormat::Spc => "0,1,512,r,0",
            TraceFormat::Msr => "128166385295514663,hm,0,Read,0,512,1",
            TraceFormat::MqSim => "100 0 5 8 1",
            TraceFormat::Tencent => "1538323199,10,8,0,5",
            TraceFormat::Systor => "1.0,0.1,R,0,0,512",
            TraceFormat::Blkparse(_) => "  8,0  1  1  0.5  7  Q  R 100 + 8 [cat]",
            TraceFormat::FioIolog => "",
            TraceFormat::Alibaba => "3,W,8192,4096,1577808000000123",
            TraceFormat::Csv(_) => unreachable!("no CSV case above"),
        };
        let text = if format == TraceFormat::FioIolog {
            format!("{bad_line}\n/dev/sda read 0 4096\n")
        } else {
            format!("{good}\n{bad_line}\n{good}\n")
        };
        let results = read_all(format, &text, ReadOptions::default());
        let errors: Vec<String> = results
            .iter()
            .filter_map(|r| r.as_ref().err())
            .map(|e| e.to_string())
            .collect();
        assert!(!errors.is_empty(), "{format}: {bad_line:?} accepted");
        let expected_line = if format == TraceFormat::FioIolog {
            1
        } else {
            2
        };
        let first = &errors[0];
        assert!(
            first.starts_with(&format!("fixture:{expected_line}: ")),
            "{format}: {first}"
        );
        assert!(
            first.contains(message),
            "{format}: {first:?} lacks {message:?}"
        );
        if format != TraceFormat::FioIolog {
            assert_eq!(
                results.iter().filter(|r| r.is_ok()).count(),
                2,
                "{format}: reader stops after an error"
            );
        }
    }
}

#[test]
fn fio_wait_is_not_allowed_in_version_3() {
    let text = "fio version 3 iolog\n5 /dev/sda wait 100 0\n";
    let results = read_all(TraceFormat::FioIolog, text, ReadOptions::default());
    let e = results[0].as_ref().unwrap_err().to_string();
    assert!(e.contains("bad action \"wait\""), "{e}");
}

#[test]
fn long_lines_and_binary_garbage_are_errors() {
    let mut text = String::from("0,1,512,r,0\n");
    text.push_str(&"9".repeat(100_000));
    text.push_str("\n0,2,512,w,1\n");
    let results = read_all(TraceFormat::Spc, &text, ReadOptions::default());
    assert!(matches!(results[1], Err(TraceError::LineTooLong { .. })));
    assert_eq!(results.iter().filter(|r| r.is_ok()).count(), 2);

    let bytes: &[u8] = b"0,1,512,r,0\n\xff\xfe,1,2\n0,2,512,w,1\n";
    let results: Vec<_> = TraceReader::new(bytes, TraceFormat::Spc, ReadOptions::default())
        .unwrap()
        .collect();
    assert!(matches!(results[1], Err(TraceError::NotText { .. })));
    assert_eq!(results.len(), 3);
}

#[test]
fn io_errors_end_the_stream() {
    struct Failing(u32);
    impl Read for Failing {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            self.0 += 1;
            if self.0 == 1 {
                let line = b"0,1,512,r,0\n";
                buf[..line.len()].copy_from_slice(line);
                Ok(line.len())
            } else {
                Err(std::io::Error::other("disk on fire"))
            }
        }
    }
    let reader = TraceReader::new(
        BufReader::new(Failing(0)),
        TraceFormat::Spc,
        ReadOptions::default(),
    )
    .unwrap();
    let results: Vec<_> = reader.collect();
    assert_eq!(results.len(), 2);
    assert!(results[0].is_ok());
    let e = results[1].as_ref().unwrap_err().to_string();
    assert!(e.contains("disk on fire"), "{e}");
}

#[test]
fn missing_file_and_undetectable_format_are_errors() {
    let e = open(
        std::path::Path::new("/nonexistent/trace.spc"),
        None,
        ReadOptions::default(),
    )
    .err()
    .unwrap();
    assert!(matches!(e, TraceError::Io { .. }));
    let dir = std::env::temp_dir().join(format!("sim-trace-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("mystery.txt");
    std::fs::write(&path, "this is not a trace\n").unwrap();
    let e = open(&path, None, ReadOptions::default()).err().unwrap();
    assert!(
        e.to_string().contains("cannot tell the trace format")
            && e.to_string().contains("first line \"this is not a trace\"")
            && e.to_string().contains("--format"),
        "{e}"
    );
    // A JPEG: said to be binary, its first bytes named.
    std::fs::write(&path, [0xff, 0xd8, 0xff, 0xe0, 0, 0x10, b'J', b'F']).unwrap();
    let e = open(&path, None, ReadOptions::default()).err().unwrap();
    assert!(
        e.to_string().contains("binary data, starting ff d8 ff e0"),
        "{e}"
    );
    std::fs::write(&path, "").unwrap();
    let e = open(&path, None, ReadOptions::default()).err().unwrap();
    assert!(e.to_string().contains("an empty file"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A generated trace of a million lines streams through without being held in memory.
#[test]
fn long_traces_stream_in_constant_memory() {
    struct Generated {
        line: u64,
        lines: u64,
        pending: Vec<u8>,
        at: usize,
    }
    impl Read for Generated {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            if self.at == self.pending.len() {
                if self.line == self.lines {
                    return Ok(0);
                }
                self.pending = format!(
                    "{} 0 {} 8 {}\n",
                    self.line * 1000,
                    self.line * 8,
                    self.line % 2
                )
                .into_bytes();
                self.at = 0;
                self.line += 1;
            }
            let n = buf.len().min(self.pending.len() - self.at);
            buf[..n].copy_from_slice(&self.pending[self.at..self.at + n]);
            self.at += n;
            Ok(n)
        }
    }
    let lines = 1_000_000;
    let input = BufReader::new(Generated {
        line: 0,
        lines,
        pending: Vec::new(),
        at: 0,
    });
    let reader = TraceReader::new(input, TraceFormat::MqSim, ReadOptions::default()).unwrap();
    let (mut n, mut last) = (0u64, 0u64);
    for r in reader {
        let r = r.unwrap();
        assert!(r.time_ns >= last);
        last = r.time_ns;
        n += 1;
    }
    assert_eq!(n, lines);
    assert_eq!(last, (lines - 1) * 1000);
}

#[test]
fn format_names_round_trip() {
    for f in TraceFormat::ALL {
        assert_eq!(TraceFormat::from_name(f.name()), Some(f));
    }
    assert_eq!(TraceFormat::from_name("disksim"), Some(TraceFormat::MqSim));
    assert_eq!(
        TraceFormat::from_name("blkparse"),
        Some(TraceFormat::Blkparse(BlkEvent::Queue))
    );
    assert_eq!(TraceFormat::from_name("nope"), None);
}

/// The compressed fixtures of `crates/sim/tests/data` (see its README).
fn compressed_fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

/// Every request of the first 300 lines of the WebSearch trace, read from the plain file.
fn websearch_300() -> Vec<Request> {
    let text: String = std::fs::read_to_string(repo("websearch-head.mqsim"))
        .unwrap()
        .lines()
        .take(300)
        .map(|l| format!("{l}\n"))
        .collect();
    TraceReader::new(text.as_bytes(), TraceFormat::MqSim, ReadOptions::default())
        .unwrap()
        .collect::<Result<Vec<_>, _>>()
        .unwrap()
}

/// gzip, zstd, xz and bzip2 files (one stream, and two streams back to back) read as the
/// plain text does, the format detected through the compression (`.mqsim.gz` counts as
/// `.mqsim`).
#[test]
fn compressed_traces_read_like_the_plain_text() {
    let want = websearch_300();
    assert_eq!(want.len(), 300);
    for ext in ["gz", "zst", "xz", "bz2"] {
        for name in [
            format!("websearch-300.mqsim.{ext}"),
            format!("websearch-300-two-streams.mqsim.{ext}"),
        ] {
            let r = open(&compressed_fixture(&name), None, ReadOptions::default()).unwrap();
            assert_eq!(r.format(), TraceFormat::MqSim, "{name}");
            let got: Vec<Request> = r.collect::<Result<_, _>>().unwrap();
            assert_eq!(got, want, "{name}");
        }
    }
}

/// A compressed trace cut short, or with its bytes damaged, is an error that names the
/// compression, never a shorter trace read as if it were whole.
#[test]
fn truncated_or_damaged_compressed_traces_are_errors_not_short_traces() {
    let dir = std::env::temp_dir().join(format!("rf-trace-cut-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (ext, name) in [
        ("gz", "gzip"),
        ("zst", "zstd"),
        ("xz", "xz"),
        ("bz2", "bzip2"),
    ] {
        let whole =
            std::fs::read(compressed_fixture(&format!("websearch-300.mqsim.{ext}"))).unwrap();
        for keep in [whole.len() / 2, whole.len() - 3] {
            let path = dir.join(format!("cut-{keep}.mqsim.{ext}"));
            std::fs::write(&path, &whole[..keep]).unwrap();
            let result = open(&path, Some(TraceFormat::MqSim), ReadOptions::default())
                .map(|r| r.collect::<Result<Vec<_>, _>>());
            let e = match result {
                Ok(Ok(v)) => panic!("{ext} cut to {keep} bytes read as {} requests", v.len()),
                Ok(Err(e)) | Err(e) => e,
            };
            let text = e.to_string();
            assert!(matches!(e, TraceError::Io { .. }), "{ext}: {text}");
            assert!(text.contains(name), "{ext} cut to {keep}: {text}");
        }
        // A damaged byte in the middle of the stream.
        let mut bad = whole.clone();
        let mid = bad.len() / 2;
        bad[mid] ^= 0x5a;
        bad[mid + 1] ^= 0xa5;
        let path = dir.join(format!("damaged.mqsim.{ext}"));
        std::fs::write(&path, &bad).unwrap();
        let r = open(&path, Some(TraceFormat::MqSim), ReadOptions::default()).unwrap();
        // Every one of these formats checks its contents (gzip, xz and bzip2 always, zstd
        // with the checksum its tool writes by default). Lines decoded before the check
        // fails may come first (and be malformed): the stream's error ends the trace.
        let out: Vec<Result<Request, TraceError>> = r.collect();
        let Some(Err(e)) = out.last() else {
            panic!("{ext}: a damaged stream read without an error at its end");
        };
        assert!(
            matches!(e, TraceError::Io { .. }) && e.to_string().contains(name),
            "{ext}: {e}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The Alibaba block traces' layout (`device_id,opcode,offset,length,timestamp`: bytes and
/// microseconds) is detected and read; the same lines read through a column map give the
/// same requests.
#[test]
fn alibaba_traces_and_column_mapped_csv_read_alike() {
    let text = "3,W,8192,4096,1577808000000123\n3,R,0,512,1577808000000623\n17,W,1048576,65536,1577808000001623\n";
    assert_eq!(
        TraceFormat::detect(None, text.as_bytes()),
        Some(TraceFormat::Alibaba)
    );
    let got = ok_all(TraceFormat::Alibaba, text);
    let want = [
        (0, 8192, 4096, Op::Write, 3),
        (500_000, 0, 512, Op::Read, 3),
        (1_500_000, 1_048_576, 65_536, Op::Write, 17),
    ];
    let seen: Vec<(u64, u64, u64, Op, u32)> = got
        .iter()
        .map(|r| (r.time_ns, r.offset_bytes, r.len_bytes, r.op, r.volume))
        .collect();
    assert_eq!(seen, want);
    let spec =
        TraceFormat::parse("csv:device=1,op=2:rw,offset=3:bytes,size=4:bytes,time=5:us").unwrap();
    assert_eq!(ok_all(spec, text), got);
    // Another dialect: a header, semicolons, sectors, milliseconds, SCSI opcodes (a SYNCHRONIZE
    // CACHE line carries no data and is skipped, not an error).
    let other = "when;what;lba;blocks\n0.5;2a;16;8\n1.0;35;0;0\n1.25;28;0;1\n";
    let spec = TraceFormat::parse(
        "csv:time=1:ms,op=2:scsi,offset=3:sectors,size=4:sectors,header,sep=semicolon",
    )
    .unwrap();
    let mut reader = TraceReader::new(other.as_bytes(), spec, ReadOptions::default()).unwrap();
    let got: Vec<(u64, u64, u64, Op)> = reader
        .by_ref()
        .map(|r| r.unwrap())
        .map(|r| (r.time_ns, r.offset_bytes, r.len_bytes, r.op))
        .collect();
    assert_eq!(
        got,
        [(0, 8192, 4096, Op::Write), (750_000, 0, 512, Op::Read)]
    );
    assert_eq!(reader.skipped_lines(), 2, "the header and the cache flush");
}

/// A malformed line of a column-mapped CSV is named by file and line; the reader goes on
/// with the next (what --lenient counts and skips).
#[test]
fn a_malformed_csv_line_is_named_and_skippable() {
    let dir = std::env::temp_dir().join(format!("rf-csv-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("dialect.csv");
    std::fs::write(&path, "1,R,0,4096\n2,X,0,4096\n3,W,4096\n4,W,8192,512\n").unwrap();
    let format = TraceFormat::parse("csv:time=1:s,op=2,offset=3,size=4").unwrap();
    let out: Vec<Result<Request, TraceError>> = open(&path, Some(format), ReadOptions::default())
        .unwrap()
        .collect();
    assert_eq!(out.len(), 4);
    let errors: Vec<String> = out
        .iter()
        .filter_map(|r| r.as_ref().err())
        .map(|e| e.to_string())
        .collect();
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert!(
        errors[0].contains("dialect.csv:2") && errors[0].contains("\"X\""),
        "{}",
        errors[0]
    );
    assert!(errors[1].contains("dialect.csv:3"), "{}", errors[1]);
    let good: Vec<u64> = out
        .iter()
        .filter_map(|r| r.as_ref().ok())
        .map(|r| r.offset_bytes)
        .collect();
    assert_eq!(good, [0, 8192]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The real blkparse trace of the repository (`data/traces/loop-ext4.blkparse.xz`: ext4 on a
/// loop device, recorded with the kernel's blk tracer): replayed at its Q events, the block
/// layer's merging (on by default for Q replays) lands within 2x of the requests the device
/// was issued (its D events), where the unmerged Q replay has 1.6x as many; every byte of
/// every Q request is still requested once.
#[test]
fn merging_a_queue_level_replay_comes_near_the_issued_requests() {
    let path = repo("loop-ext4.blkparse.xz");
    let read = |format, merge| {
        let options = ReadOptions {
            merge,
            ..ReadOptions::default()
        };
        let mut r = open(&path, Some(format), options).unwrap();
        let v: Vec<Request> = r.by_ref().collect::<Result<_, _>>().unwrap();
        (v, r.requests_merged(), r.requests_split())
    };
    let (q, _, _) = read(TraceFormat::Blkparse(BlkEvent::Queue), None);
    let (d, _, _) = read(TraceFormat::Blkparse(BlkEvent::Issue), None);
    let (m, merged, split) = read(
        TraceFormat::Blkparse(BlkEvent::Queue),
        Some(sim::Merge::default()),
    );
    assert_eq!((q.len(), d.len()), (1440, 888));
    assert_eq!(m.len() as u64 + merged - split, q.len() as u64);
    let ratio = m.len() as f64 / d.len() as f64;
    assert!(
        (0.5..=2.0).contains(&ratio),
        "merged Q replay: {} requests against {} issued ({ratio:.2}x)",
        m.len(),
        d.len()
    );
    // The kernel split every bio over 1280 KiB (130 X events); so does the model.
    assert_eq!(split, 130);
    let bytes = |v: &[Request], op: Op| -> u64 {
        v.iter().filter(|r| r.op == op).map(|r| r.len_bytes).sum()
    };
    for op in [Op::Read, Op::Write] {
        assert_eq!(bytes(&m, op), bytes(&q, op), "{op:?} bytes");
    }
    assert!(m.windows(2).all(|w| w[0].time_ns <= w[1].time_ns));
    assert!(m.iter().all(|r| r.len_bytes <= 1280 << 10));
}

/// A workload source merges a blkparse Q replay by default, and nothing else unless asked.
#[test]
fn sources_merge_queue_level_replays_by_default_only() {
    use sim::exec::Workload;
    let count = |file: &str, format: TraceFormat, merge: sim::MergeChoice| {
        let spec = sim::WorkloadSpec::Trace {
            path: repo(file),
            format: Some(format),
        };
        let opts = sim::SourceOptions {
            merge,
            ..sim::SourceOptions::default()
        };
        let mut s = spec.open(u64::MAX, &opts).unwrap();
        let mut n = 0u64;
        while let Some(r) = s.next_request() {
            r.unwrap();
            n += 1;
        }
        (n, s.merging())
    };
    let auto = sim::MergeChoice::default();
    let q = TraceFormat::Blkparse(BlkEvent::Queue);
    let (n, (merged, split)) = count("loop-ext4.blkparse.xz", q, auto);
    // (130: the kernel's X events in the trace.)
    assert_eq!((n + merged - split, split), (1440, 130));
    assert!(n < 1440);
    assert_eq!(
        count("loop-ext4.blkparse.xz", q, sim::MergeChoice::Off),
        (1440, (0, 0))
    );
    // A device-level trace is replayed as recorded unless merging is asked for.
    let (n, m) = count("websearch-head.mqsim", TraceFormat::MqSim, auto);
    assert_eq!((n, m), (24_783, (0, 0)));
    let (n, (merged, _)) = count(
        "websearch-head.mqsim",
        TraceFormat::MqSim,
        sim::MergeChoice::On(sim::Merge::default()),
    );
    assert!(merged > 0 && n + merged >= 24_783, "{n} {merged}");
}

/// One volume of a trace kept, the others counted as skipped; or every volume folded onto one.
#[test]
fn volumes_are_selected_or_folded() {
    let path = repo("websearch-head.mqsim");
    let read = |volumes| {
        let options = ReadOptions {
            volumes,
            ..ReadOptions::default()
        };
        let mut r = open(&path, None, options).unwrap();
        let v: Vec<Request> = r.by_ref().collect::<Result<_, _>>().unwrap();
        (v, r.skipped_lines())
    };
    let (all, _) = read(sim::Volumes::All);
    let (one, skipped) = read(sim::Volumes::Only(2));
    let want: Vec<Request> = all.iter().filter(|r| r.volume == 2).copied().collect();
    assert!(!want.is_empty() && want.len() < all.len());
    // (Times count from the first request kept.)
    let shift = want[0].time_ns;
    let want: Vec<Request> = want
        .into_iter()
        .map(|r| Request {
            time_ns: r.time_ns - shift,
            ..r
        })
        .collect();
    assert_eq!(one, want);
    assert_eq!(skipped as usize, all.len() - one.len());
    let (folded, _) = read(sim::Volumes::Fold);
    assert_eq!(folded.len(), all.len());
    assert!(folded.iter().all(|r| r.volume == 0));
    assert!(folded
        .iter()
        .zip(&all)
        .all(|(f, a)| (f.time_ns, f.offset_bytes, f.len_bytes)
            == (a.time_ns, a.offset_bytes, a.len_bytes)));
}
