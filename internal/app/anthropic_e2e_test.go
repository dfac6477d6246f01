package app

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/google/go-cmp/cmp"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/keys"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/usage"
)

// anthropicClient is the official Anthropic SDK pointed at a gateway.
func anthropicClient(base string) anthropic.Client {
	return anthropic.NewClient(aoption.WithBaseURL(strings.TrimSuffix(base, "/v1")), aoption.WithAPIKey("unused"), aoption.WithMaxRetries(0))
}

// startFakeGateway is a gateway serving model "demo" from a fake vLLM.
func startFakeGateway(t *testing.T) (*fakeVLLM, *InProcess) {
	t.Helper()
	f, url := startFakeVLLM(t)
	g, err := StartGateway(t.Context(), GatewayOptions{Model: "demo", Upstreams: []string{url}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return f, g
}

var weatherTool = anthropic.ToolUnionParam{OfTool: &anthropic.ToolParam{
	Name:        "get_weather",
	Description: anthropic.String("The weather in a city."),
	InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{"city": map[string]any{"type": "string"}}, Required: []string{"city"}},
}}

// TestAnthropicClientOnSim runs the official Anthropic SDK against the
// demo setup: a gateway in front of simulated replicas.
func TestAnthropicClientOnSim(t *testing.T) {
	g, _ := startDemo(t)
	client := anthropicClient(g.URL())
	ctx := t.Context()
	params := anthropic.MessageNewParams{
		Model:     "demo",
		MaxTokens: 6,
		System:    []anthropic.TextBlockParam{{Text: "Be brief."}},
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Say hello in five words."))},
	}

	t.Run("plain", func(t *testing.T) {
		m, err := client.Messages.New(ctx, params)
		if err != nil {
			t.Fatal(err)
		}
		if len(m.Content) != 1 || m.Content[0].Type != "text" || m.Content[0].Text == "" || m.Model != "demo" ||
			m.Usage.InputTokens == 0 || m.Usage.OutputTokens == 0 || m.StopReason == "" || !strings.HasPrefix(m.ID, "msg_") {
			t.Errorf("%s", m.RawJSON())
		}
	})

	t.Run("streamed", func(t *testing.T) {
		s := client.Messages.NewStreaming(ctx, params)
		var m anthropic.Message
		var kinds []string
		for s.Next() {
			ev := s.Current()
			kinds = append(kinds, ev.Type)
			if err := m.Accumulate(ev); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Err(); err != nil {
			t.Fatal(err)
		}
		if len(m.Content) != 1 || m.Content[0].Text == "" || m.Usage.OutputTokens == 0 || m.Usage.InputTokens == 0 || m.StopReason == "" {
			t.Errorf("accumulated %+v", m)
		}
		if kinds[0] != "message_start" || kinds[1] != "content_block_start" || kinds[len(kinds)-1] != "message_stop" || kinds[len(kinds)-2] != "message_delta" {
			t.Errorf("events %v", kinds)
		}
	})

	t.Run("models", func(t *testing.T) {
		page, err := client.Models.List(ctx, anthropic.ModelListParams{})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Data) != 1 || page.Data[0].ID != "demo" || page.HasMore {
			t.Errorf("%s", page.RawJSON())
		}
	})

	t.Run("count tokens", func(t *testing.T) {
		n, err := client.Messages.CountTokens(ctx, anthropic.MessageCountTokensParams{
			Model:    "demo",
			Messages: params.Messages,
		})
		if err != nil {
			t.Fatal(err)
		}
		if n.InputTokens < 5 || n.InputTokens > 40 {
			t.Errorf("input_tokens %d for a five-word prompt", n.InputTokens)
		}
	})

	t.Run("unknown model", func(t *testing.T) {
		p := params
		p.Model = "claude-nonexistent"
		_, err := client.Messages.New(ctx, p)
		var apiErr *anthropic.Error
		if !errors.As(err, &apiErr) {
			t.Fatalf("error %v is not an *anthropic.Error", err)
		}
		if apiErr.StatusCode != http.StatusNotFound || apiErr.Type() != "not_found_error" || !strings.Contains(apiErr.Message, "claude-nonexistent") {
			t.Errorf("status %d type %q message %q", apiErr.StatusCode, apiErr.Type(), apiErr.Message)
		}
	})

	t.Run("wrong type", func(t *testing.T) {
		_, err := client.Messages.New(ctx, params, aoption.WithJSONSet("max_tokens", "ten"))
		var apiErr *anthropic.Error
		if !errors.As(err, &apiErr) {
			t.Fatalf("error %v is not an *anthropic.Error", err)
		}
		if apiErr.StatusCode != 400 || apiErr.Type() != "invalid_request_error" || apiErr.Message != "max_tokens: must be an integer, got a string" {
			t.Errorf("status %d type %q message %q", apiErr.StatusCode, apiErr.Type(), apiErr.Message)
		}
	})

	t.Run("no anthropic-version", func(t *testing.T) {
		resp, err := http.Post(g.URL()+"/messages", "application/json", strings.NewReader(`{"model":"demo","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		want := `{"type":"error","error":{"type":"invalid_request_error","message":"anthropic-version: header is required"}}`
		if resp.StatusCode != 400 || string(body) != want {
			t.Errorf("%d %s", resp.StatusCode, body)
		}
	})
}

// TestAnthropicClientTools runs the official Anthropic SDK's tool use
// against a gateway in front of a vLLM-style upstream: the tool call
// comes back as a tool_use block, whole and streamed, and the tool's
// result goes upstream as a tool message.
func TestAnthropicClientTools(t *testing.T) {
	f, g := startFakeGateway(t)
	client := anthropicClient(g.URL())
	ctx := t.Context()
	ask := anthropic.NewUserMessage(anthropic.NewTextBlock("What is the weather in Paris?"))
	params := anthropic.MessageNewParams{
		Model:      "demo",
		MaxTokens:  64,
		Messages:   []anthropic.MessageParam{ask},
		Tools:      []anthropic.ToolUnionParam{weatherTool},
		ToolChoice: anthropic.ToolChoiceUnionParam{OfAny: &anthropic.ToolChoiceAnyParam{}},
		Metadata:   anthropic.MetadataParam{UserID: anthropic.String("user-42")},
	}
	wantToolUse := func(t *testing.T, m *anthropic.Message) {
		t.Helper()
		if m.StopReason != anthropic.StopReasonToolUse || len(m.Content) != 1 {
			t.Fatalf("%s", m.RawJSON())
		}
		b := m.Content[0]
		if b.Type != "tool_use" || b.ID != fakeToolID || b.Name != "get_weather" || string(b.Input) != fakeToolArgs {
			t.Errorf("block %+v", b)
		}
		if m.Usage.InputTokens != fakePrompt-fakeCached || m.Usage.CacheReadInputTokens != fakeCached || m.Usage.OutputTokens != 7 {
			t.Errorf("usage %+v", m.Usage)
		}
	}

	t.Run("plain", func(t *testing.T) {
		m, err := client.Messages.New(ctx, params)
		if err != nil {
			t.Fatal(err)
		}
		wantToolUse(t, m)
		sent := f.last(t)
		if sent["tool_choice"] != "required" || sent["user"] != "user-42" || sent["max_tokens"] != 64.0 || sent["model"] != "demo" {
			t.Errorf("upstream got %v", sent)
		}
		tools, _ := json.Marshal(sent["tools"])
		if want := `[{"function":{"description":"The weather in a city.","name":"get_weather","parameters":{"properties":{"city":{"type":"string"}},"required":["city"],"type":"object"}},"type":"function"}]`; string(tools) != want {
			t.Errorf("tools sent\n%s\nwant\n%s", tools, want)
		}
	})

	t.Run("streamed", func(t *testing.T) {
		s := client.Messages.NewStreaming(ctx, params)
		var m anthropic.Message
		var deltas []string
		for s.Next() {
			ev := s.Current()
			if ev.Type == "content_block_delta" {
				deltas = append(deltas, ev.Delta.Type+":"+ev.Delta.PartialJSON)
			}
			if err := m.Accumulate(ev); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Err(); err != nil {
			t.Fatal(err)
		}
		wantToolUse(t, &m)
		if diff := cmp.Diff([]string{`input_json_delta:{"city":`, `input_json_delta:"Paris"}`}, deltas); diff != "" {
			t.Errorf("deltas (-want +got):\n%s", diff)
		}
	})

	t.Run("tool result", func(t *testing.T) {
		p := params
		p.ToolChoice = anthropic.ToolChoiceUnionParam{}
		p.Messages = []anthropic.MessageParam{
			ask,
			anthropic.NewAssistantMessage(anthropic.NewToolUseBlock(fakeToolID, map[string]string{"city": "Paris"}, "get_weather")),
			anthropic.NewUserMessage(anthropic.NewToolResultBlock(fakeToolID, "sunny, 24C", false), anthropic.NewTextBlock("Thanks.")),
		}
		p.StopSequences = []string{"Paris."}
		m, err := client.Messages.New(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if len(m.Content) != 1 || m.Content[0].Text != fakeText || m.StopReason != anthropic.StopReasonStopSequence || m.StopSequence != "Paris." {
			t.Errorf("%s", m.RawJSON())
		}
		msgs, _ := json.Marshal(f.last(t)["messages"])
		want := `[{"content":[{"text":"What is the weather in Paris?","type":"text"}],"role":"user"},` +
			`{"role":"assistant","tool_calls":[{"function":{"arguments":"{\"city\":\"Paris\"}","name":"get_weather"},"id":"chatcmpl-tool-7b1","type":"function"}]},` +
			`{"content":"sunny, 24C","role":"tool","tool_call_id":"chatcmpl-tool-7b1"},` +
			`{"content":[{"text":"Thanks.","type":"text"}],"role":"user"}]`
		if string(msgs) != want {
			t.Errorf("messages sent\n%s\nwant\n%s", msgs, want)
		}
	})

	t.Run("broken stream", func(t *testing.T) {
		f.cut = true
		defer func() { f.cut = false }()
		p := params
		p.Tools, p.ToolChoice = nil, anthropic.ToolChoiceUnionParam{}
		s := client.Messages.NewStreaming(ctx, p)
		var kinds []string
		for s.Next() {
			kinds = append(kinds, s.Current().Type)
		}
		var apiErr *anthropic.Error
		if !errors.As(s.Err(), &apiErr) || apiErr.Type() != "api_error" {
			t.Errorf("a cut stream ended with %v", s.Err())
		}
		for _, k := range kinds {
			if k == "message_stop" {
				t.Errorf("a cut stream sent message_stop: %v", kinds)
			}
		}
	})
}

// TestAnthropicClientWithKeys authenticates the Anthropic SDK by its
// x-api-key header, refuses a wrong key and a spent token limit in
// Anthropic's shape, and bills the message in the ledger.
func TestAnthropicClientWithKeys(t *testing.T) {
	g := startKeyed(t, "")
	key, id := g.newKey(t, keys.Spec{Tenant: "acme", TPM: 200})
	params := anthropic.MessageNewParams{
		Model:     "chat",
		MaxTokens: 8,
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hello there"))},
	}
	ctx := t.Context()
	client := anthropic.NewClient(aoption.WithBaseURL(strings.TrimSuffix(g.URL(), "/v1")), aoption.WithAPIKey(key), aoption.WithMaxRetries(0))
	m, err := client.Messages.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}

	var apiErr *anthropic.Error
	wrong := anthropic.NewClient(aoption.WithBaseURL(strings.TrimSuffix(g.URL(), "/v1")), aoption.WithAPIKey("sk-llmgw-aaaaaaaaaaaa-bbbb"), aoption.WithMaxRetries(0))
	if _, err := wrong.Messages.New(ctx, params); !errors.As(err, &apiErr) || apiErr.StatusCode != 401 || apiErr.Type() != "authentication_error" {
		t.Errorf("a wrong key: %v", err)
	}
	p := params
	p.MaxTokens = 500 // more than the key's 200 tokens a minute
	if _, err := client.Messages.New(ctx, p); !errors.As(err, &apiErr) || apiErr.StatusCode != 429 || apiErr.Type() != "rate_limit_error" || apiErr.Response.Header.Get("Retry-After") == "" {
		t.Errorf("over the token limit: %v", err)
	}

	// The ledger has the message, billed at the backend's count.
	deadline := time.Now().Add(5 * time.Second)
	for {
		rows, err := g.store.Usage(ctx, usage.Query{KeyID: id})
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) == 1 && rows[0].CompletionTokens > 0 {
			if rows[0].CompletionTokens != m.Usage.OutputTokens || rows[0].PromptTokens != m.Usage.InputTokens+m.Usage.CacheReadInputTokens {
				t.Errorf("ledger %+v, answer usage %+v", rows[0], m.Usage)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no usage in the ledger: %+v", rows)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
