package openai

// Reading streamed chunks without decoding them: a relay needs to know of
// each event only whether it carries a token, the usage, or the finish, and
// a few byte scans answer that. JSON puts no raw quote inside a string, so
// a quoted key found in a chunk is a key, not text.

import "bytes"

// Done is the data of the event that ends an OpenAI stream.
var Done = []byte("[DONE]")

// HasToken reports whether a chunk carries output: non-empty content, text
// or reasoning, or a tool call.
func HasToken(chunk []byte) bool {
	return nonEmptyString(chunk, `"content"`) || nonEmptyString(chunk, `"text"`) ||
		nonEmptyString(chunk, `"reasoning_content"`) || valueStarts(chunk, `"tool_calls"`, '[')
}

// HasUsage reports whether a chunk carries a usage object (not null).
func HasUsage(chunk []byte) bool { return valueStarts(chunk, `"usage"`, '{') }

// HasFinish reports whether a chunk carries a finish_reason (not null).
func HasFinish(chunk []byte) bool { return valueStarts(chunk, `"finish_reason"`, '"') }

// IsUsageOnly reports whether a chunk is the usage chunk that
// stream_options.include_usage adds: usage and no choices.
func IsUsageOnly(chunk []byte) bool {
	if !HasUsage(chunk) {
		return false
	}
	i := valueAt(chunk, `"choices"`)
	if i < 0 {
		return true
	}
	i = skipSpace(chunk, i+1)
	return i < len(chunk) && chunk[i] == ']'
}

// valueAt is the offset of the first byte of key's value, or -1.
func valueAt(chunk []byte, key string) int {
	off := 0
	for {
		j := bytes.Index(chunk[off:], []byte(key))
		if j < 0 {
			return -1
		}
		i := skipSpace(chunk, off+j+len(key))
		if i < len(chunk) && chunk[i] == ':' {
			i = skipSpace(chunk, i+1)
			if i < len(chunk) {
				return i
			}
			return -1
		}
		off += j + len(key)
	}
}

func valueStarts(chunk []byte, key string, c byte) bool {
	i := valueAt(chunk, key)
	return i >= 0 && chunk[i] == c
}

func nonEmptyString(chunk []byte, key string) bool {
	i := valueAt(chunk, key)
	return i >= 0 && chunk[i] == '"' && i+1 < len(chunk) && chunk[i+1] != '"'
}

// ValueOf is the raw JSON value of the first member named key (quotes
// included, as in `"content"`) in chunk: a string with its quotes and
// escapes, an object with its braces. Nil when there is none or it does
// not scan.
func ValueOf(chunk []byte, key string) []byte {
	i := valueAt(chunk, key)
	if i < 0 {
		return nil
	}
	end, err := scanValue(chunk, i)
	if err != nil {
		return nil
	}
	return chunk[i:end]
}
