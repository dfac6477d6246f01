package router

// Token-level timing: how long each output token took, the gaps between
// streamed tokens, and output tokens a second — per model and per tenant.
// What a model's SLO is written in, and what admission reads back.

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/proxy"
)

type tokenMetrics struct {
	tpot       *prometheus.HistogramVec
	gap        *prometheus.HistogramVec
	rate       *prometheus.HistogramVec
	tenantTPOT *prometheus.HistogramVec
	tenantRate *prometheus.HistogramVec
	slo        *prometheus.GaugeVec
}

// tokenBuckets span a fast small model's 5 ms a token to a 2 s stall.
var tokenBuckets = []float64{0.005, 0.01, 0.02, 0.035, 0.05, 0.075, 0.1, 0.15, 0.25, 0.5, 1, 2}

// rateBuckets span 1 to 250 output tokens a second.
var rateBuckets = []float64{1, 2, 5, 10, 15, 20, 30, 50, 75, 100, 150, 250}

func newTokenMetrics() *tokenMetrics {
	histogram := func(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels)
	}
	return &tokenMetrics{
		tpot: histogram("llmgw_tpot_seconds",
			"Time per output token after the first, per streamed request: what a model's slo.tpot_p99 is written in.",
			tokenBuckets, "model", "pool"),
		gap: histogram("llmgw_inter_token_seconds",
			"Time between streamed events, about one token each: the stalls a mean per-token time hides.",
			tokenBuckets, "model"),
		rate: histogram("llmgw_output_tokens_per_second",
			"Output tokens a second per request: after the first token when streamed, over the whole request otherwise.",
			rateBuckets, "model", "pool"),
		tenantTPOT: histogram("llmgw_tenant_tpot_seconds",
			"Time per output token by tenant (the level router.tenant_label names), for streamed requests.",
			tokenBuckets, "tenant"),
		tenantRate: histogram("llmgw_tenant_output_tokens_per_second",
			"Output tokens a second per request, by tenant.",
			rateBuckets, "tenant"),
		slo: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "llmgw_model_slo_seconds",
			Help: "A model's SLO from the catalog, by kind: ttft_p99 or tpot_p99. For alerting against the histograms.",
		}, []string{"model", "kind"}),
	}
}

func (t *tokenMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{t.tpot, t.gap, t.rate, t.tenantTPOT, t.tenantRate, t.slo}
}

// tokenTiming is a finished request's time per output token and output
// tokens a second; ok is false when there is nothing to tell. A streamed
// request's figures run from its first token to its last, so they leave
// out the wait for the first; a plain one has only a rate over the whole
// request.
func tokenTiming(streamed bool, o proxy.Outcome, took time.Duration) (tpot time.Duration, rate float64, ok bool) {
	if o.Usage == nil || o.Usage.CompletionTokens <= 0 {
		return 0, 0, false
	}
	n := o.Usage.CompletionTokens
	if !streamed {
		if took <= 0 {
			return 0, 0, false
		}
		return 0, float64(n) / took.Seconds(), true
	}
	if n < 2 || o.Decode <= 0 {
		return 0, 0, false
	}
	return o.Decode / time.Duration(n-1), float64(n-1) / o.Decode.Seconds(), true
}

// observeTokens records a finished request's token timing, and for a
// stream feeds its model's SLO tracker.
func (r *Router) observeTokens(req *parsedRequest, res dispatchResult, took time.Duration) {
	tpot, rate, ok := tokenTiming(req.Stream, res.outcome, took)
	if !ok {
		return
	}
	model, pool := r.metricModel(req.Model), res.pool
	if pool == "" {
		pool = "none"
	}
	tenant := r.m.tenant.tenantOf(req)
	if tpot > 0 {
		r.m.token.tpot.WithLabelValues(model, pool).Observe(tpot.Seconds())
		if tenant != "" {
			r.m.token.tenantTPOT.WithLabelValues(tenant).Observe(tpot.Seconds())
		}
	}
	r.m.token.rate.WithLabelValues(model, pool).Observe(rate)
	if tenant != "" {
		r.m.token.tenantRate.WithLabelValues(tenant).Observe(rate)
	}
	if req.Stream {
		canonical := r.canonicalModel(req.Model)
		r.slo.Add(canonical, res.outcome.TTFT, tpot)
		r.countSLO(canonical, res.outcome.TTFT, tpot)
	}
}

func (r *Router) canonicalModel(name string) string {
	c, _ := r.resolve(name)
	return c
}

// setSLOs publishes the catalog's SLOs, all at once, so that a model
// removed or left without one stops being reported.
func (t *tokenMetrics) setSLOs(models []catalog.Model) {
	t.slo.Reset()
	for _, m := range models {
		if m.SLO.TTFTp99 > 0 {
			t.slo.WithLabelValues(m.Name, "ttft_p99").Set(m.SLO.TTFTp99.Seconds())
		}
		if m.SLO.TPOTp99 > 0 {
			t.slo.WithLabelValues(m.Name, "tpot_p99").Set(m.SLO.TPOTp99.Seconds())
		}
	}
}
