package pool

// An endpoint as routing sees it: what llmgw tracks of the requests it
// sent there, which is never stale; what the endpoint's /metrics said last,
// which is believed only while fresh; whether its health probe passes; and
// whether it has been ejected for failing requests.

import (
	"net/url"
	"sync/atomic"
	"time"

	"github.com/cespare/xxhash/v2"
)

// Endpoint is one server of a pool. It outlives catalog reloads that keep
// its URL, and so does everything it has learned.
type Endpoint struct {
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
	load atomic.Pointer[Load]
	// peers is what the other gateways have in flight here, as they last
	// said; nil when none has anything (SetPeers).
	peers atomic.Pointer[peerLoad]

	down         atomic.Bool  // the last health probe failed
	ejectedUntil atomic.Int64 // unix nanoseconds; passive ejection
	failures     atomic.Int32 // requests failed in a row
	ejections    atomic.Int32 // ejections since the last success

	// hits is the share of predicted prefix hits the endpoint's answers
	// confirmed, recently (float64 bits; zero means none were checked yet,
	// and all are believed).
	hits atomic.Uint64

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

	// gapNanos and gaps sum the inter-token gaps of the streams here:
	// their mean over a while is the server's step time as its clients
	// see it. gapStreams sums the streams decoding here at each gap, and
	// gapPrompt the uncached prompt tokens of each call whose first token
	// has come, times the streams decoding here as it came: summed over
	// the gaps, what their steps decoded and what prefill they carried.
	// A prompt computed while no stream decodes holds up no gap.
	gapNanos, gaps, gapStreams, gapPrompt atomic.Int64
	// decode is the decode model learned from the gaps (nil before the
	// first observation: the prior), and decodeFit what it is learned by.
	decode    atomic.Pointer[Decode]
	decodeFit decodeFit
	// batch is how many requests admission lets the endpoint have in
	// flight so that its step time stays within the TPOT aim.
	batch batchLimit
}

// Load is what one scrape of an endpoint's /metrics said. Fields
// the server does not export are negative.
type Load struct {
	Waiting float64 // requests queued, not yet running
	KVUsage float64 // share of the KV cache in use, 0 to 1
	At      time.Time
	// inflight is this gateway's calls in flight there when the scrape
	// was taken.
	inflight int64
}

// Counts is what is in flight at an endpoint: requests, those without
// a first token, the prefill they owe, and the critical requests past
// their first token.
type Counts struct{ Inflight, Pending, Owed, Critical int64 }

// peerLoad is what the other gateways have in flight at one endpoint,
// summed, as last heard at at (Unix nanoseconds).
type peerLoad struct {
	Counts
	at int64
}

// PeerMaxAge is how long what another gateway said of its load stands
// without a word since. A gateway sends every 10 ms while it has
// requests in flight; a silence this long means it has stopped, or the
// bus has, and its requests are then counted as the scrape shows them. A
// message carries no time of its own: it is stamped when it arrives, so
// no sender's clock can make it stand longer.
const PeerMaxAge = 250 * time.Millisecond

// Peers is the other gateways' load at e if it was heard within
// PeerMaxAge of now, else zero: a silent peer's count is unknown, and
// the scrape stands in for it.
func (e *Endpoint) Peers(now time.Time) Counts {
	l := e.peers.Load()
	if l == nil || now.UnixNano()-l.at > int64(PeerMaxAge) {
		return Counts{}
	}
	return l.Counts
}

func newEndpoint(name, base string, paths []string) *Endpoint {
	ep := &Endpoint{name: name, url: base, targets: make(map[string]*url.URL, len(paths)), id: xxhash.Sum64String(base)}
	for _, path := range paths {
		if u, err := url.Parse(base + path); err == nil {
			ep.targets[path] = u
		}
	}
	return ep
}

// Target is the URL a call for the API at path goes to; nil for a path
// the pool was not built with, or a URL that does not parse.
func (e *Endpoint) Target(path string) *url.URL { return e.targets[path] }

// Host is the host:port the endpoint's calls go to, as upstream
// connections are kept by; false when no URL of it parses.
func (e *Endpoint) Host() (string, bool) {
	for _, u := range e.targets {
		return u.Host, true // every target of an endpoint has its host
	}
	return "", false
}

// Name is the endpoint's configured name, its endpoint label.
func (e *Endpoint) Name() string { return e.name }

// URL is the endpoint's base URL, without a trailing slash.
func (e *Endpoint) URL() string { return e.url }

// Counts is what this gateway has in flight at the endpoint now. The
// counts are read one after another while calls come and go.
func (e *Endpoint) Counts() Counts {
	return Counts{e.inflight.Load(), e.pending.Load(), e.owed.Load(), e.critical.Load()}
}

