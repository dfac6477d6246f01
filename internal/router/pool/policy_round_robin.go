package pool

// round_robin: endpoints in turn, each as often as its weight.

// pickRoundRobin is the next candidate in weighted turn.
func (p *Pool) pickRoundRobin(c uint64) int {
	n := len(p.order)
	start := int(p.next.Add(1) % uint64(n))
	for k := range n {
		if i := p.order[(start+k)%n]; c&(1<<i) != 0 {
			return i
		}
	}
	return -1
}
