//! raidforge against the real Linux MD: the kernel's RAID runs in a QEMU guest
//! (`scripts/md-vm.sh`, driven by `common/mdvm.rs`) over image files that raidforge reads and
//! writes on the host. Each test is one guest boot that does many arrays at once.

mod common;
#[path = "common/mdvm.rs"]
mod mdvm;

use common::TempDir;
use mdvm::{image, value, vm_or_skip, MdVm};

/// xorshift64 bytes.
fn bytes(seed: u64, n: usize) -> Vec<u8> {
    let mut s = seed | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 24) as u8
        })
        .collect()
}

/// The harness itself: the guest sees every disk by name, builds MD arrays over them, writes
/// what the host gave it and copies the arrays' contents out, byte for byte.
#[test]
fn guest_runs_md_over_host_images() {
    if !vm_or_skip("guest_runs_md_over_host_images") {
        return;
    }
    let t = TempDir::new("md-vm", "harness");
    let d = t.path();
    let mut vm = MdVm::new();
    for i in 0..6 {
        let p = d.join(format!("m{i}.img"));
        image(&p, 8 << 20);
        vm.disk(&format!("m{i}"), &p);
    }
    let payload = bytes(7, 2 << 20);
    std::fs::write(d.join("payload.img"), &payload).unwrap();
    vm.disk("payload", &d.join("payload.img"));
    image(&d.join("out5.img"), 32 << 20);
    image(&d.join("out1.img"), 8 << 20);
    vm.disk("out5", &d.join("out5.img"));
    vm.disk("out1", &d.join("out1.img"));
    vm.sh(
        r#"
echo "RFVM disks $(ls /dev/rf | sort | tr '\n' ' ')"
mdadm --create /dev/md0 --run --level=5 --raid-devices=4 --chunk=64 --assume-clean /dev/rf/m0 /dev/rf/m1 /dev/rf/m2 /dev/rf/m3 2>/dev/null
mdadm --create /dev/md1 --run --level=1 --raid-devices=2 --assume-clean /dev/rf/m4 /dev/rf/m5 2>/dev/null
for md in md0 md1; do
  dd if=/dev/rf/payload of=/dev/$md bs=64k seek=16 oflag=direct 2>/dev/null
  echo "RFVM $md-size $(blockdev --getsize64 /dev/$md)"
done
dd if=/dev/md0 of=/dev/rf/out5 bs=1M iflag=direct 2>/dev/null
dd if=/dev/md1 of=/dev/rf/out1 bs=1M iflag=direct 2>/dev/null
echo "RFVM level $(cat /sys/block/md0/md/level) $(cat /sys/block/md1/md/level)"
mdadm --stop /dev/md0 /dev/md1 2>/dev/null
"#,
    );
    let lines = vm.run(d);
    assert_eq!(
        value(&lines, "disks").trim(),
        "m0 m1 m2 m3 m4 m5 out1 out5 payload"
    );
    assert_eq!(value(&lines, "level"), "raid5 raid1");
    for (md, out) in [("md0", "out5.img"), ("md1", "out1.img")] {
        let size: usize = value(&lines, &format!("{md}-size")).parse().unwrap();
        let back = std::fs::read(d.join(out)).unwrap();
        assert!(size > 3 << 20 && size <= back.len(), "{md}: size {size}");
        let mut want = vec![0u8; size];
        want[1 << 20..3 << 20].copy_from_slice(&payload);
        assert!(back[..size] == want[..], "{md}: the array's bytes differ");
    }
}

