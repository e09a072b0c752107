#!/usr/bin/env bash
# Every test of the project, Rust and Python: the README's test command, which CI runs
# (.ci/run installs what it needs first).
#
#   scripts/test.sh
#
# 1. The virtualenv .venv with the Python package's test extras, made the first time (PYTHON
#    names the interpreter, default python3): a Rust test reads `serve --metrics` with its
#    prometheus_client.
# 2. cargo test --workspace.
# 3. The Python package (python/, issue 26) built from this tree into .venv, the release CLI
#    its tests compare against, and pytest over python/tests (every function against the
#    CLI's --json, sweeps on local processes and on a two-worker Dask LocalCluster, the
#    example notebook executed with nbclient).
set -euo pipefail
if [ "${1:-}" = "-h" ] || [ "${1:-}" = "--help" ]; then
    sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'
    exit 0
fi
cd "$(dirname "$0")/.."

venv=.venv
fresh=0
if [ ! -x "$venv/bin/python" ]; then
    "${PYTHON:-python3}" -m venv "$venv"
    "$venv/bin/python" -m pip install -q --upgrade pip
    "$venv/bin/python" -m pip install -q './python[test]'
    fresh=1
elif ! "$venv/bin/python" -c 'import prometheus_client' 2>/dev/null; then
    # A virtualenv made before the extras listed it.
    "$venv/bin/python" -m pip install -q 'prometheus-client>=0.17'
fi

cargo test --workspace

if [ "$fresh" -eq 0 ]; then
    # The extension of this tree (cargo rebuilds only what changed).
    "$venv/bin/python" -m pip install -q --no-deps --force-reinstall ./python
fi
cargo build --release -p raidforge
RAIDFORGE_BIN="${CARGO_TARGET_DIR:-$PWD/target}/release/raidforge" "$venv/bin/python" -m pytest python/tests
