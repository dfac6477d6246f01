package translate

// A chat completions request as a Messages API request, for a pool that
// speaks Anthropic's API (a Messages client's own body goes to it as it
// came: hosted.go): system and developer messages gather into the system
// prompt, tool results into the user turn that follows them. Beside it,
// where such a call goes and the headers it carries (AnthropicUpstream);
// its answers are read back as chat in chat_anthropic_answer.go and
// chat_anthropic_stream.go.

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"

	"gitea.mynodes.xyz/ilker/llmgw/internal/openai"
)

// ChatToAnthropicBody is the Messages API body for the chat completions
// body chat, asking for at most maxTokens output tokens: the Messages API
// requires max_tokens, and it is maxTokens whatever chat's own
// max_tokens or max_completion_tokens say. maxTokens must be at least 1
// for the provider to take the request. A body past limit bytes is
// refused with a 413 as it is written. It stops with ctx's error when
// ctx ends.
func ChatToAnthropicBody(ctx context.Context, chat []byte, maxTokens, limit int64) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var c ChatRequest
	if err := decode(chat, &c, ""); err != nil {
		return nil, err
	}
	r, err := ChatToAnthropic(ctx, &c)
	if err != nil {
		return nil, err
	}
	r.MaxTokens = &maxTokens
	return marshalAnthropic(r, limit)
}

// ChatToAnthropic is the Messages API request that asks what c asks: the
// way to a pool that speaks Anthropic's API. It stops with ctx's error
// when ctx ends.
func ChatToAnthropic(ctx context.Context, c *ChatRequest) (*AnthropicRequest, error) {
	p, err := begin(ctx)
	if err != nil {
		return nil, err
	}
	r := &AnthropicRequest{
		Model:         c.Model,
		MaxTokens:     c.MaxTokens,
		Temperature:   c.Temperature,
		TopP:          c.TopP,
		TopK:          c.TopK,
		StopSequences: c.Stop,
		Stream:        c.Stream,
	}
	if c.User != "" {
		r.Metadata = &AnthropicMetadata{UserID: c.User}
	}
	if r.Messages, r.System, err = chatToAnthropicTurns(p, c.Messages); err != nil {
		return nil, err
	}
	for _, t := range c.Tools {
		if err := p.step(); err != nil {
			return nil, err
		}
		r.Tools = append(r.Tools, AnthropicTool{Name: t.Function.Name, Description: t.Function.Description, InputSchema: t.Function.Parameters})
	}
	if r.ToolChoice, err = chatToAnthropicToolChoice(c.ToolChoice, c.Parallel); err != nil {
		return nil, err
	}
	return r, nil
}

// chatToAnthropicTurns is the Messages API's turns and system prompt for
// chat's messages: system and developer messages gather into the system
// prompt (a string when there is one string message), tool results into
// one user turn with the user's words that follow them. Each message and
// tool call is a step of p.
func chatToAnthropicTurns(p *progress, messages []ChatMessage) ([]AnthropicMessage, json.RawMessage, error) {
	turns := []AnthropicMessage{}
	var system []AnthropicBlock
	systemString := true
	// A user turn that tool results go into, and the blocks it has so
	// far: its content is marshalled once, when the turn is closed.
	pending := -1
	var results []AnthropicBlock
	closePending := func() {
		if pending >= 0 {
			turns[pending].Content = mustJSON(nonNilBlocks(results))
			pending, results = -1, results[:0]
		}
	}
	for i, m := range messages {
		if err := p.step(); err != nil {
			return nil, nil, err
		}
		path := at("messages", i)
		switch m.Role {
		case "system", "developer":
			if isString(m.Content) && len(system) == 0 {
				system = append(system, AnthropicBlock{Type: "text", Text: contentText(m.Content)})
				continue
			}
			systemString = false
			blocks, err := chatContentBlocks(p, m.Content, path+".content")
			if err != nil {
				return nil, nil, err
			}
			system = append(system, blocks...)
		case "user":
			blocks, err := chatContentBlocks(p, m.Content, path+".content")
			if err != nil {
				return nil, nil, err
			}
			if pending >= 0 {
				// The user's words after tool results join them in one turn.
				results = append(results, blocks...)
				closePending()
				continue
			}
			if isString(m.Content) {
				turns = append(turns, AnthropicMessage{Role: "user", Content: m.Content})
				continue
			}
			turns = append(turns, AnthropicMessage{Role: "user", Content: mustJSON(nonNilBlocks(blocks))})
		case "assistant":
			closePending()
			if len(m.ToolCalls) == 0 && isString(m.Content) {
				turns = append(turns, AnthropicMessage{Role: "assistant", Content: m.Content})
				continue
			}
			var blocks []AnthropicBlock
			if text := contentText(m.Content); text != "" {
				blocks = append(blocks, AnthropicBlock{Type: "text", Text: text})
			}
			for _, tc := range m.ToolCalls {
				if err := p.step(); err != nil {
					return nil, nil, err
				}
				blocks = append(blocks, AnthropicBlock{Type: "tool_use", ID: tc.ID, Name: tc.Function.Name, Input: toolInput(tc.Function.Arguments)})
			}
			turns = append(turns, AnthropicMessage{Role: "assistant", Content: mustJSON(nonNilBlocks(blocks))})
		case "tool":
			if pending < 0 {
				turns = append(turns, AnthropicMessage{Role: "user"})
				pending = len(turns) - 1
			}
			results = append(results, AnthropicBlock{Type: "tool_result", ToolUseID: m.ToolCallID, Content: jsonString(contentText(m.Content))})
		default:
			return nil, nil, openai.BadRequest(path+".role", "%s.role: %q cannot be translated for this model", path, m.Role)
		}
	}
	closePending()
	switch {
	case len(system) == 0:
		return turns, nil, nil
	case systemString && len(system) == 1:
		return turns, jsonString(system[0].Text), nil
	}
	return turns, mustJSON(system), nil
}

