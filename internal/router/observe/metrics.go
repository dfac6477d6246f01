package observe

// The request metrics: requests by their outcome, first-token and
// whole-request latency, tokens served, and the seed's token timing
// (tokens.go) by model and by the tenant label (tenant.go). Labels stay
// bounded: the model label, a pool, a status code, an error type. A
// model's llmgw_tokens_total series are resolved once per catalog.

import (
	"strconv"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/tenant"
)

// Metrics is the request metrics, an Observer.
type Metrics struct {
	token    *tokenMetrics
	tenant   *tenantLabel
	requests *prometheus.CounterVec
	ttft     *prometheus.HistogramVec
	duration *prometheus.HistogramVec
	tokens   *prometheus.CounterVec
	// byModel holds each model's llmgw_tokens_total counters for the
	// catalog in service; replaced whole.
	byModel atomic.Pointer[map[string]*modelTokens] // key: model name
}

var (
	_ Observer        = (*Metrics)(nil)
	_ CatalogObserver = (*Metrics)(nil)
	_ Collecting      = (*Metrics)(nil)
)

// ttftBuckets span a cached short prompt's 25 ms to a queued long one's
// minute.
var ttftBuckets = []float64{0.025, 0.05, 0.1, 0.2, 0.35, 0.5, 0.75, 1, 1.5, 2.5, 5, 10, 20, 60}

// durationBuckets span an embedding's 10 ms to a long answer's ten minutes.
var durationBuckets = []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 40, 80, 160, 320, 600}

// NewMetrics makes the request metrics, the tenant label cut to
// tenantLevel and capped at tenantLimit values (tenant.go).
func NewMetrics(tenantLevel string, tenantLimit int) *Metrics {
	m := &Metrics{
		token:  newTokenMetrics(),
		tenant: newTenantLabel(tenantLevel, tenantLimit),
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
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "llmgw_tokens_total",
			Help: "Tokens served, by model, pool and kind: prompt, completion, and cached (prompt tokens the backend served from its prefix cache).",
		}, []string{"model", "pool", "kind"}),
	}
	m.byModel.Store(&map[string]*modelTokens{})
	return m
}

// Collectors is every metric of m.
func (m *Metrics) Collectors() []prometheus.Collector {
	return append(m.token.collectors(), m.requests, m.ttft, m.duration, m.tokens, m.tenant.dropped)
}

// SetCatalog publishes c's SLOs and resolves each of its models'
// llmgw_tokens_total counters, for its pool.
func (m *Metrics) SetCatalog(c *catalog.Catalog) {
	by := make(map[string]*modelTokens, len(c.Models()))
	for _, model := range c.Models() {
		t := &modelTokens{pool: model.Pool}
		for i, kind := range tokenKinds {
			t.counters[i] = m.tokens.WithLabelValues(model.Name, model.Pool, kind)
		}
		by[model.Name] = t
	}
	m.byModel.Store(&by)
	m.token.setSLOs(c.Models())
}

// Observe counts c, times it, and counts the tokens it was served. Its
// latencies are observed once a pool served it, with its exemplar.
func (m *Metrics) Observe(c *Completed) {
	o := &c.Outcome
	pool := c.Pool
	if pool == "" {
		pool = "none"
	}
	m.requests.WithLabelValues(c.Model, pool, codeLabel(o.Status), string(c.ErrorType)).Inc()
	if c.Pool != "" {
		observeExemplar(m.duration.WithLabelValues(c.Model, c.Pool), c.Took.Seconds(), c.Exemplar)
		if c.Stream && o.TTFT > 0 && o.Usage != nil && o.Usage.CompletionTokens > 0 {
			observeExemplar(m.ttft.WithLabelValues(c.Model, c.Pool), o.TTFT.Seconds(), c.Exemplar)
		}
	}
	m.token.observe(c, pool)
	if c.Requested != nil && c.Pool != "" && o.Usage != nil {
		cs := m.tokenCounters(c.Record.Model, c.Pool)
		cs[0].Add(float64(c.Record.PromptTokens))
		cs[1].Add(float64(c.Record.CompletionTokens))
		cs[2].Add(float64(c.Record.CachedTokens))
	}
}

// Gap is what times the gaps between a stream's token events for model
// (its canonical name): llmgw_inter_token_seconds.
func (m *Metrics) Gap(model string) prometheus.Observer {
	return m.token.gap.WithLabelValues(model)
}

// TenantLabel is the tenant label of one more request of the tenant at
// path: the path cut to the label's level, or "other" past the cap; empty
// for an empty path.
func (m *Metrics) TenantLabel(path string) string {
	if path == "" {
		return ""
	}
	return m.tenant.label(tenant.AtLevel(path, m.tenant.level))
}

// codeLabels are the code label's values, made once.
var codeLabels = func() (l [600]string) {
	for i := range l {
		l[i] = strconv.Itoa(i)
	}
	return l
}()

// codeLabel is the code label of status.
func codeLabel(status int) string {
	if status >= 0 && status < len(codeLabels) {
		return codeLabels[status]
	}
	return strconv.Itoa(status)
}

// tokenKinds are llmgw_tokens_total's kinds, in the order modelTokens
// holds them.
var tokenKinds = [3]string{"prompt", "completion", "cached"}

// modelTokens is a model's llmgw_tokens_total counters, for its pool.
type modelTokens struct {
	pool     string
	counters [3]prometheus.Counter
}

// tokenCounters is llmgw_tokens_total's counters for model served by
// pool: resolved once per catalog for each model and its pool, and
// resolved here for a pair the catalog in service does not have.
func (m *Metrics) tokenCounters(model, pool string) *[3]prometheus.Counter {
	if t := (*m.byModel.Load())[model]; t != nil && t.pool == pool {
		return &t.counters
	}
	var c [3]prometheus.Counter
	for i, kind := range tokenKinds {
		c[i] = m.tokens.WithLabelValues(model, pool, kind)
	}
	return &c
}
