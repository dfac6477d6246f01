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
#
# With BASE, two builds are compared instead, paired by seed: for each
# seed and workload, the build in BASE and this one (or LLMGW's) serve the
# same run one after the other, at MULT times the capacity (default 2)
# with admission on, their order swapped from one seed to the next so
# that a drift of the machine falls on both alike. The table pairs them
# seed by seed: critical, overall and sheddable goodput, and fairness as
# a share of the max-min bound. RATE, when set, is the load in requests
# a second in place of MULT times the capacity (no sweep is run); SEEDS
# (or the arguments) are the seeds, default 1 to 10; WORKLOADS narrows
# the workloads (default mixed noisy); DURATION and DRAIN the run's
# (default 60s and 30s).
#
#   BASE=path/to/llmgw scripts/admission.sh
#   BASE=path/to/llmgw SEEDS="7 8" RATE=80 WORKLOADS=mixed DURATION=40s DRAIN=20s scripts/admission.sh
#
# LLMGW=path measures a binary already built in place of the working tree.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-bench-out/admission}
mkdir -p "$out"
if [ -n "${BASE:-}" ]; then
	[ $# -gt 0 ] || set -- ${SEEDS:-1 2 3 4 5 6 7 8 9 10}
else
	[ $# -gt 0 ] || set -- 1 2 3
fi
seeds=("$@")
if [ -n "${LLMGW:-}" ]; then cp "$LLMGW" "$out/llmgw"; else go build -o "$out/llmgw" ./cmd/llmgw; fi
gw=$out/llmgw
run=(--spawn-sim 4 --duration "${DURATION:-60s}" --drain "${DRAIN:-30s}")
sweep=(--spawn-sim 4 --duration 30s --drain 30s --sweep 10:70:10 --seed 1)
read -ra workloads <<<"${WORKLOADS:-mixed noisy}"
declare -A capacity
for w in "${workloads[@]}"; do
	if [ -n "${RATE:-}" ]; then
		continue
	fi
	if [ ! -s "$out/cap-$w.json" ]; then
		echo "== $w: capacity with admission off" >&2
		"$gw" bench "${sweep[@]}" --workload "$w" --json "$out/cap-$w.json" >"$out/cap-$w.txt"
	fi
	capacity[$w]=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["capacity_at_slo"])' "$out/cap-$w.json")
done
# rate_of W MULT: the load W is run at: RATE, or MULT times its capacity.
rate_of() {
	if [ -n "${RATE:-}" ]; then echo "$RATE"; else python3 -c "print(round(${capacity[$1]} * $2, 1))"; fi
}

if [ -n "${BASE:-}" ]; then
	cp "$BASE" "$out/llmgw-base"
	mult=${MULT:-2}
	load=${mult}x # how the runs' load was set, in their names
	[ -n "${RATE:-}" ] && load=${RATE}rps
	turn=0
	for seed in "${seeds[@]}"; do
		for w in "${workloads[@]}"; do
			rate=$(rate_of "$w" "$mult")
			builds=(base this)
			if [ $((turn++ % 2)) = 1 ]; then builds=(this base); fi
			for b in "${builds[@]}"; do
				bin=$gw
				[ "$b" = base ] && bin=$out/llmgw-base
				f=$out/paired-$w-$load-$b-$seed
				echo "== seed $seed, $w at $rate req/s, $b" >&2
				"$bin" bench "${run[@]}" --workload "$w" --rate "$rate" --seed "$seed" --admission on \
					--json "$f.json" >"$f.txt"
			done
		done
	done
	python3 scripts/admission_table.py --paired "$out"
	exit
fi

for seed in "${seeds[@]}"; do
	for w in "${workloads[@]}"; do
		for mult in 1 1.5 2; do
			rate=$(rate_of "$w" "$mult")
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
