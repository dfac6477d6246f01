package openai

import (
	"bytes"
	"errors"
)

// A validating JSON scanner. Requests are checked and their fields found
// in one pass, without building values: a chat request is mostly prompt
// text, and this scanner crosses a string at several times the speed of
// encoding/json's state machine. It accepts exactly what json.Valid
// accepts (FuzzScanMatchesJSONValid holds it to that).

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
