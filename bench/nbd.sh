#!/usr/bin/env bash
# NBD speed of raidforge against nbdkit's file plugin, measured side by side in one run.
#
# Serves a RAID0 pool and a RAID5 pool (4 members each, files in one temporary directory) with
# `raidforge serve`, and one plain file of the same usable size with `nbdkit file`, all on Unix
# sockets, then runs fio (ioengine=nbd) against each: 1 MiB sequential write and read at queue
# depth 8, 4 KiB random write and read at queue depth 32, each with 1, 4 and 16 jobs (every job
# is its own NBD connection; the queue depth is per job). The three targets run back to back
# for each case, so that drift on a busy machine touches all three alike. Prints IOPS and MB/s
# per case, and the ratios raidforge RAID0 / nbdkit-file and raidforge RAID5 / RAID0.
#
# With ROUNDS=N (default 3) every case runs N times, the three targets back to back each time;
# the figures printed are medians over the rounds: IOPS per target, and each ratio taken
# within a round (this machine's 16-job runs swing by a third from one run to the next, for
# nbdkit as for raidforge; the ratio of two neighbouring runs moves less).
#
# Needs: fio, nbdkit (apt-get install fio nbdkit), python3.
# Usage: bench/nbd.sh [SECONDS_PER_CASE] [JOBS...]   (defaults: 5 seconds, jobs 1 4 16)
# The files live in BENCH_DIR (default /dev/shm when there is one, else /tmp): on a tmpfs the
# servers are measured, not the page cache's writeback to a disk, whose bursts land on one
# target and not the next (about 3.6 GB of memory for the files).
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-5}
shift || true
jobs_list=("$@")
[ ${#jobs_list[@]} -gt 0 ] || jobs_list=(1 4 16)
for t in fio nbdkit python3; do
  command -v "$t" >/dev/null || { echo "bench/nbd.sh: $t is missing (apt-get install fio nbdkit)" >&2; exit 2; }
done
cargo build --release -q -p raidforge
rf=${CARGO_TARGET_DIR:-$PWD/target}/release/raidforge
base=${BENCH_DIR:-}
if [ -z "$base" ]; then
  if [ -d /dev/shm ]; then base=/dev/shm; else base=/tmp; fi
fi
dir=$(mktemp -d "$base/raidforge-nbd-bench.XXXXXX")
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

run() { # name uri rw bs iodepth jobs
  fio --name="$1" --ioengine=nbd --uri="$2" --rw="$3" --bs="$4" --iodepth="$5" \
      --size="$((size / 2))" --time_based --runtime="$secs" --numjobs="$6" --group_reporting \
      --output-format=json --output="$dir/$1.json" >/dev/null
}
declare -A uri=(
  [nbdkit]="nbd+unix:///?socket=$dir/kit.sock"
  [raid0]="nbd+unix:///raid0?socket=$dir/rf.sock"
  [raid5]="nbd+unix:///raid5?socket=$dir/rf.sock"
)
rounds=${ROUNDS:-3}
for jobs in "${jobs_list[@]}"; do
  for c in "seqwrite write 1M 8" "seqread read 1M 8" "randwrite randwrite 4K 32" "randread randread 4K 32"; do
    read -r name rw bs qd <<<"$c"
    for round in $(seq "$rounds"); do
      for target in nbdkit raid0 raid5; do
        run "$target-$name-j$jobs-r$round" "${uri[$target]}" "$rw" "$bs" "$qd" "$jobs"
      done
    done
  done
done

python3 - "$dir" "$rounds" "${jobs_list[@]}" <<'PY'
import json, statistics, sys
d, rounds, jobs = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
def res(name):
    j = json.load(open(f"{d}/{name}.json"))["jobs"][0]
    side = j["write"] if j["write"]["io_bytes"] > 0 else j["read"]
    return side["iops"], side["bw_bytes"] / 1e6
cases = ["seqwrite", "seqread", "randwrite", "randread"]
targets = ["nbdkit", "raid0", "raid5"]
med = statistics.median
print(f"rounds: {rounds} (medians over the rounds)")
print(f"{'case':<10} {'jobs':>4} {'target':<8} {'IOPS':>10} {'MB/s':>10}")
r = {}
for n in jobs:
    for c in cases:
        for t in targets:
            r[t, c, n] = [res(f"{t}-{c}-j{n}-r{k}") for k in range(1, rounds + 1)]
            iops, mbs = med(x[0] for x in r[t, c, n]), med(x[1] for x in r[t, c, n])
            print(f"{c:<10} {n:>4} {t:<8} {iops:>10.0f} {mbs:>10.1f}")
print()
print(f"{'case':<10} {'jobs':>4} {'raid0/nbdkit-file':>18} {'raid5/raid0':>12}   raid0/nbdkit-file per round")
for n in jobs:
    for c in cases:
        per = [a[0] / b[0] for a, b in zip(r["raid0", c, n], r["nbdkit", c, n])]
        r5 = med(a[0] / b[0] for a, b in zip(r["raid5", c, n], r["raid0", c, n]))
        rounds_txt = " ".join(f"{x:.2f}" for x in per)
        print(f"{c:<10} {n:>4} {med(per):>17.2f}x {r5:>11.2f}x   {rounds_txt}")
PY
