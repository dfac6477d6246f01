package app

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/keys"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/usage"
)

// boundProvider is an upstream that answers at once and notes the output
// bound each call asked for: max_tokens as the body gives it (-1 when it
// gives none), and n.
type boundProvider struct {
	anthropic bool
	calls     atomic.Int64
	asked     chan [2]int64
}

func (p *boundProvider) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/health" || r.URL.Path == "/metrics" {
		return
	}
	p.calls.Add(1)
	var body struct {
		MaxTokens *int64 `json:"max_tokens"`
		N         *int64 `json:"n"`
	}
	b, _ := io.ReadAll(r.Body)
	json.Unmarshal(b, &body)
	got := [2]int64{-1, 1}
	if body.MaxTokens != nil {
		got[0] = *body.MaxTokens
	}
	if body.N != nil {
		got[1] = *body.N
	}
	select {
	case p.asked <- got:
	default: // one the test did not wait for, which it counts in calls
	}
	w.Header().Set("Content-Type", "application/json")
	if p.anthropic {
		io.WriteString(w, `{"id":"msg_1","type":"message","role":"assistant","model":"claude","content":[{"type":"text","text":"hi"}],"stop_reason":"end_turn","usage":{"input_tokens":5,"output_tokens":1}}`)
		return
	}
	io.WriteString(w, `{"id":"c1","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":1,"total_tokens":6}}`)
}

// startBounds starts a gateway with keys in front of two boundProviders:
// gpu, an OpenAI-compatible pool serving the model chat, and claude, an
// anthropic pool serving sonnet; router.default_max_tokens is 300.
func startBounds(t *testing.T) (kg *keyedGateway, gpu, claude *boundProvider) {
	t.Helper()
	gpu = &boundProvider{asked: make(chan [2]int64, 1)}
	claude = &boundProvider{anthropic: true, asked: make(chan [2]int64, 1)}
	var urls []string
	for _, p := range []*boundProvider{gpu, claude} {
		s := httptest.NewServer(p)
		t.Cleanup(s.Close)
		urls = append(urls, s.URL+"/v1")
	}
	g := startYAML(t, fmt.Sprintf(`
router: {auth: keys, default_max_tokens: 300}
store: {url: %q}
pools:
  - {name: gpu, endpoints: [{url: %q}]}
  - {name: claude, kind: anthropic, endpoints: [{url: %q}]}
models:
  - {name: chat, pool: gpu}
  - {name: sonnet, pool: claude}
`, "sqlite:"+filepath.Join(t.TempDir(), "gw.db"), urls[0], urls[1]))
	return &keyedGateway{Gateway: g}, gpu, claude
}

