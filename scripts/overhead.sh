#!/usr/bin/env bash
# Gateway overhead on plain (not streamed) requests: a zero-latency
# `llmgw sim` hit directly and through `llmgw serve`, with the same load
# tool (wrk) at the same concurrency, one after the other in one run.
# Prints req/s and latency percentiles of both, what the gateway added,
# and the gateway's CPU time per request (process CPU time / requests).
#
#   scripts/overhead.sh [DURATION_SECONDS] [CONCURRENCY]
#
# Needs wrk (Debian: apt-get install wrk).
set -euo pipefail
cd "$(dirname "$0")/.."
duration=${1:-20}
conns=${2:-50}
command -v wrk >/dev/null || { echo "overhead.sh needs wrk: apt-get install wrk" >&2; exit 1; }

work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT
go build -o "$work/llmgw" ./cmd/llmgw

"$work/llmgw" sim --listen 127.0.0.1:19100 --model m --ttft 0 --tpot 0 >"$work/sim.log" 2>&1 &
env ${GWENV:-} "$work/llmgw" serve --upstream http://127.0.0.1:19100/v1 --model m \
	--listen 127.0.0.1:19180 --admin-listen 127.0.0.1:19181 --log-level warn >"$work/gw.log" 2>&1 &
gw=$!
for _ in $(seq 50); do curl -sf 127.0.0.1:19181/readyz >/dev/null && break; sleep 0.1; done

cat >"$work/post.lua" <<'LUA'
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = '{"model":"m","messages":[{"role":"user","content":"Write a haiku about gateways."}],"max_tokens":16}'
LUA

# cpu_ticks PID: user + system time of a process, in clock ticks.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)

run() { # run NAME URL
	wrk -t2 -c"$conns" -d"${duration}s" --latency -s "$work/post.lua" "$2" >"$work/$1.txt"
}
# A short warm-up of both paths, so that connections and caches are open.
wrk -t2 -c"$conns" -d2s -s "$work/post.lua" http://127.0.0.1:19100/v1/chat/completions >/dev/null
wrk -t2 -c"$conns" -d2s -s "$work/post.lua" http://127.0.0.1:19180/v1/chat/completions >/dev/null

run direct http://127.0.0.1:19100/v1/chat/completions
before=$(cpu_ticks $gw)
run gateway http://127.0.0.1:19180/v1/chat/completions
after=$(cpu_ticks $gw)

# field FILE PATTERN: wrk's value after PATTERN, in milliseconds.
ms() { awk -v p="$2" '$1 == p { v = $2; if (v ~ /us$/) { sub(/us/, "", v); v /= 1000 } else if (v ~ /ms$/) { sub(/ms/, "", v) } else if (v ~ /s$/) { sub(/s/, "", v); v *= 1000 } print v }' "$1"; }
rps() { awk '/^Requests\/sec/ {print $2}' "$1"; }
reqs() { awk '/requests in/ {print $1}' "$1"; }

d50=$(ms "$work/direct.txt" 50%) d99=$(ms "$work/direct.txt" 99%)
g50=$(ms "$work/gateway.txt" 50%) g99=$(ms "$work/gateway.txt" 99%)
n=$(reqs "$work/gateway.txt")
printf '| path | req/s | p50 ms | p99 ms |\n|---|---|---|---|\n'
printf '| sim direct | %s | %s | %s |\n' "$(rps "$work/direct.txt")" "$d50" "$d99"
printf '| through llmgw | %s | %s | %s |\n' "$(rps "$work/gateway.txt")" "$g50" "$g99"
awk -v d50="$d50" -v d99="$d99" -v g50="$g50" -v g99="$g99" -v t=$((after - before)) -v hz="$hz" -v n="$n" 'BEGIN {
	printf "\nadded latency: p50 %.2f ms, p99 %.2f ms\n", g50 - d50, g99 - d99
	printf "gateway CPU: %.1f s for %d requests = %.1f µs per request\n", t / hz, n, t / hz / n * 1e6
}'
