package app

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/keys"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/store"
	"gitea.mynodes.xyz/ilker/llmgw/internal/sim"
)

// One tenant cannot read another's prompts off the prefix cache they
// share: an org that guesses another's system prompt is answered as for
// any prompt it never sent, on the chat API and on the Messages API,
// while the org's own teams, and the guessing org itself, are served from
// the cache as before. A real simulated vLLM replica keeps the cache.
func TestPromptsOfOrgsShareNoCache(t *testing.T) {
	for _, level := range []string{"org", "team", "none"} {
		t.Run(level, func(t *testing.T) {
			ctx := t.Context()
			rep, err := sim.Start(ctx, sim.Config{Model: "chat", FixedTiming: true}, "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(rep.Close)
			g := startYAML(t, fmt.Sprintf(`
router: {auth: keys, cache_isolation: %s}
store: {url: %q}
pools:
  - name: gpu
    kind: vllm
    endpoints: [{url: %q}]
models:
  - {name: chat, pool: gpu}
`, level, "sqlite:"+filepath.Join(t.TempDir(), "gw.db"), rep.URL()))
			kg := &keyedGateway{Gateway: g}
			search, _ := kg.newKey(t, keys.Spec{Tenant: "acme/search"})
			ads, _ := kg.newKey(t, keys.Spec{Tenant: "acme/ads"})
			// Two rivals, one for each API: a rival's own first guess
			// caches the prompt for its second.
			rival, _ := kg.newKey(t, keys.Spec{Tenant: "globex"})
			rival2, _ := kg.newKey(t, keys.Spec{Tenant: "initech/x"})

			system := strings.Repeat("Acme's confidential instructions, which no other org may learn. ", 60)
			chat := func(key string) int64 {
				t.Helper()
				body := fmt.Sprintf(`{"model":"chat","max_tokens":2,"messages":[{"role":"system","content":%q},{"role":"user","content":"hi"}]}`, system)
				status, answer := send(t, http.MethodPost, g.URL()+"/chat/completions",
					http.Header{"Authorization": {"Bearer " + key}, "Content-Type": {"application/json"}}, body)
				var a struct {
					Usage struct {
						Details struct {
							Cached int64 `json:"cached_tokens"`
						} `json:"prompt_tokens_details"`
					} `json:"usage"`
				}
				if status != 200 || json.Unmarshal([]byte(answer), &a) != nil {
					t.Fatalf("chat: %d %s", status, answer)
				}
				return a.Usage.Details.Cached
			}
			messages := func(key string) int64 {
				t.Helper()
				body := fmt.Sprintf(`{"model":"chat","max_tokens":2,"system":%q,"messages":[{"role":"user","content":"hi"}]}`, system)
				status, answer := send(t, http.MethodPost, g.URL()+"/messages",
					http.Header{"X-Api-Key": {key}, "Anthropic-Version": {"2023-06-01"}, "Content-Type": {"application/json"}}, body)
				var a struct {
					Usage struct {
						CacheRead int64 `json:"cache_read_input_tokens"`
					} `json:"usage"`
				}
				if status != 200 || json.Unmarshal([]byte(answer), &a) != nil {
					t.Fatalf("messages: %d %s", status, answer)
				}
				return a.Usage.CacheRead
			}

			if got := chat(search); got != 0 {
				t.Fatalf("first sight of the prompt: %d tokens cached", got)
			}
			messages(search) // the Messages API's prompt, cached for acme/search
			rivalChat, rivalMessages := chat(rival), messages(rival2)
			adsChat := chat(ads)
			if level == "none" {
				// What isolation prevents, shown: the guess is confirmed.
				if rivalChat == 0 || rivalMessages == 0 {
					t.Errorf("without isolation, the rivals' guesses read %d and %d cached tokens; the test shows nothing", rivalChat, rivalMessages)
				}
				return
			}
			if rivalChat != 0 || rivalMessages != 0 {
				t.Errorf("a rival's guess of acme's prompt was served from acme's cache: %d tokens on chat, %d on messages", rivalChat, rivalMessages)
			}
			if (adsChat > 0) != (level == "org") {
				t.Errorf("isolated by %s, acme/ads read %d tokens of acme/search's prompt from the cache", level, adsChat)
			}
			if got := chat(search); got == 0 {
				t.Error("acme/search's own prompt again: nothing cached")
			}
			if got := chat(rival); got == 0 {
				t.Error("globex's own prompt again: nothing cached")
			}
		})
	}
}

// The cache secret is the configured one, else LLMGW_CACHE_SECRET, else
// the store's: the same for every gateway on the store, so that gateways
// sending to the same servers make the same salts.
func TestCacheSecret(t *testing.T) {
	ctx := t.Context()
	st := store.NewMemory()
	fromStore, err := cacheSecret(ctx, "", st)
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := cacheSecret(ctx, "", st); !bytes.Equal(again, fromStore) {
		t.Error("two gateways on one store made different secrets")
	}
	configured, err := cacheSecret(ctx, "a secret of sixteen or more", st)
	if err != nil || bytes.Equal(configured, fromStore) || len(configured) != 32 {
		t.Errorf("configured: %x, %v; want 32 bytes of its own", configured, err)
	}
	t.Setenv("LLMGW_CACHE_SECRET", "a secret of sixteen or more")
	if env, err := cacheSecret(ctx, "", st); err != nil || !bytes.Equal(env, configured) {
		t.Errorf("from the environment: %x, %v; want what the same configured secret gives", env, err)
	}
	t.Setenv("LLMGW_CACHE_SECRET", "short")
	if _, err := cacheSecret(ctx, "", st); err == nil || strings.Contains(err.Error(), "short") {
		t.Errorf("a short LLMGW_CACHE_SECRET: %v; want refused without being echoed", err)
	}
}
