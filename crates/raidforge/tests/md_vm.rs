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
