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
    assert_eq!(st["after_crash"], "journal-replay");
    assert!(st.get("intent_regions_marked").is_none(), "{st}");
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

/// A pool in Linux MD's format (`--metadata md`) has neither a journal nor raidforge's
/// write-intent bitmap, and its status says so (text and JSON), with what a crash leads to
/// instead: a pool written and not closed is left dirty on its members, and the next
/// assembly resynchronises the whole array, from sector 0. RAID0 has nothing to
/// resynchronise. raidforge's own format keeps its bitmap line.
#[test]
fn wh_md_pool_status_says_what_md_does() {
    let tmp = TempDir::new("cli-wh", "md");
    let dir = tmp.path();
    let members = common::members("m", 4);
    let md = ["--scheme", "raid5", "--metadata", "md", "--size", "8M"];
    let created = common::create(dir, "p.json", &md, &members, &[]);
    for text in [created, ok(dir, &["status", "p.json"])] {
        assert!(
            text.contains("write hole: no journal and no write-intent bitmap (Linux MD's format)")
                && text.contains("resynchronises the whole array"),
            "{text}"
        );
        assert!(
            !text.contains("regions marked") && !text.contains("--write-hole journal"),
            "{text}"
        );
    }
    let st = common::status(dir, "p.json");
    assert!(
        st["metadata"].as_str().unwrap().starts_with("md 1.2 raid5"),
        "{st}"
    );
    assert_eq!(st["write_hole"], "none");
    assert_eq!(st["after_crash"], "resync-whole");
    assert!(st.get("intent_regions_marked").is_none(), "{st}");

    // What the status says, done: written and never closed (a crash, as far as the members
    // know), the superblocks say dirty from sector 0, and assembling the members
    // resynchronises the array from there.
    let mut pool = dev::pool::Pool::open(&dir.join("p.json")).unwrap();
    pool.write(0, &common::pattern(3, 256 << 10)).unwrap();
    drop(pool);
    let sb = |m: &str| {
        let b = std::fs::read(dir.join(m)).unwrap();
        raidcore::md::MdSuperblock::decode(&b[4096..8192]).unwrap()
    };
    assert_eq!(sb("m0.img").resync_offset, 0, "dirty after the crash");
    let mut args = vec!["assemble".to_string(), "q.json".to_string()];
    for m in &members {
        args.extend(["--member".to_string(), m.clone()]);
    }
    let out = raidforge(dir, &args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("parity resynchronised from array sector 0 "),
        "{err}"
    );
    assert!(sb("m0.img").is_clean());

    // RAID0 in MD's format: nothing to resynchronise.
    let r0 = ["--scheme", "raid0", "--metadata", "md", "--size", "8M"];
    common::create(dir, "r0.json", &r0, &common::members("z", 2), &[]);
    let text = ok(dir, &["status", "r0.json"]);
    assert!(
        text.contains("write hole: none (RAID0 has no parity or copies)"),
        "{text}"
    );
    assert_eq!(common::status(dir, "r0.json")["after_crash"], "none");

    // raidforge's own format: its bitmap, and the resync of what it marked.
    let own = ["--scheme", "raid5", "--disks", "4"];
    common::create_small(dir, "own.json", &own, "o", 4, &[]);
    let st = common::status(dir, "own.json");
    assert_eq!(st["after_crash"], "resync-marked");
    assert_eq!(st["intent_regions_marked"], 0);
}
