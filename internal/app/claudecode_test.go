package app

// Claude Code's requests through the gateway, over real sockets: its first
// request of a session as captured (testdata/claude-code-request.txt) and
// what later requests add, to every pool kind; its thinking told to each
// kind in the kind's terms; a backend's reasoning answered as thinking
// blocks, or not at all when the request's display is omitted; an
// anthropic pool sent the client's own body and its signed thinking
// blocks sent back whole.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// claudeCodeRequest is the first request of a session of Claude Code
// 2.1.332 (`claude -p`, model claude-opus-4-5), as captured: its path,
// headers and body, the system prompt, reminders and tool descriptions
// cut short, every field and tool shape kept.
func claudeCodeRequest(t *testing.T) (path string, header http.Header, body []byte) {
	t.Helper()
	raw, err := os.ReadFile("testdata/claude-code-request.txt")
	if err != nil {
		t.Fatal(err)
	}
	head, body, ok := bytes.Cut(raw, []byte("\n\n"))
	if !ok {
		t.Fatal("testdata/claude-code-request.txt: no blank line after the headers")
	}
	lines := strings.Split(string(head), "\n")
	header = http.Header{}
	for _, l := range lines[1:] {
		k, v, _ := strings.Cut(l, ": ")
		header.Add(k, v)
	}
	return lines[0], header, bytes.TrimSpace(body)
}

// newServer serves h on a loopback port until the test ends, and returns
// its URL.
func newServer(t *testing.T, h http.Handler) string {
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return s.URL
}

// editJSON is body, a JSON object, with each member of set set (a nil
// value removes it).
func editJSON(t *testing.T, body []byte, set map[string]any) []byte {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	for k, v := range set {
		if v == nil {
			delete(m, k)
			continue
		}
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		m[k] = b
	}
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// recordingUpstream is a backend of any pool kind: it keeps every request
// it reads (path, headers, body) and answers in the pool's API, a short
// text, whole or streamed; on a path ending in /messages as Anthropic
// does, and otherwise as chat completions do.
type recordingUpstream struct {
	mu   sync.Mutex
	seen []*recorded
}

type recorded struct {
	path   string
	header http.Header
	body   []byte
}

func (u *recordingUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if !strings.HasSuffix(r.URL.Path, "/messages") && !strings.HasSuffix(r.URL.Path, "/completions") && !strings.HasSuffix(r.URL.Path, "/embeddings") {
		return // health checks and scrapes
	}
	u.mu.Lock()
	u.seen = append(u.seen, &recorded{r.URL.Path, r.Header.Clone(), body})
	u.mu.Unlock()
	var req struct {
		Stream bool `json:"stream"`
	}
	json.Unmarshal(body, &req)
	switch {
	case strings.HasSuffix(r.URL.Path, "/messages") && req.Stream:
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, anthropicTextStream)
	case strings.HasSuffix(r.URL.Path, "/messages"):
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"msg_1","type":"message","role":"assistant","model":"claude","content":[{"type":"text","text":"OK."}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":10,"output_tokens":2}}`)
	case req.Stream:
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"OK."},"finish_reason":"stop"}]}`+"\n\n"+
			`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":10,"completion_tokens":2,"total_tokens":12}}`+"\n\ndata: [DONE]\n\n")
	default:
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"OK."},"finish_reason":"stop"}],"usage":{"prompt_tokens":10,"completion_tokens":2,"total_tokens":12}}`)
	}
}

const anthropicTextStream = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":10,\"output_tokens\":1}}}\n\n" +
	"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
	"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"OK.\"}}\n\n" +
	"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
	"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":2}}\n\n" +
	"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"

// calls is how many requests u has read.
func (u *recordingUpstream) calls() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.seen)
}

// last is the latest request u read.
func (u *recordingUpstream) last(t *testing.T) *recorded {
	t.Helper()
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.seen) == 0 {
		t.Fatal("the upstream was not called")
	}
	return u.seen[len(u.seen)-1]
}

// startKindGateway is a gateway with no keys serving model "coder",
// alias claude-opus-4-5 (what Claude Code asks for), upstream name
// "up/coder", from a pool of kind in front of u, with the key sk-up.
func startKindGateway(t *testing.T, kind string, u http.Handler) *Gateway {
	t.Helper()
	s := newServer(t, u)
	t.Setenv("LLMGW_TEST_UPSTREAM_KEY", "sk-up")
	version := ""
	if kind == "azure" {
		version = "api_version: 2024-10-21, "
	}
	return startYAML(t, fmt.Sprintf(`
