#!/usr/bin/env bash
# How long llmgw takes to start: from exec to the first 200 from the admin
# listener's /readyz, serving the demo (two simulated replicas in process,
# the ledger in memory). Each binary is started N times, the binaries in
# turn, so that a busy machine slows them alike; /readyz is asked every
# millisecond over bash's /dev/tcp, timed by $EPOCHREALTIME and waited
# for by read -t, with no process started per try.
# Prints min, median, mean and p90 in milliseconds.
#
#   scripts/starttime.sh [N] [BINARY...]     (default: 100, this tree's build)
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-100}
shift || true
. scripts/lib/builds.sh "$@"

# ready PORT: whether /readyz on 127.0.0.1:PORT answers 200.
ready() {
	local status
	{ exec 3<>"/dev/tcp/127.0.0.1/$1"; } 2>/dev/null || return 1
	printf 'GET /readyz HTTP/1.0\r\n\r\n' >&3
	read -r _ status _ <&3 || true
	exec 3<&-
	[ "$status" = 200 ]
}

# pause: a millisecond, waited for on a pipe nothing writes to.
exec {never}<> <(:)
pause() { read -rt 0.001 -u "$never" || true; }

# once BINARY: one start's time to ready, in microseconds.
once() {
	local start pid now
	start=${EPOCHREALTIME/./}
	(cd "$work" && exec "$1" serve --listen 127.0.0.1:19480 --admin-listen 127.0.0.1:19481 --log-level error) >"$work/gw.log" 2>&1 &
	pid=$!
	until ready 19481; do
		pause
		if ((${EPOCHREALTIME/./} - start > 30000000)); then
			echo "starttime: $1 not ready in 30 s" >&2
			exit 1
		fi
	done
	now=${EPOCHREALTIME/./}
	kill -9 "$pid"
	wait "$pid" 2>/dev/null || true
	echo $((now - start))
}

for i in $(seq "$n"); do
	for j in "${!bins[@]}"; do
		echo "$j $(once "${bins[$j]}")"
	done
done >"$work/times"

printf '| binary | runs | min ms | median ms | mean ms | p90 ms |\n|---|---|---|---|---|---|\n'
for j in "${!bins[@]}"; do
	awk -v j="$j" '$1 == j {print $2}' "$work/times" | sort -n |
		awk -v bin="${bins[$j]}" '{t[NR] = $1; s += $1}
		END {printf "| %s | %d | %.1f | %.1f | %.1f | %.1f |\n", bin, NR, t[1] / 1000, t[int((NR + 1) / 2)] / 1000, s / NR / 1000, t[int(NR * 0.9 + 0.999)] / 1000}'
done
