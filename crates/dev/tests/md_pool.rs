//! Pools in Linux MD's on-disk format (issue 23), without the kernel: members made from the
//! superblocks the real mdadm wrote (`raidcore/tests/fixtures/md`, 8 MiB members), pools created
//! with `--metadata md` compared field by field with them, MD's rules for events, roles,
//! clean/dirty and recovery offsets as raidforge hands a pool back, and every refusal writing
//! nothing. The kernel's side is `raidforge/tests/md_vm.rs`.

use std::path::{Path, PathBuf};

use dev::pool::{CreateOpts, Metadata, Pool, RebuildOpts};
use layout::{Params, SchemeKind};
use raidcore::md::{
    md_checksum, MdRole, MdSuperblock, FEATURE_CLUSTERED, FEATURE_RECOVERY_OFFSET,
    FEATURE_REPLACEMENT, RESYNC_CLEAN, ROLE_FAULTY, ROLE_SPARE,
};

struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let d =
            std::env::temp_dir().join(format!("raidforge-md-pool-{name}-{}", std::process::id()));
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

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../raidcore/tests/fixtures/md")
}

const MEMBER: u64 = 8 << 20;

/// The superblock the real mdadm wrote for fixture member `name` (e.g. "raid5-la-0").
fn fixture_sb(name: &str) -> Vec<u8> {
    std::fs::read(fixtures().join(format!("{name}.sb"))).unwrap()
}

/// An 8 MiB member image holding superblock `sb` where it says it is.
fn member_from(dir: &Path, file: &str, sb: &[u8]) -> PathBuf {
    use std::os::unix::fs::FileExt;
    let p = dir.join(file);
    let f = std::fs::File::create(&p).unwrap();
    f.set_len(MEMBER).unwrap();
    let at = MdSuperblock::decode(sb).unwrap().super_offset * 512;
    f.write_all_at(sb, at).unwrap();
    p
}

/// Member images of fixture array `array` (its members `array-0`, `array-1`, ...).
fn fixture_array(dir: &Path, array: &str) -> Vec<PathBuf> {
    (0..)
        .map(|i| format!("{array}-{i}"))
        .take_while(|n| fixtures().join(format!("{n}.sb")).exists())
        .map(|n| member_from(dir, &format!("{n}.img"), &fixture_sb(&n)))
        .collect()
}

/// A superblock changed by `f`, its checksum fixed.
fn patched(sb: &[u8], f: impl FnOnce(&mut MdSuperblock)) -> Vec<u8> {
    let mut d = MdSuperblock::decode(sb).unwrap();
    f(&mut d);
    let mut b = d.encode().unwrap();
    b.resize(4096, 0);
    let c = md_checksum(&b[..d.len()]);
    b[216..220].copy_from_slice(&c.to_le_bytes());
    b
}

/// The superblock on member image `p`.
fn sb_of(p: &Path) -> MdSuperblock {
    let b = std::fs::read(p).unwrap();
    for at in [
        4096usize,
        0,
        ((b.len() as u64 / 512 - 16) & !7) as usize * 512,
    ] {
        if let Ok(sb) = MdSuperblock::decode(&b[at..at + 4096]) {
            return sb;
        }
    }
    panic!("no MD superblock on {}", p.display())
}

fn digest(p: &Path) -> u32 {
    raidcore::superblock::crc32c(&std::fs::read(p).unwrap())
}

fn md_opts(
    kind: SchemeKind,
    layout: Option<&str>,
    members: Vec<PathBuf>,
    chunk: u64,
) -> CreateOpts {
    let params = Params {
        disks: Some(members.len()),
        md_layout: layout.map(str::to_string),
        ..Params::default()
    };
    CreateOpts {
        size_bytes: Some(MEMBER),
        metadata: Metadata::Md,
        ..CreateOpts::new(kind, params, members, chunk)
    }
}

