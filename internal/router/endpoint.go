package router

// An endpoint as routing sees it: what llmgw tracks of the requests it
// sent there, which is never stale; what the endpoint's /metrics said last,
// which is believed only while fresh; whether its health probe passes; and
// whether it has been ejected for failing requests.

import (
	"math"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cespare/xxhash/v2"
)

// Passive outlier ejection: an endpoint that fails ejectAfter requests in
// a row is ejected for ejectBase, doubling with each ejection that follows
// without a success in between, up to ejectMax. One failure is enough:
// every request sent to a failing endpoint costs its client a wasted round
// trip before the retry, while passing over a healthy one for a second
// costs the pool a second of one endpoint. A second at first keeps a
// restarting server (back within seconds) from waiting long, and half a
// minute bounds how long a recovered one stays out.
const (
	ejectAfter = 1
	ejectBase  = time.Second
	ejectMax   = 30 * time.Second
)

// endpoint is one server of a pool. It outlives catalog reloads that keep
// its URL, and so does everything it has learned.
type endpoint struct {
	name    string              // the configured name: the endpoint label
	url     string              // base URL, no trailing slash
	targets map[string]*url.URL // key: API path; the URL a call to it goes to
	// id is the endpoint's identity in rendezvous hashing: a hash of its
	// URL, the same in every gateway.
	id uint64

	// Tracked by llmgw, per request sent.
	inflight atomic.Int64 // requests sent and not ended
	pending  atomic.Int64 // of those, requests not yet at their first token
	owed     atomic.Int64 // uncached prompt tokens of the pending requests: the prefill owed
	critical atomic.Int64 // critical requests past their first token: streams to keep prefill off

	// load is the last scrape of the endpoint's /metrics; nil before the
	// first.
	load atomic.Pointer[endpointLoad]
	// peers is what the other gateways have in flight here, as they last
	// said; nil when none has anything (peers.go).
	peers atomic.Pointer[peerLoad]

	down         atomic.Bool  // the last health probe failed
	ejectedUntil atomic.Int64 // unix nanoseconds; passive ejection
	failures     atomic.Int32 // requests failed in a row
	ejections    atomic.Int32 // ejections since the last success

	// hits is the share of predicted prefix hits the endpoint's answers
	// confirmed, recently (float64 bits; zero means none were checked yet,
	// and all are believed).
	hits atomic.Uint64

	// The learned cost of a first token: base seconds plus perToken
	// seconds for each prompt token of prefill ahead of it, its own
	// uncached tokens included (float64 bits; zero means not yet learned).
	base, perToken atomic.Uint64

	// gapNanos and gaps sum the inter-token gaps of the streams here:
	// their mean over a while is the server's step time as its clients
	// see it.
	gapNanos, gaps atomic.Int64
	// batch is how many requests admission lets the endpoint have in
	// flight so that its step time stays within the TPOT aim.
	batch batchLimit
}

// endpointLoad is what one scrape of an endpoint's /metrics said. Fields
// the server does not export are negative.
type endpointLoad struct {
	waiting float64 // requests queued, not yet running
	kvUsage float64 // share of the KV cache in use, 0 to 1
	at      time.Time
}

// loadCounts is what is in flight at an endpoint: requests, those without
// a first token, the prefill they owe, and the critical requests past
// their first token.
type loadCounts struct{ inflight, pending, owed, critical int64 }

// peerLoad is what the other gateways have in flight at one endpoint,
// summed, as last heard at at (Unix nanoseconds).
type peerLoad struct {
	loadCounts
	at int64
}

// Peers is the other gateways' load at e if it was heard within
// peerMaxAge of now, else zero: a silent peer's count is unknown, and
// the scrape stands in for it.
func (e *endpoint) Peers(now time.Time) loadCounts {
	l := e.peers.Load()
	if l == nil || now.UnixNano()-l.at > int64(peerMaxAge) {
		return loadCounts{}
	}
	return l.loadCounts
}

func newEndpoint(name, base string) *endpoint {
	ep := &endpoint{name: name, url: base, targets: make(map[string]*url.URL, len(apis)), id: xxhash.Sum64String(base)}
	for _, a := range apis {
		if u, err := url.Parse(base + a.upstreamPath); err == nil {
			ep.targets[a.upstreamPath] = u
		}
	}
	return ep
}

// Name is the endpoint's configured name, its endpoint label.
func (e *endpoint) Name() string { return e.name }

