package router

// A pool as the router calls it: what routing knows of it (pool.Pool),
// and how a call to it is made — the headers a call carries, a hosted
// provider's URL and body, the cache salt, hedging — with its routing
// counters.

import (
	"net/http"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/pool"
)

// servedPool is a catalog pool as the router calls it.
type servedPool struct {
	*pool.Pool
	name      string
	plain     http.Header // what a call carries, unstreamed and streamed
	streamed  http.Header
	provider  *provider // a hosted provider's; nil for OpenAI-compatible kinds
	takesSalt bool      // whether calls carry the request's cache_salt
	kind      string    // the pool's kind: what its servers speak

	hedge catalog.Hedge // when a request is also sent to a second endpoint; After zero: never
	m     poolMetrics

	// peerCap is the most one gateway can have in flight at one endpoint
	// of the pool: what the other gateways' loads are believed up to,
	// summed (peers.go).
	peerCap pool.Counts
}

// upstreamPaths are the API paths an endpoint's calls go to.
var upstreamPaths = func() []string {
	var paths []string
	for _, a := range apis {
		paths = append(paths, a.upstreamPath)
	}
	return paths
}()

// newServedPool builds a pool from its catalog entry, keeping what prev
// learned (pool.New).
func newServedPool(p catalog.Pool, prev *servedPool, m *metrics) *servedPool {
	var learned *pool.Pool
	if prev != nil {
		learned = prev.Pool
	}
	sp := &servedPool{
		Pool: pool.New(p, learned, upstreamPaths), name: p.Name, plain: poolHeaders(p, false), streamed: poolHeaders(p, true),
		provider: newProvider(p), takesSalt: takesSalt(p.Kind), kind: p.Kind, hedge: p.Hedge,
	}
	sp.m = m.forPool(sp.name, sp.Policy())
	return sp
}

// header is what a call to the pool carries.
func (p *servedPool) header(stream bool) http.Header {
	if stream {
		return p.streamed
	}
	return p.plain
}
