#!/usr/bin/env python3
"""A 48-run simulator sweep three ways, side by side: serially in this process, on local
processes (raidforge.sweep without a client) and on a dask.distributed LocalCluster of two
single-threaded worker processes. Checks that the three DataFrames are equal row for row and
prints each one's wall time and its speed-up over the serial run measured in the same run
(cluster start-up timed apart). The load average is printed too: on a shared machine the
ratios, not the seconds, are what count.

    python bench/sweep_dask.py [--workers N] [--requests N] [--json]

Needs the package with its dask extra (pip install './python[dask]'), e.g. .venv/bin/python
after scripts/test.sh.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import pandas as pd

import raidforge

SCHEMES = [
    {"scheme": "raid5"},
    {"scheme": "raidplus", "width": 3},
    {"scheme": "random", "width": 3},
    {"scheme": "hash", "width": 3},
]


def grid(requests: int):
    base = {"disks": 7, "disk": "st3500320as", "chunk": "64K", "fail": 1, "fail_at": 1}
    return [{**s, **base, "member_size": m} for s in SCHEMES for m in ("4G", "8G")], [
        f"random:read=0.7:size=4K:iops=400:requests={requests}",
        f"random:read=0.3:size=8K:iops=300:requests={requests}",
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=2, help="worker processes (default 2)")
    ap.add_argument("--requests", type=int, default=200_000, help="requests per run")
    ap.add_argument("--repeat", type=int, default=1, help="rounds; the best time counts")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    a = ap.parse_args()
    points, workloads = grid(a.requests)
    seeds = [1, 2, 3]
    runs = len(raidforge.sweep_runs(points, workloads, seeds))
    load_before = os.getloadavg()

    from distributed import Client, LocalCluster

    t = time.perf_counter()
    with LocalCluster(n_workers=a.workers, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        client.wait_for_workers(a.workers)
        startup_s = time.perf_counter() - t
        times = {"serial": [], "local": [], "dask": []}
        for _ in range(max(1, a.repeat)):
            t = time.perf_counter()
            serial = raidforge.sweep(points, workloads, seeds=seeds, max_workers=1,
                                     progress=False)
            times["serial"].append(time.perf_counter() - t)
            t = time.perf_counter()
            local = raidforge.sweep(points, workloads, seeds=seeds, max_workers=a.workers,
                                    progress=False)
            times["local"].append(time.perf_counter() - t)
            t = time.perf_counter()
            dask = raidforge.sweep(points, workloads, client=client, seeds=seeds,
                                   progress=False)
            times["dask"].append(time.perf_counter() - t)
            pd.testing.assert_frame_equal(local, serial, check_exact=True)
            pd.testing.assert_frame_equal(dask, serial, check_exact=True)
    serial_s, local_s, dask_s = (min(times[k]) for k in ("serial", "local", "dask"))
    load_after = os.getloadavg()

    figures = {
        "runs": runs,
        "cores": os.cpu_count(),
        "workers": a.workers,
        "serial_s": serial_s,
        "local_processes_s": local_s,
        "dask_local_cluster_s": dask_s,
        "dask_cluster_startup_s": startup_s,
        "speedup_local": serial_s / local_s,
        "speedup_dask": serial_s / dask_s,
        "rounds": times,
        "rows_equal": True,
        "load_average_before": load_before,
        "load_average_after": load_after,
    }
    if a.json:
        print(json.dumps(figures, indent=2))
        return
    print(f"{runs} runs ({a.requests} requests each), {a.workers} workers, {os.cpu_count()} cores, "
          f"best of {max(1, a.repeat)}; "
          f"load average {load_before[0]:.2f} before, {load_after[0]:.2f} after")
    print(f"{'serial (this process)':<32} {serial_s:8.2f} s")
    print(f"{'local processes':<32} {local_s:8.2f} s  {serial_s / local_s:5.2f}x")
    print(f"{'dask LocalCluster':<32} {dask_s:8.2f} s  {serial_s / dask_s:5.2f}x"
          f"  (+{startup_s:.2f} s cluster start-up)")
    print("rows: all three sweeps equal, row for row")


if __name__ == "__main__":
    main()
