#!/usr/bin/env bash
# Capacity at SLO through llmgw's EPP path against the gateway's own pick,
# on the Mooncake trace (decision 0044): four `llmgw sim` replicas (one
# 1.5x slower, the chunked profile), and
#   (a) one llmgw whose pool picks with auto, and
#   (b) one llmgw whose pool has policy epp, asking a second llmgw's EPP
#       whose pool (the same replicas) picks with auto.
# Each side of each round gets fresh replicas and gateways, so no cache is
# warm from the other's run; the order alternates round by round. Prints
# the paired table: each round's capacity (time scale at SLO) and (b)/(a).
#
#   scripts/epp-capacity.sh [ROUNDS]      (default 2)
#
# SWEEP (default 8:24:4), REFINE (default 2), DURATION (default 30s) and
# DRAIN (default 20s) shape each sweep, as scripts/routing.sh's Mooncake
# sweep is shaped. Writes binaries, configurations, logs and each sweep's
# JSON and text into OUT (default bench-out/epp-capacity).
set -euo pipefail
cd "$(dirname "$0")/.."
out=$PWD/${OUT:-bench-out/epp-capacity}
rounds=${1:-2}
mkdir -p "$out"
go build -o "$out/llmgw" ./cmd/llmgw
gw=$out/llmgw
trace=$PWD/../shared/traces/mooncake-synthetic.jsonl
[ -f "$trace" ] || trace=/work/shared/traces/mooncake-synthetic.jsonl
bench=(--workload trace --trace "$trace" --length-scale 16 --duration "${DURATION:-30s}"
	--drain "${DRAIN:-20s}" --sweep "${SWEEP:-8:24:4}" --refine "${REFINE:-2}")

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

# side a|b ROUND: fresh replicas and gateways, one sweep, all stopped.
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
	echo "== round $2, side $1" >&2
	"$gw" bench "${bench[@]}" --target "http://127.0.0.1:$port" \
		--json "$out/$1-$2.json" >"$out/$1-$2.txt"
	stop_all
}

for r in $(seq "$rounds"); do
	if [ $((r % 2)) = 1 ]; then side a "$r"; side b "$r"; else side b "$r"; side a "$r"; fi
done

python3 - "$out" "$rounds" <<'PY'
import json, sys
out, rounds = sys.argv[1], int(sys.argv[2])
def cap(f):
    c = json.load(open(f))
    return c.get("capacity_at_slo", 0), c.get("capacity_achieved_rate", 0), c.get("capacity_lower_bound", False)
print("| round | order | (a) auto: time scale, req/s | (b) epp → llmgw's EPP (auto): time scale, req/s | (b)/(a) |")
print("|---|---|---|---|---|")
ra, rb = [], []
for r in range(1, rounds + 1):
    a, b = cap(f"{out}/a-{r}.json"), cap(f"{out}/b-{r}.json")
    ra.append(a[0]); rb.append(b[0])
    fmt = lambda c: ("≥ " if c[2] else "") + f"{c[0]:.2f}, {c[1]:.1f}"
    ratio = f"{b[0] / a[0]:.3f}" if a[0] else "—"
    print(f"| {r} | {'a, b' if r % 2 else 'b, a'} | {fmt(a)} | {fmt(b)} | {ratio} |")
sa, sb = sum(ra), sum(rb)
print(f"| all | | {sa / rounds:.2f} | {sb / rounds:.2f} | {sb / sa:.3f} |" if sa else "| all | | 0 | | — |")
PY
