package router

// Dispatch: send the request to the endpoint its model's pool picks, and
// when that fails before the client has seen a byte, to another endpoint
// within the pool's retry budget, then to the model's fallbacks in turn.
// When every endpoint of every pool is out, one is tried anyway: a pool
// that only just failed is a better bet than no answer.

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
	"gitea.mynodes.xyz/ilker/llmgw/internal/openai"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/admission"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/extproc"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/observe"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/pool"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/proxy"
)

// dispatchResult is where a request went and what came of it.
type dispatchResult struct {
	outcome  proxy.Outcome
	pool     string         // the pool that answered last; empty if none was tried
	endpoint string         // the endpoint's name
	model    *catalog.Model // the model that answered: the request's or a fallback
	tier     string         // the service tier its call asked for, which prices it; empty for none
}

// modelHeader names the catalog model that served the answer.
const modelHeader = "X-Llmgw-Model"

// setModelHeader names model in h as the one that answers req, in the
// value serve made for it. Writing that value in place is safe: only h
// holds it, and h is sent once, with the answer, after which nothing is
// retried.
func setModelHeader(h http.Header, req *parsedRequest, model string) {
	if req.modelValue == nil {
		h.Set(modelHeader, model)
		return
	}
	req.modelValue[0] = model
	h[modelHeader] = req.modelValue
}

// dispatch sends req to an endpoint of its model's pool, or of a
// fallback's, and retries or falls back while what came of it is
// retryable; see the top of the file.
func (r *Router) dispatch(ctx context.Context, w http.ResponseWriter, req *parsedRequest, s *snapshot) dispatchResult {
	var res dispatchResult
	gap := r.metrics.Gap(req.model.Name)
	prompt := req.Prompt(req.body)
	rt := &req.route
	*rt = pool.Route{Key: pool.CacheKeyPlace(req.PromptCacheKey, req.salt.seed)}
	hedged := false // a request is hedged at most once
	first := req.model
	if to := req.ticket.FallbackTo(); to != nil {
		// Admission found the model's pool cannot meet the SLO, and
		// admitted the request at a fallback.
		first = to
	}
	for _, relaxed := range [2]bool{false, true} {
		var models []*catalog.Model // the models this pass has tried
		chain := first              // the last of the models the fallbacks list
		for m := first; m != nil; m = r.nextModel(s, req, &chain, res.outcome, models) {
			models = append(models, m)
			p := s.pools[m.Pool]
			if p == nil {
				continue
			}
			call, err := r.newCall(ctx, req, p, m, gap)
			if err != nil {
				return dispatchResult{outcome: proxy.Outcome{Status: openai.AsError(err).Status, Err: err}, model: m}
			}
			r.aim(rt, req, p, m, prompt)
			var order *extproc.Order
			if p.epp != nil && !relaxed {
				q := extproc.Query{ID: req.id, Path: "/v1" + req.api.upstreamPath, Class: req.class.String(), Tenant: req.tenant}
				if order, err = p.epp.Order(ctx, q, p.Pool, &call); err != nil {
					return dispatchResult{outcome: proxy.Outcome{Status: openai.AsError(err).Status, Err: err}, pool: p.name, model: m}
				}
				defer func() { order.Done(p.Pool, res.outcome.Status, res.endpoint) }()
			}
			var tried uint64
			for try := 0; try <= r.opts.Server.Retries; try++ {
				now := time.Now()
				i, reason := order.Next(p.Pool, rt, tried, now, relaxed)
				if i < 0 {
					break
				}
				if try == 0 {
					p.Budget().Request(now)
				} else if !p.Budget().Retry(now) {
					r.log.Warn("retry budget spent", "id", req.id, "pool", p.name)
					return res
				} else {
					r.m.retries.WithLabelValues(p.name, res.outcome.Reason.String()).Inc()
				}
				if try == 0 && m != req.model {
					r.m.fallbacks.WithLabelValues(req.model.Name, m.Name, string(classOf(res.outcome))).Inc()
				}
				if relaxed {
					reason = pool.ReasonLastResort
				}
				p.m.decisions[reason].Inc()
				tried |= 1 << i
				ep := p.Endpoints()[i]
				var o proxy.Outcome
				if !hedged && p.hedges(r.opts.Server.Retries-try, relaxed) {
					// A hedge is one of the request's retries.
					rc := r.race(ctx, w, req, p, m, rt, call, i, tried)
					if rc.hedge >= 0 {
						hedged, try, tried = true, try+1, tried|1<<rc.hedge
					}
					o, ep = rc.outcome, p.Endpoints()[rc.endpoint]
				} else {
					setModelHeader(w.Header(), req, m.Name)
					call.URL = p.target(ep, req.api.upstreamPath, m.UpstreamName(), req.Stream)
					o = r.send(ctx, w, req, p, i, rt, &call, nil)
					r.settle(req, p, ep, o)
				}
				res = dispatchResult{outcome: o, pool: p.name, endpoint: ep.Name(), model: m, tier: req.tier(p.speaksMessages(), m)}
				if !o.Retryable() {
					if o.Wrote || s.cat.ClassFallback(req.model, classOf(o), triedIn(models)) == nil {
						return res
					}
					break // a refusal whose class has a fallback: to it
				}
			}
		}
		if res.pool != "" {
			break // something was tried: the strict pass found an endpoint
		}
	}
	if res.pool == "" {
		w.Header().Del(modelHeader)
		res.outcome = proxy.Outcome{
			Status: http.StatusServiceUnavailable,
			Err:    openai.Unavailable("No endpoint of the model's pool is available.", observe.ErrNoEndpoint),
		}
	}
	return res
}

