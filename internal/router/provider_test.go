package router

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"gitea.mynodes.xyz/ilker/llmgw/internal/config"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
)

// anthropicWire is a Messages API upstream answering with recorded wire
// from Anthropic's documentation: a message, a streamed message, and a
// streamed tool use when the request offers tools. It sends every body it
// reads to bodies and refuses a call without the pool's key and version.
type anthropicWire struct {
	t      *testing.T
	bodies chan []byte
}

func newAnthropicWire(t *testing.T) *anthropicWire {
	return &anthropicWire{t: t, bodies: make(chan []byte, 10)}
}

func (a *anthropicWire) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	a.bodies <- body
	if r.URL.Path != "/v1/messages" || r.Header.Get("x-api-key") != "sk-ant-test" || r.Header.Get("anthropic-version") != "2023-06-01" || r.Header.Get("Authorization") != "" {
		w.WriteHeader(401)
		io.WriteString(w, `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`)
		return
	}
	var req struct {
		Stream    bool              `json:"stream"`
		Tools     []json.RawMessage `json:"tools"`
		MaxTokens *int              `json:"max_tokens"`
	}
	json.Unmarshal(body, &req)
	if req.MaxTokens == nil {
		w.WriteHeader(400)
		io.WriteString(w, `{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: Field required"}}`)
		return
	}
	file := "testdata/anthropic-message.json"
	switch {
	case req.Stream && len(req.Tools) > 0:
		file = "testdata/anthropic-tool-stream.txt"
	case req.Stream:
		file = "testdata/anthropic-stream.txt"
	}
	wire, err := os.ReadFile(file)
	if err != nil {
		a.t.Error(err)
	}
	if req.Stream {
		w.Header().Set("Content-Type", "text/event-stream")
	} else {
		w.Header().Set("Content-Type", "application/json")
	}
	w.Write(wire)
}

var anthropicPool = catalog.Pool{Kind: catalog.KindAnthropic, APIKey: "sk-ant-test"}

// TestAnthropicPoolCountsAsChat streams from a pool of kind anthropic to
// a chat client, a Responses client and an Anthropic client: all three
// are counted as chat, from the provider's own usage. The Anthropic
// client's body goes upstream as it came.
func TestAnthropicPoolCountsAsChat(t *testing.T) {
	const chat = `{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":10,"stream":true,"stream_options":{"include_usage":true}}`
	up := newAnthropicWire(t)
	answer, want := serveAndAccountOn(t, up, up.bodies, anthropicPool, "/v1/chat/completions", chat, nil)
	if rec := want.Records[0]; rec.PromptTokens != 25 || rec.CompletionTokens != 15 || rec.Estimated || want.Samples["llmgw_inter_token_seconds"] != 1 || want.Settled[0] != 40 {
		t.Errorf("the chat stream was counted as %+v", want)
	}
	if sent := want.Upstream[0]; sent != `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hi"}],"stream":true}` {
		t.Errorf("the Messages API request: %s", sent)
	}
	for _, piece := range []string{`"content":"Hello"`, `"content":"!"`, `"finish_reason":"stop"`, `"prompt_tokens":25`, "data: [DONE]\n\n"} {
		if !strings.Contains(answer, piece) {
			t.Errorf("the chat stream has no %s:\n%s", piece, answer)
		}
	}
	for _, c := range []struct {
		path, body string
		header     http.Header
		last       string
	}{
		{"/v1/responses", `{"model":"m","input":"hi","max_output_tokens":10,"stream":true}`, nil, "event: response.completed\n"},
		{"/v1/messages", `{"model":"m","max_tokens":10,"stream":true,"messages":[{"role":"user","content":"hi"}]}`,
			http.Header{"Anthropic-Version": {"2023-06-01"}}, "event: message_stop\n"},
	} {
		t.Run(c.path, func(t *testing.T) {
			up := newAnthropicWire(t)
			answer, got := serveAndAccountOn(t, up, up.bodies, anthropicPool, c.path, c.body, c.header)
			want := want
			if c.path == "/v1/messages" {
				want.Upstream = []string{c.body}
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("counted differently from chat (-chat +%s):\n%s", c.path, diff)
			}
			if !strings.Contains(answer, c.last) || !strings.Contains(answer, "Hello") {
				t.Errorf("answer:\n%s", answer)
			}
		})
	}
}

