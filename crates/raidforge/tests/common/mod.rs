//! Running the real binary from the CLI tests: a temporary directory per test and the command
//! run in it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A directory under the system temp dir, removed when the test passes (kept on a panic, to
/// look at).
pub struct TempDir(pub PathBuf);

impl TempDir {
    /// `raidforge-<suite>-<name>-<pid>`, emptied first.
    pub fn new(suite: &str, name: &str) -> TempDir {
        let d =
            std::env::temp_dir().join(format!("raidforge-{suite}-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        TempDir(d)
    }

    #[allow(dead_code)]
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// Runs `raidforge ARGS` in `dir` (CI unset, so that nothing in it switches to CI behaviour).
#[allow(dead_code)]
pub fn raidforge(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_raidforge"))
        .args(args)
        .current_dir(dir)
        .env_remove("CI")
        .output()
        .expect("run raidforge")
}

/// Runs a command that must succeed; returns its stdout.
#[allow(dead_code)]
pub fn ok(dir: &Path, args: &[&str]) -> String {
    let out = raidforge(dir, args);
    assert!(
        out.status.success(),
        "raidforge {args:?} failed ({:?}): {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Runs a command that must be refused: exit status 2, nothing on stdout, exactly one line on
/// stderr, `raidforge: error: ...` containing every one of `needles`. Returns the line.
#[allow(dead_code)]
pub fn refused(dir: &Path, args: &[&str], needles: &[&str]) -> String {
    let out = raidforge(dir, args);
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(
        out.status.code(),
        Some(2),
        "raidforge {args:?} should be refused; stderr: {err}"
    );
    assert!(
        out.stdout.is_empty(),
        "raidforge {args:?} printed on stdout: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "raidforge {args:?}: not one line: {err}");
    assert!(lines[0].starts_with("raidforge: error: "), "{err}");
    for n in needles {
        assert!(
            lines[0].to_lowercase().contains(&n.to_lowercase()),
            "raidforge {args:?}: '{n}' missing from: {err}"
        );
    }
    lines[0].to_string()
}

/// Every file of the directory and its bytes.
#[allow(dead_code)]
pub fn snapshot(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut m = BTreeMap::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_file() {
            m.insert(
                e.file_name().to_string_lossy().to_string(),
                std::fs::read(e.path()).unwrap(),
            );
        }
    }
    m
}

#[allow(dead_code)]
pub fn assert_untouched(before: &BTreeMap<String, Vec<u8>>, dir: &Path, what: &str) {
    let after = snapshot(dir);
    assert_eq!(
        before.keys().collect::<Vec<_>>(),
        after.keys().collect::<Vec<_>>(),
        "{what}: files were created or removed"
    );
    for (name, bytes) in before {
        assert!(
            after[name] == *bytes,
            "{what}: {name} was modified by a refused command"
        );
    }
}
