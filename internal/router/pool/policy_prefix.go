package pool

// prefix: the endpoint holding the longest prefix of the prompt, whatever
// its load.

// pickPrefix is the candidate holding the longest prefix of the prompt,
// whatever its load: prefix affinity alone. With nothing cached anywhere
// it takes endpoints in turn. A request that sent a prompt_cache_key goes
// where rendezvous hashing places its key among the candidates, prefixes
// aside: every request with the key goes to one endpoint while that is a
// candidate, and so finds there what the key's earlier requests left.
func (p *Pool) pickPrefix(rt *Route, c uint64) (int, string) {
	if rt.Key != 0 {
		return p.rendezvous(rt.Key, c), reasonCacheKey
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
