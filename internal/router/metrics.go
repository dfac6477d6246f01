package router

// The router's own metrics: requests and their outcome, first-token and
// whole-request latency, requests in flight, upstream failures by cause,
// and whether the last reload took. Labels stay bounded: a canonical
// model, a pool, a status code, a fixed set of reasons.

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"gitea.mynodes.xyz/ilker/llmgw/internal/router/admission"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/pool"
)

type metrics struct {
	token          *tokenMetrics
	admission      *admission.Metrics
	tenant         *tenantLabel
	requests       *prometheus.CounterVec
	ttft           *prometheus.HistogramVec
	duration       *prometheus.HistogramVec
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
	tokens      *prometheus.CounterVec
	endpointUp  *prometheus.Desc
	endpointIn  *prometheus.Desc
	endpoints   *endpointMetrics

	// The OpenTelemetry GenAI histograms (genai.go) and SLO attainment
	// (slocount.go).
	genAI     *genAIMetrics
	sloCounts *sloCounts
}

// ttftBuckets span a cached short prompt's 25 ms to a queued long one's
// minute.
var ttftBuckets = []float64{0.025, 0.05, 0.1, 0.2, 0.35, 0.5, 0.75, 1, 1.5, 2.5, 5, 10, 20, 60}

// durationBuckets span an embedding's 10 ms to a long answer's ten minutes.
var durationBuckets = []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 40, 80, 160, 320, 600}

// newMetrics makes the router's metrics, the tenant label cut to
// tenantLevel and capped at tenantLimit values (tenantcap.go).
func newMetrics(tenantLevel string, tenantLimit int) *metrics {
	return &metrics{
		token:     newTokenMetrics(),
		admission: admission.NewMetrics(),
		tenant:    newTenantLabel(tenantLevel, tenantLimit),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "llmgw_requests_total",
			Help: "Requests answered, by model, the pool that served them (none if no pool did), HTTP status (499 when the client left) and error_type: why it failed, empty when it succeeded.",
		}, []string{"model", "pool", "code", "error_type"}),
		ttft: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "llmgw_ttft_seconds",
			Help:    "Time from a streamed request's arrival to its first output token: what a model's slo.ttft_p99 is written in.",
			Buckets: ttftBuckets,
		}, []string{"model", "pool"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "llmgw_request_duration_seconds",
			Help:    "Time from a request's arrival to the end of its answer.",
			Buckets: durationBuckets,
		}, []string{"model", "pool"}),
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
			Help: "Requests sent to a fallback model because the requested model's pool could not serve them, by requested model and fallback.",
		}, []string{"model", "to"}),
		ejections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "llmgw_ejections_total",
			Help: "Times an endpoint was taken out of its pool, by pool, endpoint and reason: failures (requests failed in a row) or health_check.",
		}, []string{"pool", "endpoint", "reason"}),
		hedges: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "llmgw_hedges_total",
			Help: "Requests also sent to a second endpoint because the first had no first token in time, by pool and outcome: won (the hedge served the request), lost (the first endpoint did), failed (neither did).",
		}, []string{"pool", "outcome"}),
		hedgeWasted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "llmgw_hedge_wasted_seconds_total",
			Help: "Upstream time spent on hedged calls cancelled because the other call answered first, from sending to the end, by pool: what hedging costs the backends.",
		}, []string{"pool"}),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "llmgw_tokens_total",
			Help: "Tokens served, by model, pool and kind: prompt, completion, and cached (prompt tokens the backend served from its prefix cache).",
		}, []string{"model", "pool", "kind"}),
		endpointUp: prometheus.NewDesc("llmgw_endpoint_up",
			"Whether routing sends to the endpoint (1) or has taken it out (0): its health check fails, or it failed requests in a row.",
			[]string{"pool", "endpoint"}, nil),
		endpointIn: prometheus.NewDesc("llmgw_endpoint_inflight",
			"Requests this gateway has sent to the endpoint and not yet seen end.",
			[]string{"pool", "endpoint"}, nil),
		endpoints: newEndpointMetrics(),
		genAI:     newGenAIMetrics(),
		sloCounts: newSLOCounts(),
	}
}

func (m *metrics) register(reg prometheus.Registerer) error {
	cs := append(m.token.collectors(), m.admission.Collectors()...)
	cs = append(cs, m.genAI.collectors()...)
	cs = append(cs, m.requests, m.ttft, m.duration, m.inflight, m.upstreamErrors, m.reloadOK, m.reloadTime,
		m.decisions, m.predicted, m.confirmed, m.retries, m.fallbacks, m.ejections, m.hedges, m.hedgeWasted, m.tokens,
		m.tenant.dropped, m.sloCounts.requests)
	var errs []error
	for _, c := range cs {
		errs = append(errs, reg.Register(c))
	}
	m.reloadOK.Set(1)
	return errors.Join(errs...)
}

// poolMetrics are a pool's routing counters, resolved once per pool.
type poolMetrics struct {
	decisions map[string]prometheus.Counter // key: reason
	predicted prometheus.Counter
	confirmed prometheus.Counter
}

// forPool resolves a pool's counters; m may be nil, in tests of picking
// alone.
func (m *metrics) forPool(name, policy string) poolMetrics {
	if m == nil {
		m = newMetrics("team", 0)
	}
	pm := poolMetrics{
		decisions: make(map[string]prometheus.Counter, len(pool.Reasons)),
		predicted: m.predicted.WithLabelValues(name),
		confirmed: m.confirmed.WithLabelValues(name),
	}
	for _, r := range pool.Reasons {
		pm.decisions[r] = m.decisions.WithLabelValues(name, policy, r)
	}
	return pm
}

// endpointCollector exports each endpoint's state as routing sees it now,
// read from the snapshot being served: an endpoint a reload removed is
// gone from the next scrape.
type endpointCollector struct {
	r *Router
}

func (c endpointCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.r.m.endpointUp
	ch <- c.r.m.endpointIn
	c.r.m.endpoints.describe(ch)
}

func (c endpointCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.r.snap.Load()
	if s == nil {
		return
	}
	now := time.Now().UnixNano()
	at := time.Unix(0, now)
	for _, p := range s.pools {
		for i, e := range p.Endpoints() {
			up := 1.0
			if e.Out(now) {
				up = 0
			}
			ch <- prometheus.MustNewConstMetric(c.r.m.endpointUp, prometheus.GaugeValue, up, p.name, e.Name())
			ch <- prometheus.MustNewConstMetric(c.r.m.endpointIn, prometheus.GaugeValue, float64(e.Counts().Inflight), p.name, e.Name())
			c.collectEndpoint(ch, p, i, at)
		}
	}
}
