package router

// A request a proxy in front sends on itself, asking the router only where
// (internal/router/epp, the Endpoint Picker): the same steps as a request
// the router serves — parse within the body limit, find the model, its
// class and tenant, the pool's gate, the pick — then, in place of the
// upstream call, the proxy's report of the answer as it passes: the
// endpoint it served from, its status, its chunks. The call's life at its
// endpoint is the one pool.Attempt, and the request ends as one
// observe.Completed.

import (
	"context"
	"net/http"
	"net/url"
	"time"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
	"gitea.mynodes.xyz/ilker/llmgw/internal/openai"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/admission"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/observe"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/pool"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/proxy"
)

// External is a request as a proxy in front describes it.
type External struct {
	// Path is the request's path, which names its API; one the router
	// does not serve is read as a chat completion.
	Path string
	// Header is the request's headers, from which its trace context is
	// read.
	Header http.Header
	Body   []byte
	// Class is the request's priority class; Tenant the tenant whose
	// share of the queue it takes, empty for none.
	Class  admission.Class
	Tenant string
	// Model, when not empty, names the model in place of the body's
	// (x-gateway-model-name-rewrite).
	Model string
	// Subset, when not nil, holds the host:port of every endpoint the
	// proxy may send to; an empty, non-nil one leaves none.
	Subset []string
	// Fallbacks is how many endpoints to name after the pick, in the
	// order they would be tried.
	Fallbacks int
}

// Picked is a request the router picked endpoints for and the proxy sends
// on: held from the pick until its answer ends (End), by one goroutine.
type Picked struct {
	r   *Router
	req *parsedRequest
	p   *servedPool
	m   *catalog.Model
	// Body is the request's body rewritten for the pool (the model's
	// upstream name, the isolation domain's cache salt); Endpoints the
	// host:port of the pick and then of each fallback, in order.
	Body      []byte
	Endpoints []string

	at     int  // the endpoint the call is counted at
	t      sent // the call's mark on its endpoint and gate
	begun  bool // t.call was begun and not yet ended
	status int  // the answer's status; 0 before its headers
	first  time.Time
	last   time.Time
	frames openai.Framer
	usage  openai.Usage
	used   bool   // usage was read from the answer
	plain  []byte // a plain answer's bytes, up to maxPlainUsage, for its usage
	done   bool
}

// maxPlainUsage bounds what of a plain answer is held to read its usage
// from: 1 MiB, past most chat answers; a longer one is counted without.
const maxPlainUsage = 1 << 20

// Pick takes x through the router's steps up to the pick, and begins the
// call at the endpoint picked. ctx bounds the wait at the pool's gate. A
// request refused on the way is accounted here, and the error, an
// *openai.Error, says with what status.
func (r *Router) Pick(ctx context.Context, x External) (*Picked, error) {
	req := requests.Get().(*parsedRequest)
	req.id, req.start = r.ids.next(), time.Now()
	req.api = apis["/v1/chat/completions"]
	if a, ok := apis[x.Path]; ok && a.dialect == nil && !a.counts {
		req.api = a
	}
	hr := (&http.Request{Method: http.MethodPost, URL: &url.URL{Path: x.Path}, Header: x.Header}).WithContext(ctx)
	hr = startSpan(r.tracing, hr, req)
	pk := &Picked{r: r, req: req, at: -1}
	// An event longer than this is passed on untimed: the framer holds
	// no more of it.
	pk.frames.Max = maxPlainUsage
	snap, err := r.readExternal(req, x)
	if err == nil {
		req.class, req.tenant = x.Class, x.Tenant
		if req.api.generates {
			req.salt = r.iso.of(req.tenant, req.CacheSalt)
		}
		req.ticket, err = admitSLO(hr.Context(), r.gates, req, snap)
	}
	if err == nil {
		err = pk.pick(snap, x)
	}
	if err != nil {
		pool := ""
		if pk.p != nil {
			pool = pk.p.name
		}
		r.complete(req, dispatchResult{pool: pool, model: pk.m, outcome: proxy.Outcome{Status: openai.AsError(err).Status, Err: err}})
		pk.release()
		return nil, err
	}
	return pk, nil
}