/// `create --metadata md` writes what mdadm 4.2 writes for the same array (same member size,
/// level, layout, chunk), field for field, but for what is unique to every array and member
/// (UUIDs, times, the name) and the event count.
#[test]
fn created_superblocks_are_mdadms() {
    let cases: &[(SchemeKind, Option<&str>, usize, u64, &str)] = &[
        (SchemeKind::Raid5, Some("la"), 3, 64 << 10, "raid5-la"),
        (SchemeKind::Raid5, None, 4, 128 << 10, "raid5-ls"),
        (SchemeKind::Raid6, None, 4, 64 << 10, "raid6"),
        (
            SchemeKind::Raid6,
            Some("left-symmetric-6"),
            5,
            64 << 10,
            "raid6-ls6",
        ),
        (SchemeKind::Raid0, None, 3, 64 << 10, "raid0"),
        (SchemeKind::Raid4, None, 3, 64 << 10, "raid4"),
        (SchemeKind::Raid10, Some("f2"), 4, 64 << 10, "raid10-f2"),
        (SchemeKind::Raid10, Some("o3"), 5, 64 << 10, "raid10-o3"),
    ];
    for &(kind, layout, n, chunk, fixture) in cases {
        let t = TempDir::new(&format!("create-{fixture}"));
        let members: Vec<PathBuf> = (0..n).map(|i| t.0.join(format!("m{i}.img"))).collect();
        let pool = Pool::create(
            &t.0.join("p.json"),
            md_opts(kind, layout, members.clone(), chunk),
        )
        .unwrap();
        pool.close().unwrap();
        for (i, m) in members.iter().enumerate() {
            let ours = sb_of(m);
            let mut theirs = MdSuperblock::decode(&fixture_sb(&format!("{fixture}-{i}"))).unwrap();
            assert_eq!(ours.dev_number, i as u32);
            assert_eq!(ours.role(), MdRole::Active(i as u16));
            assert!(ours.is_clean());
            // What differs by nature.
            theirs.set_uuid = ours.set_uuid;
            theirs.device_uuid = ours.device_uuid;
            theirs.set_name = ours.set_name;
            theirs.ctime = ours.ctime;
            theirs.utime = ours.utime;
            theirs.events = ours.events;
            assert_eq!(ours, theirs, "{fixture} member {i}");
        }
    }
    // mdadm's data offset for a 32 MiB member with 512 KiB chunks (seen in the VM: 2 MiB).
    assert_eq!(dev::pool::mdadm_data_offset(65536, 1024), 4096);
    assert_eq!(dev::pool::mdadm_data_offset(16384, 128), 2048);
}

/// MD's rules as raidforge hands a pool back: dirty before the first write and clean after
/// close, events bumped on every update, a failed member's superblock left behind and its
/// role faulty, a replacement with a new dev number recovering from its recovery offset,
/// which a rebuild moves on and finally clears.
#[test]
fn superblock_updates_follow_mds_rules() {
    let t = TempDir::new("rules");
    let n = 5;
    let members: Vec<PathBuf> = (0..n).map(|i| t.0.join(format!("m{i}.img"))).collect();
    let desc = t.0.join("p.json");
    let mut pool = Pool::create(
        &desc,
        md_opts(SchemeKind::Raid6, None, members.clone(), 64 << 10),
    )
    .unwrap();
    let e0 = sb_of(&members[0]).events;
    let data: Vec<u8> = (0..3_000_000u32)
        .map(|i| (i * 7 + i / 4099) as u8)
        .collect();
    pool.write(123_457, &data).unwrap();
    let dirty = sb_of(&members[0]);
    assert_eq!(dirty.resync_offset, 0, "dirty while written");
    assert!(dirty.events > e0);
    pool.close().unwrap();
    let clean = sb_of(&members[0]);
    assert_eq!(clean.resync_offset, RESYNC_CLEAN);
    assert!(clean.events > dirty.events);
    for m in &members {
        assert_eq!(
            sb_of(m).events,
            clean.events,
            "every member at the same count"
        );
    }

    let mut pool = Pool::open(&desc).unwrap();
    assert_eq!(pool.read(123_457, data.len() as u64).unwrap(), data);
    pool.fail(1).unwrap();
    let failed_sb = sb_of(&members[1]);
    let after_fail = sb_of(&members[0]);
    assert!(after_fail.events > failed_sb.events);
    assert_eq!(after_fail.dev_roles[1], ROLE_FAULTY);
    let new = t.0.join("new1.img");
    pool.replace(1, &new).unwrap();
    let r = sb_of(&new);
    assert_eq!(
        r.dev_number, n as u32,
        "md.c's first free dev number from raid_disks up"
    );
    assert_eq!(r.role(), MdRole::Active(1));
    assert_eq!(
        r.dev_roles[1], ROLE_SPARE,
        "the replaced member's dev number is free"
    );
    assert_ne!(r.feature_map & FEATURE_RECOVERY_OFFSET, 0);
    assert_eq!(r.recovery_offset, 0);
    assert_eq!(r.data_offset, failed_sb.data_offset);
    assert_eq!(
        sb_of(&members[1]),
        failed_sb,
        "the failed member is not written"
    );
    // The descriptor names the replacement, with no reason for a failure (as for raidforge's
    // own format).
    let d: dev::pool::Descriptor =
        serde_json::from_str(&std::fs::read_to_string(&desc).unwrap()).unwrap();
    let m1 = &d.members[1];
    assert_eq!(m1.path, std::fs::canonicalize(&new).unwrap());
    assert_eq!(m1.failed_why, None, "the replacement has not failed");
    // Part of the rebuild: the recovery offset says how far.
    pool.rebuild(
        &RebuildOpts {
            parallel_cycles: 1,
            max_cycles: Some(3),
            ..RebuildOpts::default()
        },
        |_| {},
    )
    .unwrap();
    let part = sb_of(&new);
    assert_ne!(part.feature_map & FEATURE_RECOVERY_OFFSET, 0);
    // RAID6 over 5 members: a cycle is 5 rows of 64 KiB chunks (128 sectors).
    assert_eq!(part.recovery_offset, 3 * 5 * 128);
    assert_eq!(sb_of(&members[0]).feature_map & FEATURE_RECOVERY_OFFSET, 0);
    pool.close().unwrap();
    // Opened again, the pool resumes from the recovery offset.
    let mut pool = Pool::open(&desc).unwrap();
    assert_eq!(pool.status().cycles_clean, 3);
    pool.rebuild(&RebuildOpts::default(), |_| {}).unwrap();
    assert_eq!(sb_of(&new).feature_map & FEATURE_RECOVERY_OFFSET, 0);
    assert_eq!(pool.read(123_457, data.len() as u64).unwrap(), data);
    assert!(pool.verify().unwrap().inconsistent.is_empty());
    pool.close().unwrap();
    assert!(sb_of(&new).is_clean());
}

