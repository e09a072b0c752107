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
# 28 asks RAID5 to keep up with), 256 KiB chunks: RAID5 over 8 onto a replacement, RAID+ n=13
# k=4 and n=31 k=7 into their spare space, and S2-RAID5 over 9 (G = 3, K = 3) plus a spare,
# into the spare and spare partitions; each declustered layout's speedup over RAID5 beside its
# layout's own ((n-1)/k for RAID+: each unit rebuilt costs k member I/Os spread over n-1
# members; K for S2-RAID: the failed disk's K partitions are rebuilt side by side, each member
# moving at most one partition) and the bar of 0.75 times that. Each pool is filled at full
# speed and rebuilt after `assemble --emulate` (member files as they were). The first table's
# member I/O is derived from the layout: each unit written was reconstructed from the width - 1
# others of its stripe.
#
# Last, on the local disk (DISK_DIR, default /var/tmp): RAID5 over 8 members of MEMBER_SIZE,
# rebuilt onto a replacement, against `dd` writing a file of the same size with fdatasync, in
# the same run; the rebuild's rate counts its own final flush.
#
# Needs: python3, /usr/bin/time (apt-get install time), dd.
# Usage: bench/rebuild.sh [MEMBER_SIZE [EMULATE [EMULATED_MEMBER_SIZE]]]   (defaults 128M,
# ssd:100MB/s:0.1ms, 256M; RAID+ over 31 members takes 32 of MEMBER_SIZE). DISK_DIR=none skips
# the local disk.
set -euo pipefail
cd "$(dirname "$0")/.."
member=${1:-128M}
emulate=${2:-ssd:100MB/s:0.1ms}
emember=${3:-256M}
for t in python3 /usr/bin/time dd; do
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

# filled_pool DIR N SIZE CREATE_ARGS...: a pool DIR/p.json over N members DIR/m<i>.img of SIZE,
# every byte written once with random bytes, member 0 failed.
filled_pool() {
  local d=$1 n=$2 size=$3 ms=() i bytes
  shift 3
  for ((i = 0; i < n; i++)); do ms+=(--member "$d/m$i.img"); done
  "$rf" create "$d/p.json" "$@" "${ms[@]}" --size "$size" >/dev/null
  bytes=$("$rf" status "$d/p.json" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["size_bytes"])')
  head -c "$bytes" /dev/urandom | "$rf" io write "$d/p.json" --offset 0 --input - >/dev/null 2>&1
  "$rf" fail "$d/p.json" --member 0 >/dev/null
}

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
# Issue 28's bar: RAID5 over tmpfs members moves 4 GB/s of member I/O (default window).
verdict = ""
if sys.argv[3].startswith("raid5") and sys.argv[4] != "1T":
    verdict = "  holds (bar 4 GB/s)" if io >= 4 else "  SHORT (bar 4 GB/s)"
print(f"{sys.argv[3]:<16} {sys.argv[4]:<8} {mbs:>12.1f} {io:>14.2f} {secs:>10.2f} {rss_mb:>12.0f}{verdict}")
PY
  done
done

