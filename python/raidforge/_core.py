"""The API: layouts, the simulator, traces, models, reproductions and pools.

Each function runs the Rust core behind the matching ``raidforge ... --json`` command and
returns its JSON as Python objects and pandas DataFrames. Keywords are the command's options
(see ``_cli``); ``None`` means the CLI's default.
"""

from __future__ import annotations

import copy
import functools
import json
import os
from typing import (
    Any,
    Callable,
    Dict,
    Iterator,
    List,
    Mapping,
    Optional,
    Sequence,
    Union,
)

import pandas as pd

from . import _cli, _native
from ._native import RaidforgeError

PathLike = Union[str, "os.PathLike[str]"]
#: A byte count: an int, or a string with a suffix as the CLI takes it ("64K", "10G").
Size = Union[int, str]
#: A member index as ``status()`` labels members: 1 or "m1" (the CLI's ``--member``).
Member = Union[int, str]


def _member(member: Member) -> int:
    """A member index from 1 or "m1"; anything else gets the CLI's message (or a TypeError)."""
    if isinstance(member, bool) or not isinstance(member, (int, str)):
        raise TypeError(f"a member index is an int or a string like 'm1', not {member!r}")
    if isinstance(member, int) and member >= 0:
        return member
    return _native.parse_member(str(member))


__all__ = [
    "RaidforgeError",
    "Layout",
    "SimResult",
    "Reproduction",
    "Pool",
    "layout",
    "layout_compare",
    "sim",
    "read_trace",
    "mttdl",
    "reproduce",
    "wipe",
]


def progress_bar(**kwargs: Any) -> Any:
    """A tqdm progress bar: a widget in a notebook that has ipywidgets, text otherwise."""
    try:
        from IPython import get_ipython

        in_kernel = get_ipython() is not None and "IPKernelApp" in get_ipython().config
        if in_kernel:
            import ipywidgets  # noqa: F401
            from tqdm.notebook import tqdm

            return tqdm(**kwargs)
    except ImportError:
        pass
    from tqdm import tqdm as text_tqdm

    return text_tqdm(**kwargs)


def _renamed(**old_to_new: str) -> Callable[[Any], Any]:
    """Accepts the old keyword names of options the CLI renamed (issue 22: one name per
    concept across commands), as the CLI accepts the old spellings; the signature shows the
    new names only."""

    def wrap(func: Any) -> Any:
        @functools.wraps(func)
        def call(*args: Any, **kwargs: Any) -> Any:
            for old, new in old_to_new.items():
                if old in kwargs:
                    if new in kwargs:
                        raise TypeError(
                            f"{func.__qualname__}() got both {old!r} and its new name {new!r}"
                        )
                    kwargs[new] = kwargs.pop(old)
            return func(*args, **kwargs)

        return call

    return wrap


def _run(command: str, func: str, kwargs: Mapping[str, Any]) -> Any:
    return json.loads(_native.run_json(command, _cli.argv(command, func, kwargs)))


class _Record:
    """JSON fields as attributes, plus ``to_dict()``."""

    _data: Dict[str, Any]

    def __getattr__(self, name: str) -> Any:
        data = self.__dict__.get("_data", {})
        if name in data:
            return data[name]
        raise AttributeError(f"{type(self).__name__} has no field {name!r}")

    def __dir__(self) -> List[str]:
        return sorted(set(super().__dir__()) | set(self._data))

    def to_dict(self) -> Dict[str, Any]:
        """A copy of the JSON object, exactly as the CLI prints it with --json."""
        return copy.deepcopy(self._data)


# ---------------------------------------------------------------------------------------------
# Layouts


