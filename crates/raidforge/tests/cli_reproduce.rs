//! `raidforge reproduce`: finds the repository's traces from any working directory, and says
//! how to name a trace folder when the one it was given (or none) holds no traces.

mod common;

use std::process::Command;

use common::TempDir;

/// `raidforge reproduce ARGS` in `dir`, with `RAIDFORGE_TRACES` set to `traces` (or unset).
fn reproduce(dir: &TempDir, traces: Option<&str>, args: &[&str]) -> std::process::Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_raidforge"));
    cmd.arg("reproduce")
        .args(args)
        .current_dir(&dir.0)
        .env_remove("CI")
        .env_remove("RAIDFORGE_TRACES");
    if let Some(t) = traces {
        cmd.env("RAIDFORGE_TRACES", t);
    }
    cmd.output().expect("run raidforge")
}

/// The error line (the last line on stderr, after the progress lines), with exit status 2.
fn error_line(out: &std::process::Output) -> String {
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let last = stderr.lines().last().unwrap_or_default().to_string();
    assert!(last.starts_with("raidforge: error: "), "{stderr}");
    last
}

#[test]
fn default_traces_are_found_from_another_working_directory() {
    let dir = TempDir::new("reproduce", "default");
    let out = reproduce(&dir, None, &["ido", "--quick", "--out", "r"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let md = std::fs::read_to_string(dir.0.join("r/ido.md")).unwrap();
    assert!(
        md.contains("websearch-head.mqsim"),
        "the WebSearch runs are in the report"
    );
}

#[test]
fn a_missing_trace_folder_is_an_error_naming_the_way_out() {
    let dir = TempDir::new("reproduce", "missing");
    let gone = dir.0.join("gone");
    let gone = gone.to_str().unwrap();
    let e = error_line(&reproduce(
        &dir,
        None,
        &["s2raid", "--quick", "--traces", gone, "--out", "r"],
    ));
    assert!(e.contains(gone) && e.contains("--traces"), "{e}");

    let e = error_line(&reproduce(
        &dir,
        Some(gone),
        &["ido", "--quick", "--out", "r"],
    ));
    assert!(e.contains("RAIDFORGE_TRACES=") && e.contains(gone), "{e}");

    // A folder without the WebSearch head: the file is named, and both ways to point at
    // another folder.
    std::fs::create_dir_all(dir.0.join("empty")).unwrap();
    let e = error_line(&reproduce(
        &dir,
        None,
        &["s2raid", "--quick", "--traces", "empty", "--out", "r"],
    ));
    assert!(
        e.contains("websearch-head.mqsim not found")
            && e.contains("--traces DIR")
            && e.contains("RAIDFORGE_TRACES"),
        "{e}"
    );
    assert!(
        !dir.0.join("r/s2raid.md").exists(),
        "no report without its trace"
    );
}
