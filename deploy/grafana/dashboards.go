package grafana

// The five dashboards: what an operator looks at first, then each part
// in depth. Queries use the metric names of docs/reference/metrics.md and
// the recording rules of deploy/prometheus/llmgw.rules.yml; $model, $pool
// and $tenant are the dashboard's variables, regexes that match anything
// when All is picked.

// All returns every dashboard, keyed by the file it is written to.
func All() map[string]*Dashboard {
	return map[string]*Dashboard{
		"llmgw-overview.json":  Overview(),
		"llmgw-models.json":    Models(),
		"llmgw-endpoints.json": Endpoints(),
		"llmgw-tenants.json":   Tenants(),
		"llmgw-admission.json": Admission(),
	}
}

// Overview is traffic, errors, latency and the gateway's own health.
func Overview() *Dashboard {
	return newDashboard("llmgw-overview", "llmgw / Overview",
		"Traffic, how requests ended, latency and the gateways' health. Each panel's description says what it reads.",
		graph("Requests a second", "reqps", "Requests answered, by model.",
			q(`sum by (model) (rate(llmgw_requests_total{model=~"$model"}[$__rate_interval]))`, "{{model}}")),
		graph("How requests ended", "percentunit",
			"Share of each model's requests by the prefix of their error_type: none (succeeded), policy, upstream or gateway; caller_ errors left out (recording rule model_error_class:llmgw_requests:ratio_rate5m).",
			q(`model_error_class:llmgw_requests:ratio_rate5m{model=~"$model"}`, "{{model}} {{error_class}}")),
		graph("Errors a second by error_type", "reqps", "Requests that failed, by error_type; caller_ errors are the client's own.",
			q(`sum by (error_type) (rate(llmgw_requests_total{model=~"$model", error_type!=""}[$__rate_interval]))`, "{{error_type}}")),
		graph("Time to first token", "s", "p50 and p99 of streamed requests' time to first token, by model.",
			q(`histogram_quantile(0.5, sum by (model, le) (rate(llmgw_ttft_seconds_bucket{model=~"$model"}[$__rate_interval])))`, "p50 {{model}}"),
			q(`histogram_quantile(0.99, sum by (model, le) (rate(llmgw_ttft_seconds_bucket{model=~"$model"}[$__rate_interval])))`, "p99 {{model}}")),
		graph("Time per output token", "s", "p50 and p99 of streamed requests' time per output token after the first, by model.",
			q(`histogram_quantile(0.5, sum by (model, le) (rate(llmgw_tpot_seconds_bucket{model=~"$model"}[$__rate_interval])))`, "p50 {{model}}"),
			q(`histogram_quantile(0.99, sum by (model, le) (rate(llmgw_tpot_seconds_bucket{model=~"$model"}[$__rate_interval])))`, "p99 {{model}}")),
		graph("Request duration (GenAI)", "s", "p99 of gen_ai.server.request.duration, by requested model.",
			q(`histogram_quantile(0.99, sum by (gen_ai_request_model, le) (rate(gen_ai_server_request_duration_seconds_bucket{gen_ai_request_model=~"$model"}[$__rate_interval])))`, "p99 {{gen_ai_request_model}}")),
		graph("Tokens a second", "short", "Tokens served: prompt, completion, and cached (prompt tokens served from a prefix cache).",
			q(`sum by (kind) (rate(llmgw_tokens_total{model=~"$model", pool=~"$pool"}[$__rate_interval]))`, "{{kind}}")),
		graph("Requests in flight", "short", "Requests being answered now, by model.",
			q(`sum by (model) (llmgw_inflight_requests{model=~"$model"})`, "{{model}}")),
		stat("Endpoints in routing", "short", "Endpoints routing sends to, of each pool's.",
			q(`sum by (pool) (llmgw_endpoint_up{pool=~"$pool"})`, "{{pool}} up"),
			q(`count by (pool) (llmgw_endpoint_up{pool=~"$pool"})`, "{{pool}} all")),
		stat("Gateways", "short", "Gateways scraped, and those whose last configuration reload was refused.",
			q(`count(llmgw_config_last_reload_successful)`, "scraped"),
			q(`count(llmgw_config_last_reload_successful == 0) or vector(0)`, "reload refused")),
		stat("Usage records spooled", "short", "Usage records waiting in the gateways' spools for the store; more than 0 for long means the store is down.",
			q(`sum(llmgw_ledger_spooled_records)`, "spooled")),
		graph("Alerts firing", "short", "llmgw's alerts firing now; each has a runbook under docs/runbooks.",
			q(`count by (alertname) (ALERTS{alertname=~"Llmgw.+", alertstate="firing"})`, "{{alertname}}")),
	)
}

