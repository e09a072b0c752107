//! Pools with O_DIRECT members: unaligned requests still work (the planner aligns member I/O
//! and the executor bounces unaligned memory), through a failure, a rebuild and a verify.

use dev::pool::{test_opts, CreateOpts, Pool, RebuildOpts};
use layout::SchemeKind;

#[test]
fn direct_pool_round_trips_unaligned_io_through_failure_and_rebuild() {
    let dir = std::env::temp_dir().join(format!("raidforge-direct-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let create = Pool::create(
        &dir.join("p.json"),
        CreateOpts {
            chunk_bytes: 16384,
            direct: true,
            ..test_opts(SchemeKind::Raid6, &dir, 5, 4 << 20)
        },
    );
    let mut pool = match create {
        Ok(p) => p,
        Err(e) if e.to_string().contains("Invalid argument") => {
            eprintln!("SKIPPED: this file system does not support O_DIRECT ({e})");
            let _ = std::fs::remove_dir_all(&dir);
            return;
        }
        Err(e) => panic!("create: {e}"),
    };
    let cap = pool.capacity_bytes() as usize;
    let mut model = vec![0u8; cap];
    let mut x: u64 = 12345;
    for _ in 0..40 {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let off = (x >> 20) as usize % (cap - 70000);
        let len = 1 + (x >> 8) as usize % 70000;
        let data: Vec<u8> = (0..len).map(|i| (i as u64 ^ x) as u8).collect();
        pool.write(off as u64, &data).unwrap();
        model[off..off + len].copy_from_slice(&data);
    }
    assert_eq!(pool.read(0, cap as u64).unwrap(), model);
    pool.fail(2).unwrap();
    assert_eq!(pool.read(777, 100_000).unwrap(), model[777..100_777]);
    pool.write(5, &[7u8; 9000]).unwrap();
    model[5..9005].fill(7);
    pool.replace(2, &dir.join("m2b.img")).unwrap();
    pool.rebuild(&RebuildOpts::default(), |_| {}).unwrap();
    assert!(pool.verify().unwrap().inconsistent.is_empty());
    assert_eq!(pool.read(0, cap as u64).unwrap(), model);
    pool.close().unwrap();
    let mut again = Pool::open(&dir.join("p.json")).unwrap();
    assert_eq!(again.read(0, cap as u64).unwrap(), model);
    drop(again);
    std::fs::remove_dir_all(&dir).unwrap();
}
