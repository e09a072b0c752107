//! `raidforge sim` as a script sees it: the real binary, its JSON, its errors.

mod common;

use common::{json_here, run};

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
    let v = json_here(ONLINE);
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
    assert_eq!(v, json_here(ONLINE));
}

#[test]
fn offline_rebuild_without_json_prints_a_summary() {
    let out = run(&[
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
    let out = run(&args);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.starts_with("raidforge: error: "), "{err}");
    assert!(err.contains(&format!("{p}:2")), "{err}");
    let mut lenient = args.to_vec();
    lenient.extend(["--lenient", "--json"]);
    let v = json_here(&lenient);
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
            "--disk: unknown drive \"floppy\"; known: st3500320as",
        ),
        (
            vec!["--workload", "none", "--fail", "9"],
            "cannot fail member 9: the array has members 0 to 3",
        ),
        (
            vec!["--workload", "none", "--recheck", "0"],
            "--recheck must be at least 0.001 s (the engine's is 0.05)",
        ),
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
        let out = run(&full);
        assert_eq!(out.status.code(), Some(2), "{full:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(needle), "{full:?}: {err}");
    }
}

/// `--rebuild-policy ido`: the IDO section of the JSON, the warm-up fraction placing the
/// failure, and the errors of the new options.
#[test]
fn rebuild_policy_ido_reports_redirection() {
    let args = |policy: &'static str| -> Vec<&'static str> {
        vec![
            "sim",
            "--scheme",
            "raid5",
            "--disks",
            "4",
            "--disk",
            "wd1600aajs",
            "--member-size",
            "24M",
            "--chunk",
            "64K",
            "--workload",
            "random:read=0.8:size=4K:iops=100:requests=1200:span=8M",
            "--fail",
            "1",
            "--warmup-fraction",
            "0.5",
            "--rebuild-policy",
            policy,
            "--zone-size",
            "384K",
            "--idle-window",
            "0.02",
            "--json",
        ]
    };
    let v = json_here(&args("ido"));
    let fail_at = v["rebuild"]["fail_at_s"].as_f64().unwrap();
    // 1200 requests at 100 IOPS: about 12 s, failure at about half of it.
    assert!((5.0..7.0).contains(&fail_at), "{fail_at}");
    let ido = &v["ido"];
    assert_eq!(ido["policy"], "ido");
    assert_eq!(ido["zone_bytes"], 384 * 1024);
    assert!(ido["hot_zones"].as_u64().unwrap() > 0);
    assert!(ido["redirected_share"].as_f64().unwrap() > 0.5, "{ido}");
    assert!(ido["reclaim_end_s"].is_number());
    assert_eq!(
        ido["writes_redirected"].as_u64().unwrap() > 0,
        ido["reclaimed_bytes"].as_u64().unwrap() > 0
    );
    let pr = json_here(&args("pr"));
    assert_eq!(pr["ido"]["redirected_share"].as_f64().unwrap(), 0.0);
    // Errors name the option and what to do.
    let mut bad = args("ido");
    bad[20] = "100K";
    let out = run(&bad);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("multiple of the stripe data size"), "{err}");
    let out = run(&[
        "sim",
        "--scheme",
        "raid5",
        "--disks",
        "4",
        "--workload",
        "none",
        "--zone-size",
        "3M",
    ]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("need --rebuild-policy"));
}

/// An all-SSD array (Intel X25-E) under random reads and writes, healthy and with a failure
/// and rebuild: runs to the end in a debug build (an SSD's channel stays busy after it
/// completes a write, so a command may start after it is submitted; the executor asserted
/// that disks start every command at once and panicked) and reports every member busy.
#[test]
fn an_all_ssd_array_runs() {
    for fail in [false, true] {
        let mut args = vec![
            "sim",
            "--scheme",
            "raid5",
            "--disks",
            "4",
            "--disk",
            "x25-e",
            "--member-size",
            "256M",
            "--workload",
            "random:read=0.5:iops=5000:requests=4000",
            "--seed",
            "1",
            "--json",
        ];
        if fail {
            args.extend(["--fail", "0", "--fail-at", "0.1"]);
        }
        let v = json_here(&args);
        let disks = v["per_disk"].as_array().expect("per_disk");
        assert_eq!(disks.len(), 4);
        for (i, d) in disks.iter().enumerate() {
            assert!(d["writes"].as_u64().unwrap() > 0, "member {i}: {d}");
        }
        assert!(v["throughput_iops"].as_f64().unwrap() > 0.0, "{v}");
        if fail {
            assert!(v["rebuild_time_s"].as_f64().unwrap() > 0.0, "{v}");
        }
    }
}

