package extproc

// A pool of policy epp: before its endpoint is picked, its Endpoint
// Picker is asked, and the endpoints it names are tried in its order,
// with the headers it set and the body as it rewrote it; the answer is
// told to it as it comes (respond.go). When it is down or late, fail_open
// picks by the pool's own model of its endpoints (auto), and fail_close
// answers 503; when it refuses the request, its status reaches the client
// as llmgw's own error.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
	"gitea.mynodes.xyz/ilker/llmgw/internal/openai"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/pool"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/proxy"
)

// Picker is a pool's Endpoint Picker.
type Picker struct {
	pool     string // the pool's name
	addr     string
	tls      bool
	client   *Client // nil when addr could not be dialled: never answers
	failOpen bool
	timeout  time.Duration
	env      PickerEnv
	// next is the pool's picker after a reload that gave it another EPP;
	// nil while this one serves it.
	next atomic.Pointer[Picker]
}

// PickerEnv is what a pool gives its Picker.
type PickerEnv struct {
	// NoEndpoint is joined into the cause of the 503s the Picker answers,
	// as the cause of a request no endpoint could be found for.
	NoEndpoint error
	// Dropped counts the pieces of answers the EPP was not told; nil
	// counts none.
	Dropped Counter
	Log     *slog.Logger
}

// NewPicker is p's Picker, nil unless its policy is epp; its connection
// is prev's while the address and TLS stay.
func NewPicker(p catalog.Pool, prev *Picker, env PickerEnv) *Picker {
	if p.Policy != catalog.PolicyEPP {
		return nil
	}
	if env.Log == nil {
		env.Log = slog.Default()
	}
	e := &Picker{pool: p.Name, addr: p.EPP.Address, tls: p.EPP.TLS, failOpen: p.EPP.FailureMode == catalog.FailOpen, timeout: p.EPP.Timeout, env: env}
	if prev != nil && prev.addr == e.addr && prev.tls == e.tls {
		e.client = prev.client
		return e
	}
	e.client, _ = Dial(e.addr, e.tls)
	return e
}

// HandOver makes to, nil when the pool is gone or asks no EPP, the
// picker of e's pool after a reload. e's connection, unless to keeps it,
// is retired: it closes once its calls have ended, and a call that asks
// e after that asks to.
func (e *Picker) HandOver(to *Picker) {
	if to != nil {
		e.next.Store(to)
	}
	if e.client != nil && (to == nil || to.client != e.client) {
		e.client.Retire()
	}
}

// Query is what the EPP is told of a call besides its body.
type Query struct {
	ID     string // the request's id, sent as x-request-id
	Path   string // the API's path, such as /v1/chat/completions
	Class  string // the request's priority class, its objective
	Tenant string // the tenant whose share of a queue it takes; empty for none
}

// Order is an EPP's answer for one call: the pool's endpoints in the
// order it named them. A nil Order picks by the pool's policy.
type Order struct {
	idx    []int // indexes of the pool's endpoints
	answer *Answer
}

// Order asks the EPP where call, q's to p, goes, and sets on call the
// body and headers the EPP gave and the Tap that tells it the answer. A
// nil Order and nil error: pick by the pool's policy (fail_open). A
// non-nil Order's Done must be called when the call has ended.
func (e *Picker) Order(ctx context.Context, q Query, p *pool.Pool, call *proxy.Call) (*Order, error) {
	h := http.Header{ObjectiveHeader: {q.Class}, "X-Request-Id": {q.ID}}
	if q.Tenant != "" {
		h.Set(FairnessHeader, q.Tenant)
	}
	ask := Request{Path: q.Path, Header: h, Body: call.Body, Dropped: e.env.Dropped}
	a, err := e.ask(ctx, ask)
	var refused *Refusal
	if errors.As(err, &refused) {
		return nil, e.refusal(refused)
	}
	o := &Order{answer: a}
	if err == nil {
		o.idx = named(p, a.Endpoints)
		if len(o.idx) == 0 {
			a.Done(http.StatusServiceUnavailable, "")
			err = errors.New("the EPP named no endpoint of the pool")
		}
	}
	if err != nil {
		if e.failOpen {
			e.env.Log.Warn("the EPP did not pick; the pool's policy does", "id", q.ID, "pool", e.pool, "err", err)
			return nil, nil
		}
		return nil, openai.Unavailable("The endpoint picker did not answer.", errors.Join(e.env.NoEndpoint, err))
	}
	call.Body, call.Tap = a.Body, a.Tap
	if len(a.Header) > 0 {
		hh := call.Header.Clone()
		for k, v := range a.Header {
			hh[http.CanonicalHeaderKey(k)] = v
		}
		call.Header = hh
	}
	return o, nil
}

// ask asks e's EPP, or when a reload has retired its connection since
// the request read the catalog, the EPP of the pool's picker in service.
func (e *Picker) ask(ctx context.Context, req Request) (*Answer, error) {
	var err error
	for p := e; p != nil; p = p.next.Load() {
		if p.client == nil {
			return nil, fmt.Errorf("%w: its address could not be dialled", ErrNoAnswer)
		}
		var a *Answer
		if a, err = p.client.Ask(ctx, req, e.timeout); !errors.Is(err, ErrRetired) {
			return a, err
		}
	}
	return nil, err // retired, and the pool is gone
}

// refusal is an EPP's refusal as llmgw's own error: 429 shed, 503 no
// endpoint, 400 a request it cannot read, and 502 for any other status.
func (e *Picker) refusal(f *Refusal) error {
	switch {
	case f.Status == http.StatusTooManyRequests:
		return openai.Overloaded("The endpoint picker shed the request; try again shortly.", max(f.RetryAfter, 1))
	case f.Status == http.StatusServiceUnavailable:
		return openai.Unavailable("The endpoint picker found no endpoint for the request.", errors.Join(e.env.NoEndpoint, f))
	case f.Status >= 400 && f.Status < 500:
		return openai.BadRequest("", "The endpoint picker refused the request (status %d).", f.Status)
	}
	return openai.BadGateway(f)
}

// named is the indexes of p's endpoints at the given host:port, in their
// order; one p does not have is left out.
func named(p *pool.Pool, hosts []string) []int {
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

// Next is the endpoint to try: the first the EPP named that was not
// tried, or with no order the pool's pick among its candidates.
func (o *Order) Next(p *pool.Pool, rt *pool.Route, tried uint64, now time.Time, relaxed bool) (int, string) {
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

// Done tells the EPP how the call ended, off the request's path: its
// status and the endpoint of p named endpoint that served it. A nil
// Order is let be.
func (o *Order) Done(p *pool.Pool, status int, endpoint string) {
	if o == nil {
		return
	}
	served := ""
	if i := p.EndpointNamed(endpoint); i >= 0 {
		served, _ = p.Endpoints()[i].Host()
	}
	o.answer.Done(status, served)
}
