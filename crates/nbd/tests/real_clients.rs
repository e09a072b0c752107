//! Real NBD clients (libnbd's nbdinfo and nbdcopy, QEMU's qemu-img and qemu-io) against the
//! server with memory exports. Each test fails under CI when its tool is missing and is
//! skipped with a note otherwise.

mod common;

use std::os::unix::fs::MetadataExt;
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use common::*;
use nbd::{Backend, Export, ExportInfo, MemBackend, ServerOptions};

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

/// `nbdinfo --map` lines as (offset, length, type).
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

/// A memory backend that counts the bytes read from it.
struct Counting {
    mem: MemBackend,
    read: AtomicU64,
}

impl Backend for Counting {
    fn size(&self) -> u64 {
        self.mem.size()
    }
    fn read(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        self.read.fetch_add(buf.len() as u64, Ordering::Relaxed);
        self.mem.read(offset, buf)
    }
    fn write(&self, offset: u64, data: &[u8]) -> std::io::Result<()> {
        self.mem.write(offset, data)
    }
    fn flush(&self) -> std::io::Result<()> {
        Ok(())
    }
    fn block_status(&self, offset: u64, len: u64) -> std::io::Result<Vec<nbd::Extent>> {
        self.mem.block_status(offset, len)
    }
}

/// Block status with real clients: `nbdinfo` lists `base:allocation` and maps holes and data;
/// `nbdcopy` and `qemu-img convert` copy the export byte for byte into sparse files, reading
/// only the data (so they used block status, rather than finding the zeros by reading them).
#[test]
fn block_status_nbdinfo_map_and_sparse_copies() {
    let Some(nbdinfo) = tool("nbdinfo") else {
        return;
    };
    let Some(nbdcopy) = tool("nbdcopy") else {
        return;
    };
    let Some(qemu_img) = tool("qemu-img") else {
        return;
    };
    let size = 16u64 << 20;
    let b = Arc::new(Counting {
        mem: MemBackend::new(size as usize),
        read: AtomicU64::new(0),
    });
    let data = pattern(9, 100_000);
    b.write(1 << 20, &data).unwrap();
    b.write(10 << 20, &data[..5000]).unwrap();
    let t = TestServer::start_exports(
        vec![Export {
            info: ExportInfo::new("sparse", size),
            backend: Arc::clone(&b) as Arc<dyn Backend>,
        }],
        ServerOptions::default(),
    );
    let full = run(Command::new(&nbdinfo).arg(t.uri("sparse")));
    assert!(full.contains("base:allocation"), "{full}");
    let map = run(Command::new(&nbdinfo).arg("--map").arg(t.uri("sparse")));
    // 4 KiB blocks: data where written, holes that read as zeros elsewhere.
    let end1 = ((1 << 20) + 100_000u64).div_ceil(4096) * 4096;
    let end2 = ((10 << 20) + 5000u64).div_ceil(4096) * 4096;
    assert_eq!(
        map_entries(&map),
        vec![
            (0, 1 << 20, 3),
            (1 << 20, end1 - (1 << 20), 0),
            (end1, (10 << 20) - end1, 3),
            (10 << 20, end2 - (10 << 20), 0),
            (end2, size - end2, 3),
        ],
        "{map}"
    );
    let dir = TempDir::new("sparse");
    let whole = b.mem.snapshot();
    for (what, out) in [("nbdcopy", "c.raw"), ("qemu-img", "q.raw")] {
        let dst = dir.path().join(out);
        let before = b.read.load(Ordering::Relaxed);
        match what {
            "nbdcopy" => run(Command::new(&nbdcopy).arg(t.uri("sparse")).arg(&dst)),
            _ => run(Command::new(&qemu_img)
                .args(["convert", "-f", "raw", "-O", "raw"])
                .arg(t.uri("sparse"))
                .arg(&dst)),
        };
        let read = b.read.load(Ordering::Relaxed) - before;
        assert!(
            std::fs::read(&dst).unwrap() == whole,
            "{what}: the copy differs"
        );
        let m = std::fs::metadata(&dst).unwrap();
        let allocated = m.blocks() * 512;
        assert_eq!(m.len(), size);
        assert!(
            allocated < 1 << 20,
            "{what} wrote the holes: {allocated} bytes allocated"
        );
        assert!(
            read < 1 << 20,
            "{what} read {read} bytes of a {size}-byte export with 110 KiB of data"
        );
    }
}
