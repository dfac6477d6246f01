package pool

// The prefix index of a pool whose servers cache per slot (llama.cpp's
// llama-server, and Ollama, which runs it): a server of N slots
// (--parallel N) keeps in each the last prompt it processed there, and
// a new request takes the idle slot whose prompt shares the longest
// common prefix with its own, if that prefix is more than a share
// (--slot-prompt-similarity) of the new prompt, else the idle slot least
// recently used. What an endpoint holds is then at most N prompts, not a
// tree of blocks: the index keeps them as their chained block hashes,
// picks the slot each prompt sent there lands in by that rule, and
// credits an endpoint with the prefix its prompt shares with that slot.

const (
	// DefaultSlotsLlamaCpp is llama-server's slots when its /slots is not
	// read and the pool sets none: --parallel's default (auto) is 4.
	DefaultSlotsLlamaCpp = 4
	// DefaultSlotsOllama is Ollama's: OLLAMA_NUM_PARALLEL's default is 1.
	DefaultSlotsOllama = 1
	// maxModeledSlots bounds the slots the index keeps of one endpoint: at
	// most a prompt of MaxPrefixBlocks hashes each, 4 KiB, so 1 MiB an
	// endpoint. A server of more slots is modelled as one of these many,
	// its least recently used forgotten sooner than the server forgets
	// them.
	maxModeledSlots = 256
	// SlotSimilarity is llama-server's --slot-prompt-similarity default:
	// a slot is taken for its prompt when the prefix they share is more
	// than this share of the new prompt.
	SlotSimilarity = 0.1
)

// slotCaches is every endpoint's slots. The PrefixIndex's mutex guards it.
type slotCaches struct {
	// eps holds each endpoint's slots, by endpoint index, n to each.
	eps  [][]slotPrompt
	tick int64 // counts prompts given to slots: the order of last use
	// sent is, by endpoint, the blocks its slots were given past what
	// they shared with the prompts given: what a block index would hold
	// there, read by sizes.
	sent [64]int64
}

// slotPrompt is one slot's cached prompt as routing believes it.
type slotPrompt struct {
	blocks  []uint64 // the chained block hashes of the prompt it last processed
	used    int64    // the tick it was last given a prompt; 0 never
	busy    int32    // this gateway's calls processing there
	pending bool     // its prompt was sent, and no first token said it was computed
}

func newSlotIndex(endpoints, block, slots int) *PrefixIndex {
	n := min(max(slots, 1), maxModeledSlots)
	c := &slotCaches{eps: make([][]slotPrompt, max(endpoints, 1))}
	for i := range c.eps {
		c.eps[i] = make([]slotPrompt, n)
	}
	return &PrefixIndex{block: block, slots: c}
}

// Slots is how many slots the index models at endpoint i; zero on a
// block index.
func (x *PrefixIndex) Slots(i int) int {
	if x.slots == nil {
		return 0
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	return len(x.slots.eps[i])
}

// resizeSlots makes the index model n slots at endpoint i, keeping the
// first of those it has; a block index is left alone.
func (x *PrefixIndex) resizeSlots(i, n int) {
	n = min(max(n, 1), maxModeledSlots)
	if x.slots == nil {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	slots := x.slots.eps[i]
	if len(slots) == n {
		return
	}
	for s := n; s < len(slots); s++ {
		x.held[i] -= int32(len(slots[s].blocks))
	}
	grown := make([]slotPrompt, n)
	copy(grown, slots)
	x.slots.eps[i] = grown
}

// landSlot is the slot of slots a prompt of hashes lands in by
// llama-server's rule, and the blocks it shares with the prompt there:
// of the idle slots holding a prompt, the one sharing the longest prefix
// with it, where that is more than similarity of its blocks (the first
// of equals); else the idle slot least recently used (the last of
// equals); else, every slot busy, the least recently used of all, where
// the server would queue the request until one is free.
func landSlot(slots []slotPrompt, hashes []uint64, similarity float64) (slot int, shared int32) {
	slot = -1
	if similarity > 0 && len(hashes) > 0 {
		best := 0.0
		for s := range slots {
			if slots[s].busy > 0 || len(slots[s].blocks) == 0 {
				continue
			}
			n := commonPrefix(slots[s].blocks, hashes)
			if sim := float64(n) / float64(len(hashes)); sim > best && sim > similarity {
				slot, best, shared = s, sim, n
			}
		}
		if slot >= 0 {
			return slot, shared
		}
	}
	for _, idle := range [2]bool{true, false} {
		last := int64(-1)
		for s := range slots {
			if idle && slots[s].busy > 0 {
				continue
			}
			if slot < 0 || slots[s].used <= last {
				slot, last = s, slots[s].used
			}
		}
		if slot >= 0 {
			break
		}
	}
	return slot, commonPrefix(slots[slot].blocks, hashes)
}

// commonPrefix is how many hashes a and b share from the first.
func commonPrefix(a, b []uint64) int32 {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return int32(i)
		}
	}
	return int32(n)
}