/// The arrays whose superblocks are committed as `crates/raidcore/tests/fixtures/md/`: name,
/// member count, the `mdadm` options, and which members to keep (`*` all). Run by
/// `generate_md_superblock_fixtures` (ignored: it writes into the source tree).
const FIXTURES: &[(&str, usize, &str)] = &[
    ("raid0", 3, "--level=0 --chunk=64"),
    ("raid1-v1.0", 2, "--level=1 --metadata=1.0"),
    ("raid1-v1.1", 2, "--level=1 --metadata=1.1"),
    ("raid4", 3, "--level=4 --chunk=64"),
    (
        "raid5-la",
        3,
        "--level=5 --layout=left-asymmetric --chunk=64",
    ),
    (
        "raid5-ra",
        3,
        "--level=5 --layout=right-asymmetric --chunk=64",
    ),
    ("raid5-ls", 4, "--level=5 --chunk=128"),
    (
        "raid5-rs",
        3,
        "--level=5 --layout=right-symmetric --chunk=64",
    ),
    ("raid5-p0", 3, "--level=5 --layout=parity-first --chunk=64"),
    ("raid5-pn", 3, "--level=5 --layout=parity-last --chunk=64"),
    ("raid6", 4, "--level=6 --chunk=64"),
    (
        "raid6-ra",
        5,
        "--level=6 --layout=right-asymmetric --chunk=64",
    ),
    (
        "raid6-ls6",
        5,
        "--level=6 --layout=left-symmetric-6 --chunk=64",
    ),
    (
        "raid6-p06",
        4,
        "--level=6 --layout=parity-first-6 --chunk=64",
    ),
    ("raid10-n2", 3, "--level=10 --layout=n2 --chunk=64"),
    ("raid10-f2", 4, "--level=10 --layout=f2 --chunk=64"),
    ("raid10-o3", 5, "--level=10 --layout=o3 --chunk=64"),
    ("raid10-n3", 4, "--level=10 --layout=n3 --chunk=32"),
    ("raid5-v1.0", 3, "--level=5 --metadata=1.0 --chunk=64"),
    ("raid6-v1.1", 4, "--level=6 --metadata=1.1 --chunk=64"),
    ("raid5-bitmap", 3, "--level=5 --bitmap=internal --chunk=64"),
    (
        "raid5-ppl",
        3,
        "--level=5 --consistency-policy=ppl --chunk=64",
    ),
    (
        "raid5-spare",
        4,
        "--level=5 --raid-devices=3 --spare-devices=1 --chunk=64",
    ),
];

