package pool

// An endpoint's status as plain values, for the router's status read by
// the console: health, ejection, what is in flight, the last scrape, the
// prefix hits its answers confirm, the first-token time the cost model
// predicted against the one measured, and the cold start it learned.

import (
	"math"
	"slices"
	"sync/atomic"
	"time"
)

// EndpointStatus is an endpoint as it stands at one moment.
type EndpointStatus struct {
	Name, URL string
	// Down reports whether its health probe fails; EjectedFor is how much
	// longer it is ejected for failing requests, zero when it is not, and
	// Ejections how many times in a row it was.
	Down       bool
	EjectedFor time.Duration
	Ejections  int
	Own, Peers Counts // this gateway's calls, and the other gateways' while fresh
	// Waiting and KVUsage are from its last scrape while fresh, negative
	// when unknown.
	Waiting, KVUsage float64
	// Models is the models its server said it has loaded, at its last
	// scrape while fresh; nil when unknown, as on every server that does
	// not say (all but Ollama's).
	Models []string
	// ColdStart is the cold start auto predicts at it for a request whose
	// model its server said is not loaded: learned from its cold first
	// tokens, and priorColdStart (5 s) until ColdStartLearned.
	ColdStart        time.Duration
	ColdStartLearned bool
	// PrefixHits is the share of predicted prefix hits its answers
	// confirmed, recently; 1 until one was checked.
	PrefixHits float64
	// Slots is how many slots routing models its server caching a prompt
	// in, on a pool whose servers cache per slot; zero on the others.
	Slots int
	// PredictedTTFT and MeasuredTTFT are the means, over its recent
	// streamed answers, of the first-token time the cost model predicted
	// for the prefill ahead of each when it was sent and of the time it
	// took; zero before the first.
	PredictedTTFT, MeasuredTTFT time.Duration
	// Cost and Decode are its first-token cost model and its decode
	// model, as learned from its answers.
	Cost   Cost
	Decode Decode
	// BatchLimit is its batch limit; zero when it has none.
	BatchLimit float64
}

// Status is every endpoint of p as it stands at now.
func (p *Pool) Status(now time.Time) []EndpointStatus {
	out := make([]EndpointStatus, 0, len(p.endpoints))
	index := p.index.Load()
	for i, e := range p.endpoints {
		s := EndpointStatus{
			Name: e.name, URL: e.url, Down: e.Down(), Ejections: int(e.ejections.Load()),
			Own: e.Counts(), Peers: e.Peers(now), Waiting: -1, KVUsage: -1, PrefixHits: e.Precision(),
			PredictedTTFT: seconds(e.ttftPredicted.Load()), MeasuredTTFT: seconds(e.ttftMeasured.Load()),
			Cost: *e.costAt(now), Decode: *e.decodeModel(),
			ColdStart: time.Duration(e.coldStartCost() * float64(time.Second)), ColdStartLearned: e.coldStart.Load() != 0,
		}
		if d := time.Duration(e.ejectedUntil.Load() - now.UnixNano()); d > 0 {
			s.EjectedFor = d
		}
		if l := e.freshLoad(now, p.maxAge); l != nil {
			s.Waiting, s.KVUsage = l.Waiting, l.KVUsage
		}
		if l := e.loadedNow(now, p.maxAge); l != nil {
			s.Models = slices.Clone(l.names)
		}
		s.BatchLimit, _ = e.batchRoom()
		s.Slots = index.Slots(i)
		out = append(out, s)
	}
	return out
}

// noteTTFT folds one streamed answer's first token into the endpoint's
// means: took measured, predicted by the cost model before it learned
// from this one. Racing updates may lose one observation.
func (c *costModel) noteTTFT(took, predicted float64) {
	for _, m := range []struct {
		v *atomic.Uint64
		x float64
	}{{&c.ttftMeasured, took}, {&c.ttftPredicted, predicted}} {
		old := math.Float64frombits(m.v.Load())
		if old == 0 {
			m.v.Store(math.Float64bits(m.x))
			continue
		}
		m.v.Store(math.Float64bits(old + CostSmoothing*(m.x-old)))
	}
}

// seconds is float64 bits of seconds as a duration.
func seconds(bits uint64) time.Duration {
	return time.Duration(math.Float64frombits(bits) * float64(time.Second))
}