class Layout(_Record):
    """A placement scheme: one cycle of its placement, and its measured properties.

    ``placement`` is the cycle as a DataFrame (stripe, unit, disk, offset, role); the fields of
    ``raidforge layout check --json`` (balance per disk, rebuild CoV, whether every stripe is on
    distinct disks, ...) are attributes. ``show`` and ``check`` are the two JSON objects.
    """

    def __init__(self, show: Dict[str, Any], check: Dict[str, Any]):
        self.show = show
        self.check = check
        self._data = {**show, **check}
        rows = [
            (s, u, unit["disk"], unit["offset"], unit["role"])
            for s, stripe in enumerate(show["stripes"])
            for u, unit in enumerate(stripe["units"])
        ]
        self.placement = pd.DataFrame(rows, columns=["stripe", "unit", "disk", "offset", "role"])

    def to_dict(self) -> Dict[str, Any]:
        """``{"show": <layout show --json>, "check": <layout check --json>}``."""
        return {"show": copy.deepcopy(self.show), "check": copy.deepcopy(self.check)}

    def __repr__(self) -> str:
        return (
            f"<Layout {self.show['scheme']}: {self.show['disks']} disks, "
            f"{len(self.show['stripes'])} stripes over {self.show['rows']} rows, "
            f"rebuild read CoV {self.check['rebuild_read_cov']:.4f}>"
        )

    def _repr_html_(self) -> str:
        return f"<p>{repr(self)[1:-1]}</p>" + self.placement.to_html()


def layout(
    scheme: str,
    *,
    disks: Optional[int] = None,
    width: Optional[int] = None,
    spares: Optional[int] = None,
    level: Optional[int] = None,
    group: Optional[int] = None,
    partitions: Optional[int] = None,
    weights: Optional[Sequence[int]] = None,
    order: Optional[str] = None,
    seed: Optional[int] = None,
    stripes: Optional[int] = None,
    volumes: Optional[str] = None,
    md_layout: Optional[str] = None,
    failed: Optional[Sequence[int]] = None,
    window: Optional[int] = None,
) -> Layout:
    """Where every chunk of one cycle of a layout lives, and the layout's measured properties.

    The same as ``raidforge layout show ... --json`` (the placement; with ``failed``, the
    layout after those disks were rebuilt) and ``raidforge layout check ... --json`` (the
    figures, attributes of the result).

    >>> import raidforge
    >>> l = raidforge.layout("raidplus", disks=5, width=3)
    >>> l.placement.head(3)
       stripe  unit  disk  offset  role
    0       0     0     1       0  data
    1       0     1     2       0  data
    2       0     2     3       0     p
    >>> l.stripes_on_distinct_disks, round(l.rebuild_read_cov, 3)
    (True, 0.0)
    """
    kw = dict(locals())
    window = kw.pop("window")
    show = _run("layout_show", "layout", kw)
    check = _run("layout_check", "layout", {**kw, "window": window})
    return Layout(show, check)


def layout_compare(
    *, disks: Optional[int] = None, width: Optional[int] = None, seed: Optional[int] = None
) -> pd.DataFrame:
    """Rebuild balance of RAID+, random and hash placement, RAID-50 and RAID-5C side by side:
    ``raidforge layout compare --json``, one row per scheme (``attrs``: disks, width, window).

    >>> import raidforge
    >>> df = raidforge.layout_compare(disks=13, width=4)
    >>> list(df["scheme"])[:1]
    ['raidplus']
    """
    v = _run("layout_compare", "layout_compare", dict(locals()))
    df = pd.DataFrame(v["schemes"])
    df.attrs = {k: v[k] for k in v if k != "schemes"}
    return df


# ---------------------------------------------------------------------------------------------
# The simulator


class SimResult(_Record):
    """One simulation: every field of ``raidforge sim --json`` as an attribute (``requests``,
    ``rebuild_time_s``, ``rebuild``, ``response_ms``, ``load_cov``, ...), ``to_dict()``, and
    the per-disk, per-phase and timeline tables as DataFrames."""

    def __init__(self, data: Dict[str, Any]):
        self._data = data

    @property
    def per_disk(self) -> pd.DataFrame:
        """Busy time and I/O counts per member disk (index: disk)."""
        df = pd.DataFrame(self._data["per_disk"])
        df.index.name = "disk"
        return df

    @property
    def phases(self) -> pd.DataFrame:
        """Response times (ms) per phase: normal, degraded, rebuilding, after (index: phase)."""
        df = pd.DataFrame.from_dict(self._data["response_ms"], orient="index")
        df.index.name = "phase"
        return df

    @property
    def timeline(self) -> pd.DataFrame:
        """Requests by arrival time: count, mean and p99 response per time bucket."""
        return pd.DataFrame(
            self._data["timeline"], columns=["start_s", "end_s", "count", "mean_ms", "p99_ms"]
        )

    def __repr__(self) -> str:
        d = self._data
        rebuild = d.get("rebuild_time_s")
        extra = f", rebuild {rebuild:.3f} s" if rebuild is not None else ""
        return (
            f"<SimResult {d['scheme']} x{d['disks']}: {d['requests']} requests, "
            f"{d['sim_time_s']:.3f} s simulated{extra}>"
        )


