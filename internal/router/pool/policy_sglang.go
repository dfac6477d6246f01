package pool

// sglang: SGLang's cache-aware load balancer.

import (
	"math"
	"math/bits"
)

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
func (p *Pool) pickSGLang(rt *Route, c uint64) (int, string) {
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