// classOf is the class of o's failure that a model's fallbacks may be
// chosen by; empty for an answer, for a failure the client has seen part
// of, and for one of no class.
func classOf(o proxy.Outcome) catalog.ErrorClass {
	if o.Wrote {
		return ""
	}
	switch o.Reason {
	case proxy.ReasonStatus429:
		return catalog.ClassRateLimited
	case proxy.ReasonConnect, proxy.ReasonFirstByteTimeout, proxy.ReasonStatus5xx:
		return catalog.ClassUnavailable
	case proxy.ReasonNone:
		var e *openai.Error
		if errors.As(o.Err, &e) {
			switch e.Code {
			case codeContextLength:
				return catalog.ClassContextWindow
			case codeContentFilter, codeContentPolicy:
				return catalog.ClassContentFilter
			}
		}
	}
	return ""
}

// The OpenAI error codes of a prompt past the model's context window and
// of a request its content filter refused (Azure's, OpenAI's): what the
// cloud kinds' errors are read as too.
const (
	codeContextLength = "context_length_exceeded"
	codeContentFilter = "content_filter"
	codeContentPolicy = "content_policy_violation"
)

// heldCodes are the error codes a call for a model with fallbacks by
// class holds back rather than relays, so that the request may go to
// the class's fallback; nil when it has none of those classes.
func heldCodes(m *catalog.Model) []string {
	var hold []string
	if len(m.FallbacksByClass[catalog.ClassContextWindow]) > 0 {
		hold = append(hold, codeContextLength)
	}
	if len(m.FallbacksByClass[catalog.ClassContentFilter]) > 0 {
		hold = append(hold, codeContentFilter, codeContentPolicy)
	}
	return hold
}

// triedIn reports whether a model is one of tried.
func triedIn(tried []*catalog.Model) func(*catalog.Model) bool {
	return func(m *catalog.Model) bool { return slices.Contains(tried, m) }
}

// nextModel is the model to send req to after one that came to o: the
// first untried fallback for o's class, else the next of the model's
// fallbacks after *chain (which moves on to it); nil when none is left.
func (r *Router) nextModel(s *snapshot, req *parsedRequest, chain **catalog.Model, o proxy.Outcome, tried []*catalog.Model) *catalog.Model {
	if class := classOf(o); class != "" {
		if f := s.cat.ClassFallback(req.model, class, triedIn(tried)); f != nil {
			r.log.Info("fallback by class", "id", req.id, "model", req.model.Name, "class", string(class), "to", f.Name)
			req.fellBack = class
			return f
		}
	}
	req.fellBack = ""
	for {
		*chain = s.cat.NextFallback(req.model, *chain)
		if *chain == nil || !slices.Contains(tried, *chain) {
			return *chain
		}
	}
}

