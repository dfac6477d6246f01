package usage

// A record's JSON, written without reflection: the ledger's journal
// appends one per request, under its lock, and encoding/json's reflection
// was most of what that cost (docs/decisions/0022-journal-encoding.md).
// The bytes are encoding/json's own, which FuzzAppendJSONMatchesEncodingJSON
// holds it to.

import (
	"errors"
	"math"
	"strconv"
	"unicode/utf8"
)

// errCost is the error for a cost that JSON cannot hold.
var errCost = errors.New("usage: cost_usd is NaN or infinite")

// AppendJSON appends r as encoding/json's Marshal writes it to b. It fails
// where Marshal fails: a time outside years 0 to 9999 or with an offset
// of a day or more, and a cost that is NaN or infinite.
func (r *Record) AppendJSON(b []byte) ([]byte, error) {
	b = append(b, `{"id":`...)
	b = appendString(b, r.ID)
	b = append(b, `,"time":"`...)
	b, err := r.Time.AppendText(b)
	if err != nil {
		return b, err
	}
	b = append(b, '"')
	b = appendField(b, `,"key_id":`, r.KeyID)
	b = appendField(b, `,"tenant":`, r.Tenant)
	b = append(b, `,"model":`...)
	b = appendString(b, r.Model)
	b = appendField(b, `,"pool":`, r.Pool)
	b = appendField(b, `,"endpoint":`, r.Endpoint)
	b = append(b, `,"prompt_tokens":`...)
	b = strconv.AppendInt(b, r.PromptTokens, 10)
	b = append(b, `,"completion_tokens":`...)
	b = strconv.AppendInt(b, r.CompletionTokens, 10)
	b = append(b, `,"cached_tokens":`...)
	b = strconv.AppendInt(b, r.CachedTokens, 10)
	if r.Estimated {
		b = append(b, `,"estimated":true`...)
	}
	b = append(b, `,"cost_usd":`...)
	if b, err = appendFloat(b, r.CostUSD); err != nil {
		return b, err
	}
	b = append(b, `,"status":`...)
	b = strconv.AppendInt(b, int64(r.Status), 10)
	b = append(b, `,"ttft_ns":`...)
	b = strconv.AppendInt(b, int64(r.TTFT), 10)
	b = append(b, `,"duration_ns":`...)
	b = strconv.AppendInt(b, int64(r.Duration), 10)
	b = append(b, `,"streamed":`...)
	b = strconv.AppendBool(b, r.Streamed)
	b = appendField(b, `,"kind":`, string(r.Kind))
	if r.BytesIn != 0 {
		b = strconv.AppendInt(append(b, `,"bytes_in":`...), r.BytesIn, 10)
	}
	if r.BytesOut != 0 {
		b = strconv.AppendInt(append(b, `,"bytes_out":`...), r.BytesOut, 10)
	}
	return append(b, '}'), nil
}

// appendField appends key and s, an omitempty string field, unless s is
// empty.
func appendField(b []byte, key, s string) []byte {
	if s == "" {
		return b
	}
	return appendString(append(b, key...), s)
}

// appendFloat appends f as encoding/json writes a float64: the shortest
// form that reads back the same, in exponent form below 1e-6 and from
// 1e21 on, with an exponent of one digit not padded to two.
func appendFloat(b []byte, f float64) ([]byte, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return b, errCost
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if n := len(b); format == 'e' && n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
		b[n-2] = b[n-1]
		b = b[:n-1]
	}
	return b, nil
}

const hex = "0123456789abcdef"

// appendString appends s quoted as encoding/json quotes a string: <, >
// and & escaped for HTML, control characters escaped, invalid UTF-8 as
// U+FFFD, and U+2028 and U+2029 escaped for JavaScript.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= ' ' && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
