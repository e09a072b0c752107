#!/usr/bin/env bash
# What write-hole protection costs on small random writes: 4 KiB random writes to a RAID5
# pool of 4 file members at queue depth 1 and 8, without a journal (`none`: not durable until
# a flush), without a journal but flushed after every write (`none+flush`: durable, like FUA
# per write), and with the write journal (`journal`: durable on return), side by side in one
# run; prints IOPS and the ratios journal/none and journal/none+flush.
#
# Usage: bench/write_hole.sh [SECONDS_PER_CASE] [DIR] [EMULATE]
#   DIR: where the member files go (default /tmp; put it on the device you care about)
#   EMULATE: optional member speed, e.g. ssd:500MB/s:0.1ms or hdd:150MB/s:8ms
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-5}
dir=${2:-/tmp}
args=(--seconds "$secs" --dir "$dir")
if [ -n "${3:-}" ]; then
  args+=(--emulate "$3")
fi
cargo run --release -q -p dev --example write_hole_bench -- "${args[@]}"
