#!/usr/bin/env python3
"""Convert the Linux kernel's ftrace `blk` tracer output to blkparse's default text format.

The `blk` tracer (`echo blk > /sys/kernel/debug/tracing/current_tracer` and
`echo 1 > /sys/block/DEV/trace/enable`) records the same events as blktrace, in ftrace's
text layout:

    cp-12688   [001] d..1. 75431.827834:   7,81   Q  RM 33928 + 8 [cp]

blkparse prints them as `%D %2c %8s %5T.%9t %5p %2a %3d ...` (device, CPU, per-CPU sequence
number, seconds since the first event, pid, action, RWBS, then the action's own fields):

      7,81   1        1     0.000000000 12688  Q  RM 33928 + 8 [cp]

Usage: ftrace-blk-to-blkparse.py < trace > out.blkparse
"""
import re
import sys

LINE = re.compile(
    r"^\s*(?P<task>.+?)-(?P<pid>\d+)\s+\[(?P<cpu>\d+)\]\s+\S+\s+(?P<ts>\d+\.\d+):\s+"
    r"(?P<dev>\d+,\d+)\s+(?P<action>\S+)\s+(?P<rest>.*)$"
)


def main():
    seq = {}
    first = None
    for line in sys.stdin:
        if line.startswith("#"):
            continue
        m = LINE.match(line.rstrip("\n"))
        if not m:
            continue
        ts = m["ts"]
        whole, frac = ts.split(".")
        ns = int(whole) * 10**9 + int(frac.ljust(9, "0")[:9])
        if first is None:
            first = ns
        rel = ns - first
        cpu = int(m["cpu"])
        seq[cpu] = seq.get(cpu, 0) + 1
        print(
            f"{m['dev']:>5} {cpu:>2} {seq[cpu]:>8} {rel // 10**9:>5}.{rel % 10**9:09d} "
            f"{int(m['pid']):>5} {m['action']:>2} {m['rest']}"
        )


if __name__ == "__main__":
    main()
