#!/usr/bin/env bash
# Runs a batch of shell commands (mdadm, dd, ...) inside a small QEMU guest that runs the
# distribution's Linux kernel with its MD RAID modules, over image files given as virtio disks,
# and prints the guest's result lines. This is how raidforge's tests meet the real Linux MD: the
# host kernel of a CI machine cannot load MD, a guest can.
#
#   scripts/md-vm.sh [--disk NAME=FILE]... [--timeout SECONDS] [--dmesg] SCRIPT
#   scripts/md-vm.sh --check          say whether everything needed is installed (exit 0 if so)
#
# SCRIPT is a file of shell commands for busybox's sh inside the guest (mdadm is there). Each
# disk appears as /dev/rf/NAME (a symlink to its /dev/vdX; NAME: 1..20 of [A-Za-z0-9._-]), in the
# order given. Lines the script prints that start with "RFVM " are copied to stdout without the
# prefix; nothing else is (firmware and kernel noise). The guest ends with a line
# "RFVM-EXIT STATUS" (the script's exit status), which this script turns into its own exit
# status. --dmesg prints the guest kernel's log to stderr at the end (for debugging).
# The command "rfvm_mark LABEL" in SCRIPT is a time mark: it comes out as "t LABEL SECONDS",
# the host's time since QEMU started when the line reached the console (the guest's own clock
# is not to be trusted under TCG); the guest's /init marks "kernel", each module loaded,
# "modules" and "disks", and the last line is "t qemu-exit SECONDS". rfvm_mark writes to the
# console itself: a line printed through the pipe that carries SCRIPT's output can reach the
# console seconds late while the guest is busy (seen 8 s late across a busy loop). A printed
# line "RFVM t LABEL" is stamped too, when it arrives.
#
# Needs (Debian): qemu-system-x86 linux-image-cloud-amd64 busybox-static mdadm, installed with
# --no-install-recommends (`.ci/run` does it). The guest runs under TCG (no KVM needed): about
# 10-20 s per boot, so tests batch many arrays into one boot.
#
# Environment: RAIDFORGE_VM_KERNEL=VERSION picks /boot/vmlinuz-VERSION and /lib/modules/VERSION
# (default: the newest installed kernel whose modules include md-mod and raid456);
# RAIDFORGE_VM_MEM (MiB, default 1024); RAIDFORGE_VM_CACHE: where the initramfs is kept
# (default: ${XDG_CACHE_HOME:-$HOME/.cache}/raidforge-md-vm); QEMU (default qemu-system-x86_64).
set -euo pipefail

usage() { sed -n '2,31p' "$0" | sed 's/^# \{0,1\}//'; }
die() { echo "md-vm.sh: $*" >&2; exit 2; }

QEMU="${QEMU:-qemu-system-x86_64}"
MODULES="virtio_pci virtio_blk md_mod raid0 raid1 raid10 raid456"

find_kernel() {
    if [ -n "${RAIDFORGE_VM_KERNEL:-}" ]; then
        echo "$RAIDFORGE_VM_KERNEL"
        return
    fi
    local best="" v
    for f in /boot/vmlinuz-*; do
        [ -e "$f" ] || continue
        v="${f#/boot/vmlinuz-}"
        if [ -n "$(find "/lib/modules/$v/kernel/drivers/md" -name 'raid456.ko*' 2>/dev/null)" ]; then
            if [ -z "$best" ] || [ "$(printf '%s\n%s\n' "$best" "$v" | sort -V | tail -1)" = "$v" ]; then
                best="$v"
            fi
        fi
    done
    echo "$best"
}

