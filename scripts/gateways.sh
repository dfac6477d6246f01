#!/usr/bin/env bash
# The two-gateway comparison of docs/BENCHMARKS.md: policy auto through one
# gateway, through two that share their prefix indexes and loads over
# Redis, through two that share the indexes alone, and through two that
# share nothing, in front of the same four simulated replicas (one 1.5x
# slower), swept on the Mooncake trace and on chat. Writes one JSON report
# and one text table per run into OUT (default bench-out/gateways).
#
#   REDIS=redis://127.0.0.1:6379/0 scripts/gateways.sh [SEED...]   (default seeds 1 2 3)
#
# About 16 minutes a seed.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-bench-out/gateways}
redis=${REDIS:-redis://127.0.0.1:6379/0}
mkdir -p "$out"
[ $# -gt 0 ] || set -- 1 2 3
go build -o "$out/llmgw" ./cmd/llmgw
gw=$out/llmgw
pool=(--spawn-sim 4 --sim-speeds 1,1,1,0.667 --policy auto)
trace=("${pool[@]}" --workload trace --trace ../shared/traces/mooncake-synthetic.jsonl
	--length-scale 16 --duration 30s --drain 20s --sweep 12:24:4)
chat=("${pool[@]}" --duration 20s --drain 20s --sweep 30:60:10)
for seed in "$@"; do
	for shape in 1gw 2gw-shared 2gw-index 2gw; do
		case $shape in
		1gw) gws=(--gateways 1) ;;
		2gw-shared) gws=(--gateways 2 --redis "$redis") ;;
		2gw-index) gws=(--gateways 2 --redis "$redis" --share-load=false) ;;
		2gw) gws=(--gateways 2) ;;
		esac
		echo "== seed $seed, $shape: mooncake" >&2
		"$gw" bench "${trace[@]}" "${gws[@]}" --seed "$seed" \
			--json "$out/mooncake-$shape-$seed.json" >"$out/mooncake-$shape-$seed.txt"
		echo "== seed $seed, $shape: chat" >&2
		"$gw" bench "${chat[@]}" "${gws[@]}" --seed "$seed" \
			--json "$out/chat-$shape-$seed.json" >"$out/chat-$shape-$seed.txt"
	done
done
grep -H 'capacity at SLO' "$out"/*.txt
