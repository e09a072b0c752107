//! A served pool that heals itself (issue 25), through the real path: a RAID6 pool of five
//! members that are NBD exports of nbdkit (the file plugin behind the error filter, switched
//! on by touching an `error-file`), one hot spare, `raidforge serve --events --on-event`, and
//! clients on raidforge's export (the project's NBD client, and fio with crc32c verification
//! when installed). No pool command is typed after `serve`: errors are switched on for one
//! member, the server fails it, puts the spare in its place and rebuilds; then for a second
//! member, which the server fails and serves without (no spare is left). Every byte written is
//! read back and compared at each stage; the events file and the `--on-event` program's log
//! hold the sequence; `status --json` (through the control socket) shows the spare, the
//! automatic rebuild and why it started.
//!
//! Also: sockets owner-only, and a warning for a non-loopback `--listen`.
//!
//! nbdkit (and fio) missing: the test fails under CI and is skipped with a note otherwise.

mod common;

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{json, pattern, TempDir};
use nbd::client::{Address, Client};
use serde_json::Value;

/// A client tool; .ci/run installs them for CI.
fn tool(name: &str) -> Option<PathBuf> {
    common::tool(name, ".ci/run installs nbdkit and fio")
}

/// Processes killed when the test ends.
struct Kids(Vec<Child>);

impl Drop for Kids {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn wait_for_socket(p: &Path) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::os::unix::net::UnixStream::connect(p).is_err() {
        assert!(Instant::now() < deadline, "{} never answered", p.display());
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Reads the whole export in 1 MiB pieces and compares it with `want`.
fn check_all(c: &mut Client, want: &[u8], what: &str) {
    let mut got = vec![0u8; 1 << 20];
    for (i, w) in want.chunks(1 << 20).enumerate() {
        let off = (i as u64) << 20;
        c.read_at(&mut got[..w.len()], off)
            .unwrap_or_else(|e| panic!("{what}: reading at {off}: {e}"));
        assert!(got[..w.len()] == *w, "{what}: bytes at {off} differ");
    }
}

/// Event kinds in the `--events` file, in order.
fn events(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("event line {l:?}: {e}")))
        .collect()
}

fn kinds(ev: &[Value]) -> Vec<String> {
    ev.iter()
        .map(|e| e["event"].as_str().unwrap().to_string())
        .collect()
}

