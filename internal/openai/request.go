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
	// MaxTokens is the most tokens an answer may take: max_tokens or
	// max_completion_tokens, whichever is given (a body giving both must
	// give them the same value); zero when neither is, or when it is 0.
	// It is never above MaxTokensLimit.
	MaxTokens int64
	// Choices is how many answers the backend may generate: n, or best_of
	// when that is larger (a completion generates best_of and returns the
	// n best); 1 when neither is given. It is never above MaxChoices.
	Choices int64
	// User is the client's end-user id, if it sent one.
	User string
	// CacheSalt is the client's cache_salt, which keeps its prompts out of
	// the prefix cache other salts use; empty when it sent none.
	CacheSalt string
	// PromptCacheKey is the client's prompt_cache_key, which names the
	// requests it wants served from one cache (a conversation, say), and
	// which routing places them by; empty when it sent none.
	PromptCacheKey string
	// Billed are the fields the body gives that change what a provider
	// bills or runs beyond a request's tokens, at a value that may
	// (billed.go); a Rewrite can drop them.
	Billed BilledFields
	// ServiceTier is the body's service_tier, decoded; empty when it
	// gives none, or null.
	ServiceTier string

	model         span // the model value, quotes included
	streamOptions span // the stream_options value, null included; zero when absent
	includeUsage  span // the include_usage value in stream_options; zero when absent
	cacheSalt     span // the cache_salt value, null included; zero when absent
	prompt        span // the messages or prompt value, the last given; zero when absent
	maxTokens     span // the max_tokens value, null included; zero when absent
	// templateKwargs is the chat_template_kwargs value, the last given
	// (what Python's decoder keeps); zero when absent.
	templateKwargs span
	effort         bool // whether the body names reasoning_effort
	end            int  // offset of the object's closing brace
	// lists are what prompt, prompt_embeds and input list, by field
	// from fieldPrompt (prompts.go).
	lists [3]PromptList
	// present are the billed fields the body gives, at any value, and
	// billed where each lies, by BilledField.
	present BilledFields
	billed  [numBilled]member
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

// MaxChoices is the most answers n or best_of may ask of one request, as
// OpenAI bounds n. A request's output tokens are reserved for every one.
const MaxChoices = 128

// The fields Parse reads, as bits of the set of those a body has given.
// includeUsage is inside stream_options; the others are top-level.
const (
	fieldModel = iota
	fieldStream
	fieldStreamOptions
	fieldMaxTokens
	fieldMaxCompletionTokens
	fieldUser
	fieldN
	fieldBestOf
	fieldCacheSalt
	fieldPromptCacheKey
	fieldPrompt
	fieldPromptEmbeds
	fieldInput
	fieldTools        // any value: given twice, a decoder could find server tools another does not
	fieldBilled       // the first of the billed fields, in BilledField's order
	fieldIncludeUsage = fieldBilled + int(numBilled)
)

// fieldNames are the keys of the fields Parse reads, by the constants
// above; fieldParams name them in errors.
var (
	fieldNames = [...]string{"model", "stream", "stream_options", "max_tokens", "max_completion_tokens", "user", "n", "best_of", "cache_salt", "prompt_cache_key",
		"prompt", "prompt_embeds", "input", "tools",
		"service_tier", "store", "web_search_options", "modalities", "audio", "prediction", "prompt_cache_retention", "inference_geo", "speed", "container", "fallbacks", "context_management", "mcp_servers",
		"include_usage"}
	fieldParams = func() (p [len(fieldNames)]string) {
		p = fieldNames
		p[fieldIncludeUsage] = "stream_options.include_usage"
		return p
	}()
)

