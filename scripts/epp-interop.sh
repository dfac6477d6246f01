#!/usr/bin/env bash
# llmgw's epp pool against llm-d's Endpoint Picker, the reference
# implementation (github.com/llm-d/llm-d-router), built here from a local
# checkout and never committed. The EPP runs with file discovery, without
# Kubernetes, in front of three simulated vLLM replicas (llmgw sim); then
# internal/app's TestInteropLLMD sends through llmgw's epp pool while the
# EPP runs (every request where the EPP said) and once it is stopped
# (fail_close answers 503, fail_open picks by auto).
#
#   LLMD_ROUTER=/path/to/llm-d-router scripts/epp-interop.sh
#
# Writes the binaries, configuration and logs into OUT (default
# bench-out/epp-interop).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
src=${LLMD_ROUTER:?set LLMD_ROUTER to a checkout of github.com/llm-d/llm-d-router}
out=$root/${OUT:-bench-out/epp-interop}
mkdir -p "$out"
go build -o "$out/llmgw" ./cmd/llmgw
(cd "$src" && go build -o "$out/epp" ./cmd/epp)

pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

# Three replicas on free ports; each prints a line ending in its base URL.
"$out/llmgw" sim --replicas 3 --listen 127.0.0.1:0 --log-level warn >"$out/sim.urls" 2>"$out/sim.log" &
pids+=($!)
for _ in $(seq 100); do [ "$(wc -l <"$out/sim.urls")" -ge 3 ] && break; sleep 0.1; done
mapfile -t lines <"$out/sim.urls"
urls=("${lines[@]##* }")
{
	echo "endpoints:"
	for i in "${!urls[@]}"; do
		hp=${urls[$i]#http://}; hp=${hp%%/*}
		printf '  - name: sim-%d\n    address: %s\n    port: "%s"\n' "$i" "${hp%:*}" "${hp##*:}"
	done
} >"$out/endpoints.yaml"
cat >"$out/epp.yaml" <<YAML
apiVersion: llm-d.ai/v1alpha1
kind: EndpointPickerConfig
plugins:
  - name: file-discovery
    type: file-discovery
    parameters:
      path: "$out/endpoints.yaml"
      watchFile: false
  - name: random-picker
    type: random-picker
  - name: single-profile-handler
    type: single-profile-handler
  - name: metrics-source
    type: metrics-data-source
  - name: metrics-extractor
    type: core-metrics-extractor
schedulingProfiles:
  - name: default
    plugins:
      - pluginRef: random-picker
dataLayer:
  injectDefaults: false
  discovery:
    pluginRef: file-discovery
  sources:
    - pluginRef: metrics-source
      extractors:
        - pluginRef: metrics-extractor
YAML
port=${EPP_PORT:-19002}
"$out/epp" --secure-serving=false --grpc-port "$port" --grpc-health-port $((port + 1)) \
	--metrics-port $((port + 2)) --pool-name interop --pool-namespace default \
	--config-file "$out/epp.yaml" >"$out/epp.log" 2>&1 &
epp=$!
pids+=("$epp")
for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/"$port") 2>/dev/null && break; sleep 0.1; done

ups=$(IFS=,; echo "${urls[*]}")
export LLMGW_EPP_INTEROP=127.0.0.1:$port LLMGW_EPP_INTEROP_UPSTREAMS=$ups
LLMGW_EPP_INTEROP_PHASE=up go test -count=1 -run TestInteropLLMD -v ./internal/app/ | tee "$out/up.txt"
kill "$epp"; wait "$epp" 2>/dev/null || true
LLMGW_EPP_INTEROP_PHASE=down go test -count=1 -run TestInteropLLMD -v ./internal/app/ | tee "$out/down.txt"
