package pool

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
)

// blocksOf is n block hashes from first on: prompts that share a first
// share a prefix.
func blocksOf(first uint64, n int) []uint64 {
	h := make([]uint64, n)
	for i := range h {
		h[i] = first + uint64(i)
	}
	return h
}

// TestLandSlot holds the slot a prompt lands in to llama-server's rule:
// the idle slot sharing the longest prefix, more than the similarity's
// share of the prompt, the first of equals; else the idle slot least
// recently used, the last of equals; else the least recently used of all.
func TestLandSlot(t *testing.T) {
	prompt := blocksOf(100, 10)
	held := func(first uint64, n int, used int64) slotPrompt {
		return slotPrompt{blocks: blocksOf(first, n), used: used}
	}
	busy := func(s slotPrompt) slotPrompt { s.busy = 1; return s }
	for _, tc := range []struct {
		name       string
		slots      []slotPrompt
		similarity float64
		slot       int
		shared     int32
	}{
		{"every slot empty: the last of equals by use", []slotPrompt{{}, {}, {}}, 0.1, 2, 0},
		{"the most similar", []slotPrompt{held(100, 3, 9), held(100, 7, 1), held(500, 4, 0)}, 0.1, 1, 7},
		{"a longer prompt there shares only the new one's", []slotPrompt{held(500, 4, 0), held(100, 20, 5)}, 0.1, 1, 10},
		{"the first of equally similar", []slotPrompt{held(100, 4, 1), held(100, 4, 0)}, 0.1, 0, 4},
		{"at the similarity is not over it: least recently used", []slotPrompt{held(100, 1, 1), held(500, 3, 2)}, 0.1, 0, 1},
		{"over the similarity", []slotPrompt{held(500, 3, 0), held(100, 2, 5)}, 0.1, 1, 2},
		{"a higher similarity passes it over", []slotPrompt{held(500, 3, 0), held(100, 5, 5)}, 0.5, 0, 0},
		{"similarity 0 takes the least recently used", []slotPrompt{held(100, 9, 5), held(500, 3, 2)}, 0, 1, 0},
		{"least recently used", []slotPrompt{held(500, 2, 5), held(600, 2, 2), held(700, 2, 7)}, 0.1, 1, 0},
		{"the most similar is busy: the next", []slotPrompt{busy(held(100, 8, 1)), held(100, 3, 2), held(500, 1, 0)}, 0.1, 1, 3},
		{"busy slots passed over by use too", []slotPrompt{busy(held(500, 2, 0)), held(600, 2, 3), held(700, 2, 4)}, 0.1, 1, 0},
		{"every slot busy: least recently used of all", []slotPrompt{busy(held(100, 8, 4)), busy(held(500, 2, 3))}, 0.1, 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			slot, shared := landSlot(tc.slots, prompt, tc.similarity)
			if slot != tc.slot || shared != tc.shared {
				t.Errorf("landSlot = slot %d sharing %d, want slot %d sharing %d", slot, shared, tc.slot, tc.shared)
			}
		})
	}
}

// slotsHeld is what endpoint i's slots hold, first block and length of
// each, in slot order; (0, 0) for an empty slot.
func slotsHeld(x *PrefixIndex, i int) [][2]uint64 {
	x.mu.Lock()
	defer x.mu.Unlock()
	var out [][2]uint64
	for _, s := range x.slots.eps[i] {
		if len(s.blocks) == 0 {
			out = append(out, [2]uint64{})
			continue
		}
		out = append(out, [2]uint64{s.blocks[0], uint64(len(s.blocks))})
	}
	return out
}

// checkSlotsHeld fails unless x.held counts the blocks the slots hold.
func checkSlotsHeld(t *testing.T, x *PrefixIndex) {
	t.Helper()
	x.mu.Lock()
	held := x.held
	x.mu.Unlock()
	for i, slots := range x.slots.eps {
		n := int32(0)
		for _, s := range slots {
			n += int32(len(s.blocks))
		}
		if held[i] != n {
			t.Errorf("endpoint %d: held %d, slots hold %d", i, held[i], n)
		}
	}
}

