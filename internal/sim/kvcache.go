// The KV cache in blocks and the prefix cache over it: how many blocks a
// sequence holds, which prompt blocks can be shared, and which cached
// blocks are evicted when space is needed.

package sim

import "container/list"

// kvCache is a replica's KV cache, counted in blocks. A running sequence
// holds blocks for its whole prompt and output from admission on, so it is
// never preempted. Full prompt blocks, once prefilled, join the prefix
// cache under a chained hash of their tokens; a later prompt that starts
// with the same tokens shares them instead of prefilling again. When no
// sequence holds a cached block it stays cached but evictable, oldest
// first. kvCache is not safe for concurrent use: the engine's mutex guards
// it.
type kvCache struct {
	blockSize int
	total     int // capacity in blocks

	private int                     // blocks held by sequences outside the prefix cache
	cached  map[uint64]*cachedBlock // key: chained hash of a block's tokens and every block before it
	lru     list.List               // of *cachedBlock no sequence holds, least recently released first
}

// cachedBlock is one block in the prefix cache.
type cachedBlock struct {
	hash uint64
	refs int           // sequences holding it
	elem *list.Element // its place in lru while refs is 0, else nil
}

func newKVCache(blockSize, total int) *kvCache {
	return &kvCache{blockSize: blockSize, total: total, cached: make(map[uint64]*cachedBlock)}
}

// free is how many blocks hold nothing at all.
func (k *kvCache) free() int { return k.total - k.private - len(k.cached) }

// used is how many blocks running sequences hold.
func (k *kvCache) used() int { return k.private + len(k.cached) - k.lru.Len() }

// capacity is the cache's size in blocks.
func (k *kvCache) capacity() int { return k.total }

// blocksFor is how many blocks n tokens fill.
func (k *kvCache) blocksFor(n int) int { return (n + k.blockSize - 1) / k.blockSize }

// match is how many of a prompt's leading full blocks are cached, at most
// limit.
func (k *kvCache) match(hashes []uint64, limit int) int {
	n := 0
	for n < len(hashes) && n < limit {
		if _, ok := k.cached[hashes[n]]; !ok {
			break
		}
		n++
	}
	return n
}

// allocate gives s its blocks: the first hit of its prompt blocks from the
// prefix cache, and need-hit new ones, evicting unheld cached blocks if it
// must. It reports false, changing nothing, when they do not fit.
func (k *kvCache) allocate(s *seq, hit, need int) bool {
	reused := 0 // hit blocks that are unheld, so already counted as evictable
	for _, h := range s.hashes[:hit] {
		if k.cached[h].refs == 0 {
			reused++
		}
	}
	fresh := need - hit
	if k.free()+k.lru.Len()-reused < fresh {
		return false
	}
	for _, h := range s.hashes[:hit] {
		b := k.cached[h]
		if b.refs == 0 {
			k.lru.Remove(b.elem)
			b.elem = nil
		}
		b.refs++
		s.held = append(s.held, b)
	}
	for k.free() < fresh {
		b := k.lru.Remove(k.lru.Front()).(*cachedBlock)
		delete(k.cached, b.hash)
	}
	k.private += fresh
	s.private = fresh
	return true
}

// promote moves s's prefilled full prompt blocks past the ones it found
// cached into the prefix cache. A block another sequence cached meanwhile
// stays s's private copy.
func (k *kvCache) promote(s *seq, hit int) {
	for _, h := range s.hashes[hit:] {
		if _, ok := k.cached[h]; ok {
			continue
		}
		b := &cachedBlock{hash: h, refs: 1}
		k.cached[h] = b
		s.held = append(s.held, b)
		s.private--
		k.private--
	}
}

// release returns s's blocks: private ones are freed, cached ones become
// evictable once nothing holds them, a prompt's last block first so that
// eviction eats prefixes from their tail.
func (k *kvCache) release(s *seq) {
	for i := len(s.held) - 1; i >= 0; i-- {
		b := s.held[i]
		b.refs--
		if b.refs == 0 {
			b.elem = k.lru.PushBack(b)
		}
	}
	s.held = nil
	k.private -= s.private
	s.private = 0
}
