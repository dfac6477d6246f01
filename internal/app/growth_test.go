package app

// Every request path, whole and over real sockets, grows linearly with
// the largest repeated part of its body: a body of many messages, blocks
// or items must not cost a gateway minutes before any upstream sees it,
// nor be sent on as many times its size.

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"gitea.mynodes.xyz/ilker/llmgw/internal/config"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
	"gitea.mynodes.xyz/ilker/llmgw/internal/lineartest"
)

// instantUpstream answers every call at once, in the shape its path asks
// for, after reading the whole body, whose bytes it adds to read: an
// OpenAI-compatible server and a Messages API one in one.
func instantUpstream(t *testing.T, read *atomic.Int64) string {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		read.Add(n)
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
// pool and model c from an anthropic one, both instantUpstream adding
// the bytes they read to read, taking bodies of up to 256 MiB.
func growthGateway(t *testing.T, read *atomic.Int64) *Gateway {
	t.Helper()
	up := instantUpstream(t, read)
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
	{"responses namespace description", "/responses", func(n int) string {
		return namespaceRequest("m", 256<<10, n)
	}},
	{"responses namespace description to an anthropic pool", "/responses", func(n int) string {
		return namespaceRequest("c", 256<<10, n)
	}},
	{"responses to an anthropic pool", "/responses", func(n int) string {
		return `{"model":"c","max_output_tokens":16,"input":[{"role":"user","content":"look these up"},{"type":"function_call","call_id":"t","name":"lookup","arguments":"{}"},` +
			repeat(n, func(i int) string {
				return fmt.Sprintf(`{"type":"function_call_output","call_id":"t%d","output":"result %d"}`, i, i)
			}) + `]}`
	}},
}

// namespaceRequest is a Responses request for model of one namespace
// whose description, of description bytes, is shared by its n tools.
func namespaceRequest(model string, description, n int) string {
	return `{"model":"` + model + `","max_output_tokens":16,"input":"hi","tools":[{"type":"namespace","name":"ns","description":"` +
		strings.Repeat("d", description) + `","tools":[` + repeat(n, func(i int) string {
		return fmt.Sprintf(`{"type":"function","name":"f%d","description":"Tool %d.","parameters":{"type":"object"}}`, i, i)
	}) + `]}]}`
}

// maxGrowth is the most bytes a request may cost in what the gateway
// writes, its upstream's body and its client's answer, for each byte of
// its body: the bodies here are of items of a few dozen bytes, sent on
// at about their size.
const maxGrowth = 4

// TestRequestPathsGrowLinearly sends each path bodies of n and 8n of its
// repeated part, through a gateway to an upstream that answers at once,
// and fails when the time or the bytes allocated grow far more than
// eightfold, what a quadratic parse, translation or count would do; or
// when the body sent upstream and the answer are more than maxGrowth
// times the request's body, in all or in what the added items add, what a
// translation writing a shared field into every item would do.
func TestRequestPathsGrowLinearly(t *testing.T) {
	var read atomic.Int64
	g := growthGateway(t, &read)
	client := &http.Client{}
	for _, p := range growthPaths {
		t.Run(p.name, func(t *testing.T) {
			lineartest.LinearOutput(t, 64, maxGrowth, func(t testing.TB, n int) (int, func() int) {
				body := p.body(n)
				return len(body), func() int {
					before := read.Load()
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
					return int(read.Load()-before) + len(answer)
				}
			})
		})
	}
}

// TestTranslatedBodiesWithinMaxBodyBytes: a field many items share is
// sent upstream once, never once an item. A Responses request of one
// namespace of 64 tools sharing a description of 256 KiB is sent on at
// about its size to either pool kind, and one of 1 MiB and 256 tools
// costs the gateway a few times its size in memory. A request within
// server.max_body_bytes whose translation would pass it is refused with
// a 413, in its API's shape, as the translation is written: no upstream
// is called, on any path a translation is sent.
func TestTranslatedBodiesWithinMaxBodyBytes(t *testing.T) {
	const limit = 2 << 20
	up := &recordingUpstream{}
	u := newServer(t, up) + "/v1"
	g := startYAML(t, fmt.Sprintf(`
server: {max_body_bytes: %d}
router: {auth: none}
store: {url: "memory:"}
pools:
  - {name: gpu, endpoints: [{url: %q}]}
  - {name: claude, kind: anthropic, endpoints: [{url: %q}]}
models:
  - {name: m, pool: gpu}
  - {name: c, pool: claude}
`, limit, u, u))
	header := http.Header{"Content-Type": {"application/json"}, "Anthropic-Version": {"2023-06-01"}}
	post := func(path, body string) (int, string) {
		t.Helper()
		return send(t, http.MethodPost, g.URL()+strings.TrimPrefix(path, "/v1"), header, body)
	}
	calls := func() int {
		up.mu.Lock()
		defer up.mu.Unlock()
		return len(up.seen)
	}

	for _, model := range []string{"m", "c"} {
		body := namespaceRequest(model, 256<<10, 64)
		if status, answer := post("/v1/responses", body); status != http.StatusOK {
			t.Fatalf("model %s: %d %s", model, status, answer)
		}
		if sent := len(up.last(t).body); sent > len(body)*11/10 || sent > limit {
			t.Errorf("model %s: a request of %d bytes was sent upstream as %d", model, len(body), sent)
		}
	}

	body := namespaceRequest("m", 1<<20-256*100, 256)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	status, answer := post("/v1/responses", body)
	runtime.ReadMemStats(&after)
	if status != http.StatusOK {
		t.Fatalf("%d bytes: %d %s", len(body), status, answer)
	}
	// What the client, the gateway and the upstream allocate, in this one
	// process: about 20 times the body, where a description written into
	// every tool took 800.
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 32*uint64(len(body)) {
		t.Errorf("a request of %d bytes allocated %d, %d times its size", len(body), alloc, alloc/uint64(len(body)))
	}

	called := calls()
	for _, c := range []struct{ name, path, body, want string }{
		// Tools of 30 bytes, offered as functions of about 300.
		{"namespaced custom tools", "/v1/responses", `{"model":"m","input":"hi","tools":[{"type":"namespace","name":"ns","tools":[` +
			repeat(12000, func(i int) string { return fmt.Sprintf(`{"type":"custom","name":"t%d"}`, i) }) + `]}]}`,
			`"code":"request_too_large"`},
		// Blocks of 20 bytes, tool calls of 50.
		{"tool uses", "/v1/messages", `{"model":"m","max_tokens":16,"messages":[{"role":"assistant","content":[` +
			strings.Repeat(`{"type":"tool_use"},`, 60000) + `{"type":"text","text":"x"}]}]}`,
			`"type":"request_too_large"`},
		{"tool uses, counted", "/v1/messages/count_tokens", `{"model":"m","messages":[{"role":"assistant","content":[` +
			strings.Repeat(`{"type":"tool_use"},`, 60000) + `{"type":"text","text":"x"}]}]}`,
			`"type":"request_too_large"`},
		// To an anthropic pool: tool messages of 16 bytes, tool results
		// of 36; and a Responses request's function call outputs of 32,
		// tool messages of 29 in the chat body, which is within the
		// limit, and tool results of 36.
		{"tool messages to an anthropic pool", "/v1/chat/completions", `{"model":"c","messages":[` +
			strings.Repeat(`{"role":"tool"},`, 80000) + `{"role":"user","content":"x"}]}`,
			`"code":"request_too_large"`},
		{"tool outputs to an anthropic pool", "/v1/responses", `{"model":"c","input":[` +
			strings.Repeat(`{"type":"function_call_output"},`, 64000) + `{"role":"user","content":"x"}]}`,
			`"code":"request_too_large"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			if len(c.body) > limit {
				t.Fatalf("the body is %d bytes, past the limit itself", len(c.body))
			}
			if status, answer := post(c.path, c.body); status != http.StatusRequestEntityTooLarge || !strings.Contains(answer, c.want) {
				t.Errorf("%d bytes: %d %.300s; want 413 with %s", len(c.body), status, answer, c.want)
			}
		})
	}
	if n := calls() - called; n != 0 {
		t.Errorf("the upstream was called %d times for requests refused", n)
	}
}
