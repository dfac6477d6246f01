package translate

// The subset of OpenAI's chat completions wire that the translations map
// onto: requests as a pool receives them, answers and stream chunks as it
// sends them.

import (
	"encoding/json"
	"errors"
	"strings"

	"gitea.mynodes.xyz/ilker/llmgw/internal/openai"
)

// ChatRequest is a chat completions request.
type ChatRequest struct {
	Model       string          `json:"model"`
	Messages    []ChatMessage   `json:"messages"`
	MaxTokens   *int64          `json:"max_tokens,omitempty"`
	Temperature *float64        `json:"temperature,omitempty"`
	TopP        *float64        `json:"top_p,omitempty"`
	TopK        *int64          `json:"top_k,omitempty"` // vLLM's and SGLang's extension
	Stop        []string        `json:"stop,omitempty"`
	User        string          `json:"user,omitempty"`
	Tools       []ChatTool      `json:"tools,omitempty"`
	ToolChoice  json.RawMessage `json:"tool_choice,omitempty"`
	Parallel    *bool           `json:"parallel_tool_calls,omitempty"`
	ResponseFmt json.RawMessage `json:"response_format,omitempty"`
	// ReasoningEffort is how hard a reasoning model thinks: low, medium,
	// high...; empty for the backend's default.
	ReasoningEffort string `json:"reasoning_effort,omitempty"`
	// PromptCacheKey names the requests to be served from one cache,
	// which routing places them by.
	PromptCacheKey string         `json:"prompt_cache_key,omitempty"`
	Stream         bool           `json:"stream,omitempty"`
	StreamOptions  *StreamOptions `json:"stream_options,omitempty"`
}

// StreamOptions is a streamed chat request's stream_options.
type StreamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// usageStreamed asks a streamed request's backend for its usage in a
// last chunk, where the client's API reports usage whether or not it
// asked; a plain one carries usage always.
func (c *ChatRequest) usageStreamed() {
	if c.Stream {
		c.StreamOptions = &StreamOptions{IncludeUsage: true}
	}
}

// ChatMessage is one message of a chat request or answer. Content is a
// string, an array of parts, or null.
type ChatMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content,omitempty"`
	ToolCalls  []ChatToolCall  `json:"tool_calls,omitempty"`
	ToolCallID string          `json:"tool_call_id,omitempty"`
	Name       string          `json:"name,omitempty"`
	// ReasoningContent is vLLM's and SGLang's reasoning output, and
	// Reasoning the same as newer vLLM names it (versions in between send
	// both, the same); read, never sent.
	ReasoningContent string `json:"reasoning_content,omitempty"`
	Reasoning        string `json:"reasoning,omitempty"`
	// ThinkingBlocks are an anthropic pool's thinking and
	// redacted_thinking blocks, as AnthropicUpstream reads them, with the
	// signatures a client must send back; never sent.
	ThinkingBlocks []AnthropicBlock `json:"thinking_blocks,omitempty"`
}

// reasoning is a delta's reasoning, by whichever name it came:
// reasoning_content when it is set, else reasoning; empty for none.
func reasoning(content, r *string) string {
	if content != nil && *content != "" {
		return *content
	}
	if r != nil {
		return *r
	}
	return ""
}

// ChatPart is one part of a message's content array.
type ChatPart struct {
	Type     string `json:"type"`
	Text     string `json:"text,omitempty"`
	ImageURL *struct {
		URL    string `json:"url"`
		Detail string `json:"detail,omitempty"`
	} `json:"image_url,omitempty"`
}

// ChatToolCall is a function call an assistant made.
type ChatToolCall struct {
	Index    *int   `json:"index,omitempty"` // in stream chunks
	ID       string `json:"id,omitempty"`
	Type     string `json:"type,omitempty"`
	Function struct {
		Name      string `json:"name,omitempty"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// ChatTool is a function the model may call.
type ChatTool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		Parameters  json.RawMessage `json:"parameters,omitempty"`
		Strict      *bool           `json:"strict,omitempty"`
	} `json:"function"`
}

// ChatCompletion is a whole chat completions answer.
type ChatCompletion struct {
	ID      string `json:"id"`
	Model   string `json:"model"`
	Created int64  `json:"created"`
	Choices []struct {
		Index        int         `json:"index"`
		Message      ChatMessage `json:"message"`
		FinishReason string      `json:"finish_reason"`
		// StopReason is vLLM's: the stop string (or token id) that ended
		// the answer, null when none did.
		StopReason json.RawMessage `json:"stop_reason,omitempty"`
	} `json:"choices"`
	Usage *openai.Usage `json:"usage,omitempty"`
}

// chatChunk is one event of a streamed chat answer.
type chatChunk struct {
	Choices []struct {
		Delta struct {
			Content          *string          `json:"content"`
			ReasoningContent *string          `json:"reasoning_content"`
			Reasoning        *string          `json:"reasoning"`
			ToolCalls        []ChatToolCall   `json:"tool_calls"`
			ThinkingBlocks   []AnthropicBlock `json:"thinking_blocks"`
		} `json:"delta"`
		FinishReason *string         `json:"finish_reason"`
		StopReason   json.RawMessage `json:"stop_reason"`
	} `json:"choices"`
	Usage *openai.Usage `json:"usage"`
}

// contentText is a chat content's text: the string, or its text parts
// joined, or empty.
func contentText(raw json.RawMessage) string {
	if isNull(raw) {
		return ""
	}
	if isString(raw) {
		var s string
		json.Unmarshal(raw, &s)
		return s
	}
	var parts []ChatPart
	json.Unmarshal(raw, &parts)
	var text strings.Builder
	for _, p := range parts {
		if p.Type == "text" {
			text.WriteString(p.Text)
		}
	}
	return text.String()
}

// stopString is a vLLM stop_reason that names a stop string, and false
// when it is null, a token id or absent.
func stopString(raw json.RawMessage) (string, bool) {
	if !isString(raw) {
		return "", false
	}
	var s string
	return s, json.Unmarshal(raw, &s) == nil
}

func jsonString(s string) json.RawMessage { return mustJSON(s) }

// namedToolChoice is chat's tool_choice forcing the function name.
func namedToolChoice(name string) json.RawMessage {
	return mustJSON(map[string]any{"type": "function", "function": map[string]string{"name": name}})
}

// readCompletion reads a whole chat completion, which has a choice.
func readCompletion(chat []byte) (*ChatCompletion, error) {
	var c ChatCompletion
	if err := json.Unmarshal(chat, &c); err != nil {
		return nil, err
	}
	if len(c.Choices) == 0 {
		return nil, errors.New("a chat completion with no choices")
	}
	return &c, nil
}
