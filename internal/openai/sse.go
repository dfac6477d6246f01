package openai

// Reading streamed chunks without decoding them: a relay needs to know of
// each event only whether it carries a token, the usage, or the finish, and
// a few byte scans answer that. JSON puts no raw quote inside a string, so
// a quoted key found in a chunk is a key, not text.

import "bytes"

// Done is the data of the event that ends an OpenAI stream.
var Done = []byte("[DONE]")

// HasToken reports whether a chunk carries output: non-empty content, text
// or reasoning (reasoning_content, or reasoning as newer vLLM names it),
// or a tool call.
func HasToken(chunk []byte) bool {
	return nonEmptyString(chunk, `"content"`) || nonEmptyString(chunk, `"text"`) ||
		nonEmptyString(chunk, `"reasoning_content"`) || nonEmptyString(chunk, `"reasoning"`) || valueStarts(chunk, `"tool_calls"`, '[')
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

// DeltaText is a chat chunk's delta text, the raw JSON string with its
// quotes, when the chunk carries that and nothing else a translation must
// act on: one choice, a string content, no tool calls, no reasoning (by
// either name), no thinking blocks, no finish_reason and no usage (each
// absent or null). It reads the chunk in one pass, as a decoder would:
// false whenever a decoder could read it otherwise (a key given twice,
// escaped or in another case) or it is not valid JSON. The text can then
// be written on without decoding the chunk.
func DeltaText(chunk []byte) ([]byte, bool) {
	var text []byte
	end, ok := deltaMembers(chunk, skipSpace(chunk, 0), 0, &text)
	return text, ok && text != nil && skipSpace(chunk, end) == len(chunk)
}

// deltaKeys are the keys DeltaText looks at in the chunk (level 0), its
// choice (1) and the choice's delta (2): the first of each holds the
// object of the next level (or the text), the others must be null.
var deltaKeys = [3][]string{{"choices", "usage"}, {"delta", "finish_reason"}, {"content", "tool_calls", "reasoning_content", "reasoning", "thinking_blocks"}}

// deltaMembers scans the object at b[i], at level, for DeltaText,
// returning the offset past it and false when DeltaText must say false.
func deltaMembers(b []byte, i, level int, text *[]byte) (int, bool) {
	if i >= len(b) || b[i] != '{' {
		return i, false
	}
	var seen [5]bool
	var buf [maxKeyBytes]byte
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return i + 1, true
	}
	for {
		kEnd, next, err := scanMember(b, i)
		if err != nil {
			return i, false
		}
		raw := b[i+1 : kEnd-1]
		key := raw
		if bytes.IndexByte(raw, '\\') >= 0 {
			var decoded bool
			if key, decoded = unescapeKey(buf[:0], raw); !decoded {
				key = nil
			}
		}
		if i = skipSpace(b, next); i >= len(b) {
			return i, false
		}
		k := -1
		for j, name := range deltaKeys[level] {
			if foldEqual(key, name) {
				if seen[j] || string(raw) != name {
					return i, false
				}
				seen[j], k = true, j
			}
		}
		var vEnd int
		switch {
		case k >= 1: // must be null
			if !bytes.HasPrefix(b[i:], []byte("null")) {
				return i, false
			}
			vEnd = i + 4
		case k == 0 && level == 0: // choices: [one choice]
			if b[i] != '[' {
				return i, false
			}
			if vEnd, err = deltaMembersEnd(b, skipSpace(b, i+1), 1, text); err != nil {
				return i, false
			}
			if vEnd = skipSpace(b, vEnd); vEnd >= len(b) || b[vEnd] != ']' {
				return i, false
			}
			vEnd++
		case k == 0 && level == 1: // delta
			if vEnd, err = deltaMembersEnd(b, i, 2, text); err != nil {
				return i, false
			}
		case k == 0: // content: a string
			if b[i] != '"' {
				return i, false
			}
			if vEnd, err = scanString(b, i); err != nil {
				return i, false
			}
			*text = b[i:vEnd]
		default:
			if vEnd, err = scanValue(b, i); err != nil {
				return i, false
			}
		}
		i = skipSpace(b, vEnd)
		if i < len(b) && b[i] == '}' {
			return i + 1, true
		}
		if i >= len(b) || b[i] != ',' {
			return i, false
		}
		i = skipSpace(b, i+1)
	}
}

func deltaMembersEnd(b []byte, i, level int, text *[]byte) (int, error) {
	end, ok := deltaMembers(b, i, level, text)
	if !ok {
		return end, errSyntax
	}
	return end, nil
}

// DeltaReader reads the text of a stream's chunks as DeltaText does, and
// faster for chunks that differ from the last one it read in their text
// alone, as a backend's text chunks do: bytes the same as a chunk DeltaText
// took, around one valid JSON string, read the same to a decoder. Its
// zero value is ready; it serves one stream.
type DeltaReader struct {
	prefix, suffix []byte // of the last chunk DeltaText took, around its text
}

// Text is chunk's delta text; see DeltaText.
func (d *DeltaReader) Text(chunk []byte) ([]byte, bool) {
	p, s := len(d.prefix), len(d.suffix)
	if p > 0 && len(chunk) >= p+s+2 && chunk[p] == '"' &&
		bytes.Equal(chunk[:p], d.prefix) && bytes.Equal(chunk[len(chunk)-s:], d.suffix) {
		if end, err := scanString(chunk, p); err == nil && end == len(chunk)-s {
			return chunk[p:end], true
		}
	}
	text, ok := DeltaText(chunk)
	if ok {
		i := cap(chunk) - cap(text) // text is chunk[i:i+len(text)]
		d.prefix = append(d.prefix[:0], chunk[:i]...)
		d.suffix = append(d.suffix[:0], chunk[i+len(text):]...)
	}
	return text, ok
}
