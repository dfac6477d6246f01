package pool

// A pick among endpoints whose servers list the models they have loaded.

import (
	"math"
	"testing"
	"time"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
)

// TestPickPrefersTheModelLoaded: every policy picks among the endpoints
// where the request's model is loaded while there are any, whatever
// their load (auto, while their queues are shorter than a cold start);
// with it loaded nowhere, or only as a stale scrape said, the policy
// picks as it would.
func TestPickPrefersTheModelLoaded(t *testing.T) {
	now := time.Unix(1000, 0)
	for _, policy := range catalog.Policies {
		p := testPool(policy, 1, 1, 1)
		// Endpoint 2 is the busiest, and the only one with the model.
		for range 5 {
			p.Send(2, 100, false, false, now)
		}
		p.endpoints[0].SetModels([]string{"other:latest"}, now)
		p.endpoints[1].SetModels([]string{}, now)
		p.endpoints[2].SetModels([]string{"other:latest", "llama3.2:1b"}, now)
		rt := routeFor(p, promptText(1, 2), 0)
		rt.Model = "llama3.2:1b"
		for range 3 {
			if i, _ := p.Pick(rt, all(p), now); i != 2 {
				t.Errorf("%s: picked %d, want 2, the only one with the model loaded", policy, i)
			}
		}
		// Not among the candidates (tried, or out): the others are cold
		// alike, and the policy picks among them.
		if i, _ := p.Pick(rt, all(p)&^(1<<2), now); i == 2 || i < 0 {
			t.Errorf("%s: without 2 a candidate, picked %d", policy, i)
		}
		// A scrape older than the pool's max age says nothing: least
		// loaded, not 2, where the policy weighs load.
		later := now.Add(p.maxAge + time.Second)
		if i, _ := p.Pick(rt, all(p), later); i == 2 && policy == catalog.PolicyLeastRequest {
			t.Errorf("%s: picked 2 on a stale scrape", policy)
		}
		// A request whose pool lists nothing loaded is not steered.
		rt.Model = ""
		if i, _ := p.Pick(rt, all(p), now); i == 2 && policy == catalog.PolicyLeastRequest {
			t.Errorf("%s: picked the busiest with no model to prefer", policy)
		}
	}
}

// TestStatusShowsModelsLoaded: the status lists what a fresh scrape said
// is loaded, none as an empty list, and nothing when unknown.
func TestStatusShowsModelsLoaded(t *testing.T) {
	now := time.Unix(1000, 0)
	p := testPool(catalog.PolicyAuto, 1, 1, 1)
	p.endpoints[0].SetModels([]string{"llama3.2:1b"}, now)
	p.endpoints[1].SetModels([]string{}, now)
	p.endpoints[2].SetModels(nil, now) // a scrape that lists nothing
	st := p.Status(now)
	if got := st[0].Models; len(got) != 1 || got[0] != "llama3.2:1b" {
		t.Errorf("endpoint 0's models = %q, want [llama3.2:1b]", got)
	}
	if got := st[1].Models; got == nil || len(got) != 0 {
		t.Errorf("endpoint 1's models = %#v, want an empty list", got)
	}
	if got := st[2].Models; got != nil {
		t.Errorf("endpoint 2's models = %#v, want nil: unknown", got)
	}
	if got := p.Status(now.Add(p.maxAge + time.Second))[0].Models; got != nil {
		t.Errorf("endpoint 0's models from a stale scrape = %q, want nil", got)
	}
}

// TestAutoChargesAColdStart: auto takes the endpoint where the model is
// loaded while its predicted first token is sooner than a cold start
// elsewhere, and the cold endpoint once the warm one's queue is longer
// than the load; the policies that predict nothing keep to the warm one.
func TestAutoChargesAColdStart(t *testing.T) {
	now := time.Unix(1000, 0)
	for _, policy := range []string{catalog.PolicyAuto, catalog.PolicyLeastRequest} {
		p := testPool(policy, 1, 1)
		for _, e := range p.endpoints {
			e.SetCost(0.05, 1e-3) // a millisecond a prompt token
		}
		p.endpoints[0].SetModels([]string{"llama3.2:1b"}, now)
		p.endpoints[1].SetModels([]string{"other:latest"}, now)
		rt := routeFor(p, promptText(1, 1), 0)
		rt.Model = "llama3.2:1b"
		// 1,000 prompt tokens owed at the warm endpoint: a second of
		// prefill, short of the 5 s a cold start is charged before one is
		// seen.
		p.Send(0, 1000, false, false, now)
		if i, _ := p.Pick(rt, all(p), now); i != 0 {
			t.Errorf("%s, 1 s queued where it is loaded: picked %d, want 0", policy, i)
		}
		// 8,000: past it.
		p.Send(0, 7000, false, false, now)
		want := 1
		if policy != catalog.PolicyAuto {
			want = 0
		}
		if i, _ := p.Pick(rt, all(p), now); i != want {
			t.Errorf("%s, 8 s queued where it is loaded: picked %d, want %d", policy, i, want)
		}
	}
}

// TestColdStartLearned: a streamed call begun where the endpoint said its
// model was not loaded teaches the endpoint's cold start, what its first
// token took past the cost model's prediction, and leaves the cost model
// as it was; a call begun warm teaches the cost model.
func TestColdStartLearned(t *testing.T) {
	now := time.Unix(1000, 0)
	p := testPool(catalog.PolicyAuto, 1)
	e := p.endpoints[0]
	e.SetModels([]string{}, now)
	rt := routeFor(p, nil, 0)
	rt.Model = "llama3.2:1b"
	if got := e.coldStartCost(); got != priorColdStart {
		t.Fatalf("cold start before any: %v, want the prior %v", got, priorColdStart)
	}
	if st := p.Status(now)[0]; st.ColdStart != 5*time.Second || st.ColdStartLearned {
		t.Errorf("status before any: cold start %v (learned %v), want the prior 5s", st.ColdStart, st.ColdStartLearned)
	}
	before := *e.firstTokenCost()
	a := p.Begin(rt, 0, true, false, now)
	a.FirstToken(now.Add(2 * time.Second))
	a.End(0, true)
	predicted := before.Predict(0, 0, 0)
	if got, want := e.coldStartCost(), 2-predicted; math.Abs(got-want) > 1e-9 {
		t.Errorf("cold start after one of 2 s: %v, want %v (2 s less the %v predicted)", got, want, predicted)
	}
	if st := p.Status(now)[0]; !st.ColdStartLearned || math.Abs(st.ColdStart.Seconds()-(2-predicted)) > 1e-6 {
		t.Errorf("status: cold start %v (learned %v), want %vs learned", st.ColdStart, st.ColdStartLearned, 2-predicted)
	}
	if on, known := p.LoadedOn("llama3.2:1b", now); !known || on != nil {
		t.Errorf("loaded on %q (known %v), want no endpoint, known", on, known)
	}
	if e.cost.Load() != nil {
		t.Errorf("a cold call taught the cost model: %+v", *e.cost.Load())
	}

	e.SetModels([]string{"llama3.2:1b"}, now)
	b := p.Begin(rt, 0, true, false, now)
	b.FirstToken(now.Add(100 * time.Millisecond))
	b.End(0, true)
	if e.cost.Load() == nil {
		t.Error("a warm call taught the cost model nothing")
	}
	if got, want := e.coldStartCost(), 2-predicted; math.Abs(got-want) > 1e-9 {
		t.Errorf("a warm call moved the cold start: %v, want %v", got, want)
	}
}
