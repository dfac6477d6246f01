package translate

// Chat completions answers as Anthropic's Messages API answers them: the
// translator a Messages client is answered through, and a whole answer. A
// streamed answer is anthropic_chat_stream.go's.

import (
	"cmp"
	"encoding/json"

	"gitea.mynodes.xyz/ilker/llmgw/internal/openai"
)

// Anthropic answers one Messages API request from a chat completions
// answer. It is an openai.Translator.
type Anthropic struct {
	// ID is the message's id, msg_ and the request's id.
	ID string
	// Model is the model named in the answer.
	Model string
	// StopSequences are the request's, which a vLLM stop_reason names
	// when one ended the answer.
	StopSequences []string
	// HideThinking leaves a chat backend's reasoning out of the answer, as
	// a request whose thinking.display is "omitted" asks. An anthropic
	// pool's thinking blocks are sent as they came, their signatures with
	// them: the pool heeded the display itself.
	HideThinking bool

	decodeAll bool // decode every chunk, for tests comparing with the fast path
}

var _ openai.Translator = (*Anthropic)(nil)

// anthropicUsage is chat usage as the Messages API counts it; zero for
// nil.
func anthropicUsage(u *openai.Usage) AnthropicUsage {
	if u == nil {
		return AnthropicUsage{}
	}
	cached := u.CachedTokens()
	return AnthropicUsage{InputTokens: max(u.PromptTokens-cached, 0), OutputTokens: u.CompletionTokens, CacheReadInputTokens: cached}
}

// stopReason maps a chat finish_reason, and vLLM's stop_reason, onto
// Anthropic's stop_reason and stop_sequence.
func (a *Anthropic) stopReason(finish string, stop json.RawMessage) (string, *string) {
	switch finish {
	case "length":
		return "max_tokens", nil
	case "tool_calls", "function_call":
		return "tool_use", nil
	case "content_filter":
		return "refusal", nil
	}
	if s, ok := stopString(stop); ok {
		for _, seq := range a.StopSequences {
			if seq == s {
				return "stop_sequence", &s
			}
		}
	}
	return "end_turn", nil
}

// Answer is a whole chat completion as an Anthropic message.
func (a *Anthropic) Answer(chat []byte) ([]byte, error) {
	c, err := readCompletion(chat)
	if err != nil {
		return nil, err
	}
	ch := c.Choices[0]
	msg := AnthropicAnswer{ID: a.ID, Type: "message", Role: "assistant", Model: a.Model, Content: []AnthropicBlock{}, Usage: anthropicUsage(c.Usage)}
	switch r := cmp.Or(ch.Message.ReasoningContent, ch.Message.Reasoning); {
	case len(ch.Message.ThinkingBlocks) > 0:
		msg.Content = append(msg.Content, ch.Message.ThinkingBlocks...)
	case r != "" && !a.HideThinking:
		msg.Content = append(msg.Content, AnthropicBlock{Type: "thinking", Thinking: &r, Signature: new(string)})
	}
	if text := contentText(ch.Message.Content); text != "" {
		msg.Content = append(msg.Content, AnthropicBlock{Type: "text", Text: text})
	}
	for _, tc := range ch.Message.ToolCalls {
		msg.Content = append(msg.Content, AnthropicBlock{Type: "tool_use", ID: tc.ID, Name: tc.Function.Name, Input: toolInput(tc.Function.Arguments)})
	}
	reason, seq := a.stopReason(ch.FinishReason, ch.StopReason)
	msg.StopReason, msg.StopSequence = &reason, seq
	return mustJSON(msg), nil
}

// ErrorBody is e in Anthropic's shape.
func (a *Anthropic) ErrorBody(e *openai.Error) []byte { return AnthropicErrorBody(e) }

// Stream begins translating a streamed answer.
func (a *Anthropic) Stream() openai.EventTranslator {
	return &anthropicStream{a: a, block: -1}
}