/// Writes `crates/raidcore/tests/fixtures/md/`: superblocks the real mdadm and kernel wrote, with
/// `mdadm --examine`'s report of each, for the golden tests of `raidcore::md`. Ignored by
/// default: `cargo test -p raidforge --test md_vm -- --ignored generate_md_superblock_fixtures`.
#[test]
#[ignore]
fn generate_md_superblock_fixtures() {
    assert!(vm_or_skip("generate_md_superblock_fixtures"));
    let t = TempDir::new("md-vm", "fixtures");
    let d = t.path();
    let out_dir =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../raidcore/tests/fixtures/md");
    std::fs::create_dir_all(&out_dir).unwrap();
    let mut vm = MdVm::new();
    let mut members: Vec<(String, Vec<String>)> = Vec::new();
    let mut script = String::from(
        "X() { \"$@\" 2>&1 | sed 's/^/RFVM log /'; }\n\
         ex() { mdadm --examine \"/dev/rf/$2\" 2>&1 | sed \"s|^|RFVM ex:$1:$2 |\"; }\n\
         echo \"RFVM kernel $(uname -r)\"\necho \"RFVM mdadm $(mdadm --version 2>&1)\"\n",
    );
    let mut md = 0;
    let add = |name: &str, n: usize, vm: &mut MdVm| -> Vec<String> {
        let names: Vec<String> = (0..n).map(|i| format!("{name}-{i}")).collect();
        for m in &names {
            let p = d.join(format!("{m}.img"));
            image(&p, 8 << 20);
            vm.disk(m, &p);
        }
        names
    };
    for &(name, n, opts) in FIXTURES {
        let names = add(name, n, &mut vm);
        let devs: Vec<String> = names.iter().map(|m| format!("/dev/rf/{m}")).collect();
        let rd = if opts.contains("--raid-devices") {
            String::new()
        } else {
            format!("--raid-devices={n}")
        };
        script += &format!(
            "X mdadm --create /dev/md{md} --run --assume-clean {rd} {opts} {}\nX mdadm --stop /dev/md{md}\n",
            devs.join(" ")
        );
        for m in &names {
            script += &format!("ex {name} {m}\n");
        }
        members.push((name.to_string(), names));
        md += 1;
    }
    // States the kernel reaches while running: a member failed out (the survivors record it),
    // a recovery interrupted (MD's own initial RAID5 build, slowed down: the last member
    // records how far it got), a reshape interrupted, an array marked dirty by a write, a
    // bad block recorded, a write journal device.
    let special: &[(&str, usize, &str)] = &[
        (
            "raid5-degraded",
            3,
            "X mdadm --create /dev/mdN --run --assume-clean --level=5 --raid-devices=3 --chunk=64 $D\n\
             X mdadm /dev/mdN --fail /dev/rf/raid5-degraded-1\nX mdadm --stop /dev/mdN\n",
        ),
        (
            "raid5-recovering",
            3,
            "echo 1 > /proc/sys/dev/raid/speed_limit_min; echo 1 > /proc/sys/dev/raid/speed_limit_max\n\
             X mdadm --create /dev/mdN --run --level=5 --raid-devices=3 --chunk=64 $D\nsleep 2\n\
             X cat /proc/mdstat\nX mdadm --stop /dev/mdN\n",
        ),
        (
            "raid5-reshape",
            4,
            "echo 1 > /proc/sys/dev/raid/speed_limit_min; echo 1 > /proc/sys/dev/raid/speed_limit_max\n\
             X mdadm --create /dev/mdN --run --assume-clean --level=5 --raid-devices=3 --chunk=64 /dev/rf/raid5-reshape-0 /dev/rf/raid5-reshape-1 /dev/rf/raid5-reshape-2\n\
             X mdadm /dev/mdN --add /dev/rf/raid5-reshape-3\nX mdadm --grow /dev/mdN --raid-devices=4\nsleep 2\n\
             X cat /proc/mdstat\nX mdadm --stop /dev/mdN\n",
        ),
        (
            "raid5-dirty",
            3,
            "X mdadm --create /dev/mdN --run --assume-clean --level=5 --raid-devices=3 --chunk=64 $D\n\
             echo 600 > /sys/block/mdN/md/safe_mode_delay\n\
             dd if=/dev/zero of=/dev/mdN bs=4k count=1 oflag=direct 2>/dev/null\nsleep 1\n\
             dd if=/dev/rf/raid5-dirty-0 of=/dev/rf/dirty-copy bs=4096 count=2 iflag=direct oflag=direct 2>/dev/null\n\
             ex raid5-dirty-live dirty-copy\n\
             X cat /sys/block/mdN/md/array_state\nX mdadm --stop /dev/mdN\n",
        ),
        (
            "raid5-badblocks",
            3,
            "X mdadm --create /dev/mdN --run --assume-clean --level=5 --raid-devices=3 --chunk=64 $D\n\
             k=$(basename $(readlink /dev/rf/raid5-badblocks-1))\n\
             echo '4096 8' > /sys/block/mdN/md/dev-$k/bad_blocks\necho '6000 16' > /sys/block/mdN/md/dev-$k/bad_blocks\n\
             dd if=/dev/zero of=/dev/mdN bs=4k count=1 oflag=direct 2>/dev/null\nsleep 1\n\
             X cat /sys/block/mdN/md/dev-$k/bad_blocks\nX mdadm --stop /dev/mdN\n",
        ),
        (
            "raid5-journal",
            4,
            "X mdadm --create /dev/mdN --run --assume-clean --level=5 --raid-devices=3 --chunk=64 --write-journal /dev/rf/raid5-journal-3 /dev/rf/raid5-journal-0 /dev/rf/raid5-journal-1 /dev/rf/raid5-journal-2\n\
             X mdadm --stop /dev/mdN\n",
        ),
    ];
    let dirty_copy = d.join("dirty-copy.img");
    image(&dirty_copy, 8 << 20);
    vm.disk("dirty-copy", &dirty_copy);
    for &(name, n, cmds) in special {
        let names = add(name, n, &mut vm);
        let devs: Vec<String> = names.iter().map(|m| format!("/dev/rf/{m}")).collect();
        script += &cmds
            .replace("mdN", &format!("md{md}"))
            .replace("$D", &devs.join(" "));
        for m in &names {
            script += &format!("ex {name} {m}\n");
        }
        members.push((name.to_string(), names));
        md += 1;
    }
    vm.sh(&script);
    let lines = vm.run(d);
    std::fs::write(d.join("lines.txt"), lines.join("\n")).unwrap();
    let kernel = value(&lines, "kernel").to_string();
    let mdadm = value(&lines, "mdadm").to_string();
    let mut listing = String::new();
    for (name, names) in &members {
        for m in names {
            let live = name == "raid5-dirty" && m.ends_with("-0");
            let key = if live {
                "ex:raid5-dirty-live:dirty-copy ".to_string()
            } else {
                format!("ex:{name}:{m} ")
            };
            let examine: Vec<&str> = lines.iter().filter_map(|l| l.strip_prefix(&key)).collect();
            let text = examine.join("\n") + "\n";
            let so: u64 = examine
                .iter()
                .find_map(|l| l.trim().strip_prefix("Super Offset : "))
                .unwrap_or_else(|| panic!("{m}: no super offset in {examine:?}"))
                .split_whitespace()
                .next()
                .unwrap()
                .parse()
                .unwrap();
            let img = std::fs::read(d.join(format!("{m}.img"))).unwrap();
            let at = so as usize * 512;
            let (sb, from) = if live {
                let copy = std::fs::read(&dirty_copy).unwrap();
                (
                    copy[4096..8192].to_vec(),
                    "copied in the guest while the array ran",
                )
            } else {
                (
                    img[at..at + 4096].to_vec(),
                    "read from the image after mdadm --stop",
                )
            };
            std::fs::write(out_dir.join(format!("{m}.sb")), &sb).unwrap();
            std::fs::write(out_dir.join(format!("{m}.examine")), text).unwrap();
            let mut extra = String::new();
            if let Some(bbl) = examine
                .iter()
                .find_map(|l| l.trim().strip_prefix("Bad Block Log : "))
            {
                // "512 entries available at offset 16 sectors"
                let off: i64 = bbl
                    .split("offset ")
                    .nth(1)
                    .and_then(|s| s.split_whitespace().next())
                    .and_then(|s| s.parse().ok())
                    .unwrap_or_else(|| panic!("{m}: bad block log line {bbl:?}"));
                let from = (at as i64 + off * 512) as usize;
                let log = &img[from..from + 4096];
                if bbl.contains("bad blocks present") {
                    std::fs::write(out_dir.join(format!("{m}.bbl")), log).unwrap();
                    extra = format!(", bad block log {m}.bbl");
                }
            }
            listing += &format!("| `{m}.sb`{extra} | {name} | {from} |\n");
        }
    }
    let mut how = String::new();
    for &(name, n, opts) in FIXTURES {
        let rd = if opts.contains("--raid-devices") {
            String::new()
        } else {
            format!("--raid-devices={n} ")
        };
        how += &format!("- {name}: `mdadm --create --run --assume-clean {rd}{opts}` over {n} members, then `--stop`\n");
    }
    for &(name, _, cmds) in special {
        how += &format!("- {name}:\n\n```\n{}```\n", cmds.replace("X ", ""));
    }
    let provenance = format!(
        "# Linux MD superblocks for raidcore's golden tests\n\n\
         Written by the real mdadm and kernel in the guest of `scripts/md-vm.sh` ({kernel}, {mdadm}),\n\
         on 8 MiB sparse image files, by `generate_md_superblock_fixtures` in\n\
         `crates/raidforge/tests/md_vm.rs` (ignored test; rerun it to regenerate). Each `NAME.sb` is the\n\
         4096 bytes at the member's superblock offset; `NAME.examine` is `mdadm --examine` of that member\n\
         in the same guest, which the golden tests parse for the values they expect.\n\n\
         | file | array | how |\n|---|---|---|\n{listing}\n## Commands\n\n{how}"
    );
    std::fs::write(out_dir.join("PROVENANCE.md"), provenance).unwrap();
}

