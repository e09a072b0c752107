//! The CLI never destroys without asking and tells the truth about redundancy (issue 22): the
//! real binary in a temporary directory. Every refusal is checked to have left every file as it
//! was, and every claim of `status` (how many more failures the pool survives) is checked
//! against what reading the bytes back after those failures gives.

use serde_json::Value;

mod common;

use common::{
    assert_untouched, create_small, json, ok, pattern, raidforge, read, refused, snapshot, status,
    write, TempDir,
};

/// RAID5 of 3 after `replace` and before `rebuild`: the replacement holds nothing yet, so the
/// pool survives no further failure. `status` says so, and `fail` of another member is refused
/// (in a sentence, touching nothing) unless --force; with --force the data is indeed lost.
#[test]
fn replaced_not_rebuilt_survives_nothing_and_fail_past_it_is_refused() {
    let t = TempDir::new("cli-safety", "replaced");
    let dir = t.path();
    create_small(
        dir,
        "p.json",
        &["--scheme", "raid5", "--disks", "3"],
        "m",
        3,
        &[],
    );
    let data = pattern(7, 300_000);
    write(dir, "p.json", 0, &data);
    assert_eq!(status(dir, "p.json")["fault_tolerance"], 1);
    // `m1`, as status labels members, is accepted wherever an index is.
    let st = json(dir, &["fail", "p.json", "--member", "m1", "--json"]);
    assert_eq!(st["fault_tolerance"], 0);
    let st = json(
        dir,
        &[
            "replace", "p.json", "--member", "m1", "--with", "n1.img", "--json",
        ],
    );
    assert_eq!(st["failed"], Value::Array(vec![]));
    assert_eq!(
        st["fault_tolerance"], 0,
        "a replaced, unrebuilt member holds nothing: {st}"
    );
    let text = ok(dir, &["status", "p.json"]);
    assert!(text.contains("survives 0 more failures"), "{text}");

    let before = snapshot(dir);
    let line = refused(
        dir,
        &["fail", "p.json", "--member", "0"],
        &["would lose data", "m1 replaced but not rebuilt", "--force"],
    );
    assert!(!line.contains('{'), "no internal structs: {line}");
    assert_untouched(&before, dir, "fail past the tolerance");
    assert_eq!(read(dir, "p.json", 0, data.len() as u64), data);

    // With --force it proceeds, and says in a sentence that data is lost.
    let out = raidforge(dir, &["fail", "p.json", "--member", "0", "--force"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("lost data") && !err.contains("FailOutcome"),
        "{err}"
    );
    assert_eq!(status(dir, "p.json")["state"], "failed");
}

/// RAID+ rebuilds into spare space without a replacement: afterwards it survives another
/// failure, `status` says so, and failing another member is accepted and loses no byte.
#[test]
fn rebuilt_into_spare_space_survives_another_failure() {
    let t = TempDir::new("cli-safety", "spare-space");
    let dir = t.path();
    create_small(
        dir,
        "p.json",
        &["--scheme", "raidplus", "--disks", "5", "--width", "3"],
        "m",
        5,
        &[],
    );
    let data = pattern(3, 1_000_000);
    write(dir, "p.json", 4096, &data);
    ok(dir, &["fail", "p.json", "--member", "1"]);
    assert_eq!(status(dir, "p.json")["fault_tolerance"], 0);
    ok(dir, &["rebuild", "p.json"]);
    let st = status(dir, "p.json");
    assert_eq!(st["failed"], serde_json::json!([1]));
    assert_eq!(st["fault_tolerance"], 1, "{st}");
    assert!(ok(dir, &["status", "p.json"]).contains("survives 1 more failure"));
    // Every other member, one at a time: no refusal, every byte reads back.
    for m in ["0", "2", "3", "4"] {
        let t2 = TempDir::new("cli-safety", &format!("spare-space-{m}"));
        for e in std::fs::read_dir(dir).unwrap() {
            let e = e.unwrap();
            std::fs::copy(e.path(), t2.path().join(e.file_name())).unwrap();
        }
        // The descriptor names members by absolute path: point it at the copies.
        let desc = std::fs::read_to_string(t2.path().join("p.json")).unwrap();
        let desc = desc.replace(dir.to_str().unwrap(), t2.path().to_str().unwrap());
        std::fs::write(t2.path().join("p.json"), desc).unwrap();
        ok(t2.path(), &["fail", "p.json", "--member", m]);
        assert_eq!(status(t2.path(), "p.json")["fault_tolerance"], 0);
        assert_eq!(
            read(t2.path(), "p.json", 4096, data.len() as u64),
            data,
            "member {m} failed after the rebuild into spare space"
        );
    }
}

/// `create` over files that are not raidforge members and hold data (a file system, or any
/// bytes) is refused, naming what is there, and touches nothing; blank files (sparse, as
/// `truncate` makes them) are taken; --force overwrites.
#[test]
fn create_refuses_files_holding_data_that_is_not_ours() {
    let t = TempDir::new("cli-safety", "foreign");
    let dir = t.path();
    std::fs::write(dir.join("m0.img"), pattern(1, 6 << 20)).unwrap();
    // An ext2/3/4 superblock's magic at byte 1080, the rest zeros.
    let mut ext = vec![0u8; 6 << 20];
    ext[1080] = 0x53;
    ext[1081] = 0xEF;
    std::fs::write(dir.join("m1.img"), &ext).unwrap();
    std::fs::File::create(dir.join("m2.img"))
        .unwrap()
        .set_len(6 << 20)
        .unwrap();
    let args = [
        "create", "p.json", "--scheme", "raid5", "--disks", "3", "--member", "m0.img", "--member",
        "m1.img", "--member", "m2.img", "--size", "4M",
    ];
    let before = snapshot(dir);
    refused(
        dir,
        &args,
        &["m0.img", "not a raidforge member", "holds data", "--force"],
    );
    assert_untouched(&before, dir, "create over a file of data");
    std::fs::write(dir.join("m0.img"), vec![0u8; 5 << 20]).unwrap();
    let before = snapshot(dir);
    refused(dir, &args, &["m1.img", "ext2/3/4 file system", "--force"]);
    assert_untouched(&before, dir, "create over a file system");
    let mut forced = args.to_vec();
    forced.push("--force");
    ok(dir, &forced);
    assert_eq!(
        std::fs::metadata(dir.join("m1.img")).unwrap().len(),
        4 << 20
    );
}

/// `replace` with a file that holds data is refused; with another pool's member it names
/// `raidforge wipe`, which erases it, after which the replacement is taken.
#[test]
fn replace_refuses_used_files_and_wipe_clears_a_members_metadata() {
    let t = TempDir::new("cli-safety", "wipe");
    let dir = t.path();
    create_small(
        dir,
        "p.json",
        &["--scheme", "raid5", "--disks", "3"],
        "m",
        3,
        &[],
    );
    ok(
        dir,
        &[
            "create", "q.json", "--scheme", "raid1", "--disks", "2", "--member", "q0.img",
            "--member", "q1.img", "--size", "4M",
        ],
    );
    write(dir, "q.json", 0, &pattern(9, 100_000));
    let data = pattern(5, 200_000);
    write(dir, "p.json", 0, &data);
    ok(dir, &["fail", "p.json", "--member", "2"]);
    std::fs::write(dir.join("junk.img"), pattern(2, 5 << 20)).unwrap();
    let before = snapshot(dir);
    refused(
        dir,
        &["replace", "p.json", "--member", "2", "--with", "junk.img"],
        &["junk.img", "holds data"],
    );
    refused(
        dir,
        &["replace", "p.json", "--member", "2", "--with", "q0.img"],
        &["raidforge superblock", "raidforge wipe q0.img"],
    );
    assert_untouched(&before, dir, "replace with used files");
    // Wiping something that is not a member is refused and writes nothing.
    refused(dir, &["wipe", "junk.img"], &["junk.img", "nothing to wipe"]);
    assert_untouched(&before, dir, "wipe of a non-member");
    let out = raidforge(dir, &["wipe", "q0.img"]);
    assert!(out.status.success(), "{:?}", out);
    assert!(String::from_utf8_lossy(&out.stderr).contains("wiped q0.img"));
    ok(
        dir,
        &["replace", "p.json", "--member", "m2", "--with", "q0.img"],
    );
    ok(dir, &["rebuild", "p.json"]);
    ok(dir, &["verify", "p.json"]);
    assert_eq!(read(dir, "p.json", 0, data.len() as u64), data);
}

/// A create that fails at its first write (a member size the file system cannot hold: here a
/// file size limit, `ulimit -f`, makes growing a member fail with EFBIG as a 16 TiB member on
/// ext4 does) leaves no member file behind, and says what to change.
#[test]
fn create_that_fails_leaves_nothing_behind() {
    use std::os::unix::process::CommandExt;
    let t = TempDir::new("cli-safety", "too-large");
    let dir = t.path();
    let before = snapshot(dir);
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_raidforge"));
    cmd.args([
        "create", "p.json", "--scheme", "raid5", "--disks", "3", "--member", "m0.img", "--member",
        "m1.img", "--member", "m2.img", "--size", "64M",
    ])
    .current_dir(dir)
    .env_remove("CI");
    // SAFETY: async-signal-safe calls only, in the child before exec.
    unsafe {
        cmd.pre_exec(|| {
            let lim = libc::rlimit {
                rlim_cur: 32 << 20,
                rlim_max: 32 << 20,
            };
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            if libc::setrlimit(libc::RLIMIT_FSIZE, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let out = cmd.output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.starts_with("raidforge: error: member 0 (m0.img): cannot be made")
            && err.contains("--member-size")
            && err.lines().count() == 1,
        "{err}"
    );
    assert_untouched(&before, dir, "create that failed at its first write");
}

/// A size whose pool could not be held in memory is refused in one line, before any file is
/// made (`--size 9000000T` used to abort on a failed allocation of the array state).
#[test]
fn create_of_a_size_too_large_to_hold_is_refused_before_anything_is_written() {
    let t = TempDir::new("cli-safety", "huge");
    let dir = t.path();
    let before = snapshot(dir);
    let line = refused(
        dir,
        &[
            "create", "p.json", "--scheme", "raid5", "--disks", "3", "--member", "m0.img",
            "--member", "m1.img", "--member", "m2.img", "--size", "9000000T",
        ],
        &["layout cycles", "--chunk"],
    );
    assert!(
        line.starts_with("raidforge: error: --member-size "),
        "{line}"
    );
    assert_untouched(&before, dir, "create refused for its size");
}

/// `assemble` over the descriptor of another pool is refused and touches nothing; over its own
/// pool's descriptor it keeps what the superblocks do not hold (here the emulated speed).
#[test]
fn assemble_keeps_its_pools_settings_and_never_overwrites_another_pools_descriptor() {
    let t = TempDir::new("cli-safety", "assemble");
    let dir = t.path();
    create_small(
        dir,
        "p.json",
        &["--scheme", "raid5", "--disks", "3"],
        "m",
        3,
        &["--emulate", "hdd:900MB/s:0ms"],
    );
    ok(
        dir,
        &[
            "create", "q.json", "--scheme", "raid1", "--disks", "2", "--member", "q0.img",
            "--member", "q1.img", "--size", "4M",
        ],
    );
    let data = pattern(4, 50_000);
    write(dir, "p.json", 0, &data);
    let before = snapshot(dir);
    refused(
        dir,
        &[
            "assemble", "p.json", "--member", "q0.img", "--member", "q1.img",
        ],
        &["p.json describes another pool", "another descriptor path"],
    );
    assert_untouched(&before, dir, "assemble over another pool's descriptor");
    let st = json(
        dir,
        &[
            "assemble", "p.json", "--member", "m2.img", "--member", "m0.img", "--member", "m1.img",
            "--json",
        ],
    );
    for m in st["members"].as_array().unwrap() {
        assert_eq!(m["emulate"], "hdd:900MB/s:0ms", "{st}");
    }
    assert_eq!(read(dir, "p.json", 0, data.len() as u64), data);
}

/// A member whose file is missing when a command opens the pool is failed, and the command
/// says so; `status` (text and --json) says why each failed member failed.
#[test]
fn a_member_failed_for_a_missing_file_is_reported_with_its_reason() {
    let t = TempDir::new("cli-safety", "why");
    let dir = t.path();
    create_small(
        dir,
        "p.json",
        &["--scheme", "raid6", "--disks", "5"],
        "m",
        5,
        &[],
    );
    let data = pattern(6, 150_000);
    write(dir, "p.json", 0, &data);
    std::fs::rename(dir.join("m1.img"), dir.join("m1.away")).unwrap();
    let out = raidforge(
        dir,
        &[
            "io", "read", "p.json", "--offset", "0", "--length", "150000", "--output", "out.bin",
        ],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("member 1 is failed") && err.contains("m1.img missing"),
        "{err}"
    );
    assert_eq!(std::fs::read(dir.join("out.bin")).unwrap(), data);
    ok(dir, &["fail", "p.json", "--member", "m3"]);
    let st = status(dir, "p.json");
    let why = |i: usize| {
        st["members"][i]["failed_why"]
            .as_str()
            .unwrap_or("")
            .to_string()
    };
    assert!(
        why(1).contains("m1.img missing when the pool was opened"),
        "{st}"
    );
    assert!(why(3).contains("raidforge fail"), "{st}");
    assert!(st["members"][0].get("failed_why").is_none(), "{st}");
    let text = ok(dir, &["status", "p.json"]);
    assert!(
        text.contains("m1 failed: its device disappeared: file")
            && text.contains("m3 failed: failed by"),
        "{text}"
    );
}

/// Bytes an unprivileged writer may still allocate on the file system of `dir`.
fn free_bytes(dir: &std::path::Path) -> u64 {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path; statvfs only fills `st`.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    assert_eq!(unsafe { libc::statvfs(c.as_ptr(), &mut st) }, 0);
    st.f_bavail as u64 * st.f_frsize as u64
}

/// Member files start sparse, so a file system without room for them all let create succeed
/// (and writes fail later), or fail with "File too large" for `--member-size 100T`: create
/// checks the room first, in one line naming the files, what they need and what is free, and
/// writes nothing; `--force` creates them anyway.
#[test]
fn create_checks_that_the_file_system_has_room_first() {
    let t = TempDir::new("cli-safety", "room");
    let dir = t.path();
    let before = snapshot(dir);
    // Three members of half the free space each: 1.5 times what the file system has.
    let each = (free_bytes(dir) / 2).next_multiple_of(1 << 20);
    let size = format!("{}M", each >> 20);
    let args = |size: &str| -> Vec<String> {
        [
            "create",
            "p.json",
            "--scheme",
            "raid5",
            "--disks",
            "3",
            "--member",
            "m0.img",
            "--member",
            "m1.img",
            "--member",
            "m2.img",
            "--member-size",
            size,
        ]
        .map(String::from)
        .to_vec()
    };
    for size in [size.as_str(), "100T"] {
        let a = args(size);
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        refused(
            dir,
            &a,
            &[
                "member files m0.img, m1.img, m2.img need 3 x",
                "their file system has",
                "free",
                "--member-size",
                "--force",
            ],
        );
        assert_untouched(&before, dir, "create refused for lack of room");
    }
    let mut a = args(&size);
    a.push("--force".into());
    let a: Vec<&str> = a.iter().map(String::as_str).collect();
    ok(dir, &a);
    for m in ["m0.img", "m1.img", "m2.img"] {
        use std::os::unix::fs::MetadataExt;
        let md = std::fs::metadata(dir.join(m)).unwrap();
        assert_eq!(md.len(), each, "{m}");
        assert!(md.blocks() * 512 < 64 << 20, "{m} is not sparse");
    }
}

/// A member whose file was missing when the pool was opened, and comes back unchanged,
/// rejoins with `re-add` without a rebuild (its data area is not written, and the pool relies
/// on it again: failing another member still reads every byte back). One that missed a write
/// while it was away is refused as stale, its file untouched, and told to use replace +
/// rebuild.
#[test]
fn a_member_back_unchanged_rejoins_without_a_rebuild_and_a_stale_one_is_refused() {
    let t = TempDir::new("cli-safety", "re-add");
    let dir = t.path();
    create_small(
        dir,
        "p.json",
        &["--scheme", "raid5", "--disks", "4"],
        "m",
        4,
        &[],
    );
    let data = pattern(9, 600_000);
    write(dir, "p.json", 0, &data);
    let data_area = |m: &str, st: &Value, i: usize| -> Vec<u8> {
        let off = st["members"][i]["data_offset_bytes"].as_u64().unwrap() as usize;
        std::fs::read(dir.join(m)).unwrap()[off..].to_vec()
    };
    // m1's file goes away: the next command fails the member and says so.
    std::fs::rename(dir.join("m1.img"), dir.join("m1.away")).unwrap();
    assert_eq!(read(dir, "p.json", 0, data.len() as u64), data);
    assert_eq!(status(dir, "p.json")["members"][1]["state"], "failed");
    std::fs::rename(dir.join("m1.away"), dir.join("m1.img")).unwrap();
    let st = status(dir, "p.json");
    let m1_before = data_area("m1.img", &st, 1);
    refused(
        dir,
        &["re-add", "p.json", "--member", "m0"],
        &["member 0 has not failed"],
    );
    let out = raidforge(dir, &["re-add", "p.json", "--member", "m1"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("member 1 rejoined") && err.contains("nothing was rebuilt"),
        "{err}"
    );
    let st = status(dir, "p.json");
    assert_eq!(st["state"], "clean", "{st}");
    assert_eq!(st["fault_tolerance"], 1, "{st}");
    assert_eq!(st["cycles_clean"], st["cycles"], "{st}");
    assert!(st["members"][1].get("failed_why").is_none(), "{st}");
    assert!(
        data_area("m1.img", &st, 1) == m1_before,
        "re-add wrote m1's data area"
    );
    // The pool relies on m1 again: assembled from its members, with m0 failed, every byte
    // reads back.
    ok(
        dir,
        &[
            "assemble", "p.json", "--member", "m0.img", "m1.img", "m2.img", "m3.img",
        ],
    );
    std::fs::copy(dir.join("m0.img"), dir.join("m0.keep")).unwrap();
    ok(dir, &["fail", "p.json", "--member", "0"]);
    assert_eq!(read(dir, "p.json", 0, data.len() as u64), data);

    // m2 goes away, the pool takes a write, m2 comes back: stale, refused, untouched.
    let t2 = TempDir::new("cli-safety", "re-add-stale");
    let dir = t2.path();
    create_small(
        dir,
        "p.json",
        &["--scheme", "raid5", "--disks", "4"],
        "m",
        4,
        &[],
    );
    write(dir, "p.json", 0, &data);
    std::fs::rename(dir.join("m2.img"), dir.join("m2.away")).unwrap();
    write(dir, "p.json", 70_000, &pattern(3, 5_000));
    std::fs::rename(dir.join("m2.away"), dir.join("m2.img")).unwrap();
    let m2 = std::fs::read(dir.join("m2.img")).unwrap();
    refused(
        dir,
        &["re-add", "p.json", "--member", "2"],
        &[
            "member 2",
            "stale",
            "disagree",
            "raidforge replace",
            "raidforge rebuild",
        ],
    );
    assert!(
        std::fs::read(dir.join("m2.img")).unwrap() == m2,
        "a refused re-add wrote the member"
    );
    assert_eq!(status(dir, "p.json")["members"][2]["state"], "failed");
    let mut want = data.clone();
    want[70_000..75_000].copy_from_slice(&pattern(3, 5_000));
    assert_eq!(read(dir, "p.json", 0, want.len() as u64), want);
}
