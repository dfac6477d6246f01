#!/usr/bin/env bash
# The routing matrix of docs/BENCHMARKS.md: engine profiles × workloads ×
# policies × seeds, each cell a capacity at SLO found by a sweep around
# the profile's knee and refined twice, through the in-process gateway's
# routing in front of four simulated replicas, one 1.5x slower, on a
# virtual clock (llmgw bench --virtual). Writes one JSON report per cell
# into OUT (default bench-out/matrix), then the table
# (scripts/matrix_table.py).
#
#   scripts/matrix.sh [SEED...]                     (default seeds 1 2 3)
#
# PROFILES, WORKLOADS and POLICIES narrow it (space-separated; default
# every profile, chat mixed mooncake azure-burst, every policy); JOBS
# cells run at once (default 2). The whole matrix (6 × 4 × 6 × 3 = 432
# cells) takes about 40 minutes on a 2-core machine. REAL=1 runs it on
# the wall clock through HTTP instead: about a day. The profile
# llamacpp_blocks, not run by default, is llamacpp's replicas behind a
# pool that models their caches as vLLM's blocks (--pool-kind vllm).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-bench-out/matrix}
mkdir -p "$out"
seeds=("${@:-1 2 3}")
read -ra seeds <<<"${seeds[*]}"
read -ra profiles <<<"${PROFILES:-chunked slots prefill_heavy decode_heavy radix llamacpp}"
read -ra workloads <<<"${WORKLOADS:-chat mixed mooncake azure-burst}"
read -ra policies <<<"${POLICIES:-round_robin least_request prefix gie sglang auto}"
clock=--virtual
if [[ ${REAL:-} == 1 ]]; then clock=; fi
go build -o "$out/llmgw" ./cmd/llmgw
gw=$out/llmgw
mooncake="--workload trace --trace ../shared/traces/mooncake-synthetic.jsonl --length-scale 16 --trace-to 600s --drain 20s"
azure="--workload trace --trace ../shared/traces/azure-llm-2023-code.csv --length-scale 4 --trace-from 180s --trace-to 240s --drain 15s"

# sweep is the loads swept for a profile on a workload: from below round
# robin's knee to past auto's and gie's on seed 1, so that every policy's
# knee lies inside (a cell whose highest load passes reports "at least").
sweep() {
	case ${1%_blocks}/$2 in
	prefill_heavy/chat) echo 0.5:6:0.5 ;;
	llamacpp/chat) echo 1:8:0.5 ;;
	llamacpp/mixed) echo 6:24:2 ;;
	llamacpp/mooncake) echo 4:24:2 ;;
	llamacpp/azure-burst) echo 1:8:0.5 ;;
	decode_heavy/chat) echo 10:80:5 ;;
	*/chat) echo 4:40:2 ;;
	prefill_heavy/mixed) echo 2:20:2 ;;
	decode_heavy/mixed) echo 20:120:10 ;;
	slots/mixed) echo 14:38:2 ;;
	*/mixed) echo 20:44:2 ;;
	slots/mooncake) echo 50:110:5 ;;
	prefill_heavy/mooncake) echo 1:8:0.5 ;;
	decode_heavy/mooncake) echo 20:80:5 ;;
	*/mooncake) echo 8:24:2 ;;
	slots/azure-burst) echo 20:160:10 ;;
	prefill_heavy/azure-burst) echo 0.1:1:0.1 ;;
	decode_heavy/azure-burst) echo 4:24:2 ;;
	*/azure-burst) echo 1:5:0.5 ;;
	esac
}

# args is a workload's flags.
args() {
	case $1 in
	chat) echo "--workload chat --duration 120s --drain 30s --sim-speeds 0.5,0.5,0.5,0.333" ;;
	mixed) echo "--workload mixed --duration 60s --drain 20s --sim-speeds 1,1,1,0.667" ;;
	mooncake) echo "$mooncake --sim-speeds 1,1,1,0.667" ;;
	azure-burst) echo "$azure --sim-speeds 1,1,1,0.667" ;;
	*) echo "unknown workload $1" >&2; exit 2 ;;
	esac
}

# The radix profile's cache is held to 4,096 blocks (64k tokens) a
# replica: its eviction order differs from the blocks cache's only once a
# cache is full.
blocks() { [[ $1 == radix ]] && echo "--sim-num-blocks 4096" || true; }

# engine is a profile's flags: its replicas' profile, and llamacpp_blocks's
# pool kind.
engine() {
	case $1 in
	llamacpp_blocks) echo "--sim-profile llamacpp --pool-kind vllm" ;;
	*) echo "--sim-profile $1" ;;
	esac
}

for seed in "${seeds[@]}"; do
	for profile in "${profiles[@]}"; do
		for workload in "${workloads[@]}"; do
			a=$(args "$workload")
			for policy in "${policies[@]}"; do
				name=$profile-$workload-$policy-$seed
				echo "$gw bench --spawn-sim 4 $clock $(engine "$profile") $(blocks "$profile") $a --sweep $(sweep "$profile" "$workload") --refine 2 --seed $seed --policy $policy --json $out/$name.json >$out/$name.txt 2>$out/$name.err && echo '== $name' >&2"
			done
		done
	done
done | xargs -P "${JOBS:-2}" -I{} bash -c {}
python3 scripts/matrix_table.py "$out"
