//! `raidforge serve` with real NBD clients: libnbd's nbdinfo and nbdcopy, QEMU's qemu-img and
//! qemu-io, and fio's nbd engine with verification, on RAID5, RAID6, RAID+ and S2-RAID pools:
//! healthy, with a member failed mid-run and during a rebuild that starts mid-run (both through
//! the control socket, with `raidforge fail/replace/rebuild`). Also: protocol errors from a
//! hand-made client against the running server, clean shutdown on SIGTERM, and data flushed
//! before a SIGKILL surviving it.
//!
//! Every server listens on a Unix socket in a temporary directory or on 127.0.0.1 only, and is
//! killed when its test ends. A missing client tool fails the test under CI (env CI set) and
//! skips it with a note otherwise.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use nbd::proto::*;
use serde_json::Value;

// ---------- helpers ----------

mod common;

use common::{json_here, ok_here, pattern, run, TempDir};

/// A client tool; .ci/run installs them for CI.
fn tool(name: &str) -> Option<PathBuf> {
    common::tool(name, ".ci/run installs libnbd-bin, qemu-utils, fio")
}

fn run_tool(cmd: &mut Command) -> String {
    let out = cmd.output().expect("client tool runs");
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Creates a pool of `n` members of `member` bytes in `dir`; returns its descriptor path.
fn create(dir: &TempDir, name: &str, layout: &[&str], n: usize, member: &str) -> PathBuf {
    let pool = dir.join(&format!("{name}.json"));
    let mut args: Vec<String> = vec!["create".into(), pool.display().to_string()];
    args.extend(layout.iter().map(|s| s.to_string()));
    for i in 0..n {
        args.push("--member".into());
        args.push(dir.join(&format!("{name}-m{i}.img")).display().to_string());
    }
    args.extend([
        "--size".into(),
        member.into(),
        "--chunk".into(),
        "64K".into(),
        "--json".into(),
    ]);
    let a: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
    let st = json_here(&a);
    assert_eq!(st["state"], "clean");
    pool
}

/// A running `raidforge serve`; killed when dropped.
struct Served {
    child: Option<Child>,
    socket: PathBuf,
    tcp: Option<String>,
    stderr: mpsc::Receiver<String>,
}

impl Served {
    fn start(pools: &[&Path], socket: &Path, tcp: bool, extra: &[&str]) -> Served {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_raidforge"));
        cmd.arg("serve");
        for p in pools {
            cmd.arg(p);
        }
        cmd.arg("--socket").arg(socket);
        if tcp {
            cmd.args(["--listen", "127.0.0.1:0"]);
        }
        cmd.args(extra);
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start raidforge serve");
        let rx = common::line_channel(child.stdout.take().unwrap());
        let erx = common::line_channel(child.stderr.take().unwrap());
        let mut tcp_addr = None;
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = match rx.recv_timeout(left) {
                Ok(l) => l,
                Err(_) => {
                    let _ = child.kill();
                    let errs: Vec<String> = erx.try_iter().collect();
                    panic!("raidforge serve did not get ready: {}", errs.join("\n"));
                }
            };
            if let Some(rest) = line.strip_prefix("listening on nbd://") {
                tcp_addr = Some(rest.trim_end_matches('/').to_string());
            }
            if line == "ready" {
                break;
            }
        }
        Served {
            child: Some(child),
            socket: socket.to_path_buf(),
            tcp: tcp_addr,
            stderr: erx,
        }
    }

    fn unix_uri(&self, export: &str) -> String {
        format!("nbd+unix:///{export}?socket={}", self.socket.display())
    }

    fn tcp_uri(&self, export: &str) -> String {
        format!("nbd://{}/{export}", self.tcp.as_ref().expect("serving TCP"))
    }

    fn alive(&mut self) -> bool {
        matches!(self.child.as_mut().unwrap().try_wait(), Ok(None))
    }

    /// Sends `sig` and waits (bounded) for the exit status.
    fn signal_and_wait(&mut self, sig: i32) -> std::process::ExitStatus {
        let mut child = self.child.take().unwrap();
        // SAFETY: sending a signal to our own child process.
        unsafe {
            libc::kill(child.id() as i32, sig);
        }
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(st) = child.try_wait().unwrap() {
                return st;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("raidforge serve did not exit after signal {sig}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn stderr_lines(&self) -> Vec<String> {
        self.stderr.try_iter().collect()
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

// ---------- nbdinfo, nbdcopy, qemu ----------

#[test]
fn nbdinfo_nbdcopy_qemu_on_two_exports_and_clean_shutdown() {
    let (Some(nbdinfo), Some(nbdcopy), Some(qemu_img), Some(qemu_io)) = (
        tool("nbdinfo"),
        tool("nbdcopy"),
        tool("qemu-img"),
        tool("qemu-io"),
    ) else {
        return;
    };
    let dir = TempDir::new("cli-serve", "clients");
    let a = create(
        &dir,
        "alpha",
        &["--scheme", "raid5", "--disks", "4"],
        4,
        "6M",
    );
    let b = create(
        &dir,
        "beta",
        &["--scheme", "raid6", "--disks", "5"],
        5,
        "6M",
    );
    let size_a = json_here(&["status", a.to_str().unwrap(), "--json"])["size_bytes"]
        .as_u64()
        .unwrap();
    let size_b = json_here(&["status", b.to_str().unwrap(), "--json"])["size_bytes"]
        .as_u64()
        .unwrap();
    let mut srv = Served::start(
        &[&a, &b],
        &dir.join("s.sock"),
        true,
        &["--export", "alpha", "--export", "bravo"],
    );

    // nbdinfo lists both exports with their sizes, on both transports.
    let list = run_tool(
        Command::new(&nbdinfo)
            .arg("--list")
            .arg(format!("nbd+unix://?socket={}", srv.socket.display())),
    );
    assert!(
        list.contains("export=\"alpha\"") && list.contains("export=\"bravo\""),
        "{list}"
    );
    assert!(
        list.contains(&size_a.to_string()) && list.contains(&size_b.to_string()),
        "{list}"
    );
    for (uri, size) in [
        (srv.unix_uri("alpha"), size_a),
        (srv.tcp_uri("bravo"), size_b),
        (srv.tcp_uri(""), size_a),
    ] {
        let s = run_tool(Command::new(&nbdinfo).arg("--size").arg(&uri));
        assert_eq!(s.trim(), size.to_string(), "{uri}");
    }

    // nbdcopy a random file in and out of alpha, byte-exactly.
    let data = pattern(1, size_a as usize);
    let src = dir.join("in.bin");
    std::fs::write(&src, &data).unwrap();
    run_tool(Command::new(&nbdcopy).arg(&src).arg(srv.unix_uri("alpha")));
    let back = dir.join("out.bin");
    run_tool(Command::new(&nbdcopy).arg(srv.unix_uri("alpha")).arg(&back));
    assert!(
        std::fs::read(&back).unwrap() == data,
        "nbdcopy round trip differs"
    );

    // qemu-img convert in and out of bravo over TCP; qemu-io patterns at unaligned places.
    let qdata = pattern(2, size_b as usize);
    let qsrc = dir.join("q.raw");
    std::fs::write(&qsrc, &qdata).unwrap();
    run_tool(
        Command::new(&qemu_img)
            .args(["convert", "-n", "-f", "raw", "-O", "raw"])
            .arg(&qsrc)
            .arg(srv.tcp_uri("bravo")),
    );
    let qback = dir.join("qback.raw");
    run_tool(
        Command::new(&qemu_img)
            .args(["convert", "-f", "raw", "-O", "raw"])
            .arg(srv.tcp_uri("bravo"))
            .arg(&qback),
    );
    assert!(
        std::fs::read(&qback).unwrap() == qdata,
        "qemu-img round trip differs"
    );
    let w = run_tool(
        Command::new(&qemu_io)
            .args([
                "-f",
                "raw",
                "-c",
                "write -P 0xa5 70001 200000",
                "-c",
                "write -z 300000 65536",
                "-c",
                "flush",
            ])
            .arg(srv.tcp_uri("bravo")),
    );
    assert!(w.contains("wrote"), "{w}");
    let r = run_tool(
        Command::new(&qemu_io)
            .args([
                "-f",
                "raw",
                "-c",
                "read -P 0xa5 70001 200000",
                "-c",
                "read -P 0 300000 65536",
            ])
            .arg(srv.unix_uri("bravo")),
    );
    assert!(!r.contains("Pattern verification failed"), "{r}");

    // Clean shutdown on SIGTERM: exit 0, pools clean, data there when opened directly.
    let st = srv.signal_and_wait(libc::SIGTERM);
    assert!(
        st.success(),
        "serve exited with {st}: {:?}",
        srv.stderr_lines()
    );
    assert!(
        !dir.join("alpha.json.ctl").exists(),
        "control socket removed"
    );
    for p in [&a, &b] {
        let s = json_here(&["status", p.to_str().unwrap(), "--json"]);
        assert_eq!(s["state"], "clean");
        let v = json_here(&["verify", p.to_str().unwrap(), "--json"]);
        assert_eq!(v["inconsistent"].as_array().unwrap().len(), 0);
    }
    let out = dir.join("direct.bin");
    ok_here(&[
        "io",
        "read",
        b.to_str().unwrap(),
        "--offset",
        "70001",
        "--length",
        "200000",
        "--output",
        out.to_str().unwrap(),
    ]);
    assert!(std::fs::read(&out).unwrap().iter().all(|&x| x == 0xa5));
}

// ---------- block status, sparse copies and several connections ----------

/// `nbdinfo --map` lines: (offset, length, type); 3 is a hole that reads as zeros, 0 data.
fn map_entries(map: &str) -> Vec<(u64, u64, u32)> {
    map.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (
                f[0].parse().unwrap(),
                f[1].parse().unwrap(),
                f[2].parse().unwrap(),
            )
        })
        .collect()
}

/// Bytes read from the members of a served pool so far (its status through the control
/// socket).
fn member_read_bytes(pool: &Path) -> u64 {
    let st = json_here(&["status", pool.to_str().unwrap(), "--json"]);
    st["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["read_bytes"].as_u64().unwrap())
        .sum()
}

/// (apparent size, bytes allocated) of a file.
fn sizes(path: &Path) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).unwrap();
    (m.len(), m.blocks() * 512)
}

/// A sparse pool with a little data: `nbdinfo` shows the `base:allocation` context and
/// `can_multi_conn`, and maps holes where nothing was written and data where it was;
/// `nbdcopy` (one and four connections) and `qemu-img convert` copy it byte for byte like a
/// full read, into sparse files, reading only the stripes that hold data; `nbdcopy
/// --connections=4` writes and reads the whole export back.
#[test]
fn block_status_sparse_copies_and_multi_conn() {
    let (Some(nbdinfo), Some(nbdcopy), Some(qemu_img)) =
        (tool("nbdinfo"), tool("nbdcopy"), tool("qemu-img"))
    else {
        return;
    };
    let dir = TempDir::new("cli-serve", "bstatus");
    let pool = create(&dir, "sp", &["--scheme", "raid5", "--disks", "4"], 4, "16M");
    for i in 0..4 {
        let (apparent, allocated) = sizes(&dir.join(&format!("sp-m{i}.img")));
        assert!(
            apparent == 16 << 20 && allocated < 1 << 20,
            "member {i} is not sparse: {allocated} of {apparent} bytes allocated"
        );
    }
    let size = json_here(&["status", pool.to_str().unwrap(), "--json"])["size_bytes"]
        .as_u64()
        .unwrap();
    let writes = [
        (1u64 << 20, 100_000usize),
        (20_000_000, 5000),
        (size - 4096, 4096),
    ];
    for (i, &(off, len)) in writes.iter().enumerate() {
        common::write(
            &dir.0,
            pool.to_str().unwrap(),
            off,
            &pattern(10 + i as u64, len),
        );
    }
    let srv = Served::start(&[&pool], &dir.join("s.sock"), false, &[]);
    let uri = srv.unix_uri("sp");

    let info = run_tool(Command::new(&nbdinfo).arg(&uri));
    for want in ["base:allocation", "can_multi_conn: true"] {
        assert!(info.contains(want), "missing {want} in\n{info}");
    }
    let map = run_tool(Command::new(&nbdinfo).arg("--map").arg(&uri));
    eprintln!("nbdinfo --map:\n{map}");
    let entries = map_entries(&map);
    let mut at = 0;
    for &(off, len, _) in &entries {
        assert_eq!(off, at, "{map}");
        at += len;
    }
    assert_eq!(at, size, "{map}");
    assert!(entries.iter().all(|e| e.2 == 0 || e.2 == 3), "{map}");
    // Every written byte is in a data run; data runs are the written stripes (3 chunks of
    // 64 KiB on 4-member RAID5), holes the rest.
    for &(off, len) in &writes {
        let end = off + len as u64;
        assert!(
            entries
                .iter()
                .filter(|e| e.0 < end && off < e.0 + e.1)
                .all(|e| e.2 == 0),
            "written {off}+{len} is not all data:\n{map}"
        );
    }
    let data: u64 = entries.iter().filter(|e| e.2 == 0).map(|e| e.1).sum();
    assert!(
        data > 0 && data <= 4 * 3 * (64 << 10),
        "{data} bytes of data:\n{map}"
    );

    // Copies, each compared with a full read (nbdcopy --no-extents reads every byte).
    let full = dir.join("full.raw");
    let before = member_read_bytes(&pool);
    run_tool(
        Command::new(&nbdcopy)
            .arg("--no-extents")
            .arg(&uri)
            .arg(&full),
    );
    let read_full = member_read_bytes(&pool) - before;
    assert!(read_full >= size, "a full read read {read_full} bytes");
    let whole = std::fs::read(&full).unwrap();
    for (i, &(off, len)) in writes.iter().enumerate() {
        assert!(whole[off as usize..off as usize + len] == pattern(10 + i as u64, len)[..]);
    }
    for (what, out, args) in [
        ("nbdcopy", "c.raw", vec![]),
        ("nbdcopy", "c4.raw", vec!["--connections=4"]),
        (
            "qemu-img",
            "q.raw",
            vec!["convert", "-f", "raw", "-O", "raw"],
        ),
    ] {
        let dst = dir.join(out);
        let before = member_read_bytes(&pool);
        let tool = if what == "nbdcopy" {
            &nbdcopy
        } else {
            &qemu_img
        };
        run_tool(Command::new(tool).args(&args).arg(&uri).arg(&dst));
        let read = member_read_bytes(&pool) - before;
        assert!(
            std::fs::read(&dst).unwrap() == whole,
            "{what} {args:?}: the copy differs from a full read"
        );
        let (apparent, allocated) = sizes(&dst);
        eprintln!(
            "{what} {args:?}: apparent {apparent} bytes, allocated {allocated}, \
             {read} bytes read from the members"
        );
        assert_eq!(apparent, size);
        assert!(
            allocated < 1 << 20,
            "{what} {args:?}: {allocated} bytes allocated"
        );
        // Clients read in their own request sizes around the data runs; a copy that read
        // the holes would read the whole export, as the full read did.
        assert!(
            read < size / 10,
            "{what} {args:?} read {read} bytes of the members ({data} bytes of data, a full \
             read {read_full})"
        );
    }

    // Four connections write the whole export and read it back.
    let rnd = pattern(99, size as usize);
    let src = dir.join("rnd.bin");
    std::fs::write(&src, &rnd).unwrap();
    run_tool(
        Command::new(&nbdcopy)
            .arg("--connections=4")
            .arg(&src)
            .arg(&uri),
    );
    let back = dir.join("back.raw");
    run_tool(
        Command::new(&nbdcopy)
            .arg("--connections=4")
            .arg(&uri)
            .arg(&back),
    );
    assert!(
        std::fs::read(&back).unwrap() == rnd,
        "nbdcopy -C 4 round trip differs"
    );
    let map = run_tool(Command::new(&nbdinfo).arg("--map").arg(&uri));
    assert_eq!(map_entries(&map), vec![(0, size, 0)], "{map}");
    drop(srv);
    let v = json_here(&["verify", pool.to_str().unwrap(), "--json"]);
    assert_eq!(v["inconsistent"].as_array().unwrap().len(), 0);
}

// ---------- fio through failures and rebuilds ----------

/// Runs fio (random writes of 4-64 KiB and sequential 128 KiB writes on two regions, each
/// verified with crc32c as it goes and after each loop) and returns (bytes written, bytes
/// verified). Panics on any error.
fn fio_start(fio: &Path, uri: &str, capacity: u64, seed: u64) -> Child {
    let region = (capacity * 2 / 5) / (1 << 20) * (1 << 20);
    Command::new(fio)
        .args([
            "--output-format=json",
            "--ioengine=nbd",
            &format!("--uri={uri}"),
            "--verify=crc32c",
            "--verify_fatal=1",
            // No verify state files left in the working directory.
            "--verify_state_save=0",
            "--verify_backlog=32",
            "--iodepth=16",
            "--loops=2",
            "--rate=6m",
            &format!("--randseed={seed}"),
            "--name=rand",
            "--rw=randwrite",
            "--bsrange=4k-64k",
            "--offset=0",
            &format!("--size={region}"),
            "--name=seq",
            "--rw=write",
            "--bs=128k",
            &format!("--offset={region}"),
            &format!("--size={region}"),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start fio")
}

fn fio_finish(child: Child, what: &str) -> (u64, u64) {
    // Bounded: fio runs a few seconds; kill it if it hangs.
    let j = common::fio_json(child, Duration::from_secs(60), what);
    let mut written = 0;
    let mut verified = 0;
    for job in j["jobs"].as_array().unwrap() {
        assert_eq!(
            job["error"], 0,
            "fio ({what}) job {} reported an error",
            job["jobname"]
        );
        assert_eq!(
            job["write"]["total_ios"].as_u64().map(|n| n > 0),
            Some(true)
        );
        written += job["write"]["io_bytes"].as_u64().unwrap();
        verified += job["read"]["io_bytes"].as_u64().unwrap();
    }
    // Every byte written was read back and checked.
    assert_eq!(
        written, verified,
        "fio ({what}): written {written}, verified {verified}"
    );
    eprintln!(
        "fio {what}: {written} bytes written, {verified} bytes verified, 0 verification errors"
    );
    (written, verified)
}

/// What the server of `pool` says through its control socket: NBD requests answered so far
/// and whether a rebuild is running.
struct ServedCounters {
    requests: u64,
    rebuild_running: bool,
}

fn served(pool: &Path) -> ServedCounters {
    let ctl = PathBuf::from(format!("{}.ctl", pool.display()));
    let mut s = std::os::unix::net::UnixStream::connect(&ctl)
        .unwrap_or_else(|e| panic!("{}: {e}", ctl.display()));
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s.write_all(b"{\"op\": \"status\"}\n").unwrap();
    let mut line = String::new();
    BufReader::new(&s).read_line(&mut line).unwrap();
    let v: Value = serde_json::from_str(&line).expect("control socket JSON");
    assert_eq!(v["ok"], true, "{v}");
    ServedCounters {
        requests: v["server"]["requests"].as_u64().expect("server.requests"),
        rebuild_running: v["rebuild"]["running"].as_bool().expect("rebuild.running"),
    }
}

/// Waits until the server of `pool` has answered `n` requests in all, while `fio` runs (it
/// fails if fio ends first).
fn wait_for_requests(pool: &Path, n: u64, fio: &mut Child, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if served(pool).requests >= n {
            return;
        }
        assert!(
            matches!(fio.try_wait(), Ok(None)),
            "fio ended before the server answered {n} requests ({what})"
        );
        assert!(
            Instant::now() < deadline,
            "{n} requests not reached ({what})"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Polls the server of `pool` until `rebuild` (a `raidforge rebuild` child) ends; returns it
/// and the first and last request counts seen while the server reported its rebuild running.
fn watch_rebuild(pool: &Path, mut rebuild: Child) -> (Child, Option<(u64, u64)>) {
    let mut during: Option<(u64, u64)> = None;
    let deadline = Instant::now() + Duration::from_secs(120);
    while matches!(rebuild.try_wait(), Ok(None)) {
        let c = served(pool);
        if c.rebuild_running {
            during = Some((during.map_or(c.requests, |d| d.0), c.requests));
        }
        if Instant::now() > deadline {
            let _ = rebuild.kill();
            panic!("the rebuild did not end within 120 s");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    (rebuild, during)
}

fn fio_scenarios(name: &str, layout: &[&str], n: usize) {
    let Some(fio) = tool("fio") else { return };
    let dir = TempDir::new("cli-serve", name);
    let pool = create(&dir, name, layout, n, "8M");
    let p = pool.to_str().unwrap();
    let capacity = json_here(&["status", p, "--json"])["size_bytes"]
        .as_u64()
        .unwrap();
    let mut srv = Served::start(&[&pool], &dir.join("s.sock"), false, &[]);
    let uri = srv.unix_uri(name);

    // Healthy.
    fio_finish(
        fio_start(&fio, &uri, capacity, 1),
        &format!("{name} healthy"),
    );

    // A member fails mid-run (through the control socket), once the server has answered a
    // first batch of fio's requests; fio's requests go on being answered after the failure.
    let mut f = fio_start(&fio, &uri, capacity, 2);
    let before = served(&pool).requests;
    wait_for_requests(&pool, before + 64, &mut f, "before the failure");
    let st = json_here(&["fail", p, "--member", "1", "--json"]);
    assert_eq!(st["state"], "degraded", "{st}");
    let at_fail = served(&pool).requests;
    fio_finish(f, &format!("{name} member failed mid-run"));
    let after = served(&pool).requests;
    assert!(
        after > at_fail,
        "{name}: no request of fio was answered after the failure ({at_fail} then {after})"
    );

    // Replacement and rebuild start mid-run; the rebuild is slowed so that it overlaps with
    // fio, and the server's request count must grow while the rebuild runs.
    let mut f = fio_start(&fio, &uri, capacity, 3);
    let before = served(&pool).requests;
    wait_for_requests(&pool, before + 64, &mut f, "before the replacement");
    let new = dir.join("new1.img");
    let st = json_here(&[
        "replace",
        p,
        "--member",
        "1",
        "--with",
        new.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(st["members"][1]["state"], "rebuilding", "{st}");
    let rebuild = Command::new(env!("CARGO_BIN_EXE_raidforge"))
        .args([
            "rebuild",
            p,
            "--speed-max",
            "4M",
            "--parallel",
            "2",
            "--json",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start raidforge rebuild");
    // Requests answered while the server said its rebuild was running: the first and the
    // last count seen then (polled until the rebuild command ends).
    let (rebuild, during) = watch_rebuild(&pool, rebuild);
    let out = rebuild.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "rebuild: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = String::from_utf8_lossy(&out.stdout).into_owned();
    let (first, last) = during.expect("the rebuild was never seen running");
    eprintln!(
        "{name}: {} requests answered during the rebuild",
        last - first
    );
    assert!(
        last > first,
        "{name}: no client request was answered while the rebuild ran"
    );
    let last: Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();
    assert_eq!(last["done"], true);
    assert_eq!(last["state"], "clean", "{out}");
    assert!(last["bytes_written"].as_u64().unwrap() > 0);
    let (rebuilt, elapsed) = (last["rebuilt_s"].as_f64(), last["elapsed_s"].as_f64());
    assert!(
        rebuilt.zip(elapsed).is_some_and(|(r, e)| r > 0.0 && r <= e),
        "{out}"
    );
    fio_finish(f, &format!("{name} during rebuild"));

    // Parity everywhere agrees, checked by the server while it serves.
    let v = json_here(&["verify", p, "--json"]);
    assert_eq!(v["inconsistent"].as_array().unwrap().len(), 0, "{v}");
    assert_eq!(v["stripes_degraded"], 0);
    assert!(srv.alive());
    let st = srv.signal_and_wait(libc::SIGINT);
    assert!(st.success(), "{:?}", srv.stderr_lines());
    assert_eq!(json_here(&["status", p, "--json"])["state"], "clean");
}

#[test]
fn fio_raid5() {
    fio_scenarios("raid5", &["--scheme", "raid5", "--disks", "5"], 5);
}

#[test]
fn fio_raid6() {
    fio_scenarios("raid6", &["--scheme", "raid6", "--disks", "6"], 6);
}

#[test]
fn fio_raidplus() {
    fio_scenarios(
        "raidplus",
        &["--scheme", "raidplus", "--disks", "5", "--width", "3"],
        5,
    );
}

#[test]
fn fio_s2raid() {
    fio_scenarios(
        "s2raid",
        &[
            "--scheme",
            "s2raid5",
            "--disks",
            "9",
            "--group",
            "3",
            "--partitions",
            "3",
        ],
        9,
    );
}

// ---------- protocol errors against the real server ----------

struct Raw(std::net::TcpStream);

impl Raw {
    fn connect(addr: &str) -> Raw {
        let s = std::net::TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut r = Raw(s);
        let g = r.read_n(18);
        assert_eq!(&g[..8], b"NBDMAGIC");
        r
    }
    fn send(&mut self, b: &[u8]) {
        self.0.write_all(b).unwrap();
    }
    fn read_n(&mut self, n: usize) -> Vec<u8> {
        let mut b = vec![0u8; n];
        self.0.read_exact(&mut b).unwrap();
        b
    }
    fn opt(&mut self, option: u32, data: &[u8]) {
        let mut v = IHAVEOPT.to_be_bytes().to_vec();
        v.extend_from_slice(&option.to_be_bytes());
        v.extend_from_slice(&(data.len() as u32).to_be_bytes());
        v.extend_from_slice(data);
        self.send(&v);
    }
    /// Reads option replies up to the final one; returns the final reply type.
    fn opt_final(&mut self) -> u32 {
        loop {
            let h = self.read_n(20);
            let kind = u32::from_be_bytes(h[12..16].try_into().unwrap());
            let len = u32::from_be_bytes(h[16..20].try_into().unwrap()) as usize;
            self.read_n(len);
            if kind != REP_INFO && kind != REP_SERVER {
                return kind;
            }
        }
    }
    fn go(addr: &str, export: &str) -> Raw {
        let mut r = Raw::connect(addr);
        r.send(&1u32.to_be_bytes());
        let mut d = (export.len() as u32).to_be_bytes().to_vec();
        d.extend_from_slice(export.as_bytes());
        d.extend_from_slice(&0u16.to_be_bytes());
        r.opt(OPT_GO, &d);
        assert_eq!(r.opt_final(), REP_ACK);
        r
    }
    fn req(&mut self, cmd: u16, handle: u64, offset: u64, len: u32, payload: &[u8]) {
        let mut v = REQUEST_MAGIC.to_be_bytes().to_vec();
        v.extend_from_slice(&0u16.to_be_bytes());
        v.extend_from_slice(&cmd.to_be_bytes());
        v.extend_from_slice(&handle.to_be_bytes());
        v.extend_from_slice(&offset.to_be_bytes());
        v.extend_from_slice(&len.to_be_bytes());
        v.extend_from_slice(payload);
        self.send(&v);
    }
    /// A simple reply: (error, handle), with `data` bytes following on success.
    fn reply(&mut self, data: usize) -> (u32, u64, Vec<u8>) {
        let h = self.read_n(16);
        assert_eq!(
            u32::from_be_bytes(h[..4].try_into().unwrap()),
            SIMPLE_REPLY_MAGIC
        );
        let err = u32::from_be_bytes(h[4..8].try_into().unwrap());
        let handle = u64::from_be_bytes(h[8..16].try_into().unwrap());
        let d = if err == 0 { self.read_n(data) } else { vec![] };
        (err, handle, d)
    }
    fn closed(&mut self) -> bool {
        let mut b = [0u8; 1];
        matches!(self.0.read(&mut b), Ok(0) | Err(_))
    }
}

#[test]
fn protocol_errors_leave_the_server_serving() {
    let dir = TempDir::new("cli-serve", "proto");
    let pool = create(&dir, "p", &["--scheme", "raid5", "--disks", "4"], 4, "4M");
    let mut srv = Served::start(
        &[&pool],
        &dir.join("s.sock"),
        true,
        &["--max-request", "1M"],
    );
    let addr = srv.tcp.clone().unwrap();
    let size = json_here(&["status", pool.to_str().unwrap(), "--json"])["size_bytes"]
        .as_u64()
        .unwrap();

    // A client that keeps working throughout.
    let mut good = Raw::go(&addr, "p");
    let mut check = |h: u64| {
        good.req(CMD_WRITE, h, 4096, 4, &h.to_be_bytes()[4..]);
        assert_eq!(good.reply(0).0, 0);
        good.req(CMD_READ, h + 1, 4096, 4, &[]);
        assert_eq!(good.reply(4).2, h.to_be_bytes()[4..]);
    };
    check(10);

    // Bad magic in the handshake: dropped.
    let mut c = Raw::connect(&addr);
    c.send(&1u32.to_be_bytes());
    c.send(&[0x42; 16]);
    assert!(c.closed());
    check(20);

    // Unknown option: NBD_REP_ERR_UNSUP, then the client can still go on.
    let mut c = Raw::connect(&addr);
    c.send(&1u32.to_be_bytes());
    c.opt(4242, b"??");
    assert_eq!(c.opt_final(), REP_ERR_UNSUP);
    c.opt(OPT_ABORT, &[]);
    assert_eq!(c.opt_final(), REP_ACK);
    check(30);

    // Beyond the export: EINVAL for a read, ENOSPC for a write; oversized: EOVERFLOW; the
    // connection stays usable.
    let mut c = Raw::go(&addr, "p");
    c.req(CMD_READ, 1, size - 512, 1024, &[]);
    assert_eq!(c.reply(0).0, EINVAL);
    c.req(CMD_WRITE, 2, size, 512, &[9; 512]);
    assert_eq!(c.reply(0).0, ENOSPC);
    c.req(CMD_READ, 3, 0, (1 << 20) + 1, &[]);
    assert_eq!(c.reply(0).0, EOVERFLOW);
    c.req(CMD_WRITE, 4, 0, 2 << 20, &vec![9; 2 << 20]);
    assert_eq!(c.reply(0).0, EOVERFLOW);
    c.req(CMD_READ, 5, 0, 512, &[]);
    assert_eq!(c.reply(512).1, 5);
    // Bad request magic: dropped.
    c.send(&[0u8; 28]);
    assert!(c.closed());
    check(40);

    // Disconnect in the middle of a write payload, and with reads in flight.
    let mut c = Raw::go(&addr, "p");
    c.req(CMD_WRITE, 1, 0, 65536, &[7; 1000]);
    drop(c);
    let mut c = Raw::go(&addr, "p");
    for h in 0..32 {
        c.req(CMD_READ, h, h * 65536 % size, 65536, &[]);
    }
    drop(c);
    check(50);
    assert!(srv.alive(), "the server survived");
    // A truncated write was not executed.
    let out = dir.join("first.bin");
    let st = srv.signal_and_wait(libc::SIGTERM);
    assert!(st.success());
    ok_here(&[
        "io",
        "read",
        pool.to_str().unwrap(),
        "--offset",
        "0",
        "--length",
        "1000",
        "--output",
        out.to_str().unwrap(),
    ]);
    assert!(!std::fs::read(&out).unwrap().contains(&7));
}

// ---------- control socket ----------

#[test]
fn control_socket_errors_and_exclusivity() {
    let dir = TempDir::new("cli-serve", "ctl");
    let pool = create(&dir, "c", &["--scheme", "raid5", "--disks", "4"], 4, "4M");
    let p = pool.to_str().unwrap();
    let srv = Served::start(&[&pool], &dir.join("s.sock"), false, &[]);
    // Errors of the pool come back through the socket as CLI errors.
    let out = run(&["fail", p, "--member", "9"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("member 9 does not exist"), "{err}");
    let out = run(&["rebuild", p]);
    assert!(
        out.status.success(),
        "nothing to rebuild is fine: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Direct access is refused while served; so is a second server.
    let out = run(&[
        "io",
        "read",
        p,
        "--offset",
        "0",
        "--length",
        "1",
        "--output",
        dir.join("x").to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("being served"));
    let out = run(&["serve", p, "--socket", dir.join("t.sock").to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("in use"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Status through the socket names the server.
    let text = ok_here(&["status", p]);
    assert!(text.contains("served by pid"), "{text}");
    drop(srv);
}

#[test]
fn flushed_data_survive_a_killed_server() {
    let Some(qemu_io) = tool("qemu-io") else {
        return;
    };
    let dir = TempDir::new("cli-serve", "crash");
    let pool = create(&dir, "k", &["--scheme", "raid5", "--disks", "4"], 4, "4M");
    let p = pool.to_str().unwrap();
    let mut srv = Served::start(
        &[&pool],
        &dir.join("s.sock"),
        false,
        &["--concurrency", "serial"],
    );
    run_tool(
        Command::new(&qemu_io)
            .args([
                "-f",
                "raw",
                "-c",
                "write -P 0x3c 12345 100000",
                "-c",
                "flush",
            ])
            .arg(srv.unix_uri("k")),
    );
    let st = srv.signal_and_wait(libc::SIGKILL);
    assert!(!st.success());
    // The stale control socket is ignored; the pool opens (not cleanly shut down) and holds
    // the flushed bytes, with consistent parity.
    let out = dir.join("back.bin");
    ok_here(&[
        "io",
        "read",
        p,
        "--offset",
        "12345",
        "--length",
        "100000",
        "--output",
        out.to_str().unwrap(),
    ]);
    assert!(std::fs::read(&out).unwrap().iter().all(|&b| b == 0x3c));
    let v = json_here(&["verify", p, "--json"]);
    assert_eq!(v["inconsistent"].as_array().unwrap().len(), 0);
    // A new server replaces the stale socket.
    let srv2 = Served::start(&[&pool], &dir.join("s2.sock"), false, &[]);
    assert!(ok_here(&["status", p]).contains("served by pid"));
    drop(srv2);
}
