#!/usr/bin/env bash
# Instructions the gateway executes per request in user space, counted by
# valgrind's callgrind. The count repeats to within a percent or two
# whatever else the machine is doing, where CPU time moves by 10-20%
# between runs, so two builds can be compared exactly. It leaves out the
# kernel's work (the same system calls in both builds) and time spent
# waiting; under valgrind the gateway runs some fifty times slower, so the
# load is light: wrk with one thread and 20 connections.
#
#   scripts/instructions.sh [SECONDS] [BINARY...]
#
# Measures core (`llmgw serve --upstream`, no keys) and keys (API keys,
# limits on the key and its org, the ledger in SQLite) for each binary in
# turn, in one run; with none it builds the working tree.
#
# Needs valgrind and wrk (Debian: apt-get install valgrind wrk). A build
# with Go 1.26 or later stops with SIGILL under valgrind 3.19 (Debian 12's),
# which does not decode the rdtscp instruction the runtime uses.
set -euo pipefail
cd "$(dirname "$0")/.."
duration=${1:-10}
shift || true
for tool in valgrind callgrind_control wrk; do
	command -v "$tool" >/dev/null || { echo "instructions.sh needs $tool: apt-get install valgrind wrk" >&2; exit 1; }
done

work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT
builds=("$@")
if [ ${#builds[@]} -eq 0 ]; then
	go build -o "$work/llmgw" ./cmd/llmgw
	builds=("$work/llmgw")
fi
gw=${builds[0]}

. scripts/lib/gateway.sh
start_sim
keyed_config "$work/keys.yaml"
post_script "$(new_key)"

# count BINARY ARGS...: runs the gateway under callgrind, warms it up,
# then prints the instructions per request of a measured run.
count() {
	local bin=$1
	shift
	rm -f "$work"/callgrind.*
	GODEBUG=asyncpreemptoff=1 valgrind --tool=callgrind --callgrind-out-file="$work/callgrind.out" \
		"$bin" serve --listen 127.0.0.1:19180 --admin-listen 127.0.0.1:19181 --log-level warn "$@" >"$work/gw.log" 2>&1 &
	local pid=$!
	wait_ready 600
	wrk -t1 -c20 -d3s -s "$work/post.lua" http://127.0.0.1:19180/v1/chat/completions >/dev/null
	callgrind_control --zero "$pid" >/dev/null 2>&1
	wrk -t1 -c20 -d"${duration}s" -s "$work/post.lua" http://127.0.0.1:19180/v1/chat/completions >"$work/wrk.txt"
	callgrind_control --dump "$pid" >/dev/null 2>&1
	kill "$pid"
	wait "$pid" 2>/dev/null || true
	local n ir
	n=$(awk '/requests in/ {print $1}' "$work/wrk.txt")
	ir=$(awk '/^summary:/ {print $2}' "$(ls -t "$work"/callgrind.out.* | head -1)")
	awk -v ir="$ir" -v n="$n" 'BEGIN { printf "%.0f | %d", ir / n, n }'
}

printf '| build | run | instructions/request | requests |\n|---|---|---|---|\n'
for b in "${builds[@]}"; do
	name=$(basename "$b")
	echo "| $name | core | $(count "$b" "${core_args[@]}") |"
	echo "| $name | keys | $(count "$b" --config "$work/keys.yaml") |"
done
