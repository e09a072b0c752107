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
# Needs: python3, /usr/bin/time (apt-get install time).
# Usage: bench/rebuild.sh [MEMBER_SIZE]   (default 128M; RAID+ over 31 members takes 32 of them)
set -euo pipefail
cd "$(dirname "$0")/.."
member=${1:-128M}
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

printf '%-16s %-8s %12s %10s %12s\n' pool window "rebuild MB/s" seconds "peak RSS MB"
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
    python3 - "$dir/out.json" "$dir/rss" "$name" "$window" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip().startswith("{")]
last = lines[-1]
rss_mb = int(open(sys.argv[2]).read().split()[-1]) / 1024
secs = last["elapsed_s"]
mbs = last["bytes_written"] / 1e6 / max(secs, 1e-9)
print(f"{sys.argv[3]:<16} {sys.argv[4]:<8} {mbs:>12.1f} {secs:>10.2f} {rss_mb:>12.0f}")
PY
  done
done