/// The arrays the kernel makes and writes for the tests below (one boot for all): name, member
/// count, `mdadm --create` options. Every level, every RAID5/RAID6 layout, RAID10 near, far and
/// offset with 2 and 3 copies, odd and even member counts.
const KERNEL_ARRAYS: &[(&str, usize, &str)] = &[
    ("raid0", 3, "--level=0"),
    ("raid1", 2, "--level=1"),
    ("raid1x3", 3, "--level=1"),
    ("raid4", 4, "--level=4"),
    ("r5-la", 4, "--level=5 --layout=left-asymmetric"),
    ("r5-ra", 4, "--level=5 --layout=right-asymmetric"),
    ("r5-ls", 3, "--level=5 --layout=left-symmetric"),
    ("r5-ls5", 5, "--level=5"),
    ("r5-rs", 4, "--level=5 --layout=right-symmetric"),
    ("r5-pf", 4, "--level=5 --layout=parity-first"),
    ("r5-pl", 4, "--level=5 --layout=parity-last"),
    ("r6-la", 5, "--level=6 --layout=left-asymmetric"),
    ("r6-ra", 5, "--level=6 --layout=right-asymmetric"),
    ("r6-ls", 5, "--level=6"),
    ("r6-ls4", 4, "--level=6 --layout=left-symmetric"),
    ("r6-rs", 6, "--level=6 --layout=right-symmetric"),
    ("r6-pf", 5, "--level=6 --layout=parity-first"),
    ("r6-pl", 5, "--level=6 --layout=parity-last"),
    ("r6-la6", 5, "--level=6 --layout=left-asymmetric-6"),
    ("r6-ra6", 5, "--level=6 --layout=right-asymmetric-6"),
    ("r6-ls6", 6, "--level=6 --layout=left-symmetric-6"),
    ("r6-rs6", 5, "--level=6 --layout=right-symmetric-6"),
    ("r6-pf6", 5, "--level=6 --layout=parity-first-6"),
    ("r10-n2", 4, "--level=10 --layout=n2"),
    ("r10-n2odd", 3, "--level=10 --layout=n2"),
    ("r10-n3", 5, "--level=10 --layout=n3"),
    ("r10-f2", 4, "--level=10 --layout=f2"),
    ("r10-f2odd", 5, "--level=10 --layout=f2"),
    ("r10-f3", 3, "--level=10 --layout=f3"),
    ("r10-o2", 3, "--level=10 --layout=o2"),
    ("r10-o3", 4, "--level=10 --layout=o3"),
];

