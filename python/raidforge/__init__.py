"""raidforge from Python: the same core as the ``raidforge`` command line.

Layouts (:func:`layout`, :func:`layout_compare`), the disk-array simulator (:func:`sim`), the
trace readers (:func:`read_trace`, :func:`trace_stats`), the reliability models (:func:`mttdl`), layout advice
(:func:`advise`), the seed papers'
reproductions (:func:`reproduce`), pools on files or block devices (:class:`Pool`,
:func:`wipe`) and parameter sweeps on local cores or a Dask cluster (:func:`sweep`). Every call runs the Rust
core behind ``raidforge ... --json`` (never a reimplementation) and gives what that command
prints for the same input; errors raise :class:`RaidforgeError` with the CLI's message.

>>> import raidforge
>>> r = raidforge.sim(scheme="raid5", disks=8, disk="st32000645ns", member_size="1G",
...                   chunk="1M", workload="none", fail=0)
>>> round(r.rebuild_time_s, 2) > 0
True
"""

from ._core import (
    Layout,
    Pool,
    RaidforgeError,
    Reproduction,
    SimResult,
    TraceStats,
    advise,
    layout,
    layout_compare,
    mttdl,
    read_trace,
    reproduce,
    sim,
    trace_stats,
    wipe,
)
from ._sweep import sweep, sweep_runs

__version__ = "0.1.0"

__all__ = [
    "Layout",
    "Pool",
    "RaidforgeError",
    "Reproduction",
    "SimResult",
    "TraceStats",
    "advise",
    "layout",
    "layout_compare",
    "mttdl",
    "read_trace",
    "reproduce",
    "sim",
    "sweep",
    "sweep_runs",
    "trace_stats",
    "wipe",
]
