package router

// SLO-aware admission as the router uses it: a request of a model that
// enables it passes its pool's gate (internal/router/admission), which
// reads the catalog in service through the snapshot, each model's SLO
// pressure from the router's SLO tracker, and counts in the router's
// registry. docs/ADMISSION.md says how the signals combine.

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/admission"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/pool"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/proxy"
)

// admitSLO passes req through its pool's gate when its model enables
// admission: at once, after a wait, or not at all. The ticket, nil when
// admission is off, is released by the request's first token or end.
func (r *Router) admitSLO(ctx context.Context, req *parsedRequest, s *snapshot) (*admission.Ticket, error) {
	if !req.model.Admission.Enabled {
		return nil, nil
	}
	if req.span == nil {
		return r.gates.Admit(ctx, s, req.model, req.class, req.tenant, req.estimate)
	}
	start := time.Now()
	t, err := r.gates.Admit(ctx, s, req.model, req.class, req.tenant, req.estimate)
	noteAdmission(req, t, err, time.Since(start))
	return t, err
}

// initGates makes the pools' gates, reading of r the catalog in service,
// the models' SLO pressure, and counting in r's metrics.
func (r *Router) initGates() {
	current := func() admission.Catalog {
		if s := r.snap.Load(); s != nil {
			return s
		}
		return nil
	}
	r.gates = admission.NewGates(current, r.sloPressure, r.m.admission)
}

var _ admission.Catalog = (*snapshot)(nil)

// PoolState is the named pool's endpoints not out, as they stand at now.
func (s *snapshot) PoolState(name string, now time.Time, startBatch bool) ([]pool.State, float64, bool) {
	p := s.pools[name]
	if p == nil {
		return nil, 0, false
	}
	return p.States(now, startBatch), p.MeanPrompt(), true
}

// HasPool reports whether s has the named pool.
func (s *snapshot) HasPool(name string) bool { return s.pools[name] != nil }

// NextFallback is the fallback to try after cur (nextFallback).
func (s *snapshot) NextFallback(requested, cur *catalog.Model) *catalog.Model {
	return s.cat.NextFallback(requested, cur)
}

// sloPressure is how far a model is over its SLO: 1 at it, above 1 past
// it, 0 when it has none or too little is known.
func (r *Router) sloPressure(model string) float64 {
	_, entry := r.resolve(model)
	return max(r.slo.Shares(&entry, time.Now()))
}

// metSLO reports whether a finished request met its class's SLOs: it was
// answered, its first token came within the TTFT SLO and, when streamed
// with more than one token, its tokens within the TPOT SLO. A request
// refused or failed missed.
func (r *Router) metSLO(req *parsedRequest, o proxy.Outcome) bool {
	if o.Status != 200 {
		return false
	}
	slo := req.model.ClassSLO(req.class.String())
	if slo.TTFTp99 > 0 && (o.TTFT <= 0 || o.TTFT > slo.TTFTp99) {
		return false
	}
	if tpot, _, ok := tokenTiming(req.Stream, o, 0); ok && tpot > 0 && slo.TPOTp99 > 0 && tpot > slo.TPOTp99 {
		return false
	}
	return true
}

// admissionCollector exports each model's SLO pressure and goodput, read
// when scraped.
type admissionCollector struct {
	r *Router
}

func (c admissionCollector) Describe(ch chan<- *prometheus.Desc) {
	c.r.m.admission.Describe(ch)
}

func (c admissionCollector) Collect(ch chan<- prometheus.Metric) {
	if s := c.r.snap.Load(); s != nil {
		c.r.m.admission.CollectFor(ch, s.cat, c.r.sloPressure, &c.r.goodput)
	}
}
