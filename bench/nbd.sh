#!/usr/bin/env bash
# NBD speed of raidforge against nbdkit's file plugin, measured side by side in one run.
#
# Serves a RAID0 pool and a RAID5 pool (4 members each, files in one temporary directory) with
# `raidforge serve`, and one plain file of the same usable size with `nbdkit file`, all on Unix
# sockets, then runs fio (ioengine=nbd) against each: 1 MiB sequential write and read, 4 KiB random
# write and read at queue depth 32. Prints IOPS and MB/s per case, and the ratios
# raidforge RAID0 / nbdkit-file and raidforge RAID5 / RAID0.
#
# Needs: fio, nbdkit (apt-get install fio nbdkit), python3. Usage: bench/nbd.sh [SECONDS_PER_CASE]
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-5}
for t in fio nbdkit python3; do
  command -v "$t" >/dev/null || { echo "bench/nbd.sh: $t is missing (apt-get install fio nbdkit)" >&2; exit 2; }
done
cargo build --release -q -p raidforge
rf=${CARGO_TARGET_DIR:-$PWD/target}/release/raidforge
dir=$(mktemp -d /tmp/raidforge-nbd-bench.XXXXXX)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$dir"; }
trap cleanup EXIT

member=300M
for level in raid0 raid5; do
  args=()
  for i in 0 1 2 3; do args+=(--member "$dir/$level-m$i.img"); done
  "$rf" create "$dir/$level.json" --scheme "$level" --disks 4 "${args[@]}" --size "$member" --chunk 64K >/dev/null
done
size=$("$rf" status "$dir/raid0.json" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["size_bytes"])')
truncate -s "$size" "$dir/plain.img"

"$rf" serve "$dir/raid0.json" "$dir/raid5.json" --socket "$dir/rf.sock" >"$dir/serve.log" 2>&1 &
pids+=($!)
nbdkit --foreground --unix "$dir/kit.sock" file "$dir/plain.img" >"$dir/kit.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do [ -S "$dir/rf.sock" ] && [ -S "$dir/kit.sock" ] && break; sleep 0.1; done

run() { # name uri rw bs iodepth
  fio --name="$1" --ioengine=nbd --uri="$2" --rw="$3" --bs="$4" --iodepth="$5" \
      --size="$((size / 2))" --time_based --runtime="$secs" --numjobs=1 \
      --output-format=json --output="$dir/$1.json" >/dev/null
}
declare -A uri=(
  [nbdkit]="nbd+unix:///?socket=$dir/kit.sock"
  [raid0]="nbd+unix:///raid0?socket=$dir/rf.sock"
  [raid5]="nbd+unix:///raid5?socket=$dir/rf.sock"
)
for target in nbdkit raid0 raid5; do
  run "$target-seqwrite" "${uri[$target]}" write 1M 8
  run "$target-seqread" "${uri[$target]}" read 1M 8
  run "$target-randwrite" "${uri[$target]}" randwrite 4K 32
  run "$target-randread" "${uri[$target]}" randread 4K 32
done

python3 - "$dir" <<'PY'
import json, sys
d = sys.argv[1]
def res(name):
    j = json.load(open(f"{d}/{name}.json"))["jobs"][0]
    side = j["write"] if j["write"]["io_bytes"] > 0 else j["read"]
    return side["iops"], side["bw_bytes"] / 1e6
cases = ["seqwrite", "seqread", "randwrite", "randread"]
print(f"{'case':<10} {'target':<8} {'IOPS':>10} {'MB/s':>10}")
r = {}
for c in cases:
    for t in ["nbdkit", "raid0", "raid5"]:
        r[t, c] = res(f"{t}-{c}")
        print(f"{c:<10} {t:<8} {r[t,c][0]:>10.0f} {r[t,c][1]:>10.1f}")
print()
for c in cases:
    print(f"{c:<10} raid0/nbdkit-file {r['raid0',c][0]/r['nbdkit',c][0]:.2f}x   raid5/raid0 {r['raid5',c][0]/r['raid0',c][0]:.2f}x")
PY
