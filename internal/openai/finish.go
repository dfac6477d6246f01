package openai

// A chunk's or an answer's finish_reason, read without decoding it, for
// what a trace says of how an answer ended.

import "bytes"

// finishReasons are the finish reasons OpenAI's API and OpenAI-compatible
// servers give, returned without allocating.
var finishReasons = []string{"stop", "length", "tool_calls", "content_filter", "function_call", "abort"}

// maxFinishReason bounds a finish reason taken as it is: longer ones are
// not one of any server's words.
const maxFinishReason = 64

// FinishReason is the first finish_reason (not null) in a chunk or a
// whole answer, or "" when it has none. A reason with an escape in it,
// or longer than 64 bytes, is "other".
func FinishReason(b []byte) string {
	off := 0
	for {
		i := valueAt(b[off:], `"finish_reason"`)
		if i < 0 {
			return ""
		}
		i += off
		if b[i] != '"' {
			off = i // null: the next choice may have one
			continue
		}
		end := bytes.IndexByte(b[i+1:], '"')
		if end < 0 {
			return ""
		}
		v := b[i+1 : i+1+end]
		for _, r := range finishReasons {
			if string(v) == r {
				return r
			}
		}
		if len(v) > maxFinishReason || bytes.IndexByte(v, '\\') >= 0 {
			return "other"
		}
		return string(v)
	}
}
