package translate

// OpenAI's Responses API requests, the stateless part of it, as chat
// completions: nothing is stored, so a request must carry its whole
// conversation.

import (
	"context"
	"encoding/json"

	"gitea.mynodes.xyz/ilker/llmgw/internal/openai"
)

// ResponsesRequest is a Responses API request, as far as it maps onto chat
// completions. Fields it does not name (reasoning, truncation, ...) are
// read past and not sent on.
type ResponsesRequest struct {
	Model           string          `json:"model"`
	Input           json.RawMessage `json:"input"` // a string or items
	Instructions    *string         `json:"instructions,omitempty"`
	Tools           []ResponsesTool `json:"tools,omitempty"`
	ToolChoice      json.RawMessage `json:"tool_choice,omitempty"`
	MaxOutputTokens *int64          `json:"max_output_tokens,omitempty"`
	Temperature     *float64        `json:"temperature,omitempty"`
	TopP            *float64        `json:"top_p,omitempty"`
	Parallel        *bool           `json:"parallel_tool_calls,omitempty"`
	Stream          bool            `json:"stream,omitempty"`
	User            string          `json:"user,omitempty"`
	Text            *struct {
		Format json.RawMessage `json:"format,omitempty"`
	} `json:"text,omitempty"`
	Metadata map[string]string `json:"metadata,omitempty"`

	// What needs a store of responses, which llmgw does not keep.
	Store              *bool           `json:"store,omitempty"`
	PreviousResponseID *string         `json:"previous_response_id,omitempty"`
	Conversation       json.RawMessage `json:"conversation,omitempty"`
	Background         *bool           `json:"background,omitempty"`
}

// ResponsesTool is a tool of a Responses request; only function tools
// map onto chat completions.
type ResponsesTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name,omitempty"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
}

// responsesItem is one input item: a message, a function call the model
// made, or a function call's output.
type responsesItem struct {
	Type      string          `json:"type"`
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"` // a string or parts
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Arguments string          `json:"arguments"`
	Output    json.RawMessage `json:"output"` // a string or parts
}

// responsesPart is one part of an input message's content.
type responsesPart struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	ImageURL string `json:"image_url"`
	Detail   string `json:"detail"`
	FileID   string `json:"file_id"`
}

// ParseResponses reads a Responses API request body. Its errors are 400
// *openai.Error naming the field at fault, among them any request that
// needs stored responses. It stops with ctx's error when ctx ends.
func ParseResponses(ctx context.Context, body []byte) (*ResponsesRequest, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if !json.Valid(body) {
		return nil, openai.BadRequest("", "The request body is not valid JSON.")
	}
	r := new(ResponsesRequest)
	if err := decodeObject(body, r); err != nil {
		return nil, err
	}
	switch {
	case r.Model == "":
		return nil, openai.BadRequest("model", "model: field required")
	case r.PreviousResponseID != nil && *r.PreviousResponseID != "":
		return nil, openai.BadRequest("previous_response_id", "previous_response_id: this gateway stores no responses, so a response cannot continue from an earlier one; send the whole conversation as input")
	case !isNull(r.Conversation):
		return nil, openai.BadRequest("conversation", "conversation: this gateway stores no conversations; send the whole conversation as input")
	case r.Background != nil && *r.Background:
		return nil, openai.BadRequest("background", "background: this gateway stores no responses, so it cannot run one in the background")
	case r.MaxOutputTokens != nil && (*r.MaxOutputTokens < 1 || *r.MaxOutputTokens > openai.MaxTokensLimit):
		return nil, openai.BadRequest("max_output_tokens", "max_output_tokens: must be from 1 to %d, got %d", openai.MaxTokensLimit, *r.MaxOutputTokens)
	}
	return r, nil
}

