//! One vocabulary across commands (issue 22): one name per concept with the old names still
//! taken, one rule for sizes and speeds echoed back in the units the output uses, and progress
//! bars that fit the terminal.

use std::io::Read;
use std::os::fd::{FromRawFd, OwnedFd};
use std::process::{Command, Stdio};

mod common;

use common::{members, ok, raidforge, refused, TempDir};

fn help(dir: &std::path::Path, cmd: &[&str]) -> String {
    let mut args = cmd.to_vec();
    args.push("--help");
    ok(dir, &args)
}

/// `create POOL --scheme raid5 --disks 3 --member POOL-m0.img ... SIZE_FLAG SIZE`.
fn create(dir: &std::path::Path, pool: &str, size_flag: &str, size: &str) {
    let m = members(&format!("{pool}-m"), 3);
    common::create(
        dir,
        pool,
        &["--scheme", "raid5", "--disks", "3"],
        &m,
        &[size_flag, size],
    );
}

fn len(dir: &std::path::Path, f: &str) -> u64 {
    std::fs::metadata(dir.join(f)).unwrap().len()
}

/// Member size, rebuild order, policy and window have one name in every command that takes
/// them; `--help` shows only those names, and the old spellings keep working.
#[test]
fn one_name_per_concept_and_the_old_names_still_work() {
    let t = TempDir::new("cli-vocabulary", "names");
    let dir = t.path();
    for cmd in [&["create"][..], &["sim"], &["demo"]] {
        let h = help(dir, cmd);
        assert!(h.contains("--member-size <"), "{cmd:?}: {h}");
    }
    for cmd in [&["rebuild"][..], &["sim"]] {
        let h = help(dir, cmd);
        for name in [
            "--rebuild-order <",
            "--rebuild-policy <",
            "--rebuild-window <",
        ] {
            assert!(h.contains(name), "{cmd:?} lacks {name}: {h}");
        }
        assert!(
            h.contains("--speed-min <") && h.contains("--speed-max <"),
            "{h}"
        );
    }
    // The old names are hidden (no second name for a concept in any --help)...
    for cmd in [
        &["create"][..],
        &["sim"],
        &["demo"],
        &["rebuild"],
        &["scrub"],
        &["serve"],
        &["assemble"],
    ] {
        let h = help(dir, cmd);
        for old in ["--size <", "--policy <", "--parallel <", "rebuild --policy"] {
            assert!(!h.contains(old), "{cmd:?} shows {old}: {h}");
        }
    }
    assert!(!help(dir, &["rebuild"]).contains("--order <"));
    // ...but still taken: --size as --member-size.
    create(dir, "new.json", "--member-size", "8M");
    create(dir, "old.json", "--size", "8M");
    assert_eq!(len(dir, "new.json-m0.img"), 8 << 20);
    assert_eq!(len(dir, "old.json-m0.img"), 8 << 20);
    // rebuild's --order/--parallel as --rebuild-order/--rebuild-window.
    for (pool, args) in [
        (
            "new.json",
            vec!["--rebuild-order", "parallel", "--rebuild-window", "2"],
        ),
        ("old.json", vec!["--order", "parallel", "--parallel", "2"]),
    ] {
        ok(dir, &["fail", pool, "--member", "1"]);
        let with = format!("{pool}-n1.img");
        ok(dir, &["replace", pool, "--member", "1", "--with", &with]);
        let mut a = vec!["rebuild", pool, "--json"];
        a.extend(args);
        let out = ok(dir, &a);
        assert!(
            out.lines().last().unwrap().contains("\"state\":\"clean\""),
            "{out}"
        );
    }
    refused(
        dir,
        &["rebuild", "new.json", "--rebuild-order", "sideways"],
        &["--rebuild-order 'sideways'", "parallel or sequential"],
    );
    // sim: --rebuild-order is its own option now; the old `--rebuild-policy sequential`
    // means the same run.
    let sim = |extra: &[&str]| -> serde_json::Value {
        let mut a = vec![
            "sim",
            "--scheme",
            "raid5",
            "--disks",
            "4",
            "--disk",
            "st3500320as",
            "--member-size",
            "32M",
            "--chunk",
            "64K",
            "--workload",
            "none",
            "--fail",
            "0",
            "--json",
        ];
        a.extend(extra);
        serde_json::from_str(&ok(dir, &a)).unwrap()
    };
    let seq = sim(&["--rebuild-order", "sequential"]);
    assert_eq!(seq, sim(&["--rebuild-policy", "sequential"]));
    assert_ne!(
        seq["rebuild"],
        sim(&["--rebuild-order", "parallel"])["rebuild"]
    );
    refused(
        dir,
        &[
            "sim",
            "--scheme",
            "raid5",
            "--disks",
            "4",
            "--member-size",
            "32M",
            "--workload",
            "none",
            "--fail",
            "0",
            "--rebuild-order",
            "sequential",
            "--rebuild-policy",
            "ido",
        ],
        &["--rebuild-policy ido", "--rebuild-order sequential"],
    );
}