// chatToAnthropicToolChoice is the Messages API's tool choice for chat's
// tool_choice and parallel_tool_calls: nil when neither says anything
// but the default.
func chatToAnthropicToolChoice(choice json.RawMessage, parallel *bool) (*AnthropicToolChoice, error) {
	serial := parallel != nil && !*parallel
	if isNull(choice) && !serial {
		return nil, nil
	}
	tc := &AnthropicToolChoice{Type: "auto", DisableParallelToolUse: serial}
	var s string
	var named struct {
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	switch {
	case isNull(choice):
	case json.Unmarshal(choice, &s) == nil:
		switch s {
		case "required":
			tc.Type = "any"
		case "none", "auto":
			tc.Type = s
		default:
			return nil, openai.BadRequest("tool_choice", "tool_choice: must be auto, none, required or a function, got %q", s)
		}
	case json.Unmarshal(choice, &named) == nil && named.Function.Name != "":
		tc.Type, tc.Name = "tool", named.Function.Name
	default:
		return nil, openai.BadRequest("tool_choice", "tool_choice: must be auto, none, required or a function")
	}
	return tc, nil
}

func nonNilBlocks(b []AnthropicBlock) []AnthropicBlock {
	if b == nil {
		return []AnthropicBlock{}
	}
	return b
}

// toolInput is a tool call's arguments as an Anthropic tool_use input,
// which must be an object: arguments that are not one become {}.
func toolInput(args string) json.RawMessage {
	b := bytes.TrimSpace([]byte(args))
	if len(b) > 0 && b[0] == '{' && json.Valid(b) {
		return b
	}
	return json.RawMessage(`{}`)
}

// chatContentBlocks is a chat message's content as Anthropic blocks.
func chatContentBlocks(p *progress, raw json.RawMessage, path string) ([]AnthropicBlock, error) {
	if isNull(raw) {
		return nil, nil
	}
	if isString(raw) {
		return []AnthropicBlock{{Type: "text", Text: contentText(raw)}}, nil
	}
	parts, err := decodeArray[ChatPart](p, raw, path)
	if err != nil {
		return nil, err
	}
	blocks := make([]AnthropicBlock, 0, len(parts))
	for i, p := range parts {
		switch {
		case p.Type == "text":
			blocks = append(blocks, AnthropicBlock{Type: "text", Text: p.Text})
		case p.Type == "image_url" && p.ImageURL != nil:
			blocks = append(blocks, AnthropicBlock{Type: "image", Source: imageSource(p.ImageURL.URL)})
		default:
			return nil, unsupported(at(path, i)+".type", "content parts of type %q cannot be translated for this model", p.Type)
		}
	}
	return blocks, nil
}

// imageSource is an image URL as an Anthropic source: a base64 data: URL
// as its data, any other as a URL.
func imageSource(u string) *AnthropicSource {
	if rest, ok := strings.CutPrefix(u, "data:"); ok {
		if media, data, ok := strings.Cut(rest, ";base64,"); ok {
			return &AnthropicSource{Type: "base64", MediaType: media, Data: data}
		}
	}
	return &AnthropicSource{Type: "url", URL: u}
}

// AnthropicUpstream reads a Messages API upstream as chat completions. It
// is an openai.Provider, and holds no state: one serves every call.
type AnthropicUpstream struct{}

var _ openai.Provider = AnthropicUpstream{}

// AnthropicVersion is the Messages API version the translation writes:
// the anthropic-version a call carries when its pool sets none.
const AnthropicVersion = "2023-06-01"

// URL is where a Messages API call to the endpoint at base (its URL up to
// and with /v1) goes.
func (AnthropicUpstream) URL(base string) string { return base + "/messages" }

// SetHeader sets in h what a call to a Messages API upstream carries
// beside its content type: version as anthropic-version (AnthropicVersion
// when empty) and, when key is not empty, key as x-api-key.
func (AnthropicUpstream) SetHeader(h http.Header, key, version string) {
	if version == "" {
		version = AnthropicVersion
	}
	h["Anthropic-Version"] = []string{version}
	if key != "" {
		h["X-Api-Key"] = []string{key}
	}
}

// ClientHeader is h with what an Anthropic client asked of the call: its
// anthropic-version when version is not empty, and its anthropic-beta
// when beta is not. It is h itself when both are empty and a copy
// otherwise, as h may be shared by every call.
func (AnthropicUpstream) ClientHeader(h http.Header, version, beta string) http.Header {
	if version == "" && beta == "" {
		return h
	}
	h = h.Clone()
	if version != "" {
		h["Anthropic-Version"] = []string{version}
	}
	if beta != "" {
		h["Anthropic-Beta"] = []string{beta}
	}
	return h
}
