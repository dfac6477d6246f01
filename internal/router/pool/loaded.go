package pool

// Which models an endpoint's server has loaded, where the server says
// (an Ollama pool's /api/ps): a request for a model not loaded there
// waits for it to load before its prompt is computed, a cold start of
// seconds to minutes that no cost model learns from a few answers, so a
// pick takes an endpoint where the request's model is loaded while one is
// a candidate.

import (
	"math/bits"
	"slices"
	"time"
)

// loadedModels is what one scrape said the server has loaded.
type loadedModels struct {
	names []string // as Route.Model is written
	at    time.Time
}

// SetModels takes what a scrape at at said the endpoint's server has
// loaded: names written as Route.Model is. nil says nothing, and leaves
// what an earlier scrape said to age out.
func (e *Endpoint) SetModels(names []string, at time.Time) {
	if names == nil {
		return
	}
	e.models.Store(&loadedModels{names: names, at: at})
}

// loadedNow is what the endpoint's server last said it has loaded, if
// that is no older than maxAge at now; nil when unknown.
func (e *Endpoint) loadedNow(now time.Time, maxAge time.Duration) *loadedModels {
	l := e.models.Load()
	if l == nil || now.Sub(l.at) > maxAge {
		return nil
	}
	return l
}

// preferLoaded is the candidates in c where model is loaded, or c when
// it is loaded at none of them, or none has said: a model cold
// everywhere is loaded wherever the policy sends it.
func (p *Pool) preferLoaded(model string, c uint64, now time.Time) uint64 {
	var warm uint64
	for m := c; m != 0; m &= m - 1 {
		i := bits.TrailingZeros64(m)
		if l := p.endpoints[i].loadedNow(now, p.maxAge); l != nil && slices.Contains(l.names, model) {
			warm |= 1 << i
		}
	}
	if warm == 0 {
		return c
	}
	return warm
}
