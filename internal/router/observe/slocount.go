package observe

// SLO attainment: for each streamed request judged against an SLO,
// whether its first token and its time per output token met it, one
// count each. What multi-window burn-rate alerts divide: missed over all.
// A request is counted as the SLO tracker takes its sample (a stream
// that produced a time per token), each kind by the request's one
// Judgement: a kind is counted where its SLO has a figure and the
// request measured it.

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
)

// SLOCounts is llmgw_slo_requests_total, an Observer, and its series for
// the models of the catalog in service that have an SLO, made with it so
// that each shows from the start, at zero.
type SLOCounts struct {
	requests *prometheus.CounterVec
	by       atomic.Pointer[map[string]*sloCounters] // key: canonical model name; replaced whole
}

var (
	_ Observer        = (*SLOCounts)(nil)
	_ CatalogObserver = (*SLOCounts)(nil)
	_ Collecting      = (*SLOCounts)(nil)
)

// sloCounters are one model's counts by kind (ttft, tpot), then verdict
// (met, missed); nil for a kind neither the model nor any of its classes
// has an SLO of.
type sloCounters [2]*[2]prometheus.Counter

// NewSLOCounts makes llmgw_slo_requests_total.
func NewSLOCounts() *SLOCounts {
	return &SLOCounts{requests: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "llmgw_slo_requests_total",
		Help: "Streamed requests judged against the SLO of their admission class (the model's slo where the class sets none), by model, kind (ttft: time to first token against ttft_p99; tpot: time per output token against tpot_p99) and result: met (no longer than the SLO) or missed. For burn-rate alerts: missed over all is the error ratio.",
	}, []string{"model", "kind", "result"})}
}

// Collectors is llmgw_slo_requests_total.
func (s *SLOCounts) Collectors() []prometheus.Collector {
	return []prometheus.Collector{s.requests}
}

// SetCatalog makes the series of c's models' SLOs: a kind's where the
// model or one of its classes has an SLO of it. Those of a model removed
// stay, as counters do.
func (s *SLOCounts) SetCatalog(c *catalog.Catalog) {
	by := make(map[string]*sloCounters, len(c.Models()))
	for _, m := range c.Models() {
		var cs sloCounters
		for i, kind := range [2]string{"ttft", "tpot"} {
			if hasSLO(&m, i) {
				cs[i] = &[2]prometheus.Counter{s.requests.WithLabelValues(m.Name, kind, "met"), s.requests.WithLabelValues(m.Name, kind, "missed")}
			}
		}
		if cs[0] != nil || cs[1] != nil {
			by[m.Name] = &cs
		}
	}
	s.by.Store(&by)
}

// hasSLO reports whether m, or one of its admission classes, has an SLO
// of kind 0 (ttft) or 1 (tpot).
func hasSLO(m *catalog.Model, kind int) bool {
	of := func(s catalog.SLO) bool { return [2]bool{s.TTFTp99 > 0, s.TPOTp99 > 0}[kind] }
	if of(m.SLO) {
		return true
	}
	for _, s := range m.Admission.Classes {
		if of(s) {
			return true
		}
	}
	return false
}

// Observe counts each kind c's Judgement judged, for a stream whose
// token timing the SLO tracker takes.
func (s *SLOCounts) Observe(c *Completed) {
	if !c.Stream || !c.Timing.OK || c.Requested == nil {
		return
	}
	by := s.by.Load()
	if by == nil {
		return // no catalog yet
	}
	cs := (*by)[c.Model]
	if cs == nil {
		return
	}
	for i, v := range [2]Verdict{c.SLO.TTFT, c.SLO.TPOT} {
		if cs[i] == nil || v == Unjudged {
			continue
		}
		if v == Missed {
			cs[i][1].Inc()
		} else {
			cs[i][0].Inc()
		}
	}
}
