package sim

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// branchPrompt is a prompt of stemN tokens named by stem followed by
// branchN named by branch: prompts with one stem share its blocks and part
// where their branches begin.
func branchPrompt(stem string, stemN int, branch string, branchN, blockSize int) promptInfo {
	ph := newPromptHasher(blockSize)
	for i := range stemN {
		ph.addToken(fmt.Sprintf(" %s%d", stem, i))
	}
	for i := range branchN {
		ph.addToken(fmt.Sprintf(" %s%d", branch, i))
	}
	return ph.result()
}

// checkRadix fails t when k's bookkeeping disagrees with its tree: the
// blocks counted cached and evictable, the holds (a node is held at least
// as often as any below it), the evictable leaves in the heap, and the
// capacity.
func checkRadix(t *testing.T, k *radixCache, step string) {
	t.Helper()
	cached, evictable, leaves := 0, 0, 0
	var visit func(n *radixNode)
	visit = func(n *radixNode) {
		for key, c := range n.children {
			if c.parent != n || len(c.hashes) == 0 || c.hashes[0] != key {
				t.Fatalf("%s: a child is linked wrongly", step)
			}
			if c.refs > n.refs && n != &k.root {
				t.Fatalf("%s: a node held %d times hangs from one held %d", step, c.refs, n.refs)
			}
			cached += len(c.hashes)
			if c.refs == 0 {
				evictable += len(c.hashes)
			}
			isLeaf := c.refs == 0 && len(c.children) == 0
			if inHeap := c.heapIndex >= 0 && c.heapIndex < len(k.leaves) && k.leaves[c.heapIndex] == c; isLeaf != inHeap {
				t.Fatalf("%s: an evictable leaf's place in the heap is %v, want %v", step, inHeap, isLeaf)
			}
			if isLeaf {
				leaves++
			}
			visit(c)
		}
	}
	visit(&k.root)
	if cached != k.cached || evictable != k.evictable || leaves != len(k.leaves) {
		t.Fatalf("%s: cached, evictable, leaves = %d, %d, %d; the tree has %d, %d, %d",
			step, k.cached, k.evictable, len(k.leaves), cached, evictable, leaves)
	}
	if k.private < 0 || k.private+k.cached > k.total || k.used() < 0 || k.free() < 0 {
		t.Fatalf("%s: private %d + cached %d over capacity %d, or used %d, free %d negative",
			step, k.private, k.cached, k.total, k.used(), k.free())
	}
}

func TestRadixEvictsLeavesBeforeTheirPrefix(t *testing.T) {
	const bs = 4
	k := newRadixCache(bs, 8)
	// a and b share a two-block prefix, then part for two blocks each.
	a := newSeq(branchPrompt("p", 8, "a", 8, bs), 0)
	b := newSeq(branchPrompt("p", 8, "b", 8, bs), 0)
	run := func(s *seq, wantHit int) {
		t.Helper()
		hit := k.match(s.hashes, len(s.hashes))
		if hit != wantHit {
			t.Fatalf("match = %d, want %d", hit, wantHit)
		}
		if !k.allocate(s, hit, len(s.hashes)) {
			t.Fatal("does not fit")
		}
		k.promote(s, hit)
		k.release(s)
		checkRadix(t, k, "after a run")
	}
	run(a, 0)
	run(b, 2) // splits a's run after the prefix
	if k.cached != 6 || k.evictable != 6 || k.used() != 0 {
		t.Fatalf("cached, evictable, used = %d, %d, %d; want 6, 6, 0", k.cached, k.evictable, k.used())
	}

	// Each unrelated sequence takes two blocks and keeps them; the first
	// finds two free, then the cache must evict: a's branch (least recently used),
	// b's, and only then the prefix both hung from.
	want := []struct{ a, b int }{{4, 4}, {4, 4}, {2, 4}, {2, 2}, {0, 0}}
	for i, w := range want {
		if i > 0 {
			c := newSeq(testPrompt(fmt.Sprint("c", i), 8, bs), 0)
			if !k.allocate(c, 0, 2) {
				t.Fatalf("unrelated sequence %d does not fit", i)
			}
			checkRadix(t, k, fmt.Sprint("unrelated ", i))
		}
		if ga, gb := k.match(a.hashes, 4), k.match(b.hashes, 4); ga != w.a || gb != w.b {
			t.Errorf("after %d unrelated sequences a, b match %d, %d blocks; want %d, %d", i, ga, gb, w.a, w.b)
		}
	}
	if k.private+k.cached != 8 {
		t.Errorf("private %d + cached %d, want the whole capacity of 8", k.private, k.cached)
	}
	if k.allocate(newSeq(testPrompt("d", 8, bs), 0), 0, 1) {
		t.Error("a ninth block was allocated in a cache of 8")
	}
}