// Models is each model's SLOs: attainment, burn rate, the percentiles
// against the SLO, and goodput by priority class.
func Models() *Dashboard {
	return newDashboard("llmgw-models", "llmgw / Models and SLOs",
		"Each model's TTFT and TPOT SLOs (99th percentiles, so a 1% error budget): attainment, budget burn, percentiles against the SLO, goodput by class.",
		graph("SLO attainment", "percentunit", "Share of streamed requests that met the model's TTFT or TPOT SLO.",
			q(`sum by (model, kind) (rate(llmgw_slo_requests_total{model=~"$model", result="met"}[$__rate_interval])) / sum by (model, kind) (rate(llmgw_slo_requests_total{model=~"$model"}[$__rate_interval]))`, "{{model}} {{kind}}")),
		graph("Error budget burn rate", "short", "Share missed over the 1% budget, in the 1h and 5m windows the fast burn alert reads: 14.4 spends a 30-day budget in about two days.",
			q(`model_kind:llmgw_slo_requests_missed:ratio_rate1h{model=~"$model"} / 0.01`, "1h {{model}} {{kind}}"),
			q(`model_kind:llmgw_slo_requests_missed:ratio_rate5m{model=~"$model"} / 0.01`, "5m {{model}} {{kind}}")),
		graph("TTFT p99 against the SLO", "s", "The measured p99 over 5m (recording rule) and the catalog's ttft_p99.",
			q(`model:llmgw_ttft_seconds:p99_rate5m{model=~"$model"}`, "p99 {{model}}"),
			q(`llmgw_model_slo_seconds{model=~"$model", kind="ttft_p99"}`, "SLO {{model}}")),
		graph("TPOT p99 against the SLO", "s", "The measured p99 over 5m (recording rule) and the catalog's tpot_p99.",
			q(`model:llmgw_tpot_seconds:p99_rate5m{model=~"$model"}`, "p99 {{model}}"),
			q(`llmgw_model_slo_seconds{model=~"$model", kind="tpot_p99"}`, "SLO {{model}}")),
		graph("Goodput by class", "percentunit", "Share of a model's recent requests of each priority class that met both of the class's SLOs; models with admission enabled.",
			q(`llmgw_goodput_ratio{model=~"$model"}`, "{{model}} {{class}}")),
		graph("SLO pressure", "short", "How far the recent p99 is over the SLO: 1 at it, above 1 past it.",
			q(`llmgw_slo_pressure{model=~"$model"}`, "{{model}}")),
		graph("Time to first token (GenAI)", "s", "p99 of gen_ai.server.time_to_first_token, by requested model.",
			q(`histogram_quantile(0.99, sum by (gen_ai_request_model, le) (rate(gen_ai_server_time_to_first_token_seconds_bucket{gen_ai_request_model=~"$model"}[$__rate_interval])))`, "p99 {{gen_ai_request_model}}")),
		graph("Time per output token (GenAI)", "s", "p99 of gen_ai.server.time_per_output_token, by requested model.",
			q(`histogram_quantile(0.99, sum by (gen_ai_request_model, le) (rate(gen_ai_server_time_per_output_token_seconds_bucket{gen_ai_request_model=~"$model"}[$__rate_interval])))`, "p99 {{gen_ai_request_model}}")),
		graph("Token usage (GenAI)", "short", "gen_ai.client.token.usage a second, by model and token type.",
			q(`sum by (gen_ai_request_model, gen_ai_token_type) (rate(gen_ai_client_token_usage_sum{gen_ai_request_model=~"$model"}[$__rate_interval]))`, "{{gen_ai_request_model}} {{gen_ai_token_type}}")),
		graph("Inter-token gaps", "s", "p99 of the time between streamed events: the stalls a mean per-token time hides.",
			q(`histogram_quantile(0.99, sum by (model, le) (rate(llmgw_inter_token_seconds_bucket{model=~"$model"}[$__rate_interval])))`, "p99 {{model}}")),
		graph("Output tokens a second per request", "short", "Median output rate of a request, by model.",
			q(`histogram_quantile(0.5, sum by (model, le) (rate(llmgw_output_tokens_per_second_bucket{model=~"$model"}[$__rate_interval])))`, "p50 {{model}}")),
		graph("Fallbacks", "reqps", "Requests sent to a fallback model because the requested model's pool could not serve them, by the class of the failure the fallback served (none when no call failed).",
			q(`sum by (model, to, class) (rate(llmgw_fallbacks_total{model=~"$model"}[$__rate_interval]))`, "{{model}} → {{to}} {{class}}")),
	)
}
