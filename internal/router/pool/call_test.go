package pool

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
)

// placed is one placement a pool's OnPlace heard.
type placed struct {
	I, Block int
	Blocks   int
	Drop     bool
}

// TestAttemptLifecycle follows two calls through Begin, FirstToken, End
// and Confirm: what the endpoint counts, what the index holds and what
// the pool's listener hears at each step.
func TestAttemptLifecycle(t *testing.T) {
	p := New(catalog.Pool{Name: "p", Policy: catalog.PolicyPrefix, Endpoints: []catalog.Endpoint{
		{URL: "http://10.0.0.1:8000/v1"}, {URL: "http://10.0.0.2:8000/v1"},
	}}, nil, nil)
	var heard []placed
	p.OnPlace(func(i, block int, hashes []uint64, drop bool) {
		heard = append(heard, placed{I: i, Block: block, Blocks: len(hashes), Drop: drop})
	})
	block := p.Index().Block()
	prompt := text(1, 4*block)
	now := time.Now()
	route := func(prompt []byte) *Route {
		rt := new(Route)
		rt.Prepare(p, prompt, 0, 1000, 0)
		return rt
	}

	rt := route(prompt)
	a := p.Begin(rt, 1, true, false, now)
	if got, want := p.Endpoints()[1].Counts(), (Counts{Inflight: 1, Pending: 1, Owed: 1000}); got != want {
		t.Errorf("begun: counts %+v, want %+v", got, want)
	}
	if got := p.MeanPrompt(); got != 1000 {
		t.Errorf("begun: mean prompt %v, want the call's 1000", got)
	}
	if next := route(prompt); next.Matched(1) != 4 || next.computed[1] != 0 {
		t.Errorf("begun: the next route sees %d blocks at the endpoint, %d computed; want 4 promised, 0 computed", next.Matched(1), next.computed[1])
	}

	if !a.FirstToken(now.Add(time.Second)) || a.FirstToken(now.Add(2*time.Second)) {
		t.Error("FirstToken did not report true once, then false")
	}
	if got, want := p.Endpoints()[1].Counts(), (Counts{Inflight: 1}); got != want {
		t.Errorf("first token: counts %+v, want %+v", got, want)
	}
	if next := route(prompt); next.computed[1] != 4 {
		t.Errorf("first token: the next route sees %d blocks computed at the endpoint, want 4", next.computed[1])
	}
	a.End(0, true)
	if got := p.Endpoints()[1].Counts(); got != (Counts{}) {
		t.Errorf("ended: counts %+v, want none", got)
	}

	// A call sharing half the prompt, refused by the same endpoint: the
	// blocks it was promised past the two the endpoint held are dropped,
	// and those two kept.
	other := append(append([]byte(nil), prompt[:2*block]...), text(2, 2*block)...)
	rt = route(other)
	b := p.Begin(rt, 1, false, false, now)
	b.End(0, false)
	if got := p.Endpoints()[1].Counts(); got != (Counts{}) {
		t.Errorf("refused: counts %+v, want none", got)
	}
	if next := route(other); next.Matched(1) != 2 {
		t.Errorf("refused: the endpoint holds %d of the prompt's blocks, want the 2 it held before", next.Matched(1))
	}

	// The first prompt again, where it was computed: its answer confirms
	// the prefix the index predicted.
	rt = route(prompt)
	c := p.Begin(rt, 1, false, false, now)
	c.FirstToken(now)
	c.End(0, true)
	if predicted, confirmed := c.Confirm(1000, 1000); predicted != 1000 || confirmed != 1000 {
		t.Errorf("Confirm = %d, %d; want 1000 predicted and confirmed", predicted, confirmed)
	}

	want := []placed{
		{I: 1, Block: block, Blocks: 4},
		{I: 1, Block: block, Blocks: 4},
		{I: 1, Block: block, Blocks: 2, Drop: true},
		{I: 1, Block: block, Blocks: 4},
	}
	if diff := cmp.Diff(want, heard); diff != "" {
		t.Errorf("placements heard (-want +got):\n%s", diff)
	}
}