/// Bytes the kernel writes at the start of every array, and at its end.
const HEAD_BYTES: usize = 4 << 20;
const TAIL_BYTES: usize = 1 << 20;

/// One array the kernel made: its members on the host and its size as the kernel saw it.
#[allow(dead_code)]
struct KernelArray {
    name: &'static str,
    opts: &'static str,
    members: Vec<std::path::PathBuf>,
    size: u64,
}

impl KernelArray {
    /// What the array holds: the payload's head at 0 and its tail at the end, zeros between.
    fn expected(&self, payload: &[u8]) -> Vec<u8> {
        let mut v = vec![0u8; self.size as usize];
        v[..HEAD_BYTES].copy_from_slice(&payload[..HEAD_BYTES]);
        let at = self.size as usize - TAIL_BYTES;
        v[at..].copy_from_slice(&payload[HEAD_BYTES..HEAD_BYTES + TAIL_BYTES]);
        v
    }
}

struct KernelArrays {
    arrays: Vec<KernelArray>,
    payload: Vec<u8>,
}

/// One guest boot makes every array of [`KERNEL_ARRAYS`] (64 KiB chunks, v1.2, members of
/// 8 MiB plus 0..4 chunks so that the last cycle is often partial), writes [`HEAD_BYTES`] of
/// the payload at its start and [`TAIL_BYTES`] at its end with `O_DIRECT`, and stops it. The
/// images stay in the target directory; tests that change them work on copies. None when the
/// guest cannot run here (see [`vm_or_skip`]).
fn kernel_arrays(test: &str) -> Option<&'static KernelArrays> {
    static K: std::sync::OnceLock<Option<KernelArrays>> = std::sync::OnceLock::new();
    if !vm_or_skip(test) {
        return None;
    }
    K.get_or_init(|| {
        let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("md-vm-kernel-arrays");
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let payload = bytes(0x23, HEAD_BYTES + TAIL_BYTES);
        std::fs::write(dir.join("payload.img"), &payload).unwrap();
        let mut vm = MdVm::new();
        vm.disk("payload", &dir.join("payload.img"));
        let mut script = String::new();
        let mut arrays = Vec::new();
        for (i, &(name, n, opts)) in KERNEL_ARRAYS.iter().enumerate() {
            let mut devs = Vec::new();
            let mut members = Vec::new();
            for j in 0..n {
                let p = dir.join(format!("{name}-{j}.img"));
                image(&p, (8 << 20) + (i as u64 % 5) * (64 << 10));
                let disk = format!("{name}-{j}");
                vm.disk(&disk, &p);
                devs.push(format!("/dev/rf/{disk}"));
                members.push(p);
            }
            // RAID1 has no chunk (mdadm refuses one).
            let chunk = if opts == "--level=1" { "" } else { "--chunk=64" };
            script += &format!(
                "mdadm --create /dev/md{i} --run --assume-clean --metadata=1.2 {chunk} \
                 --raid-devices={n} {opts} {} 2>/dev/null\n\
                 sz=$(blockdev --getsize64 /dev/md{i})\n\
                 dd if=/dev/rf/payload of=/dev/md{i} bs=64k count={} oflag=direct 2>/dev/null\n\
                 dd if=/dev/rf/payload of=/dev/md{i} bs=64k skip={} seek=$((sz / 65536 - {})) count={} oflag=direct 2>/dev/null\n\
                 echo \"RFVM size {name} $sz\"\n\
                 mdadm --stop /dev/md{i} 2>/dev/null\n",
                devs.join(" "),
                HEAD_BYTES >> 16,
                HEAD_BYTES >> 16,
                TAIL_BYTES >> 16,
                TAIL_BYTES >> 16,
            );
            arrays.push(KernelArray {
                name,
                opts,
                members,
                size: 0,
            });
        }
        vm.sh(&script);
        let lines = vm.run(&dir);
        for a in &mut arrays {
            a.size = value(&lines, &format!("size {}", a.name)).parse().unwrap();
            assert!(
                a.size as usize >= HEAD_BYTES + TAIL_BYTES && a.size % 65536 == 0,
                "{}: size {}",
                a.name,
                a.size
            );
        }
        Some(KernelArrays { arrays, payload })
    })
    .as_ref()
}

