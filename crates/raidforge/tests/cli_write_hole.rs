//! `raidforge create --write-hole journal` as a user sees it: the status (text and JSON) names
//! the protection, the data area moves past the journal, I/O round-trips, and bad values are
//! refused with a one-line error saying what to do.

use serde_json::Value;

mod common;

use common::{ok, raidforge, small_pool_args, TempDir};

/// `create POOL --scheme raid5 --disks 4 --member m0.img ... --size 4M --chunk 16K EXTRA...`.
fn create_args(pool: &str, extra: &[&str]) -> Vec<String> {
    small_pool_args(pool, &["--scheme", "raid5", "--disks", "4"], "m", 4, extra)
}

#[test]
fn wh_journal_pool_status_and_io() {
    let tmp = TempDir::new("cli-wh", "journal");
    let dir = tmp.path();
    let created: Value = serde_json::from_str(&ok(
        dir,
        &create_args(
            "p.json",
            &["--write-hole", "journal", "--journal-size", "1M", "--json"],
        ),
    ))
    .unwrap();
    assert_eq!(created["write_hole"], "journal");
    let j = &created["journal"];
    assert_eq!(j["region_bytes"], 1 << 20);
    assert_eq!(j["copies"], 2);
    // 1 MiB of metadata, 1 MiB of journal, then the data: 2 of 4 MiB per member.
    assert_eq!(created["members"][0]["data_offset_bytes"], 2 << 20);
    assert_eq!(created["size_bytes"], 3 * (2 << 20));
    let data: Vec<u8> = (0..300_000u32).map(|i| (i * 7 + i / 1000) as u8).collect();
    std::fs::write(dir.join("in.bin"), &data).unwrap();
    ok(
        dir,
        &[
            "io", "write", "p.json", "--offset", "5000", "--input", "in.bin",
        ],
    );
    ok(
        dir,
        &[
            "io", "read", "p.json", "--offset", "5000", "--length", "300000", "--output", "out.bin",
        ],
    );
    assert_eq!(std::fs::read(dir.join("out.bin")).unwrap(), data);
    ok(dir, &["verify", "p.json"]);
    let text = ok(dir, &["status", "p.json"]);
    assert!(text.contains("write hole: journal"), "{text}");
    let st: Value = serde_json::from_str(&ok(dir, &["status", "p.json", "--json"])).unwrap();
    assert_eq!(st["write_hole"], "journal");
    // Without a journal (the default) the status says what protects the pool instead: the
    // write-intent bitmap and the resync it leads to after a crash.
    let tmp2 = TempDir::new("cli-wh", "none");
    let text = ok(tmp2.path(), &create_args("q.json", &[]));
    assert!(
        text.contains("write hole: write-intent bitmap") && text.contains("resync"),
        "{text}"
    );
}

#[test]
fn wh_bad_values_are_refused() {
    let tmp = TempDir::new("cli-wh", "bad");
    let dir = tmp.path();
    for (extra, needle) in [
        (vec!["--write-hole", "ppl"], "journal"),
        (
            vec!["--write-hole", "journal", "--journal-size", "1000"],
            "multiple of 4096",
        ),
        (
            vec!["--write-hole", "journal", "--journal-size", "8M"],
            "too small",
        ),
    ] {
        let out = raidforge(dir, &create_args("p.json", &extra));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{extra:?}: {err}");
        assert!(err.contains(needle), "{extra:?}: {err}");
        assert!(!dir.join("p.json").exists(), "{extra:?} left a descriptor");
    }
}
