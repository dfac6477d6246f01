package sim

import "testing"

func TestKVCacheSharingAndEviction(t *testing.T) {
	const bs = 4
	k := newKVCache(bs, 6)
	seqOf := func(tag string, prompt, target int) *seq { return newSeq(testPrompt(tag, prompt, bs), target) }
	check := func(step string, wantUsed, wantFree, wantEvictable int) {
		t.Helper()
		if k.used() != wantUsed || k.free() != wantFree || k.lru.Len() != wantEvictable {
			t.Errorf("%s: used, free, evictable = %d, %d, %d; want %d, %d, %d",
				step, k.used(), k.free(), k.lru.Len(), wantUsed, wantFree, wantEvictable)
		}
	}

	a := seqOf("a", 8, 4) // 2 full prompt blocks, 3 in all
	if !k.allocate(a, 0, 3) {
		t.Fatal("a does not fit an empty cache")
	}
	k.promote(a, 0)
	check("a running", 3, 3, 0)

	// A second sequence with a's prompt shares its two blocks.
	a2 := seqOf("a", 8, 4)
	hit := k.match(a2.hashes, (8-1)/bs)
	if hit != 1 {
		t.Fatalf("match = %d, want 1 (the last prompt token is always computed)", hit)
	}
	if !k.allocate(a2, hit, 3) {
		t.Fatal("a2 does not fit")
	}
	k.promote(a2, hit) // its second block is already cached: stays private
	check("a and a2 running", 5, 1, 0)

	k.release(a)
	k.release(a2)
	check("both done", 0, 4, 2)

	// b needs 5 blocks; 4 are free, so one cached block goes: a's last.
	b := seqOf("b", 8, 12)
	if !k.allocate(b, 0, 5) {
		t.Fatal("b does not fit after eviction")
	}
	check("b running", 5, 0, 1)
	if got := k.match(a.hashes, 2); got != 1 {
		t.Errorf("after eviction a's prompt matches %d blocks, want 1 (its head)", got)
	}

	// c needs 2 blocks and only 1 can be had: nothing changes.
	c := seqOf("c", 4, 4)
	if k.allocate(c, 0, 2) {
		t.Fatal("c fits a full cache")
	}
	check("c refused", 5, 0, 1)
	if c.private != 0 || len(c.held) != 0 {
		t.Errorf("refused c holds %d private and %d cached blocks", c.private, len(c.held))
	}
}
