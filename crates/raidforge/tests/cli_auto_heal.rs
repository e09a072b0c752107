//! A served pool that heals itself (issue 25), through the real path: a RAID6 pool of five
//! members that are NBD exports of nbdkit (the file plugin behind the error filter, switched
//! on by touching an `error-file`), one hot spare, `raidforge serve --events --on-event`, and
//! clients on raidforge's export (the project's NBD client, and fio with crc32c verification
//! when installed). No pool command is typed after `serve`: errors are switched on for one
//! member, the server fails it, puts the spare in its place and rebuilds; then for a second
//! member, which the server fails and serves without (no spare is left). Every byte written is
//! read back and compared at each stage; the events file and the `--on-event` program's log
//! hold the sequence; `status --json` (through the control socket) shows the spare, the
//! automatic rebuild and why it started. `--metrics` is scraped at each state (healthy,
//! degraded during the rebuild delay, rebuilt onto the spare, degraded with no spare left) and
//! read with the Python prometheus_client parsers (`common::prom`): the pool's state gauge,
//! failures tolerated, rebuild progress, spares and events, each member device's state, bytes
//! and errors, the export's requests; every histogram cumulative with `+Inf` = `_count`.
//!
//! Also: sockets owner-only, and a warning for a non-loopback `--listen` and `--metrics`.
//!
//! nbdkit (and fio) missing: the test fails under CI and is skipped with a note otherwise.

mod common;

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::events::{self, kinds};
use common::prom::{self, Page};
use common::{json, pattern, TempDir};
use nbd::client::{Address, Client};

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

fn now_unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// Scrapes of `serve --metrics`: fetched when the state is there, parsed (both formats, with
/// prometheus_client) when the test gets to it; `None` without the parser outside CI.
struct Scraper {
    addr: std::net::SocketAddr,
    python: Option<PathBuf>,
    dir: PathBuf,
}

impl Scraper {
    /// The page in Prometheus text 0.0.4, fetched now.
    fn fetch(&self) -> String {
        prom::fetch(self.addr, false)
    }

    /// `text` parsed; also fetches the OpenMetrics form and parses it with the strict
    /// parser. Both must have the same families.
    fn parse(&self, text: &str, what: &str) -> Option<Page> {
        let py = self.python.as_ref()?;
        let page = prom::parse(py, &self.dir, text, false);
        page.check_shape();
        let om = prom::parse(py, &self.dir, &prom::fetch(self.addr, true), true);
        let names = |p: &Page| -> Vec<String> {
            p.families
                .iter()
                .map(|f| f["name"].as_str().unwrap().to_string())
                .collect()
        };
        assert_eq!(names(&page), names(&om), "{what}: the two formats differ");
        Some(page)
    }
}

/// What every scrape of the RAID6 pool `p` shows, whatever its state.
fn check_pool_page(m: &Page, state: &str, tolerated: f64, cap: u64, what: &str) {
    for st in ["clean", "degraded", "rebuilding", "failed"] {
        let want = if st == state { 1.0 } else { 0.0 };
        assert_eq!(
            m.value("raidforge_pool_state", &[("pool", "p"), ("state", st)]),
            want,
            "{what}: state {st}"
        );
    }
    assert_eq!(
        m.value("raidforge_pool_failures_tolerated", &[("pool", "p")]),
        tolerated,
        "{what}"
    );
    assert_eq!(
        m.value("raidforge_pool_rebuild_total_bytes", &[("pool", "p")]),
        cap as f64,
        "{what}"
    );
    assert_eq!(
        m.value("raidforge_pool_capacity_bytes", &[("pool", "p")]),
        cap as f64
    );
    assert_eq!(
        m.family_type("raidforge_member_io_duration_seconds")
            .as_deref(),
        Some("histogram")
    );
    assert_eq!(
        m.family_type("raidforge_member_errors").as_deref(),
        Some("counter")
    );
    assert_eq!(
        m.family_type("raidforge_pool_state").as_deref(),
        Some("gauge")
    );
    // Every I/O is in its histogram; clients saw no error at any stage (reads of a failing
    // member are rebuilt from the others).
    for op in ["read", "write", "flush"] {
        for (labels, ios) in m.samples("raidforge_member_ios_total", &[("op", op)]) {
            let l: Vec<(&str, &str)> = labels
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect();
            assert_eq!(
                m.value("raidforge_member_io_duration_seconds_count", &l),
                ios,
                "{what}: {labels:?}"
            );
        }
    }
    for op in ["read", "write", "flush", "trim", "write_zeroes"] {
        let l = [("pool", "p"), ("op", op)];
        assert_eq!(
            m.value("raidforge_export_request_errors_total", &l),
            0.0,
            "{what}: {op}"
        );
        assert_eq!(
            m.value("raidforge_export_request_duration_seconds_count", &l),
            m.value("raidforge_export_requests_total", &l),
            "{what}: {op}"
        );
    }
}

