//! Running the real binary from the CLI tests: a temporary directory per test, the command run
//! in it (or in the test's own working directory), and the set-up every pool test repeats:
//! creating a pool, writing and reading its bytes through files, its status, test data, and
//! the client tools some tests need. Each test file uses a part of it.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::fmt::Debug;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output};
use std::time::Duration;

use serde_json::Value;

pub mod events;
pub mod prom;

/// A directory under the system temp dir, removed when the test passes (kept on a panic, to
/// look at). Its path is short (Unix socket paths in it must stay under about 100 bytes).
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

    pub fn path(&self) -> &Path {
        &self.0
    }

    /// A path inside the directory.
    pub fn join(&self, p: &str) -> PathBuf {
        self.0.join(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// The binary under test.
pub fn command() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_raidforge"));
    // CI unset, so that nothing in it switches to CI behaviour.
    c.env_remove("CI");
    c
}

/// Runs `raidforge ARGS` in `dir`.
pub fn raidforge<S: AsRef<OsStr>>(dir: &Path, args: &[S]) -> Output {
    command()
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run raidforge")
}

/// Runs `raidforge ARGS` in the test's own working directory (commands that touch no file,
/// or only the absolute paths they are given).
pub fn run<S: AsRef<OsStr>>(args: &[S]) -> Output {
    command().args(args).output().expect("run raidforge")
}

/// The stdout of a command that must have succeeded.
fn succeeded<S: Debug>(args: &[S], out: Output) -> String {
    assert!(
        out.status.success(),
        "raidforge {args:?} failed ({:?}): {}{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("stdout is UTF-8")
}

/// Runs a command in `dir` that must succeed; returns its stdout.
pub fn ok<S: AsRef<OsStr> + Debug>(dir: &Path, args: &[S]) -> String {
    succeeded(args, raidforge(dir, args))
}

/// Runs a command in the test's working directory that must succeed; returns its stdout.
pub fn ok_here<S: AsRef<OsStr> + Debug>(args: &[S]) -> String {
    succeeded(args, run(args))
}

fn parsed<S: Debug>(args: &[S], s: &str) -> Value {
    serde_json::from_str(s).unwrap_or_else(|e| panic!("raidforge {args:?}: not JSON ({e}): {s}"))
}

/// The JSON a command run in `dir` prints on success.
pub fn json<S: AsRef<OsStr> + Debug>(dir: &Path, args: &[S]) -> Value {
    parsed(args, &ok(dir, args))
}

/// The JSON a command run in the test's working directory prints on success.
pub fn json_here<S: AsRef<OsStr> + Debug>(args: &[S]) -> Value {
    parsed(args, &ok_here(args))
}

/// Runs a command that must be refused: exit status 2, nothing on stdout, exactly one line on
/// stderr, `raidforge: error: ...` containing every one of `needles` (case aside). Returns the
/// line.
pub fn refused<S: AsRef<OsStr> + Debug>(dir: &Path, args: &[S], needles: &[&str]) -> String {
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

/// `raidforge status POOL --json`.
pub fn status(dir: &Path, pool: impl AsRef<Path>) -> Value {
    json(
        dir,
        &[
            OsStr::new("status"),
            pool.as_ref().as_os_str(),
            OsStr::new("--json"),
        ],
    )
}

/// Member file names `PREFIX0.img` ... `PREFIX<n-1>.img`.
pub fn members(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}{i}.img")).collect()
}

/// The arguments of `raidforge create POOL LAYOUT... --member M ... EXTRA...`.
pub fn create_args(pool: &str, layout: &[&str], members: &[String], extra: &[&str]) -> Vec<String> {
    let mut args = vec!["create".to_string(), pool.to_string()];
    args.extend(layout.iter().map(|s| s.to_string()));
    for m in members {
        args.extend(["--member".to_string(), m.clone()]);
    }
    args.extend(extra.iter().map(|s| s.to_string()));
    args
}

/// `raidforge create POOL LAYOUT... --member M ... EXTRA...` in `dir`, which must succeed;
/// returns its stdout (the status, with `--json` in `extra`).
pub fn create(
    dir: &Path,
    pool: &str,
    layout: &[&str],
    members: &[String],
    extra: &[&str],
) -> String {
    ok(dir, &create_args(pool, layout, members, extra))
}

/// The arguments of `raidforge create POOL LAYOUT... --member PREFIX0.img ... --size 4M
/// --chunk 16K EXTRA...`: the small pool most tests use.
pub fn small_pool_args(
    pool: &str,
    layout: &[&str],
    prefix: &str,
    n: usize,
    extra: &[&str],
) -> Vec<String> {
    let mut rest = vec!["--size", "4M", "--chunk", "16K"];
    rest.extend_from_slice(extra);
    create_args(pool, layout, &members(prefix, n), &rest)
}

/// Creates the small pool of [`small_pool_args`] in `dir` (which must succeed); returns the
/// stdout.
pub fn create_small(
    dir: &Path,
    pool: &str,
    layout: &[&str],
    prefix: &str,
    n: usize,
    extra: &[&str],
) -> String {
    ok(dir, &small_pool_args(pool, layout, prefix, n, extra))
}

/// Writes `data` into the pool at `offset` (`raidforge io write`, through a file in `dir`).
pub fn write(dir: &Path, pool: &str, offset: u64, data: &[u8]) {
    let input = dir.join("input.bin");
    std::fs::write(&input, data).unwrap();
    ok(
        dir,
        &[
            "io",
            "write",
            pool,
            "--offset",
            &offset.to_string(),
            "--input",
            input.to_str().unwrap(),
        ],
    );
    std::fs::remove_file(&input).unwrap();
}

/// `len` bytes of the pool at `offset` (`raidforge io read`, through a file in `dir`).
pub fn read(dir: &Path, pool: impl AsRef<Path>, offset: u64, len: u64) -> Vec<u8> {
    let output = dir.join("output.bin");
    ok(
        dir,
        &[
            OsStr::new("io"),
            OsStr::new("read"),
            pool.as_ref().as_os_str(),
            OsStr::new("--offset"),
            OsStr::new(&offset.to_string()),
            OsStr::new("--length"),
            OsStr::new(&len.to_string()),
            OsStr::new("--output"),
            output.as_os_str(),
        ],
    );
    let b = std::fs::read(&output).unwrap();
    std::fs::remove_file(&output).unwrap();
    b
}

/// `len` pseudo-random bytes (xorshift), a different sequence for each seed.
pub fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 24) as u8
        })
        .collect()
}

