"""The calibration of the simulator against the engine (bench/calibrate.py, issue 32) in CI,
bounded: one offline rebuild and one lazy-parity small-write case on small emulated members.
Timings are printed by the script, not judged here (CI machines are noisy); what must hold
on any machine is that both sides ran and did the same work: the same member units read and
written by the rebuild, and client figures on both sides."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from conftest import REPO, cli_path


NORMAL_S = 2


def test_engine_and_simulator_rebuild_the_same_units():
    env = dict(
        os.environ,
        RAIDFORGE=str(cli_path()),
        CASES="offline,lazy-raid6",
        MEMBER_SIZE="16M",
        NORMAL_S=str(NORMAL_S),
    )
    p = subprocess.run(
        [sys.executable, str(REPO / "bench" / "calibrate.py"), "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert p.returncode == 0, p.stderr
    rows = {r["case"]: r for r in json.loads(p.stdout)}
    assert set(rows) == {"offline", "lazy-raid6"}

    off = rows["offline"]
    e, s = off["engine"]["member_ios"], off["sim"]["member_ios"]
    # RAID5 over 4 members, one replaced: every unit of its data area is rebuilt from the
    # three others and written once, on both sides.
    units = off["engine"]["member_data_bytes"] // (64 << 10)
    assert e["writes"] == s["writes"] == units, (e, s, units)
    assert e["reads"] == s["reads"] == 3 * units, (e, s, units)
    assert off["engine"]["rebuild_s"] > 0 and off["sim"]["rebuild_s"] > 0
    assert off["rebuild_ratio"] > 0

    lazy = rows["lazy-raid6"]
    for side in ("engine", "sim"):
        ph = lazy[side]["phases"]["normal"]
        assert ph["iops"] > 0 and 0 < ph["mean_ms"] <= ph["p99_ms"], (side, ph)
        ios = lazy[side]["member_ios"]
        # A lazy small write reads and writes a data unit and one parity (4 member I/Os),
        # and the deferred parities are flushed before the counts are taken: at least two
        # reads and two writes per client write on each side.
        writes = ph["iops"] * NORMAL_S
        assert ios["reads"] >= 1.5 * writes and ios["writes"] >= 1.5 * writes, (side, ios)
        # Both keep the deferred-parity list on the members: the writes that listed stripes
        # waited for records of it.
        assert ios["meta_writes"] > 0, (side, ios)