/// Arrays mdadm made are adopted from their members alone: every level and layout, v1.0 at
/// the end, v1.1 at the start, a spare, a member failed out (left out), an interrupted
/// recovery (resumed), a dirty array (resynchronised).
#[test]
fn arrays_mdadm_made_are_adopted() {
    let arrays = [
        "raid0",
        "raid1-v1.0",
        "raid1-v1.1",
        "raid4",
        "raid5-la",
        "raid5-ra",
        "raid5-ls",
        "raid5-rs",
        "raid5-p0",
        "raid5-pn",
        "raid6",
        "raid6-ra",
        "raid6-ls6",
        "raid6-p06",
        "raid10-n2",
        "raid10-f2",
        "raid10-o3",
        "raid10-n3",
        "raid5-v1.0",
        "raid6-v1.1",
        "raid5-spare",
        "raid5-degraded",
        "raid5-recovering",
    ];
    for a in arrays {
        let t = TempDir::new(a);
        let members = fixture_array(&t.0, a);
        let mut pool = Pool::assemble(&t.0.join("p.json"), &members, None)
            .unwrap_or_else(|e| panic!("{a}: {e}"));
        let st = pool.status();
        assert!(st.metadata.as_deref().unwrap().starts_with("md 1."), "{a}");
        let size = st.size_bytes;
        // Fixture members are zeros past their superblocks: the array reads zeros.
        assert!(pool.read(0, size).unwrap().iter().all(|&b| b == 0), "{a}");
        match a {
            "raid5-degraded" => {
                assert_eq!(st.failed, vec![1]);
                assert!(!pool.md_notes().is_empty());
            }
            "raid5-recovering" => {
                // The kernel had recovered 1024 sectors of member 2: 8 rows of 64 KiB, two
                // cycles of 3 rows.
                assert_eq!(st.cycles_clean, 2, "{a}");
                pool.rebuild(&RebuildOpts::default(), |_| {}).unwrap();
            }
            _ => assert_eq!(st.state, "clean", "{a}"),
        }
        pool.close().unwrap();
    }
    // The dirty array: resynchronised, then recorded clean.
    let t = TempDir::new("dirty");
    let mut members = fixture_array(&t.0, "raid5-dirty");
    // Member 0's fixture is the copy taken while the array ran (events one behind): make the
    // others say dirty too, as the kernel had them before the copy.
    for m in &mut members[1..] {
        let sb = std::fs::read(&*m).unwrap()[4096..8192].to_vec();
        let d = patched(&sb, |s| s.resync_offset = 0);
        *m = member_from(&t.0, &m.file_name().unwrap().to_string_lossy(), &d);
    }
    let pool = Pool::assemble(&t.0.join("p.json"), &members, None).unwrap();
    assert!(
        pool.md_notes().iter().any(|n| n.contains("resynchronised")),
        "{:?}",
        pool.md_notes()
    );
    pool.close().unwrap();
    assert!(sb_of(&members[0]).is_clean());
}

