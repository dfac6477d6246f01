package pool

// Which models an endpoint's server has loaded, where the server says
// (an Ollama pool's /api/ps): a request for a model not loaded there
// waits for it to load before its prompt is computed, a cold start of
// seconds to minutes. auto predicts it, as the endpoint's cold starts
// have taken past what its cost model predicted, on top of the first
// token's time, so that a warm endpoint wins unless its queue is longer
// than a load; a call begun cold teaches that, and not the cost model.
// The policies that predict no first token pick an endpoint where the
// request's model is loaded while one is a candidate.

import (
	"math"
	"math/bits"
	"slices"
	"time"
)

// priorColdStart is the cold start charged, in seconds, before an
// endpoint has shown its own: a small model's load from a local disk.
const priorColdStart = 5.0

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

// loadedAt splits the candidates in c by what their servers said, while
// fresh, of model: warm where it is loaded, cold where it is not. An
// endpoint that has not said is neither.
func (p *Pool) loadedAt(model string, c uint64, now time.Time) (warm, cold uint64) {
	for m := c; m != 0; m &= m - 1 {
		i := bits.TrailingZeros64(m)
		switch loaded, known := p.endpoints[i].holds(model, now, p.maxAge); {
		case loaded:
			warm |= 1 << i
		case known:
			cold |= 1 << i
		}
	}
	return warm, cold
}

// holds reports whether the endpoint's server said, while fresh, that it
// has model loaded; known is false when it has not said.
func (e *Endpoint) holds(model string, now time.Time, maxAge time.Duration) (loaded, known bool) {
	l := e.loadedNow(now, maxAge)
	if l == nil {
		return false, false
	}
	return slices.Contains(l.names, model), true
}

// coldStartCost is the cold start auto predicts at the endpoint, in
// seconds.
func (m *costModel) coldStartCost() float64 {
	if v := math.Float64frombits(m.coldStart.Load()); v > 0 {
		return v
	}
	return priorColdStart
}

// learnColdStart folds one cold start into the endpoint's: extra is how
// long its first token took past what the cost model predicted.
// Racing updates may lose one observation.
func (m *costModel) learnColdStart(extra float64) {
	if !(extra > 0) {
		extra = 0.001 // a model loaded meanwhile; a charge stays above zero
	}
	old := math.Float64frombits(m.coldStart.Load())
	if old == 0 {
		m.coldStart.Store(math.Float64bits(extra))
		return
	}
	m.coldStart.Store(math.Float64bits(old + CostSmoothing*(extra-old)))
}

// LoadedOn is the names of p's endpoints whose servers said, while fresh
// at now, that they have model loaded, written as Route.Model is; known
// is false when none has said, as on servers that do not say.
func (p *Pool) LoadedOn(model string, now time.Time) (names []string, known bool) {
	for _, e := range p.endpoints {
		loaded, said := e.holds(model, now, p.maxAge)
		known = known || said
		if loaded {
			names = append(names, e.name)
		}
	}
	return names, known
}
