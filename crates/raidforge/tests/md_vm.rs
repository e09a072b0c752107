//! raidforge against the real Linux MD: the kernel's RAID runs in a QEMU guest
//! (`scripts/md-vm.sh`, driven by `common/mdvm.rs`) over image files that raidforge reads and
//! writes on the host. Each test is one guest boot that does many arrays at once.

mod common;
#[path = "common/mdvm.rs"]
mod mdvm;

use common::TempDir;
use mdvm::{image, mark, value, vm_or_skip, MdVm};

/// The tests of this file one at a time. Pools here take `flock` locks on their members, and
/// every test starts processes (the guest, `raidforge`): a lock is held by the open file
/// description, which a child shares from `fork` until its `exec`, so a member one thread
/// closed and at once opened again could be found locked while another thread starts a
/// process (seen: "in use by another raidforge process"). The guest boots dominate anyway.
fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static M: std::sync::Mutex<()> = std::sync::Mutex::new(());
    M.lock().unwrap_or_else(|e| e.into_inner())
}

/// The harness itself: the guest sees every disk by name, builds MD arrays over them, writes
/// what the host gave it and copies the arrays' contents out, byte for byte.
#[test]
fn guest_runs_md_over_host_images() {
    let _serial = one_at_a_time();
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
    let payload = common::pattern(7, 2 << 20);
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
    let _serial = one_at_a_time();
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

/// What the kernel does to an array of [`KERNEL_ARRAYS`] after writing it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Then {
    /// Nothing: stopped.
    Stop,
    /// Member 1 failed and removed, a new member added and recovered completely (until
    /// `sync_action` is idle and nothing is degraded), then stopped: member 1 is stale, the
    /// new one holds slot 1 (`in_sync`, asserted). One array of each level and layout family
    /// (RAID1, RAID4, RAID5, RAID6, RAID10 near, far and offset).
    Rebuild,
    /// The same onto the same disk: member 1 failed, removed, zeroed whole (superblock and
    /// data) and added again, as a new member the kernel recovers completely. Costs no disk
    /// of its own (a boot's time grows with its disks): the rest of the RAID5 and RAID6
    /// algorithms and RAID10 with 3 copies. A zeroed member holds nothing the kernel did not
    /// write again, so raidforge's reads and `verify` through it say what the recovery wrote.
    RebuildSameDisk,
    /// The same, but the recovery is held at [`INTERRUPT_AT`] sectors (the array's
    /// `sync_max`), and the array stopped once it got there: the new member's superblock
    /// records that recovery offset.
    Interrupt,
}

/// The arrays the kernel makes and writes for the tests below (one boot for all): name, member
/// count, `mdadm --create` options, what happens after. Every level, every RAID5/RAID6 layout,
/// RAID10 near, far and offset with 2 and 3 copies, odd and even member counts, and arrays the
/// kernel rebuilt (every redundant level, every RAID5 and RAID6 algorithm, every RAID10
/// layout) or was rebuilding. Kept small: each disk adds to the boot's time, so the rebuilt
/// ones stand in for plain arrays of the same layout where another plain one remains
/// (`raid1x3`, `r1-v10`; `r10-n2odd`), and the rest of the layouts are rebuilt onto the same
/// disk ([`Then::RebuildSameDisk`]): those arrays are adopted with every member given, as a
/// plain one is, and are the only arrays of their layout here.
const KERNEL_ARRAYS: &[(&str, usize, &str, Then)] = &[
    ("raid0", 3, "--level=0", Then::Stop),
    ("r1-rebuilt", 2, "--level=1", Then::Rebuild),
    ("raid1x3", 3, "--level=1", Then::Stop),
    ("raid4", 4, "--level=4", Then::Stop),
    (
        "r5-la",
        4,
        "--level=5 --layout=left-asymmetric",
        Then::RebuildSameDisk,
    ),
    (
        "r5-ra",
        4,
        "--level=5 --layout=right-asymmetric",
        Then::RebuildSameDisk,
    ),
    ("r5-ls", 3, "--level=5 --layout=left-symmetric", Then::Stop),
    ("r5-ls5", 5, "--level=5", Then::Stop),
    (
        "r5-rs",
        4,
        "--level=5 --layout=right-symmetric",
        Then::RebuildSameDisk,
    ),
    (
        "r5-pf",
        4,
        "--level=5 --layout=parity-first",
        Then::RebuildSameDisk,
    ),
    (
        "r5-pl",
        4,
        "--level=5 --layout=parity-last",
        Then::RebuildSameDisk,
    ),
    (
        "r6-la",
        5,
        "--level=6 --layout=left-asymmetric",
        Then::RebuildSameDisk,
    ),
    (
        "r6-ra",
        5,
        "--level=6 --layout=right-asymmetric",
        Then::Stop,
    ),
    ("r6-ls", 5, "--level=6", Then::Stop),
    (
        "r6-ls4",
        4,
        "--level=6 --layout=left-symmetric",
        Then::RebuildSameDisk,
    ),
    (
        "r6-rs",
        6,
        "--level=6 --layout=right-symmetric",
        Then::RebuildSameDisk,
    ),
    (
        "r6-pf",
        5,
        "--level=6 --layout=parity-first",
        Then::RebuildSameDisk,
    ),
    (
        "r6-pl",
        5,
        "--level=6 --layout=parity-last",
        Then::RebuildSameDisk,
    ),
    (
        "r6-la6",
        5,
        "--level=6 --layout=left-asymmetric-6",
        Then::RebuildSameDisk,
    ),
    (
        "r6-ra6",
        5,
        "--level=6 --layout=right-asymmetric-6",
        Then::RebuildSameDisk,
    ),
    (
        "r6-ls6",
        6,
        "--level=6 --layout=left-symmetric-6",
        Then::RebuildSameDisk,
    ),
    (
        "r6-rs6",
        5,
        "--level=6 --layout=right-symmetric-6",
        Then::RebuildSameDisk,
    ),
    (
        "r6-pf6",
        5,
        "--level=6 --layout=parity-first-6",
        Then::RebuildSameDisk,
    ),
    ("r10n2-rebuilt", 4, "--level=10 --layout=n2", Then::Rebuild),
    ("r10-n2odd", 3, "--level=10 --layout=n2", Then::Stop),
    ("r10-n3", 5, "--level=10 --layout=n3", Then::RebuildSameDisk),
    ("r10-f2", 4, "--level=10 --layout=f2", Then::Stop),
    ("r10-f2odd", 5, "--level=10 --layout=f2", Then::Stop),
    ("r10-f3", 3, "--level=10 --layout=f3", Then::RebuildSameDisk),
    ("r10-o2", 3, "--level=10 --layout=o2", Then::Stop),
    ("r10-o3", 4, "--level=10 --layout=o3", Then::RebuildSameDisk),
    ("r1-v10", 2, "--level=1 --metadata=1.0", Then::Stop),
    ("r5-v10", 4, "--level=5 --metadata=1.0", Then::Stop),
    ("r6-v11", 4, "--level=6 --metadata=1.1", Then::Stop),
    ("r5-rebuilt", 4, "--level=5", Then::Rebuild),
    (
        "r6-rebuilt",
        5,
        "--level=6 --layout=right-asymmetric",
        Then::Rebuild,
    ),
    ("r10f2-rebuilt", 4, "--level=10 --layout=f2", Then::Rebuild),
    (
        "r5-recovering",
        4,
        "--level=5 --layout=left-asymmetric",
        Then::Interrupt,
    ),
    ("r4-rebuilt", 3, "--level=4", Then::Rebuild),
    ("r10o2-rebuilt", 3, "--level=10 --layout=o2", Then::Rebuild),
];

