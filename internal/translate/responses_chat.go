package translate

// OpenAI's Responses API requests, the stateless part of it, as chat
// completions: nothing is stored, so a request must carry its whole
// conversation. Its tools are offered as chat functions as
// responses_chat_tools.go says; those that run on OpenAI's side are left
// out (hosted.go).

import (
	"context"
	"encoding/json"
	"slices"

	"gitea.mynodes.xyz/ilker/llmgw/internal/openai"
)

// ParseResponses reads a Responses API request body. Its errors are 400
// *openai.Error naming the field at fault, among them any request that
// needs stored responses or prompts. It stops with ctx's error when ctx
// ends.
func ParseResponses(ctx context.Context, body []byte) (*ResponsesRequest, error) {
	p, err := begin(ctx)
	if err != nil {
		return nil, err
	}
	if !json.Valid(body) {
		return nil, openai.BadRequest("", "The request body is not valid JSON.")
	}
	var top struct {
		ResponsesRequest
		Tools json.RawMessage `json:"tools"`
	}
	if err := decodeObject(body, &top); err != nil {
		return nil, err
	}
	r := &top.ResponsesRequest
	switch {
	case isNull(top.Tools):
	case jsonKind(top.Tools) != "an array":
		return nil, typeError("tools", "an array", jsonKind(top.Tools))
	default:
		var tools []json.RawMessage
		json.Unmarshal(top.Tools, &tools)
		r.Tools = make([]ResponsesTool, len(tools))
		for i, raw := range tools {
			if err := p.step(); err != nil {
				return nil, err
			}
			if err := decode(raw, &r.Tools[i], at("tools", i)); err != nil {
				return nil, err
			}
			r.Tools[i].raw, r.Tools[i].path = raw, at("tools", i)
		}
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
	case !isNull(r.Prompt):
		return nil, openai.BadRequest("prompt", "prompt: this gateway stores no prompts; send the prompt's text as instructions and input")
	case r.MaxOutputTokens != nil && (*r.MaxOutputTokens < 1 || *r.MaxOutputTokens > openai.MaxTokensLimit):
		return nil, openai.BadRequest("max_output_tokens", "max_output_tokens: must be from 1 to %d, got %d", openai.MaxTokensLimit, *r.MaxOutputTokens)
	}
	return r, nil
}

