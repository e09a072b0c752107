//! The architecture invariant "the core never touches the outside world", kept true by a
//! test: the sources of `layout`, `codec` and `raidcore` name no file system, clock, thread,
//! socket, process or environment API (the engine and the simulator pass time, randomness
//! seeds and I/O in), and `layout` and `raidcore` forbid unsafe code. ARCHITECTURE.md states
//! the rule; this is where it is enforced.

use std::path::{Path, PathBuf};

/// What the pure crates must not name, and why.
const FORBIDDEN: &[(&str, &str)] = &[
    ("std::fs", "file system"),
    ("File::open", "file system"),
    ("File::create", "file system"),
    ("OpenOptions", "file system"),
    ("std::net", "sockets"),
    ("TcpStream", "sockets"),
    ("TcpListener", "sockets"),
    ("UdpSocket", "sockets"),
    ("UnixStream", "sockets"),
    ("UnixListener", "sockets"),
    ("Instant", "clock (the caller passes the time)"),
    ("SystemTime", "clock (the caller passes the time)"),
    ("UNIX_EPOCH", "clock (the caller passes the time)"),
    ("std::thread", "threads"),
    ("thread::spawn", "threads"),
    ("thread::scope", "threads"),
    ("std::process", "processes"),
    ("std::env", "environment"),
    ("thread_rng", "unseeded randomness"),
    ("getrandom", "unseeded randomness"),
];

/// The crates that must stay pure, relative to this crate's directory.
const PURE: &[&str] = &["../layout/src", "../codec/src", "src"];

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let p = e.unwrap().path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The forbidden names in `text` (comments left out): (line number, name, why).
fn violations(text: &str) -> Vec<(usize, &'static str, &'static str)> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let code = line.split("//").next().unwrap_or("");
        for &(name, why) in FORBIDDEN {
            let hit = code.match_indices(name).any(|(at, _)| {
                let before = code[..at].chars().next_back();
                let after = code[at + name.len()..].chars().next();
                let ident = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
                !ident(before) && !ident(after)
            });
            if hit {
                out.push((i + 1, name, why));
            }
        }
    }
    out
}

#[test]
fn the_scanner_finds_what_it_looks_for() {
    let text = "use std::fs;\nlet t = std::time::Instant::now(); // Instant in a comment\n\
                let instants = 3; // not a match\nstd::thread::spawn(f);\n/// Instant\n";
    let found: Vec<(usize, &str)> = violations(text).iter().map(|v| (v.0, v.1)).collect();
    assert_eq!(
        found,
        [
            (1, "std::fs"),
            (2, "Instant"),
            (4, "std::thread"),
            (4, "thread::spawn")
        ]
    );
}

#[test]
fn the_core_crates_touch_nothing_outside() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for dir in PURE {
        sources(&root.join(dir), &mut files);
    }
    assert!(files.len() > 20, "found only {} source files", files.len());
    let mut bad = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        for (line, name, why) in violations(&text) {
            bad.push(format!("{}:{line}: {name} ({why})", f.display()));
        }
    }
    assert!(
        bad.is_empty(),
        "the pure crates must not touch the outside world:\n{}",
        bad.join("\n")
    );
}

#[test]
fn layout_and_raidcore_forbid_unsafe_code() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for lib in ["../layout/src/lib.rs", "src/lib.rs"] {
        let text = std::fs::read_to_string(root.join(lib)).unwrap();
        assert!(
            text.lines().any(|l| l.trim() == "#![forbid(unsafe_code)]"),
            "{lib} must forbid unsafe code"
        );
    }
}