/// The path of a client tool on $PATH. Missing: under CI (env CI set) the test fails, naming
/// what installs it (`install`); otherwise it is skipped with a note (None).
pub fn tool(name: &str, install: &str) -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(name))
            .find(|p| p.is_file())
    });
    if found.is_none() {
        if std::env::var_os("CI").is_some() {
            panic!("{name} is required under CI ({install})");
        }
        eprintln!("note: {name} not found; skipping this test (it fails under CI)");
    }
    found
}

/// Waits for a fio run started with `--output-format=json` and piped stdout/stderr, killing it
/// after `limit`; asserts that it succeeded and returns its JSON report (fio's nbd engine
/// prints a line before it).
pub fn fio_json(child: Child, limit: Duration, what: &str) -> Value {
    let pid = child.id() as i32;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let out = match rx.recv_timeout(limit) {
        Ok(o) => o.expect("fio output"),
        Err(_) => {
            // SAFETY: killing our own child process.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
            panic!("fio ({what}) did not finish within {limit:?}");
        }
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "fio ({what}) failed: {}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(&stdout[stdout.find('{').expect("fio JSON")..]).expect("fio JSON")
}

/// Every file of the directory and its bytes.
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

/// The lines `r` gives (a child's stdout or stderr), read on a thread of their own so that
/// the child never blocks on a full pipe; the channel ends with the stream.
pub fn line_channel(r: impl std::io::Read + Send + 'static) -> std::sync::mpsc::Receiver<String> {
    use std::io::BufRead;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(r).lines().map_while(Result::ok) {
            // Nobody listening any more is fine: the pipe is still drained.
            let _ = tx.send(line);
        }
    });
    rx
}