// readExternal parses x's body as the router parses a request's, within
// the same limit, and finds its model.
func (r *Router) readExternal(req *parsedRequest, x External) (*snapshot, error) {
	if limit := r.opts.Server.MaxBodyBytes; int64(len(x.Body)) > limit {
		return nil, openai.TooLarge(limit)
	}
	req.body = x.Body
	if err := req.Request.Parse(x.Body); err != nil {
		return nil, err
	}
	list, err := req.Prompts(req.api.lists)
	if err != nil {
		return nil, err
	}
	req.prompts = max(list.Count, 1)
	req.estimate = estimatePrompt(x.Body, list)
	if x.Model != "" {
		req.Model = x.Model
	}
	return r.findModel(headerOnly{}, req)
}

// pick picks the request's endpoint, and its fallbacks, in the pool of
// its model (or of the fallback admission chose) among x's subset, and
// begins the call at the first.
func (pk *Picked) pick(s *snapshot, x External) error {
	r, req := pk.r, pk.req
	pk.m = req.model
	if to := req.ticket.FallbackTo(); to != nil {
		pk.m = to
	}
	p := s.pools[pk.m.Pool]
	if p == nil {
		return openai.Unavailable("No endpoint of the model's pool is available.", observe.ErrNoEndpoint)
	}
	pk.p = p
	allowed := subsetMask(p.Pool, x.Subset)
	if allowed == 0 {
		return openai.Unavailable("No endpoint of the subset the proxy named is in the model's pool.", observe.ErrNoEndpoint)
	}
	rt := &req.route
	*rt = pool.Route{Key: pool.CacheKeyPlace(req.PromptCacheKey, req.salt.seed)}
	r.aim(rt, req, p, pk.m, req.Prompt(req.body))
	var tried uint64
	for n := 0; n <= x.Fallbacks; n++ {
		now := time.Now()
		reason := ""
		i := -1
		for _, relaxed := range [2]bool{false, true} {
			if i, reason = p.Pick(rt, p.Candidates(tried|^allowed, now, relaxed), now); i >= 0 {
				if relaxed {
					reason = pool.ReasonLastResort
				}
				break
			}
		}
		if i < 0 {
			break
		}
		if n == 0 {
			p.Budget().Request(now)
			p.m.decisions[reason].Inc()
			if pk.m != req.model {
				r.m.fallbacks.WithLabelValues(req.model.Name, pk.m.Name, "").Inc() // no call failed: admission chose the fallback
			}
			pk.begin(i, now)
		}
		tried |= 1 << i
		host, _ := p.Endpoints()[i].Host()
		pk.Endpoints = append(pk.Endpoints, host)
	}
	if len(pk.Endpoints) == 0 {
		return openai.Unavailable("No endpoint of the model's pool is available.", observe.ErrNoEndpoint)
	}
	edits := openai.Edits{Model: pk.m.UpstreamName(), CacheSalt: p.salt(req), Drop: dropped(&req.Request, pk.m)}
	pk.Body = req.Rewrite(req.body, edits)
	return nil
}

// subsetMask is the endpoints of p whose host:port is in subset, all of
// them when subset is nil.
func subsetMask(p *pool.Pool, subset []string) uint64 {
	eps := p.Endpoints()
	if subset == nil {
		if len(eps) >= 64 {
			return ^uint64(0)
		}
		return 1<<len(eps) - 1
	}
	var m uint64
	for i, ep := range eps {
		host, ok := ep.Host()
		for _, s := range subset {
			if ok && s == host {
				m |= 1 << i
			}
		}
	}
	return m
}

// begin counts the call at endpoint i of the pool, from now.
func (pk *Picked) begin(i int, now time.Time) {
	req := pk.req
	pk.t = sent{ticket: req.ticket, gate: pk.r.gates.Of(pk.p.name)}
	pk.t.call = pk.p.Begin(&req.route, i, req.Stream, req.class == admission.Critical, now)
	pk.t.gap = pk.r.metrics.Gap(pk.m.Name)
	pk.at, pk.begun = i, true
}

// ID is the request's id, as its log lines and access log name it.
func (pk *Picked) ID() string { return pk.req.id }

// Served tells the endpoint the proxy sent the request to, by host:port:
// when it is not the one picked, the call is counted there instead, as
// having computed nothing where it was begun. One the pool does not have
// is left alone.
func (pk *Picked) Served(host string) {
	if host == "" {
		return
	}
	if cur, _ := pk.p.Endpoints()[pk.at].Host(); cur == host {
		return
	}
	for i, ep := range pk.p.Endpoints() {
		if h, ok := ep.Host(); ok && h == host {
			pk.t.end(false)
			pk.begin(i, time.Now())
			return
		}
	}
}

