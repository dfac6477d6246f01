package router

// The router's own metrics: requests in flight, how routing sent them
// (decisions, prefix hits, retries, fallbacks, hedges), upstream failures
// by cause, ejections, and whether the last reload took. Labels stay
// bounded: a canonical model, a pool, an endpoint, a fixed set of
// reasons. What a request came to is counted by internal/router/observe.

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/admission"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/pool"
)

type metrics struct {
	admission      *admission.Metrics
	inflight       *prometheus.GaugeVec
	upstreamErrors *prometheus.CounterVec
	reloadOK       prometheus.Gauge
	reloadTime     prometheus.Gauge

	// Routing.
	decisions   *prometheus.CounterVec
	predicted   *prometheus.CounterVec
	confirmed   *prometheus.CounterVec
	retries     *prometheus.CounterVec
	fallbacks   *prometheus.CounterVec
	ejections   *prometheus.CounterVec
	hedges      *prometheus.CounterVec
	hedgeWasted *prometheus.CounterVec
	eppDropped  *prometheus.CounterVec
}

// newMetrics makes the router's metrics.
func newMetrics() *metrics {
	return &metrics{
		admission: admission.NewMetrics(),
		inflight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "llmgw_inflight_requests",
			Help: "Requests being answered now, by model.",
		}, []string{"model"}),
		upstreamErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "llmgw_upstream_errors_total",
			Help: "Upstream calls that failed, by pool and reason: connect, first_byte_timeout, idle_timeout, status_429, status_auth, status_5xx, status_other, stream_broken, stream_error, bad_answer.",
		}, []string{"pool", "reason"}),
		reloadOK: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "llmgw_config_last_reload_successful",
			Help: "Whether the last configuration reload succeeded (1) or was refused (0).",
		}),
		reloadTime: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "llmgw_config_last_reload_success_timestamp_seconds",
			Help: "When the configuration was last loaded successfully, in seconds since the Unix epoch.",
		}),
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "llmgw_route_decisions_total",
			Help: "Endpoints picked, by pool, routing policy and the reason the policy gave.",
		}, []string{"pool", "policy", "reason"}),
		predicted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "llmgw_prefix_predicted_hits_total",
			Help: "Prompt tokens routing expected the chosen endpoint to hold in its prefix cache, of answers that report cached tokens.",
		}, []string{"pool"}),
		confirmed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "llmgw_prefix_confirmed_hits_total",
			Help: "Of the predicted prefix hits, the prompt tokens the answers reported cached.",
		}, []string{"pool"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "llmgw_retries_total",
			Help: "Requests sent to another endpoint after one failed before the first byte, by pool and the failure's reason.",
		}, []string{"pool", "reason"}),
		fallbacks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "llmgw_fallbacks_total",
			Help: "Requests sent to a fallback model because the requested model's pool could not serve them, by requested model, fallback, and the class of the failure the fallback served (rate_limited, unavailable, context_window_exceeded, content_filter; empty for none: no endpoint, admission's choice, or a failure of no class).",
		}, []string{"model", "to", "class"}),
		ejections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "llmgw_ejections_total",
			Help: "Times an endpoint was taken out of its pool, by pool, endpoint and reason: failures (requests failed in a row), health_check, or retry_after (a provider's 429 asked for a pause, which the endpoint sits out).",
		}, []string{"pool", "endpoint", "reason"}),
		hedges: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "llmgw_hedges_total",
			Help: "Requests also sent to a second endpoint because the first had no first token in time, by pool and outcome: won (the hedge served the request), lost (the first endpoint did), failed (neither did).",
		}, []string{"pool", "outcome"}),
		hedgeWasted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "llmgw_hedge_wasted_seconds_total",
			Help: "Upstream time spent on hedged calls cancelled because the other call answered first, from sending to the end, by pool: what hedging costs the backends.",
		}, []string{"pool"}),
		eppDropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "llmgw_epp_response_dropped_total",
			Help: "Pieces of answers' bodies a pool of policy epp did not pass on to its Endpoint Picker, which was too far behind or gone; the client's answer never waits for it.",
		}, []string{"pool"}),
	}
}

func (m *metrics) register(reg prometheus.Registerer) error {
	cs := append(m.admission.Collectors(), m.inflight, m.upstreamErrors, m.reloadOK, m.reloadTime,
		m.decisions, m.predicted, m.confirmed, m.retries, m.fallbacks, m.ejections, m.hedges, m.hedgeWasted, m.eppDropped)
	var errs []error
	for _, c := range cs {
		errs = append(errs, reg.Register(c))
	}
	m.reloadOK.Set(1)
	return errors.Join(errs...)
}

// poolMetrics are a pool's routing counters, resolved once per pool.
type poolMetrics struct {
	decisions  map[string]prometheus.Counter // key: reason
	predicted  prometheus.Counter
	confirmed  prometheus.Counter
	eppDropped prometheus.Counter // nil unless the pool's policy is epp
}

// forPool resolves a pool's counters; m may be nil, in tests of picking
// alone.
func (m *metrics) forPool(name, policy string) poolMetrics {
	if m == nil {
		m = newMetrics()
	}
	pm := poolMetrics{
		decisions: make(map[string]prometheus.Counter, len(pool.Reasons)),
		predicted: m.predicted.WithLabelValues(name),
		confirmed: m.confirmed.WithLabelValues(name),
	}
	for _, r := range pool.Reasons {
		pm.decisions[r] = m.decisions.WithLabelValues(name, policy, r)
	}
	if policy == catalog.PolicyEPP {
		pm.eppDropped = m.eppDropped.WithLabelValues(name)
	}
	return pm
}