/// An empty trace, or one that holds no request as the named format reads it, is an error
/// saying so, not a run of "0 requests"; a file of another kind (a JPEG) is described and the
/// error names --format.
#[test]
fn a_trace_with_nothing_to_replay_is_an_error_that_says_what_was_read() {
    let dir = std::env::temp_dir().join(format!("raidforge-cli-sim-empty-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let empty = dir.join("empty.csv");
    std::fs::write(&empty, "").unwrap();
    let jpeg = dir.join("photo.jpg");
    std::fs::write(
        &jpeg,
        [0xff, 0xd8, 0xff, 0xe0, 0, 0x10, b'J', b'F', b'I', b'F'],
    )
    .unwrap();
    let comments = dir.join("comments.csv");
    std::fs::write(&comments, "# nothing here\n").unwrap();
    for (file, format, needles) in [
        (&empty, Some("msr"), vec!["empty file"]),
        (
            &jpeg,
            None,
            vec!["binary data, starting ff d8 ff e0", "--format"],
        ),
        (
            &comments,
            Some("msr"),
            vec!["holds no request", "--format msr"],
        ),
    ] {
        let mut args = vec![
            "sim",
            "--scheme",
            "raid5",
            "--disks",
            "4",
            "--member-size",
            "64M",
            "--workload",
            file.to_str().unwrap(),
        ];
        if let Some(f) = format {
            args.extend(["--format", f, "--lenient"]);
        }
        let out = run(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        for n in needles {
            assert!(err.contains(n), "{args:?}: '{n}' not in {err}");
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_engines_emulated_disk_is_a_drive_model() {
    // RAID5 over 4 members of 64 MiB at 100 MB/s and 4 ms per request, 64 KiB chunks, an
    // offline rebuild: the replacement takes 64 MiB, so no less than 64 MiB at the rate; and
    // consecutive chunks merge into large requests (as the engine sends them), so it takes
    // far less than one request per chunk, 1024 x (4 ms + 64 KiB / 100 MB/s).
    let base = [
        "sim",
        "--scheme",
        "raid5",
        "--disks",
        "4",
        "--disk",
        "hdd:100MB/s:4ms",
        "--chunk",
        "64K",
        "--workload",
        "none",
        "--fail",
        "0",
        "--json",
    ];
    let mut args = base.to_vec();
    args.extend(["--member-size", "64M"]);
    let v = json_here(&args);
    let bytes = (64u64 << 20) as f64;
    let per_unit = 1024.0 * (0.004 + 65536.0 / 100e6);
    let t = v["rebuild_time_s"].as_f64().unwrap();
    assert!(
        t >= bytes / 100e6 && t < per_unit / 2.0,
        "rebuild {t} s: below {} s or not under half of {per_unit} s",
        bytes / 100e6
    );
    assert_eq!(v["drive"], "hdd:100MB/s:4ms");
    assert_eq!(v["per_disk"][0]["writes"], 1024);
    // Half the rate: slower, and bounded by the bytes at the new rate.
    args[6] = "hdd:50MB/s:4ms";
    let slow = json_here(&args)["rebuild_time_s"].as_f64().unwrap();
    assert!(slow > t && slow >= bytes / 50e6, "{slow} vs {t}");
    // It has no size of its own; a bad spec says what is wrong.
    let out = run(&base);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("give --member-size"));
    let mut bad = args.clone();
    bad[6] = "hdd:fast:4ms";
    let out = run(&bad);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("bandwidth"));
}

#[test]
fn zipf_offsets_concentrate_the_load() {
    // Read-only 4 KiB requests over RAID0: with zipf=1.2 a few hot blocks take most reads, so
    // the busiest member serves far more than the least busy; uniform offsets spread evenly.
    let run_with = |spec: &str| {
        json_here(&[
            "sim",
            "--scheme",
            "raid0",
            "--disks",
            "8",
            "--disk",
            "hdd:100MB/s:1ms",
            "--member-size",
            "64M",
            "--chunk",
            "64K",
            "--workload",
            spec,
            "--json",
        ])
    };
    let spread = |v: &serde_json::Value| {
        let reads: Vec<f64> = v["per_disk"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["reads"].as_f64().unwrap())
            .collect();
        let max = reads.iter().cloned().fold(0.0, f64::max);
        let min = reads.iter().cloned().fold(f64::MAX, f64::min);
        max / min
    };
    let zipf = run_with("random:read=1:size=4K:qd=4:requests=4000:zipf=1.2");
    let uniform = run_with("random:read=1:size=4K:qd=4:requests=4000");
    assert!(spread(&zipf) > 1.5, "zipf spread {}", spread(&zipf));
    assert!(
        spread(&uniform) < 1.3,
        "uniform spread {}",
        spread(&uniform)
    );
    // theta 1 has no closed form in Gray's method: refused with the reason.
    let out = run(&[
        "sim",
        "--scheme",
        "raid0",
        "--disks",
        "2",
        "--member-size",
        "64M",
        "--workload",
        "random:read=1:size=4K:qd=4:requests=10:zipf=1",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("zipf"));
}
