package translate

// A translated request's body, written within a limit. A translation's
// body is at most a few times the size of the body it came from, but it
// may still pass the largest body the gateway takes; it is then refused
// with a 413 as soon as the part written passes that limit, its messages
// and tools written one at a time, so that no body past the limit is ever
// held whole. JSON is written as encoding/json writes it, but with <, >
// and & as they are: six bytes for one would make text of HTML or code
// six times its size, and a backend decodes both the same.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"

	"gitea.mynodes.xyz/ilker/llmgw/internal/openai"
)

// tooLarge is the 413 for a translated body past limit bytes.
func tooLarge(limit int64) *openai.Error {
	e := openai.TooLarge(limit)
	e.Message = fmt.Sprintf("The request, translated for the model's API, is larger than the limit of %d bytes.", limit)
	return e
}

// mustJSON marshals v, which holds only types that always marshal, with
// <, > and & as they are. Most JSON holds none of them, nor any other
// \u00 escape, and is marshalled once.
func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err == nil && !bytes.Contains(b, []byte(`\u00`)) {
		return b
	}
	var buf bytes.Buffer
	if err := newEncoder(&buf).Encode(v); err != nil {
		panic(fmt.Sprintf("translate: marshalling %T: %v", v, err))
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// newEncoder is an encoder to w that leaves <, > and & as they are.
func newEncoder(w io.Writer) *json.Encoder {
	e := json.NewEncoder(w)
	e.SetEscapeHTML(false)
	return e
}

// MarshalChat is the chat completions body of c, refused with a 413 once
// it passes limit bytes.
func MarshalChat(c *ChatRequest, limit int64) ([]byte, error) {
	head := *c
	head.Messages, head.Tools = placeholder(c.Messages), placeholder(c.Tools)
	return writeBody(&head, limit,
		hole[ChatMessage]{key: `"messages":[`, elems: c.Messages},
		hole[ChatTool]{key: `"tools":[`, elems: c.Tools})
}

// marshalAnthropic is the Messages API body of r, refused with a 413
// once it passes limit bytes.
func marshalAnthropic(r *AnthropicRequest, limit int64) ([]byte, error) {
	head := *r
	head.Messages, head.Tools = placeholder(r.Messages), placeholder(r.Tools)
	return writeBody(&head, limit,
		hole[AnthropicMessage]{key: `"messages":[`, elems: r.Messages},
		hole[AnthropicTool]{key: `"tools":[`, elems: r.Tools})
}

// placeholder is what a body's head holds in the place of elems: one
// zero element, or elems itself when there are none.
func placeholder[T any](elems []T) []T {
	if len(elems) == 0 {
		return elems
	}
	return make([]T, 1)
}

// filler is a hole of a body's head.
type filler interface {
	// at is where the hole is in head, from from on: the end of its key
	// and of its placeholder; false when the hole is empty, and so holds
	// no placeholder.
	at(head []byte, from int) (key, end int, ok bool)
	// fill writes the hole's elements to w.
	fill(w *bodyWriter) error
}

// hole is a top-level array of a body written element by element: its
// head holds one zero element in its place, which elems are written over.
type hole[T any] struct {
	key   string // the array's key and opening bracket
	elems []T
}

func (h hole[T]) at(head []byte, from int) (key, end int, ok bool) {
	if len(h.elems) == 0 {
		return 0, 0, false
	}
	var zero T
	placeholder := append(append([]byte(h.key), mustJSON(zero)...), ']')
	i := topLevel(head, placeholder)
	if i < from {
		panic("translate: a body's head holds no placeholder at " + h.key)
	}
	return i + len(h.key), i + len(placeholder) - 1, true
}

// topLevel is the index in head, a JSON object, of text beginning a
// member of the object itself, not of a value nested in it nor inside a
// string; -1 for none. A client's own JSON, which a head may carry (a raw
// system prompt, a response format), may hold any text, but only nested
// in the object. Each member's key is the object's only one.
func topLevel(head []byte, text []byte) int {
	depth, inString, escaped := 0, false, false
	for i, c := range head {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			if depth == 1 && bytes.HasPrefix(head[i:], text) {
				return i
			}
			inString = true
		case c == '{' || c == '[':
			depth++
		case c == '}' || c == ']':
			depth--
		}
	}
	return -1
}

func (h hole[T]) fill(w *bodyWriter) error {
	for i := range h.elems {
		if i > 0 {
			w.out = append(w.out, ',')
		}
		if err := w.value(&h.elems[i]); err != nil {
			return err
		}
	}
	return nil
}

// writeBody writes head, which holds a placeholder for each of holes in
// their order, with each placeholder's place filled by its hole's
// elements: a 413 once the body would pass limit bytes. A placeholder is
// found as its key and zero element among the members of head itself,
// never in a value nested in it, which may be the client's own JSON.
func writeBody(head any, limit int64, holes ...filler) ([]byte, error) {
	w := &bodyWriter{limit: limit}
	w.enc = newEncoder(w)
	if err := w.value(head); err != nil {
		return nil, err
	}
	h := w.out
	w.out = make([]byte, 0, len(h))
	from := 0
	for _, hl := range holes {
		key, end, ok := hl.at(h, from)
		if !ok {
			continue
		}
		w.out = append(w.out, h[from:key]...)
		if err := hl.fill(w); err != nil {
			return nil, err
		}
		from = end
	}
	w.out = append(w.out, h[from:]...)
	if int64(len(w.out)) > limit {
		return nil, tooLarge(limit)
	}
	return w.out, nil
}

// bodyWriter is a body being written, within its limit. It is the
// writer of its encoder, which writes each value whole, then a newline.
type bodyWriter struct {
	out   []byte
	limit int64
	enc   *json.Encoder
}

// Write appends a value the encoder wrote, and its newline, to the body:
// a 413 when the value would take the body past its limit.
func (w *bodyWriter) Write(p []byte) (int, error) {
	if int64(len(w.out)+len(p)-1) > w.limit {
		return 0, tooLarge(w.limit)
	}
	w.out = append(w.out, p...)
	return len(p), nil
}

// value appends v's JSON to the body: a 413 when it would take the body
// past its limit, and a 400 when v does not marshal.
func (w *bodyWriter) value(v any) error {
	if err := w.enc.Encode(v); err != nil {
		if e, ok := err.(*openai.Error); ok {
			return e
		}
		return openai.BadRequest("", "The request could not be translated: %v", err)
	}
	w.out = w.out[:len(w.out)-1] // the encoder's newline
	return nil
}
