package translate

// A Messages API request as the chat completions request a pool is sent:
// its system prompt, turns, content blocks and tools as chat's messages,
// parts and functions, the tools as the conversation's system messages
// leave them. What it asks of the model's reasoning is read apart
// (reasoning.go), and its server tools are left out (hosted.go).

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"

	"gitea.mynodes.xyz/ilker/llmgw/internal/openai"
)

// ParseAnthropic reads a Messages API request body. Its errors are 400
// *openai.Error naming the field at fault. max_tokens may be absent, as in
// a count_tokens request; a message must have it. It stops with ctx's
// error when ctx ends.
func ParseAnthropic(ctx context.Context, body []byte) (*AnthropicRequest, error) {
	p, err := begin(ctx)
	if err != nil {
		return nil, err
	}
	if !json.Valid(body) {
		return nil, openai.BadRequest("", "The request body is not valid JSON.")
	}
	var top struct {
		AnthropicRequest
		Messages json.RawMessage `json:"messages"`
	}
	if err := decodeObject(body, &top); err != nil {
		return nil, err
	}
	req := &top.AnthropicRequest
	var msgs []json.RawMessage
	switch {
	case isNull(top.Messages):
		return nil, openai.BadRequest("messages", "messages: field required")
	case jsonKind(top.Messages) != "an array":
		return nil, typeError("messages", "an array", jsonKind(top.Messages))
	}
	json.Unmarshal(top.Messages, &msgs)
	req.Messages = make([]AnthropicMessage, len(msgs))
	for i, m := range msgs {
		if err := p.step(); err != nil {
			return nil, err
		}
		if err := decode(m, &req.Messages[i], at("messages", i)); err != nil {
			return nil, err
		}
	}
	switch {
	case req.Model == "":
		return nil, openai.BadRequest("model", "model: field required")
	case req.MaxTokens != nil && (*req.MaxTokens < 1 || *req.MaxTokens > openai.MaxTokensLimit):
		return nil, openai.BadRequest("max_tokens", "max_tokens: must be from 1 to %d, got %d", openai.MaxTokensLimit, *req.MaxTokens)
	}
	return req, nil
}

// ToChat is the chat completions request that asks what r asks. It stops
// with ctx's error when ctx ends.
func (r *AnthropicRequest) ToChat(ctx context.Context) (*ChatRequest, error) {
	p, err := begin(ctx)
	if err != nil {
		return nil, err
	}
	c := &ChatRequest{
		Model:       r.Model,
		Messages:    []ChatMessage{},
		MaxTokens:   r.MaxTokens,
		Temperature: r.Temperature,
		TopP:        r.TopP,
		TopK:        r.TopK,
		Stop:        r.StopSequences,
		Stream:      r.Stream,
	}
	c.usageStreamed()
	if r.Metadata != nil {
		c.User = r.Metadata.UserID
	}
	if !isNull(r.System) {
		sys, err := anthropicSystem(p, r.System)
		if err != nil {
			return nil, err
		}
		c.Messages = append(c.Messages, sys)
	}
	var tools toolSet
	for i, t := range r.Tools {
		if err := p.step(); err != nil {
			return nil, err
		}
		if isServerTool(t) {
			// Anthropic's server tools (web search, code execution...) run
			// on Anthropic's side; a model behind chat completions has
			// none, and is offered the client's tools alone.
			continue
		}
		if t.Name == "" {
			return nil, openai.BadRequest(at("tools", i)+".name", "%s.name: field required", at("tools", i))
		}
		tools.add(anthropicChatTool(t))
	}
	for i, m := range r.Messages {
		if err := p.step(); err != nil {
			return nil, err
		}
		if m.Role == "system" {
			sys, ok, err := systemMessage(p, m, at("messages", i), &tools)
			if err != nil {
				return nil, err
			}
			if ok {
				c.Messages = append(c.Messages, sys)
			}
			continue
		}
		msgs, err := anthropicMessageToChat(p, m, at("messages", i))
		if err != nil {
			return nil, err
		}
		c.Messages = append(c.Messages, msgs...)
	}
	c.Tools = tools.offered()
	if tc := r.ToolChoice; tc != nil {
		switch tc.Type {
		case "auto":
			c.ToolChoice = json.RawMessage(`"auto"`)
		case "any":
			c.ToolChoice = json.RawMessage(`"required"`)
		case "none":
			c.ToolChoice = json.RawMessage(`"none"`)
		case "tool":
			if tc.Name == "" {
				return nil, openai.BadRequest("tool_choice.name", "tool_choice.name: field required when tool_choice.type is \"tool\"")
			}
			c.ToolChoice = namedToolChoice(tc.Name)
		default:
			return nil, openai.BadRequest("tool_choice.type", "tool_choice.type: must be one of auto, any, tool or none, got %q", tc.Type)
		}
		if tc.DisableParallelToolUse {
			f := false
			c.Parallel = &f
		}
	}
	return c, nil
}

