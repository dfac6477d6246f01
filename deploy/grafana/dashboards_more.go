package grafana

// Endpoints is what routing sees of each endpoint and what it decided.
func Endpoints() *Dashboard {
	return newDashboard("llmgw-endpoints", "llmgw / Endpoints and routing",
		"Each endpoint's health and load as routing sees it, ejections, prefix-cache hits, predicted against measured TTFT, and routing decisions.",
		graph("Endpoints in routing", "short", "1 while routing sends to the endpoint, 0 while it is out (health check failing, or ejected after failures).",
			q(`llmgw_endpoint_up{pool=~"$pool"}`, "{{pool}}/{{endpoint}}")),
		graph("Ejections", "short", "Times an endpoint was taken out, by reason.",
			q(`sum by (pool, endpoint, reason) (increase(llmgw_ejections_total{pool=~"$pool"}[$__rate_interval]))`, "{{pool}}/{{endpoint}} {{reason}}")),
		graph("Requests waiting at the endpoint", "short", "The endpoint's own queue, from its /metrics.",
			q(`llmgw_endpoint_requests_waiting{pool=~"$pool"}`, "{{pool}}/{{endpoint}}")),
		graph("Requests running at the endpoint", "short", "Requests the endpoint is running, from its /metrics, and those this gateway has in flight there.",
			q(`llmgw_endpoint_requests_running{pool=~"$pool"}`, "running {{pool}}/{{endpoint}}"),
			q(`llmgw_endpoint_inflight{pool=~"$pool"}`, "in flight {{pool}}/{{endpoint}}")),
		graph("KV-cache use", "percentunit", "The endpoint's KV-cache use, from its /metrics.",
			q(`llmgw_endpoint_kv_cache_usage_ratio{pool=~"$pool"}`, "{{pool}}/{{endpoint}}")),
		graph("Age of the last good scrape", "s", "How old routing's view of the endpoint's load is (recording rule pool_endpoint:llmgw_endpoint_scrape_age:seconds).",
			q(`pool_endpoint:llmgw_endpoint_scrape_age:seconds{pool=~"$pool"}`, "{{pool}}/{{endpoint}}")),
		graph("Scrape failures", "short", "Reads of the endpoint's /metrics that failed, by reason.",
			q(`sum by (pool, endpoint, reason) (rate(llmgw_endpoint_scrape_failures_total{pool=~"$pool"}[$__rate_interval]))`, "{{pool}}/{{endpoint}} {{reason}}")),
		graph("Health-probe failures", "short", "Health probes that failed, by reason.",
			q(`sum by (pool, endpoint, reason) (rate(llmgw_endpoint_probe_failures_total{pool=~"$pool"}[$__rate_interval]))`, "{{pool}}/{{endpoint}} {{reason}}")),
		graph("Predicted against measured TTFT", "s", "The TTFT routing predicts for a request sent to each endpoint now, beside the pool's measured median.",
			q(`llmgw_endpoint_predicted_ttft_seconds{pool=~"$pool"}`, "predicted {{pool}}/{{endpoint}}"),
			q(`histogram_quantile(0.5, sum by (pool, le) (rate(llmgw_ttft_seconds_bucket{pool=~"$pool"}[$__rate_interval])))`, "measured p50 {{pool}}")),
		graph("Prefix-cache hits", "percentunit", "Share of prompt tokens the endpoints served from their prefix cache, and of the hits routing predicted, the share the answers confirmed.",
			q(`sum by (pool) (rate(llmgw_tokens_total{pool=~"$pool", kind="cached"}[$__rate_interval])) / sum by (pool) (rate(llmgw_tokens_total{pool=~"$pool", kind="prompt"}[$__rate_interval]))`, "cached {{pool}}"),
			q(`sum by (pool) (rate(llmgw_prefix_confirmed_hits_total{pool=~"$pool"}[$__rate_interval])) / sum by (pool) (rate(llmgw_prefix_predicted_hits_total{pool=~"$pool"}[$__rate_interval]))`, "predicted, confirmed {{pool}}")),
		graph("Routing decisions", "reqps", "Endpoints picked, by policy and the reason the policy gave.",
			q(`sum by (pool, policy, reason) (rate(llmgw_route_decisions_total{pool=~"$pool"}[$__rate_interval]))`, "{{pool}} {{policy}} {{reason}}")),
		graph("Upstream errors", "reqps", "Upstream calls that failed, by reason.",
			q(`sum by (pool, reason) (rate(llmgw_upstream_errors_total{pool=~"$pool"}[$__rate_interval]))`, "{{pool}} {{reason}}")),
		graph("Retries and hedges", "reqps", "Requests sent to another endpoint after a failure, and hedges by outcome.",
			q(`sum by (pool, reason) (rate(llmgw_retries_total{pool=~"$pool"}[$__rate_interval]))`, "retry {{pool}} {{reason}}"),
			q(`sum by (pool, outcome) (rate(llmgw_hedges_total{pool=~"$pool"}[$__rate_interval]))`, "hedge {{pool}} {{outcome}}")),
	)
}

