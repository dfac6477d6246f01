package openai

// The in-place rewrite of a body Parse has read: each edit replaces a
// value at a span Parse noted, or adds a member at the object's end, and
// billed fields are cut out whole (billed.go), so the rest of the body
// reaches the backend byte for byte.

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

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
