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
# LLMGW=path runs a binary already built, to compare two builds;
# HTTP=net/http serves with Go's own HTTP/1.1 server and upstream client.
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
env ${GWENV:-} "$work/llmgw" serve --upstream http://127.0.0.1:19200/v1 --model m \
	--listen 127.0.0.1:19280 --admin-listen 127.0.0.1:19281 --log-level warn ${HTTP:+--http "$HTTP"} >"$work/gw.log" 2>&1 &
gw=$!
for _ in $(seq 50); do curl -sf 127.0.0.1:19281/readyz >/dev/null && break; sleep 0.1; done

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

printf '| streams | path | requests | errors | TTFT p50 ms | TTFT p99 ms | gap p50 ms | gap p99 ms |\n|---|---|---|---|---|---|---|---|\n'
for n in "${counts[@]}"; do
	bench http://127.0.0.1:19200/v1 "$n" "$work/direct-$n.json"

	base=$(rss_kb $gw)
	before=$(cpu_ticks $gw)
	peak=$base
	bench http://127.0.0.1:19280/v1 "$n" "$work/gw-$n.json" &
	b=$!
	while kill -0 $b 2>/dev/null; do
		r=$(rss_kb $gw); [ "$r" -gt "$peak" ] && peak=$r
		sleep 0.25
	done
	wait $b
	after=$(cpu_ticks $gw)

	for path in direct gw; do
		j="$work/$path-$n.json"
		awk -v n="$n" -v p="$([ $path = gw ] && echo "through llmgw" || echo "sim direct")" \
			-v req="$(field "$j" requests)" -v err="$(field "$j" errors)" \
			-v t50="$(field "$j" ttft_p50_s)" -v t99="$(field "$j" ttft_p99_s)" \
			-v g50="$(field "$j" itl_p50_s)" -v g99="$(field "$j" itl_p99_s)" \
			'BEGIN { printf "| %d | %s | %d | %d | %.1f | %.1f | %.1f | %.1f |\n", n, p, req, err, t50*1000, t99*1000, g50*1000, g99*1000 }'
	done
	tokens=$(python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(int(d.get('requests',0)-d.get('errors',0)-d.get('rejected',0))*200)" "$work/gw-$n.json")
	awk -v n="$n" -v base="$base" -v peak="$peak" -v t=$((after - before)) -v hz="$hz" -v tok="$tokens" 'BEGIN {
		printf "streams %d: gateway memory %.1f KB per open stream (RSS %d -> %d KB), CPU %.1f µs per relayed token (%.1f s for %d tokens)\n",
			n, (peak - base) / n, base, peak, t / hz / tok * 1e6, t / hz, tok
	}' >>"$work/summary.txt"
done
echo
cat "$work/summary.txt"
