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
	p.asked <- got
	w.Header().Set("Content-Type", "application/json")
	if p.anthropic {
		io.WriteString(w, `{"id":"msg_1","type":"message","role":"assistant","model":"claude","content":[{"type":"text","text":"hi"}],"stop_reason":"end_turn","usage":{"input_tokens":5,"output_tokens":1}}`)
		return
	}
	io.WriteString(w, `{"id":"c1","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":1,"total_tokens":6}}`)
}

// What a request reserves against its key's token limit, and the output
// bound the backend is asked for, are the same on every pool kind and
// every API: the request's own bound, or router.default_max_tokens when it
// names none, times every answer it may generate. Bounds that disagree
// are refused, and a request whose answers would overrun the limit is
// refused before any backend is called.
func TestReservedIsWhatIsAsked(t *testing.T) {
	gpu := &boundProvider{asked: make(chan [2]int64, 1)}
	claude := &boundProvider{anthropic: true, asked: make(chan [2]int64, 1)}
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
	kg := &keyedGateway{Gateway: g}

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
