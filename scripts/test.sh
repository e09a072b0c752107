#!/usr/bin/env bash
# Every test of the project, Rust and Python: the README's test command, which CI runs
# (.ci/run installs what it needs first).
#
#   scripts/test.sh
#
# 1. cargo test --workspace.
# 2. The Python package (python/, issue 26) built from this tree into the virtualenv .venv
#    (made with the test extras the first time; PYTHON names the interpreter, default python3),
#    the release CLI its tests compare against, and pytest over python/tests (every function
#    against the CLI's --json, sweeps on local processes and on a two-worker Dask LocalCluster,
#    the example notebook executed with nbclient).
set -euo pipefail
if [ "${1:-}" = "-h" ] || [ "${1:-}" = "--help" ]; then
    sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'
    exit 0
fi
cd "$(dirname "$0")/.."

cargo test --workspace

venv=.venv
if [ ! -x "$venv/bin/python" ]; then
    "${PYTHON:-python3}" -m venv "$venv"
    "$venv/bin/python" -m pip install -q --upgrade pip
    "$venv/bin/python" -m pip install -q './python[test]'
else
    # The extension of this tree (cargo rebuilds only what changed).
    "$venv/bin/python" -m pip install -q --no-deps --force-reinstall ./python
fi
cargo build --release -p raidforge
RAIDFORGE_BIN="${CARGO_TARGET_DIR:-$PWD/target}/release/raidforge" "$venv/bin/python" -m pytest python/tests
