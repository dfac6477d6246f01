#!/usr/bin/env python3
"""The admission comparison's summary, from the JSON reports
scripts/admission.sh writes: per workload and load, admission on against
off, each figure the mean over seeds with its range. Standard library only.

    scripts/admission_table.py OUT_DIR
    scripts/admission_table.py --paired OUT_DIR   (BASE= runs: two builds by seed)
"""
import glob, json, os, re, sys


def reports(out):
    """{(workload, mult, adm): [report per seed]}"""
    by = {}
    for path in glob.glob(os.path.join(out, "*.json")):
        m = re.fullmatch(r"(mixed|noisy)-([\d.]+)-(on|off)-(\d+)\.json", os.path.basename(path))
        if m:
            by.setdefault((m[1], float(m[2]), m[3]), []).append(json.load(open(path)))
    return by


def fig(xs, fmt="{:.3f}"):
    """Mean over seeds, and the range when they differ."""
    if not xs:
        return "—"
    mean = sum(xs) / len(xs)
    if max(xs) - min(xs) < 1e-9:
        return fmt.format(mean)
    return f"{fmt.format(mean)} ({fmt.format(min(xs))}–{fmt.format(max(xs))})"


def row(rs, adm):
    cls = lambda r, c: r["by_class"].get(c, {})
    crit = [cls(r, "critical")["goodput"] for r in rs if "critical" in r["by_class"]]
    rej = [r for r in rs if r["rejected"] > 0]
    return [
        adm, str(len(rs)),
        fig([r["goodput"] for r in rs]),
        fig(crit) if crit else "—",
        fig([cls(r, "standard")["goodput"] for r in rs if "standard" in r["by_class"]]),
        fig([r["jain"] for r in rs if r.get("jain")]),
        fig([r["jain_max_min"] for r in rs if r.get("jain_max_min")]),
        fig([r["rejected_p50_s"] * 1000 for r in rej], "{:.1f}") if rej else "—",
        fig([float(r["late"]) for r in rs], "{:.0f}"),
        fig([r["errors"] for r in rs], "{:.0f}"),
        fig([r["ttft_p99_s"] * 1000 for r in rs], "{:.0f}"),
        fig([r["tpot_p99_s"] * 1000 for r in rs], "{:.0f}"),
    ]


def paired(out):
    """{(workload, load): {seed: {build: report}}} of admission.sh's BASE
    runs, load being how their load was set: "2x" (times the capacity)
    or "80rps"."""
    by = {}
    for path in glob.glob(os.path.join(out, "paired-*.json")):
        m = re.fullmatch(r"paired-(mixed|noisy)-([\d.]+(?:x|rps))-(base|this)-(\d+)\.json", os.path.basename(path))
        if m:
            by.setdefault((m[1], m[2]), {}).setdefault(int(m[4]), {})[m[3]] = json.load(open(path))
    return by


def figures(r):
    """A run's critical, overall and sheddable goodput, and its fairness
    as a share of the max-min bound; None where the run has none."""
    cls = lambda c: r["by_class"].get(c, {}).get("goodput")
    fair = r["jain"] / r["jain_max_min"] if r.get("jain") and r.get("jain_max_min") else None
    return [cls("critical"), r["goodput"], cls("sheddable"), fair]


def print_paired(out):
    """Each seed's figures for the two builds side by side, then their
    means and how many seeds this build is at or above the base on."""
    names = ["critical goodput", "goodput", "sheddable goodput", "Jain ÷ max-min"]
    cell = lambda v: "—" if v is None else f"{v:.3f}"
    for (w, load), seeds in sorted(paired(out).items()):
        pairs = {s: b for s, b in seeds.items() if "base" in b and "this" in b}
        if not pairs:
            continue
        rate = next(iter(pairs.values()))["this"]["rate"]
        times = f" ({load[:-1]}× capacity)" if load.endswith("x") else ""
        print(f"\n{w} at {rate:g} req/s{times}, admission on: base / this build, by seed\n")
        print("| seed | " + " | ".join(names) + " |")
        print("|---|" + "---|" * len(names))
        cols = [[] for _ in names]
        for s in sorted(pairs):
            fb, ft = figures(pairs[s]["base"]), figures(pairs[s]["this"])
            for i, (b, t) in enumerate(zip(fb, ft)):
                if b is not None and t is not None:
                    cols[i].append((b, t))
            print(f"| {s} | " + " | ".join(f"{cell(b)} / {cell(t)}" for b, t in zip(fb, ft)) + " |")
        mean = lambda xs: sum(xs) / len(xs)
        print("| mean | " + " | ".join(
            f"{mean([b for b, _ in c]):.3f} / {mean([t for _, t in c]):.3f}" if c else "—" for c in cols) + " |")
        print("| this ≥ base | " + " | ".join(
            f"{sum(t >= b for b, t in c)} of {len(c)}" if c else "—" for c in cols) + " |")
        crit = [t for _, t in cols[0]]
        if crit:
            print(f"\ncritical goodput ≥ 0.99 on {sum(c >= 0.99 for c in crit)} of {len(crit)} seeds (this build)")


def main():
    if sys.argv[1] == "--paired":
        print_paired(sys.argv[2])
        return
    out = sys.argv[1]
    by = reports(out)
    head = ["admission", "seeds", "goodput", "critical goodput", "standard goodput", "Jain",
            "max-min Jain", "429 p50 ms", "served late", "errors", "TTFT p99 ms", "TPOT p99 ms"]
    for w in ("mixed", "noisy"):
        for mult in sorted({k[1] for k in by if k[0] == w}):
            on, off = by.get((w, mult, "on"), []), by.get((w, mult, "off"), [])
            rate = (on or off)[0]["rate"]
            print(f"\n{w} at {mult:g}× capacity ({rate:g} req/s)\n")
            print("| " + " | ".join(head) + " |")
            print("|" + "---|" * len(head))
            for adm, rs in (("on", on), ("off", off)):
                if rs:
                    print("| " + " | ".join(row(rs, adm)) + " |")
            if on and off:
                g_on = sum(r["goodput"] for r in on) / len(on)
                g_off = sum(r["goodput"] for r in off) / len(off)
                if g_off >= 0.01:
                    print(f"\ngoodput on/off: {g_on / g_off:.2f}×")
                else:
                    print(f"\ngoodput on {g_on:.3f}, off {g_off:.3f}")


if __name__ == "__main__":
    main()
