package router

// A pool of policy epp: before its endpoint is picked, an Endpoint Picker
// (llm-d's, or another llmgw's epp listener) is asked over ext_proc
// (internal/router/extproc), and the endpoints it names are tried in its
// order, with the headers it set and the body as it rewrote it. When it
// is down or late, fail_open picks by the pool's own model of its
// endpoints (auto), and fail_close answers 503; when it refuses the
// request, its status reaches the client as llmgw's own error.

import (
	"context"
	"errors"
	"net/http"
	"time"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
	"gitea.mynodes.xyz/ilker/llmgw/internal/openai"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/extproc"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/observe"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/pool"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/proxy"
)

// eppPicker is a pool's Endpoint Picker.
type eppPicker struct {
	addr     string
	tls      bool
	client   *extproc.Client // nil when addr could not be dialled: never answers
	failOpen bool
	timeout  time.Duration
}

// newEPPPicker is p's picker, nil unless its policy is epp; its
// connection is prev's while the address and TLS stay.
func newEPPPicker(p catalog.Pool, prev *servedPool) *eppPicker {
	if p.Policy != catalog.PolicyEPP {
		return nil
	}
	e := &eppPicker{addr: p.EPP.Address, tls: p.EPP.TLS, failOpen: p.EPP.FailureMode == catalog.FailOpen, timeout: p.EPP.Timeout}
	if prev != nil && prev.epp != nil && prev.epp.addr == e.addr && prev.epp.tls == e.tls {
		e.client = prev.epp.client
		return e
	}
	e.client, _ = extproc.Dial(e.addr, e.tls)
	return e
}

// retireEPPs retires the EPP clients of old's pools that s's do not
// keep: a pool gone, or its EPP's address or TLS changed. Each one's
// connection closes once its calls have ended.
func retireEPPs(old, s *snapshot) {
	kept := make(map[*extproc.Client]bool)
	for _, p := range s.pools {
		if p.epp != nil && p.epp.client != nil {
			kept[p.epp.client] = true
		}
	}
	for _, p := range old.pools {
		if p.epp != nil && p.epp.client != nil && !kept[p.epp.client] {
			p.epp.client.Retire()
		}
	}
}

// eppOrder is an EPP's answer for one call: the pool's endpoints in the
// order it named them. A nil one picks by the pool's policy.
type eppOrder struct {
	idx    []int // indexes of the pool's endpoints
	answer *extproc.Answer
}

// askEPP asks p's EPP where call, req's to p, goes, and sets on call the
// body and headers the EPP gave. A nil order and nil error: pick by the
// pool's policy (fail_open).
func (r *Router) askEPP(ctx context.Context, req *parsedRequest, p *servedPool, call *proxy.Call) (*eppOrder, error) {
	e := p.epp
	h := http.Header{extproc.ObjectiveHeader: {req.class.String()}, "X-Request-Id": {req.id}}
	if req.tenant != "" {
		h.Set(extproc.FairnessHeader, req.tenant)
	}
	var a *extproc.Answer
	err := errors.New("the EPP's address could not be dialled")
	ask := extproc.Request{Path: "/v1" + req.api.upstreamPath, Header: h, Body: call.Body}
	if e.client != nil {
		a, err = e.client.Ask(ctx, ask, e.timeout)
	}
	if errors.Is(err, extproc.ErrRetired) {
		// A reload moved the pool to another EPP while the request
		// waited on the catalog before it: the one in service is asked.
		if cur := r.snap.Load().pools[p.name]; cur != nil && cur.epp != nil && cur.epp.client != nil {
			a, err = cur.epp.client.Ask(ctx, ask, e.timeout)
		}
	}
	var refused *extproc.Refusal
	if errors.As(err, &refused) {
		return nil, eppRefusal(refused)
	}
	o := &eppOrder{answer: a}
	if err == nil {
		o.idx = p.named(a.Endpoints)
		if len(o.idx) == 0 {
			a.Done(http.StatusServiceUnavailable, "")
			err = errors.New("the EPP named no endpoint of the pool")
		}
	}
	if err != nil {
		if e.failOpen {
			r.log.Warn("the EPP did not pick; the pool's policy does", "id", req.id, "pool", p.name, "err", err)
			return nil, nil
		}
		return nil, openai.Unavailable("The endpoint picker did not answer.", errors.Join(observe.ErrNoEndpoint, err))
	}
	call.Body = a.Body
	if len(a.Header) > 0 {
		hh := call.Header.Clone()
		for k, v := range a.Header {
			hh[http.CanonicalHeaderKey(k)] = v
		}
		call.Header = hh
	}
	return o, nil
}

// eppRefusal is an EPP's refusal as llmgw's own error: 429 shed, 503 no
// endpoint, 400 a request it cannot read, and 502 for any other status.
func eppRefusal(f *extproc.Refusal) error {
	switch {
	case f.Status == http.StatusTooManyRequests:
		return openai.Overloaded("The endpoint picker shed the request; try again shortly.", max(f.RetryAfter, 1))
	case f.Status == http.StatusServiceUnavailable:
		return openai.Unavailable("The endpoint picker found no endpoint for the request.", errors.Join(observe.ErrNoEndpoint, f))
	case f.Status >= 400 && f.Status < 500:
		return openai.BadRequest("", "The endpoint picker refused the request (status %d).", f.Status)
	}
	return openai.BadGateway(f)
}

// named is the indexes of p's endpoints at the given host:port, in their
// order; one p does not have is left out.
func (p *servedPool) named(hosts []string) []int {
	var idx []int
	for _, h := range hosts {
		for i, ep := range p.Endpoints() {
			if eh, ok := ep.Host(); ok && eh == h {
				idx = append(idx, i)
				break
			}
		}
	}
	return idx
}

// next is the endpoint to try: the first the EPP named that was not
// tried, or with no order the pool's pick among its candidates.
func (o *eppOrder) next(p *servedPool, rt *pool.Route, tried uint64, now time.Time, relaxed bool) (int, string) {
	if o == nil {
		return p.Pick(rt, p.Candidates(tried, now, relaxed), now)
	}
	for _, i := range o.idx {
		if tried&(1<<i) == 0 {
			return i, pool.ReasonEPP
		}
	}
	return -1, ""
}

// done tells the EPP how the call ended, off the request's path: res's
// status and the endpoint that served it.
func (o *eppOrder) done(p *servedPool, res *dispatchResult) {
	if o == nil {
		return
	}
	served := ""
	if i := p.EndpointNamed(res.endpoint); i >= 0 {
		served, _ = p.Endpoints()[i].Host()
	}
	go o.answer.Done(res.outcome.Status, served)
}
