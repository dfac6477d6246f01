package translate

// Anthropic's Messages API requests, to chat completions and back.

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"

	"gitea.mynodes.xyz/ilker/llmgw/internal/openai"
)

// AnthropicRequest is a Messages API request, as far as it maps onto chat
// completions. Fields it does not name (context_management, cache_control,
// container, mcp_servers, service_tier, ...) are read past and not sent
// on; to a pool of kind anthropic the client's own body goes, with all of
// them.
type AnthropicRequest struct {
	Model         string               `json:"model"`
	MaxTokens     *int64               `json:"max_tokens,omitempty"`
	System        json.RawMessage      `json:"system,omitempty"` // a string or text blocks
	Messages      []AnthropicMessage   `json:"messages"`
	StopSequences []string             `json:"stop_sequences,omitempty"`
	Temperature   *float64             `json:"temperature,omitempty"`
	TopP          *float64             `json:"top_p,omitempty"`
	TopK          *int64               `json:"top_k,omitempty"`
	Stream        bool                 `json:"stream,omitempty"`
	Tools         []AnthropicTool      `json:"tools,omitempty"`
	ToolChoice    *AnthropicToolChoice `json:"tool_choice,omitempty"`
	Metadata      *AnthropicMetadata   `json:"metadata,omitempty"`
	// Thinking and OutputConfig say how the model is to reason; see
	// Reasoning. Neither is sent in a chat request.
	Thinking     *AnthropicThinking     `json:"thinking,omitempty"`
	OutputConfig *AnthropicOutputConfig `json:"output_config,omitempty"`
}

// AnthropicThinking is a request's extended thinking: Type enabled (with
// BudgetTokens), adaptive or disabled; Display summarized or omitted.
type AnthropicThinking struct {
	Type         string `json:"type"`
	BudgetTokens *int64 `json:"budget_tokens,omitempty"`
	Display      string `json:"display,omitempty"`
}

// AnthropicOutputConfig is a request's output_config, as far as it maps:
// Effort is low, medium, high, xhigh or max. Its other fields (format,
// ...) are read past.
type AnthropicOutputConfig struct {
	Effort string `json:"effort,omitempty"`
}

// AnthropicMetadata is a request's metadata; user_id is the end user.
type AnthropicMetadata struct {
	UserID string `json:"user_id,omitempty"`
}

// AnthropicMessage is one turn: Content is a string or an array of blocks.
type AnthropicMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// AnthropicBlock is one content block of a message or an answer.
type AnthropicBlock struct {
	Type string `json:"type"`
	Text string `json:"text,omitempty"`
	// Thinking and Signature are a thinking block's: the model's reasoning
	// and, from Anthropic, the signature that vouches for it.
	Thinking  *string `json:"thinking,omitempty"`
	Signature *string `json:"signature,omitempty"`
	// Source is an image's: base64 data or a URL.
	Source *AnthropicSource `json:"source,omitempty"`
	// ID, Name and Input are a tool_use block's.
	ID    string          `json:"id,omitempty"`
	Name  string          `json:"name,omitempty"`
	Input json.RawMessage `json:"input,omitempty"`
	// ToolUseID, Content and IsError are a tool_result block's; Content is
	// a string or blocks.
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Content   json.RawMessage `json:"content,omitempty"`
	IsError   bool            `json:"is_error,omitempty"`
	// Data is a redacted_thinking block's: the reasoning, encrypted.
	Data string `json:"data,omitempty"`
	// ToolName is a tool_reference block's, in a tool result: a tool the
	// result makes available.
	ToolName string `json:"tool_name,omitempty"`
	// Tool is a tool_addition or tool_removal block's, in a system
	// message: the tool the conversation gains or loses from there on.
	Tool *AnthropicToolRef `json:"tool,omitempty"`
}

// AnthropicToolRef is the tool a tool_addition or tool_removal names:
// Type tool_reference names it (a tool of the request's), tool_definition
// defines it.
type AnthropicToolRef struct {
	Type       string         `json:"type"`
	Name       string         `json:"name,omitempty"`
	Definition *AnthropicTool `json:"definition,omitempty"`
}

// AnthropicSource is where an image block's bytes are.
type AnthropicSource struct {
	Type      string `json:"type"` // base64 or url
	MediaType string `json:"media_type,omitempty"`
	Data      string `json:"data,omitempty"`
	URL       string `json:"url,omitempty"`
}

// AnthropicTool is a tool the model may use. Type is empty or "custom"
// for a client tool; Anthropic's server tools have other types.
type AnthropicTool struct {
	Type        string          `json:"type,omitempty"`
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema,omitempty"`
}