def sim(
    *,
    scheme: str,
    workload: str,
    disks: Optional[int] = None,
    width: Optional[int] = None,
    spares: Optional[int] = None,
    level: Optional[int] = None,
    group: Optional[int] = None,
    partitions: Optional[int] = None,
    weights: Optional[Sequence[int]] = None,
    order: Optional[str] = None,
    seed: Optional[int] = None,
    stripes: Optional[int] = None,
    volumes: Optional[str] = None,
    md_layout: Optional[str] = None,
    disk: Optional[str] = None,
    disk_at: Optional[Union[str, Sequence[str]]] = None,
    lse: Optional[Union[str, Sequence[str]]] = None,
    lse_random: Optional[str] = None,
    member_size: Optional[Size] = None,
    chunk: Optional[Size] = None,
    format: Optional[str] = None,
    lenient: bool = False,
    speedup: Optional[float] = None,
    loops: Optional[int] = None,
    requests: Optional[int] = None,
    duration: Optional[float] = None,
    fail: Optional[int] = None,
    fail_at: Optional[float] = None,
    rebuild_delay: Optional[Union[float, str]] = None,
    rebuild_order: Optional[str] = None,
    rebuild_policy: Optional[str] = None,
    zone_size: Optional[Size] = None,
    surrogate: Optional[str] = None,
    surrogate_latency: Optional[float] = None,
    surrogate_link: Optional[Size] = None,
    warmup_fraction: Optional[float] = None,
    idle_window: Optional[float] = None,
    recheck: Optional[float] = None,
    rebuild_window: Optional[int] = None,
    windows_in_flight: Optional[int] = None,
    memory_window: Optional[Size] = None,
    speed_min: Optional[Size] = None,
    speed_max: Optional[Size] = None,
    scheduler: Optional[str] = None,
    read_balance: bool = False,
    write_policy: Optional[str] = None,
    max_in_flight: Optional[int] = None,
    parity: Optional[str] = None,
    bpgl_capacity: Optional[int] = None,
    lazy_model: Optional[str] = None,
    merge: Optional[str] = None,
    merge_window_us: Optional[int] = None,
    merge_max_kib: Optional[int] = None,
    only_volume: Optional[int] = None,
    fold_volumes: bool = False,
    plot: Optional[PathLike] = None,
) -> SimResult:
    """Simulate an array of modelled drives: ``raidforge sim ... --json``.

    Every option of ``raidforge sim`` is a keyword (``--member-size`` is ``member_size``);
    ``None`` keeps the CLI's default. The simulation is deterministic for a seed. The GIL is
    released while it runs, so threads can run simulations side by side.

    >>> import raidforge
    >>> r = raidforge.sim(scheme="raid5", disks=5, disk="st3500320as", member_size="64M",
    ...                   chunk="64K", workload="random:read=0.7:size=4K:iops=100:requests=400",
    ...                   fail=1, fail_at=2, seed=1)
    >>> r.requests, r.rebuild["failed"]
    (400, 1)
    >>> int(r.phases.loc["normal", "count"]) > 0
    True

    Keywords (the CLI's help):
    """
    return SimResult(_run("sim", "sim", dict(locals())))


# ---------------------------------------------------------------------------------------------
# Traces

_TRACE_COLUMNS = ["time_ns", "offset_bytes", "len_bytes", "op", "volume"]