// TestSlotIndexEvictsTheLeastRecentlyUsed: an endpoint of two slots holds
// the last two unrelated prompts it was sent, a conversation's next turn
// takes the slot of its last, and the prompt not sent longest goes.
func TestSlotIndexEvictsTheLeastRecentlyUsed(t *testing.T) {
	x := newSlotIndex(1, 256, 2)
	send := func(h []uint64) {
		s := x.promise(h, 0)
		x.Settle(h, 0)
		x.releaseSlot(0, s)
	}
	send(blocksOf(100, 4))
	send(blocksOf(200, 4))
	if got, want := slotsHeld(x, 0), [][2]uint64{{200, 4}, {100, 4}}; !cmp.Equal(got, want) {
		t.Fatalf("after two prompts: slots %v, want %v", got, want)
	}
	send(blocksOf(100, 6)) // the first conversation's next turn
	if got, want := slotsHeld(x, 0), [][2]uint64{{200, 4}, {100, 6}}; !cmp.Equal(got, want) {
		t.Fatalf("after the next turn: slots %v, want %v", got, want)
	}
	send(blocksOf(300, 4)) // unrelated: the slot of 200, used longest ago, goes
	if got, want := slotsHeld(x, 0), [][2]uint64{{300, 4}, {100, 6}}; !cmp.Equal(got, want) {
		t.Fatalf("after a third prompt: slots %v, want %v", got, want)
	}
	if m := matchOf(x, blocksOf(200, 4)); m[0] != 0 {
		t.Errorf("the evicted prompt matches %d blocks, want 0", m[0])
	}
	if m := matchOf(x, blocksOf(100, 8)); m[0] != 6 {
		t.Errorf("the conversation matches %d blocks, want 6", m[0])
	}
	// What sglang weighs an endpoint by: the blocks it computed, as a
	// block index would hold them (4 + 4 + 2 + 4), not the 10 it holds.
	var sizes [64]int32
	x.sizes(&sizes)
	if sizes[0] != 14 {
		t.Errorf("sizes = %d, want the 14 blocks computed there", sizes[0])
	}
	checkSlotsHeld(t, x)
}

// TestSlotIndexCreditsTheSlotItWouldLandIn: where the slot holding a
// prompt's prefix is busy, the prompt lands in another, and is credited
// that one's prefix, where a block index credits the prefix held anywhere.
func TestSlotIndexCreditsTheSlotItWouldLandIn(t *testing.T) {
	x := newSlotIndex(2, 256, 2)
	long := blocksOf(100, 8)
	s := x.promise(long, 0) // busy until released
	x.Settle(long, 0)
	x.Add(blocksOf(500, 3), 0)
	x.Add(long, 1)
	matched, computed := matchComputed(x, blocksOf(100, 10))
	if matched[0] != 0 || matched[1] != 8 || computed[1] != 8 {
		t.Errorf("with endpoint 0's slot busy: matched %v, computed %v; want 0 at endpoint 0, 8 at 1", matched[:2], computed[:2])
	}
	x.releaseSlot(0, s)
	if m := matchOf(x, blocksOf(100, 10)); m[0] != 8 {
		t.Errorf("released: endpoint 0 matches %d blocks, want 8", m[0])
	}
	// A slot processing a prompt is not taken for the same prompt again:
	// the server computes it a second time elsewhere.
	pending := x.promise(blocksOf(700, 5), 1)
	if matched, _ := matchComputed(x, blocksOf(700, 5)); matched[1] != 0 {
		t.Errorf("promised: matched %d at endpoint 1, want 0 while its slot is busy", matched[1])
	}
	x.releaseSlot(1, pending)
	if matched, computed := matchComputed(x, blocksOf(700, 5)); matched[1] != 5 || computed[1] != 0 {
		t.Errorf("released: matched %d, computed %d at endpoint 1; want 5, 0 before its first token", matched[1], computed[1])
	}
	x.Settle(blocksOf(700, 5), 1)
	if _, computed := matchComputed(x, blocksOf(700, 5)); computed[1] != 5 {
		t.Errorf("settled: computed %d at endpoint 1, want 5", computed[1])
	}
	checkSlotsHeld(t, x)
}

// TestSlotIndexDropAndResize: a call that computed nothing leaves its
// slot holding what it shared before; a scrape listing another number
// of slots keeps the prompts of those that stay.
func TestSlotIndexDropAndResize(t *testing.T) {
	x := newSlotIndex(1, 256, 3)
	x.Add(blocksOf(100, 4), 0)
	x.Add(blocksOf(200, 4), 0)
	next := blocksOf(100, 9)
	s := x.promise(next, 0)
	x.Drop(next[4:], 0)
	x.releaseSlot(0, s)
	if got, want := slotsHeld(x, 0), [][2]uint64{{}, {200, 4}, {100, 4}}; !cmp.Equal(got, want) {
		t.Errorf("dropped: slots %v, want %v", got, want)
	}
	x.resizeSlots(0, 2)
	if got, want := slotsHeld(x, 0), [][2]uint64{{}, {200, 4}}; !cmp.Equal(got, want) {
		t.Errorf("resized to 2: slots %v, want %v", got, want)
	}
	x.resizeSlots(0, 4)
	if got := x.Slots(0); got != 4 {
		t.Errorf("resized to 4: %d slots", got)
	}
	checkSlotsHeld(t, x)
}

