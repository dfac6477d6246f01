package router

// What gateways in front of the same pools share, so that they route as
// one. Placements: what this gateway notes in a pool's prefix index goes
// out through Options.Placements, and what the other gateways note comes
// in through Place, so that they route by one index. The bus is in
// internal/router/placement.
//
// Loads: every gateway in front of the same pools tells the others, every
// few milliseconds, what it has in flight at each endpoint
// (placement.Load), and adds what they tell it to its own counts where it
// predicts a first token or weighs a stall. Without it each
// gateway sees the others' requests only as the endpoint's scrape shows
// them, up to a scrape interval late and without their sizes: two
// gateways then send long prompts to the same endpoint between scrapes,
// and charge a prompt the stall of half the streams it holds up.
//
// Whatever can publish on the Redis channel can say anything, so a
// gateway believes of the others no more than one real, fully loaded
// gateway could have at an endpoint (peerCap): a record past what any one
// gateway could send is refused, and the sum over the gateways is cut to
// what one could have. What is not believed is counted as the scrape
// shows it, as the load of a gateway that has fallen silent is.

import (
	"math"
	"time"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/admission"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/placement"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/pool"
)

const (
	// peerMaxInflight is the most requests one gateway can have in flight
	// at one endpoint: each has a connection to it of its own (upstream
	// calls are HTTP/1.1, one request at a time on a connection), and one
	// gateway's connections to one address differ by their source port
	// alone, of which there are 65,535 (28,232 in Linux's default
	// ephemeral range).
	peerMaxInflight = 1<<16 - 1

	// callsPerRequest is the most calls one request has waiting for a
	// first token at once: its own, and a hedge.
	callsPerRequest = 2
)

// maxPrompt is the most prompt tokens one request can owe an endpoint: the
// estimate of the largest body maxBody (server.max_body_bytes) lets in
// (estimatePrompt). A translated request's chat body can be longer than
// the client's (its JSON escapes are not tokens); what Loads says of its
// prefill is cut to this.
func maxPrompt(maxBody int64) int64 {
	b := max(maxBody, 0)
	return b/bytesPerToken + min(b%bytesPerToken, 1)
}

// mulCap is a×b, or MaxInt64 where that would overflow; a and b are not
// negative.
func mulCap(a, b int64) int64 {
	if a != 0 && b > math.MaxInt64/a {
		return math.MaxInt64
	}
	return a * b
}

// setPeerCaps sets each pool's peerCap: the most one gateway can have at
// one of its endpoints, its requests at most maxPrompt tokens each.
//
// In flight: peerMaxInflight. Owed: maxPrompt for each pending request.
// Pending: as many as in flight, unless every request that can reach the
// pool has passed an admission gate — every model on the pool, and every
// model with a fallback on it, enables admission, as do all their
// fallbacks. A gate lets admission.PendingPerEndpoint requests for each
// endpoint of its pool start at once, each with at most callsPerRequest
// calls waiting for a first token; so a gateway has at most that, over
// the endpoints of every gate whose requests can reach the pool, pending
// there. (A gate whose endpoints are all out lets requests through, to
// be tried anyway; then a real gateway can have more, and the scrape
// counts what the cut sum leaves out.)
func (s *snapshot) setPeerCaps(maxPrompt int64) {
	gated := make(map[string]bool, len(s.pools))            // key: pool; whether every request reaching it passed a gate
	gates := make(map[string]map[string]bool, len(s.pools)) // key: pool; value: the pools whose gates let in what can reach it
	for i := range s.cat.Models() {
		m := &s.cat.Models()[i]
		chain := []*catalog.Model{m}
		for _, name := range m.Fallbacks {
			if f, ok := s.cat.Resolve(name); ok {
				chain = append(chain, f)
			}
		}
		all := true
		for _, c := range chain {
			all = all && c.Admission.Enabled
		}
		for _, c := range chain {
			if _, seen := gated[c.Pool]; !seen {
				gated[c.Pool] = true
				gates[c.Pool] = make(map[string]bool)
			}
			gated[c.Pool] = gated[c.Pool] && all
			for _, d := range chain {
				gates[c.Pool][d.Pool] = true
			}
		}
	}
	for name, p := range s.pools {
		pending := int64(peerMaxInflight)
		if gated[name] {
			n := 0
			for g := range gates[name] {
				if q := s.pools[g]; q != nil {
					n += len(q.Endpoints())
				}
			}
			pending = min(pending, int64(callsPerRequest*admission.PendingPerEndpoint*n))
		}
		p.peerCap = pool.Counts{Inflight: peerMaxInflight, Pending: pending, Owed: mulCap(pending, maxPrompt), Critical: peerMaxInflight}
	}
}

