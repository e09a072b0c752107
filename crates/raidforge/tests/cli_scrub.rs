//! `raidforge create --checksums on` and `raidforge scrub` from the command line: help text,
//! the JSON report's shape, exit codes (0 clean or all repaired, 1 something left wrong, 2 a
//! usage error), a byte flipped in a member file found and repaired, and a read of a range
//! beyond repair failing with its logical range.

use std::os::unix::fs::FileExt;
use std::path::Path;

use serde_json::Value;

mod common;

use common::{create_small, ok, raidforge, TempDir};

fn create(dir: &Path, checksums: &str) {
    let layout = ["--scheme", "raid5", "--disks", "4"];
    create_small(dir, "p.json", &layout, "m", 4, &["--checksums", checksums]);
}

fn fill(dir: &Path) -> Vec<u8> {
    let data: Vec<u8> = (0..1u32 << 20)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    std::fs::write(dir.join("data.bin"), &data).unwrap();
    ok(
        dir,
        &[
            "io", "write", "p.json", "--offset", "0", "--input", "data.bin",
        ],
    );
    data
}

fn flip(dir: &Path, member: &str, at: u64) {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(dir.join(member))
        .unwrap();
    let mut b = [0u8; 1];
    f.read_exact_at(&mut b, at).unwrap();
    f.write_all_at(&[!b[0]], at).unwrap();
}

fn scrub_json(dir: &Path) -> (Option<i32>, Value) {
    let out = raidforge(dir, &["scrub", "p.json", "--json"]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "scrub --json printed no JSON ({e}): {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code(), v)
}

fn data_offset(dir: &Path) -> u64 {
    let s: Value = serde_json::from_str(&ok(dir, &["status", "p.json", "--json"])).unwrap();
    assert_eq!(s["checksums"], true);
    s["members"][0]["data_offset_bytes"].as_u64().unwrap()
}

#[test]
fn scrub_help_and_usage_errors() {
    let d = TempDir::new("scrub", "help");
    let help = ok(&d.0, &["scrub", "--help"]);
    for word in [
        "checksums",
        "--speed-max",
        "--rewrite-parity",
        "--json",
        "Exits 0",
    ] {
        assert!(help.contains(word), "scrub --help lacks {word}: {help}");
    }
    let create_help = ok(&d.0, &["create", "--help"]);
    assert!(create_help.contains("--checksums"), "{create_help}");
    // Usage errors exit 2.
    assert_eq!(raidforge(&d.0, &["scrub"]).status.code(), Some(2));
    assert_eq!(
        raidforge(&d.0, &["scrub", "nothing.json"]).status.code(),
        Some(2)
    );
    let bad = raidforge(
        &d.0,
        &[
            "create",
            "p.json",
            "--scheme",
            "raid5",
            "--disks",
            "3",
            "--size",
            "4M",
            "--checksums",
            "maybe",
            "--member",
            "a",
            "b",
            "c",
        ],
    );
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("on or off"));
}

#[test]
fn flipped_byte_is_found_repaired_and_reported() {
    let d = TempDir::new("scrub", "flip");
    create(&d.0, "on");
    let data = fill(&d.0);
    let (code, v) = scrub_json(&d.0);
    assert_eq!(code, Some(0));
    for key in [
        "checked_bytes",
        "repaired",
        "unrecoverable",
        "parity_mismatches",
        "checksums",
    ] {
        assert!(v.get(key).is_some(), "scrub JSON lacks {key}: {v}");
    }
    assert!(v["checked_bytes"].as_u64().unwrap() >= 4 * (1 << 20));
    // A byte changed behind the engine's back, in member 2's data area.
    let at = data_offset(&d.0) + 3 * 16384 + 4096 + 99;
    flip(&d.0, "m2.img", at);
    let (code, v) = scrub_json(&d.0);
    assert_eq!(code, Some(0), "{v}");
    let rep = v["repaired"].as_array().unwrap();
    assert_eq!(rep.len(), 1, "{v}");
    assert_eq!(rep[0]["member"], 2);
    assert_eq!(rep[0]["offset"].as_u64().unwrap(), at / 4096 * 4096);
    assert_eq!(rep[0]["length"], 4096);
    let (code, v) = scrub_json(&d.0);
    assert_eq!(code, Some(0));
    assert!(v["repaired"].as_array().unwrap().is_empty(), "{v}");
    ok(
        &d.0,
        &[
            "io", "read", "p.json", "--offset", "0", "--length", "1M", "--output", "out.bin",
        ],
    );
    assert_eq!(std::fs::read(d.0.join("out.bin")).unwrap(), data);
    let s: Value = serde_json::from_str(&ok(&d.0, &["status", "p.json", "--json"])).unwrap();
    assert_eq!(s["repairs"]["checksum_mismatches"], 1);
    assert_eq!(s["repairs"]["repaired_blocks"], 1);
}

#[test]
fn beyond_repair_exits_1_and_reads_fail_naming_the_range() {
    let d = TempDir::new("scrub", "lost");
    create(&d.0, "on");
    fill(&d.0);
    // The same block of the first row on two members: a RAID5 stripe loses two units.
    let at = data_offset(&d.0) + 4096 + 7;
    flip(&d.0, "m0.img", at);
    flip(&d.0, "m1.img", at);
    let (code, v) = scrub_json(&d.0);
    assert_eq!(code, Some(1), "{v}");
    let lost = v["unrecoverable"].as_array().unwrap();
    assert!(!lost.is_empty());
    let lo = lost[0]["logical_offset"].as_u64().unwrap();
    assert_eq!(lost[0]["length"], 4096);
    assert!(lost[0]["reason"].as_str().unwrap().contains("redundancy"));
    let out = raidforge(
        &d.0,
        &[
            "io",
            "read",
            "p.json",
            "--offset",
            &lo.to_string(),
            "--length",
            "4096",
            "--output",
            "out.bin",
        ],
    );
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&format!("{lo}..{}", lo + 4096)), "{err}");
    let status = ok(&d.0, &["status", "p.json"]);
    assert!(status.contains("LOST"), "{status}");
}

#[test]
fn without_checksums_scrub_reports_parity_and_rewrites_it_on_request() {
    let d = TempDir::new("scrub", "parity");
    create(&d.0, "off");
    fill(&d.0);
    flip(&d.0, "m1.img", (1 << 20) + 16384 + 5);
    let (code, v) = scrub_json(&d.0);
    assert_eq!(code, Some(1), "{v}");
    assert_eq!(v["checksums"], false);
    let pm = v["parity_mismatches"].as_array().unwrap();
    assert_eq!(pm.len(), 1);
    assert_eq!(pm[0]["repaired"], false);
    let out = raidforge(&d.0, &["scrub", "p.json", "--rewrite-parity", "--json"]);
    assert_eq!(out.status.code(), Some(0));
    let (code, v) = scrub_json(&d.0);
    assert_eq!(code, Some(0), "{v}");
    ok(&d.0, &["verify", "p.json"]);
}
