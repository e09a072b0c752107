//! Pool commands as a user and a script see them: the real binary in a temporary directory,
//! its JSON, its exit codes and its one-line errors. Every refused command is checked to have
//! left every file of the pool (members and descriptor) byte-for-byte as it was, and the pool
//! to still read back what was written.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

mod common;

use common::{
    assert_untouched, create_small, json, ok, pattern, read, refused, snapshot, status, write,
    TempDir,
};

/// The volume as the test wrote it: (offset, bytes) pairs, later ones win.
struct Written(Vec<(u64, Vec<u8>)>);

impl Written {
    fn write(&mut self, dir: &Path, pool: &str, offset: u64, data: Vec<u8>) {
        write(dir, pool, offset, &data);
        self.0.push((offset, data));
    }

    /// Reads the span of everything written (one `io read`) and compares.
    fn check(&self, dir: &Path, pool: &str) {
        let start = self.0.iter().map(|(o, _)| *o).min().unwrap();
        let end = self
            .0
            .iter()
            .map(|(o, d)| o + d.len() as u64)
            .max()
            .unwrap();
        let mut want = vec![0u8; (end - start) as usize];
        for (o, d) in &self.0 {
            let at = (o - start) as usize;
            want[at..at + d.len()].copy_from_slice(d);
        }
        let got = read(dir, pool, start, end - start);
        assert!(
            got == want,
            "{pool}: read back differs from what was written"
        );
    }
}

/// `create POOL LAYOUT... --member PREFIX0.img ... --size 4M --chunk 16K --json`: the status
/// it prints.
fn create(dir: &Path, pool: &str, prefix: &str, layout: &[&str], n: usize) -> Value {
    let out = create_small(dir, pool, layout, prefix, n, &["--json"]);
    serde_json::from_str(&out)
        .unwrap_or_else(|e| panic!("create {pool} --json: not JSON ({e}): {out}"))
}

