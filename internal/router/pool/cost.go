package pool

// The first-token cost model: what an endpoint's first tokens have cost,
// learned from its answers, and the time to first token it predicts from
// the prefill ahead; and how far its answers confirm the prefix hits the
// index predicts there.

import (
	"math"
	"time"
)

// The first-token cost model's prior, used until an endpoint has answered:
// 20 ms of fixed cost and 100 µs a prompt token (10,000 prefill tokens a
// second, a modest GPU on an 8B model). Two or three answers replace it.
const (
	priorBase     = 0.020
	priorPerToken = 100e-6
	// CostSmoothing is the weight of each new observation: about the last
	// ten answers count.
	CostSmoothing = 0.2
	// costSplit separates observations that teach the fixed cost (less
	// prefill ahead than this) from those that teach the cost per token.
	costSplit = 256
)

// firstTokenCost is the endpoint's learned fixed cost and cost per token of
// prefill, in seconds.
func (e *Endpoint) firstTokenCost() (base, perToken float64) {
	base, perToken = math.Float64frombits(e.base.Load()), math.Float64frombits(e.perToken.Load())
	if base == 0 {
		base = priorBase
	}
	if perToken == 0 {
		perToken = priorPerToken
	}
	return base, perToken
}

// learn updates the cost model from one first token that took took, with
// work tokens of prefill ahead of it, its own included. Racing updates
// may lose one observation; the average does not care.
func (e *Endpoint) learn(took time.Duration, work int64) {
	base, perToken := e.firstTokenCost()
	t := took.Seconds()
	e.noteTTFT(t, base+perToken*float64(work))
	if work < costSplit {
		e.base.Store(math.Float64bits(base + CostSmoothing*(t-base)))
		return
	}
	sample := max((t-base)/float64(work), 0)
	e.perToken.Store(math.Float64bits(perToken + CostSmoothing*(sample-perToken)))
}

// predictTTFT is how long a request with uncached prompt tokens of its own
// would wait for its first token here. The prefill ahead of it is what
// this gateway and the other gateways (peers) sent and is still owed,
// and, when the endpoint reports more requests waiting than the gateways
// have pending (others send to it too), those requests at meanPrompt
// tokens each.
func (e *Endpoint) predictTTFT(uncached int64, l *Load, peers Counts, meanPrompt float64) float64 {
	owed, pending := e.owed.Load(), e.pending.Load()
	base, perToken := e.firstTokenCost()
	return predictTTFT(uncached, owed, pending, l, peers, meanPrompt, base, perToken)
}

// predictTTFT is endpoint.predictTTFT from the endpoint's own prefill
// owed and requests pending, and its cost model's base and perToken.
func predictTTFT(uncached, owed, pending int64, l *Load, peers Counts, meanPrompt, base, perToken float64) float64 {
	ahead := float64(owed + peers.Owed)
	if l != nil && l.Waiting >= 0 {
		if others := l.Waiting - float64(pending+peers.Pending); others > 0 {
			ahead += others * meanPrompt
		}
	}
	return base + perToken*(ahead+float64(uncached))
}

// State is an endpoint as it stands at one moment: what admission
// decides by, as values.
type State struct {
	Own   Counts // this gateway's calls
	Peers Counts // the other gateways', while fresh
	Load  *Load  // the last scrape while fresh; nil when unknown
	// Base and PerToken are the first-token cost model's, in seconds.
	Base, PerToken float64
	// BatchLimit is the endpoint's batch limit, and BatchRoom how many
	// more requests it may have under it; both zero when it has none.
	BatchLimit float64
	BatchRoom  int64
}

// state is e as it stands at now, its scrape believed up to maxAge.
func (e *Endpoint) state(now time.Time, maxAge time.Duration) State {
	s := State{Own: e.Counts(), Peers: e.Peers(now), Load: e.freshLoad(now, maxAge)}
	s.Base, s.PerToken = e.firstTokenCost()
	s.BatchLimit, s.BatchRoom = e.batchRoom()
	return s
}

// PredictTTFT is how long a request with uncached prompt tokens of its
// own would wait for its first token at the endpoint, when recent
// requests' uncached prompts are meanPrompt tokens (Endpoint.predictTTFT).
func (s *State) PredictTTFT(uncached int64, meanPrompt float64) float64 {
	return predictTTFT(uncached, s.Own.Owed, s.Own.Pending, s.Load, s.Peers, meanPrompt, s.Base, s.PerToken)
}

// Precision is the share of its predicted prefix hits the endpoint's
// answers confirm: below 1 when it evicts sooner than the index assumes.
func (e *Endpoint) Precision() float64 {
	if v := math.Float64frombits(e.hits.Load()); v > 0 {
		return v
	}
	return 1
}

// minPrecision keeps an endpoint whose cache was found cold a few times
// from having its prefix ignored for good: its next hit raises it again.
const minPrecision = 0.05

// Confirm folds one answer into the endpoint's precision: predicted
// prompt tokens were expected cached, and the answer reported cached.
func (e *Endpoint) Confirm(predicted, cached int64) {
	if predicted <= 0 {
		return
	}
	sample := min(float64(cached)/float64(predicted), 1)
	p := e.Precision()
	e.hits.Store(math.Float64bits(max(p+CostSmoothing*(sample-p), minPrecision)))
}

// SetCost sets the endpoint's first-token cost model to base seconds and
// perToken seconds a prompt token of prefill, in place of what it
// learned: for tests that need an endpoint of a known speed.
func (e *Endpoint) SetCost(base, perToken float64) {
	e.base.Store(math.Float64bits(base))
	e.perToken.Store(math.Float64bits(perToken))
}
