package sim

import (
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/synctest"

	"gitea.mynodes.xyz/ilker/llmgw/internal/openai"
)

// TestSlotCacheKeepsALastPromptPerSlot sends prompts one after another to
// a replica of two slots, each caching the prompt it last processed: a
// prompt sent again finds its slot's, a conversation's next turn takes
// its last turn's slot, an unrelated prompt evicts the slot least
// recently used, and a prompt sharing a tenth or less with a slot takes
// the least recently used one instead.
func TestSlotCacheKeepsALastPromptPerSlot(t *testing.T) {
	cfg := profile(t, ProfileLlamaCpp).Apply(Config{})
	cfg.MaxSeqs = 2
	synctest.Test(t, func(t *testing.T) {
		e, _ := testEngine(cfg)
		start(t, e)
		cached := func(p promptInfo) int {
			return (<-follow(t, e, newSeq(p, 2))).cached
		}
		a := func(tokens int) promptInfo { return testPrompt("a", tokens, 16) }
		// mixed is a's first 32 tokens, then 608 of its own: 2 blocks of
		// 40 in common with a's, not over a tenth of it.
		ph := newPromptHasher(16)
		for i := range 640 {
			if i < 32 {
				ph.addToken(fmt.Sprintf(" a%d", i))
			} else {
				ph.addToken(fmt.Sprintf(" z%d", i))
			}
		}
		mixed := ph.result()
		steps := []struct {
			what       string
			prompt     promptInfo
			wantBlocks int
		}{
			{"a first", a(320), 0},
			{"b first", testPrompt("b", 320, 16), 0},
			{"a again: its slot", a(320), 19},       // all but its last block, which yields the first token
			{"a's next turn: its slot", a(640), 20}, // the 320 tokens a's slot holds
			{"c: evicts b, used longest ago", testPrompt("c", 320, 16), 0},
			{"a again: kept", a(640), 39},
			{"b again: gone, and evicts c", testPrompt("b", 320, 16), 0},
			{"a again", a(640), 39},
			// Not similar enough to a's slot: b's, the least recently
			// used, is taken, and a's stays.
			{"a's first 32 tokens, then others", mixed, 0},
			{"a again: still kept", a(640), 39},
		}
		for _, s := range steps {
			if got := cached(s.prompt); got != s.wantBlocks*16 {
				t.Errorf("%s: %d tokens cached, want %d", s.what, got, s.wantBlocks*16)
			}
		}
	})
}

// TestSlotCacheOverHTTP: a replica of the llamacpp profile answers with
// llama.cpp's usage (no prompt_tokens_details) and its timings.cache_n,
// which the gateway's usage reader takes as the cached tokens, and
// exports llama.cpp's metric names.
func TestSlotCacheOverHTTP(t *testing.T) {
	cfg := profile(t, ProfileLlamaCpp).Apply(fast)
	s, ts := newTestServer(t, cfg)
	prompt := strings.Repeat("A long shared system prompt about the gateway. ", 100)
	url := ts.URL + "/v1/chat/completions"
	read := func() (cached int64, body string) {
		resp := post(t, t.Context(), url, chatBody(prompt, map[string]any{"max_tokens": 4}))
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		u, err := openai.UsageOf(b)
		if err != nil || u == nil {
			t.Fatalf("usage of %s: %v", b, err)
		}
		return u.CachedTokens(), string(b)
	}
	first, body := read()
	if strings.Contains(body, "prompt_tokens_details") || !strings.Contains(body, `"timings":{"cache_n":0,`) {
		t.Errorf("first answer %s: want timings.cache_n 0 and no prompt_tokens_details", body)
	}
	second, _ := read()
	if first != 0 || second == 0 {
		t.Errorf("cached tokens %d then %d, want 0 then the prompt's slot", first, second)
	}
	if got := metricValue(t, s.reg, "llamacpp:prompt_tokens_total"); got == 0 {
		t.Error("llamacpp:prompt_tokens_total not counted")
	}
	for _, name := range []string{"llamacpp:requests_processing", "llamacpp:requests_deferred", "llamacpp:tokens_predicted_total"} {
		metricValue(t, s.reg, name)
	}
}