// ToChat is the chat completions request that asks what r asks: its
// function and custom tools, namespaces flattened, offered as functions,
// its hosted tools left out (HostedTools). It stops with ctx's error when
// ctx ends.
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
	c.usageStreamed()
	if r.PromptCacheKey != nil {
		c.PromptCacheKey = *r.PromptCacheKey
	}
	if r.Reasoning != nil && r.Reasoning.Effort != nil {
		c.ReasoningEffort = *r.Reasoning.Effort
	}
	if r.Instructions != nil && *r.Instructions != "" {
		c.Messages = append(c.Messages, ChatMessage{Role: "system", Content: jsonString(*r.Instructions)})
	}
	var items []responsesItem
	switch {
	case isNull(r.Input):
		return nil, openai.BadRequest("input", "input: field required")
	case isString(r.Input):
		c.Messages = append(c.Messages, ChatMessage{Role: "user", Content: r.Input})
	case jsonKind(r.Input) == "an array":
		if items, err = r.inputItems(p); err != nil {
			return nil, err
		}
	default:
		return nil, typeError("input", "a string or an array of items", jsonKind(r.Input))
	}
	// The tools before the items that call them: a call names the chat
	// function its tool is offered as.
	tools := r.Tools
	if len(r.added) > 0 {
		tools = append(slices.Clip(r.Tools), r.added...)
	}
	if c.Tools, r.names, err = offerTools(p, tools); err != nil {
		return nil, err
	}
	for i, it := range items {
		if err := p.step(); err != nil {
			return nil, err
		}
		if c.Messages, err = r.appendItem(p, c.Messages, it, at("input", i)); err != nil {
			return nil, err
		}
	}
	c.Messages = joinLeadingSystem(c.Messages)
	if c.ToolChoice, err = r.chatToolChoice(); err != nil {
		return nil, err
	}
	if len(c.Tools) == 0 && (string(c.ToolChoice) == `"auto"` || string(c.ToolChoice) == `"none"`) {
		// No tool is offered (each was a hosted one, or there were
		// none): a backend refuses a choice among none.
		c.ToolChoice, c.Parallel = nil, nil
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

// inputItems decodes r's input items, and keeps the tools its
// additional_tools items add in r.added: chat offers every tool for the
// whole conversation, so those are offered with the request's own.
func (r *ResponsesRequest) inputItems(p *progress) ([]responsesItem, error) {
	var raws []json.RawMessage
	json.Unmarshal(r.Input, &raws)
	items := make([]responsesItem, len(raws))
	r.added = nil
	for i, raw := range raws {
		if err := p.step(); err != nil {
			return nil, err
		}
		path := at("input", i)
		if err := decode(raw, &items[i], path); err != nil {
			return nil, err
		}
		if items[i].Type != "additional_tools" {
			continue
		}
		tools, err := decodeArray[ResponsesTool](p, items[i].Tools, path+".tools")
		if err != nil {
			return nil, err
		}
		for j := range tools {
			tools[j].path = at(path+".tools", j)
		}
		r.added = append(r.added, tools...)
	}
	return items, nil
}

// chatToolChoice is r's tool_choice as chat's: auto, none, required, or a
// function or custom tool by name (in a namespace, when it names one).
func (r *ResponsesRequest) chatToolChoice() (json.RawMessage, error) {
	if isNull(r.ToolChoice) {
		return nil, nil
	}
	if isString(r.ToolChoice) {
		var s string
		json.Unmarshal(r.ToolChoice, &s)
		if s != "auto" && s != "none" && s != "required" {
			return nil, openai.BadRequest("tool_choice", "tool_choice: must be auto, none, required or a function, got %q", s)
		}
		return r.ToolChoice, nil
	}
	var tc struct {
		Type      string `json:"type"`
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	}
	if err := decode(r.ToolChoice, &tc, "tool_choice"); err != nil {
		return nil, err
	}
	if tc.Type != "function" && tc.Type != "custom" || tc.Name == "" {
		return nil, unsupported("tool_choice", "only auto, none, required or a function or custom tool by name can be translated, not %q", tc.Type)
	}
	return namedToolChoice(r.names.chatName(tc.Namespace, tc.Name)), nil
}

// appendItem adds one input item to a chat conversation. A tool call
// joins the assistant message before it, if that is the last one, as chat
// puts a turn's calls in one message.
func (r *ResponsesRequest) appendItem(p *progress, msgs []ChatMessage, it responsesItem, path string) ([]ChatMessage, error) {
	switch it.Type {
	case "", "message":
		role := it.Role
		switch role {
		case "user", "assistant", "system":
		case "developer":
			// Chat's system: every open model's template knows it, and
			// many know no developer role, which they drop or refuse.
			role = "system"
		default:
			return nil, openai.BadRequest(path+".role", "%s.role: must be user, assistant, system or developer, got %q", path, it.Role)
		}
		content, err := responsesContent(p, it.Content, path+".content")
		if err != nil {
			return nil, err
		}
		return append(msgs, ChatMessage{Role: role, Content: content}), nil
	case "function_call", "custom_tool_call":
		var call ChatToolCall
		call.ID, call.Type, call.Function.Name = it.CallID, "function", r.names.chatName(it.Namespace, it.Name)
		call.Function.Arguments = it.Arguments
		if it.Type == "custom_tool_call" {
			if !isString(it.Input) {
				return nil, typeError(path+".input", "a string", jsonKind(it.Input))
			}
			var input string
			json.Unmarshal(it.Input, &input)
			call.Function.Arguments = customArguments(input)
		}
		if n := len(msgs); n > 0 && msgs[n-1].Role == "assistant" {
			msgs[n-1].ToolCalls = append(msgs[n-1].ToolCalls, call)
			return msgs, nil
		}
		return append(msgs, ChatMessage{Role: "assistant", ToolCalls: []ChatToolCall{call}}), nil
	case "function_call_output", "custom_tool_call_output":
		content, err := responsesContent(p, it.Output, path+".output")
		if err != nil {
			return nil, err
		}
		return append(msgs, ChatMessage{Role: "tool", ToolCallID: it.CallID, Content: jsonString(contentText(content))}), nil
	case "reasoning":
		// A model's earlier reasoning: chat takes none back, and what
		// it would need to, encrypted_content, no gateway can read.
		return msgs, nil
	case "additional_tools":
		return msgs, nil // offered with the request's own tools (inputItems)
	case "web_search_call", "file_search_call", "code_interpreter_call", "image_generation_call", "mcp_call", "mcp_list_tools":
		// Hosted tools' calls, from a conversation held with OpenAI: no
		// tool of this model made them.
		return msgs, nil
	}
	return nil, unsupported(path+".type", "input items of type %q cannot be translated; send messages, function and custom tool calls and their outputs", it.Type)
}

// joinLeadingSystem joins the system messages msgs starts with into one,
// their parts in order: a Responses conversation often starts with
// instructions and developer messages, and many open models' templates
// take one system message, first.
func joinLeadingSystem(msgs []ChatMessage) []ChatMessage {
	n := 0
	for n < len(msgs) && msgs[n].Role == "system" {
		n++
	}
	if n < 2 {
		return msgs
	}
	var parts []ChatPart
	for _, m := range msgs[:n] {
		if isString(m.Content) {
			parts = append(parts, ChatPart{Type: "text", Text: contentText(m.Content)})
			continue
		}
		var ps []ChatPart
		json.Unmarshal(m.Content, &ps)
		parts = append(parts, ps...)
	}
	msgs[n-1] = ChatMessage{Role: "system", Content: mustJSON(parts)}
	return msgs[n-1:]
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
