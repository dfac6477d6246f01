package openai

import (
	"bytes"
	"errors"
	"unicode/utf16"
	"unicode/utf8"
)

// A validating JSON scanner. Requests are checked and their fields found
// in one pass, without building values: a chat request is mostly prompt
// text, and this scanner crosses a string at several times the speed of
// encoding/json's state machine. It accepts exactly what json.Valid
// accepts (FuzzScanMatchesJSONValid holds it to that). The keys routing
// looks for are matched as decoders match them: escapes decoded, and case
// folded the way Go's encoding/json folds it.

// maxDepth is how deeply arrays and objects may nest, as in encoding/json.
const maxDepth = 10000

var (
	errSyntax = errors.New("invalid JSON")
	errDepth  = errors.New("JSON nested too deeply")
)

// valid reports whether b is one JSON value, with space around it at most.
func valid(b []byte) bool {
	end, err := scanValue(b, 0)
	return err == nil && skipSpace(b, end) == len(b)
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// scanValue returns the offset just past the JSON value that starts at
// b[i], after any space, or an error if there is no valid value there.
// What follows the value is not looked at.
func scanValue(b []byte, i int) (int, error) {
	var buf [32]byte
	open := buf[:0] // the arrays and objects the scan is in: '[' or '{'
	var err error
	for {
		// A value starts here.
		i = skipSpace(b, i)
		if i >= len(b) {
			return i, errSyntax
		}
		if c := b[i]; c == '{' || c == '[' {
			if len(open) == maxDepth {
				return i, errDepth
			}
			i = skipSpace(b, i+1)
			if i < len(b) && b[i] == c+2 { // '}' and ']' follow their openers by two
				i++
			} else {
				open = append(open, c)
				if c == '{' {
					if _, i, err = scanMember(b, i); err != nil {
						return i, err
					}
				}
				continue
			}
		} else if i, err = scanScalar(b, i); err != nil {
			return i, err
		}
		// A value ended at i: it closes containers, or another follows.
		for {
			if len(open) == 0 {
				return i, nil
			}
			i = skipSpace(b, i)
			if i >= len(b) {
				return i, errSyntax
			}
			in := open[len(open)-1]
			if b[i] == in+2 {
				open = open[:len(open)-1]
				i++
				continue
			}
			if b[i] != ',' {
				return i, errSyntax
			}
			i++
			if in == '{' {
				if _, i, err = scanMember(b, skipSpace(b, i)); err != nil {
					return i, err
				}
			}
			break
		}
	}
}

// scanMember scans an object's key at b[i] and the colon after it,
// returning the offsets past the key's closing quote and past the colon.
func scanMember(b []byte, i int) (keyEnd, next int, err error) {
	if i >= len(b) || b[i] != '"' {
		return i, i, errSyntax
	}
	if keyEnd, err = scanString(b, i); err != nil {
		return keyEnd, keyEnd, err
	}
	next = skipSpace(b, keyEnd)
	if next >= len(b) || b[next] != ':' {
		return keyEnd, next, errSyntax
	}
	return keyEnd, next + 1, nil
}

// scanScalar scans a string, number, true, false or null at b[i].
func scanScalar(b []byte, i int) (int, error) {
	switch c := b[i]; {
	case c == '"':
		return scanString(b, i)
	case c == '-' || c >= '0' && c <= '9':
		return scanNumber(b, i)
	}
	for _, lit := range [...]string{"true", "false", "null"} {
		if bytes.HasPrefix(b[i:], []byte(lit)) {
			return i + len(lit), nil
		}
	}
	return i, errSyntax
}

// plain marks the bytes a string holds as they are: not its closing quote,
// not the start of an escape, not a control character.
var plain = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// scanString scans the string whose opening quote is at b[i].
func scanString(b []byte, i int) (int, error) {
	for i++; i < len(b); {
		if plain[b[i]] {
			i++
			continue
		}
		switch b[i] {
		case '"':
			return i + 1, nil
		case '\\':
			if i+1 >= len(b) {
				return i, errSyntax
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(b) || !isHex(b[i+2]) || !isHex(b[i+3]) || !isHex(b[i+4]) || !isHex(b[i+5]) {
					return i, errSyntax
				}
				i += 6
			default:
				return i, errSyntax
			}
		default: // a control character
			return i, errSyntax
		}
	}
	return i, errSyntax
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// scanNumber scans the number at b[i]: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
func scanNumber(b []byte, i int) (int, error) {
	if b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		i = skipDigits(b, i+1)
	default:
		return i, errSyntax
	}
	if i < len(b) && b[i] == '.' {
		j := skipDigits(b, i+1)
		if j == i+1 {
			return j, errSyntax
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := skipDigits(b, i)
		if j == i {
			return j, errSyntax
		}
		i = j
	}
	return i, nil
}

func skipDigits(b []byte, i int) int {
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	return i
}

// keyField is which of fieldNames[first..last] the object key raw (its
// quotes stripped, its escapes not yet decoded) names, as decoders read
// it: the field's index and true when the key decodes to the name, the
// index and false when it differs from the name only in case, so that
// Go's encoding/json still matches it to a struct field of that name; -1
// when neither. Only keys with escapes are decoded, into a buffer on the
// stack.
func keyField(raw []byte, first, last int) (int, bool) {
	var buf [maxKeyBytes]byte
	key, ok := decodeKey(buf[:0], raw)
	if !ok {
		return -1, false
	}
	for f := first; f <= last; f++ {
		if foldEqual(key, fieldNames[f]) {
			return f, string(key) == fieldNames[f]
		}
	}
	return -1, false
}

// keyIs reports whether raw, a key as written (quotes stripped), decodes
// to name exactly.
func keyIs(raw []byte, name string) bool {
	var buf [maxKeyBytes]byte
	key, ok := decodeKey(buf[:0], raw)
	return ok && string(key) == name
}

// keyFolds reports whether raw, a key as written (quotes stripped), names
// name as Go's encoding/json matches keys, case folded (match), and
// whether it decodes to name exactly (exact).
func keyFolds(raw []byte, name string) (match, exact bool) {
	var buf [maxKeyBytes]byte
	key, ok := decodeKey(buf[:0], raw)
	return ok && foldEqual(key, name), ok && string(key) == name
}

// decodeKey is raw, a key as written (quotes stripped), decoded: raw
// itself when it holds no escape, else decoded into buf; false when it
// could name no field (unescapeKey).
func decodeKey(buf, raw []byte) ([]byte, bool) {
	if bytes.IndexByte(raw, '\\') < 0 {
		return raw, true
	}
	return unescapeKey(buf, raw)
}

// maxKeyBytes bounds a decoded key that may still name a field: the
// longest name (prompt_cache_retention) has 22 letters, and a letter's
// case-folded spelling takes at most 3 bytes (the Kelvin sign, for k).
const maxKeyBytes = 3 * 22

// unescapeKey appends the decoded JSON string s (quotes stripped) to dst,
// reporting false when the key could not name a field: it outgrows dst's
// capacity, or holds an escaped surrogate, which decoders turn into a
// character that no field's name holds. s is a valid JSON string.
func unescapeKey(dst, s []byte) ([]byte, bool) {
	for i := 0; i < len(s); {
		c := s[i]
		if c != '\\' {
			if len(dst) == cap(dst) {
				return dst, false
			}
			dst = append(dst, c)
			i++
			continue
		}
		switch c = s[i+1]; c {
		case 'b':
			c = '\b'
		case 'f':
			c = '\f'
		case 'n':
			c = '\n'
		case 'r':
			c = '\r'
		case 't':
			c = '\t'
		case 'u':
			var r rune
			for _, h := range s[i+2 : i+6] {
				r = r<<4 | rune(unhex(h))
			}
			if utf16.IsSurrogate(r) || len(dst)+utf8.RuneLen(r) > cap(dst) {
				return dst, false
			}
			dst = utf8.AppendRune(dst, r)
			i += 6
			continue
		} // '"', '\\' and '/' stand for themselves
		if len(dst) == cap(dst) {
			return dst, false
		}
		dst = append(dst, c)
		i += 2
	}
	return dst, true
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c >= 'a':
		return c - 'a' + 10
	}
	return c - 'A' + 10
}

// foldEqual reports whether key equals name, a lower-case ASCII name,
// under encoding/json's case folding (Unicode simple folding, as its
// foldName does). Outside ASCII only two characters fold to an ASCII
// letter: ſ (U+017F) to s and the Kelvin sign (U+212A) to k;
// TestFoldToASCII holds the Unicode tables to that.
func foldEqual(key []byte, name string) bool {
	if len(key) < len(name) || len(key) > 3*len(name) {
		return false
	}
	j := 0
	for i := 0; i < len(key); j++ {
		if j == len(name) {
			return false
		}
		c := key[i]
		if c < utf8.RuneSelf {
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			if c != name[j] {
				return false
			}
			i++
			continue
		}
		r, n := utf8.DecodeRune(key[i:])
		if !(r == '\u017f' && name[j] == 's' || r == '\u212a' && name[j] == 'k') {
			return false
		}
		i += n
	}
	return j == len(name)
}

// eachMember calls f with each member of the valid JSON object obj, its
// key as written (quotes stripped) and its value, in order, until f
// returns false; it reports whether f returned true for every member.
func eachMember(obj []byte, f func(key, value []byte) bool) bool {
	i := skipSpace(obj, 1)
	if obj[i] == '}' {
		return true
	}
	for { // obj is a valid object, so the scans cannot fail
		kEnd, next, _ := scanMember(obj, i)
		key := obj[i+1 : kEnd-1]
		i = skipSpace(obj, next)
		vEnd, _ := scanValue(obj, i)
		if !f(key, obj[i:vEnd]) {
			return false
		}
		i = skipSpace(obj, vEnd)
		if obj[i] == '}' {
			return true
		}
		i = skipSpace(obj, i+1) // past the comma
	}
}

// eachElement calls f with each element of the valid JSON array a, in
// order, until f returns false; it reports whether f returned true for
// every element.
func eachElement(a []byte, f func(e []byte) bool) bool {
	i := skipSpace(a, 1)
	if a[i] == ']' {
		return true
	}
	for { // a is a valid array, so the scans cannot fail
		end, _ := scanValue(a, i)
		if !f(a[i:end]) {
			return false
		}
		i = skipSpace(a, end)
		if a[i] == ']' {
			return true
		}
		i = skipSpace(a, i+1) // past the comma
	}
}
