package openai

// A routing field's value decoded from its bytes as backends decode it (a
// string, a boolean, a count within its range), and the 400 for a value
// of the wrong type or out of range, worded as OpenAI words it.

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

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
