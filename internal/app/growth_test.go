package app

// Every request path, whole and over real sockets, grows linearly with
// the largest repeated part of its body: a body of many messages, blocks
// or items must not cost a gateway minutes before any upstream sees it.

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"gitea.mynodes.xyz/ilker/llmgw/internal/config"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
	"gitea.mynodes.xyz/ilker/llmgw/internal/lineartest"
)

// instantUpstream answers every call at once, in the shape its path asks
// for, after reading the whole body: an OpenAI-compatible server and a
// Messages API one in one.
func instantUpstream(t *testing.T) string {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		switch {
		case strings.HasSuffix(r.URL.Path, "/messages"):
			io.WriteString(w, `{"id":"msg_1","type":"message","role":"assistant","model":"c","content":[{"type":"text","text":"ok"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":3,"output_tokens":1}}`)
		case strings.HasSuffix(r.URL.Path, "/embeddings"):
			io.WriteString(w, `{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.5]}],"model":"m","usage":{"prompt_tokens":3,"total_tokens":3}}`)
		case strings.HasSuffix(r.URL.Path, "/chat/completions"):
			io.WriteString(w, `{"id":"c1","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`)
		default:
			io.WriteString(w, `{"id":"c1","object":"text_completion","model":"m","choices":[{"index":0,"text":"ok","finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`)
		}
	}))
	t.Cleanup(s.Close)
	return s.URL + "/v1"
}

// growthGateway is a gateway serving model m from an OpenAI-compatible
// pool and model c from an anthropic one, both instantUpstream, taking
// bodies of up to 256 MiB.
func growthGateway(t *testing.T) *Gateway {
	t.Helper()
	up := instantUpstream(t)
	cfg := upstreamConfig("m", catalog.KindOpenAI, []string{up})
	claude := catalog.Pool{Name: "claude", Kind: catalog.KindAnthropic, Endpoints: []catalog.Endpoint{{URL: up}}}
	config.PoolDefaults(&claude)
	cfg.Pools = append(cfg.Pools, claude)
	cfg.Models = append(cfg.Models, catalog.Model{Name: "c", Pool: "claude"})
	cfg.Server.MaxBodyBytes = 256 << 20
	return startConfigured(t, cfg)
}

// repeat is n copies of item, each given its index, joined by commas.
func repeat(n int, item func(i int) string) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(item(i))
	}
	return b.String()
}