/// `50M` and `50MiB` are 2^20 bytes, `50MB` 10^6, in every size and speed of every command,
/// and speeds are echoed back as given and in the units the output prints.
#[test]
fn sizes_and_speeds_follow_one_rule_and_are_echoed_back() {
    let t = TempDir::new("cli-vocabulary", "units");
    let dir = t.path();
    create(dir, "mib.json", "--member-size", "8MiB");
    create(dir, "mb.json", "--member-size", "8MB");
    assert_eq!(len(dir, "mib.json-m0.img"), 8 << 20);
    assert_eq!(len(dir, "mb.json-m0.img"), 8_000_000);
    // The simulator reads sizes by the same rule (it read 64MB as 64 MiB).
    let member_bytes = |size: &str| -> u64 {
        let v: serde_json::Value = serde_json::from_str(&ok(
            dir,
            &[
                "sim",
                "--scheme",
                "raid5",
                "--disks",
                "4",
                "--member-size",
                size,
                "--chunk",
                "64K",
                "--workload",
                "none",
                "--json",
            ],
        ))
        .unwrap();
        v["member_bytes"].as_u64().unwrap()
    };
    let (mb, mib) = (member_bytes("64MB"), member_bytes("64MiB"));
    assert!(
        mb <= 64_000_000 && mib > 64_000_000,
        "64MB {mb}, 64MiB {mib}"
    );
    assert_eq!(member_bytes("64M"), mib);
    // Speeds: rebuild echoes what it was given and what that means, in both units.
    ok(dir, &["fail", "mib.json", "--member", "0"]);
    ok(
        dir,
        &["replace", "mib.json", "--member", "0", "--with", "n0.img"],
    );
    let out = raidforge(
        dir,
        &[
            "rebuild",
            "mib.json",
            "--speed-max",
            "50MB/s",
            "--speed-min",
            "1M",
        ],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("--speed-max 50MB/s (50000000 bytes/s = 47.7 MiB/s = 50.0 MB/s)")
            && err.contains("--speed-min 1M (1048576 bytes/s = 1.0 MiB/s = 1.0 MB/s)"),
        "{err}"
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains(" MB/s); pool is clean"));
    refused(
        dir,
        &[
            "rebuild",
            "mib.json",
            "--speed-min",
            "50M",
            "--speed-max",
            "50MB",
        ],
        &[
            "--speed-min 50M (52428800 bytes/s",
            "above --speed-max 50MB (50000000 bytes/s",
        ],
    );
    let out = raidforge(dir, &["scrub", "mib.json", "--speed-max", "fast"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("'fast' is not a speed") && err.contains("50MB/s"),
        "{err}"
    );
    // The same rule in --emulate (it took only MB/s and MiB/s).
    let m: Vec<String> = (0..3).map(|i| format!("e{i}.img")).collect();
    ok(
        dir,
        &[
            "create",
            "e.json",
            "--scheme",
            "raid5",
            "--disks",
            "3",
            "--member",
            &m[0],
            "--member",
            &m[1],
            "--member",
            &m[2],
            "--member-size",
            "4M",
            "--emulate",
            "hdd:200M/s:1ms",
        ],
    );
    // sim: the defaults are shown in a unit that says what they are, and echoed back.
    let h = help(dir, &["sim"]);
    assert!(
        h.contains("[default: 200000KiB/s]") && h.contains("[default: 1000KiB/s]"),
        "{h}"
    );
    assert!(!h.contains("200000K]"), "{h}");
    let out = ok(
        dir,
        &[
            "sim",
            "--scheme",
            "raid5",
            "--disks",
            "4",
            "--member-size",
            "32M",
            "--chunk",
            "64K",
            "--workload",
            "none",
            "--fail",
            "0",
            "--speed-max",
            "100MB/s",
        ],
    );
    assert!(
        out.contains("rebuild --speed-max 100MB/s (100000000 bytes/s = 95.4 MiB/s = 100.0 MB/s)")
            && out.contains("rebuild --speed-min 1000KiB/s (1024000 bytes/s"),
        "{out}"
    );
}

/// Runs `raidforge ARGS` in `dir` with stderr on a pseudo-terminal `cols` columns wide (so
/// that progress bars are drawn); returns what the terminal received.
fn on_terminal(dir: &std::path::Path, args: &[&str], cols: u16) -> String {
    let (mut master, mut slave) = (0, 0);
    let ws = libc::winsize {
        ws_row: 24,
        ws_col: cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: openpty writes two descriptors into the variables; the window size is read.
    let r = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            &ws,
        )
    };
    assert_eq!(r, 0, "openpty: {}", std::io::Error::last_os_error());
    // SAFETY: both descriptors were just opened and are owned here alone.
    let (master, slave) = unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) };
    let mut child = Command::new(env!("CARGO_BIN_EXE_raidforge"))
        .args(args)
        .current_dir(dir)
        .env_remove("CI")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(slave))
        .spawn()
        .unwrap();
    let mut term = std::fs::File::from(master);
    let reader = std::thread::spawn(move || {
        let mut out = Vec::new();
        let mut buf = [0u8; 4096];
        // EIO once the child (the last holder of the slave side) has exited.
        while let Ok(n) = term.read(&mut buf) {
            if n == 0 {
                break;
            }
            out.extend_from_slice(&buf[..n]);
        }
        out
    });
    assert!(child.wait().unwrap().success(), "raidforge {args:?} failed");
    String::from_utf8_lossy(&reader.join().unwrap()).into_owned()
}

