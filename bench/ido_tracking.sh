#!/usr/bin/env bash
# Cost of IDO's zone popularity tracking on the NBD path, tracking on vs off, side by side.
#
# One RAID5 pool (4 members of 300M, 64K chunks, 12M zones) served by `raidforge serve` on a
# Unix socket. fio (ioengine=nbd) runs 4 KiB random read, 4 KiB random write and 1 MiB
# sequential read against it, each case ROUNDS times with zone counting on and ROUNDS times
# off, switched through the pool's control socket between runs (`{"op": "zone_tracking"}`),
# alternating on/off and off/on from round to round: the same server, files and page cache,
# so the switch is the only difference, and drift of the machine hits both alike. Prints IOPS
# per run and, per case, the median of the per-round ratios on/off and the ratio of the summed
# IOPS; overhead = 1 - ratio. The target is an overhead under 3 %.
#
# Needs: fio, python3. Usage: bench/ido_tracking.sh [SECONDS_PER_RUN] [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-3}
rounds=${2:-8}
for t in fio python3; do
  command -v "$t" >/dev/null || { echo "bench/ido_tracking.sh: $t is missing (apt-get install fio)" >&2; exit 2; }
done
cargo build --release -q -p raidforge
# The counting itself, without the NBD path around it.
cargo run --release -q -p dev --example ido_note_cost
rf=${CARGO_TARGET_DIR:-$PWD/target}/release/raidforge
dir=$(mktemp -d /tmp/raidforge-ido-bench.XXXXXX)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$dir"; }
trap cleanup EXIT

args=()
for i in 0 1 2 3; do args+=(--member "$dir/m$i.img"); done
"$rf" create "$dir/p.json" --scheme raid5 --disks 4 "${args[@]}" --size 300M --chunk 64K \
    --zone-size 12M >/dev/null
size=$("$rf" status "$dir/p.json" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["size_bytes"])')
"$rf" serve "$dir/p.json" --socket "$dir/p.sock" >"$dir/serve.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do [ -S "$dir/p.sock" ] && [ -S "$dir/p.json.ctl" ] && break; sleep 0.1; done

tracking() { # on|off
  python3 - "$dir/p.json.ctl" "$1" <<'PY'
import json, socket, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
s.sendall((json.dumps({"op": "zone_tracking", "on": sys.argv[2] == "on"}) + "\n").encode())
r = json.loads(s.makefile().readline())
assert r.get("ok"), r
PY
}
run() { # file rw bs iodepth
  fio --name="$1" --ioengine=nbd --uri="nbd+unix:///p?socket=$dir/p.sock" --rw="$2" --bs="$3" \
      --iodepth="$4" --size="$((size / 2))" --time_based --runtime="$secs" --numjobs=1 \
      --output-format=json --output="$dir/$1.json" >/dev/null
}
# Fill once so reads read written data.
run fill write 1M 8
cases=(randread:4K:32 randwrite:4K:32 read:1M:8)
for r in $(seq "$rounds"); do
  for c in "${cases[@]}"; do
    IFS=: read -r rw bs qd <<<"$c"
    if (( r % 2 )); then order="on off"; else order="off on"; fi
    for t in $order; do tracking "$t"; run "$rw-$t-$r" "$rw" "$bs" "$qd"; done
  done
done
tracking on
"$rf" status "$dir/p.json" --json | python3 -c '
import json,sys; s=json.load(sys.stdin)["ido"]
print("zone counts of the hottest zones after the runs:", s["popular"][:4])'

python3 - "$dir" "$rounds" <<'PY'
import json, statistics, sys
d, rounds = sys.argv[1], int(sys.argv[2])
def iops(name):
    j = json.load(open(f"{d}/{name}.json"))["jobs"][0]
    side = j["write"] if j["write"]["io_bytes"] > 0 else j["read"]
    return side["iops"]
print(f"{'case':<10} {'round':>5} {'on IOPS':>10} {'off IOPS':>10} {'on/off':>7}")
worst = 0.0
for rw in ["randread", "randwrite", "read"]:
    on = off = 0.0
    ratios = []
    for r in range(1, rounds + 1):
        a, b = iops(f"{rw}-on-{r}"), iops(f"{rw}-off-{r}")
        on += a; off += b
        ratios.append(a / b)
        print(f"{rw:<10} {r:>5} {a:>10.0f} {b:>10.0f} {a / b:>7.3f}")
    med = statistics.median(ratios)
    worst = max(worst, 1 - med)
    print(f"{rw:<10} on/off median {med:.3f} (overhead {100 * (1 - med):+.1f} %), "
          f"summed {on / off:.3f} (overhead {100 * (1 - on / off):+.1f} %)")
print(f"largest overhead (median) {100 * worst:+.1f} % (target: under 3 %)")
PY
