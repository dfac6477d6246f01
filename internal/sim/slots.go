// The slot cache, llama.cpp's server's: each of its slots (--parallel)
// runs one sequence at a time and keeps the prompt it last processed,
// and a new sequence takes the idle slot whose prompt shares the longest
// prefix with its own, if that is more than a share of its prompt
// (--slot-prompt-similarity), else the idle slot least recently used.
// What the slot shares with the new prompt is reused; the rest is
// computed again, and replaces what the slot held past it.

package sim

// slotSimilarity is llama-server's --slot-prompt-similarity default.
const slotSimilarity = 0.1

// slotCache is a replica's slots, over a KV cache counted in blocks as
// the other caches are. It has as many slots as the replica runs
// sequences at once (MaxSeqs). slotCache is not safe for concurrent use:
// the engine's mutex guards it.
type slotCache struct {
	blockSize int
	total     int // capacity in blocks
	inUse     int // blocks held by running sequences
	slots     []cacheSlot
	clock     uint64 // advances at each release; orders uses
}

// cacheSlot is one slot.
type cacheSlot struct {
	hashes []uint64 // chained hashes of the full blocks of the prompt it last processed
	seq    *seq     // the sequence running there; nil when idle
	used   uint64   // the cache's clock when its last sequence ended
	need   int      // blocks its sequence holds
}

func newSlotCache(blockSize, total, slots int) *slotCache {
	return &slotCache{blockSize: blockSize, total: total, slots: make([]cacheSlot, max(slots, 1))}
}

// used is how many blocks running sequences hold.
func (k *slotCache) used() int { return k.inUse }

// capacity is the cache's size in blocks.
func (k *slotCache) capacity() int { return k.total }

// blocksFor is how many blocks n tokens fill.
func (k *slotCache) blocksFor(n int) int { return (n + k.blockSize - 1) / k.blockSize }

// pick is the idle slot a prompt of hashes takes, and how many of its
// blocks that slot holds: the most similar idle slot holding a prompt,
// where the shared prefix is more than slotSimilarity of the prompt (the
// first of equals); else the idle slot least recently used (the last of
// equals); -1 when every slot is busy.
func (k *slotCache) pick(hashes []uint64) (slot, shared int) {
	slot = -1
	best := 0.0
	for i := range k.slots {
		s := &k.slots[i]
		if s.seq != nil || len(s.hashes) == 0 || len(hashes) == 0 {
			continue
		}
		n := sharedPrefix(s.hashes, hashes)
		if sim := float64(n) / float64(len(hashes)); sim > best && sim > slotSimilarity {
			slot, best, shared = i, sim, n
		}
	}
	if slot >= 0 {
		return slot, shared
	}
	var last uint64
	for i := range k.slots {
		if s := &k.slots[i]; s.seq == nil && (slot < 0 || s.used <= last) {
			slot, last = i, s.used
		}
	}
	if slot < 0 {
		return -1, 0
	}
	return slot, sharedPrefix(k.slots[slot].hashes, hashes)
}

// sharedPrefix is how many hashes a and b share from the first.
func sharedPrefix(a, b []uint64) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// match is how many of a prompt's leading full blocks the slot it would
// take holds, at most limit.
func (k *slotCache) match(hashes []uint64, limit int) int {
	_, n := k.pick(hashes)
	return min(n, limit)
}

// allocate gives s the slot its prompt takes, keeping the first hit
// blocks there and dropping the rest, and need blocks of the cache. It
// reports false, changing nothing, when no slot is idle or the blocks do
// not fit.
func (k *slotCache) allocate(s *seq, hit, need int) bool {
	slot, _ := k.pick(s.hashes)
	if slot < 0 || k.inUse+need > k.total {
		return false
	}
	sl := &k.slots[slot]
	sl.hashes = sl.hashes[:min(hit, len(sl.hashes))]
	sl.seq, sl.need = s, need
	s.slot = slot
	k.inUse += need
	return true
}

// promote makes s's whole prompt what its slot holds: it has been
// computed there.
func (k *slotCache) promote(s *seq, _ int) {
	sl := &k.slots[s.slot]
	sl.hashes = append(sl.hashes[:0], s.hashes...)
}

// release frees s's slot and blocks; the slot keeps its prompt.
func (k *slotCache) release(s *seq) {
	sl := &k.slots[s.slot]
	if sl.seq != s {
		return
	}
	k.inUse -= sl.need
	k.clock++
	sl.seq, sl.need, sl.used = nil, 0, k.clock
}
