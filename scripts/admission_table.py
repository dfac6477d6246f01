#!/usr/bin/env python3
"""The admission comparison's summary, from the JSON reports
scripts/admission.sh writes: per workload and load, admission on against
off, each figure the mean over seeds with its range. Standard library only.

    scripts/admission_table.py OUT_DIR
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


def main():
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
