package proxy

// Secrets in an upstream's words. A provider's error may quote the
// credentials it was sent (a 401 often names the key it refused), or other
// keys and tokens. Whatever of an upstream's error reaches the client or
// the log passes through redact first: the call's own key wherever it
// appears, however its JSON escapes it, and anything shaped like a
// provider's key or a bearer token becomes a fixed marker, a JSON body
// staying valid JSON.

import (
	"bytes"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"unicode/utf8"
)

// redacted is what a secret is replaced by.
const redacted = "[redacted]"

// keyShapes are strings shaped like hosted providers' keys: OpenAI's and
// Anthropic's (sk-..., sk-proj-..., sk-ant-...), also as OpenAI quotes one
// masked (sk-proj-****Ab1C), and Google's (AIza...). Each starts a word,
// so that "task-list" is left alone.
var keyShapes = regexp.MustCompile(`\bsk-[A-Za-z0-9_*-]{3,}|\bAIza[A-Za-z0-9_-]{20,}`)

// bearerToken is a bearer credential; its scheme is kept, so that the
// message still says what was refused.
var bearerToken = regexp.MustCompile(`(?i)\b(bearer\s+)[A-Za-z0-9._~+/=*-]+`)

// sentKeys are the credentials h carries, as poolHeaders, Headers and a
// call's signer set them: the token of its Authorization header, its
// X-Api-Key (Anthropic's), Api-Key (Azure's), X-Goog-Api-Key (the Gemini
// API's) and X-Amz-Security-Token (an AWS session's). None when h carries
// none.
func sentKeys(h http.Header) []string {
	var keys []string
	for _, v := range h["Authorization"] {
		if len(v) > 7 && strings.EqualFold(v[:7], "bearer ") {
			v = strings.TrimSpace(v[7:])
		}
		keys = append(keys, v)
	}
	for _, k := range [...]string{"X-Api-Key", "Api-Key", "X-Goog-Api-Key", "X-Amz-Security-Token"} {
		keys = append(keys, h[k]...)
	}
	return keys
}

// redactString is s with every key in keys, and every string shaped like
// a key or a bearer token, replaced by the marker. Empty keys are passed
// over.
func redactString(s string, keys []string) string {
	for _, k := range keys {
		if k != "" {
			s = strings.ReplaceAll(s, k, redacted)
		}
	}
	s = keyShapes.ReplaceAllLiteralString(s, redacted)
	return bearerToken.ReplaceAllString(s, "${1}"+redacted)
}

// redact is b with its secrets replaced by the marker (see redactString),
// and whether b is valid JSON. In valid JSON each string is read as a
// JSON decoder reads it, so that a key written as \u0073k-... is found
// too, and written back only if it changed; the rest is kept byte for byte and the
// result stays valid JSON. Anything else is redacted as plain text.
//
// A JSON reader reads every string as valid UTF-8, an invalid byte as
// U+FFFD, so in JSON a key that is not valid UTF-8 can match only part of
// another character: it is looked for in plain text alone, since cutting
// a character in two would write the key's byte back as U+FFFD.
func redact(b []byte, keys []string) ([]byte, bool) {
	if !json.Valid(b) {
		return []byte(redactString(string(b), keys)), false
	}
	keys = validUTF8(keys)
	var out []byte // nil until a string changes
	last := 0
	for i := 0; i < len(b); i++ {
		if b[i] != '"' {
			continue // outside a string, valid JSON has no quote
		}
		end := stringEnd(b, i)
		lit := b[i:end]
		var s string
		if bytes.IndexByte(lit, '\\') < 0 && utf8.Valid(lit) {
			s = string(lit[1 : len(lit)-1])
		} else if json.Unmarshal(lit, &s) != nil {
			s = "" // cannot happen: b is valid
		}
		if r := redactString(s, keys); r != s {
			enc, _ := json.Marshal(r)
			out = append(append(out, b[last:i]...), enc...)
			last = end
		}
		i = end - 1
	}
	if out == nil {
		return b, true
	}
	return append(out, b[last:]...), true
}

// validUTF8 is those of keys that are valid UTF-8.
func validUTF8(keys []string) []string {
	var valid []string
	for _, k := range keys {
		if utf8.ValidString(k) {
			valid = append(valid, k)
		}
	}
	return valid
}

// stringEnd is the offset just past the JSON string that starts with the
// quote at b[i], in valid JSON.
func stringEnd(b []byte, i int) int {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return len(b)
}

// maxLoggedBody is how much of an upstream's error body the log keeps:
// a provider's message and its JSON are a few hundred bytes; an HTML
// error page from a proxy in between need not be kept whole.
const maxLoggedBody = 512

// loggedBody is an upstream's error body as the log may hold it: redacted
// first, then cut to maxLoggedBody at a character's end, so that the cut
// never leaves part of a key behind.
func loggedBody(body []byte, keys []string) string {
	b, _ := redact(body, keys)
	if len(b) <= maxLoggedBody {
		return string(b)
	}
	n := maxLoggedBody
	for n > 0 && !utf8.RuneStart(b[n]) {
		n--
	}
	return string(b[:n]) + "..."
}
