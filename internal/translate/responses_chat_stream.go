package translate

// A streamed chat completions answer as the Responses API streams one:
// response.created, then each output item (reasoning, the message, each
// tool call) opened, its deltas, its done events, and response.completed
// with all of them, each event numbered. The event names and shapes are
// openai-go's (responses.ResponseStreamEventUnion).

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"strings"

	"gitea.mynodes.xyz/ilker/llmgw/internal/openai"
)

// itemKind is the kind of a stream's open output item.
type itemKind uint8

const (
	itemMessage itemKind = iota
	itemReasoning
	itemCall
)

// responsesStream is one streamed answer's translation: each output item
// is opened, filled and closed in turn, and the response completed with
// all of them.
type responsesStream struct {
	r         *Responses
	summarize bool  // the request asks for the model's reasoning
	seq       int64 // the next event's sequence_number
	started   bool
	ended     bool
	items     []json.RawMessage // the closed output items
	open      int               // the open item's output_index; -1 when none
	kind      itemKind          // the open item's
	tool      int               // the chat index of the open call
	id        string
	text      []byte // the open message's or reasoning's text, JSON-escaped, no quotes
	call      ChatToolCall
	ref       toolRef         // the client's tool the open call is of
	args      strings.Builder // the open call's arguments so far
	finish    string
	usage     *openai.Usage
	buf       []byte
	deltas    openai.DeltaReader
}

var kindTextDelta = []byte("response.output_text.delta")

// emitJSON writes one event: its type, its sequence number and v's
// fields, v being a map.
func (s *responsesStream) emitJSON(emit openai.Emit, kind string, v map[string]any) error {
	v["type"] = kind
	v["sequence_number"] = s.seq
	s.seq++
	return emit([]byte(kind), mustJSON(v))
}

func (s *responsesStream) Event(data []byte, emit openai.Emit) error {
	if s.ended {
		return nil
	}
	if string(data) == string(openai.Done) {
		return s.end(emit)
	}
	if text, ok := s.deltas.Text(data); ok && !s.r.decodeAll {
		if err := s.start(emit); err != nil {
			return err
		}
		if len(text) == 2 {
			return nil
		}
		return s.textDelta(text, emit)
	}
	var c chatChunk
	if json.Unmarshal(data, &c) != nil || c.Choices == nil && c.Usage == nil {
		return nil // not a chunk: see anthropicStream.Event
	}
	if err := s.start(emit); err != nil {
		return err
	}
	if c.Usage != nil {
		s.usage = c.Usage
	}
	for _, ch := range c.Choices {
		if rc := ch.Delta.ReasoningContent; rc != nil && *rc != "" && s.summarize {
			if err := s.reasoningDelta(jsonString(*rc), emit); err != nil {
				return err
			}
		}
		if ch.Delta.Content != nil && *ch.Delta.Content != "" {
			if err := s.textDelta(jsonString(*ch.Delta.Content), emit); err != nil {
				return err
			}
		}
		for _, tc := range ch.Delta.ToolCalls {
			if err := s.toolDelta(tc, emit); err != nil {
				return err
			}
		}
		if ch.FinishReason != nil && *ch.FinishReason != "" {
			s.finish = *ch.FinishReason
		}
		break
	}
	return nil
}

func (s *responsesStream) start(emit openai.Emit) error {
	if s.started {
		return nil
	}
	s.started = true
	resp := mustJSON(s.r.object("in_progress", nil, nil))
	if err := s.emitResponseJSON(emit, "response.created", resp); err != nil {
		return err
	}
	return s.emitResponseJSON(emit, "response.in_progress", resp)
}

// textDelta writes a piece of text, the raw JSON string text, opening a
// message item first if none is open.
func (s *responsesStream) textDelta(text []byte, emit openai.Emit) error {
	if s.open < 0 || s.kind != itemMessage {
		if err := s.closeItem(emit); err != nil {
			return err
		}
		s.open, s.kind, s.id, s.text = len(s.items), itemMessage, s.r.itemID("msg", len(s.items)), s.text[:0]
		b := s.head("response.output_item.added", s.open)
		b = append(append(b, `,"item":{"type":"message","id":"`...), s.id...)
		b = append(b, `","status":"in_progress","role":"assistant","content":[]}}`...)
		if err := emit([]byte("response.output_item.added"), b); err != nil {
			return err
		}
		b = s.head("response.content_part.added", s.open)
		b = append(append(b, `,"item_id":"`...), s.id...)
		b = append(b, `","content_index":0,"part":{"type":"output_text","text":"","annotations":[],"logprobs":[]}}`...)
		s.buf = b
		if err := emit([]byte("response.content_part.added"), b); err != nil {
			return err
		}
	}
	s.text = append(s.text, text[1:len(text)-1]...)
	b := append(s.buf[:0], `{"type":"response.output_text.delta","sequence_number":`...)
	b = strconv.AppendInt(b, s.seq, 10)
	b = append(b, `,"item_id":"`...)
	b = append(b, s.id...) // ids are made of [A-Za-z0-9_-]
	b = append(b, `","output_index":`...)
	b = strconv.AppendInt(b, int64(s.open), 10)
	b = append(b, `,"content_index":0,"delta":`...)
	b = append(b, text...)
	b = append(b, `,"logprobs":[]}`...)
	s.buf = b
	s.seq++
	return emit(kindTextDelta, b)
}