// ParseRequest reads routing's fields from a JSON body. It fails with a 400
// *Error on malformed JSON, a body that is not an object, a missing model,
// a routing field that is ill-typed, out of range, given twice or spelled
// so that decoders disagree on it, or max_tokens and
// max_completion_tokens given different values.
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
// last and some the first; a key that is not a routing field's but that
// Go's encoding/json would take for one, matching case-insensitively; and
// both max_tokens and max_completion_tokens with different values, of
// which backends heed one or the other. Keys are compared as decoders see
// them, escapes decoded.
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
	var seen uint32 // bit f set when field f has been given
	c := givenCounts{maxTokens: -1, maxCompletionTokens: -1, n: -1, bestOf: -1}
	prev := i + 1 // where the member before the next ends: past the brace at first
	i = skipSpace(body, i+1)
	if i < len(body) && body[i] == '}' {
		r.end = i
	} else {
		follows := BilledField(numBilled) // the billed field of the member before, if any
		for {
			k := i
			if follows < numBilled {
				r.billed[follows].next, follows = k, numBilled
			}
			kEnd, next, err := scanMember(body, i)
			if err != nil {
				return errNotJSON()
			}
			key := body[i+1 : kEnd-1]
			f, exact := keyField(key, fieldModel, fieldIncludeUsage-1)
			i = skipSpace(body, next)
			vEnd, err := scanValue(body, i)
			if err != nil {
				return errNotJSON()
			}
			if f >= 0 {
				if err := checkKey(f, exact, &seen); err != nil {
					return err
				}
			}
			switch {
			case f < 0:
				r.noteMember(key, i, vEnd)
			case f >= fieldBilled:
				follows = BilledField(f - fieldBilled)
				r.noteBilled(follows, body[i:vEnd], member{start: k, end: vEnd, prev: prev})
			default:
				if err := r.readField(f, body, i, vEnd, &c); err != nil {
					return err
				}
			}
			prev = vEnd
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
	return r.settle(c)
}

// givenCounts are a body's counts as given: -1 when not given, or null.
type givenCounts struct{ maxTokens, maxCompletionTokens, n, bestOf int64 }

// noteMember notes where the value body[start:end] of a member that is
// not a routing field lies, when a rewrite or routing reads it: the
// messages, chat_template_kwargs, reasoning_effort.
func (r *Request) noteMember(key []byte, start, end int) {
	switch {
	case keyIs(key, "messages"):
		r.prompt = span{start, end}
	case keyIs(key, "chat_template_kwargs"):
		r.templateKwargs = span{start, end}
	case keyIs(key, "reasoning_effort"):
		r.effort = true
	}
}

// readField decodes routing field f's value body[start:end] into r, or
// into c for the counts only the whole body settles.
func (r *Request) readField(f int, body []byte, start, end int, c *givenCounts) error {
	v := body[start:end]
	var err error
	switch f {
	case fieldModel:
		if v[0] != '"' {
			return invalidType(f, "a string", v)
		}
		r.Model = decodeString(v)
		r.model = span{start, end}
	case fieldStream:
		r.Stream, err = decodeBool(f, v)
	case fieldStreamOptions:
		err = r.parseStreamOptions(body, start, end)
	case fieldMaxTokens:
		if c.maxTokens, err = decodeCount(f, v, 0, MaxTokensLimit, -1); err == nil {
			r.maxTokens = span{start, end}
		}
	case fieldMaxCompletionTokens:
		c.maxCompletionTokens, err = decodeCount(f, v, 0, MaxTokensLimit, -1)
	case fieldN:
		c.n, err = decodeCount(f, v, 1, MaxChoices, -1)
	case fieldBestOf:
		c.bestOf, err = decodeCount(f, v, 1, MaxChoices, -1)
	case fieldUser:
		r.User, err = decodeOptionalString(f, v)
	case fieldCacheSalt:
		if r.CacheSalt, err = decodeOptionalString(f, v); err == nil {
			r.cacheSalt = span{start, end}
		}
	case fieldPromptCacheKey:
		r.PromptCacheKey, err = decodeOptionalString(f, v)
	case fieldPrompt, fieldPromptEmbeds, fieldInput:
		r.lists[f-fieldPrompt] = readList(v)
		if f == fieldPrompt {
			r.prompt = span{start, end}
		}
	}
	return err
}

// settle checks what only the whole body shows, that it gives a model
// and that max_tokens and max_completion_tokens agree, and sets
// MaxTokens and Choices from c.
func (r *Request) settle(c givenCounts) error {
	if r.Model == "" {
		return BadRequest("model", "You must provide a model parameter.")
	}
	switch {
	case c.maxTokens >= 0 && c.maxCompletionTokens >= 0 && c.maxTokens != c.maxCompletionTokens:
		return BadRequest("max_completion_tokens", "max_tokens (%d) and max_completion_tokens (%d) disagree, and backends heed one or the other: send one of them, or the same value in both.", c.maxTokens, c.maxCompletionTokens)
	case c.maxCompletionTokens >= 0:
		r.MaxTokens = c.maxCompletionTokens
	default:
		r.MaxTokens = max(c.maxTokens, 0)
	}
	r.Choices = max(c.n, c.bestOf, 1)
	return nil
}

func errNotJSON() error { return BadRequest("", "The request body is not valid JSON.") }

// checkKey refuses field f's key when it is a case-folded spelling or
// the field has been seen before, and notes it in seen.
func checkKey(f int, exact bool, seen *uint32) error {
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
	var seen uint32
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

// decodeOptionalString decodes field f's value v, a JSON string or null
// (empty).
func decodeOptionalString(f int, v []byte) (string, error) {
	switch v[0] {
	case '"':
		return decodeString(v), nil
	case 'n':
		return "", nil
	}
	return "", invalidType(f, "a string", v)
}

// decodeCount decodes field f's value v, a JSON integer from lo to hi, or
// null, which gives null. Integers written with a fraction or an exponent,
// such as 1.0 or 1e3, are refused: Python backends read them as floats.
// -0 is 0.
func decodeCount(f int, v []byte, lo, hi, null int64) (int64, error) {
	if v[0] == 'n' {
		return null, nil
	}
	if v[0] != '-' && (v[0] < '0' || v[0] > '9') || bytes.ContainsAny(v, ".eE") {
		return 0, invalidType(f, "an integer", v)
	}
	if v[0] == '-' {
		if string(v) != "-0" || lo > 0 {
			return 0, outOfRange(f, lo, hi, true, v)
		}
		return 0, nil
	}
	var n int64
	for _, c := range v {
		if n = n*10 + int64(c-'0'); n > hi {
			return 0, outOfRange(f, lo, hi, false, v)
		}
	}
	if n < lo {
		return 0, outOfRange(f, lo, hi, true, v)
	}
	return n, nil
}

// outOfRange is the 400 for field f's integer v below lo or above hi, as
// OpenAI words it. Over 24 digits of v are cut short.
func outOfRange(f int, lo, hi int64, below bool, v []byte) error {
	shown := string(v)
	if len(v) > 24 {
		shown = string(v[:21]) + "..."
	}
	side, bound, code := "above maximum", "<= "+strconv.FormatInt(hi, 10), "integer_above_max_value"
	if below {
		side, bound, code = "below minimum", ">= "+strconv.FormatInt(lo, 10), "integer_below_min_value"
	}
	e := BadRequest(fieldParams[f], "Invalid '%s': integer %s value. Expected a value %s, but got %s instead.", fieldParams[f], side, bound, shown)
	e.Code = code
	return e
}

// Edits are what Rewrite changes in a body.
type Edits struct {
	// Model is the model name the backend is asked for.
	Model string
	// IncludeUsage forces stream_options.include_usage on.
	IncludeUsage bool
	// CacheSalt, when set, is the cache_salt sent, in place of the
	// client's own.
	CacheSalt string
	// MaxTokens, when positive, is the max_tokens sent, in place of the
	// body's own or added when it names none: the bound the gateway
	// reserved, for a backend that takes a body as its client wrote it.
	MaxTokens int64
	// EnableThinking, when not nil, is sent as
	// chat_template_kwargs.enable_thinking, the switch Qwen3-style chat
	// templates read: added to the body's chat_template_kwargs, or in a
	// new one. A body whose chat_template_kwargs names enable_thinking,
	// or is not an object, keeps its own.
	EnableThinking *bool
	// ReasoningEffort, when set, is sent as reasoning_effort, unless the
	// body names one.
	ReasoningEffort string
	// Drop are billed fields whose members are taken out of the body,
	// when it gives them.
	Drop BilledFields
}

// Rewrite returns body with e's edits made: the model renamed, include_usage
// forced on, cache_salt set, max_tokens set, thinking switched, a
// reasoning effort added, billed fields dropped. It returns body itself
// when nothing changes, and otherwise changes only those values: the rest
// of the body reaches the backend byte for byte.
func (r *Request) Rewrite(body []byte, e Edits) []byte {
	renamed := e.Model != r.Model
	usage := e.IncludeUsage && !r.IncludeUsage
	salted := e.CacheSalt != "" && e.CacheSalt != r.CacheSalt
	var bound [20]byte // e.MaxTokens, written
	bounded := e.MaxTokens > 0 && !(r.maxTokens.ok() && string(body[r.maxTokens.start:r.maxTokens.end]) == string(strconv.AppendInt(bound[:0], e.MaxTokens, 10)))
	thinking := e.EnableThinking != nil && r.takesThinking(body)
	effort := e.ReasoningEffort != "" && !r.effort
	drop := e.Drop & r.present
	if !renamed && !usage && !salted && !bounded && !thinking && !effort && drop == 0 {
		return body
	}
	out := make([]byte, 0, len(body)+len(e.Model)+len(e.CacheSalt)+len(e.ReasoningEffort)+len(addedOptions)+len(addedSalt)+
		len(addedMaxTokens)+len(bound)+len(addedKwargs)+len(`{"enable_thinking":false}`)+len(addedEffort)+12)
	// At most six edits: the model's value, where include_usage is set or
	// added, cache_salt's value or where it is added, and the same for
	// max_tokens, enable_thinking and reasoning_effort; then one for each
	// billed field dropped. A body always has a model, so what is added at
	// its end follows a comma.
	var edits [6 + numBilled]edit
	n := 0
	if renamed {
		edits[n] = edit{at: r.model, with: e.Model, quoted: true}
		n++
	}
	if usage {
		edits[n] = r.usageEdit(body)
		n++
	}
	if salted {
		if r.cacheSalt.ok() {
			edits[n] = edit{at: r.cacheSalt, with: e.CacheSalt, quoted: true}
		} else {
			edits[n] = edit{at: span{r.end, r.end}, with: e.CacheSalt, quoted: true, before: addedSalt}
		}
		n++
	}
	if bounded {
		written := string(strconv.AppendInt(bound[:0], e.MaxTokens, 10))
		if r.maxTokens.ok() {
			edits[n] = edit{at: r.maxTokens, with: written}
		} else {
			edits[n] = edit{at: span{r.end, r.end}, with: written, before: addedMaxTokens}
		}
		n++
	}
	if thinking {
		edits[n] = r.thinkingEdit(body, *e.EnableThinking)
		n++
	}
	if effort {
		edits[n] = edit{at: span{r.end, r.end}, with: e.ReasoningEffort, quoted: true, before: addedEffort}
		n++
	}
	return splice(out, body, r.dropEdits(edits[:n], drop))
}

// What Rewrite adds at a body's end, ahead of a value.
const (
	addedOptions   = `,"stream_options":{"include_usage":true}`
	addedSalt      = `,"cache_salt":`
	addedMaxTokens = `,"max_tokens":`
	addedKwargs    = `,"chat_template_kwargs":`
	addedEffort    = `,"reasoning_effort":`
)

// edit replaces a span of a body, or inserts at an empty one.
type edit struct {
	at     span
	with   string
	quoted bool   // with is a string value, quoted into out
	before string // written ahead of with
}

// usageEdit is the edit that turns include_usage on in body, which r
// read and whose include_usage is not on: set where it is false or null,
// added to stream_options, or added with a stream_options of its own.
func (r *Request) usageEdit(body []byte) edit {
	switch so := r.streamOptions; {
	case r.includeUsage.ok(): // false or null
		return edit{at: r.includeUsage, with: "true"}
	case so.ok() && body[so.start] == 'n':
		return edit{at: so, with: `{"include_usage":true}`}
	case so.ok() && skipSpace(body, so.start+1) == so.end-1: // {}
		return edit{at: span{so.end - 1, so.end - 1}, with: `"include_usage":true`}
	case so.ok():
		return edit{at: span{so.end - 1, so.end - 1}, with: `,"include_usage":true`}
	}
	return edit{at: span{r.end, r.end}, with: addedOptions}
}

// thinkingEdit is the edit that sets chat_template_kwargs.enable_thinking
// to on in body, which r read and whose chat_template_kwargs takes it:
// added to that object, or in a new one.
func (r *Request) thinkingEdit(body []byte, on bool) edit {
	// Constants each, so that no edit is built at run time.
	member, more, object := `"enable_thinking":false`, `,"enable_thinking":false`, `{"enable_thinking":false}`
	if on {
		member, more, object = `"enable_thinking":true`, `,"enable_thinking":true`, `{"enable_thinking":true}`
	}
	kw := r.templateKwargs
	switch {
	case !kw.ok():
		return edit{at: span{r.end, r.end}, with: object, before: addedKwargs}
	case body[kw.start] == 'n':
		return edit{at: kw, with: object}
	case skipSpace(body, kw.start+1) == kw.end-1: // {}
		return edit{at: span{kw.end - 1, kw.end - 1}, with: member}
	}
	return edit{at: span{kw.end - 1, kw.end - 1}, with: more}
}

// splice appends body to out with edits made, each at most once, and
// returns out.
func splice(out, body []byte, edits []edit) []byte {
	// In body's order; insertions at one place keep theirs.
	for i := 1; i < len(edits); i++ {
		for j := i; j > 0 && edits[j].at.start < edits[j-1].at.start; j-- {
			edits[j], edits[j-1] = edits[j-1], edits[j]
		}
	}
	last := 0
	for _, ed := range edits {
		out = append(out, body[last:ed.at.start]...)
		out = append(out, ed.before...)
		if ed.quoted {
			out = appendJSONString(out, ed.with)
		} else {
			out = append(out, ed.with...)
		}
		last = ed.at.end
	}
	return append(out, body[last:]...)
}

// takesThinking reports whether body's chat_template_kwargs, which r
// read, can take enable_thinking: it is absent, null, or an object that
// does not name it.
func (r *Request) takesThinking(body []byte) bool {
	kw := r.templateKwargs
	switch {
	case !kw.ok() || body[kw.start] == 'n':
		return true
	case body[kw.start] != '{':
		return false
	}
	return eachMember(body[kw.start:kw.end], func(key, _ []byte) bool { return !keyIs(key, "enable_thinking") })
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
