package app

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"gitea.mynodes.xyz/ilker/llmgw/internal/config"
	"gitea.mynodes.xyz/ilker/llmgw/internal/sim"
)

// startDemo runs two simulated replicas with a gateway in front, as
// `llmgw serve` does with no flags, and a client of the official SDK.
func startDemo(t *testing.T) (*InProcess, openai.Client) {
	t.Helper()
	return startDemoHTTP(t, "")
}

// startDemoHTTP is startDemo with server.http set to impl.
func startDemoHTTP(t *testing.T, impl string) (*InProcess, openai.Client) {
	t.Helper()
	ctx := t.Context()
	replicas, err := sim.StartReplicas(ctx, sim.Config{Model: "demo", FixedTiming: true, TTFT: 5 * time.Millisecond, TPOT: time.Millisecond}, 2, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var urls []string
	for _, r := range replicas {
		urls = append(urls, r.URL())
		t.Cleanup(r.Close)
	}
	g, err := StartGateway(ctx, GatewayOptions{Model: "demo", Upstreams: urls, HTTP: impl})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return g, openai.NewClient(option.WithBaseURL(g.URL()), option.WithAPIKey("unused"), option.WithMaxRetries(0))
}

// TestOfficialClient runs the official SDK's calls through the gateway on
// each HTTP implementation server.http offers.
func TestOfficialClient(t *testing.T) {
	for _, impl := range []string{config.HTTPLlmgw, config.HTTPNetHTTP} {
		t.Run(impl, func(t *testing.T) { testOfficialClient(t, impl) })
	}
}

func testOfficialClient(t *testing.T, impl string) {
	_, client := startDemoHTTP(t, impl)
	ctx := t.Context()
	chat := openai.ChatCompletionNewParams{
		Model:     "demo",
		Messages:  []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Say hello in five words.")},
		MaxTokens: openai.Int(5),
	}

	t.Run("chat", func(t *testing.T) {
		c, err := client.Chat.Completions.New(ctx, chat)
		if err != nil {
			t.Fatal(err)
		}
		if len(c.Choices) != 1 || c.Choices[0].Message.Content == "" || c.Usage.CompletionTokens == 0 || c.Usage.PromptTokens == 0 {
			t.Errorf("%+v", c)
		}
	})

	t.Run("chat streamed without usage", func(t *testing.T) {
		s := client.Chat.Completions.NewStreaming(ctx, chat)
		var text string
		chunks := 0
		for s.Next() {
			ch := s.Current()
			chunks++
			if ch.Usage.TotalTokens != 0 || ch.JSON.Usage.Valid() && ch.Usage.CompletionTokens != 0 {
				t.Errorf("a usage chunk reached a client that did not ask: %s", ch.RawJSON())
			}
			if len(ch.Choices) > 0 {
				text += ch.Choices[0].Delta.Content
			}
		}
		if err := s.Err(); err != nil || text == "" || chunks == 0 {
			t.Errorf("text %q after %d chunks, err %v", text, chunks, err)
		}
	})

	t.Run("chat streamed with usage", func(t *testing.T) {
		p := chat
		p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
		s := client.Chat.Completions.NewStreaming(ctx, p)
		var acc openai.ChatCompletionAccumulator
		for s.Next() {
			acc.AddChunk(s.Current())
		}
		if err := s.Err(); err != nil {
			t.Fatal(err)
		}
		if acc.Usage.CompletionTokens == 0 || acc.Usage.PromptTokens == 0 || acc.Choices[0].Message.Content == "" {
			t.Errorf("usage %+v, content %q", acc.Usage, acc.Choices[0].Message.Content)
		}
	})

	t.Run("completions", func(t *testing.T) {
		c, err := client.Completions.New(ctx, openai.CompletionNewParams{
			Model:     "demo",
			Prompt:    openai.CompletionNewParamsPromptUnion{OfString: openai.String("Once upon a time")},
			MaxTokens: openai.Int(4),
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(c.Choices) != 1 || c.Choices[0].Text == "" || c.Usage.CompletionTokens == 0 {
			t.Errorf("%+v", c)
		}
	})

	t.Run("embeddings", func(t *testing.T) {
		e, err := client.Embeddings.New(ctx, openai.EmbeddingNewParams{
			Model: "demo",
			Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{"a cat", "a dog"}},
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(e.Data) != 2 || len(e.Data[0].Embedding) == 0 || e.Usage.PromptTokens == 0 {
			t.Errorf("%d vectors, usage %+v", len(e.Data), e.Usage)
		}
	})

	t.Run("models", func(t *testing.T) {
		page, err := client.Models.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Data) != 1 || page.Data[0].ID != "demo" {
			t.Errorf("%+v", page.Data)
		}
	})

	t.Run("unknown model", func(t *testing.T) {
		p := chat
		p.Model = "gpt-nonexistent"
		_, err := client.Chat.Completions.New(ctx, p)
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) {
			t.Fatalf("error %v is not an *openai.Error", err)
		}
		if apiErr.StatusCode != http.StatusNotFound || apiErr.Code != "model_not_found" || apiErr.Param != "model" {
			t.Errorf("status %d code %q param %q", apiErr.StatusCode, apiErr.Code, apiErr.Param)
		}
	})
}

func TestHealthAndReadiness(t *testing.T) {
	g, _ := startDemo(t)
	for _, path := range []string{"/healthz", "/livez", "/readyz", "/metrics"} {
		resp, err := http.Get(g.AdminURL() + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("%s: %d", path, resp.StatusCode)
		}
	}
}
