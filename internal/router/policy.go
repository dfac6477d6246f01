package router

// The routing policies: given a request and the endpoints a pool may send
// it to, which one. round_robin, least_request, prefix, gie and sglang are
// the common policies and two published routers' defaults, re-implemented
// faithfully so that they can be compared through the same gateway; auto
// is llmgw's own. docs/ROUTING.md explains each and its constants.

import (
	"math"
	"math/bits"
	"time"
)

// Reasons a policy gives for a pick: the reason label of
// llmgw_route_decisions_total.
const (
	reasonTurn         = "turn"           // round_robin: the next in turn
	reasonLeastRequest = "least_request"  // the fewest requests in flight
	reasonPrefixHit    = "prefix_hit"     // prefix, sglang: the longest cached prefix
	reasonNoPrefix     = "no_prefix"      // prefix: nothing cached anywhere; in turn
	reasonScore        = "score"          // gie: the best weighted score
	reasonImbalanced   = "imbalanced"     // sglang: load too uneven; the least loaded
	reasonSmallest     = "smallest_cache" // sglang: too little cached; the emptiest cache
	reasonFastest      = "fastest"        // auto: the least predicted TTFT
	reasonPrefix       = "prefix"         // auto: a cached prefix worth waiting for
	reasonCold         = "cold"           // auto: among near ties, placed by the conversation's first block not cached, or its prompt_cache_key
	reasonCacheKey     = "cache_key"      // prefix: where the request's prompt_cache_key is placed
	reasonSpare        = "spare_critical" // auto: a long prefill kept off the endpoint critical streams decode on
	reasonStreams      = "spare_streams"  // auto: slower to a first token, for the requests a prefill would stall elsewhere
	reasonLastResort   = "last_resort"    // every endpoint was out; one was tried anyway
)

// pickRoundRobin is the next candidate in weighted turn.
func (p *pool) pickRoundRobin(c uint64) int {
	n := len(p.order)
	start := int(p.next.Add(1) % uint64(n))
	for k := range n {
		if i := p.order[(start+k)%n]; c&(1<<i) != 0 {
			return i
		}
	}
	return -1
}

// rotation is where a scan over the endpoints starts, moving on with each
// pick, so that ties fall to each endpoint in turn.
func (p *pool) rotation() int {
	return int(p.next.Add(1) % uint64(len(p.endpoints)))
}

// pickLeastRequest is the candidate with the fewest requests in flight for
// its weight.
func (p *pool) pickLeastRequest(c uint64) int {
	best, bestLoad := -1, math.Inf(1)
	n, start := len(p.endpoints), p.rotation()
	for k := range n {
		i := (start + k) % n
		if c&(1<<i) == 0 {
			continue
		}
		if load := float64(p.endpoints[i].inflight.Load()) / float64(p.weight[i]); load < bestLoad {
			best, bestLoad = i, load
		}
	}
	return best
}

// pickPrefix is the candidate holding the longest prefix of the prompt,
// whatever its load: prefix affinity alone. With nothing cached anywhere
// it takes endpoints in turn. A request that sent a prompt_cache_key goes
// where rendezvous hashing places its key among the candidates, prefixes
// aside: every request with the key goes to one endpoint while that is a
// candidate, and so finds there what the key's earlier requests left.
func (p *pool) pickPrefix(rt *route, c uint64) (int, string) {
	if rt.key != 0 {
		return p.rendezvous(rt.key, c), reasonCacheKey
	}
	best, most := -1, int32(-1)
	n, start := len(p.endpoints), p.rotation()
	for k := range n {
		i := (start + k) % n
		if c&(1<<i) != 0 && rt.matched[i] > most {
			best, most = i, rt.matched[i]
		}
	}
	if most <= 0 {
		return best, reasonNoPrefix
	}
	return best, reasonPrefixHit
}

// The Gateway API Inference Extension's default scorer weights: queue
// depth 2, KV-cache use 2, prefix cache 3.
const (
	gieQueueWeight  = 2
	gieKVWeight     = 2
	giePrefixWeight = 3
)

// pickGIE scores candidates as the Inference Extension's default
// scheduling profile does, each scorer between 0 and 1: the queue scorer
// min-max normalized over the candidates (1 for the shortest queue), the
// KV-cache scorer 1 minus the share in use, the prefix scorer the share
// of the prompt's blocks the endpoint holds. The best weighted sum wins;
// ties fall in turn. Where a scrape is missing or stale, the queue is this
// gateway's own requests waiting for a first token and the cache counts
// as full.
func (p *pool) pickGIE(rt *route, c uint64, now time.Time) int {
	var queue, kv [64]float64
	minQ, maxQ := math.Inf(1), math.Inf(-1)
	for m := c; m != 0; m &= m - 1 {
		i := bits.TrailingZeros64(m)
		e := p.endpoints[i]
		queue[i], kv[i] = float64(e.pending.Load()), 1
		if l := e.freshLoad(now, p.maxAge); l != nil {
			if l.waiting >= 0 {
				queue[i] = l.waiting
			}
			if l.kvUsage >= 0 {
				kv[i] = l.kvUsage
			}
		}
		minQ, maxQ = min(minQ, queue[i]), max(maxQ, queue[i])
	}
	best, bestScore := -1, math.Inf(-1)
	n, start := len(p.endpoints), p.rotation()
	for k := range n {
		i := (start + k) % n
		if c&(1<<i) == 0 {
			continue
		}
		q := 1.0
		if maxQ > minQ {
			q = (maxQ - queue[i]) / (maxQ - minQ)
		}
		prefix := 0.0
		if len(rt.hashes) > 0 {
			prefix = float64(rt.matched[i]) / float64(len(rt.hashes))
		}
		if s := gieQueueWeight*q + gieKVWeight*(1-kv[i]) + giePrefixWeight*prefix; s > bestScore {
			best, bestScore = i, s
		}
	}
	return best
}

