package observe

// The OpenTelemetry GenAI metrics (semantic conventions v1.41), under
// Prometheus naming: time to first token, time per output token, request
// duration and token usage, with the convention's bucket boundaries and
// attributes. The model is the catalog's name for what was asked for and
// the provider is named by the pool's kind, so labels stay bounded. A
// model and pool's series are resolved once per catalog.

import (
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
)

// The convention's advisory bucket boundaries (ExplicitBucketBoundaries),
// in seconds and tokens.
var (
	genAITTFTBuckets     = []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0}
	genAITPOTBuckets     = []float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5}
	genAIDurationBuckets = []float64{0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92}
	genAITokenBuckets    = []float64{1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864}
)

// GenAI is the GenAI histograms, an Observer, and their series resolved
// for the catalog in service.
type GenAI struct {
	ttft, tpot, duration, tokens *prometheus.HistogramVec

	mu     sync.Mutex                                // held while series is grown
	series atomic.Pointer[map[genAIKey]*genAISeries] // replaced whole; emptied by SetCatalog
}

var (
	_ Observer        = (*GenAI)(nil)
	_ CatalogObserver = (*GenAI)(nil)
	_ Collecting      = (*GenAI)(nil)
)

// NewGenAI makes the GenAI histograms.
func NewGenAI() *GenAI {
	labels := []string{"gen_ai_operation_name", "gen_ai_provider_name", "gen_ai_request_model"}
	histogram := func(name, help string, buckets []float64, extra ...string) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets},
			append(labels[:len(labels):len(labels)], extra...))
	}
	g := &GenAI{
		ttft: histogram("gen_ai_server_time_to_first_token_seconds",
			"Time to generate the first token for successful streamed responses (gen_ai.server.time_to_first_token): from the request's arrival, as llmgw_ttft_seconds.",
			genAITTFTBuckets),
		tpot: histogram("gen_ai_server_time_per_output_token_seconds",
			"Time per output token generated after the first token for successful streamed responses (gen_ai.server.time_per_output_token), as llmgw_tpot_seconds.",
			genAITPOTBuckets),
		duration: histogram("gen_ai_server_request_duration_seconds",
			"Time from a request's arrival to the end of its answer (gen_ai.server.request.duration); error_type is empty for a request that succeeded.",
			genAIDurationBuckets, "error_type"),
		tokens: histogram("gen_ai_client_token_usage",
			"Tokens a request used, by gen_ai_token_type: input (prompt) or output (completion), as the upstream reported or llmgw counted them (gen_ai.client.token.usage).",
			genAITokenBuckets, "gen_ai_token_type"),
	}
	g.series.Store(&map[genAIKey]*genAISeries{})
	return g
}

// Collectors is the four histograms.
func (g *GenAI) Collectors() []prometheus.Collector {
	return []prometheus.Collector{g.ttft, g.tpot, g.duration, g.tokens}
}

// SetCatalog forgets the series resolved for the catalog before c, whose
// models and pools may be gone.
func (g *GenAI) SetCatalog(*catalog.Catalog) {
	g.mu.Lock()
	g.series.Store(&map[genAIKey]*genAISeries{})
	g.mu.Unlock()
}

// genAIKey is what a request's series are found by: its model label, the
// pool that served it, that pool's provider and the request's operation.
type genAIKey struct{ model, pool, provider, operation string }

// genAISeries are one key's observers; duration is for a request that
// succeeded.
type genAISeries struct {
	ttft, tpot, duration, input, output prometheus.Observer
}

// seriesOf is the series of key, resolved on first use.
func (g *GenAI) seriesOf(key genAIKey) *genAISeries {
	if v := (*g.series.Load())[key]; v != nil {
		return v
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	cur := *g.series.Load()
	if v := cur[key]; v != nil {
		return v
	}
	next := make(map[genAIKey]*genAISeries, len(cur)+1)
	for k, v := range cur {
		next[k] = v
	}
	values := []string{key.operation, key.provider, key.model}
	v := &genAISeries{
		ttft:     g.ttft.WithLabelValues(values...),
		tpot:     g.tpot.WithLabelValues(values...),
		duration: g.duration.WithLabelValues(append(values, "")...),
		input:    g.tokens.WithLabelValues(append(values, "input")...),
		output:   g.tokens.WithLabelValues(append(values, "output")...),
	}
	next[key] = v
	g.series.Store(&next)
	return v
}

// Observe records c in the GenAI histograms where
// llmgw_request_duration_seconds records it: when a pool served it.
// First-token and per-token times are of successful streams alone; the
// exemplar goes with the first-token and duration observations.
func (g *GenAI) Observe(c *Completed) {
	if c.Pool == "" {
		return
	}
	o := &c.Outcome
	key := genAIKey{model: c.Model, pool: c.Pool, provider: c.Provider, operation: c.Operation}
	v := g.seriesOf(key)
	if c.ErrorType != "" {
		observeExemplar(g.duration.WithLabelValues(key.operation, key.provider, key.model, string(c.ErrorType)), c.Took.Seconds(), c.Exemplar)
	} else {
		observeExemplar(v.duration, c.Took.Seconds(), c.Exemplar)
	}
	if u := o.Usage; u != nil {
		v.input.Observe(float64(u.PromptTokens))
		v.output.Observe(float64(u.CompletionTokens))
	}
	if c.ErrorType != "" || !c.Stream {
		return
	}
	if o.TTFT > 0 && o.Usage != nil && o.Usage.CompletionTokens > 0 {
		observeExemplar(v.ttft, o.TTFT.Seconds(), c.Exemplar)
	}
	if c.Timing.TPOT > 0 {
		v.tpot.Observe(c.Timing.TPOT.Seconds())
	}
}