// Tenants is per-tenant service, limits and the usage ledger.
func Tenants() *Dashboard {
	return newDashboard("llmgw-tenants", "llmgw / Tenants and limits",
		"Per-tenant service (tenant at the level router.tenant_label names, capped at router.tenant_label_limit values), requests refused by limits and budgets, Redis, and the usage ledger.",
		graph("Time per output token by tenant", "s", "p99 of streamed requests' time per output token, by tenant.",
			q(`histogram_quantile(0.99, sum by (tenant, le) (rate(llmgw_tenant_tpot_seconds_bucket{tenant=~"$tenant"}[$__rate_interval])))`, "p99 {{tenant}}")),
		graph("Output tokens a second by tenant", "short", "Median output rate of a request, by tenant.",
			q(`histogram_quantile(0.5, sum by (tenant, le) (rate(llmgw_tenant_output_tokens_per_second_bucket{tenant=~"$tenant"}[$__rate_interval])))`, "p50 {{tenant}}")),
		graph("Requests a second by tenant", "reqps", "Requests answered with tokens, by tenant.",
			q(`sum by (tenant) (rate(llmgw_tenant_output_tokens_per_second_count{tenant=~"$tenant"}[$__rate_interval]))`, "{{tenant}}")),
		graph("Refused by limits and budgets", "reqps", "Requests refused by a rate limit, a budget or admission, by error_type.",
			q(`sum by (model, error_type) (rate(llmgw_requests_total{model=~"$model", error_type=~"policy_.+"}[$__rate_interval]))`, "{{model}} {{error_type}}")),
		graph("Tenant label values dropped", "short", "Series not made because the tenant label already had router.tenant_label_limit values; those requests count as tenant other.",
			q(`sum(rate(llmgw_tenant_series_dropped_total[$__rate_interval]))`, "dropped")),
		graph("Redis errors", "short", "Admissions Redis did not answer, by what was done: let through (open) or refused (closed).",
			q(`sum by (decision) (rate(llmgw_limits_redis_errors_total[$__rate_interval]))`, "{{decision}}")),
		graph("Settlements lost", "short", "Settlements of used tokens and cost that never reached Redis.",
			q(`sum(rate(llmgw_limits_settle_dropped_total[$__rate_interval]))`, "lost")),
		graph("Usage records", "short", "Usage records by where they went: the store, the spool, replayed, or dropped; and those waiting in the spools.",
			q(`sum by (result) (rate(llmgw_ledger_records_total[$__rate_interval]))`, "{{result}}"),
			q(`sum(llmgw_ledger_spooled_records)`, "spooled")),
	)
}

// Admission is SLO-aware admission: its decisions, queues and goodput.
func Admission() *Dashboard {
	return newDashboard("llmgw-admission", "llmgw / Admission",
		"SLO-aware admission for models with admission.enabled: decisions, queues, waits and goodput by priority class.",
		graph("Admission decisions", "reqps", "Decisions a second by model, class and decision: admitted, queued, rejected, expired, fell_back.",
			q(`sum by (model, class, decision) (rate(llmgw_admission_total{model=~"$model"}[$__rate_interval]))`, "{{model}} {{class}} {{decision}}")),
		graph("Queue depth", "short", "Requests waiting in each model's admission queue, by class.",
			q(`sum by (model, class) (llmgw_queue_depth{model=~"$model"})`, "{{model}} {{class}}")),
		graph("Queue wait", "s", "p99 of the time a request waited in the admission queue, by class.",
			q(`histogram_quantile(0.99, sum by (model, class, le) (rate(llmgw_queue_seconds_bucket{model=~"$model"}[$__rate_interval])))`, "p99 {{model}} {{class}}")),
		graph("Goodput by class", "percentunit", "Share of recent requests of each class that met both of the class's SLOs, refusals counted as misses.",
			q(`llmgw_goodput_ratio{model=~"$model"}`, "{{model}} {{class}}")),
		graph("SLO pressure", "short", "How far a model's recent p99 is over its SLO: what admission reads to refuse early.",
			q(`llmgw_slo_pressure{model=~"$model"}`, "{{model}}")),
		graph("Refused by admission", "reqps", "Requests admission refused (error_type policy_admission).",
			q(`sum by (model) (rate(llmgw_requests_total{model=~"$model", error_type="policy_admission"}[$__rate_interval]))`, "{{model}}")),
	)
}