router: {auth: none}
store: {url: "memory:"}
pools:
  - {name: p, kind: %s, %sapi_key_env: LLMGW_TEST_UPSTREAM_KEY, endpoints: [{url: %q}]}
models:
  - {name: coder, aliases: [claude-opus-4-5], pool: p, upstream_model: up/coder}
`, kind, version, s+"/v1"))
}

// TestClaudeCodeRequest sends Claude Code's first request, as captured
// (path with ?beta=true, its headers, every field of its body), and
// variations of it as later requests and other settings make them, to a
// vllm pool: each is translated, nothing is refused but what chat cannot
// carry, and the chat body says what each field maps to.
func TestClaudeCodeRequest(t *testing.T) {
	path, header, captured := claudeCodeRequest(t)
	up := &recordingUpstream{}
	base := strings.TrimSuffix(startKindGateway(t, "vllm", up).URL(), "/v1")
	var first struct {
		Messages []json.RawMessage `json:"messages"`
	}
	json.Unmarshal(captured, &first)
	// messages is the captured conversation with more turns after it.
	messages := func(more ...string) []json.RawMessage {
		out := append([]json.RawMessage(nil), first.Messages...)
		for _, m := range more {
			out = append(out, json.RawMessage(m))
		}
		return out
	}
	for _, c := range []struct {
		name   string
		set    map[string]any // members of the captured body replaced, or removed when nil
		status int
		// want are values the chat body sent upstream holds, by JSON
		// pointer-like path ("chat_template_kwargs.enable_thinking"),
		// marshalled; "-" means absent.
		want map[string]string
		// refusal is in the error's message.
		refusal string
	}{
		{name: "as captured", status: 200, want: map[string]string{
			"model": `"up/coder"`, "max_tokens": `32000`, "stream": `true`, "stream_options": `{"include_usage":true}`,
			"chat_template_kwargs": `{"enable_thinking":true}`,
			"user":                 `"{\"device_id\":\"819f9c04a35849ec0a3615ac0f17f7b9ca271b42bcb25c0bbcd67ecf0551a693\",\"account_uuid\":\"\",\"session_id\":\"b1be892d-4dd5-405e-b08d-426916ad61b5\"}"`,
			"thinking":             "-", "context_management": "-", "output_config": "-", "metadata": "-", "reasoning_effort": "-",
			"tools.length": "12", "messages.0.role": `"system"`, "messages.1.role": `"user"`, "messages.length": "2",
		}},
		{name: "not streamed", set: map[string]any{"stream": false}, status: 200, want: map[string]string{"stream": "-", "stream_options": "-"}},
		{name: "adaptive thinking", set: map[string]any{"thinking": map[string]any{"type": "adaptive", "display": "omitted"}}, status: 200,
			want: map[string]string{"chat_template_kwargs": `{"enable_thinking":true}`}},
		{name: "thinking disabled", set: map[string]any{"thinking": map[string]any{"type": "disabled"}}, status: 200,
			want: map[string]string{"chat_template_kwargs": `{"enable_thinking":false}`}},
		{name: "no thinking", set: map[string]any{"thinking": nil, "output_config": nil}, status: 200,
			want: map[string]string{"chat_template_kwargs": "-", "reasoning_effort": "-"}},
		{name: "a system message after the user's turn", status: 200,
			set:  map[string]any{"messages": messages(`{"role":"system","content":"The user prefers short answers."}`)},
			want: map[string]string{"messages.length": "3", "messages.2.role": `"system"`, "messages.2.content": `"The user prefers short answers."`}},
		{name: "a system message of text blocks, later in a tool loop", status: 200,
			set: map[string]any{"messages": messages(
				`{"role":"assistant","content":[{"type":"thinking","thinking":"","signature":"c2ln"},{"type":"tool_use","id":"toolu_1","name":"Bash","input":{"command":"echo hello"}}]}`,
				`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"hello","cache_control":{"type":"ephemeral"}}]}`,
				`{"role":"system","content":[{"type":"text","text":"Context left: 90%.","cache_control":{"type":"ephemeral"}}],"clear_at":"next_user_message"}`)},
			want: map[string]string{"messages.length": "5", "messages.2.role": `"assistant"`, "messages.3.role": `"tool"`, "messages.3.content": `"hello"`,
				"messages.4.role": `"system"`, "messages.4.content": `[{"text":"Context left: 90%.","type":"text"}]`}},
		{name: "a system message changing tools", status: 200,
			set: map[string]any{"messages": messages(
				`{"role":"system","content":[{"type":"tool_removal","tool":{"type":"tool_reference","name":"Agent"}},{"type":"tool_addition","tool":{"type":"tool_definition","definition":{"name":"WebFetch","description":"Fetch a URL.","input_schema":{"type":"object"},"defer_loading":true}}}]}`,
				`{"role":"system","content":[],"output_config":{"effort":"low"}}`)},
			want: map[string]string{"messages.length": "2", "tools.length": "12", "tools.0.function.name": `"Bash"`, "tools.11.function.name": `"WebFetch"`}},
		{name: "a tool search's result", status: 200,
			set: map[string]any{"messages": messages(
				`{"role":"assistant","content":[{"type":"tool_use","id":"toolu_2","name":"ToolSearch","input":{"query":"select:WebFetch"}}]}`,
				`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_2","content":[{"type":"tool_reference","tool_name":"WebFetch"}]}]}`)},
			want: map[string]string{"messages.3.role": `"tool"`, "messages.3.content": `"WebFetch"`}},
		{name: "fields with no chat equivalent", status: 200,
			set: map[string]any{"container": "container_1", "mcp_servers": []any{map[string]any{"type": "url", "url": "https://mcp.example", "name": "x"}},
				"service_tier": "auto", "metadata": map[string]any{"user_id": "u-1", "other": 1}, "context_management": map[string]any{"edits": []any{}},
				"output_config": map[string]any{"effort": "high", "format": map[string]any{"type": "json_schema", "schema": map[string]any{}}}},
			want: map[string]string{"user": `"u-1"`, "container": "-", "mcp_servers": "-", "service_tier": "-"}},
		{name: "a document block, still refused", status: 400, refusal: "messages[2].content[0].type",
			set: map[string]any{"messages": messages(`{"role":"assistant","content":"Send it."}`,
				`{"role":"user","content":[{"type":"document","source":{"type":"text","media_type":"text/plain","data":"x"}}]}`)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			body := captured
			if c.set != nil {
				body = editJSON(t, captured, c.set)
			}
			status, answer := post(t, base+path, string(body), header)
			if status != c.status {
				t.Fatalf("status %d, want %d: %s", status, c.status, answer)
			}
			if c.refusal != "" {
				if !strings.Contains(answer, c.refusal) || !strings.Contains(answer, `"type":"error"`) {
					t.Errorf("refusal %s does not name %s", answer, c.refusal)
				}
				return
			}
			sent := up.last(t)
			var chat any
			if err := json.Unmarshal(sent.body, &chat); err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for p := range c.want {
				got[p] = pointer(chat, p)
			}
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("the chat body sent (-want +got):\n%s\n%s", diff, sent.body)
			}
		})
	}
}

