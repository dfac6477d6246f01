#!/usr/bin/env python3
"""CPU cost of one Go benchmark in two builds, compared in pairs of runs.

Each run is one process of a test binary running the benchmark for a fixed
number of iterations; its CPU time (user and system, every thread, GC and
background goroutines included, from getrusage) less the binary's median
startup time, divided by the iterations, is the cost of one. Runs of the
two builds alternate, so that the load of anything else on the machine
falls on both alike; each pair gives a ratio, and the median ratio with
its interquartile range is printed.

  go test -c -o /tmp/old.test ./internal/router    # in a worktree of the build before
  go test -c -o /tmp/new.test ./internal/router
  scripts/benchcpu.py /tmp/old.test /tmp/new.test internal/router NonStreamedRequest 50000 30

A benchmark named only in the new build (BenchmarkTracedNonStreamedRequest)
is compared with NEW_BENCH=TracedNonStreamedRequest: the old binary then
runs BENCH, the new one NEW_BENCH.
"""
import os
import resource
import statistics
import subprocess
import sys


def cpu(binary, cwd, bench, iters):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([binary, "-test.run", "XXX", "-test.bench", bench, "-test.benchtime", "%dx" % iters],
                   cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def main():
    old, new, pkg, bench, n, rounds = sys.argv[1:7]
    n, rounds = int(n), int(rounds)
    cwd = os.path.abspath(pkg)
    benches = {"old": "^Benchmark%s$" % bench, "new": "^Benchmark%s$" % os.environ.get("NEW_BENCH", bench)}
    bins = {"old": old, "new": new}
    startup = {b: statistics.median([cpu(bins[b], cwd, "XXX", 1) for _ in range(7)]) for b in bins}
    per, ratios = {"old": [], "new": []}, []
    for i in range(rounds):
        pair = {}
        for b in (["old", "new"] if i % 2 == 0 else ["new", "old"]):
            pair[b] = (cpu(bins[b], cwd, benches[b], n) - startup[b]) / n * 1e6
            per[b].append(pair[b])
        ratios.append(pair["new"] / pair["old"])
    q = statistics.quantiles(ratios, n=4)
    print("%s, %d iterations, %d pairs: old %.2f us, new %.2f us (medians); new/old by pair: median %.4f, IQR %.4f-%.4f"
          % (benches["new"], n, rounds, statistics.median(per["old"]), statistics.median(per["new"]),
             statistics.median(ratios), q[0], q[2]))


if __name__ == "__main__":
    main()