// newCall is req's upstream call to model m on pool p: its body rewritten
// for them, its timeouts, and what the pool's provider adds.
func (r *Router) newCall(ctx context.Context, req *parsedRequest, p *servedPool, m *catalog.Model, gap prometheus.Observer) (proxy.Call, error) {
	firstByte := r.opts.Server.FirstTokenTimeout
	if m.FirstTokenTimeout > 0 {
		firstByte = m.FirstTokenTimeout
	}
	edits := openai.Edits{Model: m.UpstreamName(), IncludeUsage: req.Stream, CacheSalt: p.salt(req), Drop: dropped(&req.Request, m)}
	p.reason(req.reasoning, &edits)
	call := proxy.Call{
		Header:         p.header(req.Stream),
		Body:           req.Rewrite(req.body, edits),
		Stream:         req.Stream,
		StripUsage:     req.Stream && !req.IncludeUsage,
		Start:          req.start,
		FirstByte:      firstByte,
		Idle:           r.opts.Server.IdleTimeout,
		Deadline:       req.start.Add(r.opts.Server.RequestTimeout),
		KeepAlive:      r.opts.Server.KeepAlive,
		PromptEstimate: req.estimate,
		Gap:            gap,
		Model:          m.Name,
		Translate:      req.translator,
		Hold:           heldCodes(req.model),
	}
	err := p.prepare(ctx, &call, req, m, r.opts.Router.DefaultMaxTokens, r.opts.Server.MaxBodyBytes)
	return call, err
}

// aim readies rt for picking req's endpoint in pool p for model m: the
// prompt and the time its SLO leaves, and the weights of stalls and of
// the spare room critical requests need.
func (r *Router) aim(rt *pool.Route, req *parsedRequest, p *servedPool, m *catalog.Model, prompt []byte) {
	now := time.Now()
	rt.Prepare(p.Pool, prompt, req.salt.seed, req.estimate, pool.SLOLeft(m.ClassSLO(req.class.String()).TTFTp99, req.start, now))
	rt.Model = p.loadedName(m)
	if p.Policy() == catalog.PolicyAuto {
		rt.Stall = r.slo.StallWeight(m, now)
	}
	if req.class != admission.Critical {
		rt.Spare = m.ClassSLO(admission.Critical.String()).TPOTp99.Seconds()
	}
}

// settle counts what one call came to against its endpoint: a 429's
// Retry-After cools it down for that long; a failure counts in
// llmgw_upstream_errors_total and, when it is the endpoint's, toward its
// ejection; an answer clears its failures.
func (r *Router) settle(req *parsedRequest, p *servedPool, ep *pool.Endpoint, o proxy.Outcome) {
	if o.RetryAfter > 0 && ep.CoolFor(o.RetryAfter, time.Now()) {
		// The provider asked for a pause: the deployment is out for that
		// long, and the request's retry goes to another.
		r.m.ejections.WithLabelValues(p.name, ep.Name(), "retry_after").Inc()
		r.log.Warn("endpoint cooled down", "pool", p.name, "endpoint", ep.Name(), "for", o.RetryAfter)
	}
	if o.Reason != proxy.ReasonNone {
		r.m.upstreamErrors.WithLabelValues(p.name, o.Reason.String()).Inc()
		r.log.Warn("upstream failed", "id", req.id, "pool", p.name, "endpoint", ep.Name(), "reason", o.Reason, "err", o.Err)
		if countsAgainst(o) && ep.Failed(time.Now()) {
			r.m.ejections.WithLabelValues(p.name, ep.Name(), "failures").Inc()
			r.log.Warn("endpoint ejected", "pool", p.name, "endpoint", ep.Name(), "after", o.Reason)
		}
	} else if o.Status < 500 {
		ep.Succeeded()
	}
}

