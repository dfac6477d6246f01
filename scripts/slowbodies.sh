#!/usr/bin/env bash
# What clients that never finish their bodies cost the gateway: N
# connections each send a request's headers claiming an 8 MiB body, then
# one byte, and hold on. Prints the gateway's heap in use and resident
# memory before and with them held (a fresh process's untouched heap
# pages are not yet resident, so a claimed length allocated at once shows
# in the heap first), and what became of the connections once
# server.body_timeout had passed. No keys: the body is read, as for any
# request that passes authentication. Then as many connections send
# sign-ins to the admin listener's console the same way, claiming a 64 KiB
# form; the last column counts those answered once its deadline (10 s) had
# passed: 408 for those the throttle let in, 429 at once for the rest.
#
#   scripts/slowbodies.sh [N] [BINARY...]     (default: 100, this tree's build)
#
# Several binaries are measured one after the other in one run, to compare
# builds.
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-100}
shift || true
. scripts/lib/builds.sh "$@"
rss_kb() { awk '/^VmRSS/ {print $2}' "/proc/$1/status"; }
heap_kb() { curl -sf 127.0.0.1:19381/metrics | awk '/^go_memstats_heap_inuse_bytes / {printf "%d", $2 / 1024}'; }

"${bins[0]}" sim --listen 127.0.0.1:19300 --model m --ttft 0 --tpot 0 >"$work/sim.log" 2>&1 &

printf '| binary | connections | heap KB before | heap KB held | heap KB per connection | RSS KB before | RSS KB held | answered after body_timeout | sign-ins answered |\n|---|---|---|---|---|---|---|---|---|\n'
for bin in "${bins[@]}"; do
	LLMGW_ADMIN_TOKEN=slowbodies-admin-token "$bin" serve --upstream http://127.0.0.1:19300/v1 --model m --listen 127.0.0.1:19380 \
		--admin-listen 127.0.0.1:19381 --log-level warn >"$work/gw.log" 2>&1 &
	gw=$!
	for _ in $(seq 50); do curl -sf 127.0.0.1:19381/readyz >/dev/null && break; sleep 0.1; done
	before=$(rss_kb $gw) hbefore=$(heap_kb)
	(python3 - "$n" "$gw" "$work/held" <<'PY'
import socket, sys, time
n, pid, out = int(sys.argv[1]), sys.argv[2], sys.argv[3]
def rss():
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS"):
            return int(line.split()[1])
conns, signins = [], []
for _ in range(n):
    s = socket.create_connection(("127.0.0.1", 19380))
    s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: llmgw\r\nContent-Type: application/json\r\n"
              b"Content-Length: 8388608\r\n\r\n{")
    conns.append(s)
time.sleep(2)
held = rss()
open(out + ".ready", "w").close()
time.sleep(1)
# The sign-ins come after the heap is measured, which is the API's alone.
for _ in range(n):
    s = socket.create_connection(("127.0.0.1", 19381))
    s.sendall(b"POST /ui/login HTTP/1.1\r\nHost: 127.0.0.1:19381\r\nOrigin: http://127.0.0.1:19381\r\n"
              b"Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 65536\r\n\r\nt")
    signins.append(s)
# Wait past the default body_timeout (30 s) and count the answers.
time.sleep(31)
def answered(conns, *statuses):
    count = 0
    for s in conns:
        s.settimeout(0.5)
        try:
            if s.recv(64).startswith(statuses):
                count += 1
        except OSError:
            pass
    return count
open(out, "w").write(f"{held} {answered(conns, b'HTTP/1.1 408')} {answered(signins, b'HTTP/1.1 408', b'HTTP/1.1 429')}\n")
PY
	) &
	py=$!
	until [ -f "$work/held.ready" ]; do sleep 0.2; done
	hheld=$(heap_kb)
	wait $py
	rm -f "$work/held.ready"
	read -r held answered signins <"$work/held"
	awk -v b="$(basename "$bin")" -v n="$n" -v before="$before" -v held="$held" -v hb="$hbefore" -v hh="$hheld" -v a="$answered" -v s="$signins" \
		'BEGIN { printf "| %s | %d | %d | %d | %.1f | %d | %d | %d of %d | %d of %d |\n", b, n, hb, hh, (hh - hb) / n, before, held, a, n, s, n }'
	kill $gw
	wait $gw 2>/dev/null || true
done