def _trace_frame(cols: Any, fmt: str, skipped: int) -> pd.DataFrame:
    times, offsets, lens, writes, volumes = cols
    df = pd.DataFrame(
        {
            "time_ns": pd.Series(times, dtype="uint64"),
            "offset_bytes": pd.Series(offsets, dtype="uint64"),
            "len_bytes": pd.Series(lens, dtype="uint64"),
            "op": pd.Categorical.from_codes(
                [1 if w else 0 for w in writes], categories=pd.Index(["read", "write"])
            ),
            "volume": pd.Series(volumes, dtype="uint32"),
        },
        columns=_TRACE_COLUMNS,
    )
    df.attrs = {"format": fmt, "skipped_lines": skipped}
    return df


def read_trace(
    path: PathLike,
    format: Optional[str] = None,
    chunksize: Optional[int] = None,
    *,
    lenient: bool = False,
    speedup: Optional[float] = None,
    loops: Optional[int] = None,
    requests: Optional[int] = None,
    merge: Optional[str] = None,
    merge_window_us: Optional[int] = None,
    merge_max_kib: Optional[int] = None,
    only_volume: Optional[int] = None,
    fold_volumes: bool = False,
) -> Union[pd.DataFrame, Iterator[pd.DataFrame]]:
    """The requests of a trace file as the simulator replays them: ``raidforge trace read``.

    Columns: ``time_ns`` (arrival, from the first request), ``offset_bytes``, ``len_bytes``,
    ``op`` ("read" or "write"), ``volume``; ``attrs["format"]`` is the format (detected from the
    first lines unless given) and ``attrs["skipped_lines"]`` the malformed lines skipped under
    ``lenient``. With ``chunksize``, an iterator of DataFrames of at most that many requests,
    for traces larger than memory (the file is read as the iterator advances).

    >>> import raidforge, tempfile, os
    >>> p = os.path.join(tempfile.mkdtemp(), "t.spc")
    >>> _ = open(p, "w").write("0,2048,4096,w,0.000000\\n1,4096,512,r,0.002500\\n")
    >>> df = raidforge.read_trace(p)
    >>> df[["time_ns", "offset_bytes", "op"]].values.tolist()
    [[0, 1048576, 'write'], [2500000, 2097152, 'read']]
    >>> df.attrs["format"]
    'spc'
    """
    if chunksize is not None and (not isinstance(chunksize, int) or chunksize <= 0):
        raise ValueError(f"chunksize must be a positive int, not {chunksize!r}")
    kw = dict(
        file=path, format=format, lenient=lenient, speedup=speedup, loops=loops, requests=requests,
        merge=merge, merge_window_us=merge_window_us, merge_max_kib=merge_max_kib,
        only_volume=only_volume, fold_volumes=fold_volumes,
    )
    reader = _native.TraceReader(_cli.argv("trace_read", "read_trace", kw))
    if chunksize is None:
        return _trace_frame(reader.read(2**63), reader.format, reader.skipped)

    def chunks() -> Iterator[pd.DataFrame]:
        while True:
            cols = reader.read(chunksize)
            if not cols[0]:
                return
            yield _trace_frame(cols, reader.format, reader.skipped)

    return chunks()


class TraceStats(_Record):
    """What a trace holds: the fields of ``raidforge trace stats --json`` as attributes
    (``requests``, ``read_share``, ``mean_iops``, ``peak_iops``, ``footprint_bytes``,
    ``sequential_share``, ``requests_merged``, ...), with the size histogram (``sizes``:
    ``le_bytes``, ``reads``, ``writes``) and requests over time (``rate``: ``start_s``,
    ``reads``, ``writes``) as DataFrames."""

    def __init__(self, data: Dict[str, Any]):
        self._data = data
        self.sizes = pd.DataFrame(data["sizes"], columns=["le_bytes", "reads", "writes"])
        self.rate = pd.DataFrame(data["rate"], columns=["start_s", "reads", "writes"])

    def __repr__(self) -> str:
        d = self._data
        return (
            f"TraceStats({d['file']!r}, {d['format']}: {d['requests']} requests, "
            f"{100 * d['read_share']:.1f} % reads, {d['mean_iops']:.1f} IOPS mean)"
        )