/// Every refusal names what it refuses and writes nothing to any member (their bytes are the
/// same before and after), nor a descriptor.
#[test]
fn refusals_write_nothing() {
    let la = |i: usize| fixture_sb(&format!("raid5-la-{i}"));
    type Build = Box<dyn Fn(&Path) -> Vec<PathBuf>>;
    let cases: Vec<(&str, Build, &str)> = vec![
        (
            "reshape",
            Box::new(|d| fixture_array(d, "raid5-reshape")),
            "reshape in progress",
        ),
        (
            "journal",
            Box::new(|d| fixture_array(d, "raid5-journal")),
            "write journal device",
        ),
        (
            "ppl",
            Box::new(|d| fixture_array(d, "raid5-ppl")),
            "partial parity log",
        ),
        (
            "bitmap",
            Box::new(|d| fixture_array(d, "raid5-bitmap")),
            "write-intent bitmap",
        ),
        (
            "badblocks",
            Box::new(|d| fixture_array(d, "raid5-badblocks")),
            "bad block log",
        ),
        (
            "clustered",
            Box::new(move |d| {
                (0..3)
                    .map(|i| {
                        let sb = patched(&la(i), |s| s.feature_map |= FEATURE_CLUSTERED);
                        member_from(d, &format!("c{i}.img"), &sb)
                    })
                    .collect()
            }),
            "clustered",
        ),
        (
            // The kernel sets the bit on the member that replaces another (mdadm --replace)
            // until the copy is done.
            "replacement",
            Box::new(move |d| {
                (0..3)
                    .map(|i| {
                        let mut sb = la(i);
                        if i == 2 {
                            sb = patched(&sb, |s| s.feature_map |= FEATURE_REPLACEMENT);
                        }
                        member_from(d, &format!("r{i}.img"), &sb)
                    })
                    .collect()
            }),
            "replacement in progress",
        ),
        (
            // RAID0 uses each member's whole data size: members of different sizes make
            // several zones.
            "raid0-zones",
            Box::new(|d| {
                (0..3)
                    .map(|i| {
                        let mut sb = fixture_sb(&format!("raid0-{i}"));
                        if i == 0 {
                            sb = patched(&sb, |s| s.data_size -= 128);
                        }
                        member_from(d, &format!("z{i}.img"), &sb)
                    })
                    .collect()
            }),
            "different sizes",
        ),
        (
            // A member holding a v1.2 superblock and, at the start, a v1.1 one (of another
            // array): which is it a member of?
            "two-versions",
            Box::new(move |d| {
                use std::os::unix::fs::FileExt;
                let ms: Vec<PathBuf> = (0..3)
                    .map(|i| member_from(d, &format!("v{i}.img"), &la(i)))
                    .collect();
                let v11 = fixture_sb("raid1-v1.1-0");
                std::fs::OpenOptions::new()
                    .write(true)
                    .open(&ms[0])
                    .unwrap()
                    .write_all_at(&v11, 0)
                    .unwrap();
                ms
            }),
            "ambiguous",
        ),
        (
            "mixed",
            Box::new(move |d| {
                vec![
                    member_from(d, "a.img", &la(0)),
                    member_from(d, "b.img", &fixture_sb("raid5-ra-1")),
                    member_from(d, "c.img", &fixture_sb("raid5-ra-2")),
                ]
            }),
            "members of different arrays",
        ),
        (
            "too-few",
            Box::new(move |d| vec![member_from(d, "a.img", &la(0))]),
            "too few members",
        ),
        (
            "dirty-degraded",
            Box::new(move |d| {
                (0..2)
                    .map(|i| {
                        let sb = patched(&la(i), |s| s.resync_offset = 0);
                        member_from(d, &format!("d{i}.img"), &sb)
                    })
                    .collect()
            }),
            "not shut down cleanly",
        ),
        (
            "ddf",
            Box::new(|d| {
                (0..4)
                    .map(|i| {
                        let sb = patched(&fixture_sb(&format!("raid6-{i}")), |s| s.layout = 8);
                        member_from(d, &format!("f{i}.img"), &sb)
                    })
                    .collect()
            }),
            "DDF",
        ),
        (
            "raid10-near-far",
            Box::new(|d| {
                (0..4)
                    .map(|i| {
                        let sb =
                            patched(&fixture_sb(&format!("raid10-f2-{i}")), |s| s.layout = 0x202);
                        member_from(d, &format!("g{i}.img"), &sb)
                    })
                    .collect()
            }),
            "combines near and far",
        ),
        (
            "stale-leaves-too-few",
            Box::new(move |d| {
                let old = patched(&la(2), |s| s.events = 0);
                vec![
                    member_from(d, "a.img", &patched(&la(0), |s| s.events = 9)),
                    member_from(d, "b.img", &old),
                ]
            }),
            "too few members",
        ),
    ];
    for (name, build, says) in cases {
        let t = TempDir::new(&format!("refuse-{name}"));
        let members = build(&t.0);
        let before: Vec<u32> = members.iter().map(|m| digest(m)).collect();
        let desc = t.0.join("p.json");
        let e = match Pool::assemble(&desc, &members, None) {
            Ok(_) => panic!("{name}: adopted"),
            Err(e) => e.to_string(),
        };
        assert!(e.contains(says), "{name}: {e}");
        let after: Vec<u32> = members.iter().map(|m| digest(m)).collect();
        assert_eq!(
            before, after,
            "{name}: a refused assembly wrote to a member"
        );
        assert!(
            !desc.exists(),
            "{name}: a refused assembly wrote a descriptor"
        );
    }
}