// TestRadixEvictsWholeLeaves shows where the two caches part: for one
// block, the block cache evicts one block of an old prompt, keeping its
// head, and the radix cache the old prompt's whole leaf.
func TestRadixEvictsWholeLeaves(t *testing.T) {
	const bs = 4
	for _, tt := range []struct {
		name string
		kv   prefixCache
		want int // blocks of the old prompt still matched
	}{
		{"blocks", newKVCache(bs, 5), 3},
		{"radix", newRadixCache(bs, 5), 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			old := newSeq(testPrompt("old", 16, bs), 0)
			if !tt.kv.allocate(old, 0, 4) {
				t.Fatal("old does not fit")
			}
			tt.kv.promote(old, 0)
			tt.kv.release(old)
			if !tt.kv.allocate(newSeq(testPrompt("new", 8, bs), 0), 0, 2) {
				t.Fatal("new does not fit")
			}
			if got := tt.kv.match(old.hashes, 4); got != tt.want {
				t.Errorf("old prompt matches %d blocks, want %d", got, tt.want)
			}
			if got := tt.kv.used(); got != 2 {
				t.Errorf("used = %d, want 2", got)
			}
		})
	}
}

// TestRadixSharesWhatAnotherCached: two sequences with one prompt, both
// admitted before either cached it, end up sharing the radix cache's
// copy, while the block cache keeps the second's as its own.
func TestRadixSharesWhatAnotherCached(t *testing.T) {
	const bs = 4
	for _, tt := range []struct {
		name     string
		kv       prefixCache
		wantUsed int
	}{
		{"blocks", newKVCache(bs, 20), 3 + 3},
		{"radix", newRadixCache(bs, 20), 3 + 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a, b := newSeq(testPrompt("x", 8, bs), 4), newSeq(testPrompt("x", 8, bs), 4)
			for _, s := range []*seq{a, b} {
				if !tt.kv.allocate(s, 0, 3) {
					t.Fatal("does not fit")
				}
			}
			tt.kv.promote(a, 0)
			tt.kv.promote(b, 0)
			if got := tt.kv.used(); got != tt.wantUsed {
				t.Errorf("used = %d, want %d", got, tt.wantUsed)
			}
			tt.kv.release(a)
			tt.kv.release(b)
			if got := tt.kv.used(); got != 0 {
				t.Errorf("used after both = %d, want 0", got)
			}
			if got := tt.kv.match(a.hashes, 2); got != 2 {
				t.Errorf("the prompt matches %d blocks, want 2", got)
			}
		})
	}
}

// TestRadixStaysWithinCapacity runs many sequences over a few shared
// stems in a small cache, checking the tree's bookkeeping after every
// step.
func TestRadixStaysWithinCapacity(t *testing.T) {
	const bs = 4
	k := newRadixCache(bs, 40)
	rng := rand.New(rand.NewPCG(1, 2))
	var running []*seq
	admitted, refused, evicted := 0, 0, 0
	for step := range 3000 {
		switch {
		case len(running) > 0 && rng.IntN(3) == 0:
			i := rng.IntN(len(running))
			s := running[i]
			if rng.IntN(4) > 0 {
				k.promote(s, s.hit)
			}
			k.release(s)
			running = append(running[:i], running[i+1:]...)
		default:
			s := newSeq(branchPrompt(fmt.Sprint("stem", rng.IntN(4)), 4*rng.IntN(5), fmt.Sprint("branch", rng.IntN(12)), 1+rng.IntN(24), bs), 0)
			hit := k.match(s.hashes, len(s.hashes))
			need := len(s.hashes) + rng.IntN(4)
			cachedBefore := k.cached
			if !k.allocate(s, hit, need) {
				refused++
				break
			}
			if k.cached < cachedBefore {
				evicted++
			}
			s.hit = hit
			admitted++
			running = append(running, s)
		}
		checkRadix(t, k, fmt.Sprint("step ", step))
	}
	for _, s := range running {
		k.release(s)
	}
	checkRadix(t, k, "all released")
	if k.used() != 0 || k.private != 0 {
		t.Errorf("after every release: used %d, private %d; want 0, 0", k.used(), k.private)
	}
	// The run must have exercised eviction and refusal, or it proves little.
	if admitted < 500 || refused == 0 || evicted == 0 {
		t.Errorf("admitted %d, refused %d, evicted on %d: want a run that fills the cache", admitted, refused, evicted)
	}
}
