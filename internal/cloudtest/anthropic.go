package cloudtest

// Anthropic's models on Vertex AI: rawPredict and streamRawPredict at
// .../publishers/anthropic/models/{model}, which take a Messages API
// body without its model and with Vertex's anthropic_version, and answer
// as the Messages API does (JSON, or its SSE events).

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
)

// VertexAnthropicVersion is the anthropic_version the server takes in a
// body, the one Vertex AI serves.
const VertexAnthropicVersion = "vertex-2023-10-16"

// anthropicPath is a rawPredict or streamRawPredict call's path: project,
// location, model and verb.
var anthropicPath = regexp.MustCompile(`^/v1/projects/([^/]+)/locations/([^/]+)/publishers/anthropic/models/([^/:]+):(rawPredict|streamRawPredict)$`)

// anthropicRequest is what the server reads of a Messages API body.
type anthropicRequest struct {
	AnthropicVersion string          `json:"anthropic_version"`
	Model            json.RawMessage `json:"model"`
	MaxTokens        int             `json:"max_tokens"`
	Stream           bool            `json:"stream"`
	Messages         []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Tools []struct {
		Name string `json:"name"`
	} `json:"tools"`
}

// anthropicBlock is a content block as the server reads it; Content is a
// tool result's, a string or text blocks.
type anthropicBlock struct {
	Type    string          `json:"type"`
	Text    string          `json:"text"`
	Content json.RawMessage `json:"content"`
}

// serveAnthropic answers a call to Anthropic's models, its bearer token
// already checked: a path or body Vertex would refuse is a 400 (or 404),
// with Anthropic's error body.
func (g *Google) serveAnthropic(w http.ResponseWriter, r *http.Request, body []byte) {
	m := anthropicPath.FindStringSubmatch(r.URL.EscapedPath())
	if m == nil || r.Method != http.MethodPost {
		anthropicError(w, 404, "not_found_error", "no such method: "+r.URL.Path)
		return
	}
	if g.Status != 0 {
		anthropicError(w, g.Status, "api_error", g.Message)
		return
	}
	var req anthropicRequest
	err := json.Unmarshal(body, &req)
	stream := m[4] == "streamRawPredict"
	switch {
	case err != nil:
		anthropicError(w, 400, "invalid_request_error", fmt.Sprint("bad request: ", err))
	case req.AnthropicVersion != VertexAnthropicVersion:
		anthropicError(w, 400, "invalid_request_error", fmt.Sprintf("anthropic_version: %q is not supported", req.AnthropicVersion))
	case req.Model != nil:
		anthropicError(w, 400, "invalid_request_error", "model: Extra inputs are not permitted")
	case req.MaxTokens <= 0 || len(req.Messages) == 0:
		anthropicError(w, 400, "invalid_request_error", "max_tokens and messages are required")
	case req.Stream != stream:
		anthropicError(w, 400, "invalid_request_error", fmt.Sprintf("stream is %v at %s", req.Stream, m[4]))
	default:
		reply := Reply{Text: "Hi from Claude."}
		usage := map[string]int{"input_tokens": 12, "cache_read_input_tokens": 4, "cache_creation_input_tokens": 2, "output_tokens": 5}
		if g.Script != nil {
			reply, usage = g.Script(req.turn(stream)), map[string]int{"input_tokens": 100, "output_tokens": 10}
		}
		answerAnthropic(w, m[3], stream, reply, usage)
	}
}

// anthropicError writes an error as the Messages API does.
func anthropicError(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"type": "error", "error": map[string]string{"type": typ, "message": msg}})
}

// answerAnthropic writes reply from model: a Message, or the events a
// stream of it is, its text a word at a time and a tool call's input in
// two pieces.
func answerAnthropic(w http.ResponseWriter, model string, stream bool, reply Reply, usage map[string]int) {
	stop, block := "end_turn", map[string]any{"type": "text", "text": reply.Text}
	if reply.Tool != "" {
		stop, block = "tool_use", map[string]any{"type": "tool_use", "id": "toolu_1", "name": reply.Tool, "input": json.RawMessage(reply.Args)}
	}
	msg := map[string]any{"id": "msg_vrtx_1", "type": "message", "role": "assistant", "model": model,
		"content": []any{block}, "stop_reason": stop, "stop_sequence": nil, "usage": usage}
	if !stream {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(msg)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	send := func(event string, data any) {
		b, _ := json.Marshal(data)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b)
		w.(http.Flusher).Flush()
	}
	start := map[string]int{}
	for k, v := range usage {
		start[k] = v
	}
	start["output_tokens"] = 1
	msg["content"], msg["stop_reason"], msg["usage"] = []any{}, nil, start
	send("message_start", map[string]any{"type": "message_start", "message": msg})
	if reply.Tool != "" {
		send("content_block_start", map[string]any{"type": "content_block_start", "index": 0,
			"content_block": map[string]any{"type": "tool_use", "id": "toolu_1", "name": reply.Tool, "input": map[string]any{}}})
		half := len(reply.Args) / 2
		for _, piece := range []string{reply.Args[:half], reply.Args[half:]} {
			send("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "input_json_delta", "partial_json": piece}})
		}
	} else {
		send("content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "text", "text": ""}})
		for _, piece := range words(reply.Text) {
			send("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "text_delta", "text": piece}})
		}
	}
	send("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
	send("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
		"usage": map[string]int{"output_tokens": usage["output_tokens"]}})
	send("message_stop", map[string]any{"type": "message_stop"})
}

// turn is what a Script reads of req: its tools' names, and each
// message's text, a tool result's as a message of role tool.
func (req *anthropicRequest) turn(stream bool) Turn {
	t := Turn{Stream: stream}
	for _, tool := range req.Tools {
		t.Tools = append(t.Tools, tool.Name)
	}
	for _, m := range req.Messages {
		var s string
		if json.Unmarshal(m.Content, &s) == nil {
			t.Messages = append(t.Messages, Message{Role: m.Role, Text: s})
			continue
		}
		var blocks []anthropicBlock
		json.Unmarshal(m.Content, &blocks)
		for _, b := range blocks {
			switch b.Type {
			case "text":
				t.Messages = append(t.Messages, Message{Role: m.Role, Text: b.Text})
			case "tool_result":
				t.Messages = append(t.Messages, Message{Role: "tool", Text: resultText(b.Content)})
			}
		}
	}
	return t
}

// resultText is a tool result's content as text: the string, or its
// text blocks' texts joined.
func resultText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var blocks []anthropicBlock
	json.Unmarshal(raw, &blocks)
	var texts []string
	for _, b := range blocks {
		texts = append(texts, b.Text)
	}
	return strings.Join(texts, "")
}
