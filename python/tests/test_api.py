"""Every function of the package against the CLI's --json for the same input."""

from __future__ import annotations

import doctest
import inspect
import json
import os
import threading
from pathlib import Path

import pandas as pd
import pytest

import raidforge
from conftest import REPO
from raidforge import RaidforgeError, _cli, _core

# ---------------------------------------------------------------------------------------------
# Layouts

LAYOUTS = [
    ("raid5", dict(disks=5), ["--disks", "5"]),
    ("raid6", dict(disks=7, spares=1, failed=[2]), ["--disks", "7", "--spares", "1", "--failed", "2"]),
    ("raidplus", dict(disks=5, width=3, failed=[0]), ["--disks", "5", "--width", "3", "--failed", "0"]),
    ("s2raid5", dict(disks=9, group=3, partitions=3), ["--disks", "9", "--group", "3", "--partitions", "3"]),
    ("raidh", dict(weights=[0, 0, 1, 1, 2]), ["--weights", "0,0,1,1,2"]),
    ("hash", dict(disks=13, width=4, seed=3, window=20), ["--disks", "13", "--width", "4", "--seed", "3"]),
    ("rm2", dict(disks=8), ["--disks", "8"]),
]


@pytest.mark.parametrize("scheme,kw,args", LAYOUTS, ids=[s for s, _, _ in LAYOUTS])
def test_layout_equals_show_and_check(cli, scheme, kw, args):
    lay = raidforge.layout(scheme, **kw)
    assert lay.show == cli.json("layout", "show", "--scheme", scheme, *args, "--json")
    window = ["--window", str(kw["window"])] if "window" in kw else []
    assert lay.check == cli.json("layout", "check", "--scheme", scheme, *args, *window, "--json")
    # The placement table is the show JSON's units, stripe by stripe.
    units = [u for s in lay.show["stripes"] for u in s["units"]]
    assert lay.placement[["disk", "offset", "role"]].to_dict("records") == units
    assert list(lay.placement.columns) == ["stripe", "unit", "disk", "offset", "role"]
    # Check figures are attributes.
    assert lay.rebuild_read_cov == lay.check["rebuild_read_cov"]
    assert lay.stripes_on_distinct_disks is True


def test_layout_compare_equals_cli(cli):
    df = raidforge.layout_compare(disks=13, width=4, seed=2)
    v = cli.json("layout", "compare", "--disks", "13", "--width", "4", "--seed", "2", "--json")
    assert df.to_dict("records") == v["schemes"]
    assert df.attrs == {"disks": 13, "width": 4, "window": 156}


# ---------------------------------------------------------------------------------------------
# The simulator

MSR = (
    "128166385295514663,hm,0,Write,9056014336,2048,2833\n"
    "128166385295514878,hm,0,Sideways,11855351808,512,2617\n"
    "128166385295524663,hm,1,Read,4096,4096,100\n"
    "128166385295534663,hm,1,Write,65536,8192,100\n"
)

SIMS = {
    "raid5-offline": dict(
        scheme="raid5", disks=8, disk="st32000645ns", member_size="1G", chunk="1M",
        workload="none", fail=0,
    ),
    "raidplus-online": dict(
        scheme="raidplus", disks=7, width=3, disk="st3500320as", member_size="256M",
        chunk="64K", workload="random:read=0.7:size=4K:iops=300:requests=1500", fail=2,
        fail_at=1.5, seed=4, scheduler="sptf", speed_max="100M",
    ),
    "rm2-lazy": dict(
        scheme="rm2", disks=8, disk="st3500320as", member_size="128M", chunk="64K",
        workload="random:read=0:size=4K:qd=8:requests=600", parity="lazy", bpgl_capacity=500,
    ),
    "raid6-lse-ido": dict(
        scheme="raid6", disks=6, disk="wd1600aajs", member_size="96M", chunk="64K",
        workload="random:read=0.5:size=8K:iops=200:requests=800", fail=1, warmup_fraction=0.3,
        rebuild_policy="ido", zone_size="6M", lse=["2:1M:64K", "3:5M:4K"], seed=9,
        disk_at=["5=x25-e"],
    ),
}


def sim_args(kw):
    """The CLI arguments of sim() keywords (the mapping the package uses, tested below)."""
    return _cli.argv("sim", "sim", kw)


