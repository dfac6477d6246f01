#!/usr/bin/env python3
"""The two-gateway tables of docs/BENCHMARKS.md from scripts/gateways.sh's
reports: for each workload and pool shape, capacity at SLO and the prefix
hit rate at each swept point, per seed and as a mean, and each shape's
ratio to one gateway. The hit rates' ratio is the mean over the points
where one gateway holds its SLOs (goodput at least 0.9): past capacity
the queues, not the routing, decide what is cached.

    scripts/gateways_table.py [OUT]        (default bench-out/gateways)
"""
import glob
import json
import os
import re
import sys
from statistics import mean

out = sys.argv[1] if len(sys.argv) > 1 else "bench-out/gateways"
shapes = [("1gw", "1 gateway"), ("2gw-shared", "2 gateways, shared index and loads"),
          ("2gw-index", "2 gateways, shared index alone"), ("2gw", "2 gateways, apart")]

for workload, point in [("mooncake", "time_scale"), ("chat", "rate")]:
    runs = {}  # key: (shape, seed); value: report
    for path in glob.glob(os.path.join(out, f"{workload}-*.json")):
        m = re.fullmatch(rf"{workload}-(.+)-(\d+)\.json", os.path.basename(path))
        if m:
            runs[(m.group(1), int(m.group(2)))] = json.load(open(path))
    if not runs:
        continue
    seeds = sorted({seed for _, seed in runs})
    points = [r[point] for r in next(iter(runs.values()))["runs"]]
    unit = "time scale" if point == "time_scale" else "req/s"
    print(f"\n{workload}, seeds {', '.join(map(str, seeds))}: capacity at SLO ({unit}) and prefix hit rate at each {unit}\n")
    print("| pool | capacity (per seed) | capacity, mean | × 1 gateway | " + " | ".join(f"hit at {p:g}" for p in points) + " | hit × 1 gateway, within SLO |")
    print("|---|---|---|---|" + "---|" * len(points) + "---|")
    base_cap, base_hit, held = None, None, None
    for shape, label in shapes:
        have = [runs[(shape, s)] for s in seeds if (shape, s) in runs]
        if not have:
            continue
        caps = [r["capacity_at_slo"] for r in have]
        hits = [mean(r["runs"][i]["prefix_hit_rate"] for r in have) for i in range(len(points))]
        cap = mean(caps)
        if base_cap is None:
            base_cap, base_hit = cap, hits
            held = [mean(r["runs"][i]["goodput"] for r in have) >= 0.9 for i in range(len(points))]
        ratio_hit = mean(h / b for h, b, ok in zip(hits, base_hit, held) if ok and b > 0)
        print(f"| {label} | {' / '.join(f'{c:.1f}' for c in caps)} | {cap:.1f} | {cap / base_cap:.3f} | "
              + " | ".join(f"{h:.3f}" for h in hits) + f" | {ratio_hit:.3f} |")