/// Where the kernel's recovery of a [`Then::Interrupt`] array is held and stopped, in sectors
/// of each member (1 MiB: 16 rows of 64 KiB chunks; a multiple of the chunk, as `sync_max`
/// must be).
const INTERRUPT_AT: u64 = 2048;

/// Shell functions of the guest scripts that wait for the kernel by condition, not by time
/// (the guest runs under TCG on a machine that may be busy: a `sleep` says nothing about how
/// far the kernel got). `wait_for WHAT SECONDS COMMAND...` runs COMMAND every 0.2 s until it
/// succeeds; after SECONDS of the guest's time (generous bounds: a guard against a hang) it
/// prints /proc/mdstat and "RFVM error: WHAT: ..." and fails the script. `md_at MD N`: MD's
/// resync or recovery has recorded position N (`sync_completed`); `md_idle MD`: nothing
/// runs and nothing is missing (`sync_action` idle, `degraded` 0).
const GUEST_WAITS: &str = r#"
wait_for() {
    what=$1; limit=$2; shift 2; n=0
    until "$@"; do
        n=$((n + 1))
        if [ "$n" -gt $((limit * 5)) ]; then
            sed 's/^/RFVM mdstat /' /proc/mdstat
            echo "RFVM error: $what: not reached within $limit s of the guest's time"
            return 1
        fi
        sleep 0.2
    done
}
md_at() { [ "$(cut -d' ' -f1 /sys/block/$1/md/sync_completed)" = "$2" ]; }
md_idle() { [ "$(cat /sys/block/$1/md/sync_action) $(cat /sys/block/$1/md/degraded)" = "idle 0" ]; }
"#;

/// Bytes the kernel writes at the start of every array, and at its end.
const HEAD_BYTES: usize = 4 << 20;
const TAIL_BYTES: usize = 1 << 20;

/// One array the kernel made: its members on the host and its size as the kernel saw it.
#[allow(dead_code)]
struct KernelArray {
    name: &'static str,
    opts: &'static str,
    then: Then,
    /// The array's members now (after a rebuild: the new one in place of member 1).
    members: Vec<std::path::PathBuf>,
    /// A member the kernel failed and removed (stale).
    stale: Option<std::path::PathBuf>,
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

    /// Copies of the member images into `dir` (the originals stay as the kernel left them):
    /// the members, then the stale one if any.
    fn copy_to(
        &self,
        dir: &std::path::Path,
    ) -> (Vec<std::path::PathBuf>, Option<std::path::PathBuf>) {
        let copy = |p: &std::path::Path| {
            let to = dir.join(p.file_name().unwrap());
            let st = std::process::Command::new("cp")
                .arg("--sparse=always")
                .arg(p)
                .arg(&to)
                .status()
                .unwrap();
            assert!(st.success(), "cp {}", p.display());
            to
        };
        (
            self.members.iter().map(|p| copy(p)).collect(),
            self.stale.as_deref().map(copy),
        )
    }
}

struct KernelArrays {
    arrays: Vec<KernelArray>,
    payload: Vec<u8>,
}

/// One guest boot makes every array of [`KERNEL_ARRAYS`] (64 KiB chunks, v1.2, members of
/// 8 MiB plus 0..4 chunks so that the last cycle is often partial), writes [`HEAD_BYTES`] of
/// the payload at its start and [`TAIL_BYTES`] at its end with `O_DIRECT`, does what [`Then`]
/// says and stops it. The images stay in the target directory; tests that change them work
/// on copies. None when the guest cannot run here (see [`vm_or_skip`]). If this boot fails,
/// the tests after the first that needed it fail at once instead of booting again (each boot
/// takes minutes of CI's time).
fn kernel_arrays(test: &str) -> Option<&'static KernelArrays> {
    static K: std::sync::OnceLock<Result<KernelArrays, String>> = std::sync::OnceLock::new();
    if !vm_or_skip(test) {
        return None;
    }
    let k = K.get_or_init(|| {
        std::panic::catch_unwind(make_kernel_arrays).map_err(|e| {
            e.downcast_ref::<String>()
                .cloned()
                .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default()
        })
    });
    match k {
        Ok(k) => Some(k),
        Err(e) => panic!(
            "the guest boot that makes the kernel's arrays failed (in the first test that \
             needed them; not booted again): {e}"
        ),
    }
}

