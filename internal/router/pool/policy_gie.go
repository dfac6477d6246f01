package pool

// gie: the Gateway API Inference Extension's default scheduling
// profile, its queue, KV-cache and prefix scorers weighted and summed.

import (
	"math"
	"math/bits"
	"time"
)

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
func (p *Pool) pickGIE(rt *Route, c uint64, now time.Time) int {
	var queue, kv [64]float64
	minQ, maxQ := math.Inf(1), math.Inf(-1)
	for m := c; m != 0; m &= m - 1 {
		i := bits.TrailingZeros64(m)
		e := p.endpoints[i]
		queue[i], kv[i] = float64(e.pending.Load()), 1
		if l := e.freshLoad(now, p.maxAge); l != nil {
			if l.Waiting >= 0 {
				queue[i] = l.Waiting
			}
			if l.KVUsage >= 0 {
				kv[i] = l.KVUsage
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
