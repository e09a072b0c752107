#!/usr/bin/env bash
# Simulator speed, before and after, side by side in one run: simulated member I/Os per second
# of wall time on one core (crates/sim/examples/sim_speed.rs), and peak memory at two trace
# lengths.
#
#   bench/sim_speed.sh NEW_SIM_SPEED [BASE_SIM_SPEED] [REPS] [LOOPS]
#
# NEW_SIM_SPEED / BASE_SIM_SPEED are `sim_speed` example binaries (build each tree with
# `cargo build --release -p sim --example sim_speed`; the example uses only sim's public API,
# so the same file builds in an older tree). For every scenario the two binaries run
# alternately REPS times (default 5), so that load from other processes hits both alike; the
# script prints each run (member I/Os per second of wall time, and per second of CPU time in
# brackets), the median of each side and the ratio of the medians, then the load average. Scenarios (see the example): raid5 = RAID5 over 8 ST3500320AS replaying the
# WebSearch head LOOPS times (default 40, about a million requests); rebuild = RAID+ n=59 k=7
# offline rebuild of a 100 GB member; rebuild-load = the same rebuild under the looped
# WebSearch head. Peak RSS: /usr/bin/time -v of the new binary at --loops 10 and 100.
set -euo pipefail
cd "$(dirname "$0")/.."
new=${1:?usage: bench/sim_speed.sh NEW_SIM_SPEED [BASE_SIM_SPEED] [REPS] [LOOPS]}
base=${2:-}
reps=${3:-5}
loops=${4:-40}
# The folder holding websearch-head.mqsim: $RAIDFORGE_TRACES, else the repository's data/traces.
traces=${RAIDFORGE_TRACES:-$PWD/data/traces}

# One run: "WALL_RATE CPU_RATE" (member I/Os per second of wall time, and per second of CPU time
# (user + system) -- on a loaded machine the process waits for a core, which the second leaves
# out).
one() {
  local out
  out=$( { /usr/bin/time -f "cpu %U %S" "$@" ; } 2>&1 )
  local ios wall cpu
  ios=$(echo "$out" | sed -n 's/.* \([0-9]*\) member I\/Os, .*/\1/p' | head -1)
  wall=$(echo "$out" | sed -n 's/.*-> \([0-9]*\) member I\/Os\/s.*/\1/p' | head -1)
  cpu=$(echo "$out" | sed -n 's/^cpu //p' | awk -v n="$ios" '{printf "%.0f", n / ($1 + $2)}')
  echo "$wall $cpu"
}
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
for scenario in raid5 rebuild rebuild-load; do
  : >/tmp/sim_speed.new.$$
  : >/tmp/sim_speed.base.$$
  for i in $(seq "$reps"); do
    r=$(one "$new" "$traces" "$loops" "$scenario")
    echo "$r" >>/tmp/sim_speed.new.$$
    line="$scenario rep $i: new ${r% *} (cpu ${r#* })"
    if [ -n "$base" ]; then
      b=$(one "$base" "$traces" "$loops" "$scenario")
      echo "$b" >>/tmp/sim_speed.base.$$
      line="$line, base ${b% *} (cpu ${b#* })"
    fi
    echo "$line member I/Os/s"
  done
  for col in 1 2; do
    what=$([ $col = 1 ] && echo "wall" || echo "cpu ")
    n=$(cut -d' ' -f$col </tmp/sim_speed.new.$$ | median)
    if [ -n "$base" ]; then
      b=$(cut -d' ' -f$col </tmp/sim_speed.base.$$ | median)
      echo "$scenario median per $what second: new $n, base $b member I/Os/s, ratio $(awk "BEGIN {printf \"%.2f\", $n / $b}")"
    else
      echo "$scenario median per $what second: $n member I/Os/s"
    fi
  done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
for l in 10 100; do
  for scenario in raid5 rebuild-load; do
    rss=$(/usr/bin/time -v "$new" "$traces" "$l" "$scenario" 2>&1 >/dev/null | sed -n 's/.*Maximum resident set size (kbytes): //p')
    echo "peak RSS, $scenario, --loops $l: $rss KiB"
  done
done
rm -f /tmp/sim_speed.new.$$ /tmp/sim_speed.base.$$