// TestSlotPoolCorrectedByCachedTokens follows calls through a llamacpp
// pool's lifecycle: the index holds the prompts in slots, and an answer
// whose cached tokens (timings.cache_n) say the predicted prefix was not
// there drops the other slots' claim to it.
func TestSlotPoolCorrectedByCachedTokens(t *testing.T) {
	p := New(catalog.Pool{Name: "p", Kind: catalog.KindLlamaCpp, Slots: 2, Endpoints: []catalog.Endpoint{
		{URL: "http://10.0.0.1:8080/v1"},
	}}, nil, nil)
	x := p.Index()
	if x.Slots(0) != 2 {
		t.Fatalf("a llamacpp pool of slots 2 models %d slots", x.Slots(0))
	}
	block := x.Block()
	base := text(1, 4*block)
	now := time.Now()
	call := func(prompt []byte, cached int64) (matched int32) {
		rt := new(Route)
		rt.Prepare(p, prompt, 0, int64(len(prompt)/BytesPerToken), 0)
		a := p.Begin(rt, 0, true, false, now)
		a.FirstToken(now)
		a.End(0, true)
		a.Confirm(int64(len(prompt)/BytesPerToken), cached)
		return rt.Matched(0)
	}
	// Two calls of the same prompt at once: the second finds the first's
	// slot busy and takes the other.
	rt1, rt2 := new(Route), new(Route)
	rt1.Prepare(p, base, 0, int64(len(base)/BytesPerToken), 0)
	rt2.Prepare(p, base, 0, int64(len(base)/BytesPerToken), 0)
	a1, a2 := p.Begin(rt1, 0, true, false, now), p.Begin(rt2, 0, true, false, now)
	for _, a := range []*Attempt{&a1, &a2} {
		a.FirstToken(now)
		a.End(0, true)
	}
	if got, want := len(slotsHeld(x, 0)), 2; got != want || slotsHeld(x, 0)[0][1] != 4 || slotsHeld(x, 0)[1][1] != 4 {
		t.Fatalf("two calls at once: slots %v, want both holding the 4 blocks", slotsHeld(x, 0))
	}
	// The next turn is predicted its 4 blocks cached; the server found
	// none (restarted, say): the other slot's claim goes.
	longer := append(append([]byte(nil), base...), text(2, 2*block)...)
	if m := call(longer, 0); m != 4 {
		t.Fatalf("the next turn was predicted %d blocks, want 4", m)
	}
	if got, want := slotsHeld(x, 0), [][2]uint64{{x.slots.eps[0][0].blocks[0], 6}, {}}; !cmp.Equal(got, want) {
		t.Errorf("corrected: slots %v, want the turn's 6 blocks and an empty slot", got)
	}
	// An answer that confirms the prefix changes nothing.
	if m := call(longer, int64(len(longer)/BytesPerToken)); m != 6 {
		t.Errorf("the same prompt again was predicted %d blocks, want 6", m)
	}
	if got := slotsHeld(x, 0); got[0][1] != 6 {
		t.Errorf("confirmed: slots %v, want the 6 blocks kept", got)
	}
	checkSlotsHeld(t, x)

	// A scrape of /slots listing 3 makes the index model 3 there; a pool
	// of another kind keeps its block index.
	p.SetSlots(p.Endpoints()[0], 3)
	if got := p.Index().Slots(0); got != 3 {
		t.Errorf("after a scrape of 3 slots, the index models %d", got)
	}
	v := New(catalog.Pool{Name: "v", Kind: catalog.KindVLLM, Endpoints: []catalog.Endpoint{{URL: "http://10.0.0.2:8000/v1"}}}, nil, nil)
	v.SetSlots(v.Endpoints()[0], 3)
	if got := v.Index().Slots(0); got != 0 {
		t.Errorf("a vllm pool models %d slots, want a block index", got)
	}
}

// TestSlotPoolPickAllocatesNothing: on a llamacpp pool, as on any, a
// policy's pick over a prepared route allocates nothing.
func TestSlotPoolPickAllocatesNothing(t *testing.T) {
	for _, policy := range catalog.Policies {
		cp := catalog.Pool{Name: "p", Kind: catalog.KindLlamaCpp, Policy: policy}
		for i := range 4 {
			cp.Endpoints = append(cp.Endpoints, catalog.Endpoint{URL: fmt.Sprintf("http://10.0.0.%d:8080/v1", i+1)})
		}
		p := New(cp, nil, nil)
		prompt := text(3, 8*p.Index().Block())
		var hashes []uint64
		hashes = HashBlocks(hashes, prompt, p.Index().Block(), 0)
		p.Index().Add(hashes[:5], 2)
		rt := new(Route)
		rt.Prepare(p, prompt, 0, int64(len(prompt)/BytesPerToken), 500*time.Millisecond)
		if p.Indexed() && rt.Matched(2) != 5 {
			t.Fatalf("%s: endpoint 2 matched %d blocks, want 5", policy, rt.Matched(2))
		}
		now := time.Now()
		if n := testing.AllocsPerRun(100, func() { p.Pick(rt, all(p), now) }); n != 0 {
			t.Errorf("%s: a pick allocated %v times", policy, n)
		}
	}
}