// countsAgainst reports whether a failure is the endpoint's: a connect
// error, a 5xx or other status not relayed, its refusing the gateway's
// credentials, a timeout or a broken stream. A 429 is the server
// protecting itself, and the next request may well be served.
func countsAgainst(o proxy.Outcome) bool {
	return o.Reason != proxy.ReasonNone && o.Reason != proxy.ReasonStatus429
}

// send makes one call to endpoint i of p, through the call's lifecycle
// at its endpoint (pool.Attempt): begun now, its first token, its gaps,
// its end, and the prefix its answer's cached tokens confirm. started,
// when not nil, is set at the first token. A call that lost a hedged
// race before its first token computed nothing, as far as the index
// knows.
func (r *Router) send(ctx context.Context, w http.ResponseWriter, req *parsedRequest, p *servedPool, i int, rt *pool.Route, call *proxy.Call, started *atomic.Bool) proxy.Outcome {
	t := &sent{ticket: req.ticket, gate: r.gates.Of(p.name), started: started}
	t.call = p.Begin(rt, i, req.Stream, req.class == admission.Critical, time.Now())
	call.FirstToken = t.firstToken
	if req.Stream {
		// The stream's gaps time the endpoint's step, which its decode
		// model learns from and admission holds to its TPOT aim, on
		// their way.
		t.gap, call.Gap = call.Gap, t
		defer func() { call.Gap = t.gap }()
	}
	var traced func(proxy.Outcome) // ends the call's span; nil when the request has none
	if req.span != nil {
		traced = r.traceAttempt(&ctx, req, p, i, rt, call)
	}
	o := r.proxy.Do(ctx, w, call)
	if traced != nil {
		traced(o)
	}
	computedNothing := o.Reason != proxy.ReasonNone && !o.Wrote || !t.call.Started() && errors.Is(context.Cause(ctx), errLostRace)
	t.end(!computedNothing)
	if !computedNothing && o.Usage != nil && !o.Estimated && o.Usage.PromptTokensDetails != nil {
		predicted, confirmed := t.call.Confirm(o.Usage.PromptTokens, o.Usage.CachedTokens())
		p.m.predicted.Add(float64(predicted))
		p.m.confirmed.Add(float64(confirmed))
	}
	return o
}

// sent is one call's mark on its endpoint and on its pool's gate. Its
// methods run on the call's goroutine.
type sent struct {
	call    pool.Attempt      // the call's life at its endpoint
	ticket  *admission.Ticket // the request's admission, nil without
	gate    *admission.Gate   // the pool's admission point, nil when none was made
	started *atomic.Bool      // set at the first token, for a hedged race; nil outside one
	// gap observes the stream's inter-token gaps for the model's
	// histogram; they pass through Observe.
	gap prometheus.Observer
}

// Observe takes one inter-token gap of the stream: the model's histogram
// has it, and the endpoint's step time.
func (t *sent) Observe(seconds float64) {
	if t.gap != nil {
		t.gap.Observe(seconds)
	}
	t.call.Gap(time.Duration(seconds * float64(time.Second)))
}

// firstToken ends the call's prefill owed, teaches the endpoint what the
// first token cost, notes the prompt computed there, and releases the
// request's place at its gate.
func (t *sent) firstToken(now time.Time) {
	if t.call.Started() {
		return
	}
	if t.started != nil {
		t.started.Store(true)
	}
	t.call.FirstToken(now)
	t.ticket.FirstToken()
	if t.gate != nil {
		t.gate.Wake()
	}
}

// end ends the call at its endpoint; with a gate, it decides the
// endpoint's batch limit by the gate's aim, and moves the queue on.
func (t *sent) end(computed bool) {
	if t.gate == nil {
		t.call.End(0, computed)
		return
	}
	t.call.End(t.gate.TPOTAim(), computed)
	t.gate.Wake()
}
