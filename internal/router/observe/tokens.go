package observe

// Token-level timing: how long each output token took, the gaps between
// streamed tokens, and output tokens a second — per model and per tenant.
// What a model's SLO is written in, and what admission reads back.

import (
	"github.com/prometheus/client_golang/prometheus"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
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

// observeTenant records c's token timing by its tenant label, if it has
// one.
func (t *tokenMetrics) observeTenant(c *Completed) {
	if c.Tenant == "" {
		return
	}
	if s := c.Timing.TPOT.Seconds(); s > 0 {
		t.tenantTPOT.WithLabelValues(c.Tenant).Observe(s)
	}
	t.tenantRate.WithLabelValues(c.Tenant).Observe(c.Timing.Rate)
}
