#!/usr/bin/env python3
"""The routing comparison's summary: a Markdown table of each policy's
capacity at SLO, and an SVG of goodput against offered load per policy,
from the JSON reports scripts/routing.sh writes. Standard library only.

    scripts/routing_plot.py OUT_DIR SVG_FILE [WORKLOAD=SVG_FILE...]

SVG_FILE has a panel each for chat, chat-half, Mooncake and Azure; each
WORKLOAD=SVG_FILE (azure-burst, say) is a plot of that workload alone.
"""
import glob, json, os, re, sys

POLICIES = ["round_robin", "least_request", "prefix", "gie", "sglang", "auto"]
COLORS = dict(zip(POLICIES, ["#888888", "#1f77b4", "#9467bd", "#ff7f0e", "#2ca02c", "#d62728"]))


def reports(out, workload, policy, seed=r"\d+"):
    """The reports of one policy on one workload (runs through several
    gateways not), of one seed or all."""
    name = re.compile(rf"{re.escape(workload)}-{re.escape(policy)}-{seed}\.json")
    return [path for path in sorted(glob.glob(os.path.join(out, "*.json")))
            if name.fullmatch(os.path.basename(path))]


def seed_of(path):
    """The seed a report was run with, from its name."""
    return int(os.path.basename(path).rsplit("-", 1)[1][:-len(".json")])


def runs(out, workload, policy, seed=r"\d+"):
    """Every swept run of one policy on one workload, by load, of one seed
    or all. Over several seeds, only the loads every seed ran: those
    --refine adds differ by seed, and a mean over some of the seeds is not
    one over the seeds."""
    pts, seeds = {}, {}
    for path in reports(out, workload, policy, seed):
        for r in json.load(open(path))["runs"]:
            load = r.get("time_scale") or r["rate"]
            pts.setdefault(load, []).append(r)
            seeds.setdefault(load, set()).add(seed_of(path))
    every = set().union(*seeds.values())
    return {load: pts[load] for load in sorted(pts) if seeds[load] == every}


def capacity(pts):
    """Capacity at SLO over the pooled sweep: the highest load at which
    goodput (mean over seeds) is at least 0.9, interpolated; and whether
    it is only a lower bound."""
    loads = list(pts)
    good = [sum(r["goodput"] for r in pts[l]) / len(pts[l]) for l in loads]
    best, lower = 0.0, False
    for i, (l, g) in enumerate(zip(loads, good)):
        if g >= 0.9:
            best, lower = l, i == len(loads) - 1
        elif i > 0 and good[i - 1] >= 0.9:
            l0, g0 = loads[i - 1], good[i - 1]
            best = l0 + (g0 - 0.9) / (g0 - g) * (l - l0)
    return best, lower


def capacity_text(pts):
    """Capacity at SLO as the tables print it: a lower bound when the
    highest load swept passed, an upper one when the lowest failed."""
    cap, lower = capacity(pts)
    if cap == 0:
        return f"< {min(pts):g}"
    return ("≥ " if lower else "") + f"{cap:.1f}"


def mean(rs, key):
    return sum(r[key] for r in rs) / len(rs)


def table(out, workload, at):
    print(f"\n{workload}: capacity at SLO, and each policy at load {at}\n")
    print("| policy | capacity at SLO | goodput | TTFT p50 ms | TTFT p99 ms | TPOT p99 ms | prefix hit | hit ceiling |")
    print("|---|---|---|---|---|---|---|---|")
    for p in POLICIES:
        pts = runs(out, workload, p)
        if not pts:
            continue
        rs = pts.get(at) or []
        row = [p, capacity_text(pts)]
        if rs:
            row += [f"{mean(rs, 'goodput'):.3f}", f"{1e3*mean(rs, 'ttft_p50_s'):.0f}", f"{1e3*mean(rs, 'ttft_p99_s'):.0f}",
                    f"{1e3*mean(rs, 'tpot_p99_s'):.0f}", f"{mean(rs, 'prefix_hit_rate'):.3f}",
                    f"{mean(rs, 'prefix_hit_ceiling'):.3f}" if rs[0].get("prefix_hit_ceiling") else "—"]
        print("| " + " | ".join(row) + " |")


