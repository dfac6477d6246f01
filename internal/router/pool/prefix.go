package pool

// The prefix index: for each block of prompt text a pool has been sent,
// which endpoints recently served a prompt that began with it. A prompt's
// blocks are hashed in a chain, each hash covering the block and all
// before it, so that one lookup per block finds how long a prefix each
// endpoint holds. What backends report of their cache corrects it: a
// predicted hit that the answer's cached_tokens does not confirm lowers
// how much of its predicted prefix routing believes of that endpoint
// (endpoint.confirm), and a call that failed before computing anything
// takes the endpoint off the blocks it was just given.

import (
	"math"
	"math/bits"
	"sync"
	"sync/atomic"

	"github.com/cespare/xxhash/v2"
)

// prefixHits is how far an endpoint's answers confirm the prefixes the
// index predicted there.
type prefixHits struct {
	// hits is the share of predicted prefix hits the endpoint's answers
	// confirmed, recently (float64 bits; zero means none were checked
	// yet, and all are believed).
	hits atomic.Uint64
}

const (
	// minBlockBytes is the least prompt text one index block covers. A
	// KV-cache block is 16 tokens on vLLM by default, about 64 bytes of
	// prompt; four of them to an index block keeps a 32k-token prompt to
	// 512 hashes and lookups, tens of microseconds, while placing a
	// prefix to within 64 tokens, a fraction of any prompt worth routing
	// for.
	minBlockBytes = 256
	// maxPrefixBlocks is the most blocks of a prompt the index looks at:
	// 128 KiB of prompt text at the smallest block, about 32k tokens.
	// Prompts that share that much share the rest often enough.
	MaxPrefixBlocks = 512
	// blocksPerEndpoint is the index's capacity for each endpoint of the
	// pool: 16,384 blocks of 64 tokens is a million tokens, what the KV
	// cache of a large GPU holds for an 8B model. The index forgets the
	// least recently used blocks past it, as the server's cache would.
	blocksPerEndpoint = 16384
	// DefaultKVBlock is vLLM's KV-cache block in tokens, until a scrape of
	// vllm:cache_config_info says otherwise.
	DefaultKVBlock = 16
)

// BytesPerToken is how much request JSON one prompt token takes, roughly:
// English runs about 4 bytes a token, and the JSON around it a little
// more. The router estimates prompts by it, and the index sizes its
// blocks by it.
const BytesPerToken = 4

// BlockBytes is the index block for a backend's KV-cache block of kvBlock
// tokens: a whole number of them, at least minBlockBytes of text.
func BlockBytes(kvBlock int) int {
	b := max(kvBlock, 1) * BytesPerToken
	return b * ((minBlockBytes + b - 1) / b)
}

// HashBlocks appends to dst the chained hashes of prompt's whole blocks of
// size bytes, at most maxPrefixBlocks of them, the chain starting from
// seed: prompts hashed from different seeds share no block, as prompts of
// different cache salts share none on a server. A partial last block is
// left out: no cache holds it as a block either.
func HashBlocks(dst []uint64, prompt []byte, size int, seed uint64) []uint64 {
	h := seed
	for i := 0; i+size <= len(prompt) && len(dst) < MaxPrefixBlocks; i += size {
		h = mix(h*0x9e3779b97f4a7c15 ^ xxhash.Sum64(prompt[i:i+size]))
		dst = append(dst, h)
	}
	return dst
}

// mix is splitmix64's finalizer: every bit of x reaches every bit of the
// result, so chained hashes of different prefixes do not line up.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

// PrefixIndex maps prompt blocks to the endpoints that hold them, by their
// index in the pool, as bits of a word. It holds a fixed number of blocks
// and evicts by the clock algorithm, an approximation of least recently
// used that needs no list. On a pool whose servers cache per slot it
// holds each endpoint's slots instead (slots.go), and the same methods
// keep them.
type PrefixIndex struct {
	block  int              // bytes of prompt text to a block
	mu     sync.Mutex       // protects all below
	slots  *slotCaches      // each endpoint's slots; nil for a block index
	slot   map[uint64]int32 // key: chained block hash; value: index in blocks
	blocks []prefixBlock    // fixed length: the capacity
	used   int32            // blocks[:used] have been filled
	hand   int32            // the clock's hand: the next block to consider evicting
	held   [64]int32        // blocks held, by endpoint
}

type prefixBlock struct {
	hash    uint64
	holders uint64 // bit i: endpoint i holds the block
	pending uint64 // bit i: endpoint i was sent it, and no first token there has said it was computed
	ref     bool   // used since the hand last passed
}

func newPrefixIndex(endpoints, block int) *PrefixIndex {
	n := blocksPerEndpoint * max(endpoints, 1)
	return &PrefixIndex{block: block, slot: make(map[uint64]int32, n), blocks: make([]prefixBlock, n)}
}

// Block is how many bytes of prompt text one block of the index covers.
func (x *PrefixIndex) Block() int { return x.block }