# Says what is missing, one line per item; empty when everything is there.
missing() {
    command -v "$QEMU" >/dev/null 2>&1 || echo "$QEMU (package qemu-system-x86)"
    command -v mdadm >/dev/null 2>&1 || [ -x /sbin/mdadm ] || echo "mdadm (package mdadm)"
    local bb
    bb="$(command -v busybox 2>/dev/null || true)"
    if [ -z "$bb" ] || ldd "$bb" >/dev/null 2>&1; then
        echo "a static busybox (package busybox-static)"
    fi
    command -v cpio >/dev/null 2>&1 || echo "cpio (package cpio)"
    local k
    k="$(find_kernel)"
    if [ -z "$k" ]; then
        echo "a kernel with MD modules in /boot and /lib/modules (package linux-image-cloud-amd64)"
    elif [ ! -r "/boot/vmlinuz-$k" ]; then
        echo "read access to /boot/vmlinuz-$k"
    fi
}

# Copies FILE and the shared libraries it needs into the tree at the same paths.
copy_with_libs() {
    local root="$1" f="$2" lib
    mkdir -p "$root$(dirname "$f")"
    cp -L "$f" "$root$f"
    for lib in $(ldd "$f" 2>/dev/null | grep -o '/[^ ]*' || true); do
        if [ ! -e "$root$lib" ]; then
            mkdir -p "$root$(dirname "$lib")"
            cp -L "$lib" "$root$lib"
        fi
    done
}

# The modules to load, dependencies first, as paths relative to /lib/modules/VERSION (from
# modules.dep; compressed modules are listed with their suffix).
module_closure() {
    local kdir="$1" m
    local -A seen=()
    local out=()
    visit() {
        local path="$1" dep
        [ -n "${seen[$path]:-}" ] && return
        seen[$path]=1
        for dep in $(awk -v p="$path:" '$1 == p { for (i = 2; i <= NF; i++) print $i }' "$kdir/modules.dep"); do
            visit "$dep"
        done
        out+=("$path")
    }
    for m in $MODULES; do
        local path
        path="$(awk -F: -v a="/${m}.ko" -v b="/${m//_/-}.ko" '
            { n = $1; sub(/\.(xz|zst|gz)$/, "", n) }
            substr(n, length(n) - length(a) + 1) == a || substr(n, length(n) - length(b) + 1) == b { print $1; exit }
        ' "$kdir/modules.dep")"
        [ -n "$path" ] || die "module $m is not in $kdir/modules.dep"
        visit "$path"
    done
    printf '%s\n' "${out[@]}"
}

build_initrd() {
    local kver="$1" out="$2" root kdir mdadm bb
    kdir="/lib/modules/$kver"
    root="$(mktemp -d)"
    mkdir -p "$root"/{bin,sbin,dev,proc,sys,tmp,run,mods,etc,lib64}
    bb="$(command -v busybox)"
    cp "$bb" "$root/bin/busybox"
    for a in $("$bb" --list); do
        [ "$a" = busybox ] || ln -sf busybox "$root/bin/$a"
    done
    mdadm="$(command -v mdadm || echo /sbin/mdadm)"
    copy_with_libs "$root" "$mdadm"
    [ "$(dirname "$mdadm")" = /sbin ] || ln -sf "$mdadm" "$root/sbin/mdadm"
    local i=0 p name
    : > "$root/mods/order"
    while read -r p; do
        name="$(printf '%02d-%s' "$i" "$(basename "$p")")"
        case "$p" in
            *.xz) xz -dc "$kdir/$p" > "$root/mods/${name%.xz}"; name="${name%.xz}" ;;
            *.zst) zstd -qdc "$kdir/$p" > "$root/mods/${name%.zst}"; name="${name%.zst}" ;;
            *.gz) gzip -dc "$kdir/$p" > "$root/mods/${name%.gz}"; name="${name%.gz}" ;;
            *) cp "$kdir/$p" "$root/mods/$name" ;;
        esac
        echo "$name" >> "$root/mods/order"
        i=$((i + 1))
    done < <(module_closure "$kdir")
    cat > "$root/init" <<'EOF'
#!/bin/sh
export PATH=/sbin:/bin:/usr/sbin:/usr/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mount -t tmpfs tmp /tmp
echo
echo "RFVM-OUT RFVM t kernel"
for m in $(cat /mods/order); do
    insmod "/mods/$m" || echo "RFVM-ERROR insmod $m failed"
    echo "RFVM-OUT RFVM t insmod-$m"