// Loads appends this gateway's load at every endpoint where it has a
// request in flight, within what checkLoad believes of a gateway.
func (r *Router) Loads(buf []placement.Load) []placement.Load {
	s := r.snap.Load()
	if s == nil {
		return buf
	}
	maxPrompt := maxPrompt(r.opts.Server.MaxBodyBytes)
	for _, p := range s.pools {
		for _, e := range p.Endpoints() {
			c := e.Counts()
			inflight := min(c.Inflight, peerMaxInflight)
			if inflight <= 0 {
				continue
			}
			// The counts are read one after another while requests come
			// and go; keep them consistent with each other.
			pending := min(max(c.Pending, 0), inflight)
			owed := min(max(c.Owed, 0), mulCap(pending, maxPrompt))
			critical := min(max(c.Critical, 0), inflight-pending)
			buf = append(buf, placement.Load{
				Pool: p.name, Endpoint: e.Name(), Inflight: inflight, Pending: pending, Owed: owed, Critical: critical,
			})
		}
	}
	return buf
}

// PeerLoads takes the whole load of the gateway whose id is from, in place
// of what it said before, and forgets gateways silent for longer than
// peerMaxAge. Each endpoint whose sum changed, or that from still loads,
// gets the new sum, stamped now and cut to the pool's peerCap.
//
// A record that no one gateway could send (checkLoad) is refused alone,
// and counts as nothing of from's in flight there: the others of its
// message stand, so that a gateway whose catalog or max_body_bytes is not
// quite this one's, as during a rolling change, is still heard at the
// endpoints where it is. A message from a gateway past maxPeers is
// refused whole.
func (r *Router) PeerLoads(from uint64, loads []placement.Load) placement.Refusals {
	return peerLoads(r.peers, r.snap.Load(), maxPrompt(r.opts.Server.MaxBodyBytes), from, loads, time.Now())
}

// peerLoads is PeerLoads at now, into book, for the pools of snap (nil
// before the first catalog) whose requests are at most maxPrompt tokens.
func peerLoads(book *placement.Book, snap *snapshot, maxPrompt int64, from uint64, loads []placement.Load, now time.Time) placement.Refusals {
	check := func(l placement.Load) (placement.Refusal, bool) {
		var p *servedPool
		if snap != nil {
			p = snap.pools[l.Pool]
		}
		return checkLoad(p, l, maxPrompt)
	}
	capped := 0
	refused := book.Take(from, loads, now, check, func(sum placement.Load) {
		if snap == nil {
			return
		}
		p := snap.pools[sum.Pool]
		if p == nil {
			return
		}
		i := p.EndpointNamed(sum.Endpoint)
		if i < 0 {
			return
		}
		s := pool.Counts{Inflight: sum.Inflight, Pending: sum.Pending, Owed: sum.Owed, Critical: sum.Critical}
		if c := within(s, p.peerCap); c != s {
			capped++
			s = c
		}
		p.Endpoints()[i].SetPeers(s, now)
	})
	refused.Add(placement.RefusedSum, capped)
	return refused
}

// checkLoad reports whether one gateway could have sent l for an endpoint
// of p, with requests of at most maxPrompt tokens, and if not, why.
// Loads never sends counts it would refuse.
func checkLoad(p *servedPool, l placement.Load, maxPrompt int64) (placement.Refusal, bool) {
	switch {
	case p == nil || p.EndpointNamed(l.Endpoint) < 0:
		return placement.RefusedUnknown, false
	case l.Inflight > peerMaxInflight:
		return placement.RefusedInflight, false
	case l.Pending < 0 || l.Critical < 0 || l.Pending > l.Inflight || l.Critical > l.Inflight-l.Pending:
		return placement.RefusedCounts, false
	case l.Owed < 0 || l.Owed > mulCap(l.Pending, maxPrompt):
		return placement.RefusedOwed, false
	}
	return 0, true
}

// within is c with each count cut to limit's.
func within(c, limit pool.Counts) pool.Counts {
	return pool.Counts{Inflight: min(c.Inflight, limit.Inflight), Pending: min(c.Pending, limit.Pending), Owed: min(c.Owed, limit.Owed), Critical: min(c.Critical, limit.Critical)}
}

// publishTo is what tells the other gateways, over to, the placements
// p's calls make in its prefix index.
func publishTo(to Placements, p *servedPool) pool.PlaceFunc {
	return func(i, block int, hashes []uint64, drop bool) {
		to.Publish(placement.Placement{Pool: p.name, Endpoint: p.Endpoints()[i].Name(), Block: block, Drop: drop, Hashes: hashes})
	}
}

// Place notes in a pool's prefix index a placement another gateway made.
// It reports whether the placement named a pool of this gateway's that
// keeps an index, one of its endpoints, and the block size its index
// uses; anything else is ignored.
func (r *Router) Place(pl placement.Placement) bool {
	s := r.snap.Load()
	if s == nil {
		return false
	}
	p := s.pools[pl.Pool]
	if p == nil || !p.Indexed() {
		return false
	}
	x := p.Index()
	if x.Block() != pl.Block {
		return false
	}
	i := p.EndpointNamed(pl.Endpoint)
	if i < 0 {
		return false
	}
	hashes := pl.Hashes[:min(len(pl.Hashes), pool.MaxPrefixBlocks)]
	if pl.Drop {
		x.Drop(hashes, i)
	} else {
		x.Add(hashes, i) // computed: no first token of it comes here to say so
	}
	return true
}
