package placement

// One gateway's side of the sharing: what it tells the others and what it
// believes of them. Placements: what the gateway notes in a pool's prefix
// index goes out through PublishTo, and what the other gateways note
// comes in through Place, so that they route by one index.
//
// Loads: every gateway in front of the same pools tells the others, every
// few milliseconds, what it has in flight at each endpoint (Load), and
// adds what they tell it to its own counts where it predicts a first
// token or weighs a stall. Without it each gateway sees the others'
// requests only as the endpoint's scrape shows them, up to a scrape
// interval late and without their sizes: two gateways then send long
// prompts to the same endpoint between scrapes, and charge a prompt the
// stall of half the streams it holds up.
//
// Whatever can publish on the Redis channel can say anything, so a
// gateway believes of the others no more than one real, fully loaded
// gateway could have at an endpoint (its pool's cap): a record past what
// any one gateway could send is refused, and the sum over the gateways is
// cut to what one could have. What is not believed is counted as the
// scrape shows it, as the load of a gateway that has fallen silent is.

import (
	"math"
	"time"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/admission"
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

// Sharing is one gateway as its bus shares it (Gateway): its pools as the
// catalog in service has them, and the book of what the other gateways
// say they have in flight.
type Sharing struct {
	book  *Book
	pools func() *Pools // the catalog in service's; nil before the first
}

var _ Gateway = (*Sharing)(nil)

// NewSharing shares the pools that pools gives, read at each call: those
// of the catalog in service.
func NewSharing(pools func() *Pools) *Sharing {
	return &Sharing{book: NewBook(pool.PeerMaxAge), pools: pools}
}

// Loads appends this gateway's load at every endpoint where it has a
// request in flight, within what a gateway is believed to have.
func (s *Sharing) Loads(buf []Load) []Load { return s.pools().loads(buf) }

// PeerLoads takes the whole load of the gateway whose id is from, in place
// of what it said before, and forgets gateways silent for longer than
// pool.PeerMaxAge. Each endpoint whose sum changed, or that from still
// loads, gets the new sum, stamped now and cut to its pool's cap.
//
// A record that no one gateway could send (Pools.check) is refused alone,
// and counts as nothing of from's in flight there: the others of its
// message stand, so that a gateway whose catalog or max_body_bytes is not
// quite this one's, as during a rolling change, is still heard at the
// endpoints where it is. A message from a gateway past MaxPeers is
// refused whole.
func (s *Sharing) PeerLoads(from uint64, loads []Load) Refusals {
	return s.take(from, loads, time.Now())
}

// take is PeerLoads at now.
func (s *Sharing) take(from uint64, loads []Load, now time.Time) Refusals {
	ps := s.pools()
	capped := 0
	refused := s.book.Take(from, loads, now, ps.check, func(sum Load) {
		if ps.believe(sum, now) {
			capped++
		}
	})
	refused.Add(RefusedSum, capped)
	return refused
}

// Place notes in a pool's prefix index a placement another gateway made.
// It reports whether the placement named a pool of this gateway's that
// keeps an index, one of its endpoints, and the block size its index
// uses; anything else is ignored.
func (s *Sharing) Place(pl Placement) bool { return s.pools().place(pl) }

// Pools is a gateway's pools as it shares them, made once for each
// catalog: each by name, with the most one gateway can have in flight at
// one of its endpoints (its cap), its requests at most maxPrompt tokens
// each. A nil Pools has none.
type Pools struct {
	byName    map[string]capped // key: pool name
	maxPrompt int64
}

// capped is a pool and its cap.
type capped struct {
	*pool.Pool
	cap pool.Counts
}

// NewPools is pools, by name, as catalog cat routes to them, for requests
// whose bodies are at most maxBody bytes (server.max_body_bytes).
func NewPools(cat *catalog.Catalog, pools map[string]*pool.Pool, maxBody int64) *Pools {
	ps := &Pools{byName: make(map[string]capped, len(pools)), maxPrompt: maxPrompt(maxBody)}
	caps := peerCaps(cat, pools, ps.maxPrompt)
	for name, p := range pools {
		ps.byName[name] = capped{Pool: p, cap: caps[name]}
	}
	return ps
}

// maxPrompt is the most prompt tokens one request can owe an endpoint: the
// router's estimate of the largest body maxBody (server.max_body_bytes)
// lets in, a token for every pool.BytesPerToken bytes. A translated
// request's chat body can be longer than the client's (its JSON escapes
// are not tokens); what Loads says of its prefill is cut to this.
func maxPrompt(maxBody int64) int64 {
	b := max(maxBody, 0)
	return b/pool.BytesPerToken + min(b%pool.BytesPerToken, 1)
}

// mulCap is a×b, or MaxInt64 where that would overflow; a and b are not
// negative.
func mulCap(a, b int64) int64 {
	if a != 0 && b > math.MaxInt64/a {
		return math.MaxInt64
	}
	return a * b
}

// peerCaps is each pool's cap: the most one gateway can have at one of
// its endpoints, its requests at most maxPrompt tokens each. Key: pool.
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
func peerCaps(cat *catalog.Catalog, pools map[string]*pool.Pool, maxPrompt int64) map[string]pool.Counts {
	gated := make(map[string]bool, len(pools))            // key: pool; whether every request reaching it passed a gate
	gates := make(map[string]map[string]bool, len(pools)) // key: pool; value: the pools whose gates let in what can reach it
	for i := range cat.Models() {
		m := &cat.Models()[i]
		chain := []*catalog.Model{m}
		for _, name := range m.Fallbacks {
			if f, ok := cat.Resolve(name); ok {
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
	caps := make(map[string]pool.Counts, len(pools))
	for name := range pools {
		pending := int64(peerMaxInflight)
		if gated[name] {
			n := 0
			for g := range gates[name] {
				if q := pools[g]; q != nil {
					n += len(q.Endpoints())
				}
			}
			pending = min(pending, int64(callsPerRequest*admission.PendingPerEndpoint*n))
		}
		caps[name] = pool.Counts{Inflight: peerMaxInflight, Pending: pending, Owed: mulCap(pending, maxPrompt), Critical: peerMaxInflight}
	}
	return caps
}

// loads appends this gateway's load at every endpoint of ps where it has
// a request in flight, within what check believes of a gateway.
func (ps *Pools) loads(buf []Load) []Load {
	if ps == nil {
		return buf
	}
	for name, p := range ps.byName {
		for _, e := range p.Endpoints() {
			c := e.Counts()
			inflight := min(c.Inflight, peerMaxInflight)
			if inflight <= 0 {
				continue
			}
			// The counts are read one after another while requests come
			// and go; keep them consistent with each other.
			pending := min(max(c.Pending, 0), inflight)
			owed := min(max(c.Owed, 0), mulCap(pending, ps.maxPrompt))
			critical := min(max(c.Critical, 0), inflight-pending)
			buf = append(buf, Load{
				Pool: name, Endpoint: e.Name(), Inflight: inflight, Pending: pending, Owed: owed, Critical: critical,
			})
		}
	}
	return buf
}

// check reports whether one gateway could have sent l for an endpoint of
// ps, with requests of at most maxPrompt tokens, and if not, why. loads
// never says counts it would refuse.
func (ps *Pools) check(l Load) (Refusal, bool) {
	var p capped
	if ps != nil {
		p = ps.byName[l.Pool]
	}
	switch {
	case p.Pool == nil || p.EndpointNamed(l.Endpoint) < 0:
		return RefusedUnknown, false
	case l.Inflight > peerMaxInflight:
		return RefusedInflight, false
	case l.Pending < 0 || l.Critical < 0 || l.Pending > l.Inflight || l.Critical > l.Inflight-l.Pending:
		return RefusedCounts, false
	case l.Owed < 0 || l.Owed > mulCap(l.Pending, ps.maxPrompt):
		return RefusedOwed, false
	}
	return 0, true
}

// believe sets the other gateways' load at sum's endpoint to sum, stamped
// now and cut to its pool's cap, and reports whether it was cut. An
// endpoint ps does not have is left alone.
func (ps *Pools) believe(sum Load, now time.Time) (cut bool) {
	if ps == nil {
		return false
	}
	p := ps.byName[sum.Pool]
	if p.Pool == nil {
		return false
	}
	i := p.EndpointNamed(sum.Endpoint)
	if i < 0 {
		return false
	}
	c := pool.Counts{Inflight: sum.Inflight, Pending: sum.Pending, Owed: sum.Owed, Critical: sum.Critical}
	if w := within(c, p.cap); w != c {
		cut, c = true, w
	}
	p.Endpoints()[i].SetPeers(c, now)
	return cut
}

// within is c with each count cut to limit's.
func within(c, limit pool.Counts) pool.Counts {
	return pool.Counts{Inflight: min(c.Inflight, limit.Inflight), Pending: min(c.Pending, limit.Pending), Owed: min(c.Owed, limit.Owed), Critical: min(c.Critical, limit.Critical)}
}

// place notes pl in its pool's prefix index (Sharing.Place).
func (ps *Pools) place(pl Placement) bool {
	if ps == nil {
		return false
	}
	p := ps.byName[pl.Pool]
	if p.Pool == nil || !p.Indexed() {
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

// PublishTo is what tells the other gateways, through to, the placements
// the calls to the pool named name, p, make in its prefix index.
func PublishTo(to interface{ Publish(Placement) }, name string, p *pool.Pool) pool.PlaceFunc {
	return func(i, block int, hashes []uint64, drop bool) {
		to.Publish(Placement{Pool: name, Endpoint: p.Endpoints()[i].Name(), Block: block, Drop: drop, Hashes: hashes})
	}
}
