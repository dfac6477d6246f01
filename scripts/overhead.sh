#!/usr/bin/env bash
# Gateway overhead on plain (not streamed) requests, all in one run with
# the same load tool (wrk) at the same concurrency:
#   direct   a zero-latency `llmgw sim`, hit directly;
#   nginx    a reference: nginx proxying to the same sim, tuned as a
#            gateway would be (keep-alive upstream connections, no access
#            log, a worker per core); skipped when nginx is not installed;
#   core     through `llmgw serve --upstream`: no keys, no limits;
#   core-nethttp  the same with --http net/http: Go's own HTTP/1.1 server
#            and upstream client in place of llmgw's;
#   core-base the core run with the binary in $BASE, when set: another
#            build, to compare two builds in one run;
#   vllm     no keys, the sim as a pool of kind vllm: its /metrics scraped,
#            and each request sent with its isolation domain's cache_salt;
#   keys     with API keys, limits on the key and its org (process-local),
#            and the usage ledger in SQLite;
#   vllm-base, keys-base  the same with the binary in $BASE, when set;
#   redis    the same with the limits in Redis (needs REDIS_URL, default
#            redis://127.0.0.1:6379/0; skipped when redis-cli is missing).
# Prints req/s and latency percentiles, what the gateway added, its CPU
# time per request (process CPU time / requests) and, for redis, the Redis
# commands each request cost.
#
# With BASE and PAIRS=N, the two builds are measured at once instead: for
# each of core, vllm and keys, both gateways serve side by side, each
# loaded by a wrk of its own at half the concurrency, for N rounds.
# Whatever else the machine does then falls on both alike, so the ratio of
# their CPU time per request is steadier than that of runs one after the
# other; each round's ratio is printed, then their median and range.
#
# With NGINX_PAIRS=N, llmgw is measured against nginx the same way: nginx
# and core (`llmgw serve --upstream`) in front of the same sim at once,
# each under a wrk of its own at half the concurrency, for N rounds; each
# round's ratio of CPU time per request (llmgw ÷ nginx) is printed, then
# their median and range.
#
#   scripts/overhead.sh [DURATION_SECONDS] [CONCURRENCY]
#   BASE=path/to/llmgw scripts/overhead.sh ...   (adds the -base rows)
#   BASE=path/to/llmgw PAIRS=8 scripts/overhead.sh 10   (the pairs alone)
#   NGINX_PAIRS=8 scripts/overhead.sh 10   (core beside nginx alone)
#
# LLMGW=path measures a binary already built in place of the working tree.
#
# Needs wrk (Debian: apt-get install wrk); nginx for the reference row
# (Debian: apt-get install nginx-light).
set -euo pipefail
cd "$(dirname "$0")/.."
duration=${1:-20}
conns=${2:-50}
redis_url=${REDIS_URL:-redis://127.0.0.1:6379/0}
command -v wrk >/dev/null || { echo "overhead.sh needs wrk: apt-get install wrk" >&2; exit 1; }

work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT
if [ -n "${LLMGW:-}" ]; then cp "$LLMGW" "$work/llmgw"; else go build -o "$work/llmgw" ./cmd/llmgw; fi
gw=$work/llmgw

. scripts/lib/gateway.sh
start_sim
keyed_config "$work/keys.yaml"
keyed_config "$work/redis.yaml" "limits: {redis: \"$redis_url\"}"
vllm_config "$work/vllm.yaml"
post_script "$(new_key)"
if [ -n "${BASE:-}" ]; then
	# The other build keeps its keys in a store of its own.
	keyed_config "$work/keys-base.yaml" "" "$work/gw-base.db"
	post_script "$(new_key "$BASE" "$work/gw-base.db")" "$work/post-base.lua"
fi

# cpu_ticks PID...: user + system clock ticks the processes have used.
cpu_ticks() { local p t=0; for p; do t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat"))); done; echo $t; }
hz=$(getconf CLK_TCK)
redis_calls() { redis-cli -u "$redis_url" INFO commandstats | awk -F'[:=,]' '/^cmdstat_(evalsha|eval):/ {n += $3} END {print n + 0}'; }
redis_commands() { redis-cli -u "$redis_url" INFO stats | awk -F: '/^total_commands_processed/ {print $2 + 0}'; }

# start_gateway ARGS...: runs llmgw serve (the binary in $bin, default
# $gw) on $port (default 19180, its admin listener on the next port) and
# waits until it is ready.
start_gateway() {
	local p=${port:-19180}
	"${bin:-$gw}" serve --listen "127.0.0.1:$p" --admin-listen "127.0.0.1:$((p + 1))" --log-level warn "$@" >"$work/gw-$p.log" 2>&1 &
	pid=$!
	for _ in $(seq 100); do curl -sf "127.0.0.1:$((p + 1))/readyz" >/dev/null && return; sleep 0.1; done
	cat "$work/gw-$p.log" >&2
	exit 1
}
stop_gateway() { kill "$pid"; wait "$pid" 2>/dev/null || true; }

# start_nginx: nginx in front of the sim on :19190, its workers' CPU measured.
start_nginx() {
	mkdir -p "$work/nginx"
	cat >"$work/nginx.conf" <<NGINX
daemon off;
user root;
worker_processes auto;
pid $work/nginx/nginx.pid;
error_log $work/nginx/error.log warn;
events { worker_connections 4096; }
http {
	access_log off;
	client_body_temp_path $work/nginx;
	proxy_temp_path $work/nginx;
	fastcgi_temp_path $work/nginx;
	uwsgi_temp_path $work/nginx;
	scgi_temp_path $work/nginx;
	upstream sim { server 127.0.0.1:19100; keepalive 128; }
	server {
		listen 127.0.0.1:19190;
		location / {
			proxy_pass http://sim;
			proxy_http_version 1.1;
			proxy_set_header Connection "";
			proxy_buffering off;
		}
	}
}
NGINX
	nginx -c "$work/nginx.conf" -p "$work/nginx" >"$work/nginx.log" 2>&1 &
	nginx_pid=$!
	for _ in $(seq 50); do curl -sf -o /dev/null -X POST -d '{"model":"m","prompt":"x"}' 127.0.0.1:19190/v1/completions && return; sleep 0.1; done
	cat "$work/nginx.log" "$work/nginx/error.log" >&2
	exit 1
}

ms() { awk -v p="$2" '$1 == p { v = $2; if (v ~ /us$/) { sub(/us/, "", v); v /= 1000 } else if (v ~ /ms$/) { sub(/ms/, "", v) } else if (v ~ /s$/) { sub(/s/, "", v); v *= 1000 } print v }' "$1"; }
rps() { awk '/^Requests\/sec/ {print $2}' "$1"; }
reqs() { awk '/requests in/ {print $1}' "$1"; }

# measure NAME URL [PID]: a warm-up, then the measured run.
measure() {
	local script=${script:-$work/post.lua}
	wrk -t2 -c"$conns" -d2s -s "$script" "$2" >/dev/null
	local before=0 after=0
	[ -n "${3:-}" ] && before=$(cpu_ticks $3)
	[ "$1" = redis ] && c0=$(redis_calls) t0=$(redis_commands)
	wrk -t2 -c"$conns" -d"${duration}s" --latency -s "$script" "$2" >"$work/$1.txt"
	[ "$1" = redis ] && c1=$(redis_calls) t1=$(redis_commands)
	[ -n "${3:-}" ] && after=$(cpu_ticks $3)
	echo $((after - before)) >"$work/$1.cpu"
	grep -q "Non-2xx" "$work/$1.txt" && { echo "$1: some answers were not 200:" >&2; cat "$work/$1.txt" >&2; exit 1; }
	return 0
}

url=http://127.0.0.1:19180/v1/chat/completions

# rounds NAME URL SCRIPT PIDS BASE_URL BASE_SCRIPT BASE_PIDS: $PAIRS rounds
# of two servers loaded at once, each under its own wrk at half the
# concurrency (URL with SCRIPT, BASE_URL with BASE_SCRIPT), after a
# warm-up; notes each round's CPU µs per request of both (the processes
# PIDS and BASE_PIDS) and their ratio in pairs.txt.
rounds() {
	local name=$1 url=$2 script=$3 pids=$4 base_url=$5 base_script=$6 base_pids=$7 i t0 t1 b0 b1
	wrk -t1 -c$((conns / 2)) -d2s -s "$script" "$url" >/dev/null &
	wrk -t1 -c$((conns / 2)) -d2s -s "$base_script" "$base_url" >/dev/null
	wait $!
	for i in $(seq "$PAIRS"); do
		# shellcheck disable=SC2086 # the pids are words without spaces
		t0=$(cpu_ticks $pids) b0=$(cpu_ticks $base_pids)
		wrk -t1 -c$((conns / 2)) -d"${duration}s" -s "$script" "$url" >"$work/pair-new.txt" &
		wrk -t1 -c$((conns / 2)) -d"${duration}s" -s "$base_script" "$base_url" >"$work/pair-base.txt"
		wait $!
		# shellcheck disable=SC2086
		t1=$(cpu_ticks $pids) b1=$(cpu_ticks $base_pids)
		cat "$work"/pair-*.txt | grep -q "Non-2xx" && { echo "pair $name: some answers were not 200" >&2; cat "$work"/pair-*.txt >&2; exit 1; }
		awk -v name="$name" -v i="$i" -v hz="$hz" -v tn=$((t1 - t0)) -v tb=$((b1 - b0)) \
			-v nn="$(reqs "$work/pair-new.txt")" -v nb="$(reqs "$work/pair-base.txt")" 'BEGIN {
			un = tn / hz / nn * 1e6; ub = tb / hz / nb * 1e6
			printf "%s %d %.2f %.2f %d %d %.4f\n", name, i, un, ub, nn, nb, un / ub
		}' >>"$work/pairs.txt"
	done
}

# pair NAME SCRIPT BASE_SCRIPT ARGS BASE_ARGS: rounds of this build on
# :19180 (serve ARGS, wrk SCRIPT) and $BASE on :19182 (BASE_ARGS,
# BASE_SCRIPT) serving at once.
pair() {
	local new base
	# shellcheck disable=SC2086 # the arguments are words without spaces
	port=19180 start_gateway $4
	new=$pid
	# shellcheck disable=SC2086
	port=19182 bin=$BASE start_gateway $5
	base=$pid
	rounds "$1" "$url" "$2" "$new" "${url/19180/19182}" "$3" "$base"
	kill "$new" "$base"
	wait "$new" "$base" 2>/dev/null || true
}

# pairs_table BASE_NAME RUN...: the rounds in pairs.txt, then each run's
# median ratio and range, the ratio's divisor named BASE_NAME.
pairs_table() {
	local b=$1 r
	shift
	printf '| run | round | CPU µs/request | %s CPU µs/request | requests | %s requests | ÷ %s |\n|---|---|---|---|---|---|---|\n' "$b" "$b" "$b"
	awk '{ printf "| %s | %d | %s | %s | %d | %d | %s |\n", $1, $2, $3, $4, $5, $6, $7 }' "$work/pairs.txt"
	printf '\n| run | ÷ %s, median | lowest | highest |\n|---|---|---|---|\n' "$b"
	for r; do
		awk -v r="$r" '$1 == r { print $7 }' "$work/pairs.txt" | sort -g | awk -v r="$r" '{ v[NR] = $1 } END {
			m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
			printf "| %s | %.4f | %.4f | %.4f |\n", r, m, v[1], v[NR]
		}'
	done
}

