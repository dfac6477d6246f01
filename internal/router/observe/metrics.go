package observe

// The request metrics: requests by their outcome, first-token and
// whole-request latency, tokens served, and the seed's token timing
// (tokens.go) by model and by the tenant label (tenant.go). Labels stay
// bounded: the model label, a pool, a status code, an error type. The
// series a request of each model and pool uses are resolved on first use,
// once per catalog.

import (
	"strconv"
	"sync"
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
	mu       sync.Mutex                        // held while series is grown
	series   atomic.Pointer[map[seriesKey]any] // replaced whole; emptied by SetCatalog
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
	m.series.Store(&map[seriesKey]any{})
	return m
}

// Collectors is every metric of m.
func (m *Metrics) Collectors() []prometheus.Collector {
	return append(m.token.collectors(), m.requests, m.ttft, m.duration, m.tokens, m.tenant.dropped)
}

// SetCatalog publishes c's SLOs, shows each of its models'
// llmgw_tokens_total on its pool from now on, at zero, and forgets the
// series resolved for the catalog before, whose models and pools may be
// gone.
func (m *Metrics) SetCatalog(c *catalog.Catalog) {
	for _, model := range c.Models() {
		for _, kind := range tokenKinds {
			m.tokens.WithLabelValues(model.Name, model.Pool, kind)
		}
	}
	m.mu.Lock()
	m.series.Store(&map[seriesKey]any{})
	m.mu.Unlock()
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
	if o.Status == 200 && c.ErrorType == "" {
		m.answered(c.Model, pool).Inc()
	} else {
		m.requests.WithLabelValues(c.Model, pool, codeLabel(o.Status), string(c.ErrorType)).Inc()
	}
	if c.Pool != "" {
		observeExemplar(m.observer(familyDuration, c.Model, c.Pool), c.Took.Seconds(), c.Exemplar)
		if c.Stream && o.TTFT > 0 && o.Usage != nil && o.Usage.CompletionTokens > 0 {
			observeExemplar(m.observer(familyTTFT, c.Model, c.Pool), o.TTFT.Seconds(), c.Exemplar)
		}
	}
	if c.Timing.OK {
		if s := c.Timing.TPOT.Seconds(); s > 0 {
			m.observer(familyTPOT, c.Model, pool).Observe(s)
		}
		m.observer(familyRate, c.Model, pool).Observe(c.Timing.Rate)
		m.token.observeTenant(c)
	}
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

// tokenKinds are llmgw_tokens_total's kinds, in the order tokenCounters
// holds them.
var tokenKinds = [3]string{"prompt", "completion", "cached"}

// family is which metric a series the Metrics keep is of.
type family uint8

const (
	familyAnswered family = iota // llmgw_requests_total of a request answered 200 without an error
	familyDuration               // llmgw_request_duration_seconds
	familyTTFT                   // llmgw_ttft_seconds
	familyTPOT                   // llmgw_tpot_seconds
	familyRate                   // llmgw_output_tokens_per_second
	familyTokens                 // llmgw_tokens_total's three kinds
)

// seriesKey is what a series is found by: its family, and the model and
// pool labels it has.
type seriesKey struct {
	family      family
	model, pool string
}

// answered is the count of model's requests answered 200 on pool.
func (m *Metrics) answered(model, pool string) prometheus.Counter {
	return seriesOf(m, seriesKey{familyAnswered, model, pool}, func() prometheus.Counter {
		return m.requests.WithLabelValues(model, pool, codeLabel(200), "")
	})
}

// observer is the histogram of family f (duration, TTFT, TPOT or rate)
// for model on pool.
func (m *Metrics) observer(f family, model, pool string) prometheus.Observer {
	return seriesOf(m, seriesKey{f, model, pool}, func() prometheus.Observer {
		h := m.duration
		switch f {
		case familyTTFT:
			h = m.ttft
		case familyTPOT:
			h = m.token.tpot
		case familyRate:
			h = m.token.rate
		}
		return h.WithLabelValues(model, pool)
	})
}

// tokenCounters is llmgw_tokens_total's counters for model served by
// pool, by tokenKinds.
func (m *Metrics) tokenCounters(model, pool string) *[3]prometheus.Counter {
	return seriesOf(m, seriesKey{familyTokens, model, pool}, func() *[3]prometheus.Counter {
		var cs [3]prometheus.Counter
		for i, kind := range tokenKinds {
			cs[i] = m.tokens.WithLabelValues(model, pool, kind)
		}
		return &cs
	})
}

// seriesOf is m's series of key, made by resolve on first use: a series
// shows only once it is used, as WithLabelValues would show it.
func seriesOf[T any](m *Metrics, key seriesKey, resolve func() T) T {
	if v, ok := (*m.series.Load())[key]; ok {
		return v.(T)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	cur := *m.series.Load()
	if v, ok := cur[key]; ok {
		return v.(T)
	}
	next := make(map[seriesKey]any, len(cur)+1)
	for k, v := range cur {
		next[k] = v
	}
	v := resolve()
	next[key] = v
	m.series.Store(&next)
	return v
}