// SetLoad takes a scrape of the endpoint's /metrics: requests waiting and
// the share of its KV cache in use, negative where it exports none.
func (e *Endpoint) SetLoad(waiting, kvUsage float64, at time.Time) {
	e.load.Store(&Load{Waiting: waiting, KVUsage: kvUsage, At: at, inflight: e.inflight.Load()})
}

// SetDown takes a health probe's verdict, and reports whether the
// endpoint was down before it.
func (e *Endpoint) SetDown(down bool) (was bool) { return e.down.Swap(down) }

// Down reports whether the endpoint's last health probe failed.
func (e *Endpoint) Down() bool { return e.down.Load() }

// SetPeers takes what the other gateways have in flight at the endpoint,
// summed, as heard at now; all zero forgets it.
func (e *Endpoint) SetPeers(c Counts, now time.Time) {
	if c == (Counts{}) {
		e.peers.Store(nil)
		return
	}
	e.peers.Store(&peerLoad{Counts: c, at: now.UnixNano()})
}

// Call is one call's mark on its endpoint's counts, from Send to Done:
// in flight all along, and until its first token pending, owing its
// uncached prompt. Its methods run on the call's goroutine.
type Call struct {
	e        *Endpoint
	uncached int64 // prompt tokens the endpoint was expected to compute
	// ahead and waiting are the prefill owed before the call when it was
	// sent, in tokens, and the requests the server reported queued: with
	// uncached, what its first token's time is learned against.
	ahead, waiting float64
	at             time.Time // when it was sent
	// stale reports that the cost model was stale when the call was
	// sent: its first token starts the fit again.
	stale    bool
	stream   bool
	critical bool // the request is of class critical
	first    bool // the first token is in
}

// Send counts a call to endpoint i sent at now, whose prompt the endpoint
// must compute uncached tokens of. A streamed call teaches the cost model
// at its first token; a critical one counts, past it, as a stream to keep
// prefill off.
func (p *Pool) Send(i int, uncached int64, stream, critical bool, now time.Time) Call {
	e := p.endpoints[i]
	peers := e.Peers(now)
	before := Counts{Inflight: e.inflight.Load(), Pending: e.pending.Load(), Owed: e.owed.Add(uncached) - uncached}
	tokens, waiting := ahead(before, e.freshLoad(now, p.maxAge), peers, p.MeanPrompt())
	stale := e.costStale(now)
	e.inflight.Add(1)
	e.pending.Add(1)
	return Call{e: e, uncached: uncached, ahead: tokens, waiting: waiting, at: now, stale: stale, stream: stream, critical: critical}
}

// FirstToken ends the call's prefill owed, and teaches the endpoint what
// the first token cost. It reports false, and does nothing, after the
// first time. A plain answer's headers come with its last token, so only
// streams teach.
func (c *Call) FirstToken(now time.Time) bool {
	if c.first {
		return false
	}
	c.first = true
	decoding := c.e.inflight.Load() - c.e.pending.Add(-1) - 1 // the others
	c.e.owed.Add(-c.uncached)
	c.e.gapPrompt.Add(c.uncached * max(decoding, 0))
	if c.critical {
		c.e.critical.Add(1)
	}
	if c.stream {
		if c.stale {
			c.e.forget(c.at)
		}
		c.e.learn(now, now.Sub(c.at), float64(c.uncached), c.ahead, c.waiting)
	}
	return true
}

// Started reports whether the call's first token is in.
func (c *Call) Started() bool { return c.first }

// Gap counts one inter-token gap of the call's stream.
func (c *Call) Gap(d time.Duration) {
	c.e.gapNanos.Add(int64(d))
	c.e.gapStreams.Add(c.e.inflight.Load() - c.e.pending.Load())
	c.e.gaps.Add(1)
}

// Done takes the call off its endpoint's counts. With aim, the step time
// admission holds the endpoint to, it decides the batch limit on the way;
// zero leaves the limit alone.
func (c *Call) Done(aim time.Duration) {
	if !c.first {
		c.e.pending.Add(-1)
		c.e.owed.Add(-c.uncached)
	} else if c.critical {
		c.e.critical.Add(-1)
	}
	n := c.e.inflight.Add(-1)
	if c.stream && c.first {
		c.e.learnDecode()
	}
	c.e.tuneBatch(aim, n+1)
}

// Out reports whether the endpoint should be passed over: its health
// probe fails, or it is ejected.
func (e *Endpoint) Out(now int64) bool {
	return e.down.Load() || e.ejectedUntil.Load() > now
}

// freshLoad is the last scrape if it is no older than maxAge, else nil:
// a scrape too old is unknown, never idle.
func (e *Endpoint) freshLoad(now time.Time, maxAge time.Duration) *Load {
	l := e.load.Load()
	if l == nil || now.Sub(l.At) > maxAge {
		return nil
	}
	return l
}
