package translate

// A streamed chat completions answer as the Messages API streams one:
// message_start, content blocks opened and closed as the chat stream
// moves from reasoning to text to each tool call, message_delta with the
// stop reason and usage, and message_stop.

import (
	"encoding/json"
	"strconv"

	"gitea.mynodes.xyz/ilker/llmgw/internal/openai"
)

// anthropicStream is one streamed answer's translation. Content blocks
// open and close as the chat stream moves from text to a tool call and
// from one tool call to the next.
type anthropicStream struct {
	a       *Anthropic
	started bool // message_start is out
	ended   bool // message_stop or an error is out
	block   int  // the open block's index; -1 when none is open
	next    int  // the index the next block takes
	inText  bool // the open block is text
	inThink bool // the open block is thinking: the model's reasoning
	tool    int  // the chat index of the tool call the open block is
	finish  string
	stop    json.RawMessage
	usage   *openai.Usage
	buf     []byte // the event being built; reused
	deltas  openai.DeltaReader
}

var (
	kindMessageStart = []byte("message_start")
	kindPing         = []byte("ping")
	kindBlockStart   = []byte("content_block_start")
	kindBlockDelta   = []byte("content_block_delta")
	kindBlockStop    = []byte("content_block_stop")
	kindMessageDelta = []byte("message_delta")
	kindMessageStop  = []byte("message_stop")
	kindError        = []byte("error")
)

func (s *anthropicStream) Event(data []byte, emit openai.Emit) error {
	if s.ended {
		return nil
	}
	if string(data) == string(openai.Done) {
		return s.end(emit)
	}
	// The common event, one token of text, is written without decoding.
	if text, ok := s.deltas.Text(data); ok && !s.a.decodeAll {
		if err := s.start(emit); err != nil {
			return err
		}
		if len(text) == 2 { // ""
			return nil
		}
		if err := s.openText(emit); err != nil {
			return err
		}
		s.buf = append(s.buf[:0], `{"type":"content_block_delta","index":`...)
		s.buf = strconv.AppendInt(s.buf, int64(s.block), 10)
		s.buf = append(s.buf, `,"delta":{"type":"text_delta","text":`...)
		s.buf = append(s.buf, text...)
		s.buf = append(s.buf, "}}"...)
		return emit(kindBlockDelta, s.buf)
	}
	var c chatChunk
	if json.Unmarshal(data, &c) != nil || c.Choices == nil && c.Usage == nil {
		// Not a chunk, such as an upstream's error event: nothing the
		// client can be told, and the relay ends a failed stream with Fail.
		return nil
	}
	if err := s.start(emit); err != nil {
		return err
	}
	if c.Usage != nil {
		s.usage = c.Usage
	}
	for _, ch := range c.Choices {
		if r := reasoning(ch.Delta.ReasoningContent, ch.Delta.Reasoning); r != "" && !s.a.HideThinking {
			if err := s.openThinking(emit); err != nil {
				return err
			}
			if err := emit(kindBlockDelta, mustJSON(map[string]any{"type": "content_block_delta", "index": s.block,
				"delta": map[string]string{"type": "thinking_delta", "thinking": r}})); err != nil {
				return err
			}
		}
		for _, b := range ch.Delta.ThinkingBlocks {
			if err := s.thinkingBlock(b, emit); err != nil {
				return err
			}
		}
		if ch.Delta.Content != nil && *ch.Delta.Content != "" {
			if err := s.openText(emit); err != nil {
				return err
			}
			if err := emit(kindBlockDelta, mustJSON(map[string]any{"type": "content_block_delta", "index": s.block,
				"delta": map[string]string{"type": "text_delta", "text": *ch.Delta.Content}})); err != nil {
				return err
			}
		}
		for _, tc := range ch.Delta.ToolCalls {
			if err := s.toolDelta(tc, emit); err != nil {
				return err
			}
		}
		if ch.FinishReason != nil && *ch.FinishReason != "" {
			s.finish, s.stop = *ch.FinishReason, ch.StopReason
		}
		break // a translated request asks for one choice
	}
	return nil
}

func (s *anthropicStream) start(emit openai.Emit) error {
	if s.started {
		return nil
	}
	s.started = true
	msg := AnthropicAnswer{ID: s.a.ID, Type: "message", Role: "assistant", Model: s.a.Model, Content: []AnthropicBlock{}}
	if err := emit(kindMessageStart, mustJSON(map[string]any{"type": "message_start", "message": msg})); err != nil {
		return err
	}
	return emit(kindPing, []byte(`{"type":"ping"}`))
}

