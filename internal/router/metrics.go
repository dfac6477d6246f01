package router

// The router's own metrics: requests and their outcome, first-token and
// whole-request latency, requests in flight, upstream failures by cause,
// and whether the last reload took. Labels stay bounded: a canonical
// model, a pool, a status code, a fixed set of reasons.

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/tenant"
)

type metrics struct {
	token          *tokenMetrics
	tenant         tenantLabel
	requests       *prometheus.CounterVec
	ttft           *prometheus.HistogramVec
	duration       *prometheus.HistogramVec
	inflight       *prometheus.GaugeVec
	upstreamErrors *prometheus.CounterVec
	reloadOK       prometheus.Gauge
	reloadTime     prometheus.Gauge
}

// ttftBuckets span a cached short prompt's 25 ms to a queued long one's
// minute.
var ttftBuckets = []float64{0.025, 0.05, 0.1, 0.2, 0.35, 0.5, 0.75, 1, 1.5, 2.5, 5, 10, 20, 60}

// durationBuckets span an embedding's 10 ms to a long answer's ten minutes.
var durationBuckets = []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 40, 80, 160, 320, 600}

func newMetrics(tenantLevel string) *metrics {
	return &metrics{
		token:  newTokenMetrics(),
		tenant: tenantLabel{level: tenantLevel},
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "llmgw_requests_total",
			Help: "Requests answered, by model, the pool that served them (none if no pool did) and HTTP status; 499 when the client left.",
		}, []string{"model", "pool", "code"}),
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
			Help: "Upstream calls that failed, by pool and reason: connect, first_byte_timeout, idle_timeout, status_429, status_5xx, stream_broken, stream_error.",
		}, []string{"pool", "reason"}),
		reloadOK: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "llmgw_config_last_reload_successful",
			Help: "Whether the last configuration reload succeeded (1) or was refused (0).",
		}),
		reloadTime: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "llmgw_config_last_reload_success_timestamp_seconds",
			Help: "When the configuration was last loaded successfully, in seconds since the Unix epoch.",
		}),
	}
}

func (m *metrics) register(reg prometheus.Registerer) error {
	cs := append(m.token.collectors(), m.requests, m.ttft, m.duration, m.inflight, m.upstreamErrors, m.reloadOK, m.reloadTime)
	var errs []error
	for _, c := range cs {
		errs = append(errs, reg.Register(c))
	}
	m.reloadOK.Set(1)
	return errors.Join(errs...)
}

// tenantLabel turns a request's tenant path into the tenant label: the
// path cut to the level router.tenant_label names, so that cardinality is
// the operator's choice.
type tenantLabel struct {
	level string
}

// tenantOf is the request's tenant label, empty when the request has no
// tenant.
func (t tenantLabel) tenantOf(req *parsedRequest) string {
	if req.key == nil || req.key.Tenant == "" {
		return ""
	}
	return tenant.AtLevel(req.key.Tenant, t.level)
}