// ToChat is the chat completions request that asks what r asks. It stops
// with ctx's error when ctx ends.
func (r *ResponsesRequest) ToChat(ctx context.Context) (*ChatRequest, error) {
	p, err := begin(ctx)
	if err != nil {
		return nil, err
	}
	c := &ChatRequest{
		Model:       r.Model,
		Messages:    []ChatMessage{},
		MaxTokens:   r.MaxOutputTokens,
		Temperature: r.Temperature,
		TopP:        r.TopP,
		User:        r.User,
		Parallel:    r.Parallel,
		Stream:      r.Stream,
	}
	if r.Stream {
		c.StreamOptions = &struct {
			IncludeUsage bool `json:"include_usage"`
		}{true}
	}
	if r.Instructions != nil && *r.Instructions != "" {
		c.Messages = append(c.Messages, ChatMessage{Role: "system", Content: jsonString(*r.Instructions)})
	}
	switch {
	case isNull(r.Input):
		return nil, openai.BadRequest("input", "input: field required")
	case isString(r.Input):
		c.Messages = append(c.Messages, ChatMessage{Role: "user", Content: r.Input})
	case jsonKind(r.Input) == "an array":
		var items []json.RawMessage
		json.Unmarshal(r.Input, &items)
		for i, raw := range items {
			if err := p.step(); err != nil {
				return nil, err
			}
			path := at("input", i)
			var it responsesItem
			if err := decode(raw, &it, path); err != nil {
				return nil, err
			}
			var err error
			if c.Messages, err = appendItem(p, c.Messages, it, path); err != nil {
				return nil, err
			}
		}
	default:
		return nil, typeError("input", "a string or an array of items", jsonKind(r.Input))
	}
	for i, t := range r.Tools {
		if err := p.step(); err != nil {
			return nil, err
		}
		if t.Type != "function" {
			return nil, unsupported(at("tools", i)+".type", "%q is a hosted tool this gateway cannot run; only function tools can be used", t.Type)
		}
		var ct ChatTool
		ct.Type = "function"
		ct.Function.Name, ct.Function.Description, ct.Function.Parameters, ct.Function.Strict = t.Name, t.Description, t.Parameters, t.Strict
		c.Tools = append(c.Tools, ct)
	}
	if !isNull(r.ToolChoice) {
		if isString(r.ToolChoice) {
			var s string
			json.Unmarshal(r.ToolChoice, &s)
			if s != "auto" && s != "none" && s != "required" {
				return nil, openai.BadRequest("tool_choice", "tool_choice: must be auto, none, required or a function, got %q", s)
			}
			c.ToolChoice = r.ToolChoice
		} else {
			var tc struct {
				Type string `json:"type"`
				Name string `json:"name"`
			}
			if err := decode(r.ToolChoice, &tc, "tool_choice"); err != nil {
				return nil, err
			}
			if tc.Type != "function" || tc.Name == "" {
				return nil, unsupported("tool_choice", "only auto, none, required or a function by name can be translated, not %q", tc.Type)
			}
			c.ToolChoice = namedToolChoice(tc.Name)
		}
	}
	if r.Text != nil && !isNull(r.Text.Format) {
		var f struct {
			Type        string          `json:"type"`
			Name        string          `json:"name"`
			Description string          `json:"description,omitempty"`
			Schema      json.RawMessage `json:"schema"`
			Strict      *bool           `json:"strict,omitempty"`
		}
		if err := decode(r.Text.Format, &f, "text.format"); err != nil {
			return nil, err
		}
		switch f.Type {
		case "text":
		case "json_object":
			c.ResponseFmt = json.RawMessage(`{"type":"json_object"}`)
		case "json_schema":
			c.ResponseFmt = mustJSON(map[string]any{"type": "json_schema", "json_schema": map[string]any{
				"name": f.Name, "description": f.Description, "schema": f.Schema, "strict": f.Strict}})
		default:
			return nil, unsupported("text.format.type", "must be text, json_object or json_schema, got %q", f.Type)
		}
	}
	return c, nil
}

// appendItem adds one input item to a chat conversation. A function call
// joins the assistant message before it, if that is the last one, as chat
// puts a turn's calls in one message.
func appendItem(p *progress, msgs []ChatMessage, it responsesItem, path string) ([]ChatMessage, error) {
	switch it.Type {
	case "", "message":
		role := it.Role
		switch role {
		case "user", "assistant", "system":
		case "developer":
			role = "system" // what open models' templates know
		default:
			return nil, openai.BadRequest(path+".role", "%s.role: must be user, assistant, system or developer, got %q", path, it.Role)
		}
		content, err := responsesContent(p, it.Content, path+".content")
		if err != nil {
			return nil, err
		}
		return append(msgs, ChatMessage{Role: role, Content: content}), nil
	case "function_call":
		var call ChatToolCall
		call.ID, call.Type, call.Function.Name, call.Function.Arguments = it.CallID, "function", it.Name, it.Arguments
		if n := len(msgs); n > 0 && msgs[n-1].Role == "assistant" {
			msgs[n-1].ToolCalls = append(msgs[n-1].ToolCalls, call)
			return msgs, nil
		}
		return append(msgs, ChatMessage{Role: "assistant", ToolCalls: []ChatToolCall{call}}), nil
	case "function_call_output":
		content, err := responsesContent(p, it.Output, path+".output")
		if err != nil {
			return nil, err
		}
		return append(msgs, ChatMessage{Role: "tool", ToolCallID: it.CallID, Content: jsonString(contentText(content))}), nil
	case "reasoning":
		return msgs, nil // a model's earlier reasoning: chat takes none back
	}
	return nil, unsupported(path+".type", "input items of type %q cannot be translated; send messages, function calls and their outputs", it.Type)
}

// responsesContent is a message's content, a string or input parts, as
// chat content: a string stays one, parts become text and image_url parts.
func responsesContent(p *progress, raw json.RawMessage, path string) (json.RawMessage, error) {
	if isNull(raw) || isString(raw) {
		return raw, nil
	}
	if jsonKind(raw) != "an array" {
		return nil, typeError(path, "a string or an array of content parts", jsonKind(raw))
	}
	parts, err := decodeArray[responsesPart](p, raw, path)
	if err != nil {
		return nil, err
	}
	out := make([]ChatPart, 0, len(parts))
	for i, p := range parts {
		switch p.Type {
		case "input_text", "output_text", "text":
			out = append(out, ChatPart{Type: "text", Text: p.Text})
		case "input_image":
			if p.ImageURL == "" {
				return nil, unsupported(at(path, i), "images are translated from image_url, not file ids")
			}
			cp := ChatPart{Type: "image_url", ImageURL: &struct {
				URL    string `json:"url"`
				Detail string `json:"detail,omitempty"`
			}{p.ImageURL, p.Detail}}
			out = append(out, cp)
		case "refusal":
		default:
			return nil, unsupported(at(path, i)+".type", "content parts of type %q cannot be translated", p.Type)
		}
	}
	return mustJSON(out), nil
}
