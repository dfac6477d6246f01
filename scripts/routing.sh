#!/usr/bin/env bash
# The routing comparison of docs/BENCHMARKS.md: every policy swept on the
# chat workload and on the Mooncake and Azure traces, through one in-process gateway
# (and, for auto, two) in front of four simulated replicas, one 1.5x
# slower. Writes one JSON report and one text table per run into OUT
# (default bench-out/routing), then the summary table and plot.
#
#   scripts/routing.sh [SEED...]        (default seed 1)
#
# PROFILE=NAME runs the replicas under that engine profile (llmgw sim
# --help lists them; default chunked).
#
# Each sweep but Azure's around its knee (7:11:1) is refined twice where
# capacity lies (--refine). Two of the workloads replay the same requests
# at every time scale (--trace-to, or the whole trace): the Azure trace's
# first burst, and the whole Mooncake trace (round robin, gie and auto).
# About 20 minutes a policy, three hours a seed.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-bench-out/routing}
mkdir -p "$out"
seeds=("${@:-1}")
go build -o "$out/llmgw" ./cmd/llmgw
gw=$out/llmgw
pool=(--spawn-sim 4 --sim-speeds 1,1,1,0.667 --sim-profile "${PROFILE:-chunked}")
chat=("${pool[@]}" --duration 20s --drain 20s --sweep 10:40:10 --refine 2)
trace=("${pool[@]}" --workload trace --trace ../shared/traces/mooncake-synthetic.jsonl
	--length-scale 16 --duration 30s --drain 20s --refine 2)
azure=("${pool[@]}" --workload trace --trace ../shared/traces/azure-llm-2023-code.csv
	--length-scale 4 --duration 20s --drain 15s)
burst=("${pool[@]}" --workload trace --trace ../shared/traces/azure-llm-2023-code.csv
	--length-scale 4 --trace-from 180s --trace-to 240s --drain 15s --sweep 2:4:0.5 --refine 2)
whole=("${pool[@]}" --workload trace --trace ../shared/traces/mooncake-synthetic.jsonl
	--length-scale 16 --drain 20s --sweep 8:24:4 --refine 2)
for seed in "${seeds[@]}"; do
	for policy in round_robin least_request prefix gie sglang auto; do
		echo "== seed $seed, $policy: chat" >&2
		"$gw" bench "${chat[@]}" --seed "$seed" --policy "$policy" \
			--json "$out/chat-$policy-$seed.json" >"$out/chat-$policy-$seed.txt"
		echo "== seed $seed, $policy: chat, replicas at half speed" >&2
		"$gw" bench "${chat[@]/1,1,1,0.667/0.5,0.5,0.5,0.333}" --seed "$seed" --policy "$policy" \
			--json "$out/chat-half-$policy-$seed.json" >"$out/chat-half-$policy-$seed.txt"
		echo "== seed $seed, $policy: mooncake" >&2
		"$gw" bench "${trace[@]}" --seed "$seed" --policy "$policy" --sweep 4:24:4 \
			--json "$out/mooncake-$policy-$seed.json" >"$out/mooncake-$policy-$seed.txt"
		echo "== seed $seed, $policy: azure" >&2
		"$gw" bench "${azure[@]}" --seed "$seed" --policy "$policy" --sweep 4:16:4 --refine 2 \
			--json "$out/azure-$policy-$seed.json" >"$out/azure-$policy-$seed.txt"
		echo "== seed $seed, $policy: azure, around the knee" >&2
		"$gw" bench "${azure[@]}" --seed "$seed" --policy "$policy" --sweep 7:11:1 \
			--json "$out/azure-fine-$policy-$seed.json" >"$out/azure-fine-$policy-$seed.txt"
		echo "== seed $seed, $policy: azure, its first burst" >&2
		"$gw" bench "${azure[@]}" --seed "$seed" --policy "$policy" --trace-from 180s --sweep 2:4:0.5 --refine 2 \
			--json "$out/azure-burst-$policy-$seed.json" >"$out/azure-burst-$policy-$seed.txt"
		echo "== seed $seed, $policy: azure, its first burst, the same 531 requests at every time scale" >&2
		"$gw" bench "${burst[@]}" --seed "$seed" --policy "$policy" \
			--json "$out/azure-fixed-$policy-$seed.json" >"$out/azure-fixed-$policy-$seed.txt"
		case $policy in round_robin | gie | auto)
			echo "== seed $seed, $policy: the whole mooncake trace" >&2
			"$gw" bench "${whole[@]}" --seed "$seed" --policy "$policy" \
				--json "$out/mooncake-whole-$policy-$seed.json" >"$out/mooncake-whole-$policy-$seed.txt"
		esac
	done
	# Two gateways in front of the same replicas, requests spread at random.
	"$gw" bench "${chat[@]}" --seed "$seed" --policy auto --gateways 2 \
		--json "$out/chat-auto-2gw-$seed.json" >"$out/chat-auto-2gw-$seed.txt"
	"$gw" bench "${trace[@]}" --seed "$seed" --policy auto --gateways 2 --sweep 4:24:4 \
		--json "$out/mooncake-auto-2gw-$seed.json" >"$out/mooncake-auto-2gw-$seed.txt"
done
grep -H 'capacity at SLO' "$out"/*.txt
python3 scripts/routing_plot.py "$out" docs/bench/routing-policies.svg \
	azure-burst=docs/bench/routing-azure-burst.svg mooncake=docs/bench/routing-mooncake.svg \
	azure-fixed=docs/bench/routing-azure-fixed.svg mooncake-whole=docs/bench/routing-mooncake-whole.svg
