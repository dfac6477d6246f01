package router

// Placements shared between gateways: what this gateway notes in a pool's
// prefix index goes out through Options.Placements, and what the other
// gateways note comes in through Place, so that gateways in front of the
// same pools route by one index. The bus is in internal/router/placement.

import (
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/placement"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/pool"
)

// notePlaced notes in rt's index that endpoint i of p was sent hashes
// (or, with drop, does not hold them), and tells the other gateways.
func (r *Router) notePlaced(p *servedPool, i int, rt *pool.Route, hashes []uint64, drop bool) {
	if drop {
		rt.Index().Drop(hashes, i)
	} else {
		rt.Index().Promise(hashes, i)
	}
	if r.opts.Placements != nil {
		r.opts.Placements.Publish(placement.Placement{
			Pool: p.name, Endpoint: p.Endpoints()[i].Name(), Block: rt.Index().Block(), Drop: drop, Hashes: hashes,
		})
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

// endpointNamed is the index of p's endpoint named name, or -1.
func (p *servedPool) endpointNamed(name string) int {
	for i, e := range p.Endpoints() {
		if e.Name() == name {
			return i
		}
	}
	return -1
}
