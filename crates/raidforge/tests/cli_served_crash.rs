//! Served pools killed at a bad moment (issue 21): the real `raidforge serve` process, a real NBD
//! client (the project's own, `nbd::client`), the operator's commands through the control
//! socket, and SIGKILL; then what the pool holds after it starts again. Each test reproduces a
//! defect the served path had.

mod common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{ok, raidforge, read, status, TempDir};
use nbd::client::{Address, Client};

/// A running `raidforge serve POOL --socket SOCK`, killed (SIGKILL) when dropped.
struct Server {
    child: Child,
    socket: PathBuf,
}

impl Server {
    fn start(dir: &Path, pool: &Path, extra: &[&str]) -> Server {
        let socket = dir.join("s.sock");
        let mut child = Command::new(env!("CARGO_BIN_EXE_raidforge"))
            .arg("serve")
            .arg(pool)
            .arg("--socket")
            .arg(&socket)
            .args(extra)
            .current_dir(dir)
            .env_remove("CI")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start raidforge serve");
        // "ready" once every export listens (the protocol's own readiness line).
        let out = child.stdout.take().expect("stdout");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if line == "ready" {
                    let _ = tx.send(());
                }
            }
        });
        rx.recv_timeout(Duration::from_secs(30))
            .expect("raidforge serve says ready");
        Server { child, socket }
    }

    fn client(&self) -> Client {
        Client::connect(&Address::Unix {
            socket: self.socket.display().to_string(),
            export: String::new(),
        })
        .expect("connect to the export")
    }

    /// SIGKILL, and wait until the process is gone.
    fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `got` must be `len` bytes of `want` (a short message when not: no 64 KiB dumps).
fn assert_filled(got: &[u8], want: u8, what: &str) {
    if let Some(i) = got.iter().position(|&b| b != want) {
        panic!(
            "{what}: byte {i} of {} is {:#04x}, want {want:#04x} (first bytes {:02x?})",
            got.len(),
            got[i],
            &got[..8.min(got.len())]
        );
    }
}

/// Issue 21, defect 1: a write that lands in a cycle a served rebuild had just moved (here a
/// copy-back from the spare to the replaced member 0), flushed, then SIGKILL before the
/// superblocks recorded the rebuild's progress. The pool came back with the cycle in its old
/// layout: offset 0 read the spare's stale copy (0xaa), verify found the stripe inconsistent,
/// and the resumed copy-back copied the stale bytes back for good.
#[test]
fn a_flushed_write_into_a_freshly_copied_back_cycle_survives_sigkill() {
    let t = TempDir::new("served-crash", "copyback");
    let dir = t.path();
    let pool = dir.join("p.json");
    let p = pool.display().to_string();
    let mut create = vec![
        "create", &p, "--scheme", "raid5", "--disks", "5", "--spares", "1", "--size", "8M",
    ];
    let members: Vec<String> = (0..5)
        .map(|i| dir.join(format!("m{i}.img")).display().to_string())
        .collect();
    for m in &members {
        create.extend(["--member", m.as_str()]);
    }
    ok(dir, &create);
    std::fs::write(dir.join("aa.bin"), vec![0xaau8; 65536]).unwrap();
    ok(
        dir,
        &["io", "write", &p, "--offset", "0", "--input", "aa.bin"],
    );
    ok(dir, &["fail", &p, "--member", "0"]);
    ok(dir, &["rebuild", &p]);
    let r0 = dir.join("r0.img").display().to_string();
    ok(dir, &["replace", &p, "--member", "0", "--with", &r0]);

    // The copy-back is this test's to pace (a self-healing server would resume it at once,
    // at full speed).
    let server = Server::start(dir, &pool, &["--no-auto-heal"]);
    // The copy-back, one cycle a step at one byte a second: after its first step it waits.
    let mut copyback = Command::new(env!("CARGO_BIN_EXE_raidforge"))
        .args(["rebuild", &p, "--parallel", "1", "--speed-max", "1"])
        .current_dir(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while status(dir, &pool)["cycles_clean"].as_u64().unwrap() < 1 {
        assert!(
            Instant::now() < deadline,
            "the copy-back never moved cycle 0"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut c = server.client();
    c.write_at(&vec![0xbbu8; 65536], 0, false).unwrap();
    c.flush().unwrap();
    drop(c);
    server.kill();
    let _ = copyback.kill();
    let _ = copyback.wait();

    assert_filled(
        &read(dir, &pool, 0, 65536),
        0xbb,
        "the flushed write after the kill",
    );
    let v = ok(dir, &["verify", &p]);
    assert!(v.contains("0 inconsistent"), "verify after the kill: {v}");
    // The copy-back resumes and ends with the write in place; then the pool survives losing
    // another member.
    ok(dir, &["rebuild", &p]);
    assert_filled(&read(dir, &pool, 0, 65536), 0xbb, "after the copy-back");
    ok(dir, &["fail", &p, "--member", "1"]);
    assert_filled(&read(dir, &pool, 0, 65536), 0xbb, "member 1 failed");
    // Never written: zeros, reconstructed through the parity (0xaa ^ 0xbb if it is stale).
    assert_filled(
        &read(dir, &pool, 65536, 65536),
        0,
        "the unwritten chunk on the failed member",
    );
    let out = raidforge(dir, &["status", &p]);
    assert!(out.status.success());
}