// SGLang's cache-aware load balancer's defaults.
const (
	// sglangCacheThreshold is the share of a prompt that must be cached on
	// an endpoint for the balancer to send it there.
	sglangCacheThreshold = 0.3
	// Load is unbalanced when the most loaded endpoint has more than
	// sglangBalanceAbs requests over the least loaded, and more than
	// sglangBalanceRel times as many.
	sglangBalanceAbs = 64
	sglangBalanceRel = 1.5
)

// pickSGLang is SGLang's cache-aware load balancer: when load is
// unbalanced, the least loaded endpoint; otherwise the endpoint holding
// the longest prefix when it covers more than sglangCacheThreshold of the
// prompt, else the endpoint whose cache holds the least. Load is requests
// in flight, as the balancer counts its own.
func (p *pool) pickSGLang(rt *route, c uint64) (int, string) {
	minLoad, maxLoad := int64(math.MaxInt64), int64(-1)
	for m := c; m != 0; m &= m - 1 {
		l := p.endpoints[bits.TrailingZeros64(m)].inflight.Load()
		minLoad, maxLoad = min(minLoad, l), max(maxLoad, l)
	}
	if maxLoad-minLoad > sglangBalanceAbs && float64(maxLoad) > sglangBalanceRel*float64(minLoad) {
		return p.pickLeastRequest(c), reasonImbalanced
	}
	best, most := p.pickPrefix(rt, c)
	if most == reasonPrefixHit && rt.promptBytes > 0 &&
		float64(rt.matched[best])*float64(rt.index.block)/float64(rt.promptBytes) > sglangCacheThreshold {
		return best, reasonPrefixHit
	}
	var held [64]int32
	rt.index.sizes(&held)
	best, smallest := -1, int32(math.MaxInt32)
	n, start := len(p.endpoints), p.rotation()
	for k := range n {
		i := (start + k) % n
		if c&(1<<i) == 0 {
			continue
		}
		if s := held[i]; s < smallest {
			best, smallest = i, s
		}
	}
	return best, reasonSmallest
}

// auto's constants; docs/ROUTING.md gives the reasoning behind each.
const (
	// cacheCredit is what a second of prefill saved by a cached prefix is
	// worth against a second more of waiting for this request: the work
	// saved is capacity every request behind it gets back, and a prefix
	// computed a second time somewhere else takes cache from other
	// prefixes there. At 1 an overloaded pool scatters its conversations
	// and computes more (docs/ROUTING.md).
	cacheCredit = 4.0
	// sloShare is the share of what is left of the request's TTFT SLO an
	// endpoint's predicted TTFT may reach and still be chosen over a
	// faster one: a prediction is a typical wait, and the SLO bounds the
	// 99th percentile, which runs about twice the typical wait under load.
	sloShare = 0.5
	// tieShare and tieFloor make predictions a near tie: within a tenth,
	// or 5 ms, of the best. Near ties go to the endpoint rendezvous
	// hashing ranks first for the prompt's place key (route.placeKey), so
	// that gateways that see different traffic still agree on where a
	// conversation goes.
	tieShare = 0.1
	tieFloor = 0.005
	// spareShare is the share of critical's TPOT SLO that a request below
	// critical may stall the streams on an endpoint by, with its prefill,
	// when critical streams decode there and another candidate has none:
	// a stall of one TPOT adds a TPOT to one gap, which even a 16-token
	// answer spreads to a sixteenth of its mean. Half held critical no
	// better and cost more goodput (docs/ROUTING.md).
	spareShare = 1.0
)