// matchSlots is Match on a slot index: each endpoint's blocks shared
// with the slot the prompt would land in, and computed as many unless
// that slot's prompt is still pending. x.mu is held.
func (x *PrefixIndex) matchSlots(hashes []uint64, matched, computed *[64]int32) {
	for i, slots := range x.slots.eps {
		s, n := landSlot(slots, hashes, SlotSimilarity)
		matched[i] = n
		if !slots[s].pending {
			computed[i] = n
		}
	}
}

// giveSlot puts the prompt of hashes in the slot of endpoint i it lands
// in, replacing what it held, and returns that slot. busy counts a call
// of this gateway's there until releaseSlot; pending leaves it
// uncomputed until Settle. x.mu is held.
func (x *PrefixIndex) giveSlot(hashes []uint64, i int, busy, pending bool) int {
	slots := x.slots.eps[i]
	s, shared := landSlot(slots, hashes, SlotSimilarity)
	sp := &slots[s]
	x.slots.sent[i] += int64(len(hashes)) - int64(shared)
	x.held[i] += int32(len(hashes) - len(sp.blocks))
	sp.blocks = append(sp.blocks[:0], hashes...)
	x.slots.tick++
	sp.used = x.slots.tick
	sp.pending = pending
	if busy {
		sp.busy++
	}
	return s
}

// releaseSlot ends a call of this gateway's on slot s of endpoint i,
// given it by Promise; a slot of -1 is none.
func (x *PrefixIndex) releaseSlot(i, s int) {
	if x.slots == nil || s < 0 {
		return
	}
	x.mu.Lock()
	if slots := x.slots.eps[i]; s < len(slots) && slots[s].busy > 0 {
		slots[s].busy--
	}
	x.mu.Unlock()
}

// settleSlots notes the slot of endpoint i whose prompt ends with the
// last of hashes as computed. x.mu is held.
func (x *PrefixIndex) settleSlots(hashes []uint64, i int) {
	if len(hashes) == 0 {
		return
	}
	last := hashes[len(hashes)-1]
	for s := range x.slots.eps[i] {
		sp := &x.slots.eps[i][s]
		if len(sp.blocks) > 0 && sp.blocks[len(sp.blocks)-1] == last {
			sp.pending = false
		}
	}
}

// dropSlots cuts every slot of endpoint i holding the first of hashes
// back to the blocks before it. x.mu is held.
func (x *PrefixIndex) dropSlots(hashes []uint64, i int) {
	if len(hashes) == 0 {
		return
	}
	for s := range x.slots.eps[i] {
		sp := &x.slots.eps[i][s]
		for k, h := range sp.blocks {
			if h == hashes[0] {
				x.held[i] -= int32(len(sp.blocks) - k)
				sp.blocks = sp.blocks[:k]
				break
			}
		}
	}
}

// Correct takes an answer at endpoint i that found only the first keep
// blocks of the prompt of hashes cached, where routing believed more: no
// slot there held more of it than that, whatever the index believed, so
// every slot but the one the prompt itself now fills is cut to share at
// most keep blocks with it. A block index is corrected by precision
// alone (prefixHits), and Correct leaves it.
func (x *PrefixIndex) Correct(hashes []uint64, i int, keep int32) {
	if x.slots == nil || len(hashes) == 0 {
		return
	}
	keep = max(keep, 0)
	x.mu.Lock()
	defer x.mu.Unlock()
	for s := range x.slots.eps[i] {
		sp := &x.slots.eps[i][s]
		n := commonPrefix(sp.blocks, hashes)
		if n > keep && !(n == int32(len(hashes)) && len(sp.blocks) == len(hashes)) {
			x.held[i] -= int32(len(sp.blocks)) - keep
			sp.blocks = sp.blocks[:keep]
		}
	}
}
