//! Real NBD clients (libnbd's nbdinfo and nbdcopy, QEMU's qemu-img and qemu-io) against the
//! server with memory exports. Each test fails under CI when its tool is missing and is
//! skipped with a note otherwise.

mod common;

use std::process::Command;

use common::*;

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().expect("client runs");
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn nbdinfo_lists_exports_and_sizes() {
    let Some(nbdinfo) = tool("nbdinfo") else {
        return;
    };
    let t = TestServer::start(&[("alpha", 3 << 20), ("beta", 1 << 20)]);
    let list = run(Command::new(&nbdinfo)
        .arg("--list")
        .arg(format!("nbd+unix://?socket={}", t.socket.display())));
    assert!(list.contains("alpha") && list.contains("beta"), "{list}");
    for (name, size) in [("alpha", 3u64 << 20), ("beta", 1 << 20)] {
        let s = run(Command::new(&nbdinfo).arg("--size").arg(t.uri(name)));
        assert_eq!(s.trim(), size.to_string());
    }
    let full = run(Command::new(&nbdinfo).arg(t.uri("alpha")));
    for want in [
        "can_flush: true",
        "can_fua: true",
        "can_trim: true",
        "can_zero: true",
        "can_multi_conn: true",
        "block_size_maximum: 33554432",
    ] {
        assert!(full.contains(want), "missing {want} in\n{full}");
    }
}

#[test]
fn nbdcopy_round_trips_a_random_file() {
    let Some(nbdcopy) = tool("nbdcopy") else {
        return;
    };
    let t = TestServer::start(&[("disk", 4 << 20)]);
    let dir = TempDir::new("copy");
    let src = dir.path().join("in.bin");
    let dst = dir.path().join("out.bin");
    let data = pattern(42, 4 << 20);
    std::fs::write(&src, &data).unwrap();
    run(Command::new(&nbdcopy).arg(&src).arg(t.uri("disk")));
    assert!(t.backends[0].snapshot() == data, "export holds the file");
    run(Command::new(&nbdcopy).arg(t.uri("disk")).arg(&dst));
    assert!(
        std::fs::read(&dst).unwrap() == data,
        "copied back byte-exactly"
    );
}

#[test]
fn qemu_io_and_qemu_img_through_nbd_unix() {
    let Some(qemu_io) = tool("qemu-io") else {
        return;
    };
    let Some(qemu_img) = tool("qemu-img") else {
        return;
    };
    let t = TestServer::start(&[("q", 2 << 20)]);
    let uri = t.uri("q");
    run(Command::new(&qemu_io)
        .args([
            "-f",
            "raw",
            "-c",
            "write -P 0x5a 4096 65536",
            "-c",
            "write -P 0x11 100 7",
            "-c",
            "flush",
        ])
        .arg(&uri));
    let out = run(Command::new(&qemu_io)
        .args([
            "-f",
            "raw",
            "-c",
            "read -P 0x5a 4096 65536",
            "-c",
            "read -P 0x11 100 7",
            "-c",
            "read -P 0 0 100",
        ])
        .arg(&uri));
    assert!(!out.contains("Pattern verification failed"), "{out}");
    let snap = t.backends[0].snapshot();
    assert!(snap[4096..4096 + 65536].iter().all(|&b| b == 0x5a));
    // qemu-img convert in and out.
    let dir = TempDir::new("qimg");
    let src = dir.path().join("src.raw");
    let back = dir.path().join("back.raw");
    let data = pattern(7, 2 << 20);
    std::fs::write(&src, &data).unwrap();
    run(Command::new(&qemu_img)
        .args(["convert", "-n", "-f", "raw", "-O", "raw"])
        .arg(&src)
        .arg(&uri));
    assert!(t.backends[0].snapshot() == data);
    run(Command::new(&qemu_img)
        .args(["convert", "-f", "raw", "-O", "raw"])
        .arg(&uri)
        .arg(&back));
    assert!(std::fs::read(&back).unwrap() == data);
}
