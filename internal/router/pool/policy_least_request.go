package pool

// least_request: the endpoint with the fewest requests in flight for its
// weight.

import (
	"math"
)

// pickLeastRequest is the candidate with the fewest requests in flight for
// its weight.
func (p *Pool) pickLeastRequest(c uint64) int {
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
