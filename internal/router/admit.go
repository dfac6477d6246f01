package router

// Admitting a request, in two steps. Its limits first: it takes its share
// of every limit on its path — its key's and each tenant level's — or is
// refused with 429 before any upstream sees it. Tokens are reserved here
// for its prompts, as estimated, and every answer the request may
// generate at its output bound (n or best_of of them for each prompt it
// lists), and settled at the real figure once the answer is done
// (internal/router/observe's settle.go). Then, for a model that enables
// SLO-aware admission, its pool's gate (internal/router/admission), which
// reads the catalog in service through the snapshot, each model's SLO
// pressure from the router's SLO tracker, and counts in the router's
// registry. docs/ADMISSION.md says how the signals combine.

import (
	"context"
	"math"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/tenant"
	"gitea.mynodes.xyz/ilker/llmgw/internal/limits"
	"gitea.mynodes.xyz/ilker/llmgw/internal/openai"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/admission"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/observe"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/pool"
)

// admitSLO passes req through its pool's gate, of gates, when its model
// enables admission: at once, after a wait, or not at all. The ticket,
// nil when admission is off, is released by the request's first token or
// end.
func admitSLO(ctx context.Context, gates *admission.Gates, req *parsedRequest, s *snapshot) (*admission.Ticket, error) {
	if !req.model.Admission.Enabled {
		return nil, nil
	}
	if req.span == nil {
		return gates.Admit(ctx, s, req.model, req.class, req.tenant, req.estimate)
	}
	start := time.Now()
	t, err := gates.Admit(ctx, s, req.model, req.class, req.tenant, req.estimate)
	observe.NoteAdmission(req.span, t, err, time.Since(start))
	return t, err
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

// sloPressure is how far a model of s is over its SLO, by the samples
// of t: 1 at it, above 1 past it, 0 when it has none, s does not know it
// (or is nil), or too little is known.
func (s *snapshot) sloPressure(t *admission.SLOTracker, model string) float64 {
	if s == nil {
		return 0
	}
	m, ok := s.cat.Resolve(model)
	if !ok {
		return 0
	}
	return max(t.Shares(m, time.Now()))
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
		pressure := func(model string) float64 { return s.sloPressure(&c.r.slo, model) }
		c.r.m.admission.CollectFor(ch, s.cat, pressure, &c.r.goodput)
	}
}

// Limiter enforces rate limits and budgets: it admits a request and
// settles what it reserved.
type Limiter interface {
	Admit(ctx context.Context, r limits.Request) (limits.Decision, error)
	observe.Settler
}

// keyLimits is the limits a request is held to: a Limiter, which
// enforces them, the limits on each level of a tenant path, and the
// output bound a request that names none reserves.
type keyLimits struct {
	limiter      Limiter                                 // nil enforces none
	tenantLimits func(path string) []tenant.TenantLimits // nil: none
	defaultMax   int64
}

// reserve reserves req's share of its limits, setting the rate-limit
// headers, or says why it may not go on.
func (l keyLimits) reserve(ctx context.Context, w http.ResponseWriter, req *parsedRequest) error {
	if l.limiter == nil || req.key == nil {
		return nil
	}
	scopes := make([]limits.Scope, 0, 4)
	if !req.key.Limits.IsZero() {
		scopes = append(scopes, limits.Scope{Name: "key:" + req.key.ID, Limits: req.key.Limits})
	}
	if l.tenantLimits != nil {
		for _, tl := range l.tenantLimits(req.key.Tenant) {
			scopes = append(scopes, limits.Scope{Name: "tenant:" + tl.Path, Limits: tl.Limits})
		}
	}
	if len(scopes) == 0 {
		return nil
	}
	answers := mulTokens(req.Choices, req.prompts)
	tokens := addTokens(req.estimate, mulTokens(req.outputBound(l.defaultMax), answers))
	if req.api.counts {
		tokens = 0 // a count runs no model: it takes a request, and no tokens
	}
	d, err := l.limiter.Admit(ctx, limits.Request{Scopes: scopes, Tokens: tokens, Now: time.Now()})
	if err != nil {
		return openai.Unavailable("Rate limits cannot be checked right now; try again shortly.", err)
	}
	limits.Headers(w.Header(), d)
	if !d.Allowed {
		return limits.RefusalError(d)
	}
	req.reserve = d.Reservation
	req.reserved = true
	return nil
}

// outputBound is the most tokens one of req's answers may take, and what
// a translation to a provider that needs a bound sends: the request's own,
// or def when it names none; zero for an API that generates nothing.
func (req *parsedRequest) outputBound(def int64) int64 {
	switch {
	case !req.api.generates:
		return 0
	case req.MaxTokens > 0:
		return req.MaxTokens
	}
	return def
}

// mulTokens is a × b for counts that are never negative, held at
// math.MaxInt64 rather than wrapping.
func mulTokens(a, b int64) int64 {
	if b != 0 && a > math.MaxInt64/b {
		return math.MaxInt64
	}
	return a * b
}

// addTokens is a + b for counts that are never negative, held at
// math.MaxInt64 rather than wrapping: a request that asks for more tokens
// than an int64 holds must meet every token limit, not slip under them.
func addTokens(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}