done
echo "RFVM-OUT RFVM t modules"
mkdir -p /dev/rf
want=$(cat /disks 2>/dev/null | wc -l)
n=0
have=0
while [ "$n" -lt 3000 ]; do
    have=$(ls /sys/block | grep -c '^vd' || true)
    [ "$have" -ge "$want" ] && break
    sleep 0.1
    n=$((n + 1))
done
[ "$have" -ge "$want" ] || echo "RFVM-OUT md-vm: only $have of the $want disks appeared in the guest"
for b in /sys/block/vd*; do
    [ -e "$b/serial" ] || continue
    s=$(cat "$b/serial")
    [ -n "$s" ] && ln -sf "/dev/${b##*/}" "/dev/rf/$s"
done
echo 0 > /proc/sys/kernel/printk 2>/dev/null
echo "RFVM-OUT RFVM t disks"
echo "RFVM-BEGIN"
sh -e /test.sh 2>&1 | sed 's/^/RFVM-OUT /'
echo "RFVM-EXIT $(cat /tmp/rc 2>/dev/null || echo 255)"
if [ -e /dump-dmesg ]; then dmesg | sed 's/^/RFVM-DMESG /'; fi
sync
reboot -f
EOF
    chmod +x "$root/init"
    # Another run may build the same file at the same time: write aside, then rename.
    local tmp
    tmp="$(mktemp "$out.XXXXXX")"
    (cd "$root" && find . | cpio -o -H newc --quiet | gzip -1) > "$tmp"
    mv "$tmp" "$out"
    rm -rf "$root"
}

DISKS=()
TIMEOUT=600
DMESG=0
SCRIPT=""
while [ $# -gt 0 ]; do
    case "$1" in
        -h|--help) usage; exit 0 ;;
        --check)
            m="$(missing)"
            if [ -n "$m" ]; then
                echo "md-vm.sh: missing:" >&2
                echo "$m" | sed 's/^/  /' >&2
                exit 1
            fi
            echo "kernel $(find_kernel), $("$QEMU" --version | head -1)"
            exit 0
            ;;
        --disk) DISKS+=("${2:?--disk needs NAME=FILE}"); shift 2 ;;
        --timeout) TIMEOUT="${2:?--timeout needs seconds}"; shift 2 ;;
        --dmesg) DMESG=1; shift ;;
        -*) die "unknown option $1 (see --help)" ;;
        *) [ -z "$SCRIPT" ] || die "one SCRIPT only"; SCRIPT="$1"; shift ;;
    esac
done
[ -n "$SCRIPT" ] || die "no SCRIPT given (see --help)"
[ -r "$SCRIPT" ] || die "cannot read $SCRIPT"
m="$(missing)"
[ -z "$m" ] || die "cannot run the MD guest; missing: $(echo "$m" | paste -sd ';')"

KVER="$(find_kernel)"
CACHE="${RAIDFORGE_VM_CACHE:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/raidforge-md-vm}"
mkdir -p "$CACHE"
# The base initramfs depends on the kernel's modules, busybox, mdadm and this script.
key="$( (echo "$KVER"; sha256sum "$0"; ls -l --time-style=+%s "$(command -v busybox)" \
        "$(command -v mdadm || echo /sbin/mdadm)" "/lib/modules/$KVER/modules.dep") | sha256sum | cut -c1-16)"
BASE="$CACHE/base-$KVER-$key.cpio.gz"
if [ ! -s "$BASE" ]; then
    build_initrd "$KVER" "$BASE"
fi

WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK/extra"
args=()
slot=4
fn=0
: > "$WORK/extra/disks"
for d in "${DISKS[@]}"; do
    name="${d%%=*}"
    file="${d#*=}"
    [[ "$name" =~ ^[A-Za-z0-9._-]{1,20}$ ]] || die "bad disk name '$name' (1..20 of A-Za-z0-9._-)"
    [ -e "$file" ] || die "no such disk image $file"
    echo "$name" >> "$WORK/extra/disks"
    # Eight virtio functions per PCI slot, so that a boot can have a hundred and more disks.
    mf=""
    [ "$fn" -eq 0 ] && mf=",multifunction=on"
    args+=(-drive "file=$file,format=raw,if=none,id=d$slot$fn,cache=unsafe,aio=threads"
           -device "virtio-blk-pci,drive=d$slot$fn,serial=$name,addr=$(printf '0x%x.%d' "$slot" "$fn")$mf")
    fn=$((fn + 1))
    if [ "$fn" -eq 8 ]; then fn=0; slot=$((slot + 1)); fi
    [ "$slot" -lt 31 ] || die "too many disks (at most $(( (31 - 4) * 8 )))"
done
{
    echo 'set -e'
    echo 'rfvm_mark() { echo "RFVM-OUT RFVM t $1" > /dev/console; }'
    cat "$SCRIPT"
} > "$WORK/extra/test.sh"
# The init script runs test.sh with sh -e piped through sed, so record the status separately.
mv "$WORK/extra/test.sh" "$WORK/extra/test-body.sh"
printf '%s\n' 'rc=0; sh -e /test-body.sh || rc=$?; echo $rc > /tmp/rc; exit 0' > "$WORK/extra/test.sh"
[ "$DMESG" -eq 0 ] || : > "$WORK/extra/dump-dmesg"
(cd "$WORK/extra" && find . | cpio -o -H newc --quiet | gzip -1) > "$WORK/extra.cpio.gz"
cat "$BASE" "$WORK/extra.cpio.gz" > "$WORK/initrd.gz"

# The console without carriage returns, time marks completed with the host's seconds since
# QEMU started.
stamp() {
    local t0=${EPOCHREALTIME//[!0-9]/} line
    since() { local d=$(( ${EPOCHREALTIME//[!0-9]/} - t0 )); printf '%d.%01d' $((d / 1000000)) $((d / 100000 % 10)); }
    while IFS= read -r line || [ -n "$line" ]; do
        line="${line%$'\r'}"
        case "$line" in
            "RFVM-OUT RFVM t "*) line="$line $(since)" ;;
        esac
        printf '%s\n' "$line"
    done
    printf 'RFVM-OUT RFVM t qemu-exit %s\n' "$(since)"
}
set +e
timeout --foreground -k 5 "$TIMEOUT" "$QEMU" -accel tcg -cpu max -m "${RAIDFORGE_VM_MEM:-1024}" -smp 1 \
    -nographic -no-reboot -nodefaults -serial stdio -vga none -net none \
    -kernel "/boot/vmlinuz-$KVER" -initrd "$WORK/initrd.gz" \
    -append "console=ttyS0 panic=-1 quiet loglevel=1 acpi=off" \
    "${args[@]}" < /dev/null 2> "$WORK/qemu-stderr" | stamp > "$WORK/console.txt"
qrc=${PIPESTATUS[0]}
set -e
if [ "$DMESG" -eq 1 ]; then
    sed -n 's/^RFVM-DMESG //p' "$WORK/console.txt" >&2
fi
sed -n 's/^RFVM-OUT RFVM //p' "$WORK/console.txt"
status="$(sed -n 's/^RFVM-EXIT \([0-9]*\).*/\1/p' "$WORK/console.txt" | tail -1)"
if [ -z "$status" ]; then
    echo "md-vm.sh: the guest did not finish (qemu exit $qrc); its console ended with:" >&2
    tail -20 "$WORK/console.txt" >&2
    cat "$WORK/qemu-stderr" >&2
    exit 3
fi
if [ "$status" -ne 0 ]; then
    echo "md-vm.sh: the guest script failed with status $status; its output ended with:" >&2
    sed -n 's/^RFVM-OUT //p' "$WORK/console.txt" | tail -20 >&2
    exit 1
fi
exit 0
