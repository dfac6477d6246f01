package pool

import (
	"bytes"
	"math/bits"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// text is n bytes of prompt text drawn from seed: two calls with one seed
// agree, and texts of different seeds differ in every block.
func text(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x5eed))
	b := make([]byte, n)
	for i := range b {
		b[i] = 'a' + byte(r.IntN(26))
	}
	return b
}

func TestHashBlocks(t *testing.T) {
	const size = 256
	base := text(1, 10*size)

	t.Run("same prefix, same leading hashes", func(t *testing.T) {
		a := HashBlocks(nil, base, size, 0)
		b := HashBlocks(nil, append(bytes.Clone(base[:6*size]), text(2, 4*size)...), size, 0)
		if len(a) != 10 || len(b) != 10 {
			t.Fatalf("got %d and %d hashes, want 10 each", len(a), len(b))
		}
		if diff := cmp.Diff(a[:6], b[:6]); diff != "" {
			t.Errorf("the shared six blocks hash differently (-a +b):\n%s", diff)
		}
		for i := 6; i < 10; i++ {
			if a[i] == b[i] {
				t.Errorf("block %d differs in text but not in hash", i)
			}
		}
	})

	t.Run("a differing block changes every later hash", func(t *testing.T) {
		changed := bytes.Clone(base)
		changed[3*size+17] ^= 1 // one byte of block 3
		a, b := HashBlocks(nil, base, size, 0), HashBlocks(nil, changed, size, 0)
		if diff := cmp.Diff(a[:3], b[:3]); diff != "" {
			t.Errorf("blocks before the change hash differently:\n%s", diff)
		}
		// Blocks 4 on are the same text, but their hashes cover block 3.
		for i := 3; i < 10; i++ {
			if a[i] == b[i] {
				t.Errorf("hash %d is unchanged after a change in block 3", i)
			}
		}
	})

	t.Run("a partial last block is left out", func(t *testing.T) {
		whole := HashBlocks(nil, base[:3*size], size, 0)
		partial := HashBlocks(nil, base[:4*size-1], size, 0)
		if diff := cmp.Diff(whole, partial); diff != "" {
			t.Errorf("a partial fourth block changed the hashes:\n%s", diff)
		}
		if got := HashBlocks(nil, base[:size-1], size, 0); len(got) != 0 {
			t.Errorf("a prompt shorter than a block has %d hashes, want none", len(got))
		}
	})

	t.Run("capped at maxPrefixBlocks", func(t *testing.T) {
		long := text(3, (MaxPrefixBlocks+40)*size)
		got := HashBlocks(nil, long, size, 0)
		if len(got) != MaxPrefixBlocks {
			t.Errorf("%d hashes, want %d", len(got), MaxPrefixBlocks)
		}
		// The cap counts what dst already holds.
		if got := HashBlocks(make([]uint64, MaxPrefixBlocks-2), long, size, 0); len(got) != MaxPrefixBlocks {
			t.Errorf("appending to %d hashes gave %d, want %d", MaxPrefixBlocks-2, len(got), MaxPrefixBlocks)
		}
	})
}

// smallIndex is a prefix index of capacity blocks of block bytes, small
// enough to fill.
func smallIndex(block, capacity int) *PrefixIndex {
	return &PrefixIndex{block: block, slot: make(map[uint64]int32), blocks: make([]prefixBlock, capacity)}
}

func matchOf(x *PrefixIndex, hashes []uint64) [64]int32 {
	m, _ := matchComputed(x, hashes)
	return m
}

func matchComputed(x *PrefixIndex, hashes []uint64) (matched, computed [64]int32) {
	x.Match(hashes, &matched, &computed)
	return matched, computed
}