fn wait_for_event(path: &Path, kind: &str, count: usize, what: &str) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let ev = events(path);
        if kinds(&ev).iter().filter(|k| *k == kind).count() >= count {
            return ev;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: no {kind} event #{count} within 120 s; events so far: {:?}",
            kinds(&ev)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// fio with crc32c verification on a region of the export (bounded in time).
fn fio_verify(fio: &Path, uri: &str, offset: u64, size: u64, seed: u64) {
    let child = Command::new(fio)
        .args([
            "--output-format=json",
            "--ioengine=nbd",
            &format!("--uri={uri}"),
            "--verify=crc32c",
            "--verify_fatal=1",
            "--verify_state_save=0",
            "--iodepth=8",
            &format!("--randseed={seed}"),
            "--name=rand",
            "--rw=randwrite",
            "--bsrange=4k-64k",
            &format!("--offset={offset}"),
            &format!("--size={size}"),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start fio");
    let j = common::fio_json(child, Duration::from_secs(120), "verify");
    let job = &j["jobs"][0];
    assert_eq!(job["error"], 0, "fio reported an error");
    let written = job["write"]["io_bytes"].as_u64().unwrap();
    let verified = job["read"]["io_bytes"].as_u64().unwrap();
    assert!(
        written > 0 && written == verified,
        "fio: written {written}, verified {verified}"
    );
}

#[test]
fn raid6_over_nbdkit_members_fails_two_members_rebuilds_onto_the_spare_without_a_command() {
    let (Some(nbdkit), Some(fio)) = (tool("nbdkit"), tool("fio")) else {
        return;
    };
    let td = TempDir::new("heal", "raid6");
    let dir = td.path();
    let mut kids = Kids(Vec::new());
    let member_bytes: u64 = 24 << 20;
    let mut uris = Vec::new();
    for i in 0..5 {
        let img = dir.join(format!("m{i}.img"));
        std::fs::File::create(&img)
            .unwrap()
            .set_len(member_bytes)
            .unwrap();
        let sock = dir.join(format!("m{i}.sock"));
        let child = Command::new(&nbdkit)
            .args(["-f", "--exit-with-parent", "-U"])
            .arg(&sock)
            .args(["--filter=error", "file"])
            .arg(&img)
            .arg("error-rate=100%")
            .arg(format!(
                "error-file={}",
                dir.join(format!("inject{i}")).display()
            ))
            .stdin(Stdio::null())
            // One line per injected error otherwise.
            .stderr(Stdio::null())
            .spawn()
            .expect("start nbdkit");
        kids.0.push(child);
        wait_for_socket(&sock);
        uris.push(format!("nbd+unix:///?socket={}", sock.display()));
    }
    let spare = dir.join("spare.img");
    std::fs::File::create(&spare)
        .unwrap()
        .set_len(member_bytes)
        .unwrap();
    let mut args: Vec<String> = ["create", "p.json", "--scheme", "raid6", "--disks", "5"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    for u in &uris {
        args.push("--member".into());
        args.push(u.clone());
    }
    args.extend(["--chunk", "64K", "--spare", "spare.img", "--json"].map(String::from));
    let a: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
    let st = json(dir, &a);
    assert_eq!(st["state"], "clean");
    assert_eq!(st["spares"].as_array().unwrap().len(), 1, "{st}");

    let ev_file = dir.join("events.jsonl");
    let prog_log = dir.join("program.log");
    let nbd_sock = dir.join("p.sock");
    let mut serve = Command::new(env!("CARGO_BIN_EXE_raidforge"))
        .current_dir(dir)
        .args(["serve", "p.json", "--socket"])
        .arg(&nbd_sock)
        .arg("--events")
        .arg(&ev_file)
        .arg("--on-event")
        .arg(format!(
            "echo \"$RAIDFORGE_EVENT $RAIDFORGE_MEMBER\" >> {}",
            prog_log.display()
        ))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start raidforge serve");
    let out = serve.stdout.take().unwrap();
    kids.0.push(serve);
    let mut lines = BufReader::new(out).lines();
    loop {
        match lines.next() {
            Some(Ok(l)) if l == "ready" => break,
            Some(Ok(_)) => {}
            _ => panic!("raidforge serve ended before it was ready"),
        }
    }
    std::thread::spawn(move || for _ in lines {});

    // Owner-only sockets.
    for s in [&nbd_sock, &dir.join("p.json.ctl")] {
        let mode = std::fs::metadata(s).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{} has mode {mode:o}", s.display());
    }

    let addr = Address::parse(&format!("nbd+unix:///?socket={}", nbd_sock.display())).unwrap();
    let mut c = Client::connect(&addr).unwrap();
    let cap = c.size();
    let mut data = pattern(1, cap as usize);
    for (i, piece) in data.chunks(1 << 20).enumerate() {
        c.write_at(piece, (i as u64) << 20, false).unwrap();
    }
    c.flush().unwrap();
    check_all(&mut c, &data, "healthy");
    assert!(events(&ev_file).is_empty(), "{:?}", events(&ev_file));

    // Member 1 starts failing every I/O. The next reads touching it fail it (the repair's
    // write fails); the spare takes its place and the rebuild runs, with fio verifying its
    // own writes on the export meanwhile.
    std::fs::write(dir.join("inject1"), b"").unwrap();
    check_all(&mut c, &data, "member 1 failing");
    let uri = format!("nbd+unix:///?socket={}", nbd_sock.display());
    let fio_region = 8u64 << 20;
    fio_verify(&fio, &uri, 0, fio_region, 7);
    let ev = wait_for_event(&ev_file, "RebuildFinished", 1, "first failure");
    assert_eq!(
        kinds(&ev),
        [
            "Fail",
            "DegradedArray",
            "SpareActive",
            "RebuildStarted",
            "RebuildFinished"
        ],
        "{ev:?}"
    );
    assert_eq!(ev[0]["member"], 1);
    assert_eq!(ev[2]["member"], 1);
    assert!(ev[2]["spare"].as_str().unwrap().ends_with("spare.img"));
    assert!(ev[3]["detail"]
        .as_str()
        .unwrap()
        .contains("member 1 failed; spare"));
    // fio's region holds fio's bytes now: take them as the reference there.
    let mut fio_bytes = vec![0u8; fio_region as usize];
    c.read_at(&mut fio_bytes, 0).unwrap();
    data[..fio_region as usize].copy_from_slice(&fio_bytes);
    check_all(&mut c, &data, "after the rebuild onto the spare");

    let st = json(dir, &["status", "p.json", "--json"]);
    assert_eq!(st["state"], "clean", "{st}");
    assert!(st["members"][1]["path"]
        .as_str()
        .unwrap()
        .ends_with("spare.img"));
    assert_eq!(st["spares"].as_array().unwrap().len(), 0);
    let heal = &st["auto_heal"];
    assert_eq!(heal["enabled"], true);
    assert_eq!(heal["rebuilds_started"], 1);
    assert!(heal["last_rebuild_reason"]
        .as_str()
        .unwrap()
        .contains("member 1 failed"));
    assert_eq!(st["fault_tolerance"], 2);

    // Member 3 fails too: no spare is left, the pool serves degraded.
    std::fs::write(dir.join("inject3"), b"").unwrap();
    check_all(&mut c, &data, "member 3 failing");
    let ev = wait_for_event(&ev_file, "NoSpare", 1, "second failure");
    assert_eq!(
        kinds(&ev)[5..],
        ["Fail", "DegradedArray", "NoSpare"],
        "{ev:?}"
    );
    assert_eq!(ev[5]["member"], 3);
    fio_verify(&fio, &uri, fio_region, fio_region, 8);
    let mut fio_bytes = vec![0u8; fio_region as usize];
    c.read_at(&mut fio_bytes, fio_region).unwrap();
    data[fio_region as usize..2 * fio_region as usize].copy_from_slice(&fio_bytes);
    check_all(&mut c, &data, "degraded after the second failure");
    let st = json(dir, &["status", "p.json", "--json"]);
    assert_eq!(st["state"], "degraded", "{st}");
    assert_eq!(st["failed"], serde_json::json!([3]));
    assert_eq!(st["fault_tolerance"], 1);

    // The --on-event program ran once per event, with the details in its environment.
    let deadline = Instant::now() + Duration::from_secs(10);
    let want = [
        "Fail 1",
        "DegradedArray ",
        "SpareActive 1",
        "RebuildStarted ",
        "RebuildFinished ",
        "Fail 3",
        "DegradedArray ",
        "NoSpare 3",
    ];
    loop {
        let mut got: Vec<String> = std::fs::read_to_string(&prog_log)
            .unwrap_or_default()
            .lines()
            .map(String::from)
            .collect();
        if got.len() >= want.len() || Instant::now() > deadline {
            // The programs run concurrently: compare as sets of lines.
            got.sort();
            let mut w: Vec<String> = want.iter().map(|s| s.to_string()).collect();
            w.sort();
            assert_eq!(got, w);
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(c);
    drop(kids);
}

#[test]
fn a_non_loopback_listen_without_tls_is_warned_about() {
    let td = TempDir::new("heal", "listen");
    let dir = td.path();
    let mut args = vec!["create", "p.json", "--scheme", "raid5", "--disks", "3"];
    let names = ["a.img", "b.img", "c.img"];
    for n in &names {
        args.extend(["--member", n]);
    }
    args.extend(["--size", "8M", "--json"]);
    json(dir, &args);
    let mut serve = Command::new(env!("CARGO_BIN_EXE_raidforge"))
        .current_dir(dir)
        .args(["serve", "p.json", "--listen", "0.0.0.0:0"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = serve.stdout.take().unwrap();
    let err = serve.stderr.take().unwrap();
    let mut kids = Kids(vec![serve]);
    for l in BufReader::new(out).lines() {
        if l.unwrap() == "ready" {
            break;
        }
    }
    let _ = kids.0[0].kill();
    let _ = kids.0[0].wait();
    let stderr: Vec<String> = BufReader::new(err).lines().map_while(Result::ok).collect();
    assert!(
        stderr
            .iter()
            .any(|l| l.contains("warning") && l.contains("plain text")),
        "{stderr:?}"
    );
}