if [ "${NGINX_PAIRS:-0}" -gt 0 ]; then
	command -v nginx >/dev/null || { echo "NGINX_PAIRS needs nginx: apt-get install nginx-light" >&2; exit 1; }
	PAIRS=$NGINX_PAIRS
	start_nginx
	port=19180 start_gateway "${core_args[@]}"
	rounds core "$url" "$work/post.lua" "$pid" http://127.0.0.1:19190/v1/chat/completions "$work/post.lua" "$(pgrep -d ' ' -P "$nginx_pid")"
	printf '\nllmgw (core) and nginx at once, %s rounds of %s s, %d connections each:\n\n' "$PAIRS" "$duration" $((conns / 2))
	pairs_table nginx core
	exit 0
fi
if [ -n "${BASE:-}" ] && [ "${PAIRS:-0}" -gt 0 ]; then
	pair core "$work/post.lua" "$work/post.lua" "${core_args[*]}" "${core_args[*]}"
	pair vllm "$work/post.lua" "$work/post.lua" "--config $work/vllm.yaml" "--config $work/vllm.yaml"
	pair keys "$work/post.lua" "$work/post-base.lua" "--config $work/keys.yaml" "--config $work/keys-base.yaml"
	printf '\nBoth builds at once, %s rounds of %s s, %d connections each:\n\n' "$PAIRS" "$duration" $((conns / 2))
	pairs_table base core vllm keys
	exit 0
