#!/usr/bin/env bash
# The admission comparison of docs/BENCHMARKS.md: the mixed and noisy
# workloads on four simulated replicas through the in-process gateway
# (policy auto), first swept with admission off to find each one's
# capacity at SLO, then at 1x, 1.5x and 2x that capacity with admission on
# and off, once per seed. Writes one JSON report and one text table per
# run into OUT (default bench-out/admission), then the summary table.
#
#   scripts/admission.sh [SEED...]        (default seeds 1 2 3)
#
# About 40 minutes a seed, and 15 for the sweeps.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-bench-out/admission}
mkdir -p "$out"
[ $# -gt 0 ] || set -- 1 2 3
seeds=("$@")
go build -o "$out/llmgw" ./cmd/llmgw
gw=$out/llmgw
run=(--spawn-sim 4 --duration 60s --drain 30s)
sweep=(--spawn-sim 4 --duration 30s --drain 30s --sweep 10:70:10 --seed 1)
declare -A capacity
for w in mixed noisy; do
	if [ ! -s "$out/cap-$w.json" ]; then
		echo "== $w: capacity with admission off" >&2
		"$gw" bench "${sweep[@]}" --workload "$w" --json "$out/cap-$w.json" >"$out/cap-$w.txt"
	fi
	capacity[$w]=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["capacity_at_slo"])' "$out/cap-$w.json")
done
for seed in "${seeds[@]}"; do
	for w in mixed noisy; do
		for mult in 1 1.5 2; do
			rate=$(python3 -c "print(round(${capacity[$w]} * $mult, 1))")
			for adm in on off; do
				f=$out/$w-$mult-$adm-$seed
				echo "== seed $seed, $w at ${mult}x ($rate req/s), admission $adm" >&2
				"$gw" bench "${run[@]}" --workload "$w" --rate "$rate" --seed "$seed" --admission "$adm" \
					--json "$f.json" >"$f.txt"
			done
		done
	done
done
python3 scripts/admission_table.py "$out"
