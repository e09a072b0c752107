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
    assert!(String::from_utf8_lossy(&bad.stderr).contains("unknown --format \"nope\""));
}