@pytest.mark.parametrize("name", list(SIMS))
def test_sim_equals_cli_json(cli, name):
    kw = SIMS[name]
    r = raidforge.sim(**kw)
    assert r.to_dict() == cli.json("sim", *sim_args(kw), "--json")
    # Attributes, and the tables built from the same JSON.
    assert r.requests == r.to_dict()["requests"]
    assert r.per_disk.to_dict("records") == r.to_dict()["per_disk"]
    assert r.per_disk.index.name == "disk" and len(r.per_disk) == r.disks
    assert r.phases.loc["normal"].to_dict() == r.to_dict()["response_ms"]["normal"]
    assert r.timeline.to_dict("records") == r.to_dict()["timeline"]


def test_sim_argument_mapping_is_the_cli_spelling():
    assert sim_args(dict(scheme="raid5", member_size="1G", lenient=True, lse=["1:0:4K", "2:0:4K"],
                         weights=[0, 1], fail=None, disk_at="4=x25-e")) == [
        "--scheme", "raid5", "--member-size", "1G", "--lenient", "--lse", "1:0:4K",
        "--lse", "2:0:4K", "--weights", "0,1", "--disk-at", "4=x25-e",
    ]


def test_sim_of_a_trace_file_and_its_plot(cli, tmp_path):
    trace = tmp_path / "t.csv"
    trace.write_text(MSR)
    kw = dict(scheme="raid5", disks=4, member_size="64M", workload=str(trace), format="msr",
              lenient=True, loops=3, plot=tmp_path / "py.svg")
    r = raidforge.sim(**kw)
    v = cli.json("sim", *sim_args({**kw, "plot": tmp_path / "cli.svg"}), "--json")
    assert r.to_dict() == v
    assert (r.requests, r.requests_skipped) == (9, 3)
    assert (tmp_path / "py.svg").read_text() == (tmp_path / "cli.svg").read_text()


# ---------------------------------------------------------------------------------------------
# Traces


def test_read_trace_equals_trace_read(cli, tmp_path):
    trace = tmp_path / "t.csv"
    trace.write_text(MSR)
    df = raidforge.read_trace(trace, format="msr", lenient=True, loops=2, speedup=2)
    v = cli.json_lines("trace", "read", trace, "--format", "msr", "--lenient", "--loops", "2",
                       "--speedup", "2", "--json")
    assert df.to_dict("records") == v
    assert len(df) == 6
    assert df.attrs == {"format": "msr", "skipped_lines": 2}
    assert list(df.columns) == ["time_ns", "offset_bytes", "len_bytes", "op", "volume"]
    # In chunks: the same requests, at most chunksize a frame.
    chunks = list(raidforge.read_trace(trace, format="msr", lenient=True, loops=2, speedup=2,
                                       chunksize=4))
    assert [len(c) for c in chunks] == [4, 2]
    assert pd.concat(chunks, ignore_index=True).to_dict("records") == v


def test_trace_stats_equals_trace_stats_json(cli, tmp_path):
    # The real blkparse trace in the repository, merged as the block layer would, with its plot.
    trace = REPO / "data" / "traces" / "loop-ext4.blkparse.xz"
    s = raidforge.trace_stats(trace, plot=tmp_path / "s.svg")
    v = cli.json("trace", "stats", trace, "--json")
    assert s.to_dict() == v
    assert s.requests_merged > 0 and s.requests < s.requests_in_trace
    assert (tmp_path / "s.svg").read_text().startswith("<svg")
    assert int(s.sizes[["reads", "writes"]].to_numpy().sum()) == s.requests
    assert int(s.rate[["reads", "writes"]].to_numpy().sum()) == s.requests
    # Unmerged, every queued request is one request.
    off = raidforge.trace_stats(trace, merge="off")
    assert off.to_dict() == cli.json("trace", "stats", trace, "--merge", "off", "--json")
    assert off.requests == s.requests_in_trace and off.requests_merged == 0
    with pytest.raises(RaidforgeError, match="merge"):
        raidforge.trace_stats(trace, merge="sometimes")