echo
echo "On $emember members emulated at $emulate, 256 KiB chunks:"
printf '%-16s %12s %10s %10s %12s %8s\n' pool "rebuild MB/s" seconds "vs raid5" "layout's" "bar"
raid5_rate=
# name | create arguments | members | replace member 0 (1) or rebuild into spare space (0) |
# the layout's speedup over RAID5 (empty: the baseline)
emulated=(
  "raid5-8|--scheme raid5 --disks 8 --chunk 256K|8|1|"
  "raidplus-13-4|--scheme raidplus --disks 13 --width 4 --chunk 256K|13|0|12/4"
  "raidplus-31-7|--scheme raidplus --disks 31 --width 7 --chunk 256K|31|0|30/7"
  "s2raid5-9-g3+1|--scheme s2raid5 --disks 10 --spares 1 --group 3 --partitions 3 --chunk 256K|10|0|3"
)
for entry in "${emulated[@]}"; do
  IFS='|' read -r name args n replace theory <<<"$entry"
  rm -f "$dir"/*.img "$dir"/*.json "$dir"/*.ctl
  # shellcheck disable=SC2086
  filled_pool "$dir" "$n" "$emember" $args
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
  if [ -z "$theory" ]; then
    raid5_rate=$mbs
    printf '%-16s %12s %10s %10s %12s %8s\n' "$name" "$mbs" "$secs" baseline "" ""
  else
    python3 - "$name" "$mbs" "$secs" "$raid5_rate" "$theory" <<'PY'
import sys
name, mbs, secs, base, theory = sys.argv[1:]
num, _, den = theory.partition("/")
t = float(num) / float(den or 1)
vs = float(mbs) / float(base)
bar = 0.75 * t
verdict = "holds" if vs >= bar else "SHORT"
print(f"{name:<16} {mbs:>12} {secs:>10} {vs:>9.2f}x {t:>11.2f}x {bar:>6.2f}x {verdict}")
PY
  fi
done

# A wide enclosure: 255 members (random placement, RAID6 stripes of 10, 16 KiB chunks, 2550
# stripes a cycle) of WIDE_MEMBER_SIZE (default 16M): peak RSS of a rebuild, a verify and a
# scrub, and the time `status` takes; then `raidforge sim` with RAID+ n=251 and no workload
# (its setup: layout, geometry and plan tables). Issue 28's bars: 256 MiB plus a small
# per-member term, and 1 s.
echo
wmember=${WIDE_MEMBER_SIZE:-16M}
echo "255 members of $wmember (random, level 6, width 10, 16 KiB chunks) and sim RAID+ n=251:"
rm -f "$dir"/*.img "$dir"/*.json "$dir"/*.ctl
filled_pool "$dir" 255 "$wmember" --scheme random --level 6 --width 10 --disks 255 \
  --stripes 2550 --chunk 16K
for cmd in rebuild verify scrub status; do
  /usr/bin/time -f '%M %e' -o "$dir/rss" "$rf" "$cmd" "$dir/p.json" --json >/dev/null
  read -r kb secs <"$dir/rss"
  python3 - "$cmd" "$kb" "$secs" <<'PY'
import sys
cmd, kb, secs = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
mb = kb / 1024
bar = "holds" if (mb < 256 if cmd != "status" else secs < 1) else "SHORT"
what = "bar 256 MiB" if cmd != "status" else "bar 1 s"
print(f"{cmd:<16} peak RSS {mb:>6.0f} MiB {secs:>7.2f} s  ({what}) {bar}")
PY
done
/usr/bin/time -f '%M %e' -o "$dir/rss" "$rf" sim --scheme raidplus --disks 251 --width 8 --workload none --json >/dev/null
read -r kb secs <"$dir/rss"
python3 -c "import sys; s=float(sys.argv[1]); print(f\"{'sim raidplus-251':<16} peak RSS {int(sys.argv[2])/1024:>6.0f} MiB {s:>7.2f} s  (bar 1 s) {'holds' if s < 1 else 'SHORT'}\")" "$secs" "$kb"
rm -f "$dir"/*.img

ddir=${DISK_DIR:-/var/tmp}
if [ "$ddir" != none ]; then
  echo
  ldir=$(mktemp -d "$ddir/raidforge-rebuild-disk.XXXXXX")
  trap 'rm -rf "$dir" "$ldir"' EXIT
  echo "On the local disk ($ldir), RAID5 over 8 members of $member, 64 KiB chunks, against dd:"
  bytes=$(python3 -c "import sys; s=sys.argv[1]; u={'K':1<<10,'M':1<<20,'G':1<<30}; print(int(s[:-1])*u[s[-1]] if s[-1] in u else int(s))" "$member")
  t0=$(date +%s.%N)
  dd if=/dev/zero of="$ldir/dd.img" bs=1M count=$((bytes >> 20)) conv=fdatasync status=none
  t1=$(date +%s.%N)
  rm -f "$ldir/dd.img"
  filled_pool "$ldir" 8 "$member" --scheme raid5 --disks 8 --chunk 64K
  rm -f "$ldir/m0.img"
  "$rf" replace "$ldir/p.json" --member 0 --with "$ldir/new0.img" >/dev/null
  "$rf" rebuild "$ldir/p.json" --json >"$ldir/out.json"
  python3 - "$ldir/out.json" "$bytes" "$t0" "$t1" <<'PY'
import json, sys
last = [json.loads(l) for l in open(sys.argv[1]) if l.strip().startswith("{")][-1]
rebuild = last["bytes_written"] / 1e6 / max(last["elapsed_s"], 1e-9)
dd = int(sys.argv[2]) / 1e6 / (float(sys.argv[4]) - float(sys.argv[3]))
verdict = "holds" if rebuild >= 0.8 * dd else "SHORT"
print(f"{'dd (fdatasync)':<16} {dd:>12.1f} MB/s")
print(f"{'raid5-8 rebuild':<16} {rebuild:>12.1f} MB/s  {rebuild / dd:.2f}x dd (bar 0.80x) {verdict}")
PY
fi