// Match sets matched[i] to how many of hashes, from the first, endpoint i
// holds, and computed[i] to how many of those it had computed (Settle),
// for every endpoint of the pool. An endpoint's count is written once,
// when it drops out of the run, so that a block held by many endpoints
// costs no more than one held by one.
func (x *PrefixIndex) Match(hashes []uint64, matched, computed *[64]int32) {
	*matched = [64]int32{}
	*computed = [64]int32{}
	var alive, done uint64 // the endpoints holding, and having computed, every block so far
	n := int32(0)
	x.mu.Lock()
	if x.slots != nil {
		x.matchSlots(hashes, matched, computed)
		x.mu.Unlock()
		return
	}
	for _, h := range hashes {
		s, ok := x.slot[h]
		if !ok {
			break
		}
		b := &x.blocks[s]
		b.ref = true
		still, stillDone := b.holders, b.holders&^b.pending
		if n > 0 {
			still &= alive
			stillDone &= done
		}
		if still == 0 {
			break
		}
		setCounts(matched, alive&^still, n)
		setCounts(computed, done&^stillDone, n)
		alive, done = still, stillDone
		n++
	}
	x.mu.Unlock()
	setCounts(matched, alive, n)
	setCounts(computed, done, n)
}

// setCounts sets counts[i] to n for every endpoint i in set.
func setCounts(counts *[64]int32, set uint64, n int32) {
	for m := set; m != 0; m &= m - 1 {
		counts[bits.TrailingZeros64(m)] = n
	}
}

// Add notes that endpoint i now holds every block of hashes, computed.
func (x *PrefixIndex) Add(hashes []uint64, i int) { x.add(hashes, i, false) }

// Promise notes that endpoint i was sent every block of hashes: it holds
// them from now, as far as routing goes, and they count as computed once
// Settle says so.
func (x *PrefixIndex) Promise(hashes []uint64, i int) { x.add(hashes, i, true) }

// promise is Promise for a call of this gateway's, and returns the slot
// the prompt was given on a slot index, busy until releaseSlot; -1 on a
// block index.
func (x *PrefixIndex) promise(hashes []uint64, i int) int {
	if x.slots == nil {
		x.add(hashes, i, true)
		return -1
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.giveSlot(hashes, i, true, true)
}

func (x *PrefixIndex) add(hashes []uint64, i int, pending bool) {
	bit := uint64(1) << i
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.slots != nil {
		x.giveSlot(hashes, i, false, pending)
		return
	}
	for _, h := range hashes {
		s, ok := x.slot[h]
		if !ok {
			s = x.evict()
			x.blocks[s] = prefixBlock{hash: h}
			x.slot[h] = s
		}
		b := &x.blocks[s]
		b.ref = true
		if b.holders&bit == 0 {
			b.holders |= bit
			x.held[i]++
			if pending {
				b.pending |= bit
			}
		}
	}
}

// Settle notes that endpoint i has computed every block of hashes it
// holds: a first token there answered a prompt that began with them.
func (x *PrefixIndex) Settle(hashes []uint64, i int) {
	bit := uint64(1) << i
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.slots != nil {
		x.settleSlots(hashes, i)
		return
	}
	for _, h := range hashes {
		if s, ok := x.slot[h]; ok {
			x.blocks[s].pending &^= bit
		}
	}
}

// Drop notes that endpoint i does not hold the blocks of hashes.
func (x *PrefixIndex) Drop(hashes []uint64, i int) {
	bit := uint64(1) << i
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.slots != nil {
		x.dropSlots(hashes, i)
		return
	}
	for _, h := range hashes {
		if s, ok := x.slot[h]; ok && x.blocks[s].holders&bit != 0 {
			x.blocks[s].holders &^= bit
			x.blocks[s].pending &^= bit
			x.held[i]--
		}
	}
}

// sizes sets held[i] to how many blocks endpoint i holds, for every
// endpoint. On a slot index, whose endpoints hold a few prompts each, it
// is the blocks each was sent past what its slots shared, as a block
// index would hold them until it is full: what SGLang's balancer's own
// tree of a worker holds.
func (x *PrefixIndex) sizes(held *[64]int32) {
	x.mu.Lock()
	*held = x.held
	if x.slots != nil {
		for i, n := range x.slots.sent {
			held[i] = int32(min(n, math.MaxInt32))
		}
	}
	x.mu.Unlock()
}

// evict frees a block for a new hash and returns its index: an unused one
// while there are any, then the first the hand finds unused since it last
// passed. x.mu is held.
func (x *PrefixIndex) evict() int32 {
	if int(x.used) < len(x.blocks) {
		x.used++
		return x.used - 1
	}
	for {
		s := x.hand
		x.hand = (x.hand + 1) % int32(len(x.blocks))
		b := &x.blocks[s]
		if b.ref {
			b.ref = false
			continue
		}
		delete(x.slot, b.hash)
		for m := b.holders; m != 0; m &= m - 1 {
			x.held[bits.TrailingZeros64(m)]--
		}
		return s
	}
}

// Precision is the share of its predicted prefix hits the endpoint's
// answers confirm: below 1 when it evicts sooner than the index assumes.
// Routing believes the index whole, since sending a conversation where
// its prefix was is what keeps it cached there; auto charges a prompt
// stored where precision is low for the prefixes it pushes out.
func (h *prefixHits) Precision() float64 {
	if v := math.Float64frombits(h.hits.Load()); v > 0 {
		return v
	}
	return 1
}

// minPrecision keeps an endpoint whose cache was found cold a few times
// from having its prefix ignored for good: its next hit raises it again.
const minPrecision = 0.05

// Confirm folds one answer into the endpoint's precision: predicted
// prompt tokens were expected cached, and the answer reported cached.
func (h *prefixHits) Confirm(predicted, cached int64) {
	if predicted <= 0 {
		return
	}
	sample := min(float64(cached)/float64(predicted), 1)
	p := h.Precision()
	h.hits.Store(math.Float64bits(max(p+CostSmoothing*(sample-p), minPrecision)))
}
