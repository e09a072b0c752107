#!/usr/bin/env bash
# Offline rebuild speed and memory, side by side in one run.
#
# For each pool below (member files in BENCH_DIR, default /dev/shm when there is one): create
# it, write every byte once (so that the rebuild moves data, not holes), fail member 0, put an
# empty file in its place and time `raidforge rebuild` under /usr/bin/time: the rebuild rate
# (bytes written to the replacement per second, as the rebuild reports it, and all member I/O
# it implies) and the peak RSS of the process. Each pool is rebuilt twice, with the default
# memory window and with a window larger than any batch (each batch held whole in memory, as
# before windows existed), so the two columns show what the window bounds and what it costs.
#
# Then the same rebuilds on members emulated at EMULATE (default ssd:100MB/s:0.1ms: what issue
# 28 asks RAID5 to keep up with), 256 KiB chunks: RAID5 over 8 onto a replacement, and RAID+
# n=13 k=4 and n=31 k=7 into their spare space, with RAID+'s speedup beside its layout's
# (n-1)/k. Each pool is filled at full speed and rebuilt after `assemble --emulate` (member
# files as they were). The first table's member I/O is derived from the layout: each unit
# written was reconstructed from the width - 1 others of its stripe.
#
# Needs: python3, /usr/bin/time (apt-get install time).
# Usage: bench/rebuild.sh [MEMBER_SIZE [EMULATE [EMULATED_MEMBER_SIZE]]]   (defaults 128M,
# ssd:100MB/s:0.1ms, 256M; RAID+ over 31 members takes 32 of MEMBER_SIZE)
set -euo pipefail
cd "$(dirname "$0")/.."
member=${1:-128M}
emulate=${2:-ssd:100MB/s:0.1ms}
emember=${3:-256M}
for t in python3 /usr/bin/time; do
  command -v "$t" >/dev/null || { echo "bench/rebuild.sh: $t is missing" >&2; exit 2; }
done
cargo build --release -q -p raidforge
rf=${CARGO_TARGET_DIR:-$PWD/target}/release/raidforge
base=${BENCH_DIR:-}
if [ -z "$base" ]; then
  if [ -d /dev/shm ]; then base=/dev/shm; else base=/tmp; fi
fi
dir=$(mktemp -d "$base/raidforge-rebuild-bench.XXXXXX")
trap 'rm -rf "$dir"' EXIT

# name | create arguments
pools=(
  "raid5-8|--scheme raid5 --disks 8 --chunk 64K"
  "raidplus-31-7|--scheme raidplus --disks 31 --width 7 --chunk 64K"
)

printf '%-16s %-8s %12s %14s %10s %12s\n' pool window "rebuild MB/s" "member I/O GB/s" seconds "peak RSS MB"
for entry in "${pools[@]}"; do
  name=${entry%%|*}
  args=${entry#*|}
  n=$(sed -E 's/.*--disks ([0-9]+).*/\1/' <<<"$args")
  for window in 16M 1T; do
    rm -f "$dir"/*.img "$dir"/*.json "$dir"/*.ctl
    members=()
    for ((i = 0; i < n; i++)); do members+=(--member "$dir/m$i.img"); done
    # shellcheck disable=SC2086
    "$rf" create "$dir/p.json" $args "${members[@]}" --size "$member" >/dev/null
    size=$("$rf" status "$dir/p.json" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["size_bytes"])')
    # Every byte written once (a non-zero pattern: holes would read as zeros for free).
    python3 -c '
import sys
size, block = int(sys.argv[1]), bytes(range(256)) * 4096
out = sys.stdout.buffer
while size > 0:
    n = min(size, len(block))
    out.write(block[:n])
    size -= n
' "$size" | "$rf" io write "$dir/p.json" --offset 0 --input - >/dev/null 2>&1
    "$rf" fail "$dir/p.json" --member 0 >/dev/null
    rm -f "$dir/m0.img"
    "$rf" replace "$dir/p.json" --member 0 --with "$dir/new0.img" >/dev/null
    /usr/bin/time -f '%M' -o "$dir/rss" "$rf" rebuild "$dir/p.json" --memory-window "$window" --json >"$dir/out.json"
    # Member I/O: each unit written was reconstructed from the other units of its stripe
    # (width - 1 reads, the width being --width, or --disks for raid5).
    width=$(sed -E 's/.*--width ([0-9]+).*/\1/; t; s/.*--disks ([0-9]+).*/\1/' <<<"$args")
    python3 - "$dir/out.json" "$dir/rss" "$name" "$window" "$width" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip().startswith("{")]
