#!/usr/bin/env bash
# Capacity at SLO through llmgw's EPP path against the gateway's own pick,
# on the Mooncake trace (decision 0044): four `llmgw sim` replicas (one
# 1.5x slower, the chunked profile), and
#   (a) one llmgw whose pool picks with auto, and
#   (b) one llmgw whose pool has policy epp, asking a second llmgw's EPP
#       whose pool (the same replicas) picks with auto.
# Every run, at one time scale, gets fresh replicas and gateways: a sweep
# against the same replicas replays the trace's prefixes into caches the
# load before filled, so every load after the first would pass. Each round
# runs both sides at each load, the order alternating run by run; a side's
# capacity is the time scale where its goodput crosses 90%, interpolated
# between the loads around the crossing. Prints the paired table.
#
#   scripts/epp-capacity.sh [ROUNDS]      (default 2)
#
# LOADS (default "16 22 28", time scales), DURATION (default 20s) and
# DRAIN (default 10s) shape each run; lengths are divided by 16 as in
# scripts/routing.sh's Mooncake runs. Writes binaries, configurations,
# logs and each run's JSON and text into OUT (default
# bench-out/epp-capacity).
set -euo pipefail
cd "$(dirname "$0")/.."
out=$PWD/${OUT:-bench-out/epp-capacity}
rounds=${1:-2}
mkdir -p "$out"
go build -o "$out/llmgw" ./cmd/llmgw
gw=$out/llmgw
trace=$PWD/../shared/traces/mooncake-synthetic.jsonl
[ -f "$trace" ] || trace=/work/shared/traces/mooncake-synthetic.jsonl
read -ra loads <<<"${LOADS:-16 22 28}"
bench=(--workload trace --trace "$trace" --length-scale 16 --duration "${DURATION:-20s}" --drain "${DRAIN:-10s}")

pids=()
stop_all() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	pids=()
}
trap stop_all EXIT

# wait_port PORT: until something listens on 127.0.0.1:PORT.
wait_port() {
	for _ in $(seq 200); do (exec 3<>/dev/tcp/127.0.0.1/"$1") 2>/dev/null && return; sleep 0.1; done
	echo "nothing listens on :$1" >&2
	exit 1
}

# config FILE LISTEN POLICY [EXTRA_POOL_YAML] [EXTRA_TOP_YAML]: a gateway
# with no keys before the four replicas, its model with bench's SLO.
config() {
	cat >"$1" <<YAML
server: {listen: "127.0.0.1:$2", admin_listen: "127.0.0.1:$(($2 + 1))"}
router: {auth: none, cache_secret: epp-capacity-bench}
store: {url: "memory:"}
${5:-}
pools:
  - name: sim
    kind: vllm
    policy: $3
    ${4:-}
    endpoints:
      - {url: "http://127.0.0.1:19300/v1"}
      - {url: "http://127.0.0.1:19301/v1"}
      - {url: "http://127.0.0.1:19302/v1"}
      - {url: "http://127.0.0.1:19303/v1"}
models:
  - {name: sim-8b, pool: sim, slo: {ttft_p99: 2s, tpot_p99: 100ms}}
YAML
}
config "$out/a.yaml" 19310 auto
config "$out/epp.yaml" 19320 auto "" 'epp: {listen: "127.0.0.1:19322", tls: false}'
config "$out/b.yaml" 19330 epp 'epp: {address: "127.0.0.1:19322", tls: false, failure_mode: fail_close, timeout: 5s}'

# side a|b ROUND LOAD: fresh replicas and gateways, one run, all stopped.
side() {
	"$gw" sim --replicas 3 --listen 127.0.0.1:19300 --log-level warn >/dev/null 2>"$out/sim-$1-$2.log" &
	pids+=($!)
	"$gw" sim --listen 127.0.0.1:19303 --speed 0.667 --log-level warn >/dev/null 2>>"$out/sim-$1-$2.log" &
	pids+=($!)
	for p in 19300 19301 19302 19303; do wait_port "$p"; done
	local port=19310
	if [ "$1" = b ]; then
		"$gw" serve --config "$out/epp.yaml" >"$out/epp-$2.log" 2>&1 &
		pids+=($!)
		wait_port 19322
		port=19330
	fi
	"$gw" serve --config "$out/$1.yaml" >"$out/gw-$1-$2.log" 2>&1 &
	pids+=($!)
	wait_port "$port"
	echo "== round $2, side $1, time scale $3" >&2
	"$gw" bench "${bench[@]}" --time-scale "$3" --target "http://127.0.0.1:$port" \
		--json "$out/$1-$2-$3.json" >"$out/$1-$2-$3.txt"
	stop_all
}

n=0
for r in $(seq "$rounds"); do
	for l in "${loads[@]}"; do
		n=$((n + 1))
		if [ $((n % 2)) = 1 ]; then side a "$r" "$l"; side b "$r" "$l"; else side b "$r" "$l"; side a "$r" "$l"; fi
	done
done

python3 - "$out" "$rounds" "${loads[@]}" <<'PY'
import json, sys
out, rounds, loads = sys.argv[1], int(sys.argv[2]), sorted(float(x) for x in sys.argv[3:])
def run(side, r, l):
    return json.load(open(f"{out}/{side}-{r}-{l:g}.json"))
def capacity(side, r):
    pts = [(l, run(side, r, l)["goodput"]) for l in loads]
    if pts[0][1] < 0.9:
        return 0.0, f"< {pts[0][0]:g}"
    for (l0, g0), (l1, g1) in zip(pts, pts[1:]):
        if g1 < 0.9:
            return l0 + (g0 - 0.9) / (g0 - g1) * (l1 - l0), ""
    return pts[-1][0], "≥ "
print("goodput (share of requests within TTFT 2 s and TPOT 100 ms) at each time scale; capacity where it crosses 0.9")
print()
print("| round | side | " + " | ".join(f"{l:g}" for l in loads) + " | capacity |")
print("|---|---|" + "---|" * len(loads) + "---|")
tot = {"a": 0.0, "b": 0.0}
for r in range(1, rounds + 1):
    caps = {}
    for side in "ab":
        c, mark = capacity(side, r)
        caps[side] = c
        tot[side] += c
        gp = " | ".join(f"{run(side, r, l)['goodput']:.3f}" for l in loads)
        shown = mark if mark.startswith("<") else f"{mark}{c:.2f}"
        print(f"| {r} | {side} | {gp} | {shown} |")
    ratio = f"{caps['b'] / caps['a']:.3f}" if caps["a"] else "—"
    print(f"| {r} | (b)/(a) | " + " | " * (len(loads) - 1) + f" | {ratio} |")
ratio = f"{tot['b'] / tot['a']:.3f}" if tot["a"] else "—"
print(f"| all | (b)/(a) | " + " | " * (len(loads) - 1) + f" | {ratio} |")
PY