// AnthropicToolChoice is auto, any, tool (with Name) or none.
type AnthropicToolChoice struct {
	Type                   string `json:"type"`
	Name                   string `json:"name,omitempty"`
	DisableParallelToolUse bool   `json:"disable_parallel_tool_use,omitempty"`
}

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

// decodeObject decodes a request body, which must be a JSON object.
func decodeObject(body []byte, v any) error {
	if b := bytes.TrimLeft(body, " \t\r\n"); len(b) == 0 || b[0] != '{' {
		return openai.BadRequest("", "The request body must be a JSON object.")
	}
	return decode(body, v, "")
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
	if r.Stream {
		c.StreamOptions = &struct {
			IncludeUsage bool `json:"include_usage"`
		}{true}
	}
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

// Reasoning is what a request asked of the model's reasoning. Chat
// completions have no one field for it, so it is carried beside the chat
// request and told to each pool in its own terms when a call is prepared:
// vllm and sglang pools get chat_template_kwargs.enable_thinking, openai
// and azure pools reasoning_effort, an anthropic pool the client's own
// thinking.
type Reasoning struct {
	// Asked reports whether the request said whether to think: thinking
	// enabled, adaptive or disabled. A thinking of another type is not
	// read, as if absent.
	Asked bool
	// On reports whether it asked the model to think: enabled or adaptive.
	On bool
	// Effort is how hard, low, medium or high, when On and the request
	// says: output_config.effort, else an enabled thinking's budget_tokens
	// (see effortOfBudget). Empty leaves it to the model.
	Effort string
	// Hidden reports whether the reasoning is left out of the answer
	// (display "omitted"); it still counts in usage.
	Hidden bool
}

// Budgets of thinking tokens as an effort: Anthropic's least budget is
// 1,024 and its documentation calls budgets above 16k large, so a budget
// under 4,096 thinks little and one of 16,384 or more (Claude Code asks
// for 31,999) thinks hard.
const (
	lowEffortBelow = 4096
	highEffortFrom = 16384
)

// effortOfBudget is an effort for a thinking budget, in tokens.
func effortOfBudget(budget int64) string {
	switch {
	case budget < lowEffortBelow:
		return "low"
	case budget < highEffortFrom:
		return "medium"
	}
	return "high"
}

// Reasoning is what r asks of the model's reasoning.
func (r *AnthropicRequest) Reasoning() Reasoning {
	var out Reasoning
	t := r.Thinking
	if t == nil {
		return out
	}
	out.Hidden = t.Display == "omitted"
	switch t.Type {
	case "enabled", "adaptive":
		out.Asked, out.On = true, true
	case "disabled":
		out.Asked = true
		return out
	default:
		return out
	}
	if oc := r.OutputConfig; oc != nil {
		switch oc.Effort {
		case "low", "medium", "high":
			out.Effort = oc.Effort
		case "xhigh", "max":
			out.Effort = "high"
		}
	}
	if out.Effort == "" && t.Type == "enabled" && t.BudgetTokens != nil {
		out.Effort = effortOfBudget(*t.BudgetTokens)
	}
	return out
}

// namedToolChoice is chat's tool_choice forcing the function name.
func namedToolChoice(name string) json.RawMessage {
	return mustJSON(map[string]any{"type": "function", "function": map[string]string{"name": name}})
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

// AnthropicErrorType is the Anthropic error type for a status.
func AnthropicErrorType(status int) string {
	switch status {
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusForbidden:
		return "permission_error"
	case http.StatusNotFound:
		return "not_found_error"
	case http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	case http.StatusServiceUnavailable, 529:
		return "overloaded_error"
	case http.StatusGatewayTimeout:
		return "timeout_error"
	}
	if status >= 500 {
		return "api_error"
	}
	return "invalid_request_error"
}

// AnthropicErrorBody is e as Anthropic sends errors:
// {"type":"error","error":{"type":"...","message":"..."}}.
func AnthropicErrorBody(e *openai.Error) []byte {
	return mustJSON(anthropicError{Type: "error", Error: anthropicErrorFields{Type: AnthropicErrorType(e.Status), Message: e.Message}})
}

type anthropicError struct {
	Type  string               `json:"type"`
	Error anthropicErrorFields `json:"error"`
}

type anthropicErrorFields struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

// WriteAnthropicError sends err as an Anthropic error response, with the
// same status and Retry-After as openai.WriteError.
func WriteAnthropicError(w http.ResponseWriter, err error) {
	e := openai.AsError(err)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	if e.RetryAfterSeconds > 0 {
		h.Set("Retry-After", itoa(int64(e.RetryAfterSeconds)))
	}
	w.WriteHeader(e.Status)
	w.Write(AnthropicErrorBody(e))
}
