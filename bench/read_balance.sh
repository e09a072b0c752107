#!/usr/bin/env bash
# Mirror read balancing on a served pool (issue 29): random 4 KiB reads over NBD from fio on
# RAID1 of 2 and RAID10 of 4 members, each member a file slowed to a disk (one I/O at a time,
# fixed latency). Each pool runs twice in the same script: with every member (the copies
# balanced) and again after failing one member per mirror pair (one copy of every chunk: the
# reference). Prints IOPS, the ratio, and each member's share of the reads from
# `raidforge status --json`.
#
# usage: bench/read_balance.sh [SECONDS] [LATENCY]   (defaults 5, 2ms)
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-5}
lat=${2:-2ms}
for t in fio python3; do
  command -v "$t" >/dev/null || { echo "bench/read_balance.sh: $t is missing (apt-get install fio)" >&2; exit 2; }
done
cargo build --release -q -p raidforge
rf=${CARGO_TARGET_DIR:-$PWD/target}/release/raidforge
dir=$(mktemp -d /tmp/raidforge-read-balance.XXXXXX)
pid=
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$dir"; }
trap cleanup EXIT

reads() { "$rf" status "$dir/$1.json" --json | python3 -c 'import json,sys; print(" ".join(str(m["reads"]) for m in json.load(sys.stdin)["members"]))'; }

serve_and_read() { # pool tag -> IOPS; member reads before and after in $dir/tag.{before,after}
  reads "$1" >"$dir/$2.before"
  "$rf" serve "$dir/$1.json" --socket "$dir/$2.sock" >"$dir/$2.serve.log" 2>&1 &
  pid=$!
  for _ in $(seq 100); do [ -S "$dir/$2.sock" ] && break; sleep 0.1; done
  fio --name="$2" --ioengine=nbd --uri="nbd+unix:///?socket=$dir/$2.sock" --rw=randread --bs=4K \
      --iodepth=16 --size=64M --time_based --runtime="$secs" --output-format=json \
      --output="$dir/$2.fio.json" >/dev/null
  kill "$pid"; wait "$pid" 2>/dev/null || true; pid=
  reads "$1" >"$dir/$2.after"
  python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["jobs"][0]["read"]["iops"])' "$dir/$2.fio.json"
}

printf '%-10s %12s %12s %7s  %s\n' pool "all copies" "one copy" ratio "share of reads per member (all copies)"
for spec in raid1:2:1 raid10:4:1,3; do
  IFS=: read -r level n fail <<<"$spec"
  args=()
  for i in $(seq 0 $((n - 1))); do args+=(--member "$dir/$level-m$i.img"); done
  "$rf" create "$dir/$level.json" --scheme "$level" --disks "$n" "${args[@]}" --size 96M \
    --chunk 64K --emulate "hdd:500MB/s:$lat" >/dev/null
  both=$(serve_and_read "$level" "$level-all")
  share=$(python3 -c 'import sys
b=[int(x) for x in open(sys.argv[1]).read().split()]; a=[int(x) for x in open(sys.argv[2]).read().split()]
d=[x-y for x,y in zip(a,b)]; t=sum(d) or 1
print(" ".join(f"{100*x/t:.1f}%" for x in d))' "$dir/$level-all.before" "$dir/$level-all.after")
  for m in ${fail//,/ }; do "$rf" fail "$dir/$level.json" --member "$m" >/dev/null; done
  one=$(serve_and_read "$level" "$level-one")
  python3 -c 'import sys; a,b=float(sys.argv[2]),float(sys.argv[3]); print(f"{sys.argv[1]:<10} {a:12.0f} {b:12.0f} {a/b:7.2f}  {sys.argv[4]}")' \
    "$level/$n" "$both" "$one" "$share"
done