// Headers takes the answer's status. A plain answer's headers come with
// its last token: its first token is timed here.
func (pk *Picked) Headers(status int) {
	pk.status = status
	if !pk.req.Stream && status < 300 {
		pk.firstToken(time.Now())
	}
}

// Chunk takes a piece of the answer's body as it passes: a stream's
// events time its first token and its gaps, and its usage is read.
func (pk *Picked) Chunk(b []byte) {
	now := time.Now()
	if !pk.req.Stream || pk.status >= 300 {
		if len(pk.plain)+len(b) <= maxPlainUsage {
			pk.plain = append(pk.plain, b...)
		}
		return
	}
	for {
		ev, ok, err := pk.frames.Next(&b)
		if err != nil || !ok {
			return
		}
		if string(ev.Data) == "[DONE]" {
			continue
		}
		if ok, _ := openai.ReadUsage(ev.Data, &pk.usage); ok {
			pk.used = true
		}
		if !pk.t.call.Started() {
			pk.firstToken(now)
		} else if !pk.last.IsZero() {
			pk.t.Observe(now.Sub(pk.last).Seconds())
		}
		pk.last = now
	}
}

func (pk *Picked) firstToken(now time.Time) {
	if pk.first.IsZero() {
		pk.first, pk.last = now, now
	}
	pk.t.firstToken(now)
}

// End ends the request: the call at its endpoint, and the request as one
// Completed. complete reports whether the answer reached its end; false,
// the proxy or its client went away first. Nothing of pk may be used
// after.
func (pk *Picked) End(complete bool) {
	if pk.done {
		return
	}
	pk.done = true
	o := pk.outcome(complete)
	computed := pk.status > 0 && pk.status < 300
	ep := pk.p.Endpoints()[pk.at]
	if pk.begun {
		pk.t.end(computed)
		if computed && pk.used && pk.usage.PromptTokensDetails != nil {
			predicted, confirmed := pk.t.call.Confirm(pk.usage.PromptTokens, pk.usage.CachedTokens())
			pk.p.m.predicted.Add(float64(predicted))
			pk.p.m.confirmed.Add(float64(confirmed))
		}
	}
	pk.r.settle(pk.req, pk.p, ep, o)
	pk.r.complete(pk.req, dispatchResult{outcome: o, pool: pk.p.name, endpoint: ep.Name(), model: pk.m, tier: pk.req.tier(pk.p.speaksMessages(), pk.m)})
	pk.release()
}

// outcome is what the call came to, as the proxy reported it.
func (pk *Picked) outcome(complete bool) proxy.Outcome {
	o := proxy.Outcome{Status: pk.status, Wrote: pk.status > 0}
	if !pk.first.IsZero() {
		o.TTFT = pk.first.Sub(pk.req.start)
		o.Decode = pk.last.Sub(pk.first)
	}
	if !pk.req.Stream && pk.status > 0 && pk.status < 300 {
		if ok, _ := openai.ReadUsage(pk.plain, &pk.usage); ok {
			pk.used = true
		}
	}
	if pk.used {
		o.Usage = &pk.usage
	}
	switch {
	case pk.status == 0 || !complete:
		o.Status = openai.StatusClientClosed
		o.Err = context.Canceled
	case pk.status == http.StatusTooManyRequests:
		o.Reason, o.Err = proxy.ReasonStatus429, openai.Overloaded("The endpoint is at capacity.", 1)
	case pk.status >= 500:
		o.Reason, o.Err = proxy.ReasonStatus5xx, openai.BadGateway(nil)
	}
	return o
}

// release puts the request back for reuse.
func (pk *Picked) release() {
	*pk.req = parsedRequest{}
	requests.Put(pk.req)
	pk.req = nil
}

// headerOnly is a ResponseWriter for steps that may set a header on the
// answer (a warning), where the answer is the proxy's: they are dropped.
type headerOnly struct{}

func (headerOnly) Header() http.Header         { return http.Header{} }
func (headerOnly) Write(b []byte) (int, error) { return len(b), nil }
func (headerOnly) WriteHeader(int)             {}
