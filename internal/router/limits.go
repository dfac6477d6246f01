package router

// Rate limits: a request takes its share of every limit on its path — its
// key's and each tenant level's — or is refused with 429 before any
// upstream sees it. Tokens are reserved here for its prompts, as
// estimated, and every answer the request may generate at its output
// bound (n or best_of of them for each prompt it lists), and settled at
// the real figure once the answer is done.

import (
	"context"
	"math"
	"net/http"
	"time"

	"gitea.mynodes.xyz/ilker/llmgw/internal/limits"
	"gitea.mynodes.xyz/ilker/llmgw/internal/openai"
)

// Limiter enforces rate limits and budgets.
type Limiter interface {
	Admit(ctx context.Context, r limits.Request) (limits.Decision, error)
	Settle(ctx context.Context, res limits.Reservation, usedTokens int64, costUSD float64)
}

// reserveLimits reserves the request's share of its limits, setting the rate-limit
// headers, or says why it may not go on.
func (r *Router) reserveLimits(ctx context.Context, w http.ResponseWriter, req *parsedRequest) error {
	if r.opts.Limits == nil || req.key == nil {
		return nil
	}
	scopes := make([]limits.Scope, 0, 4)
	if !req.key.Limits.IsZero() {
		scopes = append(scopes, limits.Scope{Name: "key:" + req.key.ID, Limits: req.key.Limits})
	}
	if r.opts.TenantLimits != nil {
		for _, tl := range r.opts.TenantLimits(req.key.Tenant) {
			scopes = append(scopes, limits.Scope{Name: "tenant:" + tl.Path, Limits: tl.Limits})
		}
	}
	if len(scopes) == 0 {
		return nil
	}
	answers := mulTokens(req.Choices, req.prompts)
	tokens := addTokens(req.estimate, mulTokens(req.outputBound(r.opts.Router.DefaultMaxTokens), answers))
	if req.api.counts {
		tokens = 0 // a count runs no model: it takes a request, and no tokens
	}
	d, err := r.opts.Limits.Admit(ctx, limits.Request{Scopes: scopes, Tokens: tokens, Now: time.Now()})
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
