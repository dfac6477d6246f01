package translate

// A pool that speaks Anthropic's Messages API, read as chat completions:
// a chat request becomes a message request on the way up (a Messages
// request goes as it came), and the answer, its stream events and errors
// become chat's on the way down, before the relay reads them. Thinking
// comes down as reasoning_content, and its blocks with their signatures as
// thinking_blocks, for the Messages translator to send back whole.

import (
	"context"
	"encoding/json"
	"errors"
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

// finishReason is a Messages API stop_reason as a chat finish_reason.
func finishReason(stop string) string {
	switch stop {
	case "max_tokens", "model_context_window_exceeded":
		return "length"
	case "tool_use":
		return "tool_calls"
	case "refusal":
		return "content_filter"
	}
	return "stop"
}

// chatUsage is a Messages API usage as chat's, whose prompt counts every
// input token, cached or not.
func chatUsage(u AnthropicUsage) *openai.Usage {
	prompt := u.InputTokens + u.CacheReadInputTokens + u.CacheCreationInputTokens
	cu := &openai.Usage{PromptTokens: prompt, CompletionTokens: u.OutputTokens, TotalTokens: prompt + u.OutputTokens}
	if u.CacheReadInputTokens > 0 {
		cu.PromptTokensDetails = &struct {
			CachedTokens int64 `json:"cached_tokens"`
		}{u.CacheReadInputTokens}
	}
	return cu
}

// Answer is a whole message as a chat completion.
func (AnthropicUpstream) Answer(body []byte) ([]byte, error) {
	var m AnthropicAnswer
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, err
	}
	if m.Type != "message" {
		return nil, errors.New("an Anthropic answer that is no message")
	}
	var text, thinking strings.Builder
	msg := map[string]any{"role": "assistant"}
	var calls []ChatToolCall
	var blocks []AnthropicBlock // thinking and redacted_thinking, signed
	for _, b := range m.Content {
		switch b.Type {
		case "text":
			text.WriteString(b.Text)
		case "thinking":
			if b.Thinking == nil {
				b.Thinking = new("")
			}
			if b.Signature == nil {
				b.Signature = new("")
			}
			thinking.WriteString(*b.Thinking)
			blocks = append(blocks, AnthropicBlock{Type: b.Type, Thinking: b.Thinking, Signature: b.Signature})
		case "redacted_thinking":
			blocks = append(blocks, AnthropicBlock{Type: b.Type, Data: b.Data})
		case "tool_use":
			var tc ChatToolCall
			tc.ID, tc.Type, tc.Function.Name, tc.Function.Arguments = b.ID, "function", b.Name, compact(b.Input)
			calls = append(calls, tc)
		}
	}
	msg["content"] = text.String()
	if thinking.Len() > 0 {
		msg["reasoning_content"] = thinking.String()
	}
	if len(blocks) > 0 {
		msg["thinking_blocks"] = blocks
	}
	if len(calls) > 0 {
		msg["tool_calls"] = calls
		if text.Len() == 0 {
			msg["content"] = nil
		}
	}
	stop := ""
	if m.StopReason != nil {
		stop = *m.StopReason
	}
	choice := map[string]any{"index": 0, "message": msg, "finish_reason": finishReason(stop), "stop_reason": m.StopSequence}
	return mustJSON(map[string]any{"id": m.ID, "object": "chat.completion", "created": 0, "model": m.Model,
		"choices": []any{choice}, "usage": chatUsage(m.Usage)}), nil
}

// Error is a Messages API error body as an OpenAI error body, keeping its
// message and type.
func (AnthropicUpstream) Error(status int, body []byte) []byte {
	var e anthropicError
	json.Unmarshal(body, &e)
	oe := &openai.Error{Status: status, Type: e.Error.Type, Message: e.Error.Message}
	if oe.Message == "" {
		oe.Message = "The model's provider refused the request."
	}
	if oe.Type == "" {
		oe.Type = "invalid_request_error"
	}
	return oe.Body()
}

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

// streamEvent is the part of a Messages API stream event the decoder reads.
type streamEvent struct {
	Type    string `json:"type"`
	Message *struct {
		ID    string         `json:"id"`
		Model string         `json:"model"`
		Usage AnthropicUsage `json:"usage"`
	} `json:"message"`
	ContentBlock *AnthropicBlock `json:"content_block"`
	Delta        *struct {
		Type         string  `json:"type"`
		Text         string  `json:"text"`
		PartialJSON  string  `json:"partial_json"`
		Thinking     string  `json:"thinking"`
		Signature    string  `json:"signature"`
		StopReason   *string `json:"stop_reason"`
		StopSequence *string `json:"stop_sequence"`
	} `json:"delta"`
	Usage *struct {
		InputTokens              *int64 `json:"input_tokens"`
		OutputTokens             int64  `json:"output_tokens"`
		CacheReadInputTokens     *int64 `json:"cache_read_input_tokens"`
		CacheCreationInputTokens *int64 `json:"cache_creation_input_tokens"`
	} `json:"usage"`
	Error *anthropicErrorFields `json:"error"`
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
