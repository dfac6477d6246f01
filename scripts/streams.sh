#!/usr/bin/env bash
# Streaming through llmgw under concurrency: `llmgw sim` at 100 ms to the
# first token and 20 ms a token, 200-token answers, sent by `llmgw bench`
# at the rate that keeps N streams open (N / 4.1 s per stream), straight to
# the sim and through `llmgw serve`, one after the other in one run.
# Prints TTFT and inter-token gap percentiles of both, and for the gateway
# the memory each open stream holds and the CPU time per relayed token.
#
#   scripts/streams.sh [STREAMS...]        (default: 100 1000)
#
# LLMGW=path runs a binary already built; BASE=path also runs another
# build's gateway beside it, measured the same way after it at every
# count, to compare two builds in one run; HTTP=net/http serves with Go's
# own HTTP/1.1 server and upstream client.
set -euo pipefail
cd "$(dirname "$0")/.."
counts=("${@:-100 1000}")
[ $# -eq 0 ] && counts=(100 1000)
duration=20s

work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT
if [ -n "${LLMGW:-}" ]; then cp "$LLMGW" "$work/llmgw"; else go build -o "$work/llmgw" ./cmd/llmgw; fi
ulimit -n 65536 2>/dev/null || true

"$work/llmgw" sim --listen 127.0.0.1:19200 --model m --ttft 100ms --tpot 20ms --max-seqs 5000 >"$work/sim.log" 2>&1 &
# start_gateway NAME BIN PORT: `llmgw serve` from BIN on PORT (admin on
# PORT+1) in front of the sim; its pid in pids[NAME].
declare -A pids ports
start_gateway() {
	env ${GWENV:-} "$2" serve --upstream http://127.0.0.1:19200/v1 --model m \
		--listen "127.0.0.1:$3" --admin-listen "127.0.0.1:$(($3 + 1))" --log-level warn ${HTTP:+--http "$HTTP"} >"$work/$1.log" 2>&1 &
	pids[$1]=$! ports[$1]=$3
	for _ in $(seq 50); do curl -sf "127.0.0.1:$(($3 + 1))/readyz" >/dev/null && break; sleep 0.1; done
}
gateways=(gw)
start_gateway gw "$work/llmgw" 19280
if [ -n "${BASE:-}" ]; then
	gateways+=(base)
	start_gateway base "$BASE" 19290
fi

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
rss_kb() { awk '/^VmRSS/ {print $2}' "/proc/$1/status"; }
hz=$(getconf CLK_TCK)

bench() { # bench TARGET STREAMS JSON
	local rate
	rate=$(awk -v n="$2" 'BEGIN { printf "%.2f", n / 4.1 }')
	"$work/llmgw" bench --workload flat --output-tokens 200 --model m --rate "$rate" --duration "$duration" \
		--slo-ttft 0 --slo-tpot 0 --target "$1" --json "$3" >/dev/null 2>"$work/bench.err"
}
field() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(d.get(sys.argv[2], 0))" "$1" "$2"; }

# label NAME: how a path is named in the table.
label() {
	case $1 in
	direct) echo "sim direct" ;;
	gw) echo "through llmgw" ;;
	base) echo "through the base build" ;;
	esac
}

printf '| streams | path | requests | errors | TTFT p50 ms | TTFT p99 ms | gap p50 ms | gap p99 ms |\n|---|---|---|---|---|---|---|---|\n'
for n in "${counts[@]}"; do
	bench http://127.0.0.1:19200/v1 "$n" "$work/direct-$n.json"
	for g in "${gateways[@]}"; do
		pid=${pids[$g]}
		base=$(rss_kb "$pid")
		before=$(cpu_ticks "$pid")
		peak=$base
		bench "http://127.0.0.1:${ports[$g]}/v1" "$n" "$work/$g-$n.json" &
		b=$!
		while kill -0 $b 2>/dev/null; do
			r=$(rss_kb "$pid"); [ "$r" -gt "$peak" ] && peak=$r
			sleep 0.25
		done
		wait $b
		after=$(cpu_ticks "$pid")
		tokens=$(python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(int(d.get('requests',0)-d.get('errors',0)-d.get('rejected',0))*200)" "$work/$g-$n.json")
		awk -v n="$n" -v p="$(label "$g")" -v base="$base" -v peak="$peak" -v t=$((after - before)) -v hz="$hz" -v tok="$tokens" 'BEGIN {
			printf "streams %d, %s: gateway memory %.1f KB per open stream (RSS %d -> %d KB), CPU %.1f µs per relayed token (%.1f s for %d tokens)\n",
				n, p, (peak - base) / n, base, peak, t / hz / tok * 1e6, t / hz, tok
		}' >>"$work/summary.txt"
	done

	for path in direct "${gateways[@]}"; do
		j="$work/$path-$n.json"
		awk -v n="$n" -v p="$(label "$path")" \
			-v req="$(field "$j" requests)" -v err="$(field "$j" errors)" \
			-v t50="$(field "$j" ttft_p50_s)" -v t99="$(field "$j" ttft_p99_s)" \
			-v g50="$(field "$j" itl_p50_s)" -v g99="$(field "$j" itl_p99_s)" \
			'BEGIN { printf "| %d | %s | %d | %d | %.1f | %.1f | %.1f | %.1f |\n", n, p, req, err, t50*1000, t99*1000, g50*1000, g99*1000 }'
	done
done
echo
cat "$work/summary.txt"
