//! IDO from the command line: `create --surrogate --zone-size`, zone popularity in `status
//! --json`, `rebuild --policy ido` of a pool no server has (hot zones first, reclaimed, every
//! byte back), the old `--policy sequential` spelling, and the errors.

use std::path::Path;

use serde_json::Value;

mod common;

use common::{ok, raidforge, TempDir};

fn status(dir: &Path, pool: &str) -> Value {
    serde_json::from_str(&ok(dir, &["status", pool, "--json"])).unwrap()
}

fn create(dir: &Path, pool: &str, scheme: &str, n: usize, size: &str, extra: &[&str]) {
    let mut args: Vec<String> = vec![
        "create".into(),
        pool.into(),
        "--scheme".into(),
        scheme.into(),
        "--disks".into(),
        n.to_string(),
        "--size".into(),
        size.into(),
        "--chunk".into(),
        "16K".into(),
    ];
    let stem = pool.trim_end_matches(".json");
    for i in 0..n {
        args.push("--member".into());
        args.push(format!("{stem}{i}.img"));
    }
    args.extend(extra.iter().map(|s| s.to_string()));
    let a: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
    ok(dir, &a);
}

fn refused(dir: &Path, args: &[&str], words: &[&str]) {
    let out = raidforge(dir, args);
    assert_eq!(out.status.code(), Some(2), "{args:?} should fail");
    let err = String::from_utf8_lossy(&out.stderr);
    for w in words {
        assert!(err.contains(w), "{args:?}: '{w}' not in: {err}");
    }
}

#[test]
fn create_with_surrogate_rebuild_with_ido_and_read_back() {
    let t = TempDir::new("cli-ido", "ido");
    let dir = t.path();
    create(dir, "s.json", "raid1", 2, "4M", &[]);
    create(
        dir,
        "p.json",
        "raid5",
        4,
        "5M",
        &["--surrogate", "s.json", "--zone-size", "384K"],
    );
    let st = status(dir, "p.json");
    assert_eq!(st["ido"]["zone_bytes"], 384 << 10);
    assert_eq!(st["ido"]["zones_total"], 32);
    assert_eq!(st["ido"]["phase"], "normal");
    assert!(st["ido"]["surrogate"].as_str().unwrap().ends_with("s.json"));

    // Writes to zone 5, many times: it becomes the hottest zone, and that is recorded.
    let data: Vec<u8> = (0..64 << 10).map(|i| (i * 7 % 251) as u8).collect();
    std::fs::write(dir.join("d.bin"), &data).unwrap();
    let at = ((5 * 384) << 10).to_string();
    for _ in 0..4 {
        ok(
            dir,
            &["io", "write", "p.json", "--offset", &at, "--input", "d.bin"],
        );
    }
    let st = status(dir, "p.json");
    assert_eq!(st["ido"]["popular"][0][0], 5, "{}", st["ido"]);

    ok(dir, &["fail", "p.json", "--member", "1"]);
    ok(
        dir,
        &["replace", "p.json", "--member", "1", "--with", "new1.img"],
    );
    refused(
        dir,
        &["rebuild", "p.json", "--policy", "fast"],
        &["unknown rebuild policy", "pr, pro, workout, vdf or ido"],
    );
    let out = ok(dir, &["rebuild", "p.json", "--policy", "ido", "--json"]);
    let last: Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();
    assert_eq!(last["done"], true);
    assert_eq!(last["state"], "clean");
    assert_eq!(last["ido"]["hot_zones"][0], 5, "{}", last["ido"]);
    assert_eq!(last["ido"]["rebuilt_order"][0], 5, "{}", last["ido"]);
    assert_eq!(last["ido"]["phase"], "normal");
    assert_eq!(last["ido"]["dmap_entries"], 0);
    ok(dir, &["verify", "p.json"]);
    ok(
        dir,
        &[
            "io", "read", "p.json", "--offset", &at, "--length", "64K", "--output", "back.bin",
        ],
    );
    assert!(std::fs::read(dir.join("back.bin")).unwrap() == data);
}

#[test]
fn old_policy_spelling_and_missing_surrogate() {
    let t = TempDir::new("cli-ido", "errors");
    let dir = t.path();
    create(dir, "p.json", "raid5", 4, "3M", &[]);
    ok(dir, &["fail", "p.json", "--member", "0"]);
    ok(
        dir,
        &["replace", "p.json", "--member", "0", "--with", "new0.img"],
    );
    refused(
        dir,
        &["rebuild", "p.json", "--policy", "ido"],
        &["surrogate", "--surrogate POOL"],
    );
    refused(
        dir,
        &[
            "create",
            "q.json",
            "--scheme",
            "raid1",
            "--disks",
            "2",
            "--member",
            "q0.img",
            "--member",
            "q1.img",
            "--size",
            "2M",
            "--surrogate",
            "nothere.json",
        ],
        &["nothere.json", "create it first"],
    );
    // The schedule's old name still works (with a note), and so does --order.
    let out = raidforge(dir, &["rebuild", "p.json", "--policy", "sequential"]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--order sequential"));
    assert_eq!(status(dir, "p.json")["state"], "clean");
    ok(dir, &["rebuild", "p.json", "--order", "parallel"]);
}
