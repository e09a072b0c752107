"""Sweeps: the same rows serially, on local processes and on a Dask cluster."""

from __future__ import annotations

import pandas as pd
import pytest

import raidforge
from raidforge import RaidforgeError, _cli

GRID = {
    "scheme": ["random", "raidplus"],
    "disks": 7,
    "width": [3, 4],
    "disk": "st3500320as",
    "member_size": "64M",
    "chunk": "64K",
    "fail": 1,
    "fail_at": 0.5,
}
WORKLOADS = ["random:read=0.7:size=4K:iops=200:requests=300", "none"]
SEEDS = [1, 2]


def flat(d, prefix=""):
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(flat(v, f"{prefix}{k}."))
        elif not isinstance(v, list):
            out[f"{prefix}{k}"] = v
    return out


@pytest.fixture(scope="module")
def serial():
    return raidforge.sweep(GRID, WORKLOADS, seeds=SEEDS, max_workers=1, progress=False)


def test_rows_are_the_runs_in_order(serial, cli):
    runs = raidforge.sweep_runs(GRID, WORKLOADS, SEEDS)
    assert len(runs) == len(serial) == 2 * 2 * 2 * 2
    assert runs[1] == {"scheme": "random", "disks": 7, "width": 3, "disk": "st3500320as",
                       "member_size": "64M", "chunk": "64K", "fail": 1, "fail_at": 0.5,
                       "workload": WORKLOADS[0], "seed": 2}
    assert list(serial.columns[:10]) == list(runs[0])
    # Each row is that run's `raidforge sim --json`, flattened.
    for i in (0, 5, 15):
        v = cli.json("sim", *_cli.argv("sim", "sim", runs[i]), "--json")
        row = serial.iloc[i].to_dict()
        for k, want in flat(v).items():
            if k in ("workload", "seed"):
                continue
            got = row[f"result.{k}" if k in runs[i] else k]
            assert got == want, (i, k, got, want)
    assert serial["rebuild.time_s"].notna().all()
    assert serial["result.scheme"].iloc[0] == "random over 7 disks"
    # Seeds change a run with a random workload, not an offline rebuild.
    rnd = serial[serial["workload"] == WORKLOADS[0]]
    assert rnd.groupby(["scheme", "width"])["response_ms.normal.mean"].nunique().eq(2).all()


def test_local_processes_match_serial(serial):
    local = raidforge.sweep(GRID, WORKLOADS, seeds=SEEDS, max_workers=2, progress=True)
    pd.testing.assert_frame_equal(local, serial, check_exact=True)


def test_dask_local_cluster_matches_serial(serial):
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        assert len(client.scheduler_info()["workers"]) == 2
        on_dask = raidforge.sweep(GRID, WORKLOADS, client=client, seeds=SEEDS, progress=False)
        pd.testing.assert_frame_equal(on_dask, serial, check_exact=True)
        # Both workers ran simulations.
        ran = client.run(lambda: __import__("sys").modules.get("raidforge") is not None)
        assert all(ran.values())
        # A failing run names itself, from the cluster too.
        with pytest.raises(RaidforgeError, match=r"sweep run 1 .*'disk': 'floppy'"):
            raidforge.sweep({"scheme": "raid5", "disks": 4, "disk": ["st3500320as", "floppy"]},
                            "none", client=client, progress=False)


def test_grid_forms_and_errors():
    points = raidforge.sweep_runs([{"scheme": "raid5", "disks": 4}, {"scheme": "raid6", "disks": 6}],
                                  "none", seeds=range(2))
    assert [(p["scheme"], p["seed"]) for p in points] == [
        ("raid5", 0), ("raid5", 1), ("raid6", 0), ("raid6", 1)]
    with pytest.raises(TypeError, match="dsks"):
        raidforge.sweep_runs({"scheme": "raid5", "dsks": [4]}, "none")
    with pytest.raises(ValueError, match="seed"):
        raidforge.sweep_runs({"scheme": "raid5", "seed": [1]}, "none")
    with pytest.raises(ValueError, match="workloads"):
        raidforge.sweep_runs({"scheme": "raid5"}, [])
    with pytest.raises(RaidforgeError, match=r"sweep run 0 .*--disks"):
        raidforge.sweep({"scheme": "raid5", "disks": "x"}, "none", max_workers=1, progress=False)
    with pytest.raises(RaidforgeError, match=r"sweep run 0 .*--disks"):
        raidforge.sweep({"scheme": "raid5", "disks": "x"}, "none", max_workers=2, progress=False)
