#!/usr/bin/env python3
"""Per-operation latency of PostMark's file operations on one or more directories.

usage: bench/fuse/op_latency.py [--files N] [--rounds R] NAME=DIR [NAME=DIR ...]

For each directory (a mount or a plain directory; a fresh subdirectory is used and removed),
times in-process with perf_counter_ns, median over N files (rounds interleaved across the
directories so load drifts hit all of them alike):
  create   open(O_CREAT|O_EXCL|O_WRONLY) of a new file (lookup + create)
  write    write of 2 KiB to it
  close    close after the write (flush: the index update on the Propeller mount)
  open_a   open(O_WRONLY|O_APPEND) of an existing file
  append   write of 512 B
  close_a  close after the append
  read     open + read + close of a file
  stat     stat of a file
  unlink   unlink of a file
Prints one table row per directory (microseconds).
"""
import argparse
import os
import statistics
import sys
import time

OPS = ["create", "write", "close", "open_a", "append", "close_a", "read", "stat", "unlink"]


def one_round(d, n, samples):
    ns = time.perf_counter_ns
    data = b"x" * 2048
    small = b"y" * 512
    names = [os.path.join(d, "f%05d" % i) for i in range(n)]
    def open_write_close(flags, payload, keys):
        # Times open, write and close of every file separately, into samples[keys[0..2]].
        for p in names:
            t0 = ns()
            fd = os.open(p, flags, 0o644)
            t1 = ns()
            os.write(fd, payload)
            t2 = ns()
            os.close(fd)
            t3 = ns()
            samples[keys[0]].append(t1 - t0)
            samples[keys[1]].append(t2 - t1)
            samples[keys[2]].append(t3 - t2)

    open_write_close(os.O_CREAT | os.O_EXCL | os.O_WRONLY, data, ("create", "write", "close"))
    open_write_close(os.O_WRONLY | os.O_APPEND, small, ("open_a", "append", "close_a"))
    for p in names:
        t0 = ns()
        fd = os.open(p, os.O_RDONLY)
        os.read(fd, 65536)
        os.close(fd)
        t1 = ns()
        os.stat(p)
        t2 = ns()
        samples["read"].append(t1 - t0)
        samples["stat"].append(t2 - t1)
    for p in names:
        t0 = ns()
        os.unlink(p)
        t1 = ns()
        samples["unlink"].append(t1 - t0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=500)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("dirs", nargs="+", metavar="NAME=DIR")
    args = ap.parse_args()
    targets = []
    for spec in args.dirs:
        name, _, d = spec.partition("=")
        if not d:
            sys.exit("op_latency.py: expected NAME=DIR, got %r" % spec)
        work = os.path.join(d, "op-latency-%d" % os.getpid())
        os.mkdir(work)
        targets.append((name, work, {op: [] for op in OPS}))
    try:
        for r in range(args.rounds):
            order = targets[r % len(targets):] + targets[:r % len(targets)]
            for _, work, samples in order:
                one_round(work, args.files, samples)
    finally:
        for _, work, _ in targets:
            for f in os.listdir(work):
                os.unlink(os.path.join(work, f))
            os.rmdir(work)
    print("load average: %.2f %.2f %.2f" % os.getloadavg())
    print("| system | " + " | ".join(OPS) + " |")
    print("|---|" + "---|" * len(OPS))
    for name, _, samples in targets:
        cells = ["%.0f" % (statistics.median(samples[op]) / 1000) for op in OPS]
        print("| %s | %s |" % (name, " | ".join(cells)))


if __name__ == "__main__":
    main()
