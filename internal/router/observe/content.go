package observe

// Prompt content on a span, when telemetry.record_content is on: a chat
// request's messages (or a completion's prompt) in the GenAI semantic
// conventions' shape for gen_ai.input.messages, each message a role and
// its parts. Nothing here runs unless content recording is on.

import (
	"encoding/json"
)

// genAIMessage is one message of gen_ai.input.messages.
type genAIMessage struct {
	Role  string      `json:"role"`
	Parts []genAIPart `json:"parts"`
}

// genAIPart is one part of a message: text, a tool call, a tool call's
// response, a URI (an image's), or another kind named by its type alone.
type genAIPart struct {
	Type      string          `json:"type"`
	Content   string          `json:"content,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	Response  json.RawMessage `json:"response,omitempty"`
	Modality  string          `json:"modality,omitempty"`
	URI       string          `json:"uri,omitempty"`
}

// chatMessage is what of a chat message goes on a span.
type chatMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCallID string          `json:"tool_call_id"`
	ToolCalls  []struct {
		ID       string `json:"id"`
		Function struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
}

// inputMessages is gen_ai.input.messages for a request of body, JSON:
// its messages, or a completion's prompt as one user message; "" for a
// body that does not read.
func inputMessages(body []byte) string {
	if body == nil {
		return ""
	}
	var req struct {
		Messages []chatMessage   `json:"messages"`
		Prompt   json.RawMessage `json:"prompt"`
	}
	if json.Unmarshal(body, &req) != nil {
		return ""
	}
	var out []genAIMessage
	for _, m := range req.Messages {
		out = append(out, genAIMessage{Role: m.Role, Parts: messageParts(m)})
	}
	if req.Messages == nil && req.Prompt != nil {
		out = append(out, genAIMessage{Role: "user", Parts: contentParts(req.Prompt)})
	}
	b, err := json.Marshal(out)
	if err != nil || out == nil {
		return ""
	}
	return string(b)
}

// messageParts is a chat message's parts: its content, its tool calls,
// or a tool's response.
func messageParts(m chatMessage) []genAIPart {
	if m.Role == "tool" {
		return []genAIPart{{Type: "tool_call_response", ID: m.ToolCallID, Response: m.Content}}
	}
	parts := contentParts(m.Content)
	for _, c := range m.ToolCalls {
		parts = append(parts, genAIPart{Type: "tool_call", ID: c.ID, Name: c.Function.Name, Arguments: c.Function.Arguments})
	}
	return parts
}

// contentParts is a message's content as parts: a string is one text
// part; a list gives a text part for each text, a uri part for each
// image URL, and a part named by its type for anything else.
func contentParts(content json.RawMessage) []genAIPart {
	var text string
	if json.Unmarshal(content, &text) == nil {
		if text == "" {
			return nil
		}
		return []genAIPart{{Type: "text", Content: text}}
	}
	var list []struct {
		Type     string `json:"type"`
		Text     string `json:"text"`
		ImageURL struct {
			URL string `json:"url"`
		} `json:"image_url"`
	}
	if json.Unmarshal(content, &list) != nil {
		return nil
	}
	parts := make([]genAIPart, 0, len(list))
	for _, p := range list {
		switch p.Type {
		case "text":
			parts = append(parts, genAIPart{Type: "text", Content: p.Text})
		case "image_url":
			parts = append(parts, genAIPart{Type: "uri", Modality: "image", URI: p.ImageURL.URL})
		default:
			parts = append(parts, genAIPart{Type: p.Type})
		}
	}
	return parts
}
