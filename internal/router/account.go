package router

// Accounting: what the router tells its observers (internal/router/observe).
// A request's span starts as it arrives, and each upstream call has one
// of its own; once the request is answered or refused it becomes one
// observe.Completed, worked out here once — the model label, the error
// type, the token timing, the SLO judgement, the tenant label, the
// exemplar, the usage record — from the snapshot it was served from, and
// every observer reads that.

import (
	"context"
	"errors"
	"net/http"
	"time"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/usage"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/mcpgw"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/observe"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/pool"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/proxy"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/status"
)

// observers is the list each Completed goes to, in order: the metrics,
// the logs and the span, then what a request settles — the status's
// rates, admission, the limits — and last the ledger. An observer of
// something opts leaves off (no tracer, access log, limiter or recorder)
// is not in the list.
func observers(opts Options, m *observe.Metrics, tracing *observe.Tracing, board *status.Board, adm *observe.Admission) observe.Observers {
	os := observe.Observers{m, observe.NewGenAI(), observe.NewSLOCounts(), observe.NewDebugLog(opts.Logger)}
	if tracing != nil {
		os = append(os, tracing)
	}
	if a := observe.NewAccessLog(opts.Telemetry.AccessLog, opts.Logger); a != nil {
		os = append(os, a)
	}
	os = append(os, board, adm)
	if opts.Limits != nil {
		os = append(os, observe.NewLimits(opts.Limits))
	}
	if opts.Recorder != nil {
		os = append(os, observe.NewLedger(opts.Recorder))
	}
	return os
}

// toolObservers is what the MCP gateway's tool calls are read by, the
// tool siblings of a request's observers: their metrics, registered on
// opts.Registerer, their spans by tracing (nil when tracing is off), their
// ledger records.
func toolObservers(opts Options, tracing *observe.Tracing) (mcpgw.Observers, error) {
	m := observe.NewToolMetrics()
	for _, c := range m.Collectors() {
		if err := opts.Registerer.Register(c); err != nil {
			return mcpgw.Observers{}, err
		}
	}
	list := observe.ToolObservers{m}
	if tracing != nil {
		list = append(list, tracing)
	}
	if opts.Recorder != nil {
		list = append(list, observe.NewLedger(opts.Recorder))
	}
	return mcpgw.Observers{List: list, Tracing: tracing}, nil
}

// complete hands what req came to, res, to the observers: one Completed
// for the request, whichever way it ended. It is filled in where the
// request holds it, field by field: a request's accounting allocates
// nothing.
func (r *Router) complete(req *parsedRequest, res dispatchResult) {
	took := time.Since(req.start)
	c := &req.done
	c.ID, c.Start, c.Took = req.id, req.start, took
	c.Operation, c.Generates, c.Stream = operation(req.api), req.api.generates, req.Stream
	c.Asked, c.MaxTokens = req.Model, req.MaxTokens
	c.Requested, c.Class = req.model, req.class
	c.Pool, c.Endpoint = res.pool, res.endpoint
	c.Outcome = res.outcome
	c.Exemplar = observe.Exemplar(req.ctx)
	c.Record = usageRecord(req, &res, took)
	c.Ticket, c.Span, c.Body = req.ticket, req.span, req.body
	c.Finish()
	if res.pool != "" && req.snap != nil {
		if p := req.snap.pools[res.pool]; p != nil {
			c.Provider = observe.ProviderName(p.kind)
		}
	}
	if c.Timing.OK && req.key != nil {
		c.Tenant = r.metrics.TenantLabel(req.key.Tenant)
	}
	if req.reserved {
		c.Reservation = &req.reserve
	}
	r.observers.Observe(c)
}

// usageRecord is what req came to, as the ledger and the access log take
// it: the model that served it, its usage and cost. A request refused
// before its model was known names no model and costs nothing.
func usageRecord(req *parsedRequest, res *dispatchResult, took time.Duration) usage.Record {
	o := &res.outcome
	rec := usage.Record{
		ID:        req.id,
		Time:      req.start,
		Pool:      res.pool,
		Endpoint:  res.endpoint,
		Estimated: o.Estimated,
		Status:    o.Status,
		TTFT:      o.TTFT,
		Duration:  took,
		Streamed:  req.Stream,
	}
	if u := o.Usage; u != nil {
		rec.PromptTokens, rec.CompletionTokens, rec.CachedTokens = u.PromptTokens, u.CompletionTokens, u.CachedTokens()
	}
	served := req.model
	if res.model != nil {
		served = res.model
	}
	if served != nil {
		rec.Model = served.Name
		rec.CostUSD = served.Price.At(res.tier).Cost(rec.PromptTokens, rec.CompletionTokens)
	}
	if req.key != nil {
		rec.KeyID, rec.Tenant = req.key.ID, req.key.Tenant
	}
	return rec
}

// operation is gen_ai.operation.name for a request to a.
func operation(a api) string {
	return observe.Operation(a.counts, a.generates, a.upstreamPath)
}

// startSpan starts req's SERVER span, when t traces, and returns hr under
// its context.
func startSpan(t *observe.Tracing, hr *http.Request, req *parsedRequest) *http.Request {
	if t == nil {
		return hr
	}
	hr, req.span = t.StartRequest(hr, req.id, operation(req.api), req.start)
	req.ctx = hr.Context()
	return hr
}

// traceAttempt starts the CLIENT span of one upstream call of req, which
// has a span, to endpoint i of p, puts the span in *ctx and its
// traceparent on the call's headers, and returns what ends it once the
// call is over.
func (r *Router) traceAttempt(ctx *context.Context, req *parsedRequest, p *servedPool, i int, rt *pool.Route, call *proxy.Call) func(proxy.Outcome) {
	model := call.Model
	if m, ok := req.snap.cat.Resolve(call.Model); ok {
		model = m.UpstreamName()
	}
	predicted, ok := (*ctx).Value(predictionKey{}).(float64)
	if !ok {
		predicted = p.Predicted(rt, i, time.Now())
	}
	actx, span, header := r.tracing.StartCall(*ctx, observe.Call{
		Operation: operation(req.api), Provider: observe.ProviderName(p.kind), Model: model,
		Generates: req.api.generates, Stream: req.Stream,
		Pool: p.name, Endpoint: p.Endpoints()[i].Name(), Policy: p.Policy(),
		Predicted: predicted, PrefixShare: rt.CachedShare(i), PrefixBlocks: int(rt.Matched(i)),
		URL: call.URL, FallbackClass: string(req.fellBack),
	}, call.Header)
	*ctx = actx
	saved := call.Header
	call.Header, call.Finish = header, true
	return func(o proxy.Outcome) {
		call.Header, call.Finish = saved, false
		observe.EndCall(span, &o, errors.Is(context.Cause(actx), errLostRace))
	}
}

// predictionKey holds, in a hedged call's context, the first-token time
// routing predicted for its endpoint when it was picked.
type predictionKey struct{}

// notePick is ctx holding the prediction for endpoint i of p, read on the
// goroutine that picked it, for a traced call about to run on another:
// the route's prediction is rewritten by the next pick of the race, which
// may run while the call starts. ctx as it is when req is not traced.
func notePick(ctx context.Context, req *parsedRequest, p *servedPool, rt *pool.Route, i int) context.Context {
	if req.span == nil {
		return ctx
	}
	return context.WithValue(ctx, predictionKey{}, p.Predicted(rt, i, time.Now()))
}