// URL is the endpoint's base URL, without a trailing slash.
func (e *endpoint) URL() string { return e.url }

// Counts is what this gateway has in flight at the endpoint now. The
// counts are read one after another while calls come and go.
func (e *endpoint) Counts() loadCounts {
	return loadCounts{e.inflight.Load(), e.pending.Load(), e.owed.Load(), e.critical.Load()}
}

// SetLoad takes a scrape of the endpoint's /metrics: requests waiting and
// the share of its KV cache in use, negative where it exports none.
func (e *endpoint) SetLoad(waiting, kvUsage float64, at time.Time) {
	e.load.Store(&endpointLoad{waiting: waiting, kvUsage: kvUsage, at: at})
}

// SetDown takes a health probe's verdict, and reports whether the
// endpoint was down before it.
func (e *endpoint) SetDown(down bool) (was bool) { return e.down.Swap(down) }

// SetPeers takes what the other gateways have in flight at the endpoint,
// summed, as heard at now; all zero forgets it.
func (e *endpoint) SetPeers(c loadCounts, now time.Time) {
	if c == (loadCounts{}) {
		e.peers.Store(nil)
		return
	}
	e.peers.Store(&peerLoad{loadCounts: c, at: now.UnixNano()})
}

// epCall is one call's mark on its endpoint's counts, from Send to Done:
// in flight all along, and until its first token pending, owing its
// uncached prompt. Its methods run on the call's goroutine.
type epCall struct {
	e        *endpoint
	uncached int64     // prompt tokens the endpoint was expected to compute
	work     int64     // prefill owed at the endpoint when sent, this call's and other gateways' included
	at       time.Time // when it was sent
	stream   bool
	critical bool // the request is of class critical
	first    bool // the first token is in
}

// Send counts a call sent at now, whose prompt the endpoint must compute
// uncached tokens of. A streamed call teaches the cost model at its first
// token; a critical one counts, past it, as a stream to keep prefill off.
func (e *endpoint) Send(uncached int64, stream, critical bool, now time.Time) epCall {
	e.inflight.Add(1)
	e.pending.Add(1)
	work := e.owed.Add(uncached) + e.Peers(now).owed
	return epCall{e: e, uncached: uncached, work: work, at: now, stream: stream, critical: critical}
}

// FirstToken ends the call's prefill owed, and teaches the endpoint what
// the first token cost. It reports false, and does nothing, after the
// first time. A plain answer's headers come with its last token, so only
// streams teach.
func (c *epCall) FirstToken(now time.Time) bool {
	if c.first {
		return false
	}
	c.first = true
	c.e.pending.Add(-1)
	c.e.owed.Add(-c.uncached)
	if c.critical {
		c.e.critical.Add(1)
	}
	if c.stream {
		c.e.learn(now.Sub(c.at), c.work)
	}
	return true
}

// Started reports whether the call's first token is in.
func (c *epCall) Started() bool { return c.first }

// Gap counts one inter-token gap of the call's stream.
func (c *epCall) Gap(d time.Duration) {
	c.e.gapNanos.Add(int64(d))
	c.e.gaps.Add(1)
}

// Done takes the call off its endpoint's counts. With aim, the step time
// admission holds the endpoint to, it decides the batch limit on the way;
// zero leaves the limit alone.
func (c *epCall) Done(aim time.Duration) {
	if !c.first {
		c.e.pending.Add(-1)
		c.e.owed.Add(-c.uncached)
	} else if c.critical {
		c.e.critical.Add(-1)
	}
	n := c.e.inflight.Add(-1)
	c.e.tuneBatch(aim, n+1)
}

// out reports whether the endpoint should be passed over: its health
// probe fails, or it is ejected.
func (e *endpoint) out(now int64) bool {
	return e.down.Load() || e.ejectedUntil.Load() > now
}

// freshLoad is the last scrape if it is no older than maxAge, else nil:
// a scrape too old is unknown, never idle.
func (e *endpoint) freshLoad(now time.Time, maxAge time.Duration) *endpointLoad {
	l := e.load.Load()
	if l == nil || now.Sub(l.at) > maxAge {
		return nil
	}
	return l
}

