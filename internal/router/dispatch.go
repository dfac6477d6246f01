package router

// Dispatch: send the request to an endpoint of its model's pool, and when
// that fails before the client has seen a byte, to another endpoint, then
// to the model's fallbacks in turn.

import (
	"context"
	"errors"
	"net/http"
	"time"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
	"gitea.mynodes.xyz/ilker/llmgw/internal/openai"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/proxy"
)

// dispatchResult is where a request went and what came of it.
type dispatchResult struct {
	outcome  proxy.Outcome
	pool     string         // the pool that answered last; empty if none was tried
	endpoint string         // the endpoint's base URL
	model    *catalog.Model // the model that answered: the request's or a fallback
}

// errNoEndpoint is the cause of a 503 when a pool has no endpoint left.
var errNoEndpoint = errors.New("no endpoint left to try")

func (r *Router) dispatch(ctx context.Context, w http.ResponseWriter, req *parsedRequest, s *snapshot) dispatchResult {
	var res dispatchResult
	gap := r.m.token.gap.WithLabelValues(req.model.Name)
	for m := req.model; m != nil; m = r.nextFallback(s, req.model, m) {
		p := s.pools[m.Pool]
		if p == nil {
			continue
		}
		firstByte := r.opts.Server.FirstTokenTimeout
		if m.FirstTokenTimeout > 0 {
			firstByte = m.FirstTokenTimeout
		}
		call := proxy.Call{
			Header:         p.header(req.Stream),
			Body:           req.Rewrite(req.body, m.UpstreamName(), req.Stream),
			Stream:         req.Stream,
			StripUsage:     req.Stream && !req.IncludeUsage,
			Start:          req.start,
			FirstByte:      firstByte,
			Idle:           r.opts.Server.IdleTimeout,
			Deadline:       req.start.Add(r.opts.Server.RequestTimeout),
			KeepAlive:      r.opts.Server.KeepAlive,
			PromptEstimate: req.estimate,
			Gap:            gap,
			Translate:      req.translator,
		}
		if err := p.prepare(&call, req, r.opts.Router.DefaultMaxTokens); err != nil {
			return dispatchResult{outcome: proxy.Outcome{Status: openai.AsError(err).Status, Err: err}, model: m}
		}
		var tried uint64
		for range 1 + r.opts.Server.Retries {
			ep, i := p.pick(tried, time.Now())
			if ep == nil {
				break
			}
			if i < 64 {
				tried |= 1 << i
			}
			call.URL = p.target(ep, req.api.upstreamPath, m.UpstreamName())
			o := r.proxy.Do(ctx, w, &call)
			res = dispatchResult{outcome: o, pool: p.name, endpoint: ep.url, model: m}
			if o.Reason != "" {
				ep.failed(time.Now())
				r.m.upstreamErrors.WithLabelValues(p.name, o.Reason).Inc()
				r.log.Warn("upstream failed", "id", req.id, "pool", p.name, "endpoint", ep.url, "reason", o.Reason, "err", o.Err)
			} else if o.Status < 500 {
				ep.succeeded()
			}
			if !o.Retryable() {
				return res
			}
		}
	}
	if res.pool == "" {
		res.outcome = proxy.Outcome{
			Status: http.StatusServiceUnavailable,
			Err:    openai.Unavailable("No endpoint of the model's pool is available.", errNoEndpoint),
		}
	}
	return res
}

// nextFallback is the fallback to try after cur, in the order the
// requested model lists them; nil when there is none left.
func (r *Router) nextFallback(s *snapshot, requested, cur *catalog.Model) *catalog.Model {
	next := cur == requested
	for _, name := range requested.Fallbacks {
		m, ok := s.cat.Resolve(name)
		if !ok {
			continue
		}
		if next {
			return m
		}
		next = m == cur
	}
	return nil
}