fn member_states(st: &Value) -> Vec<String> {
    st["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["state"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn create_io_fail_replace_rebuild_verify() {
    let t = TempDir::new("cli-pool", "lifecycle");
    let dir = t.path();
    let created = create(
        dir,
        "p.json",
        "m",
        &["--scheme", "raid5", "--disks", "4"],
        4,
    );
    let st = status(dir, "p.json");
    for s in [&created, &st] {
        assert_eq!(s["state"], "clean");
        assert_eq!(s["scheme"], "raid5");
        assert_eq!(s["chunk_bytes"], 16384);
        // 4 MiB members, 1 MiB of metadata, 3 of 4 members' data.
        assert_eq!(s["size_bytes"], 3 * 3 * (1 << 20));
        let members = s["members"].as_array().unwrap();
        assert_eq!(members.len(), 4);
        for (i, m) in members.iter().enumerate() {
            assert_eq!(m["index"], i);
            assert_eq!(m["state"], "active");
            assert_eq!(m["data_offset_bytes"], 1 << 20);
            assert!(m["read_bytes"].is_u64() && m["write_bytes"].is_u64());
            let path = PathBuf::from(m["path"].as_str().unwrap());
            assert_eq!(
                std::fs::canonicalize(&path).unwrap(),
                std::fs::canonicalize(dir.join(format!("m{i}.img"))).unwrap()
            );
            assert_eq!(std::fs::metadata(&path).unwrap().len(), 4 << 20);
        }
    }
    // A round trip, unaligned and spanning chunks and stripes.
    let mut w = Written(Vec::new());
    w.write(dir, "p.json", 5000, pattern(1, 300_000));
    w.check(dir, "p.json");
    let cap = st["size_bytes"].as_u64().unwrap();
    w.write(dir, "p.json", cap - 70_000, pattern(2, 70_000));
    w.check(dir, "p.json");
    assert_eq!(read(dir, "p.json", 400_000, 1000), vec![0u8; 1000]);
    let st = status(dir, "p.json");
    let written: u64 = st["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["write_bytes"].as_u64().unwrap())
        .sum();
    assert!(written >= 370_000 * 4 / 3, "write counters: {written}");

    // A failure: degraded reads and writes.
    let st = json(dir, &["fail", "p.json", "--member", "1", "--json"]);
    assert_eq!(st["state"], "degraded");
    let st = status(dir, "p.json");
    assert_eq!(st["state"], "degraded");
    assert_eq!(member_states(&st), ["active", "failed", "active", "active"]);
    w.check(dir, "p.json");
    w.write(dir, "p.json", 123_457, pattern(3, 100_000));
    w.check(dir, "p.json");
    // RAID5 rebuilds in place: a replacement comes first.
    let before = snapshot(dir);
    refused(dir, &["rebuild", "p.json"], &["member 1", "replace"]);
    assert_untouched(&before, dir, "rebuild before replace");

    let st = json(
        dir,
        &[
            "replace", "p.json", "--member", "1", "--with", "new1.img", "--json",
        ],
    );
    assert_eq!(st["state"], "rebuilding");
    assert_eq!(
        member_states(&st),
        ["active", "rebuilding", "active", "active"]
    );
    assert_eq!(
        std::fs::metadata(dir.join("new1.img")).unwrap().len(),
        4 << 20
    );
    let out = ok(dir, &["rebuild", "p.json", "--json"]);
    let lines: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert!(lines.len() >= 2, "progress lines then a summary: {out}");
    let (last, progress) = lines.split_last().unwrap();
    assert_eq!(last["done"], true);
    assert_eq!(last["state"], "clean");
    assert!(last["bytes_written"].as_u64().unwrap() >= 3 << 20);
    let mut prev = 0;
    for p in progress {
        let done = p["cycles_done"].as_u64().unwrap();
        assert!(done >= prev && done <= p["cycles_total"].as_u64().unwrap());
        prev = done;
    }
    assert_eq!(prev, progress[0]["cycles_total"].as_u64().unwrap());
    let st = status(dir, "p.json");
    assert_eq!(st["state"], "clean");
    assert_eq!(member_states(&st), ["active"; 4]);
    assert!(st["members"][1]["write_bytes"].as_u64().unwrap() >= 3 << 20);
    assert!(st["members"][1]["path"]
        .as_str()
        .unwrap()
        .ends_with("new1.img"));
    ok(dir, &["verify", "p.json"]);
    let v = json(dir, &["verify", "p.json", "--json"]);
    assert_eq!(v["inconsistent"], Value::Array(vec![]));
    assert!(v["stripes_checked"].as_u64().unwrap() > 0);
    w.check(dir, "p.json");
    // The human-readable status names the pool state and the members.
    let text = ok(dir, &["status", "p.json"]);
    assert!(text.contains("clean") && text.contains("raid5") && text.contains("new1.img"));
}

#[test]
fn assemble_from_members_in_any_order() {
    let t = TempDir::new("cli-pool", "assemble");
    let dir = t.path();
    create(
        dir,
        "p.json",
        "m",
        &["--scheme", "raidplus", "--disks", "5", "--width", "3"],
        5,
    );
    let mut w = Written(Vec::new());
    w.write(dir, "p.json", 777, pattern(4, 200_000));
    let before = status(dir, "p.json");
    std::fs::remove_file(dir.join("p.json")).unwrap();
    refused(dir, &["status", "p.json"], &["p.json", "assemble"]);
    let st = json(
        dir,
        &[
            "assemble",
            "again.json",
            "--member",
            "m3.img",
            "--member",
            "m0.img",
            "--member",
            "m4.img",
            "--member",
            "m2.img",
            "--member",
            "m1.img",
            "--json",
        ],
    );
    for s in [&st, &status(dir, "again.json")] {
        assert_eq!(s["state"], "clean");
        assert_eq!(s["scheme"], "raidplus");
        assert_eq!(s["uuid"], before["uuid"]);
        assert_eq!(s["size_bytes"], before["size_bytes"]);
        assert_eq!(s["chunk_bytes"], before["chunk_bytes"]);
        for (i, m) in s["members"].as_array().unwrap().iter().enumerate() {
            assert_eq!(m["path"], before["members"][i]["path"], "member {i}");
        }
    }
    w.check(dir, "again.json");
    ok(dir, &["verify", "again.json"]);
    // Assembling onto an existing descriptor path rewrites it.
    ok(
        dir,
        &[
            "assemble",
            "again.json",
            "--member",
            "m1.img",
            "--member",
            "m0.img",
            "--member",
            "m2.img",
            "--member",
            "m4.img",
            "--member",
            "m3.img",
        ],
    );
    w.check(dir, "again.json");
}

#[test]
fn missing_member_assembles_degraded_and_rebuilds() {
    let t = TempDir::new("cli-pool", "missing");
    let dir = t.path();
    create(
        dir,
        "p.json",
        "m",
        &["--scheme", "raid6", "--disks", "5"],
        5,
    );
    let mut w = Written(Vec::new());
    w.write(dir, "p.json", 10_000, pattern(5, 250_000));
    std::fs::rename(dir.join("m2.img"), dir.join("away.bin")).unwrap();
    let st = json(
        dir,
        &[
            "assemble", "q.json", "--member", "m4.img", "--member", "m1.img", "--member", "m0.img",
            "--member", "m3.img", "--json",
        ],
    );
    assert_eq!(st["state"], "degraded");
    assert_eq!(
        member_states(&st),
        ["active", "active", "failed", "active", "active"]
    );
    w.check(dir, "q.json");
    // The old descriptor, whose member 2 is gone, opens degraded too.
    let st = status(dir, "p.json");
    assert_eq!(st["state"], "degraded");
    assert_eq!(st["members"][2]["state"], "failed");
    w.write(dir, "q.json", 3_000_000, pattern(6, 50_000));
    ok(
        dir,
        &["replace", "q.json", "--member", "2", "--with", "m2-new.img"],
    );
    ok(dir, &["rebuild", "q.json"]);
    assert_eq!(status(dir, "q.json")["state"], "clean");
    ok(dir, &["verify", "q.json"]);
    w.check(dir, "q.json");
    // The member that came back is stale: it was failed and replaced, and missed every
    // update since. Assembled with it, the pool leaves it out (as mdadm kicks a non-fresh
    // member), says why, and reads what was written since, none of its stale bytes.
    std::fs::rename(dir.join("away.bin"), dir.join("m2.img")).unwrap();
    let st = json(
        dir,
        &[
            "assemble", "r.json", "--member", "m0.img", "--member", "m1.img", "--member", "m2.img",
            "--member", "m3.img", "--member", "m4.img", "--json",
        ],
    );
    assert_eq!(st["state"], "degraded");
    assert_eq!(
        member_states(&st),
        ["active", "active", "failed", "active", "active"]
    );
    let why = st["members"][2]["failed_why"].as_str().unwrap();
    assert!(why.starts_with("stale when the pool was opened"), "{why}");
    w.check(dir, "r.json");
    // The failure is recorded: `status` keeps listing it with why.
    let st = status(dir, "r.json");
    assert_eq!(st["members"][2]["failed_why"].as_str(), Some(why));
}

/// A member stale by generations (it silently lost its writes while the pool went on) is
/// left out when the pool is opened, and the command says so on stderr.
#[test]
fn a_stale_member_is_left_out_and_told() {
    let t = TempDir::new("cli-pool", "stale");
    let dir = t.path();
    create(
        dir,
        "p.json",
        "m",
        &["--scheme", "raid6", "--disks", "5"],
        5,
    );
    let mut w = Written(Vec::new());
    w.write(dir, "p.json", 0, pattern(7, 300_000));
    let old = std::fs::read(dir.join("m3.img")).unwrap();
    for k in 0..3 {
        w.write(dir, "p.json", 50_000 * k, pattern(8 + k, 200_000));
    }
    std::fs::write(dir.join("m3.img"), old).unwrap();
    let out = common::command()
        .current_dir(dir)
        .args(["io", "read", "p.json", "--offset", "0", "--length", "4096"])
        .args(["--output", "o.bin"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("member 3 is left out (stale when the pool was opened"),
        "{err}"
    );
    let st = status(dir, "p.json");
    assert_eq!(st["state"], "degraded");
    assert_eq!(st["members"][3]["state"], "failed");
    w.check(dir, "p.json");
}

/// `raidforge assemble` over members one of which is stale by generations: the pool is
/// assembled degraded without it, and stderr says so in one line naming the member (and only
/// for it).
#[test]
fn assemble_warns_of_each_member_left_out_as_stale() {
    let t = TempDir::new("cli-pool", "asm-stale");
    let dir = t.path();
    create(
        dir,
        "p.json",
        "m",
        &["--scheme", "raid6", "--disks", "5"],
        5,
    );
    let mut w = Written(Vec::new());
    w.write(dir, "p.json", 0, pattern(7, 300_000));
    let old = std::fs::read(dir.join("m3.img")).unwrap();
    for k in 0..3 {
        w.write(dir, "p.json", 50_000 * k, pattern(8 + k, 200_000));
    }
    std::fs::write(dir.join("m3.img"), old).unwrap();
    let mut args = vec!["assemble".to_string(), "r.json".to_string()];
    for i in 0..5 {
        args.extend(["--member".to_string(), format!("m{i}.img")]);
    }
    args.push("--json".into());
    let out = common::raidforge(dir, &args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let warnings: Vec<&str> = err.lines().filter(|l| l.contains("warning")).collect();
    assert_eq!(warnings.len(), 1, "{err}");
    assert!(
        warnings[0].starts_with("raidforge: warning: member 3 (")
            && warnings[0].contains("m3.img) is left out: stale when the pool was opened"),
        "{err}"
    );
    let st: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(st["state"], "degraded");
    assert_eq!(member_states(&st)[3], "failed");
    assert!(st["members"][3]["failed_why"]
        .as_str()
        .unwrap()
        .starts_with("stale when the pool was opened"));
    w.check(dir, "r.json");
    // Assembled again: member 3 is still left out and said so; no other member is.
    let out = common::raidforge(dir, &args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert_eq!(
        err.lines().filter(|l| l.contains("warning")).count(),
        1,
        "{err}"
    );
}

#[test]
fn bad_input_is_refused_with_one_line_and_no_data_touched() {
    let t = TempDir::new("cli-pool", "bad");
    let dir = t.path();
    create(
        dir,
        "p.json",
        "m",
        &["--scheme", "raid5", "--disks", "4"],
        4,
    );
    create(
        dir,
        "q.json",
        "q",
        &["--scheme", "raid5", "--disks", "4"],
        4,
    );
    let mut w = Written(Vec::new());
    w.write(dir, "p.json", 4096, pattern(7, 400_000));
    Written(Vec::new()).write(dir, "q.json", 0, pattern(8, 10_000));
    let cap = status(dir, "p.json")["size_bytes"].as_u64().unwrap();

    // Each case: a refused command, every file unchanged, the pool still reads back.
    let case = |what: &str, args: &[&str], needles: &[&str]| {
        let before = snapshot(dir);
        let line = refused(dir, args, needles);
        assert_untouched(&before, dir, what);
        w.check(dir, "p.json");
        line
    };

    // A damaged superblock: flip one byte in both copies of member 2's superblock (at 0 and
    // at 260 KiB; one damaged copy alone is survived, see below).
    let m2 = dir.join("m2.img");
    for at in [0usize, 100, 4000] {
        let orig = std::fs::read(&m2).unwrap();
        let mut b = orig.clone();
        for slot in raidcore::superblock::SUPERBLOCK_SLOTS {
            b[slot as usize + at] ^= 0x40;
        }
        std::fs::write(&m2, &b).unwrap();
        for args in [
            &["status", "p.json"][..],
            &[
                "io", "read", "p.json", "--offset", "0", "--length", "10", "--output", "o.bin",
            ],
            &["verify", "p.json"],
            &["fail", "p.json", "--member", "1"],
            &[
                "assemble", "r.json", "--member", "m0.img", "--member", "m1.img", "--member",
                "m2.img", "--member", "m3.img",
            ],
        ] {
            let before = snapshot(dir);
            refused(dir, args, &["m2.img"]);
            assert_untouched(&before, dir, "damaged superblock");
        }
        std::fs::write(&m2, &orig).unwrap();
        w.check(dir, "p.json");
    }

    // Members of two pools in one assemble.
    case(
        "mixed pools",
        &[
            "assemble", "r.json", "--member", "m0.img", "--member", "q1.img", "--member", "m2.img",
            "--member", "m3.img",
        ],
        &["two pools"],
    );
    // The same member twice.
    case(
        "duplicate member",
        &[
            "assemble", "r.json", "--member", "m0.img", "--member", "m1.img", "--member", "m1.img",
            "--member", "m3.img",
        ],
        &["member 1"],
    );
    // A descriptor naming another pool's member.
    let desc = std::fs::read_to_string(dir.join("p.json")).unwrap();
    let foreign = desc.replace("m2.img", "q2.img");
    assert_ne!(foreign, desc);
    std::fs::write(dir.join("p.json"), &foreign).unwrap();
    case_raw(dir, "foreign member", &["status", "p.json"], &["q2.img"]);
    std::fs::write(dir.join("p.json"), &desc).unwrap();
    // A descriptor that is not one.
    std::fs::write(dir.join("junk.json"), b"{\"hello\": 1}").unwrap();
    case("bad descriptor", &["status", "junk.json"], &["junk.json"]);
    std::fs::remove_file(dir.join("junk.json")).unwrap();

    // Create: unknown scheme, too small, members of another pool, an existing descriptor.
    let new_members = [
        "--member", "n0.img", "--member", "n1.img", "--member", "n2.img", "--member", "n3.img",
    ];
    let mut args = vec![
        "create", "n.json", "--scheme", "raid7", "--disks", "4", "--size", "4M",
    ];
    args.extend_from_slice(&new_members);
    case("unknown scheme", &args, &["raid7"]);
    for size in ["512K", "1M", "1100K"] {
        let mut args = vec![
            "create", "n.json", "--scheme", "raid5", "--disks", "4", "--size", size,
        ];
        args.extend_from_slice(&new_members);
        case("size too small", &args, &["too small"]);
    }
    case(
        "create over another pool",
        &[
            "create", "n.json", "--scheme", "raid5", "--disks", "4", "--size", "4M", "--member",
            "n0.img", "--member", "n1.img", "--member", "m2.img", "--member", "n3.img",
        ],
        &["m2.img", "already"],
    );
    case(
        "create over a descriptor",
        &[
            "create", "q.json", "--scheme", "raid5", "--disks", "4", "--size", "4M", "--member",
            "n0.img", "--member", "n1.img", "--member", "n2.img", "--member", "n3.img",
        ],
        &["q.json"],
    );
    case(
        "the same member twice",
        &[
            "create", "n.json", "--scheme", "raid5", "--disks", "4", "--size", "4M", "--member",
            "n0.img", "--member", "n1.img", "--member", "./n0.img", "--member", "n3.img",
        ],
        &["n0.img", "twice"],
    );
    case(
        "a member in a directory that does not exist",
        &[
            "create",
            "n.json",
            "--scheme",
            "raid5",
            "--disks",
            "4",
            "--size",
            "4M",
            "--member",
            "n0.img",
            "--member",
            "n1.img",
            "--member",
            "nowhere/n2.img",
            "--member",
            "n3.img",
        ],
        &["nowhere"],
    );
    case(
        "a bad emulated speed",
        &[
            "create",
            "n.json",
            "--scheme",
            "raid5",
            "--disks",
            "4",
            "--size",
            "4M",
            "--member",
            "n0.img",
            "--member",
            "n1.img",
            "--member",
            "n2.img",
            "--member",
            "n3.img",
            "--emulate",
            "hdd:fast:8ms",
        ],
        &["--emulate"],
    );
    case(
        "disks and members disagree",
        &[
            "create", "n.json", "--scheme", "raid5", "--disks", "5", "--size", "4M", "--member",
            "n0.img", "--member", "n1.img", "--member", "n2.img", "--member", "n3.img",
        ],
        &["--disks"],
    );

    // I/O beyond the end.
    std::fs::write(dir.join("in.bin"), pattern(9, 1000)).unwrap();
    let end = cap.to_string();
    let near = (cap - 999).to_string();
    case(
        "write past the end",
        &[
            "io", "write", "p.json", "--offset", &near, "--input", "in.bin",
        ],
        &["beyond the end"],
    );
    case(
        "write at the end",
        &[
            "io", "write", "p.json", "--offset", &end, "--input", "in.bin",
        ],
        &["beyond the end"],
    );
    case(
        "read past the end",
        &[
            "io", "read", "p.json", "--offset", &near, "--length", "1000", "--output", "o.bin",
        ],
        &["beyond the end"],
    );
    case(
        "read far past the end",
        &[
            "io",
            "read",
            "p.json",
            "--offset",
            "18446744073709551615",
            "--length",
            "2",
            "--output",
            "o.bin",
        ],
        &["beyond the end"],
    );

    // Membership changes that make no sense.
    case(
        "replace a healthy member",
        &["replace", "p.json", "--member", "2", "--with", "new.img"],
        &["member 2", "not failed"],
    );
    case(
        "fail a member that does not exist",
        &["fail", "p.json", "--member", "4"],
        &["member 4", "does not exist"],
    );
    case(
        "replace a member that does not exist",
        &["replace", "p.json", "--member", "9", "--with", "new.img"],
        &["member 9"],
    );
    std::fs::remove_file(dir.join("in.bin")).unwrap();

    // After a real failure: replacing with another pool's member or a live member of this pool
    // is refused, and so is failing the same member twice.
    ok(dir, &["fail", "p.json", "--member", "3"]);
    case(
        "fail twice",
        &["fail", "p.json", "--member", "3"],
        &["member 3", "already"],
    );
    case(
        "replace with another pool's member",
        &["replace", "p.json", "--member", "3", "--with", "q0.img"],
        &["q0.img"],
    );
    case(
        "replace with a live member",
        &["replace", "p.json", "--member", "3", "--with", "m1.img"],
        &["m1.img"],
    );
    // A failed member whose superblock is gone does not keep the pool from opening; the
    // stale file cannot come back as its own replacement without being wiped.
    let mut m3 = std::fs::read(dir.join("m3.img")).unwrap();
    m3[..4096].fill(0xA5);
    std::fs::write(dir.join("m3.img"), &m3).unwrap();
    let st = status(dir, "p.json");
    assert_eq!(st["state"], "degraded");
    assert_eq!(st["members"][3]["state"], "failed");
    w.check(dir, "p.json");
    ok(
        dir,
        &["replace", "p.json", "--member", "3", "--with", "m3-new.img"],
    );
    ok(dir, &["rebuild", "p.json"]);
    ok(dir, &["verify", "p.json"]);
    assert_eq!(status(dir, "p.json")["state"], "clean");
    w.check(dir, "p.json");
    // The other pool never noticed any of this.
    let q = status(dir, "q.json");
    assert_eq!(q["state"], "clean");
    assert_eq!(read(dir, "q.json", 0, 10_000), pattern(8, 10_000));
}

/// A refused command, every file unchanged (for cases where the pool cannot be read back
/// until the test undoes the damage).
fn case_raw(dir: &Path, what: &str, args: &[&str], needles: &[&str]) {
    let before = snapshot(dir);
    refused(dir, args, needles);
    assert_untouched(&before, dir, what);
}

/// A pool in use by one command is refused to another (which would plan against a state the
/// first is changing), while `status` still shows the progress.
#[test]
fn a_pool_in_use_is_refused_to_other_commands() {
    use std::io::BufRead;
    let t = TempDir::new("cli-pool", "in-use");
    let dir = t.path();
    let mut args = vec!["create", "p.json", "--scheme", "raid5", "--disks", "4"];
    args.extend_from_slice(&["--member", "m0.img", "--member", "m1.img"]);
    args.extend_from_slice(&["--member", "m2.img", "--member", "m3.img"]);
    args.extend_from_slice(&["--size", "6M", "--chunk", "16K"]);
    ok(dir, &args);
    let mut w = Written(Vec::new());
    w.write(dir, "p.json", 0, pattern(10, 1 << 20));
    ok(dir, &["fail", "p.json", "--member", "2"]);
    ok(
        dir,
        &["replace", "p.json", "--member", "2", "--with", "n2.img"],
    );
    // A slow rebuild (5 MiB at 2 MB/s) in the background.
    let mut child = Command::new(env!("CARGO_BIN_EXE_raidforge"))
        .args([
            "rebuild",
            "p.json",
            "--json",
            "--speed-max",
            "2M",
            "--parallel",
            "1",
        ])
        .current_dir(dir)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let first: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    assert!(first["cycles_done"].as_u64().unwrap() < first["cycles_total"].as_u64().unwrap());
    // The rebuild has the pool now.
    std::fs::write(dir.join("in.bin"), [7u8; 100]).unwrap();
    for args in [
        &[
            "io", "write", "p.json", "--offset", "0", "--input", "in.bin",
        ][..],
        &[
            "io", "read", "p.json", "--offset", "0", "--length", "10", "--output", "o.bin",
        ],
        &["fail", "p.json", "--member", "1"],
        &["verify", "p.json"],
        &["rebuild", "p.json"],
        &[
            "assemble", "q.json", "--member", "m0.img", "--member", "m1.img", "--member", "n2.img",
            "--member", "m3.img",
        ],
    ] {
        refused(dir, args, &["in use"]);
    }
    let st = status(dir, "p.json");
    assert_eq!(st["state"], "rebuilding");
    assert_eq!(st["members"][2]["state"], "rebuilding");
    let last: Value = serde_json::from_str(&lines.last().unwrap().unwrap()).unwrap();
    assert!(child.wait().unwrap().success());
    assert_eq!(last["done"], true);
    assert_eq!(status(dir, "p.json")["state"], "clean");
    ok(dir, &["verify", "p.json"]);
    w.check(dir, "p.json");
    assert!(!dir.join("o.bin").exists() && !dir.join("q.json").exists());
}