// anthropicSystem is a system prompt, a string or text blocks, as a chat
// system message: a string stays one, blocks become text parts.
func anthropicSystem(p *progress, raw json.RawMessage) (ChatMessage, error) {
	if isString(raw) {
		return ChatMessage{Role: "system", Content: raw}, nil
	}
	blocks, err := decodeArray[AnthropicBlock](p, raw, "system")
	if err != nil {
		if jsonKind(raw) != "an array" {
			return ChatMessage{}, typeError("system", "a string or an array of text blocks", jsonKind(raw))
		}
		return ChatMessage{}, err
	}
	parts := make([]ChatPart, 0, len(blocks))
	for i, b := range blocks {
		if b.Type != "text" {
			return ChatMessage{}, unsupported(at("system", i)+".type", "a system prompt holds text blocks, not %q", b.Type)
		}
		parts = append(parts, ChatPart{Type: "text", Text: b.Text})
	}
	return ChatMessage{Role: "system", Content: mustJSON(parts)}, nil
}

// systemMessage is a system message in a conversation, as Claude Code
// sends them mid-way, as a chat system message at its place: a string, or
// its text blocks as text parts, and false when it holds no text. Its
// tool_addition and tool_removal blocks change tools, which the model is
// offered as they stand at the conversation's end.
func systemMessage(p *progress, m AnthropicMessage, path string, tools *toolSet) (ChatMessage, bool, error) {
	if isString(m.Content) {
		return ChatMessage{Role: "system", Content: m.Content}, true, nil
	}
	if jsonKind(m.Content) != "an array" {
		return ChatMessage{}, false, typeError(path+".content", "a string or an array of content blocks", jsonKind(m.Content))
	}
	blocks, err := decodeArray[AnthropicBlock](p, m.Content, path+".content")
	if err != nil {
		return ChatMessage{}, false, err
	}
	var parts []ChatPart
	for j, b := range blocks {
		bpath := at(path+".content", j)
		switch b.Type {
		case "text":
			parts = append(parts, ChatPart{Type: "text", Text: b.Text})
		case "tool_addition", "tool_removal":
			if err := tools.change(b, bpath); err != nil {
				return ChatMessage{}, false, err
			}
		default:
			return ChatMessage{}, false, unsupported(bpath+".type", "a system message holds text, tool_addition and tool_removal blocks, not %q", b.Type)
		}
	}
	if len(parts) == 0 {
		return ChatMessage{}, false, nil
	}
	return ChatMessage{Role: "system", Content: mustJSON(parts)}, true, nil
}

// anthropicChatTool is an Anthropic client tool as a chat function.
func anthropicChatTool(t AnthropicTool) ChatTool {
	var ct ChatTool
	ct.Type = "function"
	ct.Function.Name, ct.Function.Description, ct.Function.Parameters = t.Name, t.Description, t.InputSchema
	return ct
}

