#!/usr/bin/env bash
# The replay on a real engine of docs/BENCHMARKS.md: the synthetic Mooncake
# and Azure traces, scaled to what Ollama serving the tiny model of
# scripts/ollama.sh does on this machine, through `llmgw serve` to REPLICAS
# (default 2) `ollama serve` replicas of four slots each, once per routing
# policy, the replicas started afresh for each run so that no run finds
# another's prompts in their slots. (OLLAMA_MULTIUSER_CACHE is left off:
# with it v0.17.4's llama.cpp runner aborts at its first fork of a slot,
# "seq_cp() is only supported for full KV buffers".) Writes each run's
# bench report (text and JSON) and the replicas' debug logs into OUT
# (default bench-out/ollama), and prints one line a run: goodput at each
# time scale, capacity at SLO, TTFT at the lowest scale, and the prompt
# tokens the replicas' runners took, found in a slot and evaluated, summed
# from their logs ("loading cache slot").
#
#   scripts/ollama-replay.sh
#
# POLICIES (default "round_robin least_request gie auto"), TRACES (default
# "mooncake azure"), SEED (default 1). MOONCAKE_WINDOW and AZURE_WINDOW are
# the window replayed of each trace (defaults below); Mooncake's prompts
# share prefixes late in its trace, e.g.
# MOONCAKE_WINDOW="--trace-from 1000s --trace-to 1020s", where a third of
# its blocks repeat. About 3 minutes a policy and trace.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-bench-out/ollama}
replicas=${REPLICAS:-2}
read -r -a policies <<<"${POLICIES:-round_robin least_request gie auto}"
read -r -a traces <<<"${TRACES:-mooncake azure}"
seed=${SEED:-1}
mkdir -p "$out"
out=$(cd "$out" && pwd)
fixture=$(bash scripts/ollama.sh)
go build -o "$out/llmgw" ./cmd/llmgw
gw=$out/llmgw
models=$out/models
mkdir -p "$models" "$out/home"

# Each trace's replay: the file, how much shorter its requests are made, the
# window replayed, the same requests at every time scale, and the time
# scales swept: slower than the trace's own clock, as two replicas of a
# 2-layer model on a shared 2-core machine evaluate a few hundred prompt
# tokens a second. The SLOs are as loose as that machine.
declare -A trace_args=(
	[mooncake]="--trace ../shared/traces/mooncake-synthetic.jsonl --length-scale 64 ${MOONCAKE_WINDOW:---trace-to 10s} --sweep 0.2:0.6:0.2"
	[azure]="--trace ../shared/traces/azure-llm-2023-code.csv --length-scale 32 ${AZURE_WINDOW:---trace-from 180s --trace-to 190s} --sweep 0.2:0.6:0.2"
)

pids=()
stop() {
	for p in "${pids[@]}"; do
		kill -TERM -- "-$p" 2>/dev/null || true
	done
	for p in "${pids[@]}"; do
		while kill -0 "$p" 2>/dev/null; do sleep 0.2; done
	done
	pids=()
}
trap stop EXIT

# up URL: waits until an Ollama server or the gateway answers at URL.
up() {
	for _ in $(seq 600); do
		curl -fsS -o /dev/null "$1" 2>/dev/null && return 0
		sleep 0.2
	done
	echo "ollama-replay: nothing answers at $1" >&2
	return 1
}

# start RUN: the replicas on :19300 up, each in its own process group, the
# model created once and loaded on each, then the gateway on :19280 with
# policy $policy.
start() {
	local eps=() i host
	for i in $(seq 0 $((replicas - 1))); do
		host=127.0.0.1:$((19300 + i))
		HOME=$out/home OLLAMA_HOST=$host OLLAMA_MODELS=$models OLLAMA_NUM_PARALLEL=4 \
			OLLAMA_DEBUG=1 OLLAMA_KEEP_ALIVE=-1 OLLAMA_NOPRUNE=1 \
			setsid "$fixture/bin/ollama" serve >"$out/$1-r$i.log" 2>&1 &
		pids+=($!)
		up "http://$host/api/version"
		if [ "$i" = 0 ] && [ ! -e "$out/created" ]; then
			(cd "$fixture/model" && HOME=$out/home OLLAMA_HOST=$host "$fixture/bin/ollama" create llmgw-tiny -f Modelfile >/dev/null 2>&1)
			touch "$out/created"
		fi
		curl -fsS -o /dev/null "http://$host/api/generate" -d '{"model":"llmgw-tiny"}'
		eps+=("{name: r$i, url: \"http://$host/v1\"}")
	done
	local list
	list=$(printf '%s, ' "${eps[@]}")
	cat >"$out/$1.yaml" <<YAML
server: {listen: "127.0.0.1:19280", admin_listen: "127.0.0.1:19281"}
router: {auth: none}
store: {url: "memory:"}
pools:
  - {name: ollama, kind: ollama, policy: $policy, endpoints: [${list%, }]}
models:
  - {name: tiny, pool: ollama, upstream_model: llmgw-tiny, slo: {ttft_p99: 5s, tpot_p99: 500ms}}
YAML
	setsid "$gw" serve --config "$out/$1.yaml" --log-level warn >"$out/$1-gw.log" 2>&1 &
	pids+=($!)
	up http://127.0.0.1:19281/healthz
	# What answers must be this gateway, not one left on the port.
	sleep 1
	kill -0 "${pids[-1]}" 2>/dev/null || { cat "$out/$1-gw.log" >&2; return 1; }
}

# tally RUN: the prompt tokens the replicas' runners took, found in a slot
# and evaluated.
tally() {
	cat "$out/$1"-r*.log | sed -n 's/.*msg="loading cache slot" id=[0-9]* cache=[0-9]* prompt=\([0-9]*\) used=\([0-9]*\) remaining=\([0-9]*\).*/\1 \2 \3/p' |
		awk '{p += $1; u += $2; r += $3} END {printf "prompt tokens %d, from slots %d (%.0f%%), evaluated %d\n", p, u, p ? 100 * u / p : 0, r}'
}

# summary FILE: a run's goodput at each time scale, its capacity at SLO and
# its TTFT at the lowest scale, from its JSON report.
summary() {
	python3 - "$1" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
runs = d["runs"]
cap = d["capacity_at_slo"]
cap = "<%g" % runs[0]["time_scale"] if cap == 0 else "%.2f" % cap
print("goodput %s at time scale %s; capacity %s; TTFT p50 %.1f s, p99 %.1f s at %g" % (
    " / ".join("%.2f" % r["goodput"] for r in runs), " / ".join("%g" % r["time_scale"] for r in runs),
    cap, runs[0]["ttft_p50_s"], runs[0]["ttft_p99_s"], runs[0]["time_scale"]))
PY
}

for trace in "${traces[@]}"; do
	for policy in "${policies[@]}"; do
		run=$trace-$policy
		echo "== $run" >&2
		start "$run"
		# shellcheck disable=SC2086
		setsid "$gw" bench --target http://127.0.0.1:19280 --model tiny --workload trace ${trace_args[$trace]} \
			--slo-ttft 5s --slo-tpot 500ms --drain 15s --seed "$seed" \
			--json "$out/$run.json" >"$out/$run.txt" &
		pids+=($!)
		wait "${pids[-1]}"
		stop
		echo "$run: $(summary "$out/$run.json"); engine: $(tally "$run")"
	done
done