// growthPaths are the request paths, each with the body it is sent: a
// few fixed fields around n of its largest repeated part.
var growthPaths = []struct {
	name, path string
	body       func(n int) string
}{
	{"chat", "/chat/completions", func(n int) string {
		return `{"model":"m","messages":[` + repeat(n, func(i int) string {
			return fmt.Sprintf(`{"role":%q,"content":"message %d of the conversation"}`, [2]string{"user", "assistant"}[i%2], i)
		}) + `]}`
	}},
	{"completions", "/completions", func(n int) string {
		return `{"model":"m","max_tokens":1,"prompt":[` + repeat(n, func(i int) string { return fmt.Sprintf(`"prompt %d of the batch"`, i) }) + `]}`
	}},
	{"embeddings", "/embeddings", func(n int) string {
		return `{"model":"m","input":[` + repeat(n, func(i int) string { return fmt.Sprintf(`"input %d of the batch"`, i) }) + `]}`
	}},
	{"completions of token ids", "/completions", func(n int) string {
		return `{"model":"m","max_tokens":1,"prompt":[` + repeat(n, func(i int) string { return fmt.Sprintf(`[%d,17,4242,9]`, i) }) + `]}`
	}},
	{"embeddings of token ids", "/embeddings", func(n int) string {
		return `{"model":"m","input":[[` + repeat(n, func(i int) string { return fmt.Sprint(i) }) + `]]}`
	}},
	{"chat with billed fields to drop", "/chat/completions", func(n int) string {
		return `{"model":"m","service_tier":"priority","modalities":[` + repeat(n, func(int) string { return `"text"` }) + `,"audio"],` +
			`"context_management":{"edits":[` + repeat(n, func(i int) string { return fmt.Sprintf(`{"type":"clear_%d","keep":"all"}`, i) }) + `,{"type":"compact"}]},` +
			`"messages":[{"role":"user","content":"hi"}]}`
	}},
	{"messages", "/messages", func(n int) string {
		return `{"model":"m","max_tokens":16,"messages":[` + repeat(n, func(i int) string {
			return fmt.Sprintf(`{"role":%q,"content":"turn %d of the conversation"}`, [2]string{"user", "assistant"}[i%2], i)
		}) + `]}`
	}},
	{"messages content blocks", "/messages", func(n int) string {
		return `{"model":"m","max_tokens":16,"messages":[{"role":"user","content":[` + repeat(n, func(i int) string {
			return fmt.Sprintf(`{"type":"text","text":"block %d of the turn"}`, i)
		}) + `]}]}`
	}},
	{"count_tokens", "/messages/count_tokens", func(n int) string {
		return `{"model":"m","messages":[` + repeat(n, func(i int) string {
			return fmt.Sprintf(`{"role":%q,"content":[{"type":"text","text":"turn %d"},{"type":"text","text":"of the conversation"}]}`, [2]string{"user", "assistant"}[i%2], i)
		}) + `]}`
	}},
	{"count_tokens content blocks", "/messages/count_tokens", func(n int) string {
		return `{"model":"m","messages":[{"role":"user","content":[` + repeat(n, func(i int) string {
			return fmt.Sprintf(`{"type":"text","text":"block %d of the turn "}`, i)
		}) + `]}]}`
	}},
	{"responses", "/responses", func(n int) string {
		return `{"model":"m","max_output_tokens":16,"input":[` + repeat(n, func(i int) string {
			if i%2 == 1 {
				return fmt.Sprintf(`{"type":"function_call","call_id":"call_%d","name":"lookup","arguments":"{}"}`, i)
			}
			return fmt.Sprintf(`{"role":"user","content":[{"type":"input_text","text":"item %d of the input"}]}`, i)
		}) + `]}`
	}},
	{"chat to an anthropic pool", "/chat/completions", func(n int) string {
		return `{"model":"c","messages":[{"role":"user","content":"look these up"},{"role":"assistant","content":null,"tool_calls":[{"id":"t","type":"function","function":{"name":"lookup","arguments":"{}"}}]},` +
			repeat(n, func(i int) string {
				return fmt.Sprintf(`{"role":"tool","tool_call_id":"t%d","content":"result %d"}`, i, i)
			}) + `]}`
	}},
	{"messages to an anthropic pool", "/messages", func(n int) string {
		return `{"model":"c","max_tokens":16,"messages":[{"role":"user","content":"look these up"},{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"lookup","input":{}}]},{"role":"user","content":[` +
			repeat(n, func(i int) string {
				return fmt.Sprintf(`{"type":"tool_result","tool_use_id":"t%d","content":"result %d"}`, i, i)
			}) + `]}]}`
	}},
	{"responses to an anthropic pool", "/responses", func(n int) string {
		return `{"model":"c","max_output_tokens":16,"input":[{"role":"user","content":"look these up"},{"type":"function_call","call_id":"t","name":"lookup","arguments":"{}"},` +
			repeat(n, func(i int) string {
				return fmt.Sprintf(`{"type":"function_call_output","call_id":"t%d","output":"result %d"}`, i, i)
			}) + `]}`
	}},
}

// TestRequestPathsGrowLinearly sends each path bodies of n and 8n of its
// repeated part, through a gateway to an upstream that answers at once,
// and fails when the time or the bytes allocated grow far more than
// eightfold: what a quadratic parse, translation or count would do.
func TestRequestPathsGrowLinearly(t *testing.T) {
	g := growthGateway(t)
	client := &http.Client{}
	for _, p := range growthPaths {
		t.Run(p.name, func(t *testing.T) {
			lineartest.Linear(t, 64, func(t testing.TB, n int) func() {
				body := p.body(n)
				return func() {
					req, _ := http.NewRequest(http.MethodPost, g.URL()+p.path, strings.NewReader(body))
					req.Header.Set("Content-Type", "application/json")
					req.Header.Set("anthropic-version", "2023-06-01")
					resp, err := client.Do(req)
					if err != nil {
						t.Fatal(err)
					}
					answer, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						t.Fatalf("%d items: %d %s", n, resp.StatusCode, answer)
					}
				}
			})
		})
	}
}
