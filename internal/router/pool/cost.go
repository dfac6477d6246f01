package pool

// The first-token cost model: what an endpoint's first tokens have cost,
// learned from its answers, and the time to first token it predicts from
// the prefill ahead; and how far its answers confirm the prefix hits the
// index predicts there.

import (
	"sync"
	"sync/atomic"
	"time"
)

// costModel is what an endpoint has learned of its first tokens' cost.
type costModel struct {
	// cost is the learned cost of a first token (nil before the first
	// streamed answer: the prior), and fit what it is learned by.
	cost atomic.Pointer[Cost]
	fit  costFit
	// learnedAt is when the cost model last learned from a first token,
	// in unix nanoseconds; zero before the first.
	learnedAt atomic.Int64
	// ttftMeasured and ttftPredicted are the means of recent streamed
	// first tokens, taken and predicted, in seconds (float64 bits; zero
	// before the first): for the status alone (status.go).
	ttftMeasured, ttftPredicted atomic.Uint64
	// coldStart is the mean of recent cold starts' time past what the
	// cost model predicted, in seconds (float64 bits; zero before the
	// first: priorColdStart) (loaded.go).
	coldStart atomic.Uint64
}

// The first-token cost model's prior, used until an endpoint has answered:
// 20 ms of fixed cost and 100 µs a prompt token of prefill, its own or
// owed ahead of it (10,000 prefill tokens a second, a modest GPU on an 8B
// model, computing prompts one after another), and nothing for a request
// the server reports queued. A few answers replace it.
const (
	priorBase     = 0.020
	priorPerToken = 100e-6
	// CostSmoothing is the weight of each new observation in the means
	// that keep one number (a pool's mean prompt, an endpoint's
	// precision): about the last ten answers count.
	CostSmoothing = 0.2
	// costDecay is the weight the cost model's fit keeps of what it knew
	// at each new first token: about the last thirty count, enough to
	// tell apart four causes of waiting.
	costDecay = 0.97
	// costRidge holds each coefficient toward the prior as firmly as a
	// tenth of a first token at a feature's unit would: a second, a
	// thousand prompt tokens, one queued request. A cause no recent first
	// token had keeps its prior.
	costRidge = 0.1
	// costStale is how long an endpoint's cost model is believed with no
	// first token to learn from and no request there awaiting one. A
	// model that predicts an endpoint slow keeps requests away from it,
	// and with them the answers that would correct it: one learned in a
	// burst, or while a replica was briefly slow, would hold an endpoint
	// idle for good. Past costStale the prior stands in, requests go there
	// as to a new endpoint, and the first of their first tokens starts the
	// fit again.
	costStale = 10 * time.Second
)

// Cost is an endpoint's first-token cost model: a first token comes
// Base seconds after the request is sent, plus PerToken for each prompt
// token of its own the endpoint computes, plus PerAhead for each token
// of prefill owed ahead of it, plus PerWaiting for each request the
// server reports queued. Each is learned from the endpoint's answers,
// none assumed: on an engine that computes prompts one after another,
// PerAhead comes out near PerToken; on one that gives each request a slot
// of its own, near zero, and PerWaiting carries the wait for a slot.
// PerToken is also what a cached prompt token saves.
type Cost struct {
	Base, PerToken, PerAhead, PerWaiting float64
}

// priorCost is the cost model before an endpoint's first answer.
var priorCost = Cost{Base: priorBase, PerToken: priorPerToken, PerAhead: priorPerToken}

// Predict is the time to first token, in seconds, of a request with own
// uncached prompt tokens, ahead tokens of prefill owed before it, and
// waiting requests queued at the server.
func (c *Cost) Predict(own, ahead, waiting float64) float64 {
	return c.Base + c.PerToken*own + c.PerAhead*ahead + c.PerWaiting*waiting
}

// The cost model's fit works in thousands of tokens, so that every
// coefficient is of the order of a second and the fit well conditioned.
const kiloTokens = 1e-3

// costFit is the fit behind an endpoint's cost model.
type costFit struct {
	mu sync.Mutex
	f  fit
}

// newCostFit is a fit starting from c.
func newCostFit(c Cost) fit {
	prior := []float64{c.Base, c.PerToken / kiloTokens, c.PerAhead / kiloTokens, c.PerWaiting}
	return newFit(costDecay, prior, []float64{costRidge, costRidge, costRidge, costRidge})
}

// firstTokenCost is the endpoint's cost model.
func (c *costModel) firstTokenCost() *Cost {
	if c := c.cost.Load(); c != nil {
		return c
	}
	return &priorCost
}

// costAt is the endpoint's cost model as routing believes it at now:
// the prior while the learned one is stale.
func (e *Endpoint) costAt(now time.Time) *Cost {
	if e.costStale(now) {
		return &priorCost
	}
	return e.firstTokenCost()
}

// costStale reports whether the endpoint's cost model is stale at now:
// its last first token is older than costStale, and no request there
// awaits one.
func (e *Endpoint) costStale(now time.Time) bool {
	at := e.learnedAt.Load()
	return at != 0 && now.UnixNano()-at > int64(costStale) && e.pending.Load() == 0
}

