#!/usr/bin/env python3
"""The simulator against the engine on the same configuration (issue 32), side by side.

Each case runs twice: on the engine (pools of member files whose every I/O is slowed to
--emulate's device, served over NBD, fio as the client) and in `raidforge sim` with the same
device (`--disk` takes the --emulate spec), layout, chunk, workload and rebuild settings.

Cases (CASES, comma-separated; default offline, online-pr, online-ido):
  offline        RAID5 over 4 members: fail, replace, rebuild with no client.
  offline-raidplus  RAID+ n=13 k=4: fail, rebuild into spare space, no client.
  offline-s2raid    S2-RAID5 over 9 members (G = 3) and a spare: fail, rebuild, no client.
  online-POLICY  the same pool with a RAID1 surrogate of 2 members, fio 4 KiB random, 70 %
                 reads, zipf:1.2, queue depth 8: NORMAL_S seconds healthy, then fail + replace
                 + rebuild --rebuild-policy POLICY --speed-min 1M while fio runs DURING_S more
                 seconds (the rebuild then finishes unloaded). POLICY: pr pro workout vdf ido.

Printed per case: rebuild time, client IOPS and mean latency per phase, engine / simulator
ratio; `--json` prints the rows as JSON. Bounds of issue 32: rebuild time within 15 %, mean
latency within 25 %; rows outside are marked.

Usage: bench/calibrate.py [--json] (environment: RAIDFORGE, CASES, NORMAL_S, DURING_S,
MEMBER_SIZE, EMULATE). Needs fio with the nbd engine.
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
SPEED_MIN = "1M"
WINDOW = "8"
CASES = os.environ.get("CASES", "offline,online-pr,online-ido").split(",")


def rf(*args, check=True):
    p = subprocess.run([RF, *map(str, args)], capture_output=True, text=True)
    if check and p.returncode != 0:
        raise SystemExit(f"raidforge {' '.join(map(str, args))} failed: {p.stderr.strip()}")
    return p


def fio(name, uri, size, seconds, out, rw="randrw", bs="4k", qd=8, extra=()):
    cmd = [
        "fio", f"--name={name}", "--ioengine=nbd", f"--uri={uri}", f"--rw={rw}", f"--bs={bs}",
        f"--iodepth={qd}", f"--size={size}", "--numjobs=1", "--output-format=json",
        f"--output={out}", *extra,
    ]
    if seconds:
        cmd += ["--time_based", f"--runtime={seconds}"]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    j = json.load(open(out))["jobs"][0]
    n = j["read"]["total_ios"] + j["write"]["total_ios"]
    mean_ms = 0.0
    if n:
        mean_ms = (
            j["read"]["lat_ns"]["mean"] * j["read"]["total_ios"]
            + j["write"]["lat_ns"]["mean"] * j["write"]["total_ios"]
        ) / n / 1e6
    return {"iops": j["read"]["iops"] + j["write"]["iops"], "mean_ms": mean_ms}


def zipf_job():
    return ["--rwmixread=70", "--random_distribution=zipf:1.2", "--randrepeat=0"]


def engine(case, d):
    """One case on the engine; returns rebuild time and per-phase client figures."""
    layout, n, replace = OFFLINE.get(case, OFFLINE["offline"])
    members = [f"{d}/m{i}.img" for i in range(n)]
    create = ["create", f"{d}/p.json", *layout,
              "--member-size", MEMBER, "--chunk", CHUNK, "--emulate", EMULATE]
    for m in members:
        create += ["--member", m]
    policy = case.split("-", 1)[1] if case.startswith("online-") else None
    if policy:
        rf("create", f"{d}/s.json", "--scheme", "raid1", "--disks", 2, "--member-size", MEMBER,
           "--member", f"{d}/s0.img", "--member", f"{d}/s1.img", "--emulate", EMULATE)
        create += ["--surrogate", f"{d}/s.json", "--zone-size", ZONE]
    rf(*create)
    size = json.loads(rf("status", f"{d}/p.json", "--json").stdout)["size_bytes"]
    server = subprocess.Popen([RF, "serve", f"{d}/p.json", "--socket", f"{d}/p.sock"],
                              stdout=subprocess.DEVNULL, stderr=open(f"{d}/serve.log", "w"))
    try:
        for _ in range(200):
            if os.path.exists(f"{d}/p.sock") and os.path.exists(f"{d}/p.json.ctl"):
                break
            time.sleep(0.05)
        uri = f"nbd+unix:///p?socket={d}/p.sock"
        # Written once, so that reads read data and every stripe is the engine's to rebuild.
        fio("fill", uri, size, 0, f"{d}/fill.json", rw="write", bs="1M", qd=8)
        out = {"phases": {}}
        if policy:
            out["phases"]["normal"] = fio("normal", uri, size, NORMAL_S, f"{d}/normal.json",
                                          extra=zipf_job())
            during = {}
            t = threading.Thread(target=lambda: during.update(
                fio("during", uri, size, DURING_S, f"{d}/during.json", extra=zipf_job())))
            t.start()
            time.sleep(0.2)
        rf("fail", f"{d}/p.json", "--member", 0)
        if replace:
            rf("replace", f"{d}/p.json", "--member", 0, "--with", f"{d}/n0.img")
        args = ["rebuild", f"{d}/p.json", "--rebuild-window", WINDOW, "--json"]
        if policy:
            args += ["--rebuild-policy", policy, "--speed-min", SPEED_MIN]
        t0 = time.monotonic()
        r = rf(*args)
        out["rebuild_s"] = time.monotonic() - t0
        try:
            out["rebuild_json"] = json.loads(r.stdout)
        except ValueError:
            pass
        if policy:
            t.join()
            out["phases"]["rebuilding"] = during
        return out
    finally:
        server.terminate()
        server.wait()


def sim(case):
    policy = case.split("-", 1)[1] if case.startswith("online-") else None
    layout = OFFLINE.get(case, OFFLINE["offline"])[0]
    args = ["sim", *layout, "--disk", EMULATE,
            "--member-size", MEMBER, "--chunk", CHUNK, "--fail", 0,
            "--rebuild-window", WINDOW, "--json"]
    if policy:
        args += ["--workload", "random:read=0.7:size=4K:qd=8:zipf=1.2",
                 "--fail-at", NORMAL_S, "--duration", NORMAL_S + DURING_S,
                 "--rebuild-policy", policy, "--surrogate", f"raid1:2:{EMULATE}",
                 "--zone-size", ZONE, "--speed-min", SPEED_MIN]
    else:
        args += ["--workload", "none"]
    v = json.loads(rf(*args).stdout)
    out = {"rebuild_s": v["rebuild_time_s"], "phases": {}}
    if policy:
        for phase, secs in (("normal", NORMAL_S), ("rebuilding", None)):
            r = v["response_ms"][phase]
            if secs is None:
                # Requests during the rebuild, over the part of it the client ran.
                secs = min(DURING_S, v["rebuild_time_s"])
            out["phases"][phase] = {"iops": r["count"] / secs, "mean_ms": r["mean"]}
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
        s = sim(case)
        row = {"case": case, "engine": e, "sim": s}
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
    print(f"{r['case']}: rebuild engine {e['rebuild_s']:.1f} s, sim {s['rebuild_s']:.1f} s, "
          f"ratio {r['rebuild_ratio']:.2f}{ok(r['rebuild_ratio'], 0.15)}")
    for ph in e["phases"]:
        a, b = e["phases"][ph], s["phases"][ph]
        lr = r[f"{ph}_latency_ratio"]
        print(f"  {ph:<10} IOPS engine {a['iops']:7.0f} sim {b['iops']:7.0f} "
              f"({r[f'{ph}_iops_ratio']:.2f}); mean ms engine {a['mean_ms']:6.1f} "
              f"sim {b['mean_ms']:6.1f} ({lr:.2f}){ok(lr, 0.25)}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
