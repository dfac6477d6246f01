package router

// Picking an endpoint: weighted round robin over a pool's endpoints,
// passing over those that just failed. A small, replaceable piece: it
// knows nothing of the request but which endpoints it has already tried.

import (
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
)

// failCooldown is how long an endpoint that failed is passed over: long
// enough not to send the next few requests into the same refused
// connection, short enough that a restarted server is back within seconds.
const failCooldown = 2 * time.Second

// pool is a catalog pool with what the router has learned of its endpoints.
type pool struct {
	name      string
	plain     http.Header // what a call carries, unstreamed and streamed
	streamed  http.Header
	endpoints []*endpoint
	order     []int // endpoint indexes, each repeated by its weight
	next      atomic.Uint64
	provider  *provider // a hosted provider's; nil for OpenAI-compatible kinds
}

// endpoint is one server of a pool. It outlives catalog reloads that keep
// its URL.
type endpoint struct {
	url         string              // base URL, no trailing slash
	targets     map[string]*url.URL // key: API path; the URL a call to it goes to
	failedUntil atomic.Int64        // unix nanoseconds until which it is passed over
}

// newEndpoint is the endpoint at base, with its URL for each API path. A
// base URL that does not parse (the config refuses those) gets none, and
// its calls fail.
func newEndpoint(base string) *endpoint {
	ep := &endpoint{url: base, targets: make(map[string]*url.URL, len(apis))}
	for _, a := range apis {
		if u, err := url.Parse(base + a.upstreamPath); err == nil {
			ep.targets[a.upstreamPath] = u
		}
	}
	return ep
}

// newPool builds a pool from its catalog entry, keeping prev's endpoint
// state for URLs that stay.
func newPool(p catalog.Pool, prev *pool) *pool {
	np := &pool{name: p.Name, plain: poolHeaders(p, false), streamed: poolHeaders(p, true), provider: newProvider(p)}
	for i, e := range p.Endpoints {
		u := strings.TrimRight(e.URL, "/")
		var ep *endpoint
		if prev != nil {
			for _, old := range prev.endpoints {
				if old.url == u {
					ep = old
				}
			}
		}
		if ep == nil {
			ep = newEndpoint(u)
		}
		np.endpoints = append(np.endpoints, ep)
		for range max(e.Weight, 1) {
			np.order = append(np.order, i)
		}
	}
	return np
}

// header is what a call to the pool carries.
func (p *pool) header(stream bool) http.Header {
	if stream {
		return p.streamed
	}
	return p.plain
}

// pick is the next endpoint in turn that is not in tried and is not
// cooling down after a failure. When every untried endpoint is cooling
// down it picks among them anyway: a pool that only just failed is a
// better bet than no answer. Nil when every endpoint has been tried.
func (p *pool) pick(tried uint64, now time.Time) (*endpoint, int) {
	n := len(p.order)
	if n == 0 {
		return nil, -1
	}
	start := int(p.next.Add(1) % uint64(n))
	fallback := -1
	for k := range n {
		i := p.order[(start+k)%n]
		if i < 64 && tried&(1<<i) != 0 {
			continue
		}
		if p.endpoints[i].failedUntil.Load() > now.UnixNano() {
			if fallback < 0 {
				fallback = i
			}
			continue
		}
		return p.endpoints[i], i
	}
	if fallback >= 0 {
		return p.endpoints[fallback], fallback
	}
	return nil, -1
}

// failed marks the endpoint to be passed over for a while.
func (e *endpoint) failed(now time.Time) {
	e.failedUntil.Store(now.Add(failCooldown).UnixNano())
}

// succeeded clears a failure mark.
func (e *endpoint) succeeded() {
	if e.failedUntil.Load() != 0 {
		e.failedUntil.Store(0)
	}
}