// What a request reserves against its key's token limit, and the output
// bound the backend is asked for, are the same on every pool kind and
// every API: the request's own bound, or router.default_max_tokens when it
// names none, times every answer it may generate. Bounds that disagree
// are refused, and a request whose answers would overrun the limit is
// refused before any backend is called.
func TestReservedIsWhatIsAsked(t *testing.T) {
	kg, gpu, claude := startBounds(t)
	g := kg.Gateway

	const tpm = 100000
	tests := []struct {
		name, path, body string
		to               *boundProvider
		wantStatus       int
		wantBound        int64 // max_tokens sent; -1: none
		wantN            int64
		reserved         int64 // output tokens reserved; estimated from the body's size for chat
	}{
		{"chat, its own bound", "/chat/completions", `{"model":"chat","max_tokens":40,"messages":[{"role":"user","content":"hi"}]}`, gpu, 200, 40, 1, 40},
		{"chat, no bound", "/chat/completions", `{"model":"chat","messages":[{"role":"user","content":"hi"}]}`, gpu, 200, -1, 1, 300},
		{"chat, every answer", "/chat/completions", `{"model":"chat","max_tokens":10,"n":4,"messages":[{"role":"user","content":"hi"}]}`, gpu, 200, 10, 4, 40},
		{"chat, best_of", "/completions", `{"model":"chat","max_tokens":10,"n":2,"best_of":6,"prompt":"hi"}`, gpu, 200, 10, 2, 60},
		{"embeddings reserve no answer", "/embeddings", `{"model":"chat","input":"hi"}`, gpu, 200, -1, 1, 0},
		{"anthropic pool, max_completion_tokens", "/chat/completions", `{"model":"sonnet","max_completion_tokens":5,"messages":[{"role":"user","content":"hi"}]}`, claude, 200, 5, 1, 5},
		{"anthropic pool, both bounds agreeing", "/chat/completions", `{"model":"sonnet","max_completion_tokens":7,"max_tokens":7,"messages":[{"role":"user","content":"hi"}]}`, claude, 200, 7, 1, 7},
		{"anthropic pool, no bound", "/chat/completions", `{"model":"sonnet","messages":[{"role":"user","content":"hi"}]}`, claude, 200, 300, 1, 300},
		{"anthropic pool, bounds disagreeing", "/chat/completions", `{"model":"sonnet","max_completion_tokens":1,"max_tokens":1000000,"messages":[{"role":"user","content":"hi"}]}`, claude, 400, 0, 0, 0},
		{"anthropic pool, several answers", "/chat/completions", `{"model":"sonnet","max_tokens":5,"n":3,"messages":[{"role":"user","content":"hi"}]}`, claude, 400, 0, 0, 0},
		{"messages to an anthropic pool", "/messages", `{"model":"sonnet","max_tokens":9,"messages":[{"role":"user","content":"hi"}]}`, claude, 200, 9, 1, 9},
		{"responses to an anthropic pool", "/responses", `{"model":"sonnet","max_output_tokens":11,"input":"hi"}`, claude, 200, 11, 1, 11},
		{"responses, no bound, to an anthropic pool", "/responses", `{"model":"sonnet","input":"hi"}`, claude, 200, 300, 1, 300},
		{"messages to a chat pool", "/messages", `{"model":"chat","max_tokens":13,"messages":[{"role":"user","content":"hi"}]}`, gpu, 200, 13, 1, 13},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key, _ := kg.newKey(t, keys.Spec{Tenant: "acme", TPM: tpm})
			h := http.Header{"Authorization": {"Bearer " + key}, "Content-Type": {"application/json"}, "Anthropic-Version": {"2023-06-01"}}
			before := tt.to.calls.Load()
			req, _ := http.NewRequest(http.MethodPost, g.URL()+tt.path, strings.NewReader(tt.body))
			req.Header = h
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			answer, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.wantStatus {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tt.wantStatus, answer)
			}
			if tt.wantStatus != 200 {
				if n := tt.to.calls.Load() - before; n != 0 {
					t.Errorf("refused, yet the backend was called %d times", n)
				}
				return
			}
			if got := <-tt.to.asked; got != [2]int64{tt.wantBound, tt.wantN} {
				t.Errorf("the backend was asked for max_tokens %d and n %d, want %d and %d", got[0], got[1], tt.wantBound, tt.wantN)
			}
			remaining, err := strconv.ParseInt(resp.Header.Get("x-ratelimit-remaining-tokens"), 10, 64)
			if err != nil {
				t.Fatalf("x-ratelimit-remaining-tokens: %v", err)
			}
			reserved := tpm - remaining
			if strings.HasPrefix(tt.path, "/chat") || tt.path == "/completions" || tt.path == "/embeddings" {
				// The body goes upstream as sent, and its prompt is
				// estimated from its size: a token for every 4 bytes.
				if prompt := int64(len(tt.body)+3) / 4; reserved != prompt+tt.reserved {
					t.Errorf("reserved %d tokens, want %d for the prompt and %d for the answers", reserved, prompt, tt.reserved)
				}
			} else if reserved <= tt.reserved || reserved > tt.reserved+200 {
				t.Errorf("reserved %d tokens, want %d for the answers and a prompt of a few dozen", reserved, tt.reserved)
			}
		})
	}

	// A key whose tokens a minute cannot hold every answer is refused
	// before any backend sees the request.
	small, _ := kg.newKey(t, keys.Spec{Tenant: "acme", TPM: 200})
	before := gpu.calls.Load()
	for _, body := range []string{
		`{"model":"chat","max_tokens":10,"n":128,"messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"chat","max_tokens":10,"best_of":21,"prompt":"hi"}`,
	} {
		path := "/chat/completions"
		if strings.Contains(body, "prompt") {
			path = "/completions"
		}
		status, answer := send(t, http.MethodPost, g.URL()+path, http.Header{"Authorization": {"Bearer " + small}, "Content-Type": {"application/json"}}, body)
		if status != http.StatusTooManyRequests {
			t.Errorf("%s past a 200-token limit: %d %s", body, status, answer)
		}
	}
	if n := gpu.calls.Load() - before; n != 0 {
		t.Errorf("refused requests reached the backend %d times", n)
	}
}

