package openai

// The few request fields routing reads, found without decoding the whole
// body: a scan over the top-level object notes where each wanted value
// lies, decodes only those, and lets a rewrite splice new values in place,
// so a body that needs no change reaches the backend byte for byte.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// Request is what routing needs from a completion, chat or embeddings body.
type Request struct {
	Model string
	// Stream reports whether the client asked for server-sent events.
	Stream bool
	// IncludeUsage reports whether the client asked for the usage chunk
	// (stream_options.include_usage).
	IncludeUsage bool
	// MaxTokens is max_completion_tokens or, when that is absent, null or
	// zero, max_tokens, as vLLM reads them; zero when neither is given.
	// It is never above MaxTokensLimit.
	MaxTokens int64
	// User is the client's end-user id, if it sent one.
	User string

	model         span // the model value, quotes included
	streamOptions span // the stream_options value, null included; zero when absent
	includeUsage  span // the include_usage value in stream_options; zero when absent
	prompt        span // the messages or prompt value, the last given; zero when absent
	end           int  // offset of the object's closing brace
}

// Prompt is the body's messages or prompt value as sent: what a backend's
// prefix cache keys on, for routing to find where a prompt's prefix is
// cached. Nil when the body has neither. Only routing reads it, and a
// body that names both, or either twice, only routes less well.
func (r *Request) Prompt(body []byte) []byte {
	if !r.prompt.ok() {
		return nil
	}
	return body[r.prompt.start:r.prompt.end]
}

// span is a half-open byte range [start, end) of a body; zero means absent.
type span struct{ start, end int }

func (s span) ok() bool { return s.end > 0 }

// MaxTokensLimit is the most max_tokens or max_completion_tokens may ask
// for: 2^31-1, hundreds of times the longest context any model serves
// (about 10M tokens), the most a backend holding counts in 32 bits can
// read, and far enough below 2^63 that a prompt estimate added to it
// cannot overflow a token reservation.
const MaxTokensLimit = 1<<31 - 1

// The fields Parse reads, as bits of the set of those a body has given.
// includeUsage is inside stream_options; the others are top-level.
const (
	fieldModel = iota
	fieldStream
	fieldStreamOptions
	fieldMaxTokens
	fieldMaxCompletionTokens
	fieldUser
	fieldIncludeUsage
)

// fieldNames are the keys of the fields Parse reads, by the constants
// above; fieldParams name them in errors.
var (
	fieldNames  = [...]string{"model", "stream", "stream_options", "max_tokens", "max_completion_tokens", "user", "include_usage"}
	fieldParams = [...]string{"model", "stream", "stream_options", "max_tokens", "max_completion_tokens", "user", "stream_options.include_usage"}
)

// ParseRequest reads routing's fields from a JSON body. It fails with a 400
// *Error on malformed JSON, a body that is not an object, a missing model,
// or a routing field that is ill-typed, out of range, given twice or
// spelled so that decoders disagree on it.
func ParseRequest(body []byte) (*Request, error) {
	r := new(Request)
	if err := r.Parse(body); err != nil {
		return nil, err
	}
	return r, nil
}

// Parse reads routing's fields from body into r; see ParseRequest. It
// checks the whole body is valid JSON in the same pass.
//
// Backends decode the body again, each its own way, and the key's limits
// and bill follow what Parse reads, so Parse refuses what they could read
// differently: a routing field given twice, where most decoders keep the
// last and some the first; and a key that is not a routing field's but
// that Go's encoding/json would take for one, matching case-insensitively.
// Keys are compared as decoders see them, escapes decoded.
func (r *Request) Parse(body []byte) error {
	err := r.parse(body)
	if err != nil && !valid(body) {
		return errNotJSON() // rather than a fault found before the bad syntax
	}
	return err
}