func (s *anthropicStream) openText(emit openai.Emit) error {
	if s.block >= 0 && s.inText {
		return nil
	}
	if err := s.closeBlock(emit); err != nil {
		return err
	}
	s.block, s.inText, s.inThink = s.next, true, false
	s.next++
	s.buf = append(s.buf[:0], `{"type":"content_block_start","index":`...)
	s.buf = strconv.AppendInt(s.buf, int64(s.block), 10)
	s.buf = append(s.buf, `,"content_block":{"type":"text","text":""}}`...)
	return emit(kindBlockStart, s.buf)
}

// openThinking opens a thinking block for the model's reasoning, unless
// one is open.
func (s *anthropicStream) openThinking(emit openai.Emit) error {
	if s.block >= 0 && s.inThink {
		return nil
	}
	if err := s.closeBlock(emit); err != nil {
		return err
	}
	s.block, s.inText, s.inThink = s.next, false, true
	s.next++
	return emit(kindBlockStart, mustJSON(map[string]any{"type": "content_block_start", "index": s.block,
		"content_block": map[string]string{"type": "thinking", "thinking": "", "signature": ""}}))
}

// thinkingBlock writes the end of an anthropic pool's thinking block or a
// redacted one: a thinking block's signature goes into the open thinking
// block (opened, empty, when its reasoning was not shown), which it
// closes; a redacted_thinking block is sent whole.
func (s *anthropicStream) thinkingBlock(b AnthropicBlock, emit openai.Emit) error {
	switch b.Type {
	case "thinking":
		if err := s.openThinking(emit); err != nil {
			return err
		}
		if b.Signature != nil && *b.Signature != "" {
			if err := emit(kindBlockDelta, mustJSON(map[string]any{"type": "content_block_delta", "index": s.block,
				"delta": map[string]string{"type": "signature_delta", "signature": *b.Signature}})); err != nil {
				return err
			}
		}
		return s.closeBlock(emit)
	case "redacted_thinking":
		if err := s.closeBlock(emit); err != nil {
			return err
		}
		s.block, s.inText, s.inThink = s.next, false, false
		s.next++
		if err := emit(kindBlockStart, mustJSON(map[string]any{"type": "content_block_start", "index": s.block,
			"content_block": map[string]string{"type": "redacted_thinking", "data": b.Data}})); err != nil {
			return err
		}
		return s.closeBlock(emit)
	}
	return nil
}

// toolDelta writes a piece of a tool call: a new call (one with an id or
// another index) opens a tool_use block, its arguments follow as
// input_json_delta.
func (s *anthropicStream) toolDelta(tc ChatToolCall, emit openai.Emit) error {
	index := 0
	if tc.Index != nil {
		index = *tc.Index
	}
	if s.block < 0 || s.inText || s.inThink || index != s.tool || tc.ID != "" && tc.Function.Name != "" {
		if err := s.closeBlock(emit); err != nil {
			return err
		}
		s.block, s.inText, s.inThink, s.tool = s.next, false, false, index
		s.next++
		start := map[string]any{"type": "content_block_start", "index": s.block,
			"content_block": map[string]any{"type": "tool_use", "id": tc.ID, "name": tc.Function.Name, "input": map[string]any{}}}
		if err := emit(kindBlockStart, mustJSON(start)); err != nil {
			return err
		}
	}
	if tc.Function.Arguments == "" {
		return nil
	}
	return emit(kindBlockDelta, mustJSON(map[string]any{"type": "content_block_delta", "index": s.block,
		"delta": map[string]string{"type": "input_json_delta", "partial_json": tc.Function.Arguments}}))
}

func (s *anthropicStream) closeBlock(emit openai.Emit) error {
	if s.block < 0 {
		return nil
	}
	s.buf = append(s.buf[:0], `{"type":"content_block_stop","index":`...)
	s.buf = strconv.AppendInt(s.buf, int64(s.block), 10)
	s.buf = append(s.buf, '}')
	s.block = -1
	return emit(kindBlockStop, s.buf)
}

// end closes a whole answer: the open block, the stop reason and usage,
// message_stop.
func (s *anthropicStream) end(emit openai.Emit) error {
	if err := s.start(emit); err != nil {
		return err
	}
	if err := s.closeBlock(emit); err != nil {
		return err
	}
	s.ended = true
	reason, seq := s.a.stopReason(s.finish, s.stop)
	u := anthropicUsage(s.usage)
	delta := map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": reason, "stop_sequence": seq},
		"usage": map[string]int64{"input_tokens": u.InputTokens, "output_tokens": u.OutputTokens, "cache_read_input_tokens": u.CacheReadInputTokens}}
	if err := emit(kindMessageDelta, mustJSON(delta)); err != nil {
		return err
	}
	return emit(kindMessageStop, []byte(`{"type":"message_stop"}`))
}

// Fail ends a broken stream with an error event, and no message_stop.
func (s *anthropicStream) Fail(e *openai.Error, emit openai.Emit) {
	if s.ended {
		return
	}
	s.ended = true
	emit(kindError, AnthropicErrorBody(e))
}