/// The pieces of terminal output between carriage returns and newlines, escape sequences
/// removed: what each draw puts on one line.
fn drawn_lines(out: &str) -> Vec<String> {
    let mut plain = String::new();
    let mut chars = out.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            if chars.peek() == Some(&'[') {
                chars.next();
                for c in chars.by_ref() {
                    if c.is_ascii_alphabetic() {
                        break;
                    }
                }
            }
            continue;
        }
        plain.push(c);
    }
    plain
        .split(['\r', '\n'])
        .map(str::to_string)
        .filter(|l| !l.is_empty())
        .collect()
}

/// The progress bars of `rebuild` and `scrub` fit an 80-column terminal (the fixed 40-column
/// bar made a 90-odd-column line, which the terminal wrapped).
#[test]
fn progress_bars_fit_in_80_columns() {
    let t = TempDir::new("cli-vocabulary", "bars");
    let dir = t.path();
    // Enough cycles for six-digit counts, slow enough for a few draws.
    common::create(
        dir,
        "p.json",
        &["--scheme", "raid5", "--disks", "4"],
        &members("m", 4),
        &["--member-size", "48M", "--chunk", "4K"],
    );
    ok(dir, &["fail", "p.json", "--member", "2"]);
    ok(
        dir,
        &["replace", "p.json", "--member", "2", "--with", "n2.img"],
    );
    for (args, label) in [
        (vec!["rebuild", "p.json", "--speed-max", "60M"], "rebuild ["),
        (vec!["scrub", "p.json", "--speed-max", "200M"], "scrub ["),
    ] {
        let out = on_terminal(dir, &args, 80);
        let lines = drawn_lines(&out);
        let bars: Vec<&String> = lines.iter().filter(|l| l.starts_with(label)).collect();
        assert!(!bars.is_empty(), "{args:?}: no bar drawn: {out:?}");
        for l in &lines {
            assert!(
                l.chars().count() <= 80,
                "{args:?}: a line of {} columns: {l:?}",
                l.chars().count()
            );
        }
        assert!(
            bars.iter()
                .any(|l| l.contains("cycles") && l.contains("eta")),
            "{bars:?}"
        );
    }
}