def test_read_trace_detects_the_format_and_names_bad_lines(cli, tmp_path):
    spc = tmp_path / "t.spc"
    spc.write_text("0,2048,4096,w,0.000000\n1,4096,512,r,0.002500\n")
    df = raidforge.read_trace(spc, requests=1)
    assert df.to_dict("records") == cli.json_lines("trace", "read", spc, "--requests", "1", "--json")
    assert df.attrs["format"] == "spc"
    bad = tmp_path / "t.csv"
    bad.write_text(MSR)
    with pytest.raises(RaidforgeError) as e:
        raidforge.read_trace(bad, format="msr")
    assert str(e.value) == cli.error("trace", "read", bad, "--format", "msr")
    assert f"{bad}:2" in str(e.value)
    with pytest.raises(ValueError, match="chunksize"):
        raidforge.read_trace(spc, chunksize=0)


# ---------------------------------------------------------------------------------------------
# Models and reproductions


def test_mttdl_equals_cli(cli):
    df = raidforge.mttdl(disks=[4, 8, 16], mttf_hours=1e5, width=4)
    v = cli.json("model", "mttdl", "--disks", "4,8,16", "--mttf-hours", "100000", "--width", "4",
                 "--json")
    assert df.to_dict("records") == v["rows"]
    assert df.attrs == {k: v[k] for k in v if k != "rows"}
    assert raidforge.mttdl(disks="4..6").to_dict("records") == cli.json(
        "model", "mttdl", "--disks", "4..6", "--json")["rows"]


def test_advise_equals_cli(cli):
    trace = Path(__file__).resolve().parents[2] / "data" / "traces" / "websearch-head.mqsim"
    df = raidforge.advise(workload=str(trace), disks=8, member_size="256M", loops=1)
    v = cli.json("advise", "--workload", trace, "--disks", "8", "--member-size", "256M",
                 "--loops", "1", "--json")
    timeless = lambda rows: [{k: r[k] for k in r if k != "wall_s"} for r in rows]
    ours = pd.json_normalize(v["candidates"]).to_dict("records")
    assert timeless(df.to_dict("records")) == timeless(ours)
    assert df.attrs["recommended"] == v["recommended"]
    assert df.attrs["reason"] == v["reason"]
    assert len(df) >= 8 and df["pareto_front"].any()
    with pytest.raises(TypeError, match="unexpected keyword"):
        raidforge.advise(workload=str(trace), disks=8, drives=3)


def without_runtime(report):
    return {k: v for k, v in report.items() if k != "runtime_s"}


def test_reproduce_equals_cli(cli, tmp_path):
    lines = []
    r = raidforge.reproduce("raidplus", quick=True, out=tmp_path / "py", progress=lines.append)
    v = cli.json("reproduce", "raidplus", "--quick", "--json", "--out", tmp_path / "cli")
    assert without_runtime(r.to_dict()) == without_runtime(v["reports"][0])
    assert r.ok and isinstance(r, raidforge.Reproduction)
    assert any(line.startswith("fig10a") for line in lines)
    # The tables are the experiments' rows.
    fig = next(e for e in v["reports"][0]["experiments"] if e["id"] == "fig10a")
    assert r.tables["fig10a"]["ours"].tolist() == [row["ours"] for row in fig["rows"]]
    assert len(r.claims) == sum(len(e["claims"]) for e in v["reports"][0]["experiments"])
    # The files written are the CLI's (the JSON up to its run time).
    py = sorted(p.name for p in (tmp_path / "py").iterdir())
    assert py == sorted(p.name for p in (tmp_path / "cli").iterdir())
    for name in py:
        if name.endswith(".svg"):
            assert (tmp_path / "py" / name).read_text() == (tmp_path / "cli" / name).read_text()
    load = lambda d: without_runtime(json.loads((tmp_path / d / "raidplus.json").read_text()))  # noqa: E731
    assert load("py") == load("cli")


def test_reproduce_errors(cli):
    with pytest.raises(RaidforgeError) as e:
        raidforge.reproduce("nope")
    assert str(e.value) == cli.error("reproduce", "nope", "--out", "/nonexistent")

    def boom(line):
        raise KeyError("stop")

    with pytest.raises(KeyError):
        raidforge.reproduce("raidh", progress=boom)


# ---------------------------------------------------------------------------------------------
# Errors