def trace_stats(
    path: PathLike,
    format: Optional[str] = None,
    *,
    lenient: bool = False,
    requests: Optional[int] = None,
    merge: Optional[str] = None,
    merge_window_us: Optional[int] = None,
    merge_max_kib: Optional[int] = None,
    only_volume: Optional[int] = None,
    fold_volumes: bool = False,
    plot: Optional[PathLike] = None,
) -> TraceStats:
    """Summarise a trace in one pass: ``raidforge trace stats --json`` (requests and bytes by
    direction, read share, size histogram, requests over time, footprint, sequential share),
    read as :func:`sim` replays it (detection, decompression, block-layer merging).

    >>> import raidforge, tempfile, os
    >>> p = os.path.join(tempfile.mkdtemp(), "t.spc")
    >>> _ = open(p, "w").write("0,2048,4096,w,0.000000\\n0,2056,4096,w,0.002500\\n")
    >>> s = raidforge.trace_stats(p)
    >>> s.requests, s.writes, s.sequential_share, s.footprint_bytes
    (2, 2, 0.5, 8192)
    >>> s.sizes.values.tolist()
    [[4096, 0, 2]]
    """
    kw = dict(
        file=path, format=format, lenient=lenient, requests=requests, merge=merge,
        merge_window_us=merge_window_us, merge_max_kib=merge_max_kib, only_volume=only_volume,
        fold_volumes=fold_volumes, plot=plot,
    )
    return TraceStats(_run("trace_stats", "trace_stats", kw))


# ---------------------------------------------------------------------------------------------
# Models


def mttdl(
    *,
    mttf_hours: Optional[float] = None,
    mttr_hours: Optional[float] = None,
    disks: Optional[Union[int, str, Sequence[int]]] = None,
    bpgl_fill_hours: Optional[float] = None,
    bpgl_drain_hours: Optional[float] = None,
    bpgl_flush_hours: Optional[float] = None,
    width: Optional[int] = None,
    plot: Optional[PathLike] = None,
) -> pd.DataFrame:
    """Mean time to data loss (hours) of RAID5, RAID6, RAID6 with lazy parity update, RAID-50
    and RAID+ against the number of disks: ``raidforge model mttdl --json``, one row per
    number of disks; ``attrs`` holds the parameters. ``disks``: 8, "4..16", or a list.

    >>> import raidforge
    >>> df = raidforge.mttdl(disks=[4, 8])
    >>> list(df["disks"]), bool((df["raid6_h"] > df["raid5_h"]).all())
    ([4, 8], True)
    """
    kw = dict(locals())
    if isinstance(disks, (list, tuple, range)):
        kw["disks"] = ",".join(str(d) for d in disks)
    v = _run("model_mttdl", "mttdl", kw)
    df = pd.DataFrame(v["rows"])
    df.attrs = {k: v[k] for k in v if k != "rows"}
    return df


def advise(
    *,
    workload: str,
    disks: int,
    disk: Optional[str] = None,
    ssds: Optional[int] = None,
    ssd: Optional[str] = None,
    survive: Optional[int] = None,
    format: Optional[str] = None,
    capacity: Optional[str] = None,
    max_rebuild_hours: Optional[float] = None,
    p99_normal_ms: Optional[float] = None,
    p99_rebuild_ms: Optional[float] = None,
    member_size: Optional[str] = None,
    chunk: Optional[str] = None,
    loops: Optional[int] = None,
    speed_min: Optional[str] = None,
    speed_max: Optional[str] = None,
    rebuild_window: Optional[int] = None,
    mttf_hours: Optional[float] = None,
    budget: Optional[float] = None,
    jobs: Optional[int] = None,
    svg: Optional[PathLike] = None,
    html: Optional[PathLike] = None,
) -> pd.DataFrame:
    """Which layout for this workload and these disks: ``raidforge advise --json``, one row per
    candidate simulated (usable share, whole-drive rebuild hours, MTTDL, p50/p99 per phase,
    Pareto front, constraints met); ``attrs`` holds the rest (``recommended``, ``reason``,
    ``not_simulated``, ...). ``workload``: a trace file or a synthetic spec, as ``sim``.
    """
    kw = dict(locals())
    v = _run("advise", "advise", kw)
    df = pd.json_normalize(v["candidates"])
    df.attrs = {k: v[k] for k in v if k != "candidates"}
    return df


