"""Shared fixtures: the CLI binary the Python results are compared with."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any, List

import pytest

REPO = Path(__file__).resolve().parents[2]


def cli_path() -> Path:
    """$RAIDFORGE_BIN, else the workspace's release build (scripts/test.sh builds it)."""
    p = Path(os.environ.get("RAIDFORGE_BIN", REPO / "target" / "release" / "raidforge"))
    if not p.is_file():
        raise RuntimeError(
            f"no raidforge binary at {p}: build it with `cargo build --release -p raidforge` "
            "or set RAIDFORGE_BIN (scripts/test.sh does this)"
        )
    return p


class Cli:
    def __init__(self, path: Path):
        self.path = path

    def run(self, *args: Any, cwd: Any = None) -> subprocess.CompletedProcess:
        env = {k: v for k, v in os.environ.items() if k != "CI"}
        return subprocess.run(
            [str(self.path), *map(str, args)], capture_output=True, text=True, cwd=cwd, env=env
        )

    def json(self, *args: Any, cwd: Any = None) -> Any:
        out = self.run(*args, cwd=cwd)
        assert out.returncode == 0, f"raidforge {args} failed: {out.stderr}"
        return json.loads(out.stdout)

    def json_lines(self, *args: Any, cwd: Any = None) -> List[Any]:
        out = self.run(*args, cwd=cwd)
        assert out.returncode == 0, f"raidforge {args} failed: {out.stderr}"
        return [json.loads(line) for line in out.stdout.splitlines()]

    def error(self, *args: Any, cwd: Any = None) -> str:
        """The message of a failing command: its first line after `raidforge: error: ` (or
        clap's `error: `)."""
        out = self.run(*args, cwd=cwd)
        assert out.returncode == 2, f"raidforge {args} exited {out.returncode}: {out.stderr}"
        first = out.stderr.strip().splitlines()[0]
        return first.removeprefix("raidforge: error: ").removeprefix("error: ")


@pytest.fixture(scope="session")
def cli() -> Cli:
    return Cli(cli_path())
