package pool

// The routing policies: given a request and the endpoints a pool may send
// it to, which one. round_robin, least_request, prefix, gie and sglang are
// the common policies and two published routers' defaults, re-implemented
// faithfully so that they can be compared through the same gateway; auto
// is llmgw's own. docs/ROUTING.md explains each and its constants. Each
// policy is in a file of its own (policy_*.go); here are the reasons they
// give, and what more than one of them uses.

import "math/bits"

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
	reasonEvict        = "spare_cache"    // auto: slower to a first token, where the prompt pushes fewer prefixes out of the cache
	ReasonLastResort   = "last_resort"    // every endpoint was out; one was tried anyway
	ReasonEPP          = "epp"            // epp: where the Endpoint Picker said
)

// Reasons is every reason a pick may give.
var Reasons = []string{reasonTurn, reasonLeastRequest, reasonPrefixHit, reasonNoPrefix, reasonScore,
	reasonImbalanced, reasonSmallest, reasonFastest, reasonPrefix, reasonCold, reasonCacheKey, reasonSpare, reasonStreams, reasonEvict, ReasonLastResort, ReasonEPP}

// rotation is where a scan over the endpoints starts, moving on with each
// pick, so that ties fall to each endpoint in turn.
func (p *Pool) rotation() int {
	return int(p.next.Add(1) % uint64(len(p.endpoints)))
}

// rendezvous is the candidate in c that rendezvous hashing ranks first
// for key; -1 when c is empty. Taking a candidate out moves only the keys
// it ranked first, each to its next.
func (p *Pool) rendezvous(key uint64, c uint64) int {
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