last = lines[-1]
rss_mb = int(open(sys.argv[2]).read().split()[-1]) / 1024
secs = last["elapsed_s"]
mbs = last["bytes_written"] / 1e6 / max(secs, 1e-9)
io = mbs * int(sys.argv[5]) / 1e3
print(f"{sys.argv[3]:<16} {sys.argv[4]:<8} {mbs:>12.1f} {io:>14.2f} {secs:>10.2f} {rss_mb:>12.0f}")
PY
  done
done

echo
echo "On $emember members emulated at $emulate, 256 KiB chunks:"
printf '%-16s %12s %10s %10s\n' pool "rebuild MB/s" seconds "vs raid5"
raid5_rate=
# name | create arguments | members | replace member 0 (1) or rebuild into spare space (0)
emulated=(
  "raid5-8|--scheme raid5 --disks 8 --chunk 256K|8|1"
  "raidplus-13-4|--scheme raidplus --disks 13 --width 4 --chunk 256K|13|0"
  "raidplus-31-7|--scheme raidplus --disks 31 --width 7 --chunk 256K|31|0"
)
for entry in "${emulated[@]}"; do
  IFS='|' read -r name args n replace <<<"$entry"
  rm -f "$dir"/*.img "$dir"/*.json "$dir"/*.ctl
  members=()
  for ((i = 0; i < n; i++)); do members+=(--member "$dir/m$i.img"); done
  # shellcheck disable=SC2086
  "$rf" create "$dir/p.json" $args "${members[@]}" --size "$emember" >/dev/null
  size=$("$rf" status "$dir/p.json" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["size_bytes"])')
  head -c "$size" /dev/urandom | "$rf" io write "$dir/p.json" --offset 0 --input - >/dev/null 2>&1
  "$rf" fail "$dir/p.json" --member 0 >/dev/null
  rm -f "$dir/m0.img"
  kept=()
  if [ "$replace" = 1 ]; then
    "$rf" replace "$dir/p.json" --member 0 --with "$dir/new0.img" >/dev/null
    kept+=(--member "$dir/new0.img")
  fi
  for ((i = 1; i < n; i++)); do kept+=(--member "$dir/m$i.img"); done
  rm -f "$dir/p.json"
  "$rf" assemble "$dir/p.json" "${kept[@]}" --emulate "$emulate" >/dev/null
  "$rf" rebuild "$dir/p.json" --json >"$dir/out.json"
  rate=$(python3 - "$dir/out.json" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip().startswith("{")]
last = lines[-1]
print(f'{last["bytes_written"] / 1e6 / max(last["elapsed_s"], 1e-9):.1f} {last["elapsed_s"]:.2f}')
PY
)
  read -r mbs secs <<<"$rate"
  if [ -z "$raid5_rate" ]; then
    raid5_rate=$mbs
    printf '%-16s %12s %10s %10s\n' "$name" "$mbs" "$secs" baseline
  else
    k=$(sed -E 's/.*--width ([0-9]+).*/\1/' <<<"$args")
    vs=$(python3 -c "print(f'{$mbs / $raid5_rate:.2f}x (layout: {($n - 1) / $k:.2f}x)')")
    printf '%-16s %12s %10s %10s\n' "$name" "$mbs" "$secs" "$vs"
  fi
done
