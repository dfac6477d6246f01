package router

// SLO attainment: for each streamed request of a model with an SLO, whether
// its first token and its time per output token met the model's SLO, one
// count each. What multi-window burn-rate alerts divide: missed over all.
// A request is judged as the SLO tracker takes its sample and as goodput
// judges it: a sample of a kind exists when it was measured (above zero),
// and it meets the SLO when it is no longer than it.

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// newSLORequests is llmgw_slo_requests_total.
func newSLORequests() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "llmgw_slo_requests_total",
		Help: "Streamed requests judged against their model's SLO, by model, kind (ttft: time to first token against slo.ttft_p99; tpot: time per output token against slo.tpot_p99) and result: met (no longer than the SLO) or missed. For burn-rate alerts: missed over all is the error ratio.",
	}, []string{"model", "kind", "result"})
}

// countSLO counts one streamed request's samples, as the SLO tracker
// takes them for model (a name or alias), against the model's SLO: ttft
// and tpot are zero when not measured.
func (r *Router) countSLO(model string, ttft, tpot time.Duration) {
	s := r.snap.Load()
	if s == nil {
		return
	}
	m, ok := s.cat.Resolve(model)
	if !ok {
		return
	}
	judge := func(kind string, v, slo time.Duration) {
		if v <= 0 || slo <= 0 {
			return
		}
		result := "met"
		if v > slo {
			result = "missed"
		}
		r.m.sloRequests.WithLabelValues(m.Name, kind, result).Inc()
	}
	judge("ttft", ttft, m.SLO.TTFTp99)
	judge("tpot", tpot, m.SLO.TPOTp99)
}
