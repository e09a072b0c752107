//! Lazy parity from the command line: `create --parity lazy`, `status` showing the deferred
//! list, the fault tolerance and per-member I/O counters, `io write --parity`, `flush`, and the
//! refusal for layouts with nothing to defer.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

mod common;

use common::{create_args, members, ok, raidforge, status, TempDir};

/// `create p.json --scheme SCHEME --disks N --member m0.img ... --size 2M --chunk 4K
/// --emulate ... --parity PARITY`, which may be refused.
fn create(dir: &Path, scheme: &str, n: usize, parity: &str) -> Output {
    let disks = n.to_string();
    let extra = [
        "--size",
        "2M",
        "--chunk",
        "4K",
        "--emulate",
        "hdd:120MB/s:0ms",
        "--parity",
        parity,
    ];
    let args = create_args(
        "p.json",
        &["--scheme", scheme, "--disks", &disks],
        &members("m", n),
        &extra,
    );
    raidforge(dir, &args)
}

fn member_ios(s: &Value) -> (u64, u64) {
    let m = s["members"].as_array().unwrap();
    let sum = |k: &str| m.iter().map(|x| x[k].as_u64().unwrap()).sum::<u64>();
    (sum("reads") + sum("writes"), sum("meta_writes"))
}

/// Three single-chunk writes at chunk offsets in different cycles.
fn three_writes(dir: &Path, extra: &[&str]) {
    std::fs::write(dir.join("c.bin"), vec![0xABu8; 4096]).unwrap();
    for off in ["0", "65536", "131072"] {
        let mut a = vec!["io", "write", "p.json", "--offset", off, "--input", "c.bin"];
        a.extend_from_slice(extra);
        ok(dir, &a);
    }
}

#[test]
fn lazy_pool_status_counters_and_flush() {
    let eager = TempDir::new("cli-lazy", "eager");
    assert!(create(&eager.0, "rm2", 6, "eager").status.success());
    three_writes(&eager.0, &[]);
    let se = status(&eager.0, "p.json");
    assert_eq!(se["parity"], "eager");
    assert_eq!(se["bpgl_len"], 0);
    assert_eq!(se["fault_tolerance"], 2);
    let (eager_ios, _) = member_ios(&se);

    let lazy = TempDir::new("cli-lazy", "lazy");
    assert!(create(&lazy.0, "rm2", 6, "lazy").status.success());
    let s0 = status(&lazy.0, "p.json");
    assert_eq!(s0["parity"], "lazy");
    assert_eq!(
        (s0["bpgl_len"].as_u64(), s0["fault_tolerance"].as_u64()),
        (Some(0), Some(2))
    );
    three_writes(&lazy.0, &[]);
    let s = status(&lazy.0, "p.json");
    assert_eq!(
        s["bpgl_len"], 3,
        "one background group per single-chunk write"
    );
    assert_eq!(s["fault_tolerance"], 1);
    let (lazy_ios, meta) = member_ios(&s);
    // RM2 over 6 disks (M = 2): eager reads the other data unit of each of the two groups and
    // writes data + 2 parities (5 I/Os); lazy skips the background group (3 I/Os).
    assert_eq!(eager_ios, 3 * 5, "{se}");
    assert_eq!(lazy_ios, 3 * 3, "{s}");
    assert!(meta > 0, "the list was written to the members");
    let text = ok(&lazy.0, &["status", "p.json"]);
    assert!(
        text.contains("3 of 1024 stripes with deferred parity"),
        "{text}"
    );
    assert!(text.contains("survives 1 more failure"), "{text}");

    // An eager write on the lazy pool defers nothing new.
    ok(
        &lazy.0,
        &[
            "io", "write", "p.json", "--offset", "200704", "--input", "c.bin", "--parity", "eager",
        ],
    );
    assert_eq!(status(&lazy.0, "p.json")["bpgl_len"], 3);

    let f: Value = serde_json::from_str(&ok(&lazy.0, &["flush", "p.json", "--json"])).unwrap();
    assert_eq!(
        (f["bpgl_len"].as_u64(), f["fault_tolerance"].as_u64()),
        (Some(0), Some(2))
    );
    let v = raidforge(&lazy.0, &["verify", "p.json"]);
    assert!(v.status.success(), "{}", String::from_utf8_lossy(&v.stdout));
    ok(
        &lazy.0,
        &[
            "io", "read", "p.json", "--offset", "65536", "--length", "4096", "--output", "back.bin",
        ],
    );
    assert_eq!(
        std::fs::read(lazy.0.join("back.bin")).unwrap(),
        vec![0xABu8; 4096]
    );
}

#[test]
fn lazy_parity_needs_two_parities_and_is_explained() {
    let d = TempDir::new("cli-lazy", "r5");
    let out = create(&d.0, "raid5", 4, "lazy");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("two-parity") && err.contains("raid5"), "{err}");
    let out = create(&d.0, "raid6", 4, "sometimes");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("eager or lazy"));
    let help = ok(&d.0, &["create", "--help"]);
    assert!(
        help.contains("--parity") && help.contains("deferred"),
        "{help}"
    );
}

#[test]
fn a_served_pool_flushes_deferred_parity_when_idle() {
    let d = TempDir::new("cli-lazy", "served");
    assert!(create(&d.0, "raid6", 6, "lazy").status.success());
    three_writes(&d.0, &[]);
    assert_eq!(status(&d.0, "p.json")["bpgl_len"], 3);
    let sock = d.0.join("p.sock");
    let mut child = Command::new(env!("CARGO_BIN_EXE_raidforge"))
        .args(["serve", "p.json", "--socket", sock.to_str().unwrap()])
        .current_dir(&d.0)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !d.0.join("p.json.ctl").exists() {
        assert!(std::time::Instant::now() < deadline, "server did not start");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // Through the control socket: the idle server empties the list by itself.
    loop {
        let s = status(&d.0, "p.json");
        if s["bpgl_len"] == 0 {
            assert_eq!(s["fault_tolerance"], 2);
            break;
        }
        assert!(std::time::Instant::now() < deadline, "never flushed: {s}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    // `flush` reaches the server too.
    let f: Value = serde_json::from_str(&ok(&d.0, &["flush", "p.json", "--json"])).unwrap();
    assert_eq!(f["bpgl_len"], 0);
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM);
    }
    assert!(child.wait().unwrap().success());
    let v = raidforge(&d.0, &["verify", "p.json"]);
    assert!(v.status.success());
}
