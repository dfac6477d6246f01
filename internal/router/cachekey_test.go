package router

import (
	"fmt"
	"slices"
	"testing"

	"gitea.mynodes.xyz/ilker/llmgw/internal/config"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
)

// servedBy posts body as tenant and says which of ups answered it: the
// one that saw it and does not fail.
func (g *testGateway) servedBy(t *testing.T, ups []*backend, tenant, path, body string) int {
	t.Helper()
	before := make([]int64, len(ups))
	for i, u := range ups {
		before[i] = u.hits.Load()
	}
	if s := g.postAs(t, tenant, path, body); s != 200 {
		t.Fatalf("%s: status %d", body, s)
	}
	served := -1
	for i, u := range ups {
		if u.hits.Load() != before[i] && u.status.Load() == 0 {
			served = i
		}
	}
	return served
}

// cacheKeyBodies are a chat and a Responses request with the
// prompt_cache_key key, asking a question of their own, n.
func cacheKeyBodies(key string, n int) map[string]string {
	return map[string]string{
		"/v1/chat/completions": fmt.Sprintf(`{"model":"m","prompt_cache_key":%q,"messages":[{"role":"user","content":"question %d"}]}`, key, n),
		"/v1/responses":        fmt.Sprintf(`{"model":"m","prompt_cache_key":%q,"input":"question %d"}`, key, n),
	}
}

// A prompt_cache_key places its requests, chat's and the Responses
// API's: under prefix every request with the key goes to one endpoint
// while it can take it, and under auto those that tie; keys spread over
// the pool; and the same key sent from another isolation domain is
// placed apart from the first domain's, so that no tenant's key steers
// another's requests.
func TestPromptCacheKeyPlaces(t *testing.T) {
	const keys = 16
	for _, policy := range []string{catalog.PolicyPrefix, catalog.PolicyAuto} {
		t.Run(policy, func(t *testing.T) {
			ups := []*backend{{promptTokens: 10}, {promptTokens: 10}, {promptTokens: 10}, {promptTokens: 10}}
			g := newTestGateway(t, func(c *config.Config) { c.Pools[0].Policy = policy }, ups[0], ups[1], ups[2], ups[3])
			placed := func(tenant string) []int {
				var where []int
				for k := range keys {
					key := fmt.Sprintf("conversation-%d", k)
					first := -1
					for n := range 3 {
						for path, body := range cacheKeyBodies(key, n) {
							served := g.servedBy(t, ups, tenant, path, body)
							if first < 0 {
								first = served
							} else if served != first {
								t.Errorf("%s from %s: %s served by endpoint %d, its key's first by %d", path, tenant, key, served, first)
							}
						}
					}
					where = append(where, first)
				}
				return where
			}
			acme, globex := placed("acme/search"), placed("globex/search")
			if spread := slices.Compact(slices.Sorted(slices.Values(acme))); len(spread) < 2 {
				t.Errorf("%d keys all went to endpoints %v", keys, spread)
			}
			if slices.Equal(acme, globex) {
				t.Errorf("another org's requests with the same keys went where acme's did: %v", acme)
			}
			if again := placed("acme/ads"); !slices.Equal(again, acme) {
				t.Errorf("within acme, another team's requests with the same keys went to %v, acme/search's to %v", again, acme)
			}
		})
	}
}

// A key's endpoint failing before its first byte, the key's requests go
// to the endpoint rendezvous hashing ranks next for it, all of them, and
// come back once the endpoint answers again.
func TestPromptCacheKeyMovesOnlyWhileItsEndpointFails(t *testing.T) {
	ups := []*backend{{promptTokens: 10}, {promptTokens: 10}, {promptTokens: 10}}
	g := newTestGateway(t, func(c *config.Config) { c.Pools[0].Policy = catalog.PolicyPrefix }, ups[0], ups[1], ups[2])
	body := cacheKeyBodies("conversation-1", 0)["/v1/chat/completions"]
	serve := func(n int) []int {
		var where []int
		for range n {
			where = append(where, g.servedBy(t, ups, "acme", "/v1/chat/completions", body))
		}
		return where
	}
	home := serve(1)[0]
	if where := serve(3); !slices.Equal(where, []int{home, home, home}) {
		t.Fatalf("the key's requests went to %v, its first to %d", where, home)
	}
	ups[home].status.Store(503)
	away := serve(4)
	if away[0] == home || !slices.Equal(away, []int{away[0], away[0], away[0], away[0]}) {
		t.Fatalf("with its endpoint %d failing, the key's requests went to %v", home, away)
	}
	ups[home].status.Store(0)
	ups[home].hits.Store(0)
	// The failure ejected the endpoint for a while; the key goes back
	// once it is a candidate again, and stays.
	waitFor(t, "the key's endpoint to serve it again", func() bool {
		g.servedBy(t, ups, "acme", "/v1/chat/completions", body)
		return ups[home].hits.Load() > 0
	})
	if where := serve(3); !slices.Equal(where, []int{home, home, home}) {
		t.Errorf("back from its failure, the key's endpoint %d; its requests went to %v", home, where)
	}
}
