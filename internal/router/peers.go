package router

// Loads shared between gateways: every gateway in front of the same pools
// tells the others, every few milliseconds, what it has in flight at each
// endpoint (placement.Load), and adds what they tell it to its own counts
// where it predicts a first token or weighs a stall. Without it each
// gateway sees the others' requests only as the endpoint's scrape shows
// them, up to a scrape interval late and without their sizes: two
// gateways then send long prompts to the same endpoint between scrapes,
// and charge a prompt the stall of half the streams it holds up.

import (
	"sync"
	"time"

	"gitea.mynodes.xyz/ilker/llmgw/internal/router/placement"
)

// peerMaxAge is how long what another gateway said of its load stands
// without a word since. A gateway sends every 10 ms while it has
// requests in flight; a silence this long means it has stopped, or the
// bus has, and its requests are then counted as the scrape shows them.
const peerMaxAge = 250 * time.Millisecond

// peerLoad is what the other gateways have in flight at one endpoint,
// summed, as last heard at at (Unix nanoseconds).
type peerLoad struct {
	loadCounts
	at int64
}

// freshPeers is the other gateways' load at e if it was heard within
// peerMaxAge of now, else zero: a silent peer's count is unknown, and
// the scrape stands in for it.
func (e *endpoint) freshPeers(now time.Time) loadCounts {
	l := e.peers.Load()
	if l == nil || now.UnixNano()-l.at > int64(peerMaxAge) {
		return loadCounts{}
	}
	return l.loadCounts
}

// loadKey names an endpoint across gateways: by its pool's name and its
// own configured name.
type loadKey struct{ pool, endpoint string }

// loadCounts is what is in flight at an endpoint: requests, those without
// a first token, the prefill they owe, and the critical requests past
// their first token.
type loadCounts struct{ inflight, pending, owed, critical int64 }

// peerBook is what every other gateway last said of its load, and the sum
// of it per endpoint. Only the bus's receiver writes it.
type peerBook struct {
	mu   sync.Mutex
	from map[uint64]*peerSaid
	sum  map[loadKey]loadCounts
}

type peerSaid struct {
	at    time.Time
	loads map[loadKey]loadCounts
}

// Loads appends this gateway's load at every endpoint where it has a
// request in flight.
func (r *Router) Loads(buf []placement.Load) []placement.Load {
	s := r.snap.Load()
	if s == nil {
		return buf
	}
	for _, p := range s.pools {
		for _, e := range p.endpoints {
			inflight := e.inflight.Load()
			if inflight <= 0 {
				continue
			}
			// The counts are read one after another while requests come
			// and go; keep them consistent with each other.
			pending := min(max(e.pending.Load(), 0), inflight)
			owed := max(e.owed.Load(), 0)
			if pending == 0 {
				owed = 0
			}
			critical := min(max(e.critical.Load(), 0), inflight-pending)
			buf = append(buf, placement.Load{
				Pool: p.name, Endpoint: e.name, Inflight: inflight, Pending: pending, Owed: owed, Critical: critical,
			})
		}
	}
	return buf
}

// PeerLoads takes the whole load of the gateway whose id is from, in place
// of what it said before, and forgets gateways silent for longer than
// peerMaxAge. Each endpoint whose sum changed, or that from still loads,
// gets the new sum, stamped now.
func (r *Router) PeerLoads(from uint64, loads []placement.Load) {
	r.peerLoads(from, loads, time.Now())
}

func (r *Router) peerLoads(from uint64, loads []placement.Load, now time.Time) {
	b := &r.peers
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.from == nil {
		b.from = make(map[uint64]*peerSaid)
		b.sum = make(map[loadKey]loadCounts)
	}
	touched := make(map[loadKey]bool, len(loads))
	said := b.from[from]
	if said == nil {
		said = &peerSaid{}
		b.from[from] = said
	}
	b.forget(said, touched)
	said.at = now
	said.loads = make(map[loadKey]loadCounts, len(loads))
	for _, l := range loads {
		k := loadKey{l.Pool, l.Endpoint}
		add := loadCounts{l.Inflight, l.Pending, l.Owed, l.Critical}
		said.loads[k] = said.loads[k].plus(add)
		b.sum[k] = b.sum[k].plus(add)
		touched[k] = true
	}
	for id, q := range b.from {
		if now.Sub(q.at) > peerMaxAge {
			b.forget(q, touched)
			delete(b.from, id)
		}
	}

	snap := r.snap.Load()
	if snap == nil {
		return
	}
	for k := range touched {
		s, ok := b.sum[k]
		if ok && s == (loadCounts{}) {
			delete(b.sum, k)
			ok = false
		}
		p := snap.pools[k.pool]
		if p == nil {
			continue
		}
		i := p.endpointNamed(k.endpoint)
		if i < 0 {
			continue
		}
		if !ok {
			p.endpoints[i].peers.Store(nil)
			continue
		}
		p.endpoints[i].peers.Store(&peerLoad{loadCounts: s, at: now.UnixNano()})
	}
}

// forget takes what q said out of the sums, and marks the endpoints it
// named in touched.
func (b *peerBook) forget(q *peerSaid, touched map[loadKey]bool) {
	for k, c := range q.loads {
		b.sum[k] = b.sum[k].plus(loadCounts{-c.inflight, -c.pending, -c.owed, -c.critical})
		touched[k] = true
	}
	q.loads = nil
}

func (c loadCounts) plus(o loadCounts) loadCounts {
	return loadCounts{c.inflight + o.inflight, c.pending + o.pending, c.owed + o.owed, c.critical + o.critical}
}