@pytest.mark.parametrize(
    "kw,args",
    [
        (dict(scheme="nope", workload="none"), ["--scheme", "nope", "--workload", "none"]),
        (dict(scheme="raid5", disks="x", workload="none"), ["--scheme", "raid5", "--disks", "x", "--workload", "none"]),
        (dict(scheme="raid5", disks=4, workload="none", disk="floppy"), ["--scheme", "raid5", "--disks", "4", "--workload", "none", "--disk", "floppy"]),
        (dict(scheme="raid5", disks=4, workload="/no/such/trace"), ["--scheme", "raid5", "--disks", "4", "--workload", "/no/such/trace"]),
        (dict(scheme="raid5", disks=4, workload="none", warmup_fraction=2), ["--scheme", "raid5", "--disks", "4", "--workload", "none", "--warmup-fraction", "2"]),
    ],
)
def test_bad_arguments_raise_the_cli_message(cli, kw, args):
    with pytest.raises(RaidforgeError) as e:
        raidforge.sim(**kw)
    assert str(e.value) == cli.error("sim", *args)
    assert str(e.value)


def test_bad_keywords_are_type_errors():
    with pytest.raises(TypeError, match="unexpected keyword argument 'dsks'"):
        raidforge.sim(scheme="raid5", dsks=4, workload="none")
    with pytest.raises(TypeError, match="switch"):
        raidforge.sim(scheme="raid5", disks=4, workload="none", lenient="yes")
    with pytest.raises(TypeError, match="unexpected keyword argument 'wdith'"):
        _cli.argv("layout_show", "layout", {"wdith": 3})
    with pytest.raises(RaidforgeError, match="unknown scheme|scheme"):
        raidforge.layout("nope", disks=4)
    with pytest.raises(RaidforgeError, match="--disks"):
        raidforge.layout_compare(disks=2)


# ---------------------------------------------------------------------------------------------
# Pools


def normalise(status, root):
    """A status with what differs between two pools made alike (uuid, paths)."""
    s = json.loads(json.dumps(status).replace(str(root), "ROOT"))
    s["uuid"] = "UUID"
    return s


def test_pool_operations_equal_the_cli(cli, tmp_path):
    py, sh = tmp_path / "py", tmp_path / "sh"
    py.mkdir()
    sh.mkdir()
    members = [f"m{i}.img" for i in range(4)]
    create_kw = dict(scheme="raid5", disks=4, member_size="8M", chunk="64K", checksums="on")
    p = raidforge.Pool.create(py / "p.json", members=[py / m for m in members], **create_kw)
    created = p.status()
    v = cli.json("create", sh / "p.json", *_cli.argv("create", "Pool.create", create_kw),
                 *[a for m in members for a in ("--member", sh / m)], "--json")
    assert normalise(created, py) == normalise(v, sh)

    data = bytes(range(256)) * 1024
    p.write(4096, data)
    assert p.read(4096, len(data)) == data
    with pytest.raises(RaidforgeError, match="in use by another"):
        raidforge.Pool.open(py / "p.json")  # locked while this process has it open
    failed = p.fail(1)
    assert failed["state"] == "degraded"
    assert p.read(4096, len(data)) == data  # degraded read
    p.replace(1, py / "n1.img")
    progress = []
    summary = p.rebuild(rebuild_window=2, progress=progress.append)
    assert summary["state"] == "clean" and summary["done"] is True
    assert progress and progress[-1]["cycles_done"] == progress[-1]["cycles_total"]
    assert p.verify()["inconsistent"] == []
    p.close()
    assert p.closed
    with pytest.raises(RaidforgeError, match="closed"):
        p.status()

    # The CLI sees what Python did.
    assert cli.json("status", py / "p.json", "--json")["state"] == "clean"
    out = tmp_path / "back.bin"
    assert cli.run("io", "read", py / "p.json", "--offset", "4096", "--length", len(data),
                   "--output", out).returncode == 0
    assert out.read_bytes() == data
    assert cli.run("verify", py / "p.json").returncode == 0
    with raidforge.Pool.open(py / "p.json") as q:
        assert q.status()["members"][1]["path"].endswith("n1.img")
        assert q.read(4096, 16) == data[:16]


