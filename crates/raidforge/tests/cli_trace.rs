//! `raidforge trace read` as a script sees it: the requests the simulator replays, as JSON
//! lines, and errors that name the file and line.

mod common;

use common::{raidforge, TempDir};
use serde_json::Value;

/// Three MSR Cambridge lines (Windows filetime in 100 ns ticks), the second one malformed.
const MSR: &str = "128166385295514663,hm,0,Write,9056014336,2048,2833\n\
                   128166385295514878,hm,0,Sideways,11855351808,512,2617\n\
                   128166385295524663,hm,1,Read,4096,4096,100\n";

fn lines(out: &std::process::Output) -> Vec<Value> {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone())
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object a line"))
        .collect()
}

#[test]
fn read_prints_requests_and_names_bad_lines() {
    let dir = TempDir::new("trace", "read");
    std::fs::write(dir.path().join("t.csv"), MSR).unwrap();
    let strict = raidforge(dir.path(), &["trace", "read", "t.csv", "--format", "msr"]);
    assert_eq!(strict.status.code(), Some(2));
    let err = String::from_utf8_lossy(&strict.stderr);
    assert!(err.contains("t.csv:2"), "{err}");

    let v = lines(&raidforge(
        dir.path(),
        &[
            "trace",
            "read",
            "t.csv",
            "--format",
            "msr",
            "--lenient",
            "--json",
        ],
    ));
    assert_eq!(v.len(), 2);
    assert_eq!(v[0]["op"], "write");
    assert_eq!(v[0]["offset_bytes"], 9056014336u64);
    assert_eq!(v[0]["len_bytes"], 2048);
    assert_eq!(v[0]["time_ns"], 0);
    // 10,000 ticks of 100 ns after the first line.
    assert_eq!(v[1]["time_ns"], 1_000_000);
    assert_eq!(
        (v[1]["op"].as_str(), v[1]["volume"].as_u64()),
        (Some("read"), Some(1))
    );

    // Twice as fast, two passes, at most three requests.
    let v = lines(&raidforge(
        dir.path(),
        &[
            "trace",
            "read",
            "t.csv",
            "--format",
            "msr",
            "--lenient",
            "--json",
            "--speedup",
            "2",
            "--loops",
            "2",
            "--requests",
            "3",
        ],
    ));
    assert_eq!(v.len(), 3);
    assert_eq!(v[1]["time_ns"], 500_000);
    assert_eq!(v[2]["offset_bytes"], v[0]["offset_bytes"]);
    assert!(v[2]["time_ns"].as_u64() > v[1]["time_ns"].as_u64());

    let bad = raidforge(dir.path(), &["trace", "read", "t.csv", "--format", "nope"]);
    assert_eq!(bad.status.code(), Some(2));
    let said = String::from_utf8_lossy(&bad.stderr);
    assert!(
        said.contains("--format: unknown trace format \"nope\"") && said.contains("alibaba"),
        "{said}"
    );
}

/// A blkparse Q replay is merged as the block layer would by default, and says so; `--merge
/// off` replays the queue events as recorded; a compressed trace reads as it is.
#[test]
fn a_queue_level_replay_is_merged_and_says_so() {
    let dir = TempDir::new("trace", "merge");
    let trace = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../data/traces/loop-ext4.blkparse.xz");
    let t = trace.to_str().unwrap();
    let merged = raidforge(dir.path(), &["trace", "read", t, "--json"]);
    assert!(merged.status.success());
    let said = String::from_utf8_lossy(&merged.stderr);
    assert!(
        said.contains("format blkparse-q") && said.contains("1440 in the trace"),
        "{said}"
    );
    let n = String::from_utf8_lossy(&merged.stdout).lines().count();
    let off = raidforge(
        dir.path(),
        &["trace", "read", t, "--json", "--merge", "off"],
    );
    assert!(off.status.success());
    assert_eq!(String::from_utf8_lossy(&off.stdout).lines().count(), 1440);
    assert!(n < 1440, "{n} requests after merging");
    assert!(said.contains(&format!(", {n} requests (")), "{said}");
}

/// `trace stats --json` on a small Alibaba-layout trace, gzip-compressed, whose figures are
/// worked out by hand here; `--plot` writes an SVG with both panels.
#[test]
fn stats_summarise_a_trace() {
    use std::io::Write;
    let dir = TempDir::new("trace", "stats");
    // Volume 3: 4 KiB at 0, then 4 KiB at 4096 (sequential), then a 64 KiB read at 0
    // (overlapping both); volume 9: 512 bytes. Times in microseconds: 0 s to 2.5 s.
    let text =
        "3,W,0,4096,1000000\n3,W,4096,4096,1000100\n9,R,0,512,2000000\n3,R,0,65536,3500000\n";
    let path = dir.path().join("t.csv.gz");
    let mut gz = flate2::write::GzEncoder::new(
        std::fs::File::create(&path).unwrap(),
        flate2::Compression::default(),
    );
    gz.write_all(text.as_bytes()).unwrap();
    gz.finish().unwrap();
    let out = raidforge(
        dir.path(),
        &["trace", "stats", "t.csv.gz", "--json", "--plot", "s.svg"],
    );
    let v = &lines(&out)[0];
    assert_eq!(v["format"], "alibaba");
    assert_eq!(
        (v["requests"].as_u64(), v["reads"].as_u64()),
        (Some(4), Some(2))
    );
    assert_eq!(v["read_bytes"], 65536 + 512);
    assert_eq!(v["write_bytes"], 8192);
    assert_eq!(v["footprint_bytes"], 65536 + 512);
    assert_eq!(v["sequential_share"], 0.25);
    assert_eq!(v["duration_s"], 2.5);
    assert_eq!(v["volumes"][0]["extent_bytes"], 65536);
    let sizes = v["sizes"].as_array().unwrap();
    let at = |le: u64| sizes.iter().find(|s| s["le_bytes"] == le).cloned();
    assert_eq!(at(4096).unwrap()["writes"], 2);
    assert_eq!(at(65536).unwrap()["reads"], 1);
    let svg = std::fs::read_to_string(dir.path().join("s.svg")).unwrap();
    assert!(svg.contains("requests per second") && svg.contains("request sizes"));
}
