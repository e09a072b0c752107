//! One vocabulary across the pool commands (issue 22): `-` for standard input and output in
//! `io`, members named `m1` as `status` labels them, `--help` that describes every option.

use std::io::Write;
use std::process::{Command, Stdio};

mod common;

use common::{ok, TempDir};

#[test]
fn io_takes_dash_for_standard_input_and_output() {
    let t = TempDir::new("cli-words", "dash");
    let dir = t.path();
    ok(
        dir,
        &[
            "create", "p.json", "--scheme", "raid5", "--disks", "3", "--member", "m0.img",
            "--member", "m1.img", "--member", "m2.img", "--size", "4M",
        ],
    );
    let data: Vec<u8> = (0..70_000u32).map(|i| (i * 31 % 253) as u8).collect();
    let mut child = Command::new(env!("CARGO_BIN_EXE_raidforge"))
        .args(["io", "write", "p.json", "--offset", "5000", "--input", "-"])
        .current_dir(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(&data).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(!dir.join("-").exists(), "a file named '-' was made");
    let out = Command::new(env!("CARGO_BIN_EXE_raidforge"))
        .args([
            "io", "read", "p.json", "--offset", "5000", "--length", "70000", "--output", "-",
        ])
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(
        out.stdout == data,
        "standard output differs from what was written"
    );
    assert!(!dir.join("-").exists(), "a file named '-' was made");
}

#[test]
fn io_read_help_describes_every_option() {
    let t = TempDir::new("cli-words", "help");
    let full = ok(t.path(), &["io", "read", "--help"]);
    let help = &full[full.find("Options:").expect("an Options section")..];
    for (opt, words) in [
        ("--offset", "Byte offset in the pool"),
        ("--length", "Number of bytes to read"),
        ("--output", "standard output"),
    ] {
        let at = help.find(opt).unwrap_or_else(|| panic!("{opt}: {full}"));
        let line_end = help[at..].find('\n').unwrap() + at;
        let next = &help[line_end..];
        assert!(
            help[at..line_end].contains(words) || next.trim_start().starts_with(words),
            "{opt} undescribed: {full}"
        );
    }
}

/// A negative number as a value is reported as an invalid value of that option (not clap's
/// tip to write `-- -1`).
#[test]
fn a_negative_number_is_an_invalid_value() {
    let t = TempDir::new("cli-words", "negative");
    for (args, needle) in [
        (
            vec!["fail", "p.json", "--member", "-1"],
            "'-1' is not a member index",
        ),
        (
            vec![
                "io", "read", "p.json", "--offset", "-5", "--length", "3", "--output", "x",
            ],
            "'-5' is not a size",
        ),
    ] {
        let out = common::raidforge(t.path(), &args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains(needle) && !err.contains("-- -"),
            "{args:?}: {err}"
        );
    }
}