fi

measure direct http://127.0.0.1:19100/v1/chat/completions
runs=(direct)
if command -v nginx >/dev/null; then
	start_nginx
	measure nginx http://127.0.0.1:19190/v1/chat/completions "$(pgrep -d ' ' -P "$nginx_pid")"
	kill "$nginx_pid"
	wait "$nginx_pid" 2>/dev/null || true
	runs+=(nginx)
fi
start_gateway "${core_args[@]}"
measure core "$url" "$pid"
stop_gateway
runs+=(core)
start_gateway "${core_args[@]}" --http net/http
measure core-nethttp "$url" "$pid"
stop_gateway
runs+=(core-nethttp)
if [ -n "${BASE:-}" ]; then
	bin=$BASE start_gateway "${core_args[@]}"
	measure core-base "$url" "$pid"
	stop_gateway
	runs+=(core-base)
fi
start_gateway --config "$work/vllm.yaml"
measure vllm "$url" "$pid"
stop_gateway
runs+=(vllm)
if [ -n "${BASE:-}" ]; then
	bin=$BASE start_gateway --config "$work/vllm.yaml"
	measure vllm-base "$url" "$pid"
	stop_gateway
	runs+=(vllm-base)
fi
start_gateway --config "$work/keys.yaml"
measure keys "$url" "$pid"
stop_gateway
runs+=(keys)
if [ -n "${BASE:-}" ]; then
	bin=$BASE start_gateway --config "$work/keys-base.yaml"
	script=$work/post-base.lua measure keys-base "$url" "$pid"
	stop_gateway
	runs+=(keys-base)
