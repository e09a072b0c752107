#!/usr/bin/env python3
"""The simulator against the engine on the same configuration (issue 32), side by side.

Each case runs twice: on the engine (pools of member files whose every I/O is slowed to
--emulate's device, served over NBD, fio as the client) and in `raidforge sim` with the same
device (`--disk` takes the --emulate spec), layout, chunk, workload and rebuild settings.

Cases (CASES, comma-separated, or `all`; default offline, online-pr, online-ido):
  offline        RAID5 over 4 members: fail, replace, rebuild with no client.
  offline-raidplus  RAID+ n=13 k=4: fail, rebuild into spare space, no client.
  offline-s2raid    S2-RAID5 over 9 members (G = 3) and a spare: fail, rebuild, no client.
  online-POLICY  the same pool with a RAID1 surrogate of 2 members, fio 4 KiB random, 70 %
                 reads, zipf:1.2, queue depth 8: NORMAL_S seconds healthy, then fail + replace
                 + rebuild --rebuild-policy POLICY --speed-min SPEED_MIN (default 1M) while
                 fio runs DURING_S more seconds (the rebuild then finishes unloaded; with
                 SPEED_MIN=1G it competes with fio at full rate and usually ends first; the
                 phase's figures are the requests issued while it ran). POLICY: pr pro
                 workout vdf ido.
                 The surrogate is created for the policies that use one (workout, vdf, ido).
  lazy-rm2, lazy-raid6  small writes under lazy parity (seed 002): RM2 over 8 members and
                 RAID6 over 6, --parity lazy, fio 4 KiB random writes at queue depth 8 for
                 NORMAL_S seconds, no failure (the deferred parities are flushed when idle).

Printed per case: rebuild time; client IOPS, mean and p99 latency per phase (the engine's from
fio's per-I/O latency log, reads and writes together, as the simulator counts); member I/Os
(units read and written, and metadata writes: the engine counts every record it writes, the
simulator the deferred-parity list's records; for the surrogate policies, user reads served by
the surrogate and writes redirected to it); the engine / simulator ratios. `--json` prints the
rows as JSON. Bounds of issue 32: rebuild time within 15 %, mean latency within 25 %; rows
outside are marked.

Usage: bench/calibrate.py [--json] (environment: RAIDFORGE, CASES, NORMAL_S, DURING_S,
MEMBER_SIZE, EMULATE, SPEED_MIN). Needs fio with the nbd engine.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

RF = os.environ.get(
    "RAIDFORGE",
    os.path.join(os.environ.get("CARGO_TARGET_DIR", "target"), "release", "raidforge"),
)
NORMAL_S = int(os.environ.get("NORMAL_S", "15"))
DURING_S = int(os.environ.get("DURING_S", "15"))
MEMBER = os.environ.get("MEMBER_SIZE", "300M")
EMULATE = os.environ.get("EMULATE", "hdd:150MB/s:4ms")
CHUNK = "64K"
ZONE = "12M"
# Layouts of the offline cases: name -> (create/sim arguments, members, replace member 0).
OFFLINE = {
    "offline": (["--scheme", "raid5", "--disks", "4"], 4, True),
    "offline-raidplus": (["--scheme", "raidplus", "--disks", "13", "--width", "4"], 13, False),
    "offline-s2raid": (["--scheme", "s2raid5", "--disks", "10", "--group", "3", "--spares",
                        "1"], 10, False),
}
# Small-write cases under lazy parity: name -> (create/sim arguments, members).
LAZY = {
    "lazy-rm2": (["--scheme", "rm2", "--disks", "8", "--parity", "lazy"], 8),
    "lazy-raid6": (["--scheme", "raid6", "--disks", "6", "--parity", "lazy"], 6),
}
POLICIES = ["pr", "pro", "workout", "vdf", "ido"]
# Policies that put data on the surrogate (the others never touch it).
SURROGATE_POLICIES = {"workout", "vdf", "ido"}
# The rebuild's minimum rate under load (MD's sync_speed_min): at 1M the throttle holds
# every policy's rebuild to it while fio runs; a high one (1G) lets the rebuild compete.
SPEED_MIN = os.environ.get("SPEED_MIN", "1M")
WINDOW = "8"
# The engine's rebuild pipeline, given to both sides: windows of WINDOW cycles (or as much of
# them as MEMORY_WINDOW of buffers holds), WINDOWS_IN_FLIGHT of them in flight, two while
# clients are busy. (The simulator kept WINDOW cycles in flight whatever the load, and
# rebuilt RAID5 offline in 3.3 s against the engine's 2.8-2.9 s.)
WINDOWS_IN_FLIGHT = "4"
MEMORY_WINDOW = "16M"
ALL = [*OFFLINE, *(f"online-{p}" for p in POLICIES), *LAZY]
CASES = os.environ.get("CASES", "offline,online-pr,online-ido")
CASES = ALL if CASES == "all" else CASES.split(",")
for _c in CASES:
    if _c not in ALL:
        raise SystemExit(f"bench/calibrate.py: unknown case {_c!r}; cases: {', '.join(ALL)}")


def rf(*args, check=True):
    p = subprocess.run([RF, *map(str, args)], capture_output=True, text=True)
    if check and p.returncode != 0:
        raise SystemExit(f"raidforge {' '.join(map(str, args))} failed: {p.stderr.strip()}")
    return p


def fio(name, uri, size, seconds, out, rw="randrw", bs="4k", qd=8, extra=(), keep_log=False):
    """Runs one fio job; returns IOPS and the mean and p99 latency of every I/O (reads and
    writes together, from fio's per-I/O latency log), and with `keep_log` the log's
    (completion ms, latency ms) pairs."""
    log = out[: -len(".json")] if out.endswith(".json") else out
    cmd = [
        "fio", f"--name={name}", "--ioengine=nbd", f"--uri={uri}", f"--rw={rw}", f"--bs={bs}",
        f"--iodepth={qd}", f"--size={size}", "--numjobs=1", "--output-format=json",
        f"--output={out}", f"--write_lat_log={log}", "--log_avg_msec=0", *extra,
    ]
    if seconds:
        cmd += ["--time_based", f"--runtime={seconds}"]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    j = json.load(open(out))["jobs"][0]
    # Lines of the total-latency log: time ms (at completion), latency ns, direction, size,
    # offset.
    log_lines = []
    with open(f"{log}_lat.1.log") as f:
        for line in f:
            parts = line.split(",")
            if len(parts) >= 2:
                log_lines.append((int(parts[0]), int(parts[1]) / 1e6))
    res = {"iops": j["read"]["iops"] + j["write"]["iops"], **lat_stats(l for _, l in log_lines)}
    if keep_log:
        res["log"] = log_lines
    return res


def lat_stats(lats):
    """Mean and p99 of latencies in ms."""
    lat = sorted(lats)
    mean_ms = sum(lat) / len(lat) if lat else 0.0
    p99_ms = lat[min(len(lat) - 1, int(0.99 * len(lat)))] if lat else 0.0
    return {"mean_ms": mean_ms, "p99_ms": p99_ms}


def phase_window(run, from_s, to_s):
    """The figures of a fio run (`fio`'s answer) over the I/Os issued from `from_s` to `to_s`
    seconds after fio started, as the simulator's phase holds the requests that arrived
    while the rebuild ran."""
    lats = [lat for t, lat in run["log"] if from_s * 1e3 <= t - lat < to_s * 1e3]
    secs = to_s - max(0.0, from_s)
    return {"iops": len(lats) / secs if secs > 0 else 0.0, **lat_stats(lats)}


def status(d):
    """`raidforge status --json` of the case's pool in `d`."""
    return json.loads(rf("status", f"{d}/p.json", "--json").stdout)


def member_ios(st):
    """Units read and written on the members, and metadata writes, from `status --json`."""
    ms = st["members"]
    return {k: sum(m.get(k, 0) for m in ms) for k in ("reads", "writes", "meta_writes")}


def zipf_job():
    return ["--rwmixread=70", "--random_distribution=zipf:1.2", "--randrepeat=0"]


def engine(case, d):
    """One case on the engine; returns rebuild time and per-phase client figures."""
    if case in LAZY:
        (layout, n), replace = LAZY[case], False
    else:
        layout, n, replace = OFFLINE.get(case, OFFLINE["offline"])
    members = [f"{d}/m{i}.img" for i in range(n)]
    create = ["create", f"{d}/p.json", *layout,
              "--member-size", MEMBER, "--chunk", CHUNK, "--emulate", EMULATE]
    for m in members:
        create += ["--member", m]
    policy = case.split("-", 1)[1] if case.startswith("online-") else None
    if policy in SURROGATE_POLICIES:
        rf("create", f"{d}/s.json", "--scheme", "raid1", "--disks", 2, "--member-size", MEMBER,
           "--member", f"{d}/s0.img", "--member", f"{d}/s1.img", "--emulate", EMULATE)
        create += ["--surrogate", f"{d}/s.json", "--zone-size", ZONE]
    rf(*create)
    st = status(d)
    size = st["size_bytes"]
    # What the simulator's members hold: the data area (the member less its metadata).
    data_bytes = os.path.getsize(members[0]) - st["members"][0]["data_offset_bytes"]
    server = subprocess.Popen([RF, "serve", f"{d}/p.json", "--socket", f"{d}/p.sock"],
                              stdout=subprocess.DEVNULL, stderr=open(f"{d}/serve.log", "w"))
    try:
        for _ in range(200):
            if os.path.exists(f"{d}/p.sock") and os.path.exists(f"{d}/p.json.ctl"):
                break
            time.sleep(0.05)
        uri = f"nbd+unix:///p?socket={d}/p.sock"
        # Written once, so that reads read data and every stripe is the engine's to rebuild.
        # Flushed at its end: the rebuild's first checkpoint would otherwise write back the
        # whole fill from the page cache (about 0.3 s of the S2-RAID case), which is set-up,
        # not rebuild, and not simulated.
        fio("fill", uri, size, 0, f"{d}/fill.json", rw="write", bs="1M", qd=8,
            extra=["--end_fsync=1"])
        # The served rebuild takes client I/O in the last 500 ms as load (its idle test, like
        # MD's) and yields after every step: the fill is set-up, so it is left behind first.
        # (Failed at once, the offline S2-RAID case spent its first 0.5 s yielding.)
        time.sleep(1)
        out = {"phases": {}, "member_data_bytes": data_bytes}
        before = member_ios(status(d))
        if case in LAZY:
            out["phases"]["normal"] = fio("lazy", uri, size, NORMAL_S, f"{d}/lazy.json",
                                          rw="randwrite", extra=["--randrepeat=0"])
            # The deferred parities are flushed once the client is idle, as the simulator
            # flushes them at the end of its run: counted on both sides.
            for _ in range(600):
                st = status(d)
                if st["bpgl_len"] == 0:
                    break
                time.sleep(0.1)
            else:
                raise SystemExit(f"{case}: the deferred-parity list was not flushed in 60 s")
            after = member_ios(st)
            out["member_ios"] = {k: after[k] - before[k] for k in after}
            out["rebuild_s"] = None
            return out
        if policy:
            out["phases"]["normal"] = fio("normal", uri, size, NORMAL_S, f"{d}/normal.json",
                                          extra=zipf_job())
            during = {}
            t = threading.Thread(target=lambda: during.update(
                fio("during", uri, size, DURING_S, f"{d}/during.json", extra=zipf_job(),
                    keep_log=True)))
            fio_t0 = time.monotonic()
            t.start()
            time.sleep(0.2)
        rf("fail", f"{d}/p.json", "--member", 0)
        if replace:
            rf("replace", f"{d}/p.json", "--member", 0, "--with", f"{d}/n0.img")
        args = ["rebuild", f"{d}/p.json", "--rebuild-window", WINDOW, "--json",
            "--windows-in-flight", WINDOWS_IN_FLIGHT, "--memory-window", MEMORY_WINDOW]
        if policy:
            args += ["--rebuild-policy", policy, "--speed-min", SPEED_MIN]
        t0 = time.monotonic()
        # A policy that writes to the surrogate reclaims it after the rebuild (the redirected
        # writes written home), and `rebuild` returns after that; the simulator's rebuild time
        # ends with the last cycle rebuilt. The engine's is taken where its phase leaves
        # "rebuilding", and the reclaim is printed apart on both sides.
        rebuilt = {}
        done = threading.Event()

        def watch():
            while not done.wait(0.1):
                ido = (status(d).get("ido") or {})
                if ido.get("phase") in ("reclaiming", "normal") and "at" not in rebuilt:
                    rebuilt["at"] = time.monotonic()
                    return

        w = threading.Thread(target=watch) if policy in SURROGATE_POLICIES else None
        if w:
            w.start()
        r = rf(*args)
        end = time.monotonic()
        done.set()
        if w:
            w.join()
        out["rebuild_s"] = rebuilt.get("at", end) - t0
        if w:
            out["reclaim_s"] = end - rebuilt.get("at", end)
        try:
            out["rebuild_json"] = json.loads(r.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            pass
        # The engine's own figure where it gives one: the time from the rebuild's start until
        # every cycle was rebuilt (`rebuilt_s`, before any reclaim), or to its final state
        # recorded. The command's wall time adds its start and up to 100 ms of status
        # polling, and the watcher's up to 100 ms more.
        rj = out.get("rebuild_json", {})
        if rj.get("rebuilt_s") is not None:
            out["rebuild_s"] = rj["rebuilt_s"]
            if w:
                out["reclaim_s"] = rj.get("elapsed_s", out["rebuild_s"]) - rj["rebuilt_s"]
        elif not w and "elapsed_s" in rj:
            out["rebuild_s"] = rj["elapsed_s"]
        if policy:
            t.join()
            # The requests issued while the rebuild ran (a rebuild that ends before fio does,
            # at a high --speed-min, is not charged the unloaded rest of the run).
            out["phases"]["rebuilding"] = phase_window(
                during, t0 - fio_t0, min(DURING_S, t0 - fio_t0 + out["rebuild_s"]))
        st = status(d)
        after = member_ios(st)
        out["member_ios"] = {k: after[k] - before[k] for k in after}
        if policy in SURROGATE_POLICIES:
            ido = st.get("ido") or {}
            out["surrogate_reads"] = ido.get("redirected_reads")
            out["redirected_writes"] = ido.get("redirected_writes")
        return out
    finally:
        server.terminate()
        server.wait()


def sim(case, member_bytes):
    """One case in the simulator, members of `member_bytes` (the engine's data area)."""
    policy = case.split("-", 1)[1] if case.startswith("online-") else None
    if case in LAZY:
        args = ["sim", *LAZY[case][0], "--disk", EMULATE, "--member-size", member_bytes,
                "--chunk", CHUNK, "--workload", "random:read=0:size=4K:qd=8",
                "--duration", NORMAL_S, "--json"]
    else:
        layout = OFFLINE.get(case, OFFLINE["offline"])[0]
        args = ["sim", *layout, "--disk", EMULATE,
                "--member-size", member_bytes, "--chunk", CHUNK, "--fail", 0,
                "--rebuild-window", WINDOW, "--windows-in-flight", WINDOWS_IN_FLIGHT,
                "--memory-window", MEMORY_WINDOW, "--json"]
    if policy:
        args += ["--workload", "random:read=0.7:size=4K:qd=8:zipf=1.2",
                 "--fail-at", NORMAL_S, "--duration", NORMAL_S + DURING_S,
                 "--rebuild-policy", policy, "--zone-size", ZONE, "--speed-min", SPEED_MIN]
        if policy in SURROGATE_POLICIES:
            args += ["--surrogate", f"raid1:2:{EMULATE}"]
    elif case not in LAZY:
        args += ["--workload", "none"]
    v = json.loads(rf(*args).stdout)
    disks = v["per_disk"]
    ido = v.get("ido") or {}
    out = {
        "rebuild_s": None if case in LAZY else v["rebuild_time_s"],
        "phases": {},
        "member_ios": {"reads": sum(x["reads"] for x in disks),
                       "writes": sum(x["writes"] for x in disks),
                       "meta_writes": sum(x.get("meta_writes", 0) for x in disks)},
    }
    if policy in SURROGATE_POLICIES:
        out["surrogate_reads"] = ido.get("reads_redirected")
        out["redirected_writes"] = ido.get("writes_redirected")
    if policy in SURROGATE_POLICIES and ido.get("reclaim_end_s") is not None:
        out["reclaim_s"] = ido["reclaim_end_s"] - NORMAL_S - v["rebuild_time_s"]
    phases = (("normal", NORMAL_S),) if case in LAZY else ()
    if policy:
        phases = (("normal", NORMAL_S), ("rebuilding", None))
    for phase, secs in phases:
        r = v["response_ms"][phase]
        if secs is None:
            # Requests during the rebuild, over the part of it the client ran.
            secs = min(DURING_S, v["rebuild_time_s"])
        out["phases"][phase] = {"iops": r["count"] / secs, "mean_ms": r["mean"],
                                "p99_ms": r["p99"]}
    return out


def main():
    as_json = "--json" in sys.argv[1:]
    if not shutil.which("fio"):
        raise SystemExit("bench/calibrate.py: fio is missing (apt-get install fio)")
    rows = []
    for case in CASES:
        d = tempfile.mkdtemp(prefix="raidforge-calib-")
        try:
            e = engine(case, d)
        finally:
            shutil.rmtree(d, ignore_errors=True)
        s = sim(case, e["member_data_bytes"])
        row = {"case": case, "engine": e, "sim": s}
        if e["rebuild_s"] is not None:
            row["rebuild_ratio"] = e["rebuild_s"] / s["rebuild_s"]
        for ph in e["phases"]:
            row[f"{ph}_latency_ratio"] = e["phases"][ph]["mean_ms"] / s["phases"][ph]["mean_ms"]
            row[f"{ph}_iops_ratio"] = e["phases"][ph]["iops"] / s["phases"][ph]["iops"]
        rows.append(row)
        if not as_json:
            print_row(row)
    if as_json:
        print(json.dumps(rows))


def print_row(r):
    e, s = r["engine"], r["sim"]
    ok = lambda x, b: "" if abs(x - 1) <= b else "  OUTSIDE"
    if "rebuild_ratio" in r:
        print(f"{r['case']}: rebuild engine {e['rebuild_s']:.1f} s, sim {s['rebuild_s']:.1f} s, "
              f"ratio {r['rebuild_ratio']:.2f}{ok(r['rebuild_ratio'], 0.15)}")
    else:
        print(f"{r['case']}: no rebuild")
    if "reclaim_s" in e:
        sr = s.get("reclaim_s")
        print(f"  reclaim after the rebuild (redirected writes written home): engine "
              f"{e['reclaim_s']:.1f} s, sim " + (f"{sr:.1f} s" if sr is not None else "none"))
    for ph in e["phases"]:
        a, b = e["phases"][ph], s["phases"][ph]
        lr = r[f"{ph}_latency_ratio"]
        print(f"  {ph:<10} IOPS engine {a['iops']:7.0f} sim {b['iops']:7.0f} "
              f"({r[f'{ph}_iops_ratio']:.2f}); mean ms engine {a['mean_ms']:6.1f} "
              f"sim {b['mean_ms']:6.1f} ({lr:.2f}){ok(lr, 0.25)}; p99 ms engine "
              f"{a['p99_ms']:6.1f} sim {b['p99_ms']:6.1f}")
    if "surrogate_reads" in e:
        print(f"  user reads served by the surrogate engine {e['surrogate_reads']} sim "
              f"{s.get('surrogate_reads')}; writes redirected engine {e['redirected_writes']} "
              f"sim {s.get('redirected_writes')}")
    me, ms = e["member_ios"], s["member_ios"]
    print(f"  member units read engine {me['reads']} sim {ms['reads']}, written engine "
          f"{me['writes']} sim {ms['writes']}; metadata writes engine {me['meta_writes']} "
          f"sim {ms['meta_writes']} (the simulator's: the deferred-parity list's records)")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
