package openai

// The few request fields routing reads, found without decoding the whole
// body: a scan over the top-level object notes where each wanted value
// lies, decodes only those, and lets a rewrite splice new values in place,
// so a body that needs no change reaches the backend byte for byte.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// Request is what routing needs from a completion, chat or embeddings body.
type Request struct {
	Model string
	// Stream reports whether the client asked for server-sent events.
	Stream bool
	// IncludeUsage reports whether the client asked for the usage chunk
	// (stream_options.include_usage).
	IncludeUsage bool
	// MaxTokens is max_completion_tokens or else max_tokens; zero when
	// neither is given.
	MaxTokens int64
	// User is the client's end-user id, if it sent one.
	User string

	model         span // the model value, quotes included
	streamOptions span // the stream_options value; zero when absent
	end           int  // offset of the object's closing brace
}

// span is a half-open byte range [start, end) of a body; zero means absent.
type span struct{ start, end int }

func (s span) ok() bool { return s.end > 0 }

// ParseRequest reads routing's fields from a JSON body. It fails with a 400
// *Error on malformed JSON, a body that is not an object, or a missing or
// ill-typed model.
func ParseRequest(body []byte) (*Request, error) {
	r := new(Request)
	if err := r.Parse(body); err != nil {
		return nil, err
	}
	return r, nil
}

// Parse reads routing's fields from body into r; see ParseRequest. It
// checks the whole body is valid JSON in the same pass.
func (r *Request) Parse(body []byte) error {
	i := skipSpace(body, 0)
	if i >= len(body) || body[i] != '{' {
		if valid(body) {
			return BadRequest("", "The request body must be a JSON object.")
		}
		return errNotJSON()
	}
	i = skipSpace(body, i+1)
	if i < len(body) && body[i] == '}' {
		r.end = i
	} else {
		for {
			kEnd, next, err := scanMember(body, i)
			if err != nil {
				return errNotJSON()
			}
			key := body[i+1 : kEnd-1] // raw, escapes left in: wanted keys have none
			i = skipSpace(body, next)
			vEnd, err := scanValue(body, i)
			if err != nil {
				return errNotJSON()
			}
			if err := r.field(key, body[i:vEnd], span{i, vEnd}); err != nil {
				return err
			}
			i = skipSpace(body, vEnd)
			if i < len(body) && body[i] == '}' {
				r.end = i
				break
			}
			if i >= len(body) || body[i] != ',' {
				return errNotJSON()
			}
			i = skipSpace(body, i+1)
		}
	}
	if skipSpace(body, r.end+1) != len(body) {
		return errNotJSON()
	}
	if r.Model == "" {
		return BadRequest("model", "You must provide a model parameter.")
	}
	return nil
}

func errNotJSON() error { return BadRequest("", "The request body is not valid JSON.") }

func (r *Request) field(key, v []byte, at span) error {
	var err error
	switch string(key) {
	case "model":
		if v[0] != '"' {
			return BadRequest("model", "model must be a string.")
		}
		r.Model, err = decodeString(v)
		r.model = at
	case "stream":
		r.Stream, err = decodeBool(v)
	case "stream_options":
		if string(v) != "null" {
			var o struct {
				IncludeUsage bool `json:"include_usage"`
			}
			err = json.Unmarshal(v, &o)
			r.IncludeUsage = o.IncludeUsage
			r.streamOptions = at
		}
	case "max_tokens", "max_completion_tokens":
		var n int64
		if string(v) != "null" {
			n, err = strconv.ParseInt(string(v), 10, 64)
		}
		if err != nil {
			return BadRequest(string(key), "%s must be an integer, got %.20s.", key, v)
		}
		if n < 0 {
			return BadRequest(string(key), "%s must be a non-negative integer.", key)
		}
		if key[4] == 'c' || r.MaxTokens == 0 { // max_completion_tokens wins
			r.MaxTokens = n
		}
	case "user":
		if string(v) != "null" {
			r.User, err = decodeString(v)
		}
	default:
		return nil
	}
	if err != nil {
		return BadRequest(string(key), "%s has the wrong type: %v", key, typeError(err))
	}
	return nil
}

// decodeString decodes a JSON string, without reflection when it holds no
// escapes, as model names never do.
func decodeString(v []byte) (string, error) {
	if len(v) >= 2 && v[0] == '"' && bytes.IndexByte(v[1:len(v)-1], '\\') < 0 {
		return string(v[1 : len(v)-1]), nil
	}
	var s string
	err := json.Unmarshal(v, &s)
	return s, err
}

// decodeBool decodes a JSON boolean or null (false).
func decodeBool(v []byte) (bool, error) {
	switch string(v) {
	case "true":
		return true, nil
	case "false", "null":
		return false, nil
	}
	var b bool
	return b, json.Unmarshal(v, &b)
}

func typeError(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return "got " + te.Value + ", want " + te.Type.String()
	}
	return err.Error()
}

