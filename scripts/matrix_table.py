#!/usr/bin/env python3
"""The routing matrix's table, from the JSON reports scripts/matrix.sh
writes (PROFILE-WORKLOAD-POLICY-SEED.json): per profile and workload,
each policy's capacity at SLO (mean over the seeds, "≥" where a seed's
highest load passed, "<" where its lowest failed), auto against the best
other policy, and each policy's prefix hit rate below the knee against
the best, at the highest load every policy of the cell passed on every
seed. A cell passes when auto's capacity is at least TOLERANCE short of
the best other's (the seeds' noise: a refined sweep's step is 2-3% of a
knee) and its hit rate at least 0.95 of the best; the last line counts
the cells that pass. Standard library only.

    scripts/matrix_table.py OUT_DIR
"""
import glob, json, os, sys
from collections import defaultdict

POLICIES = ["round_robin", "least_request", "prefix", "gie", "sglang", "auto"]
PROFILES = ["chunked", "slots", "prefill_heavy", "decode_heavy", "radix", "llamacpp", "llamacpp_blocks"]
WORKLOADS = ["chat", "mixed", "mooncake", "azure-burst"]
PASS = 0.9  # goodput at SLO, as the bench's capacity
TOLERANCE = 0.02  # auto's capacity may fall this share short of the best other's
HIT_SHARE = 0.95  # auto's hit rate below the knee, of the best policy's


def load(out):
    """Reports by (profile, workload) then policy then seed."""
    cells = defaultdict(lambda: defaultdict(dict))
    for path in glob.glob(os.path.join(out, "*.json")):
        name = os.path.basename(path)[: -len(".json")]
        profile = next((p for p in PROFILES if name.startswith(p + "-")), None)
        if profile is None:
            continue
        rest = name[len(profile) + 1:]
        workload = next((w for w in WORKLOADS if rest.startswith(w + "-")), None)
        if workload is None:
            continue
        policy, seed = rest[len(workload) + 1:].rsplit("-", 1)
        cells[(profile, workload)][policy][int(seed)] = json.load(open(path))
    return cells


def capacity(reports):
    """Mean capacity over the seeds, with "≥" or "<" when any seed's
    bound is one-sided."""
    caps = [r["capacity_at_slo"] for r in reports.values()]
    mark = ""
    if any(r.get("capacity_lower_bound") for r in reports.values()):
        mark = "≥"
    elif any(r["capacity_at_slo"] == 0 for r in reports.values()):
        mark = "<"
    return sum(caps) / len(caps), mark


def below_knee(policies):
    """The highest load every policy of the cell ran and passed on every
    seed, and each policy's mean hit rate there; None when there is none."""
    passed = None
    for reports in policies.values():
        for r in reports.values():
            ok = {run.get("time_scale") or run["rate"] for run in r["runs"] if run["goodput"] >= PASS}
            passed = ok if passed is None else passed & ok
    if not passed:
        return None, {}
    at = max(passed)
    hits = {}
    for policy, reports in policies.items():
        hs = [run["prefix_hit_rate"] for r in reports.values() for run in r["runs"]
              if (run.get("time_scale") or run["rate"]) == at]
        hits[policy] = sum(hs) / len(hs)
    return at, hits


def main(out):
    cells = load(out)
    if not cells:
        sys.exit(f"no matrix reports in {out}")
    present = [p for p in POLICIES if any(p in c for c in cells.values())]
    print("| profile | workload | seeds | " + " | ".join(present) +
          " | auto ÷ best other | hit below the knee: load | " +
          " | ".join(f"{p} hit" for p in present) + " | auto hit ÷ best | passes |")
    print("|" + "---|" * (7 + 2 * len(present)))
    passed = total = 0
    for profile in PROFILES:
        for workload in WORKLOADS:
            policies = cells.get((profile, workload))
            if not policies:
                continue
            seeds = sorted({s for reps in policies.values() for s in reps})
            caps = {p: capacity(policies[p]) for p in present if p in policies}
            row = [profile, workload, ",".join(map(str, seeds))]
            row += [f"{caps[p][1]}{caps[p][0]:.1f}" if p in caps else "" for p in present]
            others = [caps[p][0] for p in caps if p != "auto"]
            ratio = caps["auto"][0] / max(others) if "auto" in caps and others and max(others) > 0 else None
            row.append(f"{ratio:.2f}" if ratio is not None else "")
            at, hits = below_knee(policies)
            row.append(f"{at:g}" if at is not None else "none passed")
            row += [f"{hits[p]:.3f}" if p in hits else "" for p in present]
            best = max(hits.values()) if hits else 0
            hit = hits["auto"] / best if "auto" in hits and best > 0 else None
            row.append(f"{hit:.3f}" if hit is not None else "")
            if "auto" in caps:
                total += 1
                rival = max((p for p in caps if p != "auto"), key=lambda p: caps[p][0], default=None)
                if ratio is None or caps["auto"][1] == "<" or caps[rival][1]:
                    # A knee outside the sweep: the bounds say nothing of
                    # the two against each other. auto passing every load
                    # (≥) against a rival's knee is still a comparison.
                    row.append("**knee outside the sweep**")
                else:
                    ok = ratio >= 1 - TOLERANCE and (hit is None or hit >= HIT_SHARE)
                    passed += ok
                    row.append("yes" if ok else "**no**")
            print("| " + " | ".join(row) + " |")
    print(f"\n{passed} of {total} cells pass: auto within {TOLERANCE:.0%} of the best other policy's capacity, "
          f"and at least {HIT_SHARE} of the best hit rate below the knee.")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
