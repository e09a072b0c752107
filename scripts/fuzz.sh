#!/usr/bin/env bash
# Long fuzz campaign: runs every fuzz driver for a given time each, in release mode with
# overflow checks and debug assertions on (so an arithmetic overflow is a finding, as in the
# tests).
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]      (default 60 s; targets: superblock
#                                                          md_superblock journal traces nbd;
#                                                          default all)
#   FUZZ_SEED=0x1234 scripts/fuzz.sh 600 nbd              (a fixed campaign seed)
#
# Each driver prints its seed, iterations, iterations per second and the distinct outcomes it
# met; on a failure it prints the case seed (replay: `cargo run --release -p CRATE --example
# fuzz_TARGET -- --case SEED`) and saves the input under fuzz/corpus/TARGET/crashes/. The first
# input of every distinct outcome is kept in fuzz/corpus/TARGET/ (the tests read those back).
# Exit status: 0 if every driver passed, 1 otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."

secs="${1:-60}"
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    targets=(superblock md_superblock journal traces nbd)
fi

export CARGO_PROFILE_RELEASE_OVERFLOW_CHECKS=true
export CARGO_PROFILE_RELEASE_DEBUG_ASSERTIONS=true

crate_of() {
    case "$1" in
        superblock | md_superblock | journal) echo raidcore ;;
        traces) echo sim ;;
        nbd) echo nbd ;;
        *) echo "unknown target $1 (superblock, md_superblock, journal, traces, nbd)" >&2; exit 2 ;;
    esac
}

for t in "${targets[@]}"; do
    cargo build --release -q -p "$(crate_of "$t")" --example "fuzz_$t"
done

status=0
for t in "${targets[@]}"; do
    args=(--secs "$secs" --corpus "fuzz/corpus/$t")
    if [ -n "${FUZZ_SEED:-}" ]; then
        args+=(--seed "$FUZZ_SEED")
    fi
    echo "== $t: $secs s"
    if ! cargo run --release -q -p "$(crate_of "$t")" --example "fuzz_$t" -- "${args[@]}"; then
        status=1
    fi
done
exit $status