// TestAnthropicPoolWithOfficialClient serves the official OpenAI SDK's
// chat completions, whole and streamed with a tool call, and its
// streamed Responses, from a pool of kind anthropic.
func TestAnthropicPoolWithOfficialClient(t *testing.T) {
	up := newAnthropicWire(t)
	g := newTestGateway(t, func(c *config.Config) {
		c.Pools[0].Kind, c.Pools[0].APIKey = catalog.KindAnthropic, "sk-ant-test"
	}, up)
	client := openai.NewClient(option.WithBaseURL(g.url+"/v1"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	ctx := t.Context()
	ask := openai.ChatCompletionNewParams{Model: "m", Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("Be brief."), openai.UserMessage("Hello")}}

	c, err := client.Chat.Completions.New(ctx, ask)
	if err != nil {
		t.Fatal(err)
	}
	if c.Choices[0].Message.Content != "Hi! My name is Claude." || c.Choices[0].FinishReason != "stop" || c.Usage.PromptTokens != 2095 || c.Usage.CompletionTokens != 503 {
		t.Errorf("%s", c.RawJSON())
	}
	sent := <-up.bodies
	if want := `{"model":"org/m-8b","max_tokens":1024,"system":"Be brief.","messages":[{"role":"user","content":"Hello"}]}`; string(sent) != want {
		t.Errorf("the Messages API request\n%s\nwant\n%s", sent, want)
	}

	withTool := ask
	withTool.Tools = []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{Name: "get_weather"})}
	m := streamedChoice(t, ctx, client, withTool)
	if m.Message.Content != "Okay, let's check the weather." || m.FinishReason != "tool_calls" || len(m.Message.ToolCalls) != 1 ||
		m.Message.ToolCalls[0].Function.Arguments != `{"location": "San Francisco, CA"}` || m.Message.ToolCalls[0].ID != "toolu_01T1x1fJ34qAmk2tNTrN7Up6" {
		t.Errorf("accumulated %+v", m)
	}

	rs := client.Responses.NewStreaming(ctx, responsesParams("Hello"))
	var text string
	for rs.Next() {
		if ev := rs.Current(); ev.Type == "response.completed" {
			text = ev.Response.OutputText()
			if ev.Response.Usage.InputTokens != 25 || ev.Response.Usage.OutputTokens != 15 {
				t.Errorf("usage %s", ev.Response.Usage.RawJSON())
			}
		}
	}
	if rs.Err() != nil || text != "Hello!" {
		t.Errorf("text %q, err %v", text, rs.Err())
	}

	// The provider's refusal reaches the client in the client's shape.
	resp, body := g.post(t, "/v1/embeddings", `{"model":"m","input":"x"}`)
	if resp.StatusCode != 400 || !strings.Contains(body, "has no embeddings") {
		t.Errorf("embeddings on an anthropic pool: %d %s", resp.StatusCode, body)
	}
}

// TestAzurePool calls a deployment with the api-version and the key as
// api-key.
func TestAzurePool(t *testing.T) {
	seen := make(chan *http.Request, 1)
	up := &upstream{tokens: 2}
	g := newTestGateway(t, func(c *config.Config) {
		c.Pools[0].Kind, c.Pools[0].APIKey, c.Pools[0].APIVersion = catalog.KindAzure, "azure-key", "2024-10-21"
		c.Models[0].Upstream = "gpt-4o deploy"
	}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r
		up.ServeHTTP(w, r)
	}))
	resp, body := g.post(t, "/v1/chat/completions", `{"model":"m","messages":[]}`)
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	r := <-seen
	if got, want := r.URL.RequestURI(), "/v1/openai/deployments/gpt-4o%20deploy/chat/completions?api-version=2024-10-21"; got != want {
		t.Errorf("called %s, want %s", got, want)
	}
	if r.Header.Get("api-key") != "azure-key" || r.Header.Get("Authorization") != "" {
		t.Errorf("headers %v", r.Header)
	}
}

func responsesParams(input string) responses.ResponseNewParams {
	return responses.ResponseNewParams{Model: "m", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(input)}}
}

// TestAnthropicVersionUpstream sends an Anthropic client's version to an
// anthropic pool that sets none, and the pool's own when it sets one.
func TestAnthropicVersionUpstream(t *testing.T) {
	for _, c := range []struct{ pool, client, want string }{
		{"", "2023-06-01", "2023-06-01"},
		{"", "2025-01-01", "2025-01-01"},
		{"2023-06-01", "2025-01-01", "2023-06-01"},
	} {
		seen := make(chan string, 1)
		g := newTestGateway(t, func(cfg *config.Config) {
			cfg.Pools[0].Kind, cfg.Pools[0].APIVersion = catalog.KindAnthropic, c.pool
		}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			seen <- r.Header.Get("anthropic-version")
			w.Header().Set("Content-Type", "application/json")
			wire, _ := os.ReadFile("testdata/anthropic-message.json")
			w.Write(wire)
		}))
		req, _ := http.NewRequest(http.MethodPost, g.url+"/v1/messages", strings.NewReader(`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`))
		req.Header.Set("anthropic-version", c.client)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if got := <-seen; resp.StatusCode != 200 || got != c.want {
			t.Errorf("pool %q, client %q: upstream got %q, want %q (%d %s)", c.pool, c.client, got, c.want, resp.StatusCode, body)
		}
	}
}

// streamedChoice is the first choice of a streamed chat completion asked
// of client with params, its chunks put together by the SDK's own
// accumulator.
func streamedChoice(t *testing.T, ctx context.Context, client openai.Client, params openai.ChatCompletionNewParams) openai.ChatCompletionChoice {
	t.Helper()
	s := client.Chat.Completions.NewStreaming(ctx, params)
	var acc openai.ChatCompletionAccumulator
	for s.Next() {
		acc.AddChunk(s.Current())
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	if len(acc.Choices) == 0 {
		t.Fatal("the stream had no choice")
	}
	return acc.Choices[0]
}