/// Reads `len` bytes at `at` of a file.
fn read_at(path: &std::path::Path, at: u64, len: usize) -> Vec<u8> {
    use std::os::unix::fs::FileExt;
    let f = std::fs::File::open(path).unwrap();
    let mut b = vec![0u8; len];
    f.read_exact_at(&mut b, at).unwrap();
    b
}

/// `layout::md` against what the kernel wrote: for every array of [`KERNEL_ARRAYS`], every
/// chunk read raw from the member images where the layout crate says it is (MD's superblocks
/// say the geometry and each member's role), P and Q recomputed with `codec` from the data in
/// the stripe's syndrome order, every RAID1/RAID10 copy compared with its data.
#[test]
fn layout_md_places_every_chunk_where_the_kernel_wrote_it() {
    let Some(k) = kernel_arrays("layout_md_places_every_chunk_where_the_kernel_wrote_it") else {
        return;
    };
    use layout::md::{MdGeometry, MdLayout};
    use layout::Role;
    use raidcore::md::{MdRole, MdSuperblock};
    for a in &k.arrays {
        let want = a.expected(&k.payload);
        // Member files by role.
        let mut by_role = vec![None; a.members.len()];
        let mut sb0 = None;
        for m in &a.members {
            let sb = MdSuperblock::decode(&read_at(m, 4096, 4096)).unwrap();
            let MdRole::Active(r) = sb.role() else {
                panic!("{}: {} is not active", a.name, m.display())
            };
            by_role[r as usize] = Some(m.clone());
            sb0.get_or_insert(sb);
        }
        let sb = sb0.unwrap();
        let n = sb.raid_disks as usize;
        let md = MdLayout::from_md(sb.level, sb.layout, n).unwrap();
        let chunk_sectors = if sb.chunk_sectors == 0 {
            128
        } else {
            u64::from(sb.chunk_sectors)
        };
        let geo = MdGeometry {
            layout: md,
            raid_disks: n,
            chunk_sectors,
            dev_sectors: if sb.level == 0 { sb.data_size } else { sb.size },
        };
        assert_eq!(geo.array_sectors() * 512, a.size, "{}: array size", a.name);
        let cb = (chunk_sectors * 512) as usize;
        let cycle = md.cycle(n, 0);
        let per = cycle.data.len() as u64;
        let chunks = a.size / cb as u64;
        let unit = |d: u32, cyc: u64, off: u64| -> Vec<u8> {
            let row = geo
                .physical_row(cyc * cycle.rows + off, cycle.rows)
                .unwrap_or_else(|| panic!("{}: row past the end", a.name));
            read_at(
                by_role[d as usize].as_ref().unwrap(),
                sb.data_offset * 512 + row * cb as u64,
                cb,
            )
        };
        let mut checked_parity = 0;
        for c in 0..chunks.div_ceil(per) {
            for s in &cycle.stripes {
                let data: Vec<_> = s.units.iter().filter(|u| u.role == Role::Data).collect();
                // Only stripes wholly inside the array.
                let idx: Vec<u64> = data
                    .iter()
                    .map(|u| {
                        c * per + cycle.data.iter().position(|l| *l == u.loc()).unwrap() as u64
                    })
                    .collect();
                if idx.iter().any(|&i| i >= chunks) {
                    continue;
                }
                let bytes: Vec<Vec<u8>> = data.iter().map(|u| unit(u.disk, c, u.offset)).collect();
                for (i, b) in idx.iter().zip(&bytes) {
                    let at = (*i as usize) * cb;
                    assert!(
                        b[..] == want[at..at + cb],
                        "{}: logical chunk {i} is not where layout::md puts it",
                        a.name
                    );
                }
                let refs: Vec<&[u8]> = bytes.iter().map(Vec::as_slice).collect();
                for u in &s.units {
                    let got = unit(u.disk, c, u.offset);
                    match u.role {
                        Role::Data => {}
                        Role::Mirror => assert!(got == bytes[0], "{}: copy differs", a.name),
                        Role::P => {
                            let mut p = vec![0u8; cb];
                            codec::xor::encode(&refs, &mut p).unwrap();
                            assert!(got == p, "{}: P of cycle {c}", a.name);
                            checked_parity += 1;
                        }
                        Role::Q => {
                            let (mut p, mut q) = (vec![0u8; cb], vec![0u8; cb]);
                            codec::pq::encode(&refs, &mut p, &mut q).unwrap();
                            assert!(got == q, "{}: Q of cycle {c}", a.name);
                            checked_parity += 1;
                        }
                    }
                }
            }
        }
        if matches!(
            md,
            MdLayout::Raid4 | MdLayout::Raid5(_) | MdLayout::Raid6(_)
        ) {
            assert!(checked_parity as u64 >= chunks / per, "{}", a.name);
        }
    }
}