// pointer is the value at path p (members and array indexes joined by
// dots, or ".length" of an array) in v, marshalled; "-" when absent.
func pointer(v any, p string) string {
	for _, k := range strings.Split(p, ".") {
		switch x := v.(type) {
		case map[string]any:
			var ok bool
			if v, ok = x[k]; !ok {
				return "-"
			}
		case []any:
			if k == "length" {
				return fmt.Sprint(len(x))
			}
			var i int
			if _, err := fmt.Sscan(k, &i); err != nil || i >= len(x) {
				return "-"
			}
			v = x[i]
		default:
			return "-"
		}
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// TestReasoningPerPoolKind sends a Messages request's thinking to a pool
// of every kind: each is told in its own terms, and a request that says
// nothing of thinking gets nothing added.
func TestReasoningPerPoolKind(t *testing.T) {
	const hi = `"messages":[{"role":"user","content":"hi"}]`
	requests := []struct{ name, body string }{
		{"enabled, effort high", `{"model":"coder","max_tokens":32000,"thinking":{"type":"enabled","budget_tokens":31999},"output_config":{"effort":"high"},` + hi + `}`},
		{"enabled, small budget", `{"model":"coder","max_tokens":4000,"thinking":{"type":"enabled","budget_tokens":2048},` + hi + `}`},
		{"enabled, mid budget", `{"model":"coder","max_tokens":16000,"thinking":{"type":"enabled","budget_tokens":8000,"display":"omitted"},` + hi + `}`},
		{"adaptive, effort max", `{"model":"coder","max_tokens":100,"thinking":{"type":"adaptive"},"output_config":{"effort":"max"},` + hi + `}`},
		{"adaptive", `{"model":"coder","max_tokens":100,"thinking":{"type":"adaptive","display":"omitted"},` + hi + `}`},
		{"disabled", `{"model":"coder","max_tokens":100,"thinking":{"type":"disabled"},"output_config":{"effort":"low"},` + hi + `}`},
		{"none", `{"model":"coder","max_tokens":100,"output_config":{"effort":"low"},` + hi + `}`},
	}
	// What each kind is sent for each request, in the order above:
	// the field that carries reasoning, marshalled with its keys sorted;
	// "-" when absent.
	for _, k := range []struct {
		kind  string
		field string
		want  []string
	}{
		{"vllm", "chat_template_kwargs", []string{`{"enable_thinking":true}`, `{"enable_thinking":true}`, `{"enable_thinking":true}`, `{"enable_thinking":true}`, `{"enable_thinking":true}`, `{"enable_thinking":false}`, "-"}},
		{"sglang", "chat_template_kwargs", []string{`{"enable_thinking":true}`, `{"enable_thinking":true}`, `{"enable_thinking":true}`, `{"enable_thinking":true}`, `{"enable_thinking":true}`, `{"enable_thinking":false}`, "-"}},
		{"openai", "reasoning_effort", []string{`"high"`, `"low"`, `"medium"`, `"high"`, "-", "-", "-"}},
		{"azure", "reasoning_effort", []string{`"high"`, `"low"`, `"medium"`, `"high"`, "-", "-", "-"}},
		{"anthropic", "thinking", []string{`{"budget_tokens":31999,"type":"enabled"}`, `{"budget_tokens":2048,"type":"enabled"}`,
			`{"budget_tokens":8000,"display":"omitted","type":"enabled"}`, `{"type":"adaptive"}`, `{"display":"omitted","type":"adaptive"}`, `{"type":"disabled"}`, "-"}},
	} {
		t.Run(k.kind, func(t *testing.T) {
			up := &recordingUpstream{}
			base := strings.TrimSuffix(startKindGateway(t, k.kind, up).URL(), "/v1")
			for i, r := range requests {
				status, answer := post(t, base+"/v1/messages", r.body, http.Header{"Anthropic-Version": {"2023-06-01"}})
				if status != 200 {
					t.Fatalf("%s: %d %s", r.name, status, answer)
				}
				var sent any
				json.Unmarshal(up.last(t).body, &sent)
				got := pointer(sent, k.field)
				if got != k.want[i] {
					t.Errorf("%s: %s sent %s, want %s", r.name, k.field, got, k.want[i])
				}
				for _, other := range []string{"chat_template_kwargs", "reasoning_effort", "thinking"} {
					if other != k.field && pointer(sent, other) != "-" {
						t.Errorf("%s: %s sent to a pool of kind %s: %s", r.name, other, k.kind, up.last(t).body)
					}
				}
			}
		})
	}
}

// TestClaudeCodeToAnthropicPool sends Claude Code's request to an
// anthropic pool: its own body goes, the model renamed and max_tokens the
// bound reserved, with its anthropic-beta; nothing is lost on a way
// through chat.
func TestClaudeCodeToAnthropicPool(t *testing.T) {
	path, header, captured := claudeCodeRequest(t)
	up := &recordingUpstream{}
	base := strings.TrimSuffix(startKindGateway(t, "anthropic", up).URL(), "/v1")
	for _, stream := range []bool{true, false} {
		body := captured
		if !stream {
			body = bytes.Replace(captured, []byte(`"stream":true`), []byte(`"stream":false`), 1)
		}
		status, answer := post(t, base+path, string(body), header)
		if status != 200 || !strings.Contains(answer, "OK.") {
			t.Fatalf("stream %v: %d %s", stream, status, answer)
		}
		sent := up.last(t)
		want := bytes.Replace(body, []byte(`"model":"claude-opus-4-5"`), []byte(`"model":"up/coder"`), 1)
		if !bytes.Equal(sent.body, want) {
			t.Errorf("stream %v: the anthropic pool was sent\n%s\nwant the client's body, renamed:\n%s", stream, sent.body, want)
		}
		if got := sent.header.Get("anthropic-beta"); got != header.Get("anthropic-beta") || sent.header.Get("anthropic-version") != "2023-06-01" ||
			sent.header.Get("x-api-key") != "sk-up" || sent.path != "/v1/messages" {
			t.Errorf("stream %v: %s with headers %v", stream, sent.path, sent.header)
		}
	}
}

// TestAnthropicPoolGetsNoServerTools: a Messages client's server tools,
// which run and are billed on the pool's account, are dropped from the
// body an anthropic pool is sent, as from what any other pool is offered,
// and so are its MCP servers; the answer names what was dropped.
func TestAnthropicPoolGetsNoServerTools(t *testing.T) {
	up := &recordingUpstream{}
	base := strings.TrimSuffix(startKindGateway(t, "anthropic", up).URL(), "/v1")
	header := http.Header{"Anthropic-Version": {"2023-06-01"}, "Content-Type": {"application/json"}}
	for _, tc := range []struct {
		name, body, want, dropped string
	}{
		{"server tools", `{"model":"claude-opus-4-5","max_tokens":50,"tools":[{"name":"Bash","input_schema":{"type":"object"}},{"type":"web_search_20250305","name":"web_search","max_uses":5}],"messages":[{"role":"user","content":"hi"}]}`,
			`{"model":"up/coder","max_tokens":50,"tools":[{"name":"Bash","input_schema":{"type":"object"}}],"messages":[{"role":"user","content":"hi"}]}`, "web_search_20250305"},
		{"only server tools", `{"model":"claude-opus-4-5","max_tokens":50,"tools":[{"type":"code_execution_20250825","name":"code_execution"}],"messages":[{"role":"user","content":"hi"}]}`,
			`{"model":"up/coder","max_tokens":50,"messages":[{"role":"user","content":"hi"}]}`, "code_execution_20250825"},
		{"MCP servers", `{"model":"claude-opus-4-5","max_tokens":50,"mcp_servers":[{"type":"url","url":"https://example.com/sse","name":"x"}],"messages":[{"role":"user","content":"hi"}]}`,
			`{"model":"up/coder","max_tokens":50,"messages":[{"role":"user","content":"hi"}]}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodPost, base+"/v1/messages", strings.NewReader(tc.body))
			req.Header = header
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			answer, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("%d %s", resp.StatusCode, answer)
			}
			if sent := up.last(t); string(sent.body) != tc.want {
				t.Errorf("the anthropic pool was sent\n%s\nwant\n%s", sent.body, tc.want)
			}
			if got := resp.Header.Get("X-Llmgw-Dropped-Tools"); got != tc.dropped {
				t.Errorf("X-Llmgw-Dropped-Tools %q, want %q", got, tc.dropped)
			}
		})
	}
}

// signedThinkingStream is an anthropic pool's streamed answer with
// interleaved thinking: a signed thinking block, a redacted one, text and
// a tool use.
const signedThinkingStream = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":10,\"output_tokens\":1}}}\n\n" +
	"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"thinking\",\"thinking\":\"\",\"signature\":\"\"}}\n\n" +
	"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"Run it.\"}}\n\n" +
	"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"signature_delta\",\"signature\":\"EqQBCkYIBxgCKkA=\"}}\n\n" +
	"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
	"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"redacted_thinking\",\"data\":\"EmwKAhgBEgy3va3pzix/LafPsn4a\"}}\n\n" +
	"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}\n\n" +
	"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":2,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
	"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":2,\"delta\":{\"type\":\"text_delta\",\"text\":\"Running.\"}}\n\n" +
	"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":2}\n\n" +
	"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":3,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"Bash\",\"input\":{}}}\n\n" +
	"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":3,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"command\\\":\\\"echo hello\\\"}\"}}\n\n" +
	"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":3}\n\n" +
	"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":40}}\n\n" +
	"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"

// signedThinkingMessage is the same answer whole.
const signedThinkingMessage = `{"id":"msg_1","type":"message","role":"assistant","model":"claude","content":[` +
	`{"type":"thinking","thinking":"Run it.","signature":"EqQBCkYIBxgCKkA="},{"type":"redacted_thinking","data":"EmwKAhgBEgy3va3pzix/LafPsn4a"},` +
	`{"type":"text","text":"Running."},{"type":"tool_use","id":"toolu_1","name":"Bash","input":{"command":"echo hello"}}],` +
	`"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":10,"output_tokens":40}}`

// TestAnthropicPoolThinkingBlocks answers a Messages client from an
// anthropic pool's thinking: each thinking block with its signature and
// each redacted block reaches the client whole, streamed and not, so that
// it can send them back in the next turn as the provider requires.
func TestAnthropicPoolThinkingBlocks(t *testing.T) {
	s := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if !strings.HasSuffix(r.URL.Path, "/messages") {
			return
		}
		if bytes.Contains(body, []byte(`"stream":true`)) {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, signedThinkingStream)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, signedThinkingMessage)
	}))
	g := startYAML(t, fmt.Sprintf(`
router: {auth: none}
store: {url: "memory:"}
pools:
  - {name: p, kind: anthropic, endpoints: [{url: %q}]}
models:
  - {name: claude, pool: p}
`, s+"/v1"))
	base := strings.TrimSuffix(g.URL(), "/v1")
	header := http.Header{"Anthropic-Version": {"2023-06-01"}}
	const ask = `{"model":"claude","max_tokens":1000,"thinking":{"type":"enabled","budget_tokens":500},"messages":[{"role":"user","content":"Say hello."}]`
	want := []any{
		map[string]any{"type": "thinking", "thinking": "Run it.", "signature": "EqQBCkYIBxgCKkA="},
		map[string]any{"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4a"},
		map[string]any{"type": "text", "text": "Running."},
		map[string]any{"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": map[string]any{"command": "echo hello"}},
	}

	t.Run("whole", func(t *testing.T) {
		status, answer := post(t, base+"/v1/messages", ask+"}", header)
		var m struct{ Content []any }
		if err := json.Unmarshal([]byte(answer), &m); status != 200 || err != nil {
			t.Fatalf("%d %s", status, answer)
		}
		if diff := cmp.Diff(want, m.Content); diff != "" {
			t.Errorf("content (-want +got):\n%s", diff)
		}
	})
	t.Run("streamed", func(t *testing.T) {
		status, answer := post(t, base+"/v1/messages", ask+`,"stream":true}`, header)
		if status != 200 {
			t.Fatalf("%d %s", status, answer)
		}
		if diff := cmp.Diff(want, accumulate(t, answer)); diff != "" {
			t.Errorf("content (-want +got):\n%s\n%s", diff, answer)
		}
	})
}

// accumulate is the content of a streamed Messages answer, its blocks
// built from their starts and deltas as Anthropic's SDKs build them.
func accumulate(t *testing.T, stream string) []any {
	t.Helper()
	var blocks []map[string]any
	partial := map[int]string{}
	sc := bufio.NewScanner(strings.NewReader(stream))
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var ev struct {
			Type         string
			Index        int
			ContentBlock map[string]any `json:"content_block"`
			Delta        map[string]any
		}
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			t.Fatalf("event %s: %v", data, err)
		}
		switch ev.Type {
		case "content_block_start":
			if ev.Index != len(blocks) {
				t.Fatalf("block %d started after %d blocks", ev.Index, len(blocks))
			}
			blocks = append(blocks, ev.ContentBlock)
		case "content_block_delta":
			b := blocks[ev.Index]
			switch ev.Delta["type"] {
			case "text_delta":
				b["text"] = b["text"].(string) + ev.Delta["text"].(string)
			case "thinking_delta":
				b["thinking"] = b["thinking"].(string) + ev.Delta["thinking"].(string)
			case "signature_delta":
				b["signature"] = ev.Delta["signature"]
			case "input_json_delta":
				partial[ev.Index] += ev.Delta["partial_json"].(string)
			}
		case "content_block_stop":
			if p, ok := partial[ev.Index]; ok {
				var input any
				json.Unmarshal([]byte(p), &input)
				blocks[ev.Index]["input"] = input
			}
		}
	}
	out := make([]any, len(blocks))
	for i, b := range blocks {
		out[i] = b
	}
	return out
}

// reasoningBackend answers every chat request with reasoning, under the
// field name field (reasoning_content, or reasoning as newer vLLM names
// it), then text: whole, or streamed a piece a chunk.
func reasoningBackend(field string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if !strings.HasSuffix(r.URL.Path, "/chat/completions") {
			return
		}
		const usage = `{"prompt_tokens":10,"completion_tokens":6,"total_tokens":16}`
		if !bytes.Contains(body, []byte(`"stream":true`)) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Hello.",%q:"Greet them."},"finish_reason":"stop"}],"usage":%s}`, field, usage)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for _, d := range []string{
			fmt.Sprintf(`{"role":"assistant","content":null,%q:"Greet"}`, field),
			fmt.Sprintf(`{%q:" them."}`, field),
			`{"content":"Hello."}`,
		} {
			fmt.Fprintf(w, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":%s,\"finish_reason\":null}]}\n\n", d)
		}
		fmt.Fprintf(w, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n")
		fmt.Fprintf(w, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[],\"usage\":%s}\n\ndata: [DONE]\n\n", usage)
	})
}

// TestReasoningAsThinking answers a reasoning backend's reasoning, by
// either of its names, as a thinking block before the text, streamed and
// not; and with none when the request's thinking display is omitted,
// the reasoning still counted in the usage.
func TestReasoningAsThinking(t *testing.T) {
	thought := map[string]any{"type": "thinking", "thinking": "Greet them.", "signature": ""}
	text := map[string]any{"type": "text", "text": "Hello."}
	for _, field := range []string{"reasoning_content", "reasoning"} {
		s := newServer(t, reasoningBackend(field))
		g := startYAML(t, fmt.Sprintf(`
router: {auth: none}
store: {url: "memory:"}
pools:
  - {name: p, kind: vllm, endpoints: [{url: %q}]}
models:
  - {name: qwen, pool: p}
`, s+"/v1"))
		base := strings.TrimSuffix(g.URL(), "/v1")
		header := http.Header{"Anthropic-Version": {"2023-06-01"}}
		for _, c := range []struct {
			name, thinking string
			want           []any
		}{
			{"shown", `{"type":"enabled","budget_tokens":1024}`, []any{thought, text}},
			{"summarized", `{"type":"adaptive","display":"summarized"}`, []any{thought, text}},
			{"omitted", `{"type":"enabled","budget_tokens":1024,"display":"omitted"}`, []any{text}},
			{"adaptive, omitted", `{"type":"adaptive","display":"omitted"}`, []any{text}},
		} {
			ask := `{"model":"qwen","max_tokens":100,"thinking":` + c.thinking + `,"messages":[{"role":"user","content":"Say hello."}]`
			t.Run(field+"/"+c.name+"/whole", func(t *testing.T) {
				status, answer := post(t, base+"/v1/messages", ask+"}", header)
				var m struct {
					Content []any
					Usage   struct {
						OutputTokens int `json:"output_tokens"`
					}
				}
				if err := json.Unmarshal([]byte(answer), &m); status != 200 || err != nil {
					t.Fatalf("%d %s", status, answer)
				}
				if diff := cmp.Diff(c.want, m.Content); diff != "" || m.Usage.OutputTokens != 6 {
					t.Errorf("content (-want +got):\n%s\n%s", diff, answer)
				}
			})
			t.Run(field+"/"+c.name+"/streamed", func(t *testing.T) {
				status, answer := post(t, base+"/v1/messages", ask+`,"stream":true}`, header)
				if status != 200 {
					t.Fatalf("%d %s", status, answer)
				}
				if diff := cmp.Diff(c.want, accumulate(t, answer)); diff != "" || !strings.Contains(answer, `"output_tokens":6`) {
					t.Errorf("content (-want +got):\n%s\n%s", diff, answer)
				}
			})
		}
	}
}

// webSearch is one of Anthropic's server tools, which runs, and is
// billed, on the account of the pool it is sent to.
const webSearch = `{"type":"web_search_20250305","name":"web_search","max_uses":5}`

// TestAnthropicPoolRefusesAmbiguousBodies refuses to send an anthropic
// pool a Messages body that gives the model, max_tokens, stream or tools
// twice, or in another case: the gateway resolved, reserved, relays and
// left server tools out of what encoding/json reads (the last, matched
// in any case), which the provider could read otherwise. The upstream is
// never called.
func TestAnthropicPoolRefusesAmbiguousBodies(t *testing.T) {
	up := &recordingUpstream{}
	base := strings.TrimSuffix(startKindGateway(t, "anthropic", up).URL(), "/v1")
	const hi = `"messages":[{"role":"user","content":"hi"}]`
	for _, c := range []struct{ body, param string }{
		{`{"model":"x-cheap","Model":"coder","max_tokens":5,` + hi + `}`, "model"},
		{`{"model":"coder","model":"claude-opus-4-5","max_tokens":5,` + hi + `}`, "model"},
		{`{"model":"coder","max_tokens":5,"max_tokens":50000,` + hi + `}`, "max_tokens"},
		{`{"model":"coder","max_tokens":5,"MAX_TOKENS":50000,` + hi + `}`, "max_tokens"},
		{`{"model":"coder","max_tokens":5,"stream":false,"Stream":true,` + hi + `}`, "stream"},
		// A server tool in a tool list given twice, or in another case, is
		// found by one decoder and not another.
		{`{"model":"coder","max_tokens":5,"tools":[` + webSearch + `],"tools":[],` + hi + `}`, "tools"},
		{`{"model":"coder","max_tokens":5,"tools":[],"tOols":[` + webSearch + `],` + hi + `}`, "tools"},
		{`{"model":"coder","max_tokens":5,"tools":[],"t\u006fols":[` + webSearch + `],` + hi + `}`, "tools"},
	} {
		status, answer := post(t, base+"/v1/messages", c.body, http.Header{"Anthropic-Version": {"2023-06-01"}})
		if status != 400 || !strings.Contains(answer, `"type":"invalid_request_error"`) || !strings.Contains(answer, "'"+c.param+"'") {
			t.Errorf("%s: %d %s", c.body, status, answer)
		}
	}
	up.mu.Lock()
	defer up.mu.Unlock()
	if len(up.seen) != 0 {
		t.Errorf("the upstream was sent %s", up.seen[0].body)
	}
}