# ---------------------------------------------------------------------------------------------
# Reproductions


class Reproduction(_Record):
    """One seed paper's reproduction: the fields of its ``raidforge reproduce --json`` report
    (``name``, ``source``, ``quick``, ``runtime_s``, ``experiments``) as attributes, each
    experiment's rows as a DataFrame (``tables[id]``), every claim in ``claims`` (``note``:
    why a claim the run does not uphold fails here), and ``ok`` (every claim held or carries
    that reason, as the CLI's exit status says)."""

    def __init__(self, data: Dict[str, Any]):
        self._data = data
        self.tables: Dict[str, pd.DataFrame] = {}
        claims = []
        for e in data["experiments"]:
            df = pd.DataFrame(e["rows"], columns=["label", "published", "ours", "unit", "ratio"])
            df["note"] = [r.get("note") for r in e["rows"]]
            df.attrs = {"title": e["title"], "config": e["config"], "notes": e["notes"]}
            self.tables[e["id"]] = df
            claims += [{"experiment": e["id"], "note": None, **c} for c in e["claims"]]
        self.claims = pd.DataFrame(
            claims, columns=["experiment", "text", "holds", "evidence", "note"]
        )
        self.ok = all(c["holds"] or c["note"] is not None for c in claims)

    def __repr__(self) -> str:
        held = int(self.claims["holds"].sum()) if len(self.claims) else 0
        return (
            f"<Reproduction {self._data['name']}{' (quick)' if self._data['quick'] else ''}: "
            f"{len(self.tables)} experiments ({', '.join(self.tables)}), "
            f"claims {held}/{len(self.claims)}>"
        )


def reproduce(
    name: str,
    quick: bool = True,
    *,
    traces: Optional[PathLike] = None,
    out: Optional[PathLike] = None,
    progress: Union[bool, Callable[[str], None]] = False,
) -> Union[Reproduction, List[Reproduction]]:
    """Regenerate a seed paper's tables and figures: ``raidforge reproduce NAME --json``.

    ``name``: s2raid, raidplus, raid4s, raide, raidh, lpu, ido (a list of all of them for
    "all").
    ``out``: also write NAME.md, NAME.json and the SVG plots there, as the CLI does.
    ``progress``: True prints the CLI's progress lines; a callable receives them. The GIL is
    released while it runs.

    >>> import raidforge
    >>> r = raidforge.reproduce("raidh")
    >>> r.ok, "table6.1" in r.tables
    (True, True)
    """
    if progress is True:
        callback: Optional[Callable[[str], None]] = lambda line: print(line, flush=True)
    elif progress is False or progress is None:
        callback = None
    else:
        callback = progress
    text, _ok = _native.reproduce_json(
        name,
        bool(quick),
        None if traces is None else os.fspath(traces),
        None if out is None else os.fspath(out),
        callback,
    )
    reports = [Reproduction(r) for r in json.loads(text)["reports"]]
    return reports if name == "all" else reports[0]


# ---------------------------------------------------------------------------------------------
# Pools


def wipe(*members: PathLike) -> List[str]:
    """Erases the raidforge superblock of each member (``raidforge wipe``), so that a member
    file or device no longer needed can be reused (``Pool.replace`` and ``Pool.create`` refuse
    a path that is still another pool's member). Refused, and the rest left alone, on the
    first path that is not a raidforge member or that a running process holds. Returns the
    uuid of the pool each one belonged to."""
    return [_native.wipe(os.fspath(m)) for m in members]