/// What needs raidforge's own format is refused under `--metadata md`, naming the option, and
/// nothing is created.
#[test]
fn create_md_refuses_what_md_cannot_record() {
    let t = TempDir::new("create-refusals");
    let members: Vec<PathBuf> = (0..4).map(|i| t.0.join(format!("m{i}.img"))).collect();
    let base = md_opts(SchemeKind::Raid5, None, members.clone(), 64 << 10);
    let cases: Vec<(CreateOpts, &str)> = vec![
        (
            CreateOpts {
                checksums: true,
                ..base.clone()
            },
            "--checksums",
        ),
        (
            CreateOpts {
                write_hole: dev::pool::WriteHole::Journal,
                ..base.clone()
            },
            "--write-hole journal",
        ),
        (
            CreateOpts {
                scheme: SchemeKind::Raid6,
                parity: raidcore::ParityPolicy::Lazy,
                ..base.clone()
            },
            "--parity lazy",
        ),
        (
            CreateOpts {
                scheme: SchemeKind::RaidPlus,
                ..base.clone()
            },
            "raid0, raid1, raid4, raid5, raid6",
        ),
        (
            CreateOpts {
                chunk_bytes: 96 << 10,
                ..base.clone()
            },
            "power of two",
        ),
        (
            CreateOpts {
                params: Params {
                    disks: Some(4),
                    spares: 1,
                    ..Params::default()
                },
                ..base.clone()
            },
            "--spares",
        ),
    ];
    for (opts, says) in cases {
        let e = match Pool::create(&t.0.join("p.json"), opts) {
            Ok(_) => panic!("{says}: created"),
            Err(e) => e.to_string(),
        };
        assert!(e.contains(says), "{says}: {e}");
        assert!(
            members.iter().all(|m| !m.exists()),
            "{says}: a member was created"
        );
    }
}