/// The boot of [`kernel_arrays`].
fn make_kernel_arrays() -> KernelArrays {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("md-vm-kernel-arrays");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let payload = common::pattern(0x23, HEAD_BYTES + TAIL_BYTES);
    std::fs::write(dir.join("payload.img"), &payload).unwrap();
    let mut vm = MdVm::new();
    vm.disk("payload", &dir.join("payload.img"));
    // Recoveries at full speed (they are small; the interrupted one is held by `sync_max`).
    let mut script = String::from(GUEST_WAITS);
    script += "echo 200000 > /proc/sys/dev/raid/speed_limit_min\n\
               echo 2000000 > /proc/sys/dev/raid/speed_limit_max\n";
    let mut arrays = Vec::new();
    for (i, &(name, n, opts, then)) in KERNEL_ARRAYS.iter().enumerate() {
        let size = (8 << 20) + (i as u64 % 5) * (64 << 10);
        let mut devs = Vec::new();
        let mut members = Vec::new();
        for j in 0..n {
            let p = dir.join(format!("{name}-{j}.img"));
            image(&p, size);
            let disk = format!("{name}-{j}");
            vm.disk(&disk, &p);
            devs.push(format!("/dev/rf/{disk}"));
            members.push(p);
        }
        // RAID1 has no chunk (mdadm refuses one); v1.2 unless the options say otherwise.
        let chunk = if opts.split_whitespace().next() == Some("--level=1") {
            ""
        } else {
            "--chunk=64"
        };
        let meta = if opts.contains("--metadata") {
            ""
        } else {
            "--metadata=1.2"
        };
        script += &format!(
                "mdadm --create /dev/md{i} --run --assume-clean {meta} {chunk} \
                 --raid-devices={n} {opts} {} 2>/dev/null\n\
                 sz=$(blockdev --getsize64 /dev/md{i})\n\
                 dd if=/dev/rf/payload of=/dev/md{i} bs=1M count={} oflag=direct 2>/dev/null\n\
                 dd if=/dev/rf/payload of=/dev/md{i} bs=64k skip={} seek=$((sz / 65536 - {})) count={} oflag=direct 2>/dev/null\n\
                 echo \"RFVM size {name} $sz\"\n",
                devs.join(" "),
                HEAD_BYTES >> 20,
                HEAD_BYTES >> 16,
                TAIL_BYTES >> 16,
                TAIL_BYTES >> 16,
            );
        let mut stale = None;
        if then != Then::Stop {
            // The disk the kernel recovers onto: a new one, or member 1 itself, zeroed whole
            // once it is out of the array.
            let (target, wipe) = if then == Then::RebuildSameDisk {
                (
                    format!("{name}-1"),
                    format!(
                        "dd if=/dev/zero of=/dev/rf/{name}-1 bs=64k oflag=direct \
                         count=$(( $(blockdev --getsize64 /dev/rf/{name}-1) / 65536 )) 2>/dev/null\n"
                    ),
                )
            } else {
                let new = dir.join(format!("{name}-new.img"));
                image(&new, size);
                vm.disk(&format!("{name}-new"), &new);
                stale = Some(std::mem::replace(&mut members[1], new));
                (format!("{name}-new"), String::new())
            };
            // Rebuild: until the new member is in (idle, nothing degraded). Interrupt: the
            // recovery may not pass INTERRUPT_AT; until it has got there (MD records
            // `sync_completed` at `sync_max` before it waits), then stopped: the new
            // member's superblock says how far it got, which the guest reports.
            let (hold, wait, recovered) = if then == Then::Interrupt {
                (
                    format!("echo {INTERRUPT_AT} > /sys/block/mdI/md/sync_max\n"),
                    format!(
                        "wait_for \"{name}: the kernel's recovery to reach {INTERRUPT_AT} sectors\" 600 \
                         md_at mdI {INTERRUPT_AT}\n"
                    ),
                    format!(
                        "echo \"RFVM recovered {name} $(mdadm --examine /dev/rf/{target} | \
                         sed -n 's/.*Recovery Offset : \\([0-9]*\\) sectors.*/\\1/p')\"\n"
                    ),
                )
            } else {
                (
                    String::new(),
                    format!(
                        "wait_for \"{name}: the kernel's recovery to finish\" 600 md_idle mdI\n\
                         nv=$(basename $(readlink -f /dev/rf/{target}))\n\
                         echo \"RFVM newmember {name} $(cat /sys/block/mdI/md/dev-$nv/state) \
                         $(cat /sys/block/mdI/md/dev-$nv/slot)\"\n"
                    ),
                    String::new(),
                )
            };
            script += &format!(
                    "mdadm /dev/mdI --fail /dev/rf/{name}-1 2>/dev/null\n\
                     mdadm /dev/mdI --remove /dev/rf/{name}-1 2>/dev/null\n\
                     {wipe}{hold}mdadm /dev/mdI --add /dev/rf/{target} 2>/dev/null\n{wait}\
                     echo \"RFVM sync {name} $(cat /sys/block/mdI/md/sync_action) $(cat /sys/block/mdI/md/degraded)\"\n\
                     mdadm --stop /dev/mdI 2>/dev/null\n{recovered}"
                )
                .replace("mdI", &format!("md{i}"));
        } else {
            script += &format!("mdadm --stop /dev/md{i} 2>/dev/null\n");
        }
        script += &mark(name);
        arrays.push(KernelArray {
            name,
            opts,
            then,
            members,
            stale,
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
        match a.then {
            Then::Rebuild | Then::RebuildSameDisk => {
                assert_eq!(
                    value(&lines, &format!("sync {}", a.name)),
                    "idle 0",
                    "{}: the kernel's recovery did not finish",
                    a.name
                );
                // The new member holds slot 1, recovered ("in_sync").
                assert_eq!(
                    value(&lines, &format!("newmember {}", a.name)),
                    "in_sync 1",
                    "{}: the kernel's new member (state, slot)",
                    a.name
                );
            }
            Then::Interrupt => {
                assert_eq!(
                    value(&lines, &format!("sync {}", a.name)),
                    "recover 1",
                    "{}: the kernel was not recovering",
                    a.name
                );
                assert_eq!(
                    value(&lines, &format!("recovered {}", a.name)),
                    INTERRUPT_AT.to_string(),
                    "{}: the new member's recovery offset (mdadm --examine) is not where the \
                     kernel's recovery was held",
                    a.name
                );
            }
            Then::Stop => {}
        }
    }
    KernelArrays { arrays, payload }
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
    let _serial = one_at_a_time();
    let Some(k) = kernel_arrays("layout_md_places_every_chunk_where_the_kernel_wrote_it") else {
        return;
    };
    use layout::md::{MdGeometry, MdLayout};
    use layout::Role;
    use raidcore::md::{MdRole, MdSuperblock};
    // (The array whose recovery was interrupted holds a half-rebuilt member, and the v1.0 and
    // v1.1 arrays keep their superblocks elsewhere: left to the adoption tests.)
    for a in k
        .arrays
        .iter()
        .filter(|a| a.then != Then::Interrupt && !a.opts.contains("--metadata"))
    {
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

/// The kernel's arrays adopted by raidforge (`raidforge assemble` on their members, the MD
/// format recognised by itself) and read back byte for byte: every level and layout, each
/// redundant one also with a member left out (degraded reads), the arrays the kernel rebuilt
/// (their stale member given too, and left out as mdadm does), and the array whose recovery
/// the kernel did not finish (raidforge reads it, reconstructing what was not recovered yet,
/// then finishes the rebuild from MD's recovery offset).
#[test]
fn raidforge_adopts_the_arrays_the_kernel_made() {
    let _serial = one_at_a_time();
    let Some(k) = kernel_arrays("raidforge_adopts_the_arrays_the_kernel_made") else {
        return;
    };
    let t = TempDir::new("md-vm", "adopt");
    for a in &k.arrays {
        let want = a.expected(&k.payload);
        let d = t.path().join(a.name);
        std::fs::create_dir_all(&d).unwrap();
        let (members, stale) = a.copy_to(&d);
        let mut given = members.clone();
        given.extend(stale.clone());
        // The command line once per array; the library for the rest (same code, no process).
        let desc = d.join("pool.json");
        let mut args: Vec<String> = vec!["assemble".into(), desc.display().to_string()];
        for m in &given {
            args.push("--member".into());
            args.push(m.display().to_string());
        }
        let argv: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = common::raidforge(&d, &argv);
        assert!(
            out.status.success(),
            "{}: raidforge assemble failed: {}",
            a.name,
            String::from_utf8_lossy(&out.stderr)
        );
        let notes = String::from_utf8_lossy(&out.stderr).into_owned();
        if stale.is_some() {
            assert!(notes.contains("stale"), "{}: {notes}", a.name);
        }
        let mut pool = dev::pool::Pool::open(&desc).unwrap();
        let st = pool.status();
        assert_eq!(st.size_bytes, a.size, "{}", a.name);
        if a.then == Then::Interrupt {
            assert_eq!(st.members[1].state, "rebuilding", "{}", a.name);
            // MD's recovery offset, INTERRUPT_AT sectors: rows of 64 KiB (128 sectors), four
            // rows to a cycle of RAID5 over four members (parity on each member once).
            assert_eq!(
                st.cycles_clean,
                INTERRUPT_AT / 128 / 4,
                "{}: MD's recovery offset not taken",
                a.name
            );
        }
        assert!(
            pool.read(0, a.size).unwrap() == want,
            "{}: raidforge reads other bytes than the kernel wrote",
            a.name
        );
        if a.then == Then::Interrupt {
            pool.rebuild(&dev::pool::RebuildOpts::default(), |_| {})
                .unwrap();
            assert!(pool.read(0, a.size).unwrap() == want, "{}", a.name);
            assert!(pool.verify().unwrap().inconsistent.is_empty(), "{}", a.name);
        }
        let rebuilt = matches!(a.then, Then::Rebuild | Then::RebuildSameDisk);
        if rebuilt {
            // The kernel's new member is slot 1, active, and agrees with the others: every
            // stripe's parity, every copy (it holds a share of each).
            let st = pool.status();
            let new = if a.then == Then::Rebuild { "new" } else { "1" };
            assert!(st.failed.is_empty(), "{}: {:?}", a.name, st.failed);
            assert_eq!(st.state, "clean", "{}", a.name);
            assert_eq!(st.members[1].state, "active", "{}", a.name);
            assert_eq!(
                st.members[1].path.file_name(),
                Some(std::ffi::OsStr::new(&format!("{}-{new}.img", a.name))),
                "{}",
                a.name
            );
            let v = pool.verify().unwrap();
            assert!(
                v.inconsistent.is_empty() && v.stripes_degraded == 0 && v.stripes_checked > 0,
                "{}: the kernel's rebuilt member disagrees: {v:?}",
                a.name
            );
        }
        pool.close().unwrap();
        // With a member missing: slot 1's member left out; after a kernel rebuild, slot 0's,
        // so that reads reconstruct from (or read the copies on) the kernel's new member.
        let tolerance = match a.opts {
            o if o.contains("--level=0") => 0,
            _ => 1,
        };
        let left_out = if rebuilt { 0 } else { 1 };
        if tolerance > 0 && a.then != Then::Interrupt {
            let d2 = t.path().join(format!("{}-degraded", a.name));
            std::fs::create_dir_all(&d2).unwrap();
            let (m2, _) = a.copy_to(&d2);
            let without: Vec<std::path::PathBuf> = m2
                .iter()
                .enumerate()
                .filter(|(i, _)| *i != left_out)
                .map(|(_, p)| p.clone())
                .collect();
            let mut pool = dev::pool::Pool::assemble(&d2.join("pool.json"), &without, None)
                .unwrap_or_else(|e| panic!("{} without a member: {e}", a.name));
            assert_eq!(pool.status().failed, vec![left_out as u32], "{}", a.name);
            assert!(
                pool.read(0, a.size).unwrap() == want,
                "{}: degraded reads differ",
                a.name
            );
            drop(pool);
            let _ = std::fs::remove_dir_all(&d2);
        }
        let _ = std::fs::remove_dir_all(&d);
    }
}

/// What raidforge does to an adopted array before handing it back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Hand {
    /// Writes a range and closes it.
    Write,
    /// Fails member 2, writes (degraded), replaces it, rebuilds, closes: the kernel gets the
    /// old member 2 too and must leave it out; the new one must hold slot 2, in sync, and the
    /// kernel's own `check` must find no mismatch (parity, copies) on the array.
    Rebuild,
    /// Fails member 0, writes, closes: the kernel gets the failed member too and must leave
    /// it out, starting the array degraded without `--force`.
    Degraded,
    /// Fails member 1, replaces it, rebuilds three cycles only, writes, closes: the kernel
    /// resumes the recovery from raidforge's recovery offset.
    Partial,
    /// The array the kernel left recovering: raidforge finishes the rebuild, writes, closes.
    Finish,
}

/// The arrays of [`KERNEL_ARRAYS`] raidforge hands back, and what it does to them first. A
/// rebuild by raidforge ([`Hand::Rebuild`]) for every redundant level and layout family
/// (RAID1, RAID4, RAID5 and RAID6, RAID10 near, far and offset); it writes too (degraded), so
/// those arrays need no [`Hand::Write`] of their own (healthy writes of every level and layout
/// reach the kernel through the created pools).
const HAND_BACK: &[(&str, Hand)] = &[
    ("raid0", Hand::Write),
    ("raid1x3", Hand::Rebuild),
    ("raid4", Hand::Rebuild),
    ("r5-la", Hand::Write),
    ("r6-pf6", Hand::Write),
    ("r6-ra6", Hand::Write),
    ("r10-n2odd", Hand::Rebuild),
    ("r10-f3", Hand::Write),
    ("r10-o2", Hand::Rebuild),
    ("r6-v11", Hand::Write),
    ("r5-v10", Hand::Rebuild),
    ("r1-v10", Hand::Degraded),
    ("r5-ls5", Hand::Rebuild),
    ("r10-f2odd", Hand::Rebuild),
    ("r6-la", Hand::Rebuild),
    ("r6-rs", Hand::Degraded),
    ("r10-o3", Hand::Degraded),
    ("r5-rs", Hand::Partial),
    ("r5-recovering", Hand::Finish),
];

/// The pools raidforge creates for the kernel (`--metadata md`): scheme, layout, members,
/// chunk (None: the command line's default for MD, 512 KiB, through the command line), and
/// whether raidforge rebuilds member 2 onto a new file before the kernel gets it (then the
/// kernel's `check` runs on it). Rebuilt: every layout whose rebuild by raidforge no
/// [`HAND_BACK`] shows (the rest of the RAID5 and RAID6 algorithms, RAID10 with 3 copies):
/// this costs the boot no disk, where a hand-back of its own would cost 4-7.
const CREATED: &[(&str, Option<&str>, usize, Option<u64>, bool)] = &[
    ("raid0", None, 3, Some(64 << 10), false),
    ("raid1", None, 2, None, false),
    ("raid4", None, 3, Some(64 << 10), false),
    ("raid5", Some("left-asymmetric"), 4, Some(64 << 10), true),
    ("raid5", Some("right-asymmetric"), 4, Some(64 << 10), true),
    ("raid5", None, 4, None, false),
    ("raid5", Some("right-symmetric"), 3, Some(64 << 10), true),
    ("raid5", Some("parity-first"), 4, Some(64 << 10), true),
    ("raid5", Some("parity-last"), 4, Some(64 << 10), true),
    ("raid6", Some("left-asymmetric"), 5, Some(64 << 10), false),
    ("raid6", Some("right-asymmetric"), 5, Some(64 << 10), true),
    ("raid6", None, 5, None, true),
    ("raid6", Some("right-symmetric"), 6, Some(64 << 10), true),
    ("raid6", Some("parity-first"), 5, Some(64 << 10), true),
    ("raid6", Some("parity-last"), 5, Some(64 << 10), true),
    ("raid6", Some("left-asymmetric-6"), 5, Some(64 << 10), true),
    ("raid6", Some("right-asymmetric-6"), 5, Some(64 << 10), true),
    ("raid6", Some("left-symmetric-6"), 5, Some(64 << 10), true),
    ("raid6", Some("right-symmetric-6"), 4, Some(64 << 10), true),
    ("raid6", Some("parity-first-6"), 5, Some(64 << 10), true),
    ("raid10", Some("n2"), 3, Some(64 << 10), false),
    ("raid10", Some("n3"), 4, Some(64 << 10), true),
    ("raid10", Some("f2"), 4, None, false),
    ("raid10", Some("f3"), 3, Some(64 << 10), true),
    ("raid10", Some("o2"), 3, Some(64 << 10), false),
    ("raid10", Some("o3"), 4, Some(64 << 10), true),
];

/// mdadm's text form of an array UUID.
fn mdadm_uuid(u: &[u8; 16]) -> String {
    u.chunks(4)
        .map(|c| c.iter().map(|b| format!("{b:02x}")).collect::<String>())
        .collect::<Vec<_>>()
        .join(":")
}

/// One array the guest assembles in the second boot.
struct Back {
    name: String,
    /// Every image the kernel gets (a failed member's too).
    disks: Vec<std::path::PathBuf>,
    uuid: [u8; 16],
    size: u64,
    want: Vec<u8>,
    hand: Option<Hand>,
    /// Where in `disks` the member raidforge replaced is (given to the kernel too).
    replaced: Option<usize>,
    /// The pool raidforge created (its descriptor).
    created: Option<std::path::PathBuf>,
    /// A created pool whose member 2 raidforge rebuilt onto a new file.
    rebuilt: bool,
}

/// Both directions after the first: arrays the kernel made, adopted and changed by raidforge
/// (written, a member rebuilt, failed, half rebuilt, a kernel recovery finished), assembled by
/// the kernel's `mdadm --assemble` without `--force` with the right members active and the
/// state raidforge left (clean; degraded; recovering from raidforge's recovery offset, then
/// clean), reading the bytes raidforge wrote; and pools raidforge created with `--metadata
/// md` for every level and layout and filled, found by `mdadm --assemble --scan` as ordinary
/// MD arrays, read back by the kernel, written by the kernel, and read back by raidforge.
/// One guest boot.
#[test]
fn pools_go_back_and_forth_between_raidforge_and_the_kernel() {
    let _serial = one_at_a_time();
    let Some(k) = kernel_arrays("pools_go_back_and_forth_between_raidforge_and_the_kernel") else {
        return;
    };
    use dev::pool::{Pool, RebuildOpts};
    let t = TempDir::new("md-vm", "back-and-forth");
    let root = t.path();
    let mut backs: Vec<Back> = Vec::new();
    // Arrays the kernel made, changed by raidforge.
    for (i, &(name, hand)) in HAND_BACK.iter().enumerate() {
        let a = k.arrays.iter().find(|a| a.name == name).unwrap();
        let d = root.join(format!("h-{name}"));
        std::fs::create_dir_all(&d).unwrap();
        let (members, stale) = a.copy_to(&d);
        let desc = d.join("pool.json");
        let mut pool = Pool::assemble(&desc, &members, None).unwrap();
        let uuid = {
            let st = pool.status();
            let mut u = [0u8; 16];
            for (j, b) in u.iter_mut().enumerate() {
                *b = u8::from_str_radix(&st.uuid[2 * j..2 * j + 2], 16).unwrap();
            }
            u
        };
        let mut want = a.expected(&k.payload);
        let region = common::pattern(0x4800 + i as u64, 1 << 20);
        let at = 2 << 20;
        let mut disks = members.clone();
        let mut replaced = None;
        let write = |pool: &mut Pool, want: &mut Vec<u8>| {
            pool.write(at as u64, &region).unwrap();
            want[at..at + region.len()].copy_from_slice(&region);
        };
        match hand {
            Hand::Write => write(&mut pool, &mut want),
            Hand::Rebuild => {
                pool.fail(2).unwrap();
                write(&mut pool, &mut want);
                let new = d.join("new2.img");
                pool.replace(2, &new).unwrap();
                pool.rebuild(&RebuildOpts::default(), |_| {}).unwrap();
                replaced = Some(disks.len());
                disks.push(members[2].clone());
                disks[2] = new;
            }
            Hand::Degraded => {
                pool.fail(0).unwrap();
                write(&mut pool, &mut want);
            }
            Hand::Partial => {
                pool.fail(1).unwrap();
                let new = d.join("new1.img");
                pool.replace(1, &new).unwrap();
                pool.rebuild(
                    &RebuildOpts {
                        parallel_cycles: 1,
                        max_cycles: Some(3),
                        ..RebuildOpts::default()
                    },
                    |_| {},
                )
                .unwrap();
                write(&mut pool, &mut want);
                disks.push(members[1].clone());
                disks[1] = new;
            }
            Hand::Finish => {
                pool.rebuild(&RebuildOpts::default(), |_| {}).unwrap();
                write(&mut pool, &mut want);
            }
        }
        assert!(
            pool.read(0, a.size).unwrap() == want,
            "{name}: before hand-back"
        );
        pool.close().unwrap();
        disks.extend(stale);
        backs.push(Back {
            name: format!("h-{name}"),
            disks,
            uuid,
            size: a.size,
            want,
            hand: Some(hand),
            replaced,
            created: None,
            rebuilt: false,
        });
    }
    // Pools raidforge creates for the kernel, filled by raidforge.
    for (i, &(scheme, layout, n, chunk, rebuild)) in CREATED.iter().enumerate() {
        let name = format!("c{i}-{scheme}-{}", layout.unwrap_or("default"));
        let d = root.join(&name);
        std::fs::create_dir_all(&d).unwrap();
        let mut members: Vec<std::path::PathBuf> =
            (0..n).map(|j| d.join(format!("m{j}.img"))).collect();
        let desc = d.join("pool.json");
        match chunk {
            // Through the command line, with its defaults for MD.
            None => {
                let mut args: Vec<String> = vec![
                    "create".into(),
                    desc.display().to_string(),
                    "--scheme".into(),
                    scheme.into(),
                    "--metadata".into(),
                    "md".into(),
                    "--size".into(),
                    "8M".into(),
                ];
                if let Some(l) = layout {
                    args.extend(["--layout".into(), l.into()]);
                }
                for m in &members {
                    args.extend(["--member".into(), m.display().to_string()]);
                }
                let argv: Vec<&str> = args.iter().map(String::as_str).collect();
                common::ok(&d, &argv);
            }
            Some(c) => {
                let params = layout::Params {
                    disks: Some(n),
                    md_layout: layout.map(str::to_string),
                    ..layout::Params::default()
                };
                let opts = dev::pool::CreateOpts {
                    size_bytes: Some((8 << 20) + (i as u64 % 3) * (64 << 10)),
                    metadata: dev::pool::Metadata::Md,
                    ..dev::pool::CreateOpts::new(
                        layout::SchemeKind::parse(scheme).unwrap(),
                        params,
                        members.clone(),
                        c,
                    )
                };
                Pool::create(&desc, opts).unwrap().close().unwrap();
            }
        }
        let mut pool = Pool::open(&desc).unwrap();
        let st = pool.status();
        let want = common::pattern(0x5000 + i as u64, st.size_bytes as usize);
        pool.write(0, &want).unwrap();
        pool.close().unwrap();
        if rebuild {
            // Member 2 failed and rebuilt by raidforge onto a new file, which the kernel
            // gets instead. What raidforge rebuilt must be what its healthy writes had put
            // on member 2, byte for byte: so the kernel's reads of the rebuilt pool still
            // say where raidforge's writes placed every chunk, and its `check` that the
            // parities and copies are whole.
            let new = d.join("m2-new.img");
            let mut pool = Pool::open(&desc).unwrap();
            pool.fail(2).unwrap();
            pool.replace(2, &new).unwrap();
            pool.rebuild(&RebuildOpts::default(), |_| {}).unwrap();
            let st = pool.status();
            assert!(
                st.failed.is_empty() && st.state == "clean",
                "{name}: {st:?}"
            );
            pool.close().unwrap();
            let area = |p: &std::path::Path| {
                let sb = raidcore::md::MdSuperblock::decode(&read_at(p, 4096, 4096)).unwrap();
                (
                    sb.data_offset,
                    read_at(p, sb.data_offset * 512, (sb.size * 512) as usize),
                )
            };
            let (old_at, old) = area(&members[2]);
            let (new_at, rebuilt) = area(&new);
            assert_eq!(old_at, new_at, "{name}: data offset of the new member");
            assert!(
                old == rebuilt,
                "{name}: raidforge's rebuild of member 2 differs from what its writes put there"
            );
            members[2] = new;
        }
        let mut uuid = [0u8; 16];
        for (j, b) in uuid.iter_mut().enumerate() {
            *b = u8::from_str_radix(&st.uuid[2 * j..2 * j + 2], 16).unwrap();
        }
        backs.push(Back {
            name,
            disks: members,
            uuid,
            size: st.size_bytes,
            want,
            hand: None,
            replaced: None,
            created: Some(desc),
            rebuilt: rebuild,
        });
    }
    // The guest: hand-backs assembled one by one, then the created pools by --scan.
    let kernel_write = common::pattern(0x6000, 512 << 10);
    std::fs::write(root.join("kw.img"), &kernel_write).unwrap();
    // Each array's bytes go to `out` at a 1 MiB boundary, copied with 1 MiB O_DIRECT reads
    // and writes (measured in the guest on a 92 MiB RAID5: 0.6 s; with 64 KiB reads and
    // buffered writes, as before, 5.2 s).
    let mut offsets = Vec::new();
    let mut total = 0u64;
    for b in &backs {
        offsets.push(total);
        total = (total + b.size).next_multiple_of(1 << 20);
    }
    let out = root.join("out.img");
    image(&out, total);
    let mut vm = MdVm::new();
    vm.disk("kw", &root.join("kw.img"));
    vm.disk("out", &out);
    // `syncs NAME MD`: how many resyncs and recoveries the kernel started on MD (its log
    // says each when it starts: a condition, where a look at `sync_action` a second after
    // assembly would depend on how fast the guest runs).
    let mut script = String::from(GUEST_WAITS);
    script += "echo 200000 > /proc/sys/dev/raid/speed_limit_min\n\
         echo 2000000 > /proc/sys/dev/raid/speed_limit_max\n\
         find_md() { awk -v u=\"UUID=$1\" '$1 == \"ARRAY\" { for (i = 3; i <= NF; i++) if ($i == u) print $2 }' /tmp/scan; }\n\
         report() { b=$(basename $(readlink -f $2)); \
           for f in array_state degraded sync_action raid_disks; do \
             v=$(cat /sys/block/$b/md/$f 2>/dev/null || echo none); printf '%s ' \"$v\"; \
           done > /tmp/st; echo \"RFVM state $1 $(cat /tmp/st)\"; }\n\
         syncs() { echo \"RFVM syncs $1 $(dmesg | grep -cE \"md: (resync|recovery) of RAID array $2\\$\" || true)\"; }\n";
    for (bi, b) in backs.iter().enumerate() {
        let mut devs = Vec::new();
        for (j, p) in b.disks.iter().enumerate() {
            let disk = format!("b{bi}m{j}");
            vm.disk(&disk, p);
            devs.push(format!("/dev/rf/{disk}"));
        }
        if b.hand.is_some() {
            let mdb = format!("md{}", 200 + bi);
            let md = format!("/dev/{mdb}");
            let name = &b.name;
            // The half-rebuilt array (its new member is m1): assembled read-only, so that
            // nothing runs yet; the new member's recovery offset as the kernel took it from
            // raidforge's superblock (`recovery_start`); the recovery held by `sync_max` four
            // rows further on and started (read-write); once it got there, where did it
            // resume? The sectors written to the new member meanwhile say: from `r` on, not
            // from 0. Then it runs to the end.
            let (readonly, wait) = if b.hand == Some(Hand::Partial) {
                (
                    " --readonly",
                    format!(
                        "nv=$(basename $(readlink -f /dev/rf/b{bi}m1))\n\
                         r=$(cat /sys/block/{mdb}/md/dev-$nv/recovery_start)\n\
                         case $r in ''|*[!0-9]*) echo \"RFVM error: {name}: the new member is not recovering (recovery_start $r)\"; exit 1;; esac\n\
                         s=$(( (r / 128 + 4) * 128 ))\n\
                         echo $s > /sys/block/{mdb}/md/sync_max\n\
                         w0=$(awk '{{print $7}}' /sys/block/$nv/stat)\n\
                         mdadm --readwrite {md}\n\
                         wait_for \"{name}: the kernel's recovery to reach $s sectors\" 600 md_at {mdb} $s\n\
                         w1=$(awk '{{print $7}}' /sys/block/$nv/stat)\n\
                         report {name}-before {md}\n\
                         echo \"RFVM resumed {name} $r $s $((w1 - w0))\"\n\
                         echo max > /sys/block/{mdb}/md/sync_max\n\
                         wait_for \"{name}: the kernel's recovery to finish\" 600 md_idle {mdb}\n"
                    ),
                )
            } else {
                ("", String::new())
            };
            // After raidforge rebuilt member 2 (the old one given last): which of the two the
            // kernel took (state and slot of the new one; whether the old one is in).
            let members = if let (Some(Hand::Rebuild), Some(old)) = (b.hand, b.replaced) {
                format!(
                    "nv=$(basename $(readlink -f /dev/rf/b{bi}m2))\n\
                     ov=$(basename $(readlink -f /dev/rf/b{bi}m{old}))\n\
                     echo \"RFVM members {name} $(cat /sys/block/{mdb}/md/dev-$nv/state 2>/dev/null || echo none) \
                     $(cat /sys/block/{mdb}/md/dev-$nv/slot 2>/dev/null || echo none) \
                     $([ -e /sys/block/{mdb}/md/dev-$ov ] && echo in || echo out)\"\n"
                )
            } else {
                String::new()
            };
            // Where raidforge rebuilt a member (or finished the kernel's recovery), the
            // kernel's own `check` of the whole array: mismatches it counted, and whether it
            // ran (its log line).
            let check = if matches!(b.hand, Some(Hand::Rebuild | Hand::Finish)) {
                format!(
                    "echo check > /sys/block/{mdb}/md/sync_action\n\
                     wait_for \"{name}: the kernel's check to finish\" 600 md_idle {mdb}\n\
                     echo \"RFVM check {name} $(cat /sys/block/{mdb}/md/mismatch_cnt) \
                     $(dmesg | grep -cE \"md: data-check of RAID array {mdb}\\$\" || true)\"\n{mark}",
                    mark = mark(&format!("{name}:checked")),
                )
            } else {
                String::new()
            };
            script += &format!(
                "mdadm --assemble{readonly} {md} {devs} 2>&1 | sed 's/^/RFVM asm {name} /'\n\
                 {wait}report {name} {md}\n{members}{asm}\
                 dd if={md} of=/dev/rf/out bs=1M seek={seek} iflag=direct oflag=direct 2>/dev/null\n{read}\
                 {check}mdadm --stop {md} 2>/dev/null\n{stopped}syncs {name} {mdb}\n{mark}",
                devs = devs.join(" "),
                seek = offsets[bi] >> 20,
                asm = mark(&format!("{name}:assembled")),
                read = mark(&format!("{name}:read")),
                stopped = mark(&format!("{name}:stopped")),
                mark = mark(name),
            );
        }
    }
    // The created pools: assembled by --scan, then found by their UUIDs in one `mdadm
    // --detail --scan` (ARRAY lines naming /dev/md/NAME, a symlink to /dev/mdN), instead of
    // one `mdadm --detail` per array per lookup (~0.25 s each under TCG, some 340 of them).
    // The scan is given only the created pools' disks (DEVICE lines of its own config
    // file): over every disk of the boot (no config: `DEVICE partitions`) it also assembled
    // every hand-back again, stopped as they were, and the step with `--detail --scan` took
    // 74-113 s under load; over the created pools' disks, 36 s plus 6 s under heavier load.
    // It is still mdadm's own search: no ARRAY line says what to find.
    // The kernel's log is cleared first: --scan may give an array a name used before.
    let mut conf = String::new();
    for (bi, b) in backs.iter().enumerate() {
        if b.created.is_some() {
            conf += "DEVICE";
            for j in 0..b.disks.len() {
                conf += &format!(" /dev/rf/b{bi}m{j}");
            }
            conf += "\n";
        }
    }
    script += &format!(
        "cat > /tmp/created.conf <<'EOF'\n{conf}EOF\n\
         dmesg -c > /dev/null\n\
         mdadm --assemble --scan --config=/tmp/created.conf 2>&1 | sed 's/^/RFVM scan /'\n{}\
         mdadm --detail --scan > /tmp/scan\n: > /tmp/created\n\
         echo \"RFVM scanned $(grep -c '^ARRAY' /tmp/scan || true)\"\n{}",
        mark("assemble-scan"),
        mark("detail-scan")
    );
    // Each created pool: its state, then its bytes read; where raidforge rebuilt a member,
    // the new member's state and slot, and the kernel's `check` started. All the checks run
    // at once (their arrays share no disk) while the next pools are read; then each one's
    // result once it is idle, the kernel's write, the stop.
    for (bi, b) in backs.iter().enumerate() {
        if b.created.is_none() {
            continue;
        }
        let check = if b.rebuilt {
            format!(
                "nv=$(basename $(readlink -f /dev/rf/b{bi}m2)); \
                 echo \"RFVM members {name} $(cat /sys/block/$mdb/md/dev-$nv/state 2>/dev/null || echo none) \
                 $(cat /sys/block/$mdb/md/dev-$nv/slot 2>/dev/null || echo none)\"; \
                 echo check > /sys/block/$mdb/md/sync_action; ",
                name = b.name,
            )
        } else {
            String::new()
        };
        script += &format!(
            "md=$(find_md {uuid})\n\
             [ -n \"$md\" ] || echo \"RFVM missing {name}\"\n\
             if [ -n \"$md\" ]; then report {name} $md; mdb=$(basename $(readlink -f $md)); \
             echo \"{name} $mdb\" >> /tmp/created; \
             dd if=$md of=/dev/rf/out bs=1M seek={seek} iflag=direct oflag=direct 2>/dev/null; \
             {check}fi\n{mark}",
            uuid = mdadm_uuid(&b.uuid),
            name = b.name,
            seek = offsets[bi] >> 20,
            mark = mark(&format!("{}:read", b.name)),
        );
    }
    for b in backs.iter().filter(|b| b.created.is_some()) {
        let check = if b.rebuilt {
            format!(
                "wait_for \"{name}: the kernel's check to finish\" 600 md_idle $mdb; \
                 echo \"RFVM check {name} $(cat /sys/block/$mdb/md/mismatch_cnt) \
                 $(dmesg | grep -cE \"md: data-check of RAID array $mdb\\$\" || true)\"; ",
                name = b.name,
            )
        } else {
            String::new()
        };
        script += &format!(
            "md=$(find_md {uuid})\n\
             if [ -n \"$md\" ]; then mdb=$(basename $(readlink -f $md)); {check}\
             dd if=/dev/rf/kw of=$md bs=64k seek=16 oflag=direct 2>/dev/null; \
             mdadm --stop $md 2>/dev/null; fi\n{mark}",
            uuid = mdadm_uuid(&b.uuid),
            mark = mark(&b.name),
        );
    }
    script += "while read n b; do syncs $n $b; done < /tmp/created\n";
    vm.sh(&script);
    let lines = vm.run(root);
    std::fs::write(root.join("lines.txt"), lines.join("\n")).unwrap();
    let back_bytes = std::fs::read(&out).unwrap();
    // The scan found the created pools and nothing else (the hand-backs' disks were not in
    // its config).
    assert_eq!(
        value(&lines, "scanned"),
        CREATED.len().to_string(),
        "arrays running after mdadm --assemble --scan"
    );
    for (bi, b) in backs.iter().enumerate() {
        let state = value(&lines, &format!("state {}", b.name));
        let f: Vec<&str> = state.split_whitespace().collect();
        // array_state, degraded, sync_action, raid_disks ("none": RAID0 has neither
        // degraded nor sync_action in sysfs)
        assert_eq!(f[0], "clean", "{}: {state}", b.name);
        let raid0 = b.name.contains("raid0");
        let degraded = match (raid0, b.hand == Some(Hand::Degraded)) {
            (true, _) => "none",
            (false, true) => "1",
            (false, false) => "0",
        };
        assert_eq!(f[1], degraded, "{}: {state}", b.name);
        assert_eq!(
            f[2],
            if raid0 { "none" } else { "idle" },
            "{}: {state} (a resync or recovery ran)",
            b.name
        );
        // The resyncs and recoveries the kernel started: none, but the one that finished
        // raidforge's partial rebuild.
        assert_eq!(
            value(&lines, &format!("syncs {}", b.name)),
            if b.hand == Some(Hand::Partial) {
                "1"
            } else {
                "0"
            },
            "{}: resyncs and recoveries the kernel started",
            b.name
        );
        if b.rebuilt {
            // raidforge's new member in slot 2, in sync (the old one was not given).
            assert_eq!(
                value(&lines, &format!("members {}", b.name)),
                "in_sync 2",
                "{}: the new member's state and slot",
                b.name
            );
        }
        if b.hand == Some(Hand::Rebuild) {
            // raidforge's new member in slot 2, in sync; the old member 2 left out.
            assert_eq!(
                value(&lines, &format!("members {}", b.name)),
                "in_sync 2 out",
                "{}: the new member's state and slot, and whether the old one is in",
                b.name
            );
        }
        if b.rebuilt || matches!(b.hand, Some(Hand::Rebuild | Hand::Finish)) {
            // "MISMATCHES CHECKS": the kernel's check ran once and found nothing to fix.
            assert_eq!(
                value(&lines, &format!("check {}", b.name)),
                "0 1",
                "{}: the kernel's check (mismatch_cnt, data-check runs)",
                b.name
            );
        }
        if b.hand == Some(Hand::Partial) {
            let before = value(&lines, &format!("state {}-before", b.name));
            assert!(before.contains("recover"), "{}: {before}", b.name);
            // "R S W": the new member's recovery offset as the kernel took it, where the
            // recovery was held, the sectors written to the member from R to S. R is where
            // raidforge's rebuild stopped (three cycles of four 64 KiB rows: 1536 sectors);
            // W is S - R plus the superblock updates (a few sectors): a recovery started
            // again at 0 would have written S or more.
            let resumed = value(&lines, &format!("resumed {}", b.name));
            let v: Vec<u64> = resumed
                .split_whitespace()
                .map(|x| x.parse().unwrap())
                .collect();
            let (r, s, w) = (v[0], v[1], v[2]);
            assert_eq!(r, 1536, "{}: recovery offset {resumed}", b.name);
            assert!(
                w >= s - r && w < s,
                "{}: the kernel's recovery did not resume at {r}: {resumed}",
                b.name
            );
        }
        let at = offsets[bi] as usize;
        assert!(
            back_bytes[at..at + b.size as usize] == b.want[..],
            "{}: the kernel reads other bytes than raidforge wrote",
            b.name
        );
        if let Some(desc) = &b.created {
            // The kernel wrote; raidforge reads.
            let mut want = b.want.clone();
            want[1 << 20..(1 << 20) + kernel_write.len()].copy_from_slice(&kernel_write);
            let mut pool = Pool::open(desc).unwrap();
            assert!(
                pool.read(0, b.size).unwrap() == want,
                "{}: raidforge reads other bytes than the kernel wrote",
                b.name
            );
            assert!(pool.verify().unwrap().inconsistent.is_empty(), "{}", b.name);
            pool.close().unwrap();
        }
    }
}
