//! `raidforge sim` as a script sees it: the real binary, its JSON, its errors.

use std::process::{Command, Output};

use serde_json::Value;

fn raidforge(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_raidforge"))
        .args(args)
        .output()
        .expect("run raidforge")
}

fn json_of(args: &[&str]) -> Value {
    let out = raidforge(args);
    assert!(
        out.status.success(),
        "raidforge {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("valid JSON on stdout")
}

const ONLINE: &[&str] = &[
    "sim",
    "--scheme",
    "raid5",
    "--disks",
    "5",
    "--disk",
    "st3500320as",
    "--member-size",
    "64M",
    "--chunk",
    "64K",
    "--workload",
    "random:read=0.7:size=4K:iops=200:requests=800",
    "--fail",
    "2",
    "--fail-at",
    "1.5",
    "--speed-min",
    "8M",
    "--seed",
    "11",
    "--json",
];

#[test]
fn json_has_the_issue_fields_and_is_deterministic() {
    let v = json_of(ONLINE);
    assert!(v["rebuild_time_s"].as_f64().unwrap() > 0.0);
    for phase in ["normal", "rebuilding"] {
        let p = &v["response_ms"][phase];
        for k in ["mean", "p50", "p99", "p999"] {
            assert!(p[k].as_f64().unwrap() > 0.0, "{phase}.{k}");
        }
        assert!(p["count"].as_u64().unwrap() > 0, "{phase}.count");
        assert!(p["p50"].as_f64() <= p["p99"].as_f64());
    }
    assert_eq!(v["response_ms"]["degraded"]["count"], 0);
    assert_eq!(v["requests"], 800);
    assert!(v["throughput_iops"].as_f64().unwrap() > 100.0);
    let disks = v["per_disk"].as_array().unwrap();
    assert_eq!(disks.len(), 5);
    for d in disks {
        assert!(d["busy_s"].as_f64().unwrap() > 0.0);
        assert!(d["reads"].as_u64().unwrap() + d["writes"].as_u64().unwrap() > 0);
    }
    assert!(v["load_cov"].as_f64().unwrap() >= 0.0);
    assert_eq!(v["rebuild"]["replaced"], 2);
    assert_eq!(v["seed"], 11);
    // One seed, one run.
    assert_eq!(v, json_of(ONLINE));
}

#[test]
fn offline_rebuild_without_json_prints_a_summary() {
    let out = raidforge(&[
        "sim",
        "--scheme",
        "raidplus",
        "--disks",
        "7",
        "--width",
        "3",
        "--member-size",
        "256M",
        "--chunk",
        "1M",
        "--workload",
        "none",
        "--fail",
        "0",
        "--speed-max",
        "0",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("rebuild time"), "{text}");
    assert!(text.contains("load CoV"), "{text}");
}

#[test]
fn malformed_trace_is_an_error_naming_file_and_line() {
    let path = std::env::temp_dir().join(format!("raidforge-cli-sim-{}.csv", std::process::id()));
    std::fs::write(
        &path,
        "128166385295514663,hm,0,Write,9056014336,2048,2833\n128166385295514878,hm,0,Sideways,11855351808,512,2617\n",
    )
    .unwrap();
    let p = path.to_str().unwrap();
    let args = [
        "sim",
        "--scheme",
        "raid5",
        "--disks",
        "4",
        "--member-size",
        "64M",
        "--workload",
        p,
        "--format",
        "msr",
    ];
    let out = raidforge(&args);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.starts_with("raidforge: error: "), "{err}");
    assert!(err.contains(&format!("{p}:2")), "{err}");
    let mut lenient = args.to_vec();
    lenient.extend(["--lenient", "--json"]);
    let v = json_of(&lenient);
    assert_eq!(
        (v["requests"].as_u64(), v["requests_skipped"].as_u64()),
        (Some(1), Some(1))
    );
    std::fs::remove_file(path).unwrap();
}

#[test]
fn bad_arguments_are_errors() {
    for (args, needle) in [
        (vec!["--workload", "random:nope=1"], "unknown key"),
        (vec!["--workload", "/no/such/trace"], "neither"),
        (
            vec!["--workload", "none", "--disk", "floppy"],
            "unknown --disk",
        ),
        (vec!["--workload", "none", "--fail", "9"], "member 9"),
    ] {
        let mut full = vec![
            "sim",
            "--scheme",
            "raid5",
            "--disks",
            "4",
            "--member-size",
            "64M",
        ];
        full.extend(args);
        let out = raidforge(&full);
        assert_eq!(out.status.code(), Some(2), "{full:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(needle), "{full:?}: {err}");
    }
}