// forget starts the cost model's fit again from the prior, unless it
// learned from a first token after sent: a call sent while the model was
// stale brings its first new observation. Racing first tokens may lose
// one observation.
func (c *costModel) forget(sent time.Time) {
	l := &c.fit
	l.mu.Lock()
	defer l.mu.Unlock()
	if c.learnedAt.Load() < sent.UnixNano() {
		l.f = fit{}
		c.cost.Store(nil)
	}
}

// learn updates the cost model from one first token, come at now, that
// took took for a call sent with own uncached tokens, ahead tokens of
// prefill owed before it and waiting requests queued. Coefficients are
// costs, so a fit that finds one negative publishes zero.
func (c *costModel) learn(now time.Time, took time.Duration, own, ahead, waiting float64) {
	t := took.Seconds()
	c.noteTTFT(t, c.firstTokenCost().Predict(own, ahead, waiting))
	l := &c.fit
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f.n == 0 {
		l.f = newCostFit(priorCost)
	}
	l.f.add([]float64{1, own * kiloTokens, ahead * kiloTokens, waiting}, t)
	c.learnedAt.Store(now.UnixNano())
	th := l.f.theta
	c.cost.Store(&Cost{
		Base:       max(th[0], 0),
		PerToken:   max(th[1], 0) * kiloTokens,
		PerAhead:   max(th[2], 0) * kiloTokens,
		PerWaiting: max(th[3], 0),
	})
}

// ahead is the prefill owed at the endpoint before a new request, in
// tokens, and the requests queued there, with own this gateway's counts
// there and l its last scrape (nil when stale).
//
// The prefill owed is what this gateway and the other gateways (peers)
// sent and is still owed, and, when the endpoint reports more requests
// waiting than the gateways have pending (others send to it too), those
// requests at meanPrompt tokens each.
//
// The queue is the scrape's, moved on by this gateway's calls since: a
// server that had requests waiting had no room, so each call sent since
// waits too, and each call ended since let one in. Without the calls
// since, every request in the scrape's interval would go where the last
// scrape showed the shortest queue.
func ahead(own Counts, l *Load, peers Counts, meanPrompt float64) (tokens, waiting float64) {
	tokens = float64(own.Owed + peers.Owed)
	if l != nil && l.Waiting >= 0 {
		if others := l.Waiting - float64(own.Pending+peers.Pending); others > 0 {
			tokens += others * meanPrompt
		}
		if l.Waiting > 0 {
			waiting = max(l.Waiting+float64(own.Inflight-l.inflight), 0)
		}
	}
	return tokens, waiting
}

// predictTTFT is how long a request with uncached prompt tokens of its own
// would wait for its first token here by cost, the endpoint's cost model
// as it stands (costAt), with the scrape l (nil when stale) and the other
// gateways' counts.
func (e *Endpoint) predictTTFT(cost *Cost, uncached int64, l *Load, peers Counts, meanPrompt float64) float64 {
	tokens, waiting := ahead(e.Counts(), l, peers, meanPrompt)
	return cost.Predict(float64(uncached), tokens, waiting)
}

// State is an endpoint as it stands at one moment: what admission
// decides by, as values.
type State struct {
	Own   Counts // this gateway's calls
	Peers Counts // the other gateways', while fresh
	Load  *Load  // the last scrape while fresh; nil when unknown
	// Cost is the first-token cost model, and Decode the decode model.
	Cost
	Decode Decode
	// BatchLimit is the endpoint's batch limit, and BatchRoom how many
	// more requests it may have under it; both zero when it has none.
	BatchLimit float64
	BatchRoom  int64
}

// state is e as it stands at now, its scrape believed up to maxAge.
func (e *Endpoint) state(now time.Time, maxAge time.Duration) State {
	s := State{Own: e.Counts(), Peers: e.Peers(now), Load: e.freshLoad(now, maxAge)}
	s.Cost, s.Decode = *e.costAt(now), *e.decodeModel()
	s.BatchLimit, s.BatchRoom = e.batchRoom()
	return s
}

// PredictTTFT is how long a request with uncached prompt tokens of its
// own would wait for its first token at the endpoint, when recent
// requests' uncached prompts are meanPrompt tokens (Endpoint.predictTTFT).
func (s *State) PredictTTFT(uncached int64, meanPrompt float64) float64 {
	tokens, waiting := ahead(s.Own, s.Load, s.Peers, meanPrompt)
	return s.Cost.Predict(float64(uncached), tokens, waiting)
}

// SetCost sets the endpoint's first-token cost model to base seconds and
// perToken seconds a prompt token of prefill, its own or owed ahead, in
// place of what it learned, and learns on from there: for tests that need
// an endpoint of a known speed.
func (m *costModel) SetCost(base, perToken float64) {
	c := Cost{Base: base, PerToken: perToken, PerAhead: perToken}
	m.fit.mu.Lock()
	defer m.fit.mu.Unlock()
	m.fit.f = newCostFit(c)
	m.cost.Store(&c)
}
