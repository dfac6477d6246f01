package pool

// An endpoint as routing sees it, by concern: its load, by what llmgw
// tracks of the requests it sent there, which is never stale, and by
// what its /metrics said last, believed only while fresh; the other
// gateways' load there; its health; and what it has learned of its
// first tokens, its steps and its prefix cache.

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

	// What routing knows of it, by concern; each is written by its own
	// files, and read together by the policies (State).
	loadSignals // this gateway's calls in flight there, and its last scrape
	peerSignals // the other gateways' calls in flight there
	health      // its health probe and passive ejection (eject.go)
	costModel   // the learned cost of a first token (cost.go)
	stepModel   // its step time: the streams' gaps, decode model and batch limit (decode.go, batch.go)
	prefixHits  // how far its answers confirm the prefixes predicted there (prefix.go)
}

// loadSignals is what is in flight at an endpoint: what llmgw tracks of
// the requests it sent there, which is never stale, and what the
// endpoint's /metrics said last, which is believed only while fresh.
type loadSignals struct {
	inflight atomic.Int64 // requests sent and not ended
	pending  atomic.Int64 // of those, requests not yet at their first token
	owed     atomic.Int64 // uncached prompt tokens of the pending requests: the prefill owed
	critical atomic.Int64 // critical requests past their first token: streams to keep prefill off

	// scrape is the last scrape of the endpoint's /metrics; nil before
	// the first.
	scrape atomic.Pointer[Load]
	// models is what the endpoint's server last said it has loaded; nil
	// before it said, and always on a server that does not say (loaded.go).
	models atomic.Pointer[loadedModels]
}

// peerSignals is what the other gateways have in flight at an endpoint.
type peerSignals struct {
	// peers is what they last said; nil when none has anything
	// (SetPeers).
	peers atomic.Pointer[peerLoad]
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
func (s *peerSignals) Peers(now time.Time) Counts {
	l := s.peers.Load()
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
func (l *loadSignals) Counts() Counts {
	return Counts{l.inflight.Load(), l.pending.Load(), l.owed.Load(), l.critical.Load()}
}

// SetLoad takes a scrape of the endpoint's /metrics: requests waiting and
// the share of its KV cache in use, negative where it exports none.
func (l *loadSignals) SetLoad(waiting, kvUsage float64, at time.Time) {
	l.scrape.Store(&Load{Waiting: waiting, KVUsage: kvUsage, At: at, inflight: l.inflight.Load()})
}

// SetDown takes a health probe's verdict, and reports whether the
// endpoint was down before it.
func (h *health) SetDown(down bool) (was bool) { return h.down.Swap(down) }

// Down reports whether the endpoint's last health probe failed.
func (h *health) Down() bool { return h.down.Load() }

// SetPeers takes what the other gateways have in flight at the endpoint,
// summed, as heard at now; all zero forgets it.
func (s *peerSignals) SetPeers(c Counts, now time.Time) {
	if c == (Counts{}) {
		s.peers.Store(nil)
		return
	}
	s.peers.Store(&peerLoad{Counts: c, at: now.UnixNano()})
}

// Out reports whether the endpoint should be passed over: its health
// probe fails, it is ejected, or cooled down.
func (h *health) Out(now int64) bool {
	return h.down.Load() || h.ejectedUntil.Load() > now || h.cooledUntil.Load() > now
}

// freshLoad is the last scrape if it is no older than maxAge, else nil:
// a scrape too old is unknown, never idle.
func (s *loadSignals) freshLoad(now time.Time, maxAge time.Duration) *Load {
	l := s.scrape.Load()
	if l == nil || now.Sub(l.At) > maxAge {
		return nil
	}
	return l
}
