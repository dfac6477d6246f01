package router

// SLO attainment: for each streamed request of a model with an SLO, whether
// its first token and its time per output token met the model's SLO, one
// count each. What multi-window burn-rate alerts divide: missed over all.
// A request is judged as the SLO tracker takes its sample and as goodput
// judges it: a sample of a kind exists when it was measured (above zero),
// and it meets the SLO when it is no longer than it.

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
)

// sloCounts is llmgw_slo_requests_total, and its series for the models
// of the catalog in service that have an SLO, made with it so that each
// shows from the start, at zero.
type sloCounts struct {
	requests *prometheus.CounterVec
	by       atomic.Pointer[map[string]*sloCounters] // key: canonical model name; replaced whole
}

// sloCounters are one model's SLOs, by kind (ttft, tpot), and its counts
// by kind, then result (met, missed); a kind the model has no SLO of has
// neither.
type sloCounters struct {
	slo    [2]time.Duration
	counts [2][2]prometheus.Counter
}

func newSLOCounts() *sloCounts {
	return &sloCounts{requests: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "llmgw_slo_requests_total",
		Help: "Streamed requests judged against their model's SLO, by model, kind (ttft: time to first token against slo.ttft_p99; tpot: time per output token against slo.tpot_p99) and result: met (no longer than the SLO) or missed. For burn-rate alerts: missed over all is the error ratio.",
	}, []string{"model", "kind", "result"})}
}

// set makes the series of models' SLOs. Those of a model removed stay, as
// counters do.
func (c *sloCounts) set(models []catalog.Model) {
	by := make(map[string]*sloCounters, len(models))
	for _, m := range models {
		cs := sloCounters{slo: [2]time.Duration{m.SLO.TTFTp99, m.SLO.TPOTp99}}
		for i, kind := range [2]string{"ttft", "tpot"} {
			if cs.slo[i] > 0 {
				cs.counts[i] = [2]prometheus.Counter{c.requests.WithLabelValues(m.Name, kind, "met"), c.requests.WithLabelValues(m.Name, kind, "missed")}
			}
		}
		if cs.slo[0] > 0 || cs.slo[1] > 0 {
			by[m.Name] = &cs
		}
	}
	c.by.Store(&by)
}

// countSLO counts one streamed request's samples, as the SLO tracker
// takes them for model (its canonical name), against the model's SLO:
// ttft and tpot are zero when not measured.
func (r *Router) countSLO(model string, ttft, tpot time.Duration) {
	by := r.m.sloCounts.by.Load()
	if by == nil {
		return
	}
	cs := (*by)[model]
	if cs == nil {
		return
	}
	for i, v := range [2]time.Duration{ttft, tpot} {
		switch {
		case v <= 0 || cs.slo[i] <= 0:
		case v > cs.slo[i]:
			cs.counts[i][1].Inc()
		default:
			cs.counts[i][0].Inc()
		}
	}
}