fi
if command -v redis-cli >/dev/null && redis-cli -u "$redis_url" PING >/dev/null 2>&1; then
	start_gateway --config "$work/redis.yaml"
	measure redis "$url" "$pid"
	stop_gateway
	runs+=(redis)
fi

# cpu_us RUN: the proxy's CPU µs per request in that run.
cpu_us() { awk -v t="$(cat "$work/$1.cpu")" -v hz="$hz" -v n="$(reqs "$work/$1.txt")" 'BEGIN { printf "%.1f", t / hz / n * 1e6 }'; }
nginx_us=
[ -f "$work/nginx.cpu" ] && nginx_us=$(cpu_us nginx)

printf '| run | req/s | p50 ms | p99 ms | added p50 ms | added p99 ms | CPU µs/request | CPU ÷ nginx |\n|---|---|---|---|---|---|---|---|\n'
d50=$(ms "$work/direct.txt" 50%) d99=$(ms "$work/direct.txt" 99%)
for r in "${runs[@]}"; do
	f=$work/$r.txt
	us=
	[ "$r" != direct ] && us=$(cpu_us "$r")
	awk -v r="$r" -v rps="$(rps "$f")" -v p50="$(ms "$f" 50%)" -v p99="$(ms "$f" 99%)" -v d50="$d50" -v d99="$d99" \
		-v us="$us" -v ng="$nginx_us" 'BEGIN {
		if (r == "direct") { printf "| %s | %s | %.2f | %.2f | | | | |\n", r, rps, p50, p99; exit }
		ratio = ng != "" ? sprintf("%.2f", us / ng) : ""
		printf "| %s | %s | %.2f | %.2f | %.2f | %.2f | %s | %s |\n", r, rps, p50, p99, p50 - d50, p99 - d99, us, ratio
	}'
done
if [ -n "${c1:-}" ]; then
	awk -v c=$((c1 - c0)) -v t=$((t1 - t0)) -v n="$(reqs "$work/redis.txt")" 'BEGIN {
		printf "\nredis: %.3f script calls (EVALSHA: admission, and settlements in batches) per request; %.1f commands run inside them per request\n", c / n, t / n
	}'
fi
