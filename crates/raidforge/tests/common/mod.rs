//! Running the real binary from the CLI tests: a temporary directory per test and the command
//! run in it.

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