func (r *Request) parse(body []byte) error {
	*r = Request{}
	i := skipSpace(body, 0)
	if i >= len(body) || body[i] != '{' {
		if valid(body) {
			return BadRequest("", "The request body must be a JSON object.")
		}
		return errNotJSON()
	}
	var seen uint8 // bit f set when field f has been given
	var maxTokens, maxCompletionTokens int64
	i = skipSpace(body, i+1)
	if i < len(body) && body[i] == '}' {
		r.end = i
	} else {
		for {
			kEnd, next, err := scanMember(body, i)
			if err != nil {
				return errNotJSON()
			}
			key := body[i+1 : kEnd-1]
			f, exact := keyField(key, fieldModel, fieldUser)
			i = skipSpace(body, next)
			vEnd, err := scanValue(body, i)
			if err != nil {
				return errNotJSON()
			}
			if f < 0 && (keyIs(key, "messages") || keyIs(key, "prompt")) {
				r.prompt = span{i, vEnd}
			}
			if f >= 0 {
				if err := checkKey(f, exact, &seen); err != nil {
					return err
				}
				v := body[i:vEnd]
				switch f {
				case fieldModel:
					if v[0] != '"' {
						return invalidType(f, "a string", v)
					}
					r.Model = decodeString(v)
					r.model = span{i, vEnd}
				case fieldStream:
					if r.Stream, err = decodeBool(f, v); err != nil {
						return err
					}
				case fieldStreamOptions:
					if err := r.parseStreamOptions(body, i, vEnd); err != nil {
						return err
					}
				case fieldMaxTokens:
					if maxTokens, err = decodeMaxTokens(f, v); err != nil {
						return err
					}
				case fieldMaxCompletionTokens:
					if maxCompletionTokens, err = decodeMaxTokens(f, v); err != nil {
						return err
					}
				case fieldUser:
					switch v[0] {
					case '"':
						r.User = decodeString(v)
					case 'n':
					default:
						return invalidType(f, "a string", v)
					}
				}
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
	r.MaxTokens = maxCompletionTokens
	if r.MaxTokens == 0 {
		r.MaxTokens = maxTokens
	}
	return nil
}

func errNotJSON() error { return BadRequest("", "The request body is not valid JSON.") }

// checkKey refuses field f's key when it is a case-folded spelling or
// the field has been seen before, and notes it in seen.
func checkKey(f int, exact bool, seen *uint8) error {
	if !exact {
		return BadRequest(fieldParams[f], "The request body has a key that differs from '%s' only in case, which backends read differently; spell it '%s'.", fieldNames[f], fieldNames[f])
	}
	if *seen&(1<<f) != 0 {
		return BadRequest(fieldParams[f], "Duplicate key '%s' in the request body: backends differ on which value they keep, so send it once.", fieldNames[f])
	}
	*seen |= 1 << f
	return nil
}

// parseStreamOptions reads the stream_options value body[start:end]: an
// object or null, whose include_usage, when given, is a boolean or null.
func (r *Request) parseStreamOptions(body []byte, start, end int) error {
	r.streamOptions = span{start, end}
	if body[start] == 'n' {
		return nil
	}
	if body[start] != '{' {
		return invalidType(fieldStreamOptions, "an object or null", body[start:end])
	}
	var seen uint8
	i := skipSpace(body, start+1)
	if body[i] == '}' {
		return nil
	}
	for { // body[start:end] is a valid object, so the scans cannot fail
		kEnd, next, _ := scanMember(body, i)
		f, exact := keyField(body[i+1:kEnd-1], fieldIncludeUsage, fieldIncludeUsage)
		i = skipSpace(body, next)
		vEnd, _ := scanValue(body, i)
		if f >= 0 {
			if err := checkKey(f, exact, &seen); err != nil {
				return err
			}
			var err error
			if r.IncludeUsage, err = decodeBool(f, body[i:vEnd]); err != nil {
				return err
			}
			r.includeUsage = span{i, vEnd}
		}
		i = skipSpace(body, vEnd)
		if body[i] == '}' {
			return nil
		}
		i = skipSpace(body, i+1) // past the comma
	}
}

// invalidType is the 400 for field f holding the JSON value v where want
// was expected.
func invalidType(f int, want string, v []byte) error {
	return InvalidType(fieldParams[f], want, JSONKind(v))
}

// JSONKind names the kind of the valid JSON value v as error messages do,
// with its article: "a string", "an integer", "a decimal number", "null"...
func JSONKind(v []byte) string {
	switch v[0] {
	case '"':
		return "a string"
	case '{':
		return "an object"
	case '[':
		return "an array"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	if bytes.ContainsAny(v, ".eE") {
		return "a decimal number"
	}
	return "an integer"
}

// decodeString decodes a valid JSON string as encoding/json does, without
// reflection when it holds no escapes and is valid UTF-8, as model names
// always are.
func decodeString(v []byte) string {
	in := v[1 : len(v)-1]
	if bytes.IndexByte(in, '\\') < 0 && utf8.Valid(in) {
		return string(in)
	}
	var s string
	json.Unmarshal(v, &s) // v is a valid string, which cannot fail to decode
	return s
}

// decodeBool decodes field f's value v, a JSON boolean or null (false).
func decodeBool(f int, v []byte) (bool, error) {
	switch v[0] {
	case 't':
		return true, nil
	case 'f', 'n':
		return false, nil
	}
	return false, invalidType(f, "a boolean", v)
}

// decodeMaxTokens decodes field f's value v, a JSON integer from 0 to
// MaxTokensLimit or null (0). Integers written with a fraction or an
// exponent, such as 1.0 or 1e3, are refused: Python backends read them as
// floats.
func decodeMaxTokens(f int, v []byte) (int64, error) {
	if v[0] == 'n' {
		return 0, nil
	}
	if v[0] != '-' && (v[0] < '0' || v[0] > '9') || bytes.ContainsAny(v, ".eE") {
		return 0, invalidType(f, "an integer", v)
	}
	if v[0] == '-' {
		if string(v) == "-0" {
			return 0, nil
		}
		return 0, outOfRange(f, true, v)
	}
	var n int64
	for _, c := range v {
		if n = n*10 + int64(c-'0'); n > MaxTokensLimit {
			return 0, outOfRange(f, false, v)
		}
	}
	return n, nil
}

// outOfRange is the 400 for field f's integer v below 0 or above
// MaxTokensLimit, as OpenAI words it. Over 24 digits of v are cut short.
func outOfRange(f int, below bool, v []byte) error {
	shown := string(v)
	if len(v) > 24 {
		shown = string(v[:21]) + "..."
	}
	side, bound, code := "above maximum", "<= "+strconv.Itoa(MaxTokensLimit), "integer_above_max_value"
	if below {
		side, bound, code = "below minimum", ">= 0", "integer_below_min_value"
	}
	e := BadRequest(fieldParams[f], "Invalid '%s': integer %s value. Expected a value %s, but got %s instead.", fieldParams[f], side, bound, shown)
	e.Code = code
	return e
}

// Rewrite returns body with the model renamed to model and, when
// includeUsage is set, stream_options.include_usage forced on. It returns
// body itself when nothing changes, and otherwise changes only those two
// values: the rest of the body reaches the backend byte for byte.
func (r *Request) Rewrite(body []byte, model string, includeUsage bool) []byte {
	renamed := model != r.Model
	usage := includeUsage && !r.IncludeUsage
	if !renamed && !usage {
		return body
	}
	const addedOptions = `,"stream_options":{"include_usage":true}`
	out := make([]byte, 0, len(body)+len(model)+2+len(addedOptions))
	// At most two edits, each replacing a span of body: the model's value,
	// and where include_usage is set or added.
	type edit struct {
		at    span
		with  string
		model bool // with is the new model, quoted into out
	}
	var edits [2]edit
	n := 0
	if renamed {
		edits[n] = edit{r.model, model, true}
		n++
	}
	if usage {
		switch so := r.streamOptions; {
		case r.includeUsage.ok(): // false or null
			edits[n] = edit{r.includeUsage, "true", false}
		case so.ok() && body[so.start] == 'n':
			edits[n] = edit{so, `{"include_usage":true}`, false}
		case so.ok() && skipSpace(body, so.start+1) == so.end-1: // {}
			edits[n] = edit{span{so.end - 1, so.end - 1}, `"include_usage":true`, false}
		case so.ok():
			edits[n] = edit{span{so.end - 1, so.end - 1}, `,"include_usage":true`, false}
		default:
			edits[n] = edit{span{r.end, r.end}, addedOptions, false}
		}
		n++
	}
	if n == 2 && edits[1].at.start < edits[0].at.start {
		edits[0], edits[1] = edits[1], edits[0]
	}
	last := 0
	for _, e := range edits[:n] {
		out = append(out, body[last:e.at.start]...)
		if e.model {
			out = appendJSONString(out, e.with)
		} else {
			out = append(out, e.with...)
		}
		last = e.at.end
	}
	return append(out, body[last:]...)
}

// appendJSONString appends s to dst as a JSON string.
func appendJSONString(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= utf8.RuneSelf {
			b, _ := json.Marshal(s) // a string always marshals
			return append(dst, b...)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
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
