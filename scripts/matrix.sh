#!/usr/bin/env bash
# The routing matrix of docs/BENCHMARKS.md: engine profiles × workloads ×
# policies × seeds, each cell a capacity at SLO found by a sweep around
# the profile's knee and refined once, through one in-process gateway in
# front of four simulated replicas, one 1.5x slower. Writes one JSON
# report per cell into OUT (default bench-out/matrix), then the table
# (scripts/matrix_table.py).
#
#   scripts/matrix.sh [SEED...]                     (default seeds 1 2 3)
#
# PROFILES, WORKLOADS and POLICIES narrow it (space-separated; default
# every profile, chat mixed mooncake azure-burst, every policy). A cell
# is five or six runs of 5-75 s and a drain each: about 4 minutes on
# Mooncake, so the whole matrix (5 × 4 × 6 × 3 = 360 cells) is about a
# day on a 2-core machine; Mooncake, two policies, one seed and two
# profiles, about 16 minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-bench-out/matrix}
mkdir -p "$out"
seeds=("${@:-1 2 3}")
read -ra seeds <<<"${seeds[*]}"
read -ra profiles <<<"${PROFILES:-chunked slots prefill_heavy decode_heavy radix}"
read -ra workloads <<<"${WORKLOADS:-chat mixed mooncake azure-burst}"
read -ra policies <<<"${POLICIES:-round_robin least_request prefix gie sglang auto}"
go build -o "$out/llmgw" ./cmd/llmgw
gw=$out/llmgw
mooncake=(--workload trace --trace ../shared/traces/mooncake-synthetic.jsonl --length-scale 16 --trace-to 600s --drain 20s)
azure=(--workload trace --trace ../shared/traces/azure-llm-2023-code.csv --length-scale 4 --trace-from 180s --trace-to 240s --drain 15s)

# sweep is the loads swept for a profile on a workload: around where
# round robin and auto cross their SLOs on seed 1, so that every policy's
# knee lies inside (a cell whose highest load passes reports "at least").
sweep() {
	case $1/$2 in
	slots/chat | slots/mixed) echo 20:80:20 ;;
	*/chat | */mixed) echo 10:40:10 ;;
	slots/mooncake) echo 40:120:20 ;;
	decode_heavy/mooncake) echo 6:18:4 ;;
	prefill_heavy/mooncake) echo 4:16:4 ;;
	*/mooncake) echo 8:24:4 ;;
	slots/azure-burst) echo 2:10:2 ;;
	*/azure-burst) echo 1:4:1 ;;
	esac
}

for seed in "${seeds[@]}"; do
	for profile in "${profiles[@]}"; do
		for workload in "${workloads[@]}"; do
			case $workload in
			chat) args=(--workload chat --duration 20s --drain 20s --sim-speeds 0.5,0.5,0.5,0.333) ;;
			mixed) args=(--workload mixed --duration 20s --drain 20s --sim-speeds 1,1,1,0.667) ;;
			mooncake) args=("${mooncake[@]}" --sim-speeds 1,1,1,0.667) ;;
			azure-burst) args=("${azure[@]}" --sim-speeds 1,1,1,0.667) ;;
			*) echo "unknown workload $workload" >&2; exit 2 ;;
			esac
			for policy in "${policies[@]}"; do
				name=$profile-$workload-$policy-$seed
				echo "== $name" >&2
				"$gw" bench --spawn-sim 4 --sim-profile "$profile" "${args[@]}" --sweep "$(sweep "$profile" "$workload")" --refine 1 \
					--seed "$seed" --policy "$policy" --json "$out/$name.json" >"$out/$name.txt"
			done
		done
	done
done
python3 scripts/matrix_table.py "$out"