class Pool:
    """A raidforge pool over member files or block devices, open in this process: what
    ``raidforge create``, ``assemble``, ``io read/write``, ``fail``, ``replace``, ``re-add``,
    ``rebuild``, ``verify``, ``flush`` and ``status`` do, with the same refusals (``fail`` of a
    member the pool cannot lose needs ``force=True``; ``wipe`` blanks a member no longer
    needed). Its members stay locked against other processes (the CLI
    included) until ``close()``; use it as a context manager.

    >>> import raidforge, tempfile, os
    >>> d = tempfile.mkdtemp()
    >>> members = [os.path.join(d, f"m{i}.img") for i in range(4)]
    >>> with raidforge.Pool.create(os.path.join(d, "p.json"), scheme="raid5", disks=4,
    ...                            members=members, member_size="16M") as p:
    ...     p.write(0, b"x" * 65536)
    ...     _ = p.fail(2)
    ...     p.read(0, 4)
    ...     p.replace(2, os.path.join(d, "n2.img"))["state"]
    ...     p.rebuild()["state"]
    b'xxxx'
    'rebuilding'
    'clean'
    """

    def __init__(self, native: Any, path: PathLike):
        self._native = native
        self.path = os.fspath(path)
        #: What ``assemble`` noted (an adopted MD array's settings), as the CLI prints it.
        self.notes: List[str] = []

    @classmethod
    @_renamed(size="member_size")
    def create(
        cls,
        path: PathLike,
        *,
        scheme: str,
        members: Sequence[PathLike],
        disks: Optional[int] = None,
        width: Optional[int] = None,
        spares: Optional[int] = None,
        level: Optional[int] = None,
        group: Optional[int] = None,
        partitions: Optional[int] = None,
        weights: Optional[Sequence[int]] = None,
        order: Optional[str] = None,
        seed: Optional[int] = None,
        stripes: Optional[int] = None,
        volumes: Optional[str] = None,
        md_layout: Optional[str] = None,
        member_size: Optional[Size] = None,
        chunk: Optional[Size] = None,
        emulate: Optional[str] = None,
        force: bool = False,
        direct: bool = False,
        parity: Optional[str] = None,
        bpgl_capacity: Optional[int] = None,
        checksums: Optional[str] = None,
        write_hole: Optional[str] = None,
        journal_size: Optional[Size] = None,
        surrogate: Optional[PathLike] = None,
        zone_size: Optional[Size] = None,
        hot_spares: Optional[Sequence[PathLike]] = None,
        metadata: Optional[str] = None,
    ) -> "Pool":
        """``raidforge create PATH ...``: every option a keyword (``--member`` is ``members``,
        a list); the pool is returned open. ``size=`` is still taken for ``member_size=``."""
        kw = dict(locals())
        kw.pop("cls")
        kw["pool"] = kw.pop("path")
        native = _native.Pool.create(_cli.argv("create", "Pool.create", kw))
        return cls(native, path)

    @classmethod
    def open(cls, path: PathLike) -> "Pool":
        """Opens the pool of a descriptor file (as every pool command does)."""
        return cls(_native.Pool.open(os.fspath(path)), path)

    @classmethod
    def assemble(
        cls,
        path: PathLike,
        *,
        members: Sequence[PathLike],
        emulate: Optional[str] = None,
        force: bool = False,
    ) -> "Pool":
        """``raidforge assemble PATH --member ...``: (re)writes the descriptor at ``path``
        from the members' superblocks (any order; a Linux MD array's members are adopted) and
        returns the pool open. A descriptor of another pool at ``path`` is refused and left
        as it is; this pool's own keeps what the superblocks do not hold (its emulation).
        ``force``: start an unclean pool that lacks members its unclean regions need (the
        CLI's ``--force``). The notes the CLI prints are in ``notes``."""
        native, notes = _native.Pool.assemble(
            os.fspath(path), [os.fspath(m) for m in members], emulate, bool(force)
        )
        pool = cls(native, path)
        pool.notes = list(notes)
        return pool

    def status(self) -> Dict[str, Any]:
        """``raidforge status --json``."""
        return json.loads(self._native.status())

    def read(self, offset: int, length: int) -> bytes:
        """``length`` bytes of the pool at ``offset`` (``raidforge io read``)."""
        return self._native.read(offset, length)

    def write(self, offset: int, data: bytes) -> None:
        """Writes ``data`` into the pool at ``offset`` (``raidforge io write``)."""
        self._native.write(offset, bytes(data))

    def fail(self, member: Member, *, force: bool = False) -> Dict[str, Any]:
        """Marks a member failed (``raidforge fail``); returns the status.

        Refused with a :class:`RaidforgeError` when the pool would lose data (it survives no
        failure of that member now: ``status()["fault_tolerance"]``), as ``raidforge fail``
        refuses it without ``--force``; ``force=True`` fails it anyway. ``member``: 1 or
        "m1", as ``status()`` labels members."""
        return json.loads(self._native.fail(_member(member), bool(force)))

    def replace(self, member: Member, with_path: PathLike) -> Dict[str, Any]:
        """Puts a new, empty member in the place of a failed one (``raidforge replace``);
        returns the status. A path that holds data or another pool's member is refused
        (``raidforge.wipe`` blanks a member that is no longer needed)."""
        return json.loads(self._native.replace(_member(member), os.fspath(with_path)))

    def re_add(self, member: Member) -> Dict[str, Any]:
        """Lets a failed member whose file came back unchanged rejoin without a rebuild
        (``raidforge re-add``, as ``mdadm --re-add``): every stripe is read with it back and
        must agree, or it is refused and its file left alone. Returns the status, with
        ``"stripes_checked"`` added."""
        checked, status = self._native.re_add(_member(member))
        return {**json.loads(status), "stripes_checked": checked}

    @_renamed(order="rebuild_order", parallel="rebuild_window")
    def rebuild(
        self,
        rebuild_order: str = "parallel",
        rebuild_window: int = 8,
        speed_min: Optional[Size] = None,
        speed_max: Optional[Size] = None,
        progress: Union[bool, Callable[[Dict[str, Any]], None]] = False,
    ) -> Dict[str, Any]:
        """Rebuilds lost data into spares or spare space, or copies it back to a replacement
        (``raidforge rebuild`` without a rebuild policy, its ``--rebuild-order``,
        ``--rebuild-window``, ``--speed-min`` and ``--speed-max``; ``order=`` and ``parallel=``
        are still taken, the old names); returns the summary its ``--json`` prints last. ``progress``: a callable receiving each progress record (cycles_done,
        cycles_total, bytes_written, elapsed_s, ...), or True for a progress bar. The GIL is
        released while it runs (the callback takes it back)."""
        bar = None
        callback: Optional[Callable[[str], None]] = None
        if progress is True:
            bar = progress_bar(desc="rebuild", unit="cycle")

            def callback(line: str) -> None:
                pr = json.loads(line)
                bar.total = pr["cycles_total"]
                bar.n = pr["cycles_done"]
                bar.refresh()

        elif callable(progress):
            user = progress

            def callback(line: str) -> None:
                user(json.loads(line))

        try:
            return json.loads(
                self._native.rebuild(
                    rebuild_order,
                    rebuild_window,
                    None if speed_min is None else str(speed_min),
                    None if speed_max is None else str(speed_max),
                    callback,
                )
            )
        finally:
            if bar is not None:
                bar.close()

    def verify(self) -> Dict[str, Any]:
        """Reads every stripe and checks parity and mirrors: ``raidforge verify --json``."""
        return json.loads(self._native.verify())

    def flush(self) -> int:
        """Recomputes every deferred parity now (``raidforge flush``); returns the stripes."""
        return self._native.flush()

    def close(self) -> None:
        """Syncs and closes the pool (marks it clean, unlocks the members)."""
        self._native.close()

    @property
    def closed(self) -> bool:
        return self._native.closed

    def __enter__(self) -> "Pool":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Pool {self.path}{' (closed)' if self.closed else ''}>"


sim.__doc__ = (sim.__doc__ or "") + "\n" + _cli.doc_table("sim") + "\n"
