package translate

// A Messages API answer read back as chat completions, before the relay
// reads it: a whole message as a chat completion, an error body as
// OpenAI's. Thinking comes down as reasoning_content, and its blocks with
// their signatures as thinking_blocks, for the Messages translator to
// send back whole.

import (
	"encoding/json"
	"errors"
	"strings"

	"gitea.mynodes.xyz/ilker/llmgw/internal/openai"
)

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
