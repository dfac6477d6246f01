package router

import (
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"gitea.mynodes.xyz/ilker/llmgw/internal/config"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/admission"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/pool"
)

// postAs posts body as tenant (through the tenant header, there being no
// keys here) and returns the status.
func (g *testGateway) postAs(t *testing.T, tenant, path, body string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, g.url+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if tenant != "" {
		req.Header.Set(admission.TenantHeader, tenant)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// sentSalt is the cache_salt of the body an upstream got, and whether it
// had one.
func sentSalt(t *testing.T, up *upstream) (string, bool) {
	t.Helper()
	var b struct {
		CacheSalt *string `json:"cache_salt"`
	}
	if err := json.Unmarshal(<-up.bodies, &b); err != nil {
		t.Fatal(err)
	}
	if b.CacheSalt == nil {
		return "", false
	}
	return *b.CacheSalt, true
}

var derivedSalt = regexp.MustCompile(`^[0-9a-f]{32}$`)

// Calls to a pool whose servers key their caches by cache_salt carry one
// made for the request's isolation domain: the same for every tenant of
// the domain, another for every other domain, never a tenant's name, and
// in place of any salt of the client's own.
func TestCacheSaltByDomain(t *testing.T) {
	const chat = `{"model":"m","max_tokens":2,"messages":[{"role":"user","content":"hi"}]}`
	const chatSalted = `{"model":"m","max_tokens":2,"cache_salt":"mine","messages":[{"role":"user","content":"hi"}]}`
	for _, kind := range []string{catalog.KindVLLM, catalog.KindSGLang} {
		for _, level := range []string{"org", "team"} {
			t.Run(kind+"/"+level, func(t *testing.T) {
				up := &upstream{tokens: 1, bodies: make(chan []byte, 1)}
				g := newTestGateway(t, func(c *config.Config) {
					c.Pools[0].Kind = kind
					c.Router.CacheIsolation = level
				}, up)
				salt := func(tenant, body string) string {
					t.Helper()
					if s := g.postAs(t, tenant, "/v1/chat/completions", body); s != 200 {
						t.Fatalf("status %d", s)
					}
					s, ok := sentSalt(t, up)
					if !ok || !derivedSalt.MatchString(s) {
						t.Fatalf("tenant %q: cache_salt %q (sent: %v), want 32 hex digits", tenant, s, ok)
					}
					return s
				}
				search, ads, globex := salt("acme/search/alice", chat), salt("acme/ads", chat), salt("globex/search", chat)
				if again := salt("acme/search/bob", chat); again != search {
					t.Errorf("two users of one team got salts %s and %s", search, again)
				}
				if (search == ads) != (level == "org") {
					t.Errorf("isolated by %s, two teams of one org got salts %s and %s", level, search, ads)
				}
				if globex == search || globex == ads {
					t.Errorf("another org got the salt of acme's: %s", globex)
				}
				mine := salt("acme/search/alice", chatSalted)
				if mine == search || mine == "mine" || salt("globex/search", chatSalted) == mine {
					t.Errorf("a client's own salt %q was sent as it came or joined another domain", mine)
				}
			})
		}
	}
}

// Without isolation, or to a pool whose servers take no cache_salt, the
// body goes as the client sent it: no salt added, the client's own kept.
func TestCacheSaltNotSent(t *testing.T) {
	for _, tc := range []struct{ kind, level string }{
		{catalog.KindVLLM, config.CacheIsolationNone},
		{catalog.KindOpenAI, "org"},
		{catalog.KindAzure, "org"},
	} {
		t.Run(tc.kind+"/"+tc.level, func(t *testing.T) {
			up := &upstream{tokens: 1, bodies: make(chan []byte, 1)}
			g := newTestGateway(t, func(c *config.Config) {
				c.Pools[0].Kind, c.Pools[0].APIVersion = tc.kind, "2024-10-21"
				c.Router.CacheIsolation = tc.level
			}, up)
			for body, want := range map[string]string{
				`{"model":"m","messages":[{"role":"user","content":"hi"}]}`:                     "",
				`{"model":"m","cache_salt":"mine","messages":[{"role":"user","content":"hi"}]}`: "mine",
			} {
				if s := g.postAs(t, "acme/search", "/v1/chat/completions", body); s != 200 {
					t.Fatalf("status %d", s)
				}
				if got, _ := sentSalt(t, up); got != want {
					t.Errorf("%s: sent cache_salt %q, want %q", body, got, want)
				}
			}
		})
	}
}

// The prefix index keeps each domain's prompts to itself: a prompt one
// org sent is predicted cached for that org's next request, wherever in
// the org it comes from, and for no other org's.
func TestPrefixIndexByDomain(t *testing.T) {
	ups := []*backend{{promptTokens: 1000}, {promptTokens: 1000}}
	g := newTestGateway(t, func(c *config.Config) {
		withBigBodies(c)
		c.Pools[0].Kind = catalog.KindVLLM
	}, ups[0], ups[1])
	var body map[string]json.RawMessage
	if err := json.Unmarshal([]byte(prefixRequest), &body); err != nil {
		t.Fatal(err)
	}
	hashesOf := func(tenant string) []uint64 {
		return pool.HashBlocks(nil, body["messages"], g.r.snap.Load().pools["main"].Index().Block(), g.r.iso.of(tenant, "").seed)
	}
	if s := g.postAs(t, "acme/search", "/v1/chat/completions", prefixRequest); s != 200 {
		t.Fatalf("status %d", s)
	}
	served := 0
	if ups[1].hits.Load() == 1 {
		served = 1
	}
	acme := hashesOf("acme/ads")
	want := make([]int32, 2)
	want[served] = int32(len(acme))
	if got := g.held(acme); got[0] != want[0] || got[1] != want[1] {
		t.Errorf("acme's prompt: blocks held by endpoint %v, want %v", got, want)
	}
	if got := g.held(hashesOf("globex")); got[0] != 0 || got[1] != 0 {
		t.Errorf("globex's view of acme's prompt: blocks held by endpoint %v, want none", got)
	}
	// Within the domain, routing goes where the prefix is.
	for range 3 {
		if s := g.postAs(t, "acme/ads", "/v1/chat/completions", prefixRequest); s != 200 {
			t.Fatalf("status %d", s)
		}
	}
	if got := ups[served].hits.Load(); got != 4 {
		t.Errorf("acme's endpoint served %d of its 4 requests", got)
	}
}
