#!/usr/bin/env bash
# Long fault-injection campaign over real pools (issue 8): consecutive seeds, each a pool on
# scratch files with a seeded workload and fault mix, every read checked against a model.
#
#   scripts/faultsim.sh [SECONDS]            run for SECONDS (default 600)
#   scripts/faultsim.sh --seeds N            run N seeds
#   FAULTSIM_START=1000 scripts/faultsim.sh 3600   start at another seed (default: the time)
#   FAULTSIM_ARGS="--protection journal,checksums" scripts/faultsim.sh 600
#
# Release build with overflow checks and debug assertions on (plans are validated as in the
# tests). Prints a summary and the same as JSON (faultsim-summary.json in the current
# directory). A failing seed is printed with the command that replays it; add it to
# crates/dev/tests/faultsim_seeds.txt so the tests replay it for ever.
# Exit status: 0 if no seed failed, 1 otherwise.
set -euo pipefail
if [ "${1:-}" = "-h" ] || [ "${1:-}" = "--help" ]; then
    sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'
    exit 0
fi
cd "$(dirname "$0")/.."

export CARGO_PROFILE_RELEASE_OVERFLOW_CHECKS=true
export CARGO_PROFILE_RELEASE_DEBUG_ASSERTIONS=true
cargo build --release -q -p dev --example faultsim
bin="${CARGO_TARGET_DIR:-target}/release/examples/faultsim"

start="${FAULTSIM_START:-$(date +%s)}"
if [ "${1:-}" = "--seeds" ]; then
    mode=(--seeds "${2:?--seeds needs a number}")
else
    mode=(--seconds "${1:-600}")
fi
# shellcheck disable=SC2086
"$bin" "${mode[@]}" --start "$start" ${FAULTSIM_ARGS:-} --json > faultsim-summary.json && rc=0 || rc=$?
python3 - faultsim-summary.json <<'PY' || cat faultsim-summary.json
import json, sys
s = json.load(open(sys.argv[1]))
f = s["faults"]
print(f"faultsim: {s['seeds_run']} seeds: {s['runs_within_tolerance']} within tolerance, {s['runs_beyond_tolerance']} beyond")
print("  faults: " + ", ".join(f"{v} {k.replace('_', ' ')}" for k, v in f.items()))
print(f"  crashes {s['crashes']}, reopens {s['reopens']}, rebuilds {s['rebuilds']}, pages dropped {s['pages_dropped_by_crashes']}, sectors torn {s['sectors_torn_by_crashes']}")
print(f"  reads {s['reads']}, writes {s['writes']}, bytes verified {s['bytes_verified']}")
print(f"  seeds whose members took the merged-write path: {s['seeds_with_merged_writes']}")
print(f"  redirected writes found in IDO's surrogate log at a start: {s.get('ido_log_writes_replayed', 0)} in {s.get('seeds_with_ido_log_replays', 0)} seeds")
print(f"  losses within tolerance: {s['losses_within_tolerance']} (must be 0)")
print(f"  beyond tolerance: {s['beyond_tolerance_detected']} detected, {s['beyond_tolerance_undetected_known_gap']} undetected known gap, {s['beyond_tolerance_undetected_unexpected']} undetected unexpected (must be 0)")
for seed, why in s["failed_seeds"]:
    print(f"  FAILED seed {seed}: {why}")
PY
echo "summary (JSON): faultsim-summary.json"
exit "$rc"
