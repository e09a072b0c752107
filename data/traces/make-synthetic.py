#!/usr/bin/env python3
"""Writes the synthetic trace fixtures of this folder (see README.md).

The fixtures stand in for SNIA IOTTA samples that we may not redistribute: they have the same
line formats (MSR Cambridge, Tencent CBS, SYSTOR'17) but every value in them is made up here,
from a fixed seed, so that the simulator's readers always have a file of each format to read.
None of their lines comes from a real trace.

    data/traces/make-synthetic.py          # rewrite the three files, print their statistics
    data/traces/make-synthetic.py --check  # exit 1 if a committed file differs from the output

Standard library only; the output does not depend on the Python version (our own generator,
no `random`).
"""

import os
import sys

MASK = (1 << 64) - 1


class Lcg:
    """64-bit linear congruential generator (Knuth's MMIX constants), top 31 bits out."""

    def __init__(self, seed):
        self.x = seed & MASK

    def next(self):
        self.x = (self.x * 6364136223846793005 + 1442695040888963407) & MASK
        return self.x >> 33

    def below(self, n):
        return self.next() % n

    def pick(self, items):
        return items[self.below(len(items))]


def msr():
    """MSR Cambridge: Timestamp (100 ns ticks since 1601),Hostname,DiskNumber,Type,Offset
    (bytes),Size (bytes),ResponseTime (100 ns ticks); no header, sorted by time.

    The first two lines are fixed (the tests check them field by field); 238 more follow."""
    g = Lcg(0x4D5352)
    t = 128_500_000_000_000_000
    lines = [
        f"{t},fixture,0,Write,4294967296,4096,1500",
        f"{t + 250},fixture,0,Read,512,512,900",
    ]
    t += 250
    for _ in range(238):
        t += 1 + g.below(20_000)
        disk = g.below(3)
        kind = "Read" if g.below(100) < 55 else "Write"
        offset = g.below(1 << 24) * 512
        size = g.pick([512, 4096, 4096, 8192, 16384, 65536])
        response = 100 + g.below(50_000)
        lines.append(f"{t},fixture,{disk},{kind},{offset},{size},{response}")
    return lines


def tencent():
    """Tencent CBS: Timestamp (s),Offset (sectors),Size (sectors),IOType (0 read, 1 write),
    VolumeID; no header. Like the real sample, not sorted within a second: the first line is
    stamped second S+1, the next 180 lines second S, the last 119 second S+1."""
    g = Lcg(0x54434253)
    s = 1_600_000_000
    stamps = [s + 1] + [s] * 180 + [s + 1] * 119
    lines = []
    for stamp in stamps:
        offset = g.below(1 << 26)
        size = g.pick([8, 8, 16, 32, 64, 128, 256])
        kind = 0 if g.below(100) < 50 else 1
        volume = g.pick([101, 102, 103, 2047])
        lines.append(f"{stamp},{offset},{size},{kind},{volume}")
    return lines


def systor():
    """SYSTOR'17: a header, then Timestamp (s, 9 decimals),Response (s),IOType (R/W),LUN,
    Offset (bytes),Size (bytes). Like the real samples, times step back now and then."""
    g = Lcg(0x535953)
    lines = ["Timestamp,Response,IOType,LUN,Offset,Size"]
    t = 1_450_000_000 * 10**9 + 123_456_000
    for _ in range(250):
        if g.below(5) == 0:
            t -= g.below(3_000_000)
        else:
            t += g.below(5_000_000)
        response = 50_000 + g.below(20_000_000)
        kind = "R" if g.below(100) < 75 else "W"
        lun = 0 if g.below(4) else 1
        offset = g.below(1 << 32) * 512
        size = g.pick([4096, 8192, 16384, 32768, 65536, 131072, 512 * (1 + g.below(64))])
        lines.append(
            f"{t // 10**9}.{t % 10**9:09d},0.{response:09d},{kind},{lun},{offset},{size}"
        )
    return lines


FILES = [
    ("synthetic-msr.csv", msr),
    ("synthetic-tencent-cbs.csv", tencent),
    ("synthetic-systor17.csv", systor),
]


def stats(name, lines):
    """Requests, reads and bytes, computed from the values as generated (not by the readers
    under test)."""
    n = reads = total = 0
    for line in lines:
        f = line.split(",")
        if name == "synthetic-msr.csv":
            n, reads, total = n + 1, reads + (f[3] == "Read"), total + int(f[5])
        elif name == "synthetic-tencent-cbs.csv":
            n, reads, total = n + 1, reads + (f[3] == "0"), total + int(f[2]) * 512
        elif f[0] != "Timestamp":
            n, reads, total = n + 1, reads + (f[2] == "R"), total + int(f[5])
    return n, reads, total


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    check = sys.argv[1:] == ["--check"]
    differ = []
    for name, make in FILES:
        lines = make()
        text = "\n".join(lines) + "\n"
        path = os.path.join(here, name)
        if check:
            with open(path, encoding="ascii") as f:
                if f.read() != text:
                    differ.append(name)
        else:
            with open(path, "w", encoding="ascii", newline="\n") as f:
                f.write(text)
        n, reads, total = stats(name, lines)
        print(
            f"{name}: {len(lines)} lines, {n} requests, {reads} reads, {total} bytes "
            f"(mean {total / n / 1024:.3f} KiB)"
        )
    if differ:
        print("differs from the generator's output: " + ", ".join(differ))
        sys.exit(1)


if __name__ == "__main__":
    main()
