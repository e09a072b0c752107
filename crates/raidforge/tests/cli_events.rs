//! `serve --events FILE`: the events of members lost without a command (issue 25), in the
//! order they happen.
//!
//! - At open: a member stale by generations (it missed writes) is left out (`StaleMember`), a
//!   member whose file is missing too (`DeviceDisappeared`); then `DegradedArray`, the spare
//!   takes the first one's place, the rebuild runs, and `NoSpare` for the other.
//! - While served: an NBD member whose server is killed, so that its connection cannot be made
//!   again within `--io-timeout`: `Fail` then `DeviceDisappeared`, `DegradedArray`, the spare,
//!   the rebuild. Every byte is read back through the export afterwards.
//!
//! nbdkit missing: the second test fails under CI and is skipped with a note otherwise.

mod common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::events::{self, seq};
use common::{create_small, ok, pattern, read, write, TempDir};
use nbd::client::{Address, Client};

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

/// `raidforge serve ARGS` in `dir`, returned once it printed `ready`.
fn serve(dir: &Path, args: &[&str]) -> Child {
    let mut c = common::command()
        .current_dir(dir)
        .arg("serve")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start raidforge serve");
    let mut lines = BufReader::new(c.stdout.take().unwrap()).lines();
    loop {
        match lines.next() {
            Some(Ok(l)) if l == "ready" => break,
            Some(Ok(_)) => {}
            _ => panic!("raidforge serve ended before it was ready"),
        }
    }
    std::thread::spawn(move || for _ in lines {});
    c
}

/// Reads the export at `sock` whole and compares it with `want` from offset 0.
fn check_export(sock: &Path, want: &[u8], what: &str) {
    let addr = Address::parse(&format!("nbd+unix:///?socket={}", sock.display())).unwrap();
    let mut c = Client::connect(&addr).unwrap();
    let mut got = vec![0u8; want.len()];
    c.read_at(&mut got, 0)
        .unwrap_or_else(|e| panic!("{what}: reading: {e}"));
    assert!(
        got == want,
        "{what}: the bytes read differ from those written"
    );
}

fn stop(mut c: Child) {
    unsafe {
        libc::kill(c.id() as i32, libc::SIGTERM);
    }
    let st = c.wait().unwrap();
    assert!(st.success(), "raidforge serve ended with {st:?}");
}

#[test]
fn members_left_out_at_open_are_told_as_stale_and_disappeared() {
    let t = TempDir::new("events", "open");
    let dir = t.path();
    create_small(
        dir,
        "p.json",
        &["--scheme", "raid6", "--disks", "5"],
        "m",
        5,
        &[],
    );
    std::fs::File::create(dir.join("spare.img"))
        .unwrap()
        .set_len(8 << 20)
        .unwrap();
    ok(dir, &["add", "p.json", "--spare", "spare.img"]);
    let mut want = pattern(7, 300_000);
    write(dir, "p.json", 0, &want);
    // Member 3 misses the next writes (its old file put back): stale by generations.
    let old = std::fs::read(dir.join("m3.img")).unwrap();
    for k in 0..3u64 {
        let d = pattern(8 + k, 200_000);
        write(dir, "p.json", 50_000 * k, &d);
        want[(50_000 * k) as usize..][..200_000].copy_from_slice(&d);
    }
    std::fs::write(dir.join("m3.img"), old).unwrap();
    // Member 1's file vanishes.
    std::fs::rename(dir.join("m1.img"), dir.join("m1.away")).unwrap();

    let ev_file = dir.join("events.jsonl");
    let c = serve(
        dir,
        &["p.json", "--socket", "p.sock", "--events", "events.jsonl"],
    );
    let ev = events::wait_for(&ev_file, "NoSpare", 1, "events");
    assert_eq!(
        seq(&ev),
        [
            ("DeviceDisappeared", Some(1)),
            ("StaleMember", Some(3)),
            ("DegradedArray", None),
            ("SpareActive", Some(1)),
            ("RebuildStarted", None),
            ("RebuildFinished", None),
            ("NoSpare", Some(3)),
        ]
        .map(|(k, m)| (k.to_string(), m)),
        "{ev:#?}"
    );
    let detail = |i: usize| ev[i]["detail"].as_str().unwrap().to_string();
    assert!(detail(0).contains("m1.img missing"), "{}", detail(0));
    assert!(
        detail(1).contains("stale when the pool was opened"),
        "{}",
        detail(1)
    );
    check_export(&dir.join("p.sock"), &want[..300_000], "after the rebuild");
    stop(c);
    // The next start leaves nobody out: no new event (member 3 stays failed, told before).
    let n = events::read(&ev_file).len();
    let c = serve(
        dir,
        &["p.json", "--socket", "p.sock", "--events", "events.jsonl"],
    );
    std::thread::sleep(Duration::from_millis(500));
    let ev = events::read(&ev_file);
    assert!(
        ev[n..]
            .iter()
            .all(|e| e["event"] != "StaleMember" && e["event"] != "DeviceDisappeared"),
        "{:?}",
        seq(&ev[n..])
    );
    stop(c);
    assert_eq!(read(dir, "p.json", 0, 300_000), want[..300_000]);
}