/// The member device whose name contains `needle`: its slot label and its state (the state
/// whose gauge is 1).
fn device(m: &Page, needle: &str) -> (String, String, String) {
    let states: Vec<_> = m
        .samples("raidforge_member_state", &[("pool", "p")])
        .into_iter()
        .filter(|(l, v)| l["device"].contains(needle) && *v == 1.0)
        .collect();
    assert_eq!(states.len(), 1, "device {needle}: {states:?}");
    let l = &states[0].0;
    (l["device"].clone(), l["member"].clone(), l["state"].clone())
}

/// Errors of a device, every op.
fn device_errors(m: &Page, dev: &str) -> f64 {
    m.sum("raidforge_member_errors_total", &[("device", dev)])
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
        // A failed member waits 3 s for the spare: the degraded state is scraped meanwhile.
        .args(["--rebuild-delay", "3", "--metrics", "127.0.0.1:0"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start raidforge serve");
    let out = serve.stdout.take().unwrap();
    kids.0.push(serve);
    let mut lines = BufReader::new(out).lines();
    let mut metrics_addr = None;
    loop {
        match lines.next() {
            Some(Ok(l)) if l == "ready" => break,
            Some(Ok(l)) => {
                if let Some(a) = l.strip_prefix("metrics on http://") {
                    metrics_addr = a.strip_suffix("/metrics").map(|a| a.parse().unwrap());
                }
            }
            _ => panic!("raidforge serve ended before it was ready"),
        }
    }
    std::thread::spawn(move || for _ in lines {});
    let scraper = Scraper {
        addr: metrics_addr.expect("serve printed no 'metrics on http://ADDR/metrics' line"),
        python: prom::python(),
        dir: dir.to_path_buf(),
    };
    // Only GET and HEAD, only /metrics.
    let (code, head, _) = prom::http(scraper.addr, "GET / HTTP/1.1", None);
    assert_eq!(code, 404, "{head}");
    let (code, head, _) = prom::http(scraper.addr, "POST /metrics HTTP/1.1", None);
    assert_eq!(code, 405, "{head}");
    assert!(head.contains("Allow: GET, HEAD"), "{head}");

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
    assert!(
        events::read(&ev_file).is_empty(),
        "{:?}",
        events::read(&ev_file)
    );

    // Healthy: every member active with no error, the export's traffic counted exactly.
    if let Some(m) = scraper.parse(&scraper.fetch(), "healthy") {
        check_pool_page(&m, "clean", 2.0, cap, "healthy");
        assert_eq!(
            m.value("raidforge_pool_rebuild_done_bytes", &[("pool", "p")]),
            cap as f64
        );
        assert_eq!(m.value("raidforge_pool_spares", &[("pool", "p")]), 1.0);
        assert_eq!(
            m.value("raidforge_pool_auto_rebuilds_total", &[("pool", "p")]),
            0.0
        );
        for i in 0..5 {
            let (dev, slot, state) = device(&m, &format!("m{i}.sock"));
            assert_eq!(
                (slot.as_str(), state.as_str()),
                (i.to_string().as_str(), "active")
            );
            assert_eq!(device_errors(&m, &dev), 0.0, "{dev}");
            assert!(m.value("raidforge_member_written_bytes_total", &[("device", &dev)]) > 0.0);
            assert!(m.value("raidforge_member_read_bytes_total", &[("device", &dev)]) > 0.0);
        }
        let e = |name: &str, op: Option<&str>| match op {
            Some(op) => m.value(name, &[("pool", "p"), ("op", op)]),
            None => m.value(name, &[("pool", "p")]),
        };
        assert_eq!(e("raidforge_export_written_bytes_total", None), cap as f64);
        assert_eq!(e("raidforge_export_read_bytes_total", None), cap as f64);
        assert!(e("raidforge_export_requests_total", Some("write")) >= (cap >> 20) as f64);
        assert!(e("raidforge_export_requests_total", Some("read")) >= (cap >> 20) as f64);
        assert_eq!(e("raidforge_export_requests_total", Some("flush")), 1.0);
        assert_eq!(m.value("raidforge_nbd_connections_open", &[]), 1.0);
    }

    // Member 1 starts failing every I/O. The next reads touching it fail it (the repair's
    // write fails); the spare takes its place and the rebuild runs, with fio verifying its
    // own writes on the export meanwhile.
    std::fs::write(dir.join("inject1"), b"").unwrap();
    check_all(&mut c, &data, "member 1 failing");
    // Degraded, for the 3 s of --rebuild-delay: scraped now, read below.
    events::wait_for(&ev_file, "DegradedArray", 1, "first failure");
    let degraded_page = scraper.fetch();
    let degraded_scraped_ms = now_unix_ms();
    let uri = format!("nbd+unix:///?socket={}", nbd_sock.display());
    let fio_region = 8u64 << 20;
    fio_verify(&fio, &uri, 0, fio_region, 7);
    let ev = events::wait_for(&ev_file, "RebuildFinished", 1, "first failure");
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
    let (failed_ms, spare_ms) = (
        ev[0]["time_unix_ms"].as_u64().unwrap(),
        ev[2]["time_unix_ms"].as_u64().unwrap(),
    );
    assert!(
        spare_ms >= failed_ms + 2500,
        "--rebuild-delay 3: the spare came {} ms after the failure",
        spare_ms - failed_ms
    );
    assert!(
        degraded_scraped_ms <= spare_ms,
        "the degraded scrape ended {} ms after the spare took member 1's place (a machine \
         too slow for the 3 s delay?)",
        degraded_scraped_ms - spare_ms
    );
    if let Some(m) = scraper.parse(&degraded_page, "degraded") {
        check_pool_page(&m, "degraded", 1.0, cap, "degraded");
        assert!(m.value("raidforge_pool_rebuild_done_bytes", &[("pool", "p")]) < cap as f64);
        assert_eq!(m.value("raidforge_pool_spares", &[("pool", "p")]), 1.0);
        let (dev, slot, state) = device(&m, "m1.sock");
        assert_eq!((slot.as_str(), state.as_str()), ("1", "failed"));
        assert!(device_errors(&m, &dev) > 0.0, "{dev}");
        for i in [0, 2, 3, 4] {
            let (dev, _, state) = device(&m, &format!("m{i}.sock"));
            assert_eq!(state, "active");
            assert_eq!(device_errors(&m, &dev), 0.0, "{dev}");
        }
        for (event, n) in [("Fail", 1.0), ("DegradedArray", 1.0)] {
            assert_eq!(
                m.value(
                    "raidforge_pool_health_events_total",
                    &[("pool", "p"), ("event", event)]
                ),
                n
            );
        }
    }
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
    // Rebuilt onto the spare: the spare is member 1's device now, the failed device stays
    // listed (removed) with its errors; the rebuild covered the whole capacity.
    if let Some(m) = scraper.parse(&scraper.fetch(), "rebuilt") {
        check_pool_page(&m, "clean", 2.0, cap, "rebuilt");
        assert_eq!(
            m.value("raidforge_pool_rebuild_done_bytes", &[("pool", "p")]),
            cap as f64
        );
        assert_eq!(
            m.value("raidforge_pool_rebuild_running", &[("pool", "p")]),
            0.0
        );
        assert!(
            m.value(
                "raidforge_pool_rebuild_rate_bytes_per_second",
                &[("pool", "p")]
            ) > 0.0
        );
        assert_eq!(m.value("raidforge_pool_spares", &[("pool", "p")]), 0.0);
        assert_eq!(
            m.value("raidforge_pool_auto_rebuilds_total", &[("pool", "p")]),
            1.0
        );
        let (old, slot, state) = device(&m, "m1.sock");
        assert_eq!((slot.as_str(), state.as_str()), ("1", "removed"));
        assert!(device_errors(&m, &old) > 0.0);
        let (spare_dev, slot, state) = device(&m, "spare.img");
        assert_eq!((slot.as_str(), state.as_str()), ("1", "active"));
        assert_eq!(device_errors(&m, &spare_dev), 0.0);
        // The rebuild wrote member 1's share of every stripe onto it: a fifth of the data
        // area at least (RAID6 of 5: one unit in five).
        assert!(
            m.value(
                "raidforge_member_written_bytes_total",
                &[("device", &spare_dev)]
            ) >= (cap / 3) as f64,
            "{spare_dev}"
        );
    }

    // Member 3 fails too: no spare is left, the pool serves degraded.
    std::fs::write(dir.join("inject3"), b"").unwrap();
    check_all(&mut c, &data, "member 3 failing");
    let ev = events::wait_for(&ev_file, "NoSpare", 1, "second failure");
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
    if let Some(m) = scraper.parse(&scraper.fetch(), "degraded, no spare") {
        check_pool_page(&m, "degraded", 1.0, cap, "degraded, no spare");
        assert!(m.value("raidforge_pool_rebuild_done_bytes", &[("pool", "p")]) < cap as f64);
        assert_eq!(m.value("raidforge_pool_spares", &[("pool", "p")]), 0.0);
        let (dev, slot, state) = device(&m, "m3.sock");
        assert_eq!((slot.as_str(), state.as_str()), ("3", "failed"));
        assert!(device_errors(&m, &dev) > 0.0, "{dev}");
        let (_, _, state) = device(&m, "spare.img");
        assert_eq!(state, "active");
        assert_eq!(
            m.value(
                "raidforge_pool_health_events_total",
                &[("pool", "p"), ("event", "NoSpare")]
            ),
            1.0
        );
    }

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
        .args([
            "serve",
            "p.json",
            "--listen",
            "0.0.0.0:0",
            "--metrics",
            "0.0.0.0:0",
        ])
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
    assert!(
        stderr
            .iter()
            .any(|l| l.contains("warning: --metrics 0.0.0.0:0") && l.contains("no authentication")),
        "{stderr:?}"
    );
}
