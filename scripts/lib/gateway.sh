# Shared by the benchmark scripts: a zero-latency sim and the gateway
# configurations measured in front of it. Source it after setting $work (a
# scratch directory) and $gw (the llmgw binary).

# start_sim: a zero-latency `llmgw sim` on :19100.
start_sim() {
	"$gw" sim --listen 127.0.0.1:19100 --model m --ttft 0 --tpot 0 >"$work/sim.log" 2>&1 &
}

# keyed_config FILE [EXTRA_YAML] [DB]: a gateway on :19180 with API keys, a
# tenant limit on the key's org, and the usage ledger in SQLite in DB
# (default $work/gw.db), its spool directory beside it.
keyed_config() {
	cat >"$1" <<YAML
server: {listen: "127.0.0.1:19180", admin_listen: "127.0.0.1:19181"}
router: {auth: keys}
store: {url: "sqlite:${3:-$work/gw.db}", spool_dir: "${3:-$work/gw.db}.spool"}
${2:-}
tenants:
  - {path: bench, rpm: 100000000, tpm: 1000000000000}
pools:
  - {name: sim, endpoints: [{url: "http://127.0.0.1:19100/v1"}]}
models:
  - {name: m, pool: sim, price: {input_per_million: 0.5, output_per_million: 1.5}}
YAML
}

# vllm_config FILE: a gateway on :19180 with no keys in front of the sim
# as a pool of kind vllm: its /metrics scraped, and each request sent with
# its isolation domain's cache_salt.
vllm_config() {
	cat >"$1" <<YAML
server: {listen: "127.0.0.1:19180", admin_listen: "127.0.0.1:19181"}
router: {auth: none}
store: {url: "memory:"}
pools:
  - {name: sim, kind: vllm, endpoints: [{url: "http://127.0.0.1:19100/v1"}]}
models:
  - {name: m, pool: sim}
YAML
}

# post_script KEY [FILE]: FILE (default $work/post.lua), a wrk script
# sending one small chat completion with KEY.
post_script() {
	cat >"${2:-$work/post.lua}" <<LUA
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer $1"
wrk.body = '{"model":"m","messages":[{"role":"user","content":"Write a haiku about gateways."}],"max_tokens":16}'
LUA
}

# new_key [BIN] [DB]: creates a key with BIN (default $gw) in the keyed
# configuration's store DB (default $work/gw.db) and prints it.
new_key() {
	"${1:-$gw}" keys create --store "sqlite:${2:-$work/gw.db}" --tenant bench/overhead/wrk --rpm 100000000 --tpm 1000000000000 2>/dev/null
}

# core_args: `llmgw serve` in front of the sim with no keys and no limits.
core_args=(--upstream http://127.0.0.1:19100/v1 --model m)

# wait_ready [TRIES]: waits until the gateway's admin listener is ready,
# a tenth of a second between tries.
wait_ready() {
	for _ in $(seq "${1:-100}"); do curl -sf 127.0.0.1:19181/readyz >/dev/null && return; sleep 0.1; done
	cat "$work/gw.log" >&2
	exit 1
}
