package scrape

// The words of the Prometheus text format as Parse reads them: metric and
// label names (quoted runs among them), label values, numbers, a TYPE
// line's type, and the blanks between them, each read as expfmt reads it.

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
)

// readName reads a metric name (metric true) or a label name from line[i:]
// as expfmt does: plain name characters, among which a double-quoted run
// may hold any byte, with \\, \" and \n as escapes. It returns the name,
// which may be p.buf's and is valid until the next call, and the index
// just past it. An empty name is one whose first byte cannot begin a name.
func (p *parser) readName(line []byte, i int, metric bool) ([]byte, int, error) {
	if i == len(line) || !isNameStart(line[i], metric) {
		return nil, i, nil
	}
	start := i
	for i < len(line) && isNameByte(line[i], metric) && line[i] != '"' {
		i++
	}
	if i == len(line) || line[i] != '"' {
		return line[start:i], i, nil
	}
	p.buf = append(p.buf[:0], line[start:i]...)
	quoted, escaped := false, false
	for {
		c := line[i]
		switch {
		case escaped:
			switch c {
			case '\\', '"':
				p.buf = append(p.buf, c)
			case 'n':
				p.buf = append(p.buf, '\n')
			default:
				return nil, i, fmt.Errorf("invalid escape sequence '\\%c'", c)
			}
			escaped = false
		case c == '"':
			quoted = !quoted
			if !quoted {
				return p.buf, i + 1, nil
			}
		case c == '\\':
			escaped = true
		default:
			p.buf = append(p.buf, c)
		}
		i++
		if i == len(line) {
			if quoted {
				return nil, i, fmt.Errorf("name %q not closed", p.buf)
			}
			return p.buf, i, nil
		}
		if !quoted && !isNameByte(line[i], metric) {
			return p.buf, i, nil
		}
	}
}

// readLabelValue reads a label value from line[i:], just past its opening
// quote, as expfmt does: \\, \" and \n are the escapes. It returns the
// value, which may be p.buf's and is valid until the next call, and the
// index just past the closing quote.
func (p *parser) readLabelValue(line []byte, i int) ([]byte, int, error) {
	start := i
	for i < len(line) && line[i] != '"' && line[i] != '\\' {
		i++
	}
	if i < len(line) && line[i] == '"' {
		return line[start:i], i + 1, nil
	}
	p.buf = append(p.buf[:0], line[start:i]...)
	for ; i < len(line); i++ {
		switch c := line[i]; c {
		case '"':
			return p.buf, i + 1, nil
		case '\\':
			i++
			if i == len(line) {
				break
			}
			switch c := line[i]; c {
			case '\\', '"':
				p.buf = append(p.buf, c)
			case 'n':
				p.buf = append(p.buf, '\n')
			default:
				return nil, i, fmt.Errorf("invalid escape sequence '\\%c'", c)
			}
		default:
			p.buf = append(p.buf, c)
		}
	}
	return nil, i, fmt.Errorf("label value %q not closed", p.buf)
}

// parseBlockSize is a block_size label's value as a block size: a whole
// number from 1 to maxBlockSize, else 0.
func parseBlockSize(b []byte) int {
	n, err := strconv.Atoi(string(b))
	if err != nil || n < 1 || n > maxBlockSize {
		return 0
	}
	return n
}

// parseFloat reads a sample value as expfmt does: Go's float syntax, less
// hexadecimal exponents and digit separators.
func parseFloat(b []byte) (float64, error) {
	if bytes.ContainsAny(b, "pP_") {
		return 0, strconv.ErrSyntax
	}
	return strconv.ParseFloat(string(b), 64)
}

// typeKind reads a TYPE line's type as expfmt does: backslashes dropped
// (expfmt reads the rest of the line as if to unescape it, but keeps
// nothing of an escape), then in any case by strings.ToUpper. It reports
// whether the type is a summary or histogram kind, and whether it is a type
// at all.
func typeKind(b []byte) (distribution, ok bool) {
	var s [len("GAUGE_HISTOGRAM")]byte
	upper := s[:0]
	for _, c := range b {
		if c >= 0x80 {
			upper = []byte(strings.ToUpper(string(bytes.ReplaceAll(b, []byte{'\\'}, nil))))
			break
		}
		if c == '\\' {
			continue
		}
		if len(upper) == len(s) {
			return false, false
		}
		if 'a' <= c && c <= 'z' {
			c -= 'a' - 'A'
		}
		upper = append(upper, c)
	}
	switch string(upper) {
	case "COUNTER", "GAUGE", "UNTYPED":
		return false, true
	case "SUMMARY", "HISTOGRAM", "GAUGE_HISTOGRAM", "GAUGEHISTOGRAM":
		return true, true
	}
	return false, false
}

// skipBlanks is the index of the first byte at or after i that is not a
// space or a tab.
func skipBlanks(line []byte, i int) int {
	for i < len(line) && isBlank(line[i]) {
		i++
	}
	return i
}

func isBlank(c byte) bool { return c == ' ' || c == '\t' }

// isNameStart reports whether c may begin a metric name (metric true) or a
// label name, quoted or not.
func isNameStart(c byte, metric bool) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '_' || c == '"' || metric && c == ':'
}

// isNameByte reports whether c may continue a name outside quotes.
func isNameByte(c byte, metric bool) bool {
	return isNameStart(c, metric) || '0' <= c && c <= '9'
}