// TestPrefixIndexPromise: blocks promised to an endpoint are held there
// from the promise, and computed only once Settle says so; blocks it
// already held computed stay so, and a drop forgets the promise.
func TestPrefixIndexPromise(t *testing.T) {
	x := smallIndex(256, 1024)
	chain := HashBlocks(nil, text(4, 8*256), 256, 0)

	x.Add(chain[:2], 0)     // computed: the first two
	x.Promise(chain, 0)     // the rest sent after them
	x.Promise(chain[:6], 3) // sent, not yet computed ...
	x.Settle(chain[:4], 3)  // ... the first four now are
	x.Promise(chain, 5)
	x.Drop(chain[4:], 5) // failed before computing: four left, promised
	x.Promise(chain, 9)
	x.Settle(chain, 9)

	var matched, computed [64]int32
	matched[0], matched[3], matched[5], matched[9] = 8, 6, 4, 8
	computed[0], computed[3], computed[9] = 2, 4, 8
	gotM, gotC := matchComputed(x, chain)
	if diff := cmp.Diff(matched, gotM); diff != "" {
		t.Errorf("matched (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(computed, gotC); diff != "" {
		t.Errorf("computed (-want +got):\n%s", diff)
	}
	// Computed runs from the first block: a hole makes the rest not.
	x.Promise(chain[:1], 11)
	x.Add(chain[1:4], 11)
	if _, c := matchComputed(x, chain); c[11] != 0 {
		t.Errorf("computed behind a block still promised: %d, want 0", c[11])
	}
	checkHeld(t, x)
}

func TestPrefixIndexMatch(t *testing.T) {
	x := smallIndex(256, 1024)
	chain := HashBlocks(nil, text(4, 8*256), 256, 0)
	other := HashBlocks(nil, text(5, 8*256), 256, 0)

	x.Add(chain, 0)      // all eight blocks
	x.Add(chain[:3], 5)  // the first three
	x.Add(chain, 63)     // the highest bit a pool has
	x.Add(chain[:8], 7)  // all, then ...
	x.Drop(chain[:1], 7) // ... not the first: no prefix at all
	x.Add(other, 9)      // another prompt entirely

	var want [64]int32
	want[0], want[5], want[63] = 8, 3, 8
	if diff := cmp.Diff(want, matchOf(x, chain)); diff != "" {
		t.Errorf("match (-want +got):\n%s", diff)
	}
	// A prompt that shares four blocks and then goes its own way matches
	// four at most.
	fork := append(bytes.Clone(text(4, 8*256)[:4*256]), text(6, 4*256)...)
	want = [64]int32{}
	want[0], want[5], want[63] = 4, 3, 4
	if diff := cmp.Diff(want, matchOf(x, HashBlocks(nil, fork, 256, 0))); diff != "" {
		t.Errorf("match of a fork (-want +got):\n%s", diff)
	}
	if got := matchOf(x, HashBlocks(nil, text(7, 4*256), 256, 0)); got != ([64]int32{}) {
		t.Errorf("a prompt never sent matches %v", got)
	}

	for i, want := range map[int]int32{0: 8, 5: 3, 63: 8, 7: 7, 9: 8, 1: 0} {
		if got := x.size(i); got != want {
			t.Errorf("size(%d) = %d, want %d", i, got, want)
		}
	}
	checkHeld(t, x)
}

// TestPrefixIndexMatchAgainstEachEndpoint: Match, which writes an
// endpoint's counts only where it drops out of the run, agrees with
// walking the blocks once for each endpoint, after random promises,
// adds, settles and drops of prefixes of a few conversations, in an
// index small enough to evict.
func TestPrefixIndexMatchAgainstEachEndpoint(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	x := smallIndex(256, 96)
	var chains [][]uint64
	for k := range 6 {
		chains = append(chains, HashBlocks(nil, text(uint64(k%3), 256*(4+k)), 256, 0)) // 0 and 3, 1 and 4, 2 and 5 share a prefix
	}
	for op := range 3000 {
		c := chains[r.IntN(len(chains))]
		hashes, ep := c[:1+r.IntN(len(c))], r.IntN(64)
		switch r.IntN(4) {
		case 0:
			x.Promise(hashes, ep)
		case 1:
			x.Add(hashes, ep)
		case 2:
			x.Settle(hashes, ep)
		default:
			x.Drop(hashes[r.IntN(len(hashes)):], ep)
		}
		c = chains[r.IntN(len(chains))]
		gotM, gotC := matchComputed(x, c)
		x.mu.Lock()
		for i := range 64 {
			var wantM, wantC int32
			for _, h := range c {
				s, ok := x.slot[h]
				if !ok || x.blocks[s].holders&(1<<i) == 0 {
					break
				}
				wantM++
			}
			for _, h := range c[:wantM] {
				if x.blocks[x.slot[h]].pending&(1<<i) != 0 {
					break
				}
				wantC++
			}
			if gotM[i] != wantM || gotC[i] != wantC {
				t.Fatalf("op %d, endpoint %d: matched %d computed %d, want %d and %d", op, i, gotM[i], gotC[i], wantM, wantC)
			}
		}
		x.mu.Unlock()
	}
	checkHeld(t, x)
}

// TestPrefixIndexEvictsLeastRecentlyUsed: past its capacity the index
// forgets blocks unused since the clock's hand last passed, and keeps one
// a match has just used though it was added earlier.
func TestPrefixIndexEvictsLeastRecentlyUsed(t *testing.T) {
	x := smallIndex(4, 8)
	for h := uint64(1); h <= 8; h++ {
		x.Add([]uint64{h}, 0)
	}
	x.Add([]uint64{9}, 0) // full: the hand passes once round, and 1 goes
	if got := matchOf(x, []uint64{1}); got[0] != 0 {
		t.Fatalf("block 1 survived a full index")
	}
	matchOf(x, []uint64{5}) // 5 is used; 2, 3, 4, 6, 7 and 8 are not
	x.Add([]uint64{10, 11, 12, 13}, 1)

	for h, kept := range map[uint64]bool{2: false, 3: false, 4: false, 5: true, 6: false, 7: true, 8: true, 9: true, 10: true, 13: true} {
		m := matchOf(x, []uint64{h})
		if got := m[0] > 0 || m[1] > 0; got != kept {
			t.Errorf("block %d kept: %v, want %v", h, got, kept)
		}
	}
	if got, want := x.size(0), int32(4); got != want { // 5, 7, 8, 9
		t.Errorf("size(0) = %d, want %d", got, want)
	}
	if got, want := x.size(1), int32(4); got != want {
		t.Errorf("size(1) = %d, want %d", got, want)
	}
	checkHeld(t, x)
}

// TestPrefixIndexHeldStaysConsistent: after any mix of adds, drops and
// evictions, each endpoint's held count is the blocks that name it.
func TestPrefixIndexHeldStaysConsistent(t *testing.T) {
	x := smallIndex(4, 64)
	r := rand.New(rand.NewPCG(7, 7))
	prompts := make([][]uint64, 40)
	for i := range prompts {
		// Prompts share their first blocks with others of their family,
		// so that blocks have several holders.
		p := append(bytes.Clone(text(uint64(i%5), 4*4)), text(uint64(100+i), 4*(1+r.IntN(12)))...)
		prompts[i] = HashBlocks(nil, p, x.block, 0)
	}
	for range 5000 {
		p := prompts[r.IntN(len(prompts))]
		ep := []int{0, 1, 2, 31, 63}[r.IntN(5)]
		switch r.IntN(4) {
		case 0:
			x.Drop(p[r.IntN(len(p)):], ep)
		case 1:
			matchOf(x, p)
		default:
			x.Add(p, ep)
		}
	}
	if len(x.slot) > len(x.blocks) {
		t.Errorf("%d hashes indexed in %d blocks", len(x.slot), len(x.blocks))
	}
	checkHeld(t, x)
}

// checkHeld fails t unless x.held agrees with the blocks x indexes, and
// every indexed hash is in the block it names.
func checkHeld(t *testing.T, x *PrefixIndex) {
	t.Helper()
	x.mu.Lock()
	defer x.mu.Unlock()
	var held [64]int32
	for h, s := range x.slot {
		b := x.blocks[s]
		if b.hash != h {
			t.Errorf("hash %x points at block %d, which holds %x", h, s, b.hash)
		}
		for m := b.holders; m != 0; m &= m - 1 {
			held[bits.TrailingZeros64(m)]++
		}
	}
	if diff := cmp.Diff(held, x.held); diff != "" {
		t.Errorf("held counts (-counted +kept):\n%s", diff)
	}
}

// size is how many blocks endpoint i holds.
func (x *PrefixIndex) size(i int) int32 {
	var held [64]int32
	x.sizes(&held)
	return held[i]
}
