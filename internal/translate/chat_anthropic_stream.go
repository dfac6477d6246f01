package translate

// A streamed Messages API answer read back as chat completion chunks,
// event by event: text, tool calls and their arguments, thinking and its
// signatures, the stop reason and the usage, the stream's end or its
// error.

import (
	"encoding/json"

	"gitea.mynodes.xyz/ilker/llmgw/internal/openai"
)

// Stream begins reading a streamed message.
func (AnthropicUpstream) Stream() openai.EventDecoder { return &anthropicDecoder{} }

// maxStreamID is the longest message id or model name, in bytes, a
// streamed message's chunks are written with: each is written into every
// chunk, so a longer one, which no provider sends, is written as empty,
// and a chunk stays a constant larger than its event.
const maxStreamID = 256

// anthropicDecoder turns a streamed message's events into chat chunks.
type anthropicDecoder struct {
	id, model string // the message's, each empty when past maxStreamID
	tools     int    // tool_use blocks so far: the next one's chat index
	inTool    bool   // the open block is a tool_use
	usage     AnthropicUsage
	out       [][]byte // the chunks of the current event
}

// short is s when it is at most maxStreamID bytes long, else empty.
func short(s string) string {
	if len(s) > maxStreamID {
		return ""
	}
	return s
}

func (d *anthropicDecoder) chunk(delta map[string]any, finish, stop any) []byte {
	return mustJSON(map[string]any{"id": d.id, "object": "chat.completion.chunk", "created": 0, "model": d.model,
		"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish, "stop_reason": stop}}})
}

func (d *anthropicDecoder) Event(kind, data []byte, chunks [][]byte) [][]byte {
	var ev streamEvent
	if json.Unmarshal(data, &ev) != nil {
		return chunks
	}
	switch ev.Type {
	case "message_start":
		if m := ev.Message; m != nil {
			d.id, d.model, d.usage = short(m.ID), short(m.Model), m.Usage
		}
		return append(chunks, d.chunk(map[string]any{"role": "assistant", "content": ""}, nil, nil))
	case "content_block_start":
		d.inTool = ev.ContentBlock != nil && ev.ContentBlock.Type == "tool_use"
		if ev.ContentBlock != nil && ev.ContentBlock.Type == "redacted_thinking" {
			b := AnthropicBlock{Type: "redacted_thinking", Data: ev.ContentBlock.Data}
			return append(chunks, d.chunk(map[string]any{"thinking_blocks": []AnthropicBlock{b}}, nil, nil))
		}
		if !d.inTool {
			return chunks
		}
		call := map[string]any{"index": d.tools, "id": ev.ContentBlock.ID, "type": "function",
			"function": map[string]string{"name": ev.ContentBlock.Name, "arguments": ""}}
		d.tools++
		return append(chunks, d.chunk(map[string]any{"tool_calls": []any{call}}, nil, nil))
	case "content_block_delta":
		if ev.Delta == nil {
			return chunks
		}
		switch ev.Delta.Type {
		case "text_delta":
			return append(chunks, d.chunk(map[string]any{"content": ev.Delta.Text}, nil, nil))
		case "input_json_delta":
			if !d.inTool || ev.Delta.PartialJSON == "" {
				return chunks
			}
			call := map[string]any{"index": d.tools - 1, "function": map[string]string{"arguments": ev.Delta.PartialJSON}}
			return append(chunks, d.chunk(map[string]any{"tool_calls": []any{call}}, nil, nil))
		case "thinking_delta":
			return append(chunks, d.chunk(map[string]any{"reasoning_content": ev.Delta.Thinking}, nil, nil))
		case "signature_delta":
			// What vouches for the thinking block it ends, which a client
			// must send back with the block.
			b := AnthropicBlock{Type: "thinking", Signature: &ev.Delta.Signature}
			return append(chunks, d.chunk(map[string]any{"thinking_blocks": []AnthropicBlock{b}}, nil, nil))
		}
	case "message_delta":
		if ev.Usage != nil {
			d.usage.OutputTokens = ev.Usage.OutputTokens
			if ev.Usage.InputTokens != nil {
				d.usage.InputTokens = *ev.Usage.InputTokens
			}
			if ev.Usage.CacheReadInputTokens != nil {
				d.usage.CacheReadInputTokens = *ev.Usage.CacheReadInputTokens
			}
			if ev.Usage.CacheCreationInputTokens != nil {
				d.usage.CacheCreationInputTokens = *ev.Usage.CacheCreationInputTokens
			}
		}
		if ev.Delta != nil && ev.Delta.StopReason != nil {
			chunks = append(chunks, d.chunk(map[string]any{}, finishReason(*ev.Delta.StopReason), ev.Delta.StopSequence))
		}
		return append(chunks, mustJSON(map[string]any{"id": d.id, "object": "chat.completion.chunk", "created": 0, "model": d.model,
			"choices": []any{}, "usage": chatUsage(d.usage)}))
	case "message_stop":
		return append(chunks, openai.Done)
	case "error":
		e := anthropicErrorFields{Type: "api_error", Message: "The model's provider failed mid-answer."}
		if ev.Error != nil {
			e = *ev.Error
		}
		return append(chunks, mustJSON(map[string]any{"error": map[string]any{"message": e.Message, "type": e.Type, "param": nil, "code": nil}}))
	}
	return chunks
}