def test_pool_errors(cli, tmp_path):
    with pytest.raises(RaidforgeError) as e:
        raidforge.Pool.open(tmp_path / "none.json")
    assert str(e.value) == cli.error("status", tmp_path / "none.json")
    members = [tmp_path / f"m{i}.img" for i in range(3)]
    with raidforge.Pool.create(tmp_path / "p.json", scheme="raid5", members=members,
                               member_size="4M") as p:
        with pytest.raises(RaidforgeError, match="--rebuild-order 'sideways'"):
            p.rebuild(rebuild_order="sideways")
        with pytest.raises(RaidforgeError, match="speed-min 10M .* is above --speed-max 1MB/s"):
            p.rebuild(speed_min="10M", speed_max="1MB/s")
        p.fail(0)
        with pytest.raises(RaidforgeError, match="replace it first"):
            p.rebuild()
        busy = []

        def status_during_rebuild(pr):
            try:
                p.status()
            except RaidforgeError as e:
                busy.append(str(e))

        p.replace(0, tmp_path / "n0.img")
        p.rebuild(progress=status_during_rebuild)
        assert busy and "busy" in busy[0]


def test_old_keyword_names_are_still_taken(tmp_path):
    """Options renamed for one name per concept (issue 22) keep their old keywords, as the CLI
    keeps the old spellings: ``size=`` (now ``member_size=``), ``order=`` and ``parallel=``
    (now ``rebuild_order=`` and ``rebuild_window=``), and ``sim(rebuild_policy="sequential")``
    (now ``rebuild_order="sequential"``)."""
    members = [tmp_path / f"m{i}.img" for i in range(3)]
    with raidforge.Pool.create(tmp_path / "p.json", scheme="raid5", members=members,
                               size="4MB") as p:
        assert os.path.getsize(members[0]) == 4_000_000  # MB: 10^6, as the CLI reads it
        p.fail(1)
        p.replace(1, tmp_path / "n1.img")
        assert p.rebuild(order="sequential", parallel=3)["state"] == "clean"
        with pytest.raises(TypeError, match="both 'size' and its new name 'member_size'"):
            raidforge.Pool.create(tmp_path / "q.json", scheme="raid5", members=members,
                                  size="4M", member_size="4M")
    kw = dict(scheme="raid5", disks=4, member_size="32M", chunk="64K", workload="none", fail=0)
    old = raidforge.sim(rebuild_policy="sequential", **kw).to_dict()
    new = raidforge.sim(rebuild_order="sequential", **kw).to_dict()
    assert old == new
    assert raidforge.sim(**kw).to_dict()["rebuild"] != new["rebuild"]


# ---------------------------------------------------------------------------------------------
# The API itself: signatures, docs, the GIL


@pytest.mark.parametrize(
    "func,commands,drop",
    [
        (raidforge.sim, ["sim"], []),
        (raidforge.layout, ["layout_show", "layout_check"], []),
        (raidforge.layout_compare, ["layout_compare"], []),
        (raidforge.mttdl, ["model_mttdl"], []),
        (raidforge.Pool.create, ["create"], ["pool", "members"]),
        (raidforge.read_trace, ["trace_read"], ["file"]),
        (raidforge.trace_stats, ["trace_stats"], ["file"]),
        (raidforge.advise, ["advise"], []),
    ],
)
def test_signatures_list_every_cli_option(func, commands, drop):
    """The typed signatures are written out by hand; they must name exactly the options the
    CLI defines (so a new CLI option, or a renamed one, fails here until Python has it)."""
    params = set(inspect.signature(func).parameters) - {"cls", "path", "members", "chunksize"}
    options = set().union(*(set(_cli.options(c)) for c in commands)) - set(drop)
    assert params == options


def test_docstring_examples():
    for module in (_core, raidforge._sweep, raidforge):
        result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
        assert result.failed == 0, module.__name__
        assert result.attempted > 0, module.__name__
    assert "member_size: Bytes of each member" in raidforge.sim.__doc__


def test_long_calls_release_the_gil():
    """While a simulation runs in one thread, this thread keeps running Python."""
    kw = dict(scheme="raid5", disks=8, disk="st32000645ns", member_size="20G", chunk="64K",
              workload="none", fail=0)
    done = threading.Event()
    result = {}

    def work():
        result["r"] = raidforge.sim(**kw)
        done.set()

    t = threading.Thread(target=work)
    ticks = 0
    t.start()
    while not done.is_set():
        ticks += 1
    t.join()
    assert result["r"].rebuild_time_s > 0
    # Held GIL: this loop would get only the interpreter's switch interval slices (5 ms) that
    # the native call never offers, i.e. next to no iterations for the whole call.
    assert ticks > 10_000, ticks