// Rewrite returns body with the model renamed to model and, when
// includeUsage is set, stream_options.include_usage forced on. It returns
// body itself when nothing changes.
func (r *Request) Rewrite(body []byte, model string, includeUsage bool) []byte {
	renamed := model != r.Model
	usage := includeUsage && !r.IncludeUsage
	if !renamed && !usage {
		return body
	}
	out := make([]byte, 0, len(body)+len(model)+len(`,"stream_options":{"include_usage":true}`))
	type edit struct {
		at   span
		with []byte
	}
	var edits [2]edit
	n := 0
	if renamed {
		edits[n] = edit{r.model, strconv.AppendQuote(nil, model)}
		n++
	}
	if usage {
		if r.streamOptions.ok() {
			edits[n] = edit{r.streamOptions, withIncludeUsage(body[r.streamOptions.start:r.streamOptions.end])}
		} else {
			edits[n] = edit{span{r.end, r.end}, []byte(`,"stream_options":{"include_usage":true}`)}
		}
		n++
	}
	if n == 2 && edits[1].at.start < edits[0].at.start {
		edits[0], edits[1] = edits[1], edits[0]
	}
	last := 0
	for _, e := range edits[:n] {
		out = append(out, body[last:e.at.start]...)
		out = append(out, e.with...)
		last = e.at.end
	}
	return append(out, body[last:]...)
}

// withIncludeUsage is a stream_options object with include_usage set true
// and its other fields kept.
func withIncludeUsage(obj []byte) []byte {
	var m map[string]json.RawMessage
	if json.Unmarshal(obj, &m) != nil || m == nil {
		return []byte(`{"include_usage":true}`)
	}
	m["include_usage"] = json.RawMessage("true")
	b, _ := json.Marshal(m)
	return b
}

// Usage is the token accounting of an answer, as OpenAI reports it.
type Usage struct {
	PromptTokens        int64 `json:"prompt_tokens"`
	CompletionTokens    int64 `json:"completion_tokens"`
	TotalTokens         int64 `json:"total_tokens"`
	PromptTokensDetails *struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"prompt_tokens_details,omitempty"`
}

// CachedTokens is the prompt tokens served from the backend's prefix cache.
func (u *Usage) CachedTokens() int64 {
	if u == nil || u.PromptTokensDetails == nil {
		return 0
	}
	return u.PromptTokensDetails.CachedTokens
}

// UsageOf reads the usage object of a JSON response or stream chunk; nil
// when there is none. It reads that object alone, not the whole body, and
// its four counts without reflection; anything unusual in it goes to the
// JSON decoder.
func UsageOf(body []byte) (*Usage, error) {
	i := valueAt(body, `"usage"`)
	if i < 0 || body[i] != '{' {
		return nil, nil
	}
	end, err := scanValue(body, i)
	if err != nil {
		return nil, fmt.Errorf("reading usage: %w", err)
	}
	obj := body[i:end]
	u := new(Usage)
	if scanUsage(obj, u) {
		return u, nil
	}
	*u = Usage{}
	if err := json.Unmarshal(obj, u); err != nil {
		return nil, fmt.Errorf("reading usage: %w", err)
	}
	return u, nil
}

// endsNumber reports whether c may follow a number in JSON.
func endsNumber(c byte) bool {
	return c == ',' || c == '}' || c == ']' || c == ' ' || c == '\t' || c == '\r' || c == '\n'
}

// scanUsage reads usage's counts from obj, reporting false if a count is
// not a plain integer.
func scanUsage(obj []byte, u *Usage) bool {
	count := func(in []byte, key string) (int64, bool) {
		j := valueAt(in, key)
		if j < 0 {
			return 0, true
		}
		end := j
		for end < len(in) && in[end] >= '0' && in[end] <= '9' {
			end++
		}
		if end == len(in) || end == j || !endsNumber(in[end]) {
			return 0, false // not a plain integer: 1e3, 2.0, "5", null
		}
		n, err := strconv.ParseInt(string(in[j:end]), 10, 64)
		return n, err == nil
	}
	var ok [3]bool
	u.PromptTokens, ok[0] = count(obj, `"prompt_tokens"`)
	u.CompletionTokens, ok[1] = count(obj, `"completion_tokens"`)
	u.TotalTokens, ok[2] = count(obj, `"total_tokens"`)
	if !ok[0] || !ok[1] || !ok[2] {
		return false
	}
	if d := valueAt(obj, `"prompt_tokens_details"`); d >= 0 && obj[d] == '{' {
		end, err := scanValue(obj, d)
		if err != nil {
			return false
		}
		cached, ok := count(obj[d:end], `"cached_tokens"`)
		if !ok {
			return false
		}
		u.PromptTokensDetails = &struct {
			CachedTokens int64 `json:"cached_tokens"`
		}{cached}
	}
	return true
}
