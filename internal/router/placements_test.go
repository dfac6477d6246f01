package router

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"gitea.mynodes.xyz/ilker/llmgw/internal/config"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/placement"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/pool"
)

// link is a bus from one router to another in the same process: what the
// first publishes, the second places at once. It keeps what went through.
type link struct {
	mu   sync.Mutex
	to   *Router
	sent []placement.Placement
}

func (l *link) Publish(p placement.Placement) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sent = append(l.sent, p)
	l.to.Sharing().Place(p)
}

func (l *link) placements() []placement.Placement {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]placement.Placement(nil), l.sent...)
}

// linkedGateways are two routers in front of the same upstreams, each
// publishing its placements to the other.
func linkedGateways(t *testing.T, mutate func(*config.Config), upstreams ...http.Handler) (a, b *testGateway, ab, ba *link) {
	t.Helper()
	var urls []string
	for _, u := range upstreams {
		s := httptest.NewServer(u)
		t.Cleanup(s.Close)
		urls = append(urls, s.URL+"/v1")
	}
	same := func(c *config.Config) {
		withBigBodies(c)
		for _, u := range urls {
			c.Pools[0].Endpoints = append(c.Pools[0].Endpoints, catalog.Endpoint{URL: u})
		}
		if mutate != nil {
			mutate(c)
		}
	}
	ab, ba = &link{}, &link{}
	// Gateways that share where prompts went share a store, and so the
	// secret their isolation domains' seeds are made with.
	secret := []byte("a secret both gateways read from their store")
	a = newTestGatewayWith(t, Options{Placements: ab, CacheSecret: secret}, same)
	b = newTestGatewayWith(t, Options{Placements: ba, CacheSecret: secret}, same)
	ab.to, ba.to = b.r, a.r
	return a, b, ab, ba
}

// held is how many of hashes, from the first, gateway g's pool main
// holds at each endpoint.
func (g *testGateway) held(hashes []uint64) []int32 {
	p := g.r.snap.Load().pools["main"]
	var m, computed [64]int32
	p.Index().Match(hashes, &m, &computed)
	return m[:len(p.Endpoints())]
}

// promptHashes are the index's hashes of prefixRequest's prompt, its
// messages as sent, as pool main of g hashes it for a request of no
// tenant.
func (g *testGateway) promptHashes(t *testing.T) []uint64 {
	t.Helper()
	var body map[string]json.RawMessage
	if err := json.Unmarshal([]byte(prefixRequest), &body); err != nil {
		t.Fatal(err)
	}
	return pool.HashBlocks(nil, body["messages"], g.r.snap.Load().pools["main"].Index().Block(), g.r.iso.of("", "").seed)
}

// TestPlacementsReachTheOtherGateway: where one gateway sends a prompt,
// the other learns from its placement, and sends the prompt's next turn
// there too.
func TestPlacementsReachTheOtherGateway(t *testing.T) {
	ups := []*backend{{promptTokens: 1000}, {promptTokens: 1000}}
	a, b, ab, _ := linkedGateways(t, nil, ups[0], ups[1])
	hashes := a.promptHashes(t)
	if len(hashes) < 2 {
		t.Fatalf("the prompt has %d blocks; the test needs several", len(hashes))
	}

	if resp, body := a.post(t, "/v1/chat/completions", prefixRequest); resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	served := 0
	if ups[1].hits.Load() == 1 {
		served = 1
	}
	want := []placement.Placement{{
		Pool: "main", Endpoint: a.endpointName("main", served), Block: pool.BlockBytes(pool.DefaultKVBlock), Hashes: hashes,
	}}
	if diff := cmp.Diff(want, ab.placements()); diff != "" {
		t.Fatalf("placements published (-want +got):\n%s", diff)
	}
	wantHeld := make([]int32, 2)
	wantHeld[served] = int32(len(hashes))
	if diff := cmp.Diff(wantHeld, b.held(hashes)); diff != "" {
		t.Fatalf("the other gateway's index, blocks held by endpoint (-want +got):\n%s", diff)
	}

	// The other gateway sends the same prompt where the first one did.
	if resp, body := b.post(t, "/v1/chat/completions", prefixRequest); resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	if got := ups[served].hits.Load(); got != 2 {
		t.Errorf("endpoint %d served %d requests, want both (the other served %d)", served, got, ups[1-served].hits.Load())
	}
}

// TestPlacementsDropWhatFailed: a call that fails before computing
// anything takes its endpoint off the prompt's blocks, in the other
// gateway's index as in its own.
func TestPlacementsDropWhatFailed(t *testing.T) {
	up := &backend{promptTokens: 1000}
	up.status.Store(http.StatusInternalServerError)
	a, b, ab, _ := linkedGateways(t, nil, up)
	hashes := a.promptHashes(t)
	if resp, _ := a.post(t, "/v1/chat/completions", prefixRequest); resp.StatusCode != http.StatusBadGateway {
		t.Fatalf("status %d, want 502", resp.StatusCode)
	}
	var kinds []bool
	for _, p := range ab.placements() {
		kinds = append(kinds, p.Drop)
	}
	if diff := cmp.Diff([]bool{false, true}, kinds); diff != "" {
		t.Fatalf("placements published, Drop of each (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]int32{0}, b.held(hashes)); diff != "" {
		t.Errorf("the other gateway's index, blocks held (-want +got):\n%s", diff)
	}
}

// TestPlaceIgnoresWhatItDoesNotHave: a placement for a pool, endpoint or
// block size this gateway does not have, or for a pool that keeps no
// index, changes nothing.
func TestPlaceIgnoresWhatItDoesNotHave(t *testing.T) {
	g := newTestGateway(t, func(c *config.Config) {
		c.Pools[1].Policy = catalog.PolicyRoundRobin
		c.Pools[1].Endpoints = c.Pools[0].Endpoints
	}, &backend{})
	hashes := []uint64{1, 2, 3}
	name := g.endpointName("main", 0)
	block := pool.BlockBytes(pool.DefaultKVBlock)
	for _, tc := range []struct {
		what string
		p    placement.Placement
	}{
		{"an unknown pool", placement.Placement{Pool: "other", Endpoint: name, Block: block, Hashes: hashes}},
		{"an unknown endpoint", placement.Placement{Pool: "main", Endpoint: "elsewhere", Block: block, Hashes: hashes}},
		{"another block size", placement.Placement{Pool: "main", Endpoint: name, Block: 2 * block, Hashes: hashes}},
		{"a pool without an index", placement.Placement{Pool: "spare", Endpoint: name, Block: block, Hashes: hashes}},
	} {
		if g.r.Sharing().Place(tc.p) {
			t.Errorf("%s: placed", tc.what)
		}
	}
	if diff := cmp.Diff([]int32{0}, g.held(hashes)); diff != "" {
		t.Errorf("index after ignored placements (-want +got):\n%s", diff)
	}
	if !g.r.Sharing().Place(placement.Placement{Pool: "main", Endpoint: name, Block: block, Hashes: hashes}) {
		t.Fatal("a placement for pool main's endpoint was not placed")
	}
	if diff := cmp.Diff([]int32{3}, g.held(hashes)); diff != "" {
		t.Errorf("index after a placement (-want +got):\n%s", diff)
	}
}
