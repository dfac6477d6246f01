package sim

import (
	"errors"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// TestOfficialClient proves the wire shapes by reading them with the
// official OpenAI Go client.
func TestOfficialClient(t *testing.T) {
	_, ts := newTestServer(t, fast)
	client := openai.NewClient(option.WithBaseURL(ts.URL+"/v1/"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	ctx := t.Context()
	messages := []openai.ChatCompletionMessageParamUnion{
		openai.SystemMessage("You are terse."),
		openai.UserMessage("What is continuous batching?"),
	}

	t.Run("chat", func(t *testing.T) {
		c, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
			Model: DefaultModel, Messages: messages, MaxCompletionTokens: openai.Int(12),
		}, option.WithJSONSet("ignore_eos", true))
		if err != nil {
			t.Fatal(err)
		}
		if c.Usage.CompletionTokens != 12 || c.Usage.PromptTokens == 0 || c.Usage.TotalTokens != c.Usage.PromptTokens+12 {
			t.Errorf("usage %+v", c.Usage)
		}
		if len(c.Choices) != 1 || c.Choices[0].Message.Content == "" || c.Choices[0].FinishReason != "length" {
			t.Errorf("choices %+v", c.Choices)
		}
	})

	t.Run("chat stream", func(t *testing.T) {
		st := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
			Model: DefaultModel, Messages: messages, MaxTokens: openai.Int(20),
			StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
		})
		var acc openai.ChatCompletionAccumulator
		for st.Next() {
			acc.AddChunk(st.Current())
		}
		if err := st.Err(); err != nil {
			t.Fatal(err)
		}
		if acc.Usage.CompletionTokens < 1 || acc.Usage.CompletionTokens > 20 || acc.Usage.PromptTokens == 0 {
			t.Errorf("accumulated usage %+v", acc.Usage)
		}
		if len(acc.Choices) != 1 || acc.Choices[0].Message.Content == "" || acc.Choices[0].Message.Role != "assistant" || acc.Choices[0].FinishReason == "" {
			t.Errorf("accumulated choices %+v", acc.Choices)
		}
	})

	t.Run("completion", func(t *testing.T) {
		c, err := client.Completions.New(ctx, openai.CompletionNewParams{
			Model:     DefaultModel,
			Prompt:    openai.CompletionNewParamsPromptUnion{OfString: openai.String("Once upon a time")},
			MaxTokens: openai.Int(5),
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(c.Choices) != 1 || c.Choices[0].Text == "" || c.Usage.PromptTokens != 4 {
			t.Errorf("completion %+v", c)
		}
	})

	t.Run("completion stream", func(t *testing.T) {
		st := client.Completions.NewStreaming(ctx, openai.CompletionNewParams{
			Model:     DefaultModel,
			Prompt:    openai.CompletionNewParamsPromptUnion{OfArrayOfTokens: []int64{1, 2, 3}},
			MaxTokens: openai.Int(6),
		}, option.WithJSONSet("ignore_eos", true))
		var text string
		chunks := 0
		for st.Next() {
			if ch := st.Current().Choices; len(ch) == 1 && ch[0].Text != "" {
				text += ch[0].Text
				chunks++
			}
		}
		if err := st.Err(); err != nil {
			t.Fatal(err)
		}
		if chunks != 6 || text == "" {
			t.Errorf("%d text chunks (%q), want 6", chunks, text)
		}
	})

	t.Run("embeddings", func(t *testing.T) {
		for _, format := range []openai.EmbeddingNewParamsEncodingFormat{openai.EmbeddingNewParamsEncodingFormatFloat, openai.EmbeddingNewParamsEncodingFormatBase64} {
			e, err := client.Embeddings.New(ctx, openai.EmbeddingNewParams{
				Model:          DefaultModel,
				Input:          openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{"alpha", "beta gamma"}},
				EncodingFormat: format,
			})
			if err != nil {
				t.Fatalf("%s: %v", format, err)
			}
			if len(e.Data) != 2 || e.Usage.PromptTokens != 3 || e.Usage.TotalTokens != 3 {
				t.Fatalf("%s: %d vectors, usage %+v", format, len(e.Data), e.Usage)
			}
			if format == openai.EmbeddingNewParamsEncodingFormatFloat && len(e.Data[1].Embedding) != DefaultEmbeddingDims {
				t.Errorf("float vector of %d dims", len(e.Data[1].Embedding))
			}
		}
	})

	t.Run("error", func(t *testing.T) {
		_, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "no-such-model", Messages: messages})
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 404 || apiErr.Code != "model_not_found" {
			t.Errorf("unknown model: %v", err)
		}
	})
}
