#!/usr/bin/env bash
# Two raidforge builds side by side on a pool with block checksums: 4 KiB random writes and
# reads through NBD, to see what a change to the checksum format costs (for instance the
# copies of every entry on other members, against a build with one copy).
#
# For each build: a RAID5 pool of 4 file members (--checksums on) served by `raidforge serve` on
# a Unix socket, filled once, then fio (ioengine=nbd) runs 4 KiB random write at queue depth 1
# and 8 and 4 KiB random read at queue depth 8, ROUNDS times, the two builds alternating (A B,
# then B A) so that drift of the machine hits both alike. Prints IOPS per run and, per case,
# the median of the per-round ratios NEW/BASE.
#
# Needs: fio, python3. Usage: bench/checksums.sh NEW_RAIDFORGE BASE_RAIDFORGE [SECONDS] [ROUNDS]
set -euo pipefail
new=${1:?usage: bench/checksums.sh NEW_RAIDFORGE BASE_RAIDFORGE [SECONDS] [ROUNDS]}
base=${2:?usage: bench/checksums.sh NEW_RAIDFORGE BASE_RAIDFORGE [SECONDS] [ROUNDS]}
secs=${3:-5}
rounds=${4:-5}
for t in fio python3; do
  command -v "$t" >/dev/null || { echo "bench/checksums.sh: $t is missing (apt-get install fio)" >&2; exit 2; }
done
dir=$(mktemp -d /tmp/raidforge-csum-bench.XXXXXX)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$dir"; }
trap cleanup EXIT

declare -A bin=([new]="$new" [base]="$base")
for side in new base; do
  args=()
  for i in 0 1 2 3; do args+=(--member "$dir/$side-m$i.img"); done
  "${bin[$side]}" create "$dir/$side.json" --scheme raid5 --disks 4 "${args[@]}" --size 300M \
      --chunk 64K --checksums on >/dev/null
  "${bin[$side]}" serve "$dir/$side.json" --socket "$dir/$side.sock" >"$dir/$side.log" 2>&1 &
  pids+=($!)
done
for _ in $(seq 100); do [ -S "$dir/new.sock" ] && [ -S "$dir/base.sock" ] && break; sleep 0.1; done
size=$("$new" status "$dir/new.json" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["size_bytes"])')

run() { # side name rw bs iodepth
  fio --name="$2" --ioengine=nbd --uri="nbd+unix:///$1?socket=$dir/$1.sock" --rw="$3" --bs="$4" \
      --iodepth="$5" --size="$((size / 2))" --time_based --runtime="$secs" --numjobs=1 \
      --output-format=json --output="$dir/$1-$2.json" >/dev/null
}
iops() { python3 -c 'import json,sys; j=json.load(open(sys.argv[1]))["jobs"][0]; print(round(j["read"]["iops"] + j["write"]["iops"]))' "$1"; }

for side in new base; do run "$side" fill write 1M 8; done
cases=(randwrite:4K:1 randwrite:4K:8 randread:4K:8)
printf '%-10s %3s %5s %10s %10s %7s\n' case qd round new base new/base
declare -A ratios
for r in $(seq "$rounds"); do
  for c in "${cases[@]}"; do
    IFS=: read -r rw bs qd <<<"$c"
    if (( r % 2 )); then order="new base"; else order="base new"; fi
    for side in $order; do run "$side" "$rw-$qd-$r" "$rw" "$bs" "$qd"; done
    a=$(iops "$dir/new-$rw-$qd-$r.json"); b=$(iops "$dir/base-$rw-$qd-$r.json")
    ratio=$(python3 -c "print(f'{$a / $b:.3f}')")
    ratios[$rw-$qd]="${ratios[$rw-$qd]:-} $ratio"
    printf '%-10s %3s %5s %10s %10s %7s\n' "$rw" "$qd" "$r" "$a" "$b" "$ratio"
  done
done
for c in "${cases[@]}"; do
  IFS=: read -r rw bs qd <<<"$c"
  python3 - "$rw qd$qd" ${ratios[$rw-$qd]} <<'PY'
import statistics, sys
v = [float(x) for x in sys.argv[2:]]
print(f"{sys.argv[1]:<14} new/base median {statistics.median(v):.3f} (min {min(v):.3f}, max {max(v):.3f})")
PY
done
echo "machine: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