// Failed counts a failed request, and ejects the endpoint after ejectAfter
// in a row, or after one when it is just back from an ejection. It reports
// whether this failure ejected it.
func (e *endpoint) Failed(now time.Time) bool {
	until := e.ejectedUntil.Load()
	if until > now.UnixNano() {
		return false // a request sent before the ejection: its outage already counted
	}
	n := e.failures.Add(1)
	back := e.ejections.Load() > 0 && e.ejectedUntil.Load() <= now.UnixNano()
	if n < ejectAfter && !back {
		return false
	}
	k := e.ejections.Load() + 1
	wait := min(ejectBase<<min(k-1, 5), ejectMax)
	// Of failures that race here, one ejects; the others were the same
	// outage.
	if !e.ejectedUntil.CompareAndSwap(until, now.Add(wait).UnixNano()) {
		return false
	}
	e.ejections.Store(k)
	e.failures.Store(0)
	return true
}

// Succeeded counts a request the endpoint served: one brings an ejected
// endpoint back for good.
func (e *endpoint) Succeeded() {
	if e.failures.Load() != 0 {
		e.failures.Store(0)
	}
	if e.ejections.Load() != 0 {
		e.ejections.Store(0)
		e.ejectedUntil.Store(0)
	}
}

// The first-token cost model's prior, used until an endpoint has answered:
// 20 ms of fixed cost and 100 µs a prompt token (10,000 prefill tokens a
// second, a modest GPU on an 8B model). Two or three answers replace it.
const (
	priorBase     = 0.020
	priorPerToken = 100e-6
	// costSmoothing is the weight of each new observation: about the last
	// ten answers count.
	costSmoothing = 0.2
	// costSplit separates observations that teach the fixed cost (less
	// prefill ahead than this) from those that teach the cost per token.
	costSplit = 256
)