// toolSet is the tools a request offers the model: the request's, as its
// system messages add and remove them along the conversation. Every
// client tool is offered, those with defer_loading too: chat has no
// tools loaded on demand.
type toolSet struct {
	tools []ChatTool
	// removed and at are made at the first change: by index into tools,
	// whether it is taken away, and the index of each name.
	removed []bool
	at      map[string]int
}

func (s *toolSet) add(t ChatTool) {
	s.tools = append(s.tools, t)
	if s.at != nil {
		s.removed = append(s.removed, false)
		s.at[t.Function.Name] = len(s.tools) - 1
	}
}

// change applies a tool_addition or tool_removal block b, at path: an
// added definition is offered (in place of one of the same name), an
// added reference offers again a tool of the request's that was taken
// away, and a removal takes a tool away. A server tool's definition
// changes nothing, as it is not offered.
func (s *toolSet) change(b AnthropicBlock, path string) error {
	if b.Tool == nil {
		return openai.BadRequest(path+".tool", "%s.tool: field required", path)
	}
	if s.at == nil {
		s.removed = make([]bool, len(s.tools))
		s.at = make(map[string]int, len(s.tools))
		for i, t := range s.tools {
			s.at[t.Function.Name] = i
		}
	}
	name := b.Tool.Name
	if d := b.Tool.Definition; d != nil {
		if d.Type != "" && d.Type != "custom" {
			return nil
		}
		if d.Name == "" {
			return openai.BadRequest(path+".tool.definition.name", "%s.tool.definition.name: field required", path)
		}
		name = d.Name
		if b.Type == "tool_addition" {
			if i, ok := s.at[name]; ok {
				s.tools[i], s.removed[i] = anthropicChatTool(*d), false
			} else {
				s.add(anthropicChatTool(*d))
			}
			return nil
		}
	}
	if i, ok := s.at[name]; ok {
		s.removed[i] = b.Type == "tool_removal"
	}
	return nil
}