// Every prompt a request lists is answered on its own, so every one is
// reserved: a completion's prompt (strings or token-id arrays) times its
// answers (n or best_of) times its output bound, and every prompt's
// estimate, a token id counting as a token; an embedding's input
// likewise, on the prompt side. A request past the key's limit is a 429
// before any backend is called; a list of no prompts, or of mixed
// elements, a 400 naming its field before anything is reserved.
func TestEveryPromptIsReserved(t *testing.T) {
	kg, gpu, _ := startBounds(t)
	g := kg.Gateway
	const tpm = 100000
	fortyPrompts := `["` + strings.Repeat(`a","`, 39) + `a"]`
	arrays := make([]string, 25)
	for i := range arrays {
		arrays[i] = "[1,2]"
	}
	tokenArrays := "[" + strings.Join(arrays, ",") + "]"
	manyIDs := "[[" + strings.TrimSuffix(strings.Repeat("7,", 300), ",") + "]]"
	tests := []struct {
		name, path, body string
		answers          int64 // output tokens reserved
		tokens, idBytes  int64 // the token ids the body gives, and the bytes they take
	}{
		{"a list of prompts", "/completions", `{"model":"chat","max_tokens":10,"prompt":["a","b","c"]}`, 30, 0, 0},
		{"forty prompts", "/completions", `{"model":"chat","max_tokens":10,"prompt":` + fortyPrompts + `}`, 400, 0, 0},
		{"every prompt n times", "/completions", `{"model":"chat","max_tokens":10,"n":2,"prompt":["a","b","c"]}`, 60, 0, 0},
		{"every prompt best_of times", "/completions", `{"model":"chat","max_tokens":10,"n":2,"best_of":3,"prompt":["a","b","c"]}`, 90, 0, 0},
		{"token-id arrays", "/completions", `{"model":"chat","max_tokens":10,"prompt":` + tokenArrays + `}`, 250, 50, int64(len(tokenArrays))},
		{"one token-id array", "/completions", `{"model":"chat","max_tokens":10,"prompt":[1,2,3,4,5,6,7,8]}`, 10, 8, 17},
		{"prompts and their embeddings", "/completions", `{"model":"chat","max_tokens":10,"prompt":["a"],"prompt_embeds":["AAAA","BBBB"]}`, 30, 0, 0},
		{"no bound, every prompt", "/completions", `{"model":"chat","prompt":["a","b"]}`, 600, 0, 0},
		{"embeddings, every input", "/embeddings", `{"model":"chat","input":["a","b","c"]}`, 0, 0, 0},
		{"embeddings, token ids", "/embeddings", `{"model":"chat","input":` + manyIDs + `}`, 0, 300, int64(len(manyIDs))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key, _ := kg.newKey(t, keys.Spec{Tenant: "acme", TPM: tpm})
			h := http.Header{"Authorization": {"Bearer " + key}, "Content-Type": {"application/json"}}
			resp, answer := exchange(t, http.MethodPost, g.URL()+tt.path, h, tt.body)
			if resp.StatusCode != 200 {
				t.Fatalf("status %d: %s", resp.StatusCode, answer)
			}
			<-gpu.asked
			remaining, err := strconv.ParseInt(resp.Header.Get("x-ratelimit-remaining-tokens"), 10, 64)
			if err != nil {
				t.Fatalf("x-ratelimit-remaining-tokens: %v", err)
			}
			prompt := (int64(len(tt.body))-tt.idBytes+3)/4 + tt.tokens
			if reserved := tpm - remaining; reserved != prompt+tt.answers {
				t.Errorf("reserved %d tokens, want %d for the prompts and %d for the answers", reserved, prompt, tt.answers)
			}
		})
	}

	small, _ := kg.newKey(t, keys.Spec{Tenant: "acme", TPM: 200})
	h := http.Header{"Authorization": {"Bearer " + small}, "Content-Type": {"application/json"}}
	before := gpu.calls.Load()
	for _, tt := range []struct{ path, body string }{
		{"/completions", `{"model":"chat","max_tokens":10,"prompt":` + fortyPrompts + `}`},
		{"/completions", `{"model":"chat","max_tokens":10,"prompt":` + tokenArrays + `}`},
		{"/completions", `{"model":"chat","max_tokens":10,"n":4,"prompt":["a","b","c","d","e"]}`},
		{"/embeddings", `{"model":"chat","input":` + manyIDs + `}`},
	} {
		if status, answer := send(t, http.MethodPost, g.URL()+tt.path, h, tt.body); status != http.StatusTooManyRequests {
			t.Errorf("%s past a 200-token limit: %d %s", tt.body, status, answer)
		}
	}
	for _, tt := range []struct{ path, body, param string }{
		{"/completions", `{"model":"chat","max_tokens":10,"prompt":[]}`, "prompt"},
		{"/completions", `{"model":"chat","max_tokens":10,"prompt":["a",[1]]}`, "prompt"},
		{"/completions", `{"model":"chat","max_tokens":10,"prompt":"a","prompt":["b","c"]}`, "prompt"},
		{"/embeddings", `{"model":"chat","input":[]}`, "input"},
	} {
		resp, answer := exchange(t, http.MethodPost, g.URL()+tt.path, h, tt.body)
		var e struct{ Error struct{ Param string } }
		json.Unmarshal([]byte(answer), &e)
		if resp.StatusCode != 400 || e.Error.Param != tt.param || resp.Header.Get("x-ratelimit-remaining-tokens") != "" {
			t.Errorf("%s: %d naming %q, reserved %q; want a 400 naming %s, nothing reserved", tt.body, resp.StatusCode, e.Error.Param, resp.Header.Get("x-ratelimit-remaining-tokens"), tt.param)
		}
	}
	if n := gpu.calls.Load() - before; n != 0 {
		t.Errorf("refused requests reached the backend %d times", n)
	}

	// Under the limit, forty prompts pass, and what they reserved is
	// settled at the backend's count: a second fits only once it is.
	fits, id := kg.newKey(t, keys.Spec{Tenant: "acme", TPM: 500})
	h = http.Header{"Authorization": {"Bearer " + fits}, "Content-Type": {"application/json"}}
	body := `{"model":"chat","max_tokens":10,"prompt":` + fortyPrompts + `}`
	for i := range 2 {
		if status, answer := send(t, http.MethodPost, g.URL()+"/completions", h, body); status != 200 {
			t.Fatalf("request %d of forty prompts within a 500-token limit: %d %s", i, status, answer)
		}
		<-gpu.asked
		waitUntil(t, "the ledger to hold the answer", func() bool {
			rows, err := kg.store.Usage(t.Context(), usage.Query{KeyID: id})
			return err == nil && len(rows) == 1 && rows[0].Requests == int64(i+1)
		})
	}
	rows, _ := kg.store.Usage(t.Context(), usage.Query{KeyID: id})
	if rows[0].PromptTokens != 10 || rows[0].CompletionTokens != 2 {
		t.Errorf("the ledger holds %+v, want the backend's counts", rows[0])
	}
}