// reasoningDelta writes a piece of the model's reasoning, the raw JSON
// string text, as its summary's text, opening a reasoning item first if
// none is open.
func (s *responsesStream) reasoningDelta(text []byte, emit openai.Emit) error {
	if s.open < 0 || s.kind != itemReasoning {
		if err := s.closeItem(emit); err != nil {
			return err
		}
		s.open, s.kind, s.id, s.text = len(s.items), itemReasoning, s.r.itemID("rs", len(s.items)), s.text[:0]
		b := s.head("response.output_item.added", s.open)
		b = append(append(b, `,"item":{"type":"reasoning","id":"`...), s.id...)
		b = append(b, `","summary":[]}}`...)
		if err := emit([]byte("response.output_item.added"), b); err != nil {
			return err
		}
		b = s.head("response.reasoning_summary_part.added", s.open)
		b = append(append(b, `,"item_id":"`...), s.id...)
		b = append(b, `","summary_index":0,"part":{"type":"summary_text","text":""}}`...)
		s.buf = b
		if err := emit([]byte("response.reasoning_summary_part.added"), b); err != nil {
			return err
		}
	}
	s.text = append(s.text, text[1:len(text)-1]...)
	b := s.head("response.reasoning_summary_text.delta", s.open)
	b = append(append(b, `,"item_id":"`...), s.id...)
	b = append(b, `","summary_index":0,"delta":`...)
	b = append(append(b, text...), '}')
	s.buf = b
	return emit([]byte("response.reasoning_summary_text.delta"), b)
}

// toolDelta writes a piece of a tool call, opening a function_call or
// custom_tool_call item for a new call. A custom tool's input is the
// call's arguments decoded, and so is written whole once the call ends.
func (s *responsesStream) toolDelta(tc ChatToolCall, emit openai.Emit) error {
	index := 0
	if tc.Index != nil {
		index = *tc.Index
	}
	if s.open < 0 || s.kind != itemCall || index != s.tool || tc.ID != "" && tc.Function.Name != "" {
		if err := s.closeItem(emit); err != nil {
			return err
		}
		s.open, s.kind, s.tool, s.call = len(s.items), itemCall, index, tc
		s.ref = s.r.names().ref(tc.Function.Name)
		s.args.Reset()
		item := s.r.callItem(tc, s.open, "in_progress")
		switch it := item.(type) {
		case functionItem:
			it.Arguments, s.id = "", it.ID
			item = it
		case customItem:
			it.Input, s.id = "", it.ID
			item = it
		}
		if err := s.emitJSON(emit, "response.output_item.added", map[string]any{"output_index": s.open, "item": item}); err != nil {
			return err
		}
	}
	if tc.Function.Arguments == "" {
		return nil
	}
	s.args.WriteString(tc.Function.Arguments)
	if s.ref.custom {
		return nil
	}
	return s.emitJSON(emit, "response.function_call_arguments.delta", map[string]any{"output_index": s.open, "item_id": s.id,
		"delta": tc.Function.Arguments})
}

// closeItem ends the open item, if any, with its done events. A message's
// and a reasoning's events are written by hand around their text, which
// the stream holds already escaped: encoding/json would scan the whole
// text again for each.
func (s *responsesStream) closeItem(emit openai.Emit) error {
	if s.open < 0 {
		return nil
	}
	open := s.open
	s.open = -1
	switch s.kind {
	case itemCall:
		return s.closeCall(open, emit)
	case itemReasoning:
		return s.closeReasoning(open, emit)
	}
	head := func(kind string) []byte { return s.head(kind, open) }
	part := func(b []byte) []byte {
		b = append(b, `{"type":"output_text","text":"`...)
		b = append(b, s.text...)
		return append(b, `","annotations":[],"logprobs":[]}`...)
	}
	b := head("response.output_text.done")
	b = append(append(append(b, `,"item_id":"`...), s.id...), `","content_index":0,"text":"`...)
	b = append(append(b, s.text...), `","logprobs":[]}`...)
	if err := emit([]byte("response.output_text.done"), b); err != nil {
		return err
	}
	b = head("response.content_part.done")
	b = append(append(append(b, `,"item_id":"`...), s.id...), `","content_index":0,"part":`...)
	b = append(part(b), '}')
	if err := emit([]byte("response.content_part.done"), b); err != nil {
		return err
	}
	item := append(append([]byte(`{"type":"message","id":"`), s.id...), `","status":"completed","role":"assistant","content":[`...)
	item = append(part(item), "]}"...)
	s.items = append(s.items, item)
	b = head("response.output_item.done")
	b = append(append(append(b, `,"item":`...), item...), '}')
	s.buf = b
	return emit([]byte("response.output_item.done"), b)
}