// offered is the tools the model is offered; nil for none. It reuses s's
// memory.
func (s *toolSet) offered() []ChatTool {
	out := s.tools[:0]
	for i, t := range s.tools {
		if s.removed == nil || !s.removed[i] {
			out = append(out, t)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// anthropicMessageToChat is one Anthropic turn as chat messages: a user
// turn's tool results become tool messages ahead of what else it says, an
// assistant turn's tool uses become its tool calls.
func anthropicMessageToChat(p *progress, m AnthropicMessage, path string) ([]ChatMessage, error) {
	if m.Role != "user" && m.Role != "assistant" {
		return nil, openai.BadRequest(path+".role", "%s.role: must be \"user\", \"assistant\" or \"system\", got %q", path, m.Role)
	}
	if isString(m.Content) {
		return []ChatMessage{{Role: m.Role, Content: m.Content}}, nil
	}
	if jsonKind(m.Content) != "an array" {
		return nil, typeError(path+".content", "a string or an array of content blocks", jsonKind(m.Content))
	}
	blocks, err := decodeArray[AnthropicBlock](p, m.Content, path+".content")
	if err != nil {
		return nil, err
	}
	var (
		out   []ChatMessage
		parts []ChatPart
		calls []ChatToolCall
		extra []ChatPart // images of tool results, sent after them as the user's
	)
	for j, b := range blocks {
		bpath := at(path+".content", j)
		switch b.Type {
		case "text":
			parts = append(parts, ChatPart{Type: "text", Text: b.Text})
		case "image":
			p, err := imagePart(b.Source, bpath+".source")
			if err != nil {
				return nil, err
			}
			parts = append(parts, p)
		case "tool_use":
			if m.Role != "assistant" {
				return nil, unsupported(bpath+".type", "tool_use blocks belong to assistant turns")
			}
			var call ChatToolCall
			call.ID, call.Type, call.Function.Name = b.ID, "function", b.Name
			call.Function.Arguments = "{}"
			if !isNull(b.Input) {
				var buf bytes.Buffer
				json.Compact(&buf, b.Input)
				call.Function.Arguments = buf.String()
			}
			calls = append(calls, call)
		case "tool_result":
			if m.Role != "user" {
				return nil, unsupported(bpath+".type", "tool_result blocks belong to user turns")
			}
			text, images, err := toolResultContent(p, b.Content, bpath+".content")
			if err != nil {
				return nil, err
			}
			out = append(out, ChatMessage{Role: "tool", ToolCallID: b.ToolUseID, Content: jsonString(text)})
			extra = append(extra, images...)
		case "thinking", "redacted_thinking":
			// A model's earlier reasoning: chat has no place for it in a
			// request, and templates drop it.
		case "server_tool_use", "mcp_tool_use", "mcp_tool_result", "container_upload":
			// Server tools' calls and results, from a conversation held
			// with Anthropic: no tool of this model made them.
		default:
			if strings.HasSuffix(b.Type, "_tool_result") {
				break // web_search_tool_result and the like, as above
			}
			return nil, unsupported(bpath+".type", "content blocks of type %q cannot be translated for this model", b.Type)
		}
	}
	parts = append(extra, parts...)
	if m.Role == "assistant" {
		var text strings.Builder
		for _, p := range parts {
			text.WriteString(p.Text)
		}
		msg := ChatMessage{Role: "assistant", ToolCalls: calls}
		if text.Len() > 0 || len(calls) == 0 {
			msg.Content = jsonString(text.String())
		}
		return append(out, msg), nil
	}
	if len(parts) > 0 || len(out) == 0 {
		out = append(out, ChatMessage{Role: "user", Content: mustJSON(nonNil(parts))})
	}
	return out, nil
}

func nonNil(p []ChatPart) []ChatPart {
	if p == nil {
		return []ChatPart{}
	}
	return p
}

// imagePart is an image block's source as a chat image_url part: base64
// data as a data: URL.
func imagePart(s *AnthropicSource, path string) (ChatPart, error) {
	p := ChatPart{Type: "image_url", ImageURL: &struct {
		URL    string `json:"url"`
		Detail string `json:"detail,omitempty"`
	}{}}
	switch {
	case s == nil:
		return p, openai.BadRequest(path, "%s: field required", path)
	case s.Type == "base64":
		p.ImageURL.URL = "data:" + s.MediaType + ";base64," + s.Data
	case s.Type == "url":
		p.ImageURL.URL = s.URL
	default:
		return p, unsupported(path+".type", "image sources of type %q cannot be translated; send base64 or url", s.Type)
	}
	return p, nil
}

// toolResultContent is a tool_result's content, a string or blocks, as
// the text of a tool message and the images it held.
func toolResultContent(p *progress, raw json.RawMessage, path string) (string, []ChatPart, error) {
	if isNull(raw) {
		return "", nil, nil
	}
	if isString(raw) {
		var s string
		json.Unmarshal(raw, &s)
		return s, nil, nil
	}
	blocks, err := decodeArray[AnthropicBlock](p, raw, path)
	if err != nil {
		if jsonKind(raw) != "an array" {
			return "", nil, typeError(path, "a string or an array of content blocks", jsonKind(raw))
		}
		return "", nil, err
	}
	var text strings.Builder
	var images []ChatPart
	for i, b := range blocks {
		switch b.Type {
		case "text":
			text.WriteString(b.Text)
		case "image":
			p, err := imagePart(b.Source, at(path, i)+".source")
			if err != nil {
				return "", nil, err
			}
			images = append(images, p)
		case "tool_reference":
			// A tool the result makes available, as a tool search's
			// result does: every tool is offered already, so the model is
			// told its name, on a line of its own.
			if text.Len() > 0 {
				text.WriteByte('\n')
			}
			text.WriteString(b.ToolName)
		default:
			return "", nil, unsupported(at(path, i)+".type", "tool results of type %q cannot be translated", b.Type)
		}
	}
	return text.String(), images, nil
}
