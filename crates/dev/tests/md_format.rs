//! The bytes on the members of RAID5 and RAID6 pools are Linux MD's: read raw from every member
//! file at `data_offset_bytes`, data chunks sit where MD's left-symmetric layout puts them and
//! P and Q are what ISA-L's `xor_gen` and `pq_gen` compute.
//!
//! The mapping is written here from MD's formula (drivers/md/raid5.c, `raid5_compute_sector`,
//! ALGORITHM_LEFT_SYMMETRIC), independently of the layout crate:
//!
//! - RAID5 over n members: stripe s has P on member `pd = (n-1) - s % n` and data chunk i
//!   (0-based, logical chunk `s*(n-1) + i`) on member `(pd + 1 + i) % n`.
//! - RAID6 over n members: `pd = (n-1) - s % n`, Q on `qd = (pd + 1) % n`, data chunk i
//!   (logical chunk `s*(n-2) + i`) on member `(pd + 2 + i) % n`.
//!
//! Stripe s occupies bytes `s*chunk .. (s+1)*chunk` of every member's data area.
//!
//! When ISA-L cannot be loaded this FAILS if the `CI` environment variable is set, and
//! otherwise prints a skip notice and passes (like crates/codec/tests/isal_compat.rs).

use std::path::{Path, PathBuf};

use dev::pool::{test_opts, CreateOpts, Pool, RebuildOpts};
use isal_ref::AlignedBuf;
use layout::SchemeKind;

fn isal_or_skip(test: &str) -> bool {
    match isal_ref::load_library() {
        Ok(()) => true,
        Err(e) => {
            assert!(
                std::env::var_os("CI").is_none(),
                "CI is set but ISA-L is unavailable: {e}"
            );
            eprintln!("SKIPPED {test}: {e} (install libisal2; required when CI is set)");
            false
        }
    }
}

struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let d =
            std::env::temp_dir().join(format!("raidforge-md-format-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        TempDir(d)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// xorshift64 bytes.
fn bytes(seed: &mut u64, n: usize) -> Vec<u8> {
    (0..n)
        .map(|_| {
            *seed ^= *seed << 13;
            *seed ^= *seed >> 7;
            *seed ^= *seed << 17;
            (*seed >> 24) as u8
        })
        .collect()
}

/// Where MD puts things in stripe `s`: (data members in order, P member, Q member).
fn md_left_symmetric(level: u8, n: usize, s: u64) -> (Vec<usize>, usize, Option<usize>) {
    let pd = (n - 1) - (s % n as u64) as usize;
    match level {
        5 => ((0..n - 1).map(|i| (pd + 1 + i) % n).collect(), pd, None),
        6 => {
            let qd = (pd + 1) % n;
            ((0..n - 2).map(|i| (pd + 2 + i) % n).collect(), pd, Some(qd))
        }
        _ => unreachable!(),
    }
}

/// Reads every member's data area raw and checks every stripe against the model and ISA-L.
fn check_members(pool: &Pool, level: u8, model: &[u8]) {
    let st = pool.status();
    let n = st.members.len();
    let chunk = st.chunk_bytes as usize;
    let areas: Vec<Vec<u8>> = st
        .members
        .iter()
        .map(|m| {
            assert_eq!(m.data_offset_bytes, 1 << 20, "MD-like 1 MiB data offset");
            std::fs::read(&m.path).unwrap()[m.data_offset_bytes as usize..].to_vec()
        })
        .collect();
    let k = n - if level == 6 { 2 } else { 1 };
    assert_eq!(model.len() % (k * chunk), 0, "whole stripes");
    let stripes = (model.len() / (k * chunk)) as u64;
    assert!(
        stripes >= 2 * n as u64,
        "enough stripes to rotate parity twice"
    );
    let at = |m: usize, s: u64| &areas[m][s as usize * chunk..(s as usize + 1) * chunk];
    for s in 0..stripes {
        let (data, pd, qd) = md_left_symmetric(level, n, s);
        let mut chunks = Vec::new();
        for (i, &m) in data.iter().enumerate() {
            let logical = (s as usize * k + i) * chunk;
            assert!(
                at(m, s) == &model[logical..logical + chunk],
                "RAID{level} stripe {s}: data chunk {i} is not on member {m} where MD puts it"
            );
            chunks.push(AlignedBuf::from_slice(at(m, s)));
        }
        let refs: Vec<&[u8]> = chunks.iter().map(|c| &c[..]).collect();
        let mut p = AlignedBuf::zeroed(chunk);
        let mut q = AlignedBuf::zeroed(chunk);
        if let Some(qd) = qd {
            isal_ref::pq_gen(&refs, &mut p, &mut q).unwrap();
            assert!(
                at(qd, s) == &q[..],
                "RAID6 stripe {s}: Q on member {qd} is not ISA-L's"
            );
        } else {
            isal_ref::xor_gen(&refs, &mut p).unwrap();
        }
        assert!(
            at(pd, s) == &p[..],
            "RAID{level} stripe {s}: P on member {pd} is not ISA-L's"
        );
    }
    // Nothing is written past the last whole stripe.
    for (m, a) in areas.iter().enumerate() {
        assert!(
            a[stripes as usize * chunk..].iter().all(|&b| b == 0),
            "member {m} has bytes past the last stripe"
        );
    }
}

fn create(dir: &Path, kind: SchemeKind, n: usize, chunk: u64) -> Pool {
    Pool::create(
        &dir.join("pool.json"),
        CreateOpts {
            chunk_bytes: chunk,
            ..test_opts(kind, dir, n, (1 << 20) + 64 * chunk * n as u64)
        },
    )
    .unwrap()
}

fn write(pool: &mut Pool, model: &mut [u8], off: usize, data: &[u8]) {
    pool.write(off as u64, data).unwrap();
    model[off..off + data.len()].copy_from_slice(data);
}

/// Full-stripe writes, then small unaligned ones (read-modify-write and reconstruct-write),
/// then a failure with degraded writes, a replacement and a rebuild: the members hold MD's
/// layout with ISA-L's parity after each step.
fn md_layout(name: &str, kind: SchemeKind, level: u8, n: usize, chunk: u64) {
    if !isal_or_skip(name) {
        return;
    }
    let tmp = TempDir::new(name);
    let mut pool = create(&tmp.0, kind, n, chunk);
    let cap = pool.capacity_bytes() as usize;
    let mut model = vec![0u8; cap];
    let mut seed = 0x9E37_79B9_7F4A_7C15 ^ level as u64;
    let data = bytes(&mut seed, cap);
    write(&mut pool, &mut model, 0, &data);
    check_members(&pool, level, &model);
    for i in 0..40usize {
        let off = (seed as usize ^ i.wrapping_mul(7919)) % cap;
        let len = (1 + (seed as usize >> 20) % (3 * chunk as usize)).min(cap - off);
        let d = bytes(&mut seed, len);
        write(&mut pool, &mut model, off, &d);
    }
    check_members(&pool, level, &model);
    // Degraded writes, then a replacement rebuilt in place.
    pool.fail(1).unwrap();
    for i in 0..20usize {
        let off = (seed as usize ^ i.wrapping_mul(104_729)) % cap;
        let len = (1 + (seed as usize >> 24) % (2 * chunk as usize)).min(cap - off);
        let d = bytes(&mut seed, len);
        write(&mut pool, &mut model, off, &d);
    }
    pool.replace(1, &tmp.0.join("m1-new.img")).unwrap();
    pool.rebuild(&RebuildOpts::default(), |_| {}).unwrap();
    assert_eq!(pool.status().state, "clean");
    check_members(&pool, level, &model);
    assert_eq!(pool.read(0, cap as u64).unwrap(), model);
}

#[test]
fn raid5_members_hold_md_left_symmetric_with_isal_parity() {
    md_layout("raid5", SchemeKind::Raid5, 5, 5, 16 << 10);
    md_layout("raid5-4", SchemeKind::Raid5, 5, 4, 4 << 10);
}

#[test]
fn raid6_members_hold_md_left_symmetric_with_isal_p_and_q() {
    md_layout("raid6", SchemeKind::Raid6, 6, 6, 4 << 10);
    md_layout("raid6-5", SchemeKind::Raid6, 6, 5, 16 << 10);
}
