// Package translate maps the APIs llmgw's clients speak onto the one its
// pools speak, OpenAI's chat completions, and back: Anthropic's Messages
// API and OpenAI's Responses API in, their answers and streamed events
// out. A request is translated once, on arrival; an answer event by event
// as the relay writes it (see openai.Translator), so the upstream's own
// chat stream is what is timed and counted.
//
// One package maps both ways, a file to each direction of a pair of APIs,
// named client_pool: anthropic_chat.go makes a Messages request the chat
// request a pool is sent, and anthropic_chat_answer.go and
// anthropic_chat_stream.go make the chat answer the Messages one;
// chat_anthropic.go makes a chat request a Messages one for a pool that
// speaks that API (ChatToAnthropic), and chat_anthropic_answer.go and
// chat_anthropic_stream.go read its answer back as chat;
// responses_chat*.go do for the Responses API what anthropic_chat*.go do
// for Messages. The wire schemas are apart, one file to an API:
// anthropic_schema.go, chat_schema.go, responses_schema.go.
//
// A request's translation, and its count of tokens, is linear in its body
// and runs under the request's context: it stops with the context's
// error once the client has gone or the request's time is up.
package translate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"gitea.mynodes.xyz/ilker/llmgw/internal/openai"
)

// decode unmarshals the valid JSON raw into v. A value of the wrong type
// is a 400 naming the field, under path, and the JSON type it must be.
func decode(raw []byte, v any, path string) error {
	err := json.Unmarshal(raw, v)
	if err == nil {
		return nil
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return typeError(joinPath(path, jsonField(te.Field)), kindOfType(te.Type), kindOfValue(te.Value))
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return openai.BadRequest("", "The request body is not valid JSON.")
	}
	return openai.BadRequest(path, "%s: %v", path, err)
}

// decodeObject decodes a request body, which must be a JSON object.
func decodeObject(body []byte, v any) error {
	if b := bytes.TrimLeft(body, " \t\r\n"); len(b) == 0 || b[0] != '{' {
		return openai.BadRequest("", "The request body must be a JSON object.")
	}
	return decode(body, v, "")
}

// jsonField is an UnmarshalTypeError's field path without the Go names
// of embedded structs, which encoding/json puts in it; every JSON name
// this package reads is lower case.
func jsonField(f string) string {
	for f != "" && f[0] >= 'A' && f[0] <= 'Z' {
		_, rest, ok := strings.Cut(f, ".")
		if !ok {
			return ""
		}
		f = rest
	}
	return f
}

func joinPath(path, field string) string {
	switch {
	case path == "":
		return field
	case field == "":
		return path
	}
	return path + "." + field
}

// typeError is the 400 for a field holding the wrong JSON type, worded
// without Go's type names: "max_tokens: must be an integer, got a string".
func typeError(field, want, got string) *openai.Error {
	if field == "" {
		return openai.BadRequest("", "The request body must be a JSON object.")
	}
	e := openai.BadRequest(field, "%s: must be %s, got %s", field, want, got)
	e.Code = "invalid_type"
	return e
}

// kindOfType names the JSON kind a Go type decodes from, with its article.
func kindOfType(t reflect.Type) string {
	if t == nil {
		return "a value"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	case reflect.Pointer:
		return kindOfType(t.Elem())
	}
	return "a value"
}

// kindOfValue names the JSON value encoding/json describes in an
// UnmarshalTypeError's Value ("string", "number 1.5", "array", ...).
func kindOfValue(v string) string {
	switch {
	case v == "string":
		return "a string"
	case v == "bool":
		return "a boolean"
	case v == "array":
		return "an array"
	case v == "object":
		return "an object"
	case v == "number":
		return "a number"
	case len(v) > 7 && v[:7] == "number ":
		if bytes.ContainsAny([]byte(v[7:]), ".eE") {
			return "a decimal number"
		}
		if v[7] == '-' {
			return "a negative integer"
		}
		return "an integer out of range"
	}
	return v
}

// jsonKind names the kind of the valid JSON value raw, with its article.
func jsonKind(raw json.RawMessage) string {
	raw = bytes.TrimLeft(raw, " \t\r\n")
	if len(raw) == 0 {
		return "nothing"
	}
	return openai.JSONKind(raw)
}

// isNull reports whether raw is absent or JSON null.
func isNull(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || string(raw) == "null"
}

// isString reports whether raw is a JSON string.
func isString(raw json.RawMessage) bool {
	raw = bytes.TrimLeft(raw, " \t\r\n")
	return len(raw) > 0 && raw[0] == '"'
}

// at is path's element i, as error messages name it: messages[2].
func at(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }

// unsupported is the 400 for a value the gateway cannot translate.
func unsupported(field, format string, args ...any) *openai.Error {
	return openai.BadRequest(field, "%s: %s", field, fmt.Sprintf(format, args...))
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// checkEvery is how many items (messages, blocks, input items, tools) a
// translation handles between looks at its context. A look takes a lock
// and an item a decode of its own, so looking every 64th costs little,
// while a translation whose request has ended stops within microseconds.
const checkEvery = 64

// progress counts the items of one translation, nested ones included,
// and looks at its context every checkEvery of them: a translation's
// work stops when its request ends (the client gone, or past its time).
type progress struct {
	ctx context.Context
	n   int
}

// begin starts counting a translation under ctx; ctx's error when it has
// ended already.
func begin(ctx context.Context) (*progress, error) {
	return &progress{ctx: ctx}, ctx.Err()
}

// step counts one item, and is the context's error when it is time to
// look and the context has ended.
func (p *progress) step() error {
	p.n++
	if p.n%checkEvery != 0 {
		return nil
	}
	return p.ctx.Err()
}

// decodeArray decodes the JSON array raw element by element, so that a
// wrong type names its element: messages[0].content[2].text. Each element
// is a step of p.
func decodeArray[T any](p *progress, raw []byte, path string) ([]T, error) {
	var elems []json.RawMessage
	if err := decode(raw, &elems, path); err != nil {
		return nil, err
	}
	out := make([]T, len(elems))
	for i, e := range elems {
		if err := p.step(); err != nil {
			return nil, err
		}
		if err := decode(e, &out[i], at(path, i)); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// compact is the JSON raw without insignificant space; raw itself when it
// is not valid JSON.
func compact(raw []byte) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return b.String()
}