/// An MD-format pool served (`SharedPool`, what `raidforge serve` runs): served writes mark the
/// superblocks dirty before the first member write and closing marks them clean again; scrub
/// finds the parity consistent and, after
/// a parity chunk is damaged behind the pool's back, finds and repairs exactly that stripe.
#[test]
fn served_and_scrubbed_in_mds_format() {
    use dev::scrub::ScrubOpts;
    use dev::serve_support::{Concurrency, SharedPool};
    use std::os::unix::fs::FileExt;
    let t = TempDir::new("served");
    let members: Vec<PathBuf> = (0..4).map(|i| t.0.join(format!("m{i}.img"))).collect();
    let desc = t.0.join("p.json");
    let pool = Pool::create(
        &desc,
        md_opts(SchemeKind::Raid5, None, members.clone(), 64 << 10),
    )
    .unwrap();
    let e0 = sb_of(&members[0]).events;
    assert!(sb_of(&members[0]).is_clean());
    let sp = SharedPool::new(pool, Concurrency::Stripes).unwrap();
    let data: Vec<u8> = (0..1_000_000u32)
        .map(|i| (i * 13 + i / 777) as u8)
        .collect();
    sp.write(65_536 * 3 + 512, &data).unwrap();
    let dirty = sb_of(&members[0]);
    assert_eq!(dirty.resync_offset, 0, "dirty once served writes ran");
    assert!(dirty.events > e0);
    sp.flush().unwrap();
    let mut back = vec![0u8; data.len()];
    sp.read(65_536 * 3 + 512, &mut back).unwrap();
    assert!(back == data);
    sp.close().unwrap();
    let clean = sb_of(&members[0]);
    assert!(clean.is_clean(), "closing the served pool marks it clean");
    assert!(clean.events > dirty.events);

    // Scrub: consistent; then one parity chunk damaged on its member, found and repaired.
    let mut pool = Pool::open(&desc).unwrap();
    let r = pool.scrub(&ScrubOpts::default(), |_| {}).unwrap();
    assert!(r.parity_mismatches.is_empty(), "{r:?}");
    pool.close().unwrap();
    // RAID5 left-symmetric over 4: row 0's parity is on slot 3, at the member's data offset.
    let sb3 = sb_of(&members[3]);
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&members[3])
        .unwrap();
    f.write_all_at(&[0x5a; 512], sb3.data_offset * 512 + 4096)
        .unwrap();
    drop(f);
    let mut pool = Pool::open(&desc).unwrap();
    let r = pool
        .scrub(
            &ScrubOpts {
                rewrite_parity: true,
                ..ScrubOpts::default()
            },
            |_| {},
        )
        .unwrap();
    assert_eq!(r.parity_mismatches.len(), 1, "{r:?}");
    assert!(r.parity_mismatches[0].repaired);
    assert!(pool.verify().unwrap().inconsistent.is_empty());
    assert_eq!(
        pool.read(65_536 * 3 + 512, data.len() as u64).unwrap(),
        data
    );
    pool.close().unwrap();
    assert!(sb_of(&members[3]).is_clean());
}

/// A member of a v1.0 array (superblock at the member's end, data from sector 0) failed,
/// replaced and rebuilt: the new member's superblock sits at its own end with the room before
/// it that the replaced member had, and holds the array's data size.
#[test]
fn a_v1_0_member_is_replaced_at_its_end() {
    let t = TempDir::new("v10-replace");
    let members = fixture_array(&t.0, "raid5-v1.0");
    let desc = t.0.join("p.json");
    let mut pool = Pool::assemble(&desc, &members, None).unwrap();
    let data: Vec<u8> = (0..700_000u32).map(|i| (i * 3 + i / 1001) as u8).collect();
    pool.write(40_960, &data).unwrap();
    let old = sb_of(&members[2]);
    pool.fail(2).unwrap();
    let new = t.0.join("new2.img");
    pool.replace(2, &new).unwrap();
    pool.rebuild(&RebuildOpts::default(), |_| {}).unwrap();
    pool.close().unwrap();
    let sb = sb_of(&new);
    let sectors = std::fs::metadata(&new).unwrap().len() / 512;
    assert_eq!(sb.super_offset, (sectors - 16) & !7, "v1.0: at the end");
    assert_eq!(sb.data_offset, 0);
    assert_eq!(
        sb.super_offset - sb.data_size,
        old.super_offset - (old.data_offset + old.data_size)
    );
    assert!(sb.data_size >= old.size);
    assert_eq!(sb.role(), MdRole::Active(2));
    assert!(sb.is_clean());
    assert_eq!(sb.feature_map & FEATURE_RECOVERY_OFFSET, 0);
    assert_eq!(sb.events, sb_of(&members[0]).events);
    let mut pool = Pool::open(&desc).unwrap();
    assert_eq!(pool.read(40_960, data.len() as u64).unwrap(), data);
    assert!(pool.verify().unwrap().inconsistent.is_empty());
    pool.close().unwrap();
}