// pickAuto predicts each candidate's time to first token for this request,
// from the prefill it owes and the part of this prompt it does not hold,
// and takes the candidate with the least prediction less the prefill its
// cached prefix saves (weighted by cacheCredit), plus the stall its
// prefill would give the requests in flight there, each of which decodes
// while it runs (weighted by rt.stall),
// among those predicted to meet sloShare of the request's TTFT SLO (all
// of it while the stall is charged) when any is. A request below
// critical passes over endpoints where critical streams decode when its
// prefill would stall them past spareShare of critical's TPOT SLO and
// another candidate qualifies. Near ties go by rendezvous hashing of the
// prompt's place key. The chosen candidate's prediction is left in
// rt.predicted, for hedging to wait by.
func (p *pool) pickAuto(rt *route, c uint64, now time.Time) (int, string) {
	var pred, score [64]float64
	meanPrompt := p.meanPromptTokens()
	fastest := math.Inf(1)
	for m := c; m != 0; m &= m - 1 {
		i := bits.TrailingZeros64(m)
		e := p.endpoints[i]
		uncached := rt.uncachedBelieved(i, e.Precision())
		peers := e.Peers(now)
		pred[i] = e.predictTTFT(uncached, e.freshLoad(now, p.maxAge), peers, meanPrompt)
		_, perToken := e.firstTokenCost()
		score[i] = pred[i] - cacheCredit*perToken*float64(rt.prompt-uncached)
		if rt.stall > 0 {
			// Every request there waits out this prefill: those
			// decoding now, and those still owed a prefill, as a server
			// computes prompts first come, first served and they decode
			// while this one's runs.
			requests := e.inflight.Load() + peers.inflight
			score[i] += rt.stall * perToken * float64(uncached) * float64(max(requests, 0))
		}
		fastest = min(fastest, pred[i])
	}
	// Within the SLO's share when any candidate is; otherwise every
	// candidate, and the least score is still the best bet.
	eligible := c
	if rt.slo > 0 {
		var within uint64
		share := sloShare
		if rt.stall > 0 {
			// TPOT is the nearer to breaking: the margin kept for the
			// first token's tail goes to the streams, short of the SLO.
			share = 1
		}
		for m := c; m != 0; m &= m - 1 {
			if i := bits.TrailingZeros64(m); pred[i] <= share*rt.slo {
				within |= 1 << i
			}
		}
		if within != 0 {
			eligible = within
		}
	}
	best, bestScore := leastScore(eligible, &score)
	spared := false
	if rt.spare > 0 {
		// A request below critical keeps its prefill off endpoints where
		// critical streams decode, unless it is short there, while some
		// candidate qualifies.
		var clear uint64
		for m := eligible; m != 0; m &= m - 1 {
			i := bits.TrailingZeros64(m)
			e := p.endpoints[i]
			if e.critical.Load()+e.Peers(now).critical == 0 || p.stall(rt, i) <= spareShare*rt.spare {
				clear |= 1 << i
			}
		}
		if clear != 0 && clear != eligible {
			eligible = clear
			if clear&(1<<best) == 0 {
				spared = true
				best, bestScore = leastScore(eligible, &score)
			}
		}
	}
	// Among near ties, rendezvous hashing decides; a prompt shorter than
	// a block, without a prompt_cache_key, has nothing to place it by.
	chosen := best
	if first := rt.placeKey(); first != 0 {
		tie := max(tieShare*math.Abs(bestScore), tieFloor)
		var ties uint64
		for m := eligible; m != 0; m &= m - 1 {
			if i := bits.TrailingZeros64(m); score[i] <= bestScore+tie {
				ties |= 1 << i
			}
		}
		if i := p.rendezvous(first, ties); i >= 0 {
			chosen = i
		}
	}
	rt.predicted = pred[chosen]
	switch {
	case spared:
		return chosen, reasonSpare
	case rt.matched[chosen] > 0 && pred[chosen] > fastest:
		return chosen, reasonPrefix
	case chosen != best:
		return chosen, reasonCold
	case pred[chosen] > fastest:
		return chosen, reasonStreams
	}
	return chosen, reasonFastest
}

// rendezvous is the candidate in c that rendezvous hashing ranks first
// for key; -1 when c is empty. Taking a candidate out moves only the keys
// it ranked first, each to its next.
func (p *pool) rendezvous(key uint64, c uint64) int {
	best := -1
	var rank uint64
	for m := c; m != 0; m &= m - 1 {
		i := bits.TrailingZeros64(m)
		if r := mix(key ^ p.endpoints[i].id); best < 0 || r >= rank {
			best, rank = i, r
		}
	}
	return best
}

// stall is how long rt's prefill would hold up the streams decoding on
// endpoint i, in seconds.
func (p *pool) stall(rt *route, i int) float64 {
	_, perToken := p.endpoints[i].firstTokenCost()
	return perToken * float64(rt.uncached(i))
}

// leastScore is the candidate in c with the least score, and its score.
func leastScore(c uint64, score *[64]float64) (int, float64) {
	best, bestScore := -1, math.Inf(1)
	for m := c; m != 0; m &= m - 1 {
		if i := bits.TrailingZeros64(m); score[i] < bestScore {
			best, bestScore = i, score[i]
		}
	}
	return best, bestScore
}

// uncachedBelieved is uncached with endpoint i's held prefix discounted by
// precision: the share of its predicted hits its answers have confirmed.
func (rt *route) uncachedBelieved(i int, precision float64) int64 {
	if precision >= 1 {
		return rt.uncached(i)
	}
	full, cached := rt.prompt, rt.prompt-rt.uncached(i)
	return full - int64(float64(cached)*precision)
}
