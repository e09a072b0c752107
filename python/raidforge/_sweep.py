"""Parameter sweeps: many simulations, one DataFrame row each, on local processes or Dask."""

from __future__ import annotations

import inspect
import itertools
import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Union

import pandas as pd

from ._core import RaidforgeError, progress_bar, sim

__all__ = ["sweep", "sweep_runs"]

Grid = Union[Mapping[str, Any], Sequence[Mapping[str, Any]]]


def _points(grid: Grid) -> List[Dict[str, Any]]:
    """A mapping is a Cartesian product (a list, tuple or range is the values to sweep, any
    other value is fixed); a sequence of mappings is the points themselves."""
    if isinstance(grid, Mapping):
        keys = list(grid)
        axes = [
            list(v) if isinstance(v, (list, tuple, range)) else [v] for v in grid.values()
        ]
        return [dict(zip(keys, combo)) for combo in itertools.product(*axes)]
    points = [dict(p) for p in grid]
    if not all(isinstance(p, dict) for p in points):
        raise TypeError("grid: a mapping of option -> values, or a sequence of mappings")
    return points


def sweep_runs(
    grid: Grid, workloads: Union[str, Iterable[str]], seeds: Iterable[int] = (0,)
) -> List[Dict[str, Any]]:
    """The runs of a sweep, in the order of its rows: every grid point, for every workload,
    for every seed. Each run is the keywords of one :func:`raidforge.sim` call."""
    if isinstance(workloads, str):
        workloads = [workloads]
    workloads = list(workloads)
    seeds = list(seeds)
    if not workloads:
        raise ValueError("sweep: no workloads")
    if not seeds:
        raise ValueError("sweep: no seeds")
    runs = []
    for point in _points(grid):
        for key in ("workload", "seed"):
            if key in point:
                raise ValueError(
                    f"sweep: {key!r} is swept by the {key}s argument, not the grid"
                )
        for w in workloads:
            for s in seeds:
                run = {**point, "workload": w, "seed": s}
                # A keyword sim() does not take fails here, not in a worker.
                _SIM.bind(**run)
                runs.append(run)
    return runs


_SIM = inspect.signature(sim)


def _flatten(d: Mapping[str, Any], prefix: str = "") -> Dict[str, Any]:
    """Scalars of a nested JSON object, keys joined by "."; lists (per-disk counts, the
    timeline) are left out of sweep rows (``raidforge.sim`` has them)."""
    out: Dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, Mapping):
            out.update(_flatten(v, f"{prefix}{k}."))
        elif not isinstance(v, list):
            out[f"{prefix}{k}"] = v
    return out


def _run_one(run: Mapping[str, Any]) -> Dict[str, Any]:
    """One sweep run: the simulation's JSON, flattened (runs in a worker process)."""
    result = sim(**run).to_dict()
    result.pop("workload", None)
    result.pop("seed", None)
    return _flatten(result)


def _progress(total: int, enabled: bool) -> Any:
    if not enabled:
        return None
    return progress_bar(total=total, desc="sweep", unit="run")


def sweep(
    grid: Grid,
    workloads: Union[str, Iterable[str]],
    client: Any = None,
    seeds: Iterable[int] = (0,),
    *,
    max_workers: Optional[int] = None,
    progress: bool = True,
) -> pd.DataFrame:
    """Simulate every combination of ``grid`` x ``workloads`` x ``seeds``: one DataFrame row
    per run, with the run's keywords (grid keys, ``workload``, ``seed``) first and then every
    scalar of its ``raidforge sim --json`` (nested keys joined by ".", e.g. ``rebuild.time_s``,
    ``response_ms.normal.p99``; a field named like a keyword, such as ``scheme``, is
    ``result.scheme``).

    ``grid``: a mapping of :func:`raidforge.sim` keywords to a list of values (a Cartesian
    product; a value that is not a list, tuple or range is fixed), or a list of mappings (the
    points themselves). Without ``client`` the runs go to local processes (``max_workers``,
    default every core; 1 runs them one after another in this process); with a
    ``dask.distributed.Client`` each run is one Dask task on the cluster's workers, which need
    this package installed. Rows come in run order whatever finishes first, and are identical
    to a serial sweep's, since a simulation is deterministic for its seed. ``progress`` shows a
    progress bar (tqdm: a widget in notebooks, a bar on the console).

    >>> import raidforge
    >>> df = raidforge.sweep({"scheme": "raid5", "disks": [4, 5], "member_size": "64M",
    ...                       "chunk": "64K", "disk": "st3500320as", "fail": 0},
    ...                      workloads="none", max_workers=1, progress=False)
    >>> df[["disks", "rebuild.time_s"]].shape
    (2, 2)
    """
    runs = sweep_runs(grid, workloads, seeds)
    results: List[Optional[Dict[str, Any]]] = [None] * len(runs)
    bar = _progress(len(runs), progress)

    def done(i: int, r: Dict[str, Any]) -> None:
        results[i] = r
        if bar is not None:
            bar.update(1)

    def failed(i: int, e: BaseException) -> RaidforgeError:
        return RaidforgeError(f"sweep run {i} {runs[i]}: {e}")

    try:
        if client is not None:
            _sweep_dask(client, runs, done, failed)
        elif max_workers == 1:
            for i, run in enumerate(runs):
                try:
                    r = _run_one(run)
                except RaidforgeError as e:
                    raise failed(i, e) from e
                done(i, r)
        else:
            workers = max_workers or os.cpu_count() or 1
            if workers < 1:
                raise ValueError(f"max_workers must be at least 1, not {max_workers}")
            with ProcessPoolExecutor(
                max_workers=min(workers, len(runs)) or 1, mp_context=_mp_context()
            ) as pool:
                futures = {pool.submit(_run_one, run): i for i, run in enumerate(runs)}
                for f in as_completed(futures):
                    i = futures[f]
                    try:
                        r = f.result()
                    except RaidforgeError as e:
                        for other in futures:
                            other.cancel()
                        raise failed(i, e) from e
                    done(i, r)
    finally:
        if bar is not None:
            bar.close()
    keys = list(runs[0])
    # A result field named like a keyword (scheme: "raid5 over 8 disks", disks) is kept as
    # "result.<name>" beside the keyword's column.
    rows = [
        {**run, **{(f"result.{k}" if k in run else k): v for k, v in r.items()}}  # type: ignore[union-attr]
        for run, r in zip(runs, results)
    ]
    df = pd.DataFrame(rows)
    rest = [c for c in df.columns if c not in keys]
    return df[[c for c in keys if c in df.columns] + rest]


def _mp_context() -> Any:
    """Worker processes forked from a server that imported raidforge once (so a sweep does not
    pay pandas' import per worker, and no thread of this process is forked); spawned where
    there is no fork server."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["raidforge"])
    return ctx


def _sweep_dask(client: Any, runs: List[Dict[str, Any]], done: Any, failed: Any) -> None:
    from distributed import as_completed as dask_completed

    futures = [client.submit(_run_one, run, pure=False) for run in runs]
    index = {f.key: i for i, f in enumerate(futures)}
    try:
        for f in dask_completed(futures):
            i = index[f.key]
            try:
                r = f.result()
            except RaidforgeError as e:
                raise failed(i, e) from e
            done(i, r)
    finally:
        client.cancel([f for f in futures if not f.done()])