#[test]
fn an_nbd_member_whose_server_is_gone_is_told_as_disappeared() {
    let Some(nbdkit) = common::tool("nbdkit", ".ci/run installs nbdkit") else {
        return;
    };
    let t = TempDir::new("events", "nbd");
    let dir = t.path();
    let mut kids = Kids(Vec::new());
    let mut uris = Vec::new();
    for i in 0..4 {
        let img = dir.join(format!("m{i}.img"));
        std::fs::File::create(&img)
            .unwrap()
            .set_len(8 << 20)
            .unwrap();
        let sock = dir.join(format!("m{i}.sock"));
        kids.0.push(
            Command::new(&nbdkit)
                .args(["-f", "--exit-with-parent", "-U"])
                .arg(&sock)
                .arg("file")
                .arg(&img)
                .stdin(Stdio::null())
                // A line per probe of its socket otherwise.
                .stderr(Stdio::null())
                .spawn()
                .expect("start nbdkit"),
        );
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::os::unix::net::UnixStream::connect(&sock).is_err() {
            assert!(Instant::now() < deadline, "nbdkit never answered");
            std::thread::sleep(Duration::from_millis(20));
        }
        uris.push(format!("nbd+unix:///?socket={}", sock.display()));
    }
    std::fs::File::create(dir.join("spare.img"))
        .unwrap()
        .set_len(8 << 20)
        .unwrap();
    let mut args: Vec<String> = ["create", "p.json", "--scheme", "raid5", "--disks", "4"]
        .map(String::from)
        .to_vec();
    for u in &uris {
        args.extend(["--member".to_string(), u.clone()]);
    }
    args.extend(["--chunk", "16K", "--spare", "spare.img"].map(String::from));
    ok(dir, &args);

    let ev_file = dir.join("events.jsonl");
    let sock = dir.join("p.sock");
    let c = serve(
        dir,
        &[
            "p.json",
            "--socket",
            "p.sock",
            "--events",
            "events.jsonl",
            "--io-timeout",
            "1",
        ],
    );
    let addr = Address::parse(&format!("nbd+unix:///?socket={}", sock.display())).unwrap();
    let mut client = Client::connect(&addr).unwrap();
    let cap = client.size() as usize;
    let data = pattern(3, cap);
    client.write_at(&data[..cap / 2], 0, false).unwrap();
    client.flush().unwrap();
    assert!(
        events::read(&ev_file).is_empty(),
        "{:?}",
        seq(&events::read(&ev_file))
    );

    // Member 2's server dies; the next write reaches it, cannot reconnect within 1 s.
    let mut gone = kids.0.remove(2);
    gone.kill().unwrap();
    gone.wait().unwrap();
    client
        .write_at(&data[cap / 2..], (cap / 2) as u64, false)
        .unwrap();
    client.flush().unwrap();
    let ev = events::wait_for(&ev_file, "RebuildFinished", 1, "events");
    assert_eq!(
        seq(&ev),
        [
            ("Fail", Some(2)),
            ("DeviceDisappeared", Some(2)),
            ("DegradedArray", None),
            ("SpareActive", Some(2)),
            ("RebuildStarted", None),
            ("RebuildFinished", None),
        ]
        .map(|(k, m)| (k.to_string(), m)),
        "{ev:#?}"
    );
    let d = ev[1]["detail"].as_str().unwrap();
    assert!(
        d.contains("could not be reached again") && d.contains("m2.sock"),
        "{d}"
    );
    check_export(&sock, &data, "after the rebuild onto the spare");
    let st = common::status(dir, "p.json");
    assert_eq!(st["state"], "clean", "{st}");
    drop(client);
    stop(c);
}
