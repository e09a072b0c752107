#!/usr/bin/env bash
# Pools on real block devices with O_DIRECT (issue 29): loop devices over files (direct I/O
# on), members opened with `create --direct`, served over NBD to fio. The reference is fio
# with O_DIRECT on one bare loop device, in the same run. Prints IOPS per case, RAID0 against
# the bare device, and RAID5 against RAID0 for 4 KiB random writes (a RAID5 small write costs
# four member I/Os against RAID0's one: 0.25x is the ceiling).
#
# usage: sudo bench/loop_direct.sh [SECONDS] [MEMBER_SIZE]   (defaults 5, 256M); needs root
# (losetup), fio and a file system under $TMPDIR that supports O_DIRECT.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-5}
size=${2:-256M}
for t in fio losetup python3; do
  command -v "$t" >/dev/null || { echo "bench/loop_direct.sh: $t is missing (apt-get install fio util-linux)" >&2; exit 2; }
done
[ "$(id -u)" = 0 ] || { echo "bench/loop_direct.sh: losetup needs root" >&2; exit 2; }
cargo build --release -q -p raidforge
rf=${CARGO_TARGET_DIR:-$PWD/target}/release/raidforge
dir=$(mktemp -d "${TMPDIR:-/var/tmp}/raidforge-loop.XXXXXX")
loops=()
pid=
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null
  wait 2>/dev/null || true
  for l in "${loops[@]}"; do losetup -d "$l" 2>/dev/null || true; done
  rm -rf "$dir"
}
trap cleanup EXIT

newloop() { # file -> loop device with direct I/O
  truncate -s "$size" "$1"
  local l
  l=$(losetup --find --show --direct-io=on "$1")
  loops+=("$l")
  echo "$l"
}

bare=$(newloop "$dir/bare.img")
for level in raid0 raid5; do
  args=()
  for i in 0 1 2 3; do args+=(--member "$(newloop "$dir/$level-m$i.img")"); done
  "$rf" create "$dir/$level.json" --scheme "$level" --disks 4 "${args[@]}" --chunk 64K --direct --force >/dev/null
done
"$rf" serve "$dir/raid0.json" "$dir/raid5.json" --socket "$dir/rf.sock" >"$dir/serve.log" 2>&1 &
pid=$!
for _ in $(seq 100); do [ -S "$dir/rf.sock" ] && break; sleep 0.1; done

run() { # name rw bs iodepth target-args...
  local name=$1 rw=$2 bs=$3 qd=$4
  shift 4
  fio --name="$name" "$@" --rw="$rw" --bs="$bs" --iodepth="$qd" --size=128M --time_based \
      --runtime="$secs" --output-format=json --output="$dir/$name.json" >/dev/null
}
for c in "randwrite 4K 32" "randread 4K 32" "write 1M 8"; do
  read -r rw bs qd <<<"$c"
  run "bare-$rw" "$rw" "$bs" "$qd" --ioengine=libaio --direct=1 --filename="$bare"
  for level in raid0 raid5; do
    run "$level-$rw" "$rw" "$bs" "$qd" --ioengine=nbd --uri="nbd+unix:///$level?socket=$dir/rf.sock"
  done
done

python3 - "$dir" <<'PY'
import json, sys
d = sys.argv[1]
def iops(name):
    j = json.load(open(f"{d}/{name}.json"))["jobs"][0]
    side = j["write"] if j["write"]["io_bytes"] > 0 else j["read"]
    return side["iops"]
print(f"{'case':<10} {'bare loop':>10} {'raid0':>10} {'raid5':>10} {'raid0/bare':>11} {'raid5/raid0':>12}")
for rw in ["randwrite", "randread", "write"]:
    b, r0, r5 = iops(f"bare-{rw}"), iops(f"raid0-{rw}"), iops(f"raid5-{rw}")
    print(f"{rw:<10} {b:>10.0f} {r0:>10.0f} {r5:>10.0f} {r0/b:>11.2f} {r5/r0:>12.2f}")
PY