// closeReasoning ends the reasoning item at output index open: its
// summary's text and part done, then the item.
func (s *responsesStream) closeReasoning(open int, emit openai.Emit) error {
	part := func(b []byte) []byte {
		b = append(b, `{"type":"summary_text","text":"`...)
		b = append(b, s.text...)
		return append(b, `"}`...)
	}
	b := s.head("response.reasoning_summary_text.done", open)
	b = append(append(append(b, `,"item_id":"`...), s.id...), `","summary_index":0,"text":"`...)
	b = append(append(b, s.text...), `"}`...)
	if err := emit([]byte("response.reasoning_summary_text.done"), b); err != nil {
		return err
	}
	b = s.head("response.reasoning_summary_part.done", open)
	b = append(append(append(b, `,"item_id":"`...), s.id...), `","summary_index":0,"part":`...)
	b = append(part(b), '}')
	if err := emit([]byte("response.reasoning_summary_part.done"), b); err != nil {
		return err
	}
	item := append(append([]byte(`{"type":"reasoning","id":"`), s.id...), `","summary":[`...)
	item = append(part(item), "]}"...)
	s.items = append(s.items, item)
	b = s.head("response.output_item.done", open)
	b = append(append(append(b, `,"item":`...), item...), '}')
	s.buf = b
	return emit([]byte("response.output_item.done"), b)
}

// closeCall ends the tool call at output index open: its arguments done,
// or a custom tool's input written and done, then the item.
func (s *responsesStream) closeCall(open int, emit openai.Emit) error {
	s.call.Function.Arguments = s.args.String()
	item := s.r.callItem(s.call, open, "completed")
	if s.ref.custom {
		input := item.(customItem).Input
		if input != "" {
			if err := s.emitJSON(emit, "response.custom_tool_call_input.delta", map[string]any{"output_index": open, "item_id": s.id,
				"delta": input}); err != nil {
				return err
			}
		}
		if err := s.emitJSON(emit, "response.custom_tool_call_input.done", map[string]any{"output_index": open, "item_id": s.id,
			"input": input}); err != nil {
			return err
		}
	} else if err := s.emitJSON(emit, "response.function_call_arguments.done", map[string]any{"output_index": open, "item_id": s.id,
		"name": s.ref.name, "arguments": s.call.Function.Arguments}); err != nil {
		return err
	}
	raw := mustJSON(item)
	s.items = append(s.items, raw)
	return s.emitJSON(emit, "response.output_item.done", map[string]any{"output_index": open, "item": json.RawMessage(raw)})
}

// head begins an event of kind about output item index, in s.buf: its
// type, sequence number and output index.
func (s *responsesStream) head(kind string, index int) []byte {
	b := append(s.buf[:0], `{"type":"`...)
	b = append(b, kind...)
	b = append(b, `","sequence_number":`...)
	b = strconv.AppendInt(b, s.seq, 10)
	s.seq++
	b = append(b, `,"output_index":`...)
	return strconv.AppendInt(b, int64(index), 10)
}

// end completes a whole answer.
func (s *responsesStream) end(emit openai.Emit) error {
	if err := s.start(emit); err != nil {
		return err
	}
	if err := s.closeItem(emit); err != nil {
		return err
	}
	s.ended = true
	o := s.r.object("completed", nil, s.usage)
	o.finished(s.finish)
	kind := "response.completed"
	if o.Status == "incomplete" {
		kind = "response.incomplete"
	}
	return s.emitResponse(emit, kind, o)
}

// emitResponse writes an event carrying the response o with the stream's
// items as its output, spliced in rather than marshalled again.
func (s *responsesStream) emitResponse(emit openai.Emit, kind string, o *responseObject) error {
	return s.emitResponseJSON(emit, kind, mustJSON(o))
}

// emitResponseJSON is emitResponse for the response marshalled, resp.
func (s *responsesStream) emitResponseJSON(emit openai.Emit, kind string, resp []byte) error {
	// The first "output":[] is the output's: no field before it holds raw
	// JSON, and in a JSON string a quote is escaped.
	at := bytes.Index(resp, []byte(`"output":[]`)) + len(`"output":[`)
	size := len(resp) + len(kind) + 64
	for _, it := range s.items {
		size += len(it) + 1
	}
	b := slices.Grow(s.buf[:0], size)
	b = append(b, `{"type":"`...)
	b = append(b, kind...)
	b = append(b, `","sequence_number":`...)
	b = strconv.AppendInt(b, s.seq, 10)
	s.seq++
	b = append(b, `,"response":`...)
	b = append(b, resp[:at]...)
	for i, it := range s.items {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, it...)
	}
	b = append(b, resp[at:]...)
	b = append(b, '}')
	s.buf = b
	return emit([]byte(kind), b)
}

// Fail ends a broken stream with an error event and response.failed.
func (s *responsesStream) Fail(e *openai.Error, emit openai.Emit) {
	if s.ended {
		return
	}
	s.ended = true
	code := e.Code
	if code == "" {
		code = e.Type
	}
	if s.emitJSON(emit, "error", map[string]any{"code": code, "message": e.Message, "param": nil}) != nil {
		return
	}
	o := s.r.object("failed", nil, s.usage)
	o.Error = &responseError{Code: "server_error", Message: e.Message}
	s.emitResponse(emit, "response.failed", o)
}
