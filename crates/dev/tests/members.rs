//! Members: files keep bytes, emulation schedules like one actuator, faults fire where asked.

use std::sync::atomic::Ordering;

use dev::{Actuator, Emulated, Faulty, FileMember, MemMember, Member, OpenOpts, Speed};

fn tmpdir(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("raidforge-dev-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn file_member_round_trips_and_refuses_out_of_range() {
    let d = tmpdir("file");
    let path = d.join("m0.img");
    let m = FileMember::open(
        &path,
        OpenOpts {
            create_bytes: Some(1 << 20),
            ..OpenOpts::default()
        },
    )
    .unwrap();
    assert_eq!(m.size_bytes(), 1 << 20);
    let data: Vec<u8> = (0..8192u32).map(|i| (i * 7 + 3) as u8).collect();
    m.write_at(&data, 4096 * 10 + 17).unwrap();
    m.flush().unwrap();
    // A fresh handle sees the bytes.
    let again = FileMember::open(&path, OpenOpts::default()).unwrap();
    let mut back = vec![0u8; 8192];
    again.read_at(&mut back, 4096 * 10 + 17).unwrap();
    assert_eq!(back, data);
    let e = again.read_at(&mut back, (1 << 20) - 100).unwrap_err();
    assert!(e.to_string().contains("past the end"), "{e}");
    let e = FileMember::open(&d.join("missing.img"), OpenOpts::default()).unwrap_err();
    assert!(e.to_string().contains("missing.img"), "{e}");
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn speed_specs_parse_and_bad_ones_say_why() {
    let s = Speed::parse("hdd:150MB/s:8ms").unwrap();
    assert_eq!(s.bytes_per_sec, 150e6);
    assert_eq!(s.latency_ns, 8_000_000);
    let s = Speed::parse("ssd:500MB/s:0.1ms").unwrap();
    assert_eq!(s.latency_ns, 100_000);
    let s = Speed::parse("64MiB/s:250us").unwrap();
    assert_eq!(s.bytes_per_sec, 64.0 * 1024.0 * 1024.0);
    assert_eq!(s.latency_ns, 250_000);
    // 1 MB at 100 MB/s is 10 ms, plus 8 ms latency.
    assert_eq!(
        Speed::parse("hdd:100MB/s:8ms")
            .unwrap()
            .service_ns(1_000_000),
        18_000_000
    );
    for bad in [
        "tape:1MB/s:1ms",
        "hdd:fast:1ms",
        "hdd:100MB/s",
        "hdd:0MB/s:1ms",
        "hdd:1MB/s:1h",
    ] {
        let e = Speed::parse(bad).unwrap_err().to_string();
        assert!(e.contains(bad) && e.contains("expected"), "{e}");
    }
}

#[test]
fn actuator_serialises_overlapping_ios() {
    let mut a = Actuator::default();
    // Two I/Os arriving together: the second waits for the first.
    assert_eq!(a.reserve(0, 10), 10);
    assert_eq!(a.reserve(0, 10), 20);
    // An I/O arriving after the member went idle starts at once.
    assert_eq!(a.reserve(100, 5), 105);
}

#[test]
fn emulated_member_passes_data_through_and_counts_busy_time() {
    let m = Emulated::new(
        MemMember::new(1 << 16),
        Speed::parse("ssd:1GB/s:1us").unwrap(),
    );
    m.write_at(&[9u8; 1000], 100).unwrap();
    let mut b = [0u8; 1000];
    m.read_at(&mut b, 100).unwrap();
    assert_eq!(b, [9u8; 1000]);
    // Two I/Os of 1000 bytes at 1 GB/s + 1 us each.
    assert_eq!(m.busy().as_nanos(), 2 * 2_000);
}

#[test]
fn faults_fire_only_where_injected() {
    let m = Faulty::new(MemMember::new(1 << 16));
    m.faults
        .read_error_ranges
        .lock()
        .unwrap()
        .push((4096, 8192));
    let mut b = [0u8; 512];
    m.read_at(&mut b, 0).unwrap();
    m.read_at(&mut b, 8192).unwrap();
    let e = m.read_at(&mut b, 8000).unwrap_err().to_string();
    assert!(e.contains("read error") && e.contains("4096..8192"), "{e}");
    m.write_at(&b, 4096).unwrap(); // writes still work
    m.faults.fail_stop.store(true, Ordering::SeqCst);
    assert!(m
        .read_at(&mut b, 0)
        .unwrap_err()
        .to_string()
        .contains("fail-stop"));
    assert!(m.write_at(&b, 0).is_err());
    assert!(m.flush().is_err());
}

/// `write_vectored_at` writes its slices at consecutive bytes, in one request: on buffered and
/// O_DIRECT files (aligned slices in one `pwritev`, unaligned ones one at a time), through an
/// emulated member as one emulated I/O, and refused past the end without writing.
#[test]
fn vectored_writes_land_where_single_writes_would() {
    let dir = std::env::temp_dir().join(format!("rf-wv-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pattern = |n: usize, s: u8| {
        (0..n)
            .map(|i| (i as u8).wrapping_mul(7) ^ s)
            .collect::<Vec<u8>>()
    };
    // Aligned 4 KiB pieces (for O_DIRECT), taken from one aligned allocation.
    let mut big = vec![0u8; 5 * 4096 + 4096];
    let start = big.as_ptr().align_offset(4096);
    big[start..start + 5 * 4096].copy_from_slice(&pattern(5 * 4096, 3));
    let aligned: Vec<&[u8]> = big[start..start + 5 * 4096].chunks(4096).collect();
    let odd = [pattern(100, 1), pattern(3000, 2), pattern(1, 3)];
    let odd: Vec<&[u8]> = odd.iter().map(|v| v.as_slice()).collect();
    for direct in [false, true] {
        let path = dir.join(format!("m-{direct}.img"));
        let _ = std::fs::remove_file(&path);
        let m = match FileMember::open(
            &path,
            OpenOpts {
                direct,
                create_bytes: Some(1 << 20),
            },
        ) {
            Ok(m) => m,
            // A file system without O_DIRECT (tmpfs): nothing to check there.
            Err(_) if direct => continue,
            Err(e) => panic!("{e}"),
        };
        m.write_vectored_at(&aligned, 8192).unwrap();
        let mut back = vec![0u8; 5 * 4096];
        m.read_at(&mut back, 8192).unwrap();
        assert_eq!(back, aligned.concat(), "direct {direct}");
        if !direct {
            m.write_vectored_at(&odd, 12345).unwrap();
            let mut back = vec![0u8; 3101];
            m.read_at(&mut back, 12345).unwrap();
            assert_eq!(back, odd.concat());
        }
        // Past the end: refused, nothing written.
        let before = {
            let mut b = vec![0u8; 8192];
            m.read_at(&mut b, (1 << 20) - 8192).unwrap();
            b
        };
        assert!(m.write_vectored_at(&aligned, (1 << 20) - 8192).is_err());
        let mut after = vec![0u8; 8192];
        m.read_at(&mut after, (1 << 20) - 8192).unwrap();
        assert_eq!(before, after);
    }
    // Emulated: one request of the whole run (one latency), the bytes passed through.
    let e = Emulated::new(
        MemMember::new(1 << 16),
        Speed::parse("ssd:1GB/s:1us").unwrap(),
    );
    e.write_vectored_at(&odd, 10).unwrap();
    assert_eq!(e.busy().as_nanos(), 1_000 + 3101);
    let mut back = vec![0u8; 3101];
    e.read_at(&mut back, 10).unwrap();
    assert_eq!(back, odd.concat());
    std::fs::remove_dir_all(&dir).unwrap();
}
