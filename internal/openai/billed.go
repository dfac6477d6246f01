package openai

// Fields that change what a provider bills, or what it runs on the
// operator's account, beyond the tokens a request's usage reports: a
// premium service tier, web searches, audio output, stored completions,
// a day-long prompt cache, a substitute model, a container, server-side
// compaction, MCP servers. Parse reads them as it reads routing fields (given twice or
// in another case, a 400), notes which the body gives at a value that
// may raise the bill, and Rewrite can splice them out of the bytes, so a
// backend never sees them. Which a model allows is the catalog's to say.
//
// A value is harmless when it asks what the field's absence asks, or
// what bills no more: null for every field; service_tier auto, default
// (OpenAI's standard tier) or standard_only (Anthropic's); store false;
// modalities ["text"]; prompt_cache_retention in_memory; speed standard;
// context_management that only clears context (clear_* edits).

import "strings"

// BilledField is one of the fields above, by the order of fieldNames.
type BilledField uint8

// The billed fields. OpenAI's chat completions: service_tier (flex,
// scale, priority), store (with its metadata, kept on the operator's
// account), web_search_options (searches billed by the call), modalities
// and audio (audio output, billed at audio prices), prediction (rejected
// predicted tokens, billed as completion tokens), prompt_cache_retention
// (24h: the prompt kept on disk). Anthropic's Messages: service_tier,
// inference_geo (US-only inference at 1.1 times), speed (fast mode at
// six times), container (a code execution container's hours), fallbacks
// (another model, at its price), context_management (compaction, whose
// summarising pass the answer's usage leaves out), mcp_servers (tools run
// by MCP servers the provider calls).
const (
	ServiceTier BilledField = iota
	Store
	WebSearchOptions
	Modalities
	Audio
	Prediction
	PromptCacheRetention
	InferenceGeo
	Speed
	Container
	Fallbacks
	ContextManagement
	MCPServers
	numBilled
)

// String is the field's key.
func (f BilledField) String() string { return fieldNames[fieldBilled+int(f)] }

// BilledFieldNamed is the billed field whose key is name; false when none
// is.
func BilledFieldNamed(name string) (BilledField, bool) {
	for f := range numBilled {
		if f.String() == name {
			return f, true
		}
	}
	return 0, false
}

// BilledFields is a set of billed fields.
type BilledFields uint16

// Of is the set holding f alone.
func Of(f BilledField) BilledFields { return 1 << f }

// Has reports whether s holds f.
func (s BilledFields) Has(f BilledField) bool { return s&Of(f) != 0 }

// First is the first field of s in the order above; false when s is
// empty.
func (s BilledFields) First() (BilledField, bool) {
	for f := range numBilled {
		if s.Has(f) {
			return f, true
		}
	}
	return 0, false
}

// String is s's keys, comma-separated, in the order above.
func (s BilledFields) String() string {
	var b strings.Builder
	for f := range numBilled {
		if s.Has(f) {
			if b.Len() > 0 {
				b.WriteString(", ")
			}
			b.WriteString(f.String())
		}
	}
	return b.String()
}

// member is where a member of a body's top-level object lies: from its
// key's opening quote (start) to its value's end (end), after the value
// of the member before it (prev: past the opening brace for the first),
// and before the key of the one after it (next; zero for the last).
type member struct{ start, end, prev, next int }

// noteBilled notes field f's member m, whose value is v, and adds f to
// r.Billed unless v is harmless.
func (r *Request) noteBilled(f BilledField, v []byte, m member) {
	r.billed[f], r.present = m, r.present|Of(f)
	if f == ServiceTier && v[0] == '"' {
		r.ServiceTier = decodeString(v)
	}
	if !harmless(f, v) {
		r.Billed |= Of(f)
	}
}

// harmless reports whether v, the valid JSON value of billed field f,
// asks nothing a provider bills more for, or runs otherwise, than f's
// absence (see the top of the file).
func harmless(f BilledField, v []byte) bool {
	if v[0] == 'n' {
		return true
	}
	switch f {
	case ServiceTier:
		return isString(v, "auto", "default", "standard_only")
	case Store:
		return v[0] == 'f'
	case Modalities:
		return v[0] == '[' && eachElement(v, func(e []byte) bool { return isString(e, "text") })
	case PromptCacheRetention:
		return isString(v, "in_memory", "in-memory")
	case Speed:
		return isString(v, "standard")
	case ContextManagement:
		return clearsOnly(v)
	}
	return false
}

// isString reports whether v, a valid JSON value, is a string that
// decodes to one of names.
func isString(v []byte, names ...string) bool {
	if v[0] != '"' {
		return false
	}
	s := decodeString(v)
	for _, n := range names {
		if s == n {
			return true
		}
	}
	return false
}

// clearsOnly reports whether v, a context_management value, asks only to
// clear context, which bills less: an object whose only member is edits,
// an array of edits each of a type clear_..., and nothing a decoder could
// read otherwise (edits or an edit's type given twice, or spelled in
// another case).
func clearsOnly(v []byte) bool {
	if v[0] != '{' {
		return false
	}
	edits := 0
	return eachMember(v, func(key, value []byte) bool {
		match, exact := keyFolds(key, "edits")
		edits++
		return match && exact && edits == 1 && value[0] == '[' && eachElement(value, clears)
	})
}

// clears reports whether e, an edit of context_management's, is an
// object whose type, given once, is clear_....
func clears(e []byte) bool {
	if e[0] != '{' {
		return false
	}
	types := 0
	ok := eachMember(e, func(key, value []byte) bool {
		match, exact := keyFolds(key, "type")
		if !match {
			return true
		}
		types++
		return exact && types == 1 && value[0] == '"' && strings.HasPrefix(decodeString(value), "clear_")
	})
	return ok && types == 1
}

// BilledFieldRefused is the 400 for a request naming billed field f,
// which its model does not allow.
func BilledFieldRefused(f BilledField) *Error {
	return BadRequest(f.String(), "The model does not take '%s' as asked, which changes what its provider bills or runs: send the request without it.", f)
}

// dropEdits appends to edits those that splice the members of the fields
// of drop out of body, which r read: each with what follows it up to the
// next member's key, and members that end the object with what leads to
// them from the member before. The body keeps its model, which is never
// dropped, so a member always precedes those that end it.
func (r *Request) dropEdits(edits []edit, drop BilledFields) []edit {
	var ms [numBilled]member
	n := 0
	for f := range numBilled {
		if drop.Has(f) {
			ms[n] = r.billed[f]
			for j := n; j > 0 && ms[j].start < ms[j-1].start; j-- {
				ms[j], ms[j-1] = ms[j-1], ms[j]
			}
			n++
		}
	}
	last := n // the first of the members dropped that end the object
	for last > 0 && (ms[last-1].next == 0 || last < n && ms[last-1].next == ms[last].start) {
		last--
	}
	for _, m := range ms[:last] {
		edits = append(edits, edit{at: span{m.start, m.next}})
	}
	if last < n {
		edits = append(edits, edit{at: span{ms[last].prev, ms[n-1].end}})
	}
	return edits
}