def per_seed(out, workload):
    """Each policy's capacity at SLO seed by seed, from the reports of
    every seed run in out."""
    seeds = sorted({seed_of(f) for p in POLICIES for f in reports(out, workload, p)})
    if not seeds:
        return
    print(f"\n{workload}: capacity at SLO by seed ({' / '.join(map(str, seeds))})\n")
    print("| policy | capacity at SLO |")
    print("|---|---|")
    for p in POLICIES:
        caps = []
        for seed in seeds:
            pts = runs(out, workload, p, str(seed))
            caps.append(capacity_text(pts) if pts else "—")
        print(f"| {p} | {' / '.join(caps)} |")


PANELS = [("chat", "offered req/s"), ("chat-half", "offered req/s, replicas at half speed"),
          ("mooncake", "trace time scale"), ("azure", "trace time scale")]
# The x axis of each workload's own plot.
XLABELS = dict(PANELS, **{"azure-fine": "trace time scale", "azure-burst": "trace time scale, from 180 s",
                          "azure-fixed": "trace time scale, 180 s to 240 s of trace",
                          "mooncake-whole": "trace time scale, the whole trace"})

# Each workload's table, at about round robin's capacity.
TABLES = [("chat", 20), ("chat-half", 10), ("mooncake", 12), ("azure", 8), ("azure-fine", 10),
          ("azure-burst", 2.5), ("azure-fixed", 2.5), ("mooncake-whole", 12)]


def plot(out, path, panels=PANELS):
    runs_of = {wl: {p: runs(out, wl, p) for p in POLICIES} for wl, _ in panels}
    # A workload with fewer than two policies run compares nothing.
    panels = [(wl, x) for wl, x in panels if sum(map(bool, runs_of[wl].values())) >= 2]
    if not panels:
        return
    W, H, M = 400 * len(panels), 340, 50
    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">',
           '<rect width="100%" height="100%" fill="white"/>']
    pw = (W - (len(panels) + 1) * M) / len(panels)
    for k, (wl, xlabel) in enumerate(panels):
        x0 = M + k * (pw + M)
        allpts = runs_of[wl]
        loads = [l for pts in allpts.values() for l in pts]
        lo, hi = min(loads), max(loads)
        X = lambda l: x0 + (l - lo) / (hi - lo or 1) * pw
        Y = lambda g: H - M - g * (H - 2 * M)
        svg.append(f'<text x="{x0 + pw/2}" y="20" text-anchor="middle">{wl}: goodput (both SLOs) against load</text>')
        svg.append(f'<line x1="{x0}" y1="{Y(0)}" x2="{x0+pw}" y2="{Y(0)}" stroke="black"/>')
        svg.append(f'<line x1="{x0}" y1="{Y(0)}" x2="{x0}" y2="{Y(1)}" stroke="black"/>')
        svg.append(f'<line x1="{x0}" y1="{Y(0.9)}" x2="{x0+pw}" y2="{Y(0.9)}" stroke="#bbb" stroke-dasharray="4"/>')
        for g in (0, 0.5, 0.9, 1):
            svg.append(f'<text x="{x0-6}" y="{Y(g)+4}" text-anchor="end">{g}</text>')
        for l in sorted(set(loads)):
            svg.append(f'<text x="{X(l)}" y="{Y(0)+16}" text-anchor="middle">{l:g}</text>')
        svg.append(f'<text x="{x0 + pw/2}" y="{H-8}" text-anchor="middle">{xlabel}</text>')
        for i, p in enumerate(POLICIES):
            pts = allpts[p]
            if not pts:
                continue
            xy = " ".join(f"{X(l):.1f},{Y(sum(r['goodput'] for r in rs)/len(rs)):.1f}" for l, rs in pts.items())
            svg.append(f'<polyline points="{xy}" fill="none" stroke="{COLORS[p]}" stroke-width="2"/>')
            if k == 0:
                svg.append(f'<text x="{x0+8}" y="{Y(0.45)+14*i - 30}" fill="{COLORS[p]}">{p}</text>')
    svg.append("</svg>")
    open(path, "w").write("\n".join(svg) + "\n")


if __name__ == "__main__":
    out, svg = sys.argv[1], sys.argv[2]
    for workload, at in TABLES:
        table(out, workload, at)
    for workload, _ in TABLES:
        per_seed(out, workload)
    plot(out, svg)
    for arg in sys.argv[3:]:
        workload, _, path = arg.partition("=")
        if workload not in XLABELS or not path:
            sys.exit(f"want WORKLOAD=SVG_FILE with WORKLOAD one of {', '.join(XLABELS)}, got {arg!r}")
        plot(out, path, [(workload, XLABELS[workload])])