// firstTokenCost is the endpoint's learned fixed cost and cost per token of
// prefill, in seconds.
func (e *endpoint) firstTokenCost() (base, perToken float64) {
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
func (e *endpoint) learn(took time.Duration, work int64) {
	base, perToken := e.firstTokenCost()
	t := took.Seconds()
	if work < costSplit {
		e.base.Store(math.Float64bits(base + costSmoothing*(t-base)))
		return
	}
	sample := max((t-base)/float64(work), 0)
	e.perToken.Store(math.Float64bits(perToken + costSmoothing*(sample-perToken)))
}

// predictTTFT is how long a request with uncached prompt tokens of its own
// would wait for its first token here. The prefill ahead of it is what
// this gateway and the other gateways (peers) sent and is still owed,
// and, when the endpoint reports more requests waiting than the gateways
// have pending (others send to it too), those requests at meanPrompt
// tokens each.
func (e *endpoint) predictTTFT(uncached int64, l *endpointLoad, peers loadCounts, meanPrompt float64) float64 {
	owed, pending := e.owed.Load(), e.pending.Load()
	base, perToken := e.firstTokenCost()
	return predictTTFT(uncached, owed, pending, l, peers, meanPrompt, base, perToken)
}

// predictTTFT is endpoint.predictTTFT from the endpoint's own prefill
// owed and requests pending, and its cost model's base and perToken.
func predictTTFT(uncached, owed, pending int64, l *endpointLoad, peers loadCounts, meanPrompt, base, perToken float64) float64 {
	ahead := float64(owed + peers.owed)
	if l != nil && l.waiting >= 0 {
		if others := l.waiting - float64(pending+peers.pending); others > 0 {
			ahead += others * meanPrompt
		}
	}
	return base + perToken*(ahead+float64(uncached))
}

// endpointState is an endpoint as it stands at one moment: what
// admission decides by, as values.
type endpointState struct {
	own   loadCounts    // this gateway's calls
	peers loadCounts    // the other gateways', while fresh
	load  *endpointLoad // the last scrape while fresh; nil when unknown
	// base and perToken are the first-token cost model's, in seconds.
	base, perToken float64
	// batchLimit is the endpoint's batch limit, and batchRoom how many
	// more requests it may have under it; both zero when it has none.
	batchLimit float64
	batchRoom  int64
}

// state is e as it stands at now, its scrape believed up to maxAge.
func (e *endpoint) state(now time.Time, maxAge time.Duration) endpointState {
	s := endpointState{own: e.Counts(), peers: e.Peers(now), load: e.freshLoad(now, maxAge)}
	s.base, s.perToken = e.firstTokenCost()
	s.batchLimit, s.batchRoom = e.batchRoom()
	return s
}

// predictTTFT is how long a request with uncached prompt tokens of its
// own would wait for its first token at the endpoint, as
// endpoint.predictTTFT.
func (s *endpointState) predictTTFT(uncached int64, meanPrompt float64) float64 {
	return predictTTFT(uncached, s.own.owed, s.own.pending, s.load, s.peers, meanPrompt, s.base, s.perToken)
}

// Precision is the share of its predicted prefix hits the endpoint's
// answers confirm: below 1 when it evicts sooner than the index assumes.
func (e *endpoint) Precision() float64 {
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
func (e *endpoint) Confirm(predicted, cached int64) {
	if predicted <= 0 {
		return
	}
	sample := min(float64(cached)/float64(predicted), 1)
	p := e.Precision()
	e.hits.Store(math.Float64bits(max(p+costSmoothing*(sample-p), minPrecision)))
}

// The batch limit's constants. It starts at batchStart when admission
// first holds the endpoint to a TPOT aim, and never drops below batchMin:
// one request always runs.
const (
	batchStart = 4
	batchMin   = 1
	// batchSteps is how many steps' gaps the step time is measured over
	// before a decision: enough that the steps carrying a prompt's
	// prefill, which slow every stream in them, count in the share they
	// have, and few enough to decide about once a second.
	batchSteps = 16
	// batchCut and batchGrow bound one decision: never below half at
	// once, nor above twice.
	batchCut  = 0.5
	batchGrow = 2
)

// batchLimit is how many requests an endpoint may have in flight while a
// TPOT aim is in play. It is decided on requests' ends, once the gaps of
// batchSteps steps are in since the last decision: over the aim, the
// limit is cut in proportion (a step's time grows about linearly with
// the tokens in it), at most once a round — the ends of a limit's worth
// of requests, the time a cut takes to show; under the aim, while the
// limit binds, it grows by half the proportion.
type batchLimit struct {
	mu    sync.Mutex
	limit float64 // 0: not yet set
	ends  int     // requests ended since the last cut
	cut   bool    // the limit has been cut at least once
	// The gap sums at the last decision.
	gapNanos, gaps int64
	// bits is limit for readers without the lock (float64 bits).
	bits atomic.Uint64
}

// tuneBatch decides the endpoint's batch limit on a request's end, with
// inflight requests in flight just before it and aim the step time that
// admission holds the pool to.
func (e *endpoint) tuneBatch(aim time.Duration, inflight int64) {
	if aim <= 0 {
		return
	}
	b := &e.batch
	b.mu.Lock()
	defer b.mu.Unlock()
	n := float64(inflight)
	b.ends++
	sum, count := e.gapNanos.Load(), e.gaps.Load()
	if count-b.gaps < int64(batchSteps*max(inflight, 1)) {
		return
	}
	step := float64(sum-b.gapNanos) / float64(count-b.gaps)
	b.gapNanos, b.gaps = sum, count
	if b.limit == 0 {
		b.limit = batchStart // an endpoint that was out when the aim came
	}
	ratio := float64(aim) / step
	switch {
	case ratio < 1 && (!b.cut || float64(b.ends) >= b.limit):
		b.limit = max(batchMin, min(b.limit, n)*max(ratio, batchCut))
		b.ends, b.cut = 0, true
	case ratio >= 1 && n >= b.limit-1:
		b.limit *= min(1+(ratio-1)/2, batchGrow)
	}
	b.bits.Store(math.Float64bits(b.limit))
}

// StartBatch gives the endpoint its first batch limit, batchStart, when
// admission first holds it to an aim: like a TCP connection's first
// window, the limit starts small and doubles while the step time allows,
// so that a burst at the start, before anything is measured, cannot fill
// the server's batch. The requests it already has stay.
func (e *endpoint) StartBatch() {
	if e.batch.bits.Load() != 0 {
		return
	}
	b := &e.batch
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.limit == 0 {
		b.limit = batchStart
		b.gapNanos, b.gaps = e.gapNanos.Load(), e.gaps.Load()
		b.bits.Store(math.Float64bits(b.limit))
	}
}

// batchRoom is the endpoint's batch limit and how many more requests it
// may have in flight under it; both zero when it has none.
func (e *endpoint) batchRoom() (limit float64, room int64) {
	limit = math.Float64frombits(e.batch.bits.Load())
	if limit == 0 {
		return 0, 0
	}
	return limit, max(int64(limit)-e.inflight.Load(), 0)
}
