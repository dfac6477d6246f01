package openai

// Framing a server-sent event stream as its bytes arrive, after the
// specification's rules (WHATWG HTML, "Parsing an event stream"): lines end
// in LF, CRLF or a lone CR; a line starting with a colon is a comment; the
// data lines of one event are joined with LF; a blank line ends the event,
// and an event without data is no event. Nothing of the stream is held
// beyond the event being read, and an event that lies whole in one piece
// is handed on without a copy.

import (
	"bytes"
	"errors"
	"io"
)

// ErrEventTooLong is a stream whose line, or event's data, runs past a
// Framer's Max.
var ErrEventTooLong = errors.New("server-sent event longer than the bound")

// Event is one server-sent event.
type Event struct {
	// Type is the event's "event" field: empty for the default, "message".
	Type []byte
	// Data is its data lines joined by "\n".
	Data []byte
}

// Framer reads server-sent events from a stream fed to it a piece at a
// time. Fields other than "data" and "event" ("id", "retry", the unknown)
// are read and ignored, as are comments. The bytes are taken as they
// come: the text is not decoded (invalid UTF-8 passes unchanged), but a
// byte order mark that starts the stream is dropped. Its zero value is
// ready; a Framer reads one stream.
type Framer struct {
	// Max bounds a line and an event's data, in bytes; past it the stream
	// fails with ErrEventTooLong. Zero means no bound.
	Max int

	line    []byte // a line begun in an earlier piece, without its end
	data    []byte // the event's data, once it is not in a piece or in line
	typ     []byte // the event's type
	cur     []byte // the event's data so far: in a piece, in line or in data
	hasData bool   // a data field is read: the event will be dispatched
	owned   bool   // cur is data
	begun   bool   // a field of the event is read
	skipLF  bool   // the last piece ended in CR: an LF that starts the next is its line end
	lines   int    // lines read
	err     error  // ErrEventTooLong once the stream has failed
}

// Next reads *piece up to the end of the next event and returns it, with
// *piece holding what follows; false, once *piece is used up, when no
// event ends in it. The next piece of the stream is then given to Next in
// the same way. An event is returned as soon as the blank line ending it
// is read: no more of the stream is needed. Its Type and Data are valid
// until the next call, and may point into the piece.
func (f *Framer) Next(piece *[]byte) (Event, bool, error) {
	if f.err != nil {
		return Event{}, false, f.err
	}
	p := *piece
	lf := -1 // where p's first LF is; see cut
	for {
		if f.skipLF && len(p) > 0 {
			f.skipLF = false
			if p[0] == '\n' {
				p = p[1:]
			}
		}
		line, rest, ok := f.cut(p, &lf)
		if !ok {
			// The piece will be gone, and line reused: the event's data
			// so far must be copied out of them.
			f.keep()
			if f.Max > 0 && len(f.line)+len(p) > f.Max {
				return f.fail()
			}
			f.line = append(f.line, p...)
			*piece = p[len(p):]
			return Event{}, false, nil
		}
		p = rest
		if len(f.line) > 0 {
			line = append(f.line, line...)
			f.line = line[:0]
		}
		if f.Max > 0 && len(line) > f.Max {
			return f.fail()
		}
		ended := f.field(line)
		if f.err != nil {
			return f.fail()
		}
		if ended {
			*piece = p
			return f.dispatch(), true, nil
		}
	}
}

// End ends the stream. An event begun and not ended by a blank line is
// returned when it has data: the specification would drop it, but a
// server that ends its last event without the blank line has still sent
// it. The error is io.ErrUnexpectedEOF when the stream ended inside an
// event (a field read since the last blank line), whether or not the
// event is returned, for a reader that holds its server to the
// specification.
func (f *Framer) End() (Event, bool, error) {
	if f.err != nil {
		return Event{}, false, f.err
	}
	if len(f.line) > 0 {
		f.field(f.line)
		f.line = f.line[:0]
		if f.err != nil {
			return f.fail()
		}
	}
	var err error
	if f.begun {
		err = io.ErrUnexpectedEOF
	}
	if !f.hasData {
		return Event{}, false, err
	}
	return f.dispatch(), true, err
}

// Lines is how many lines the framer has read: blank lines and comments
// too, so that a reader can take each as a sign of life.
func (f *Framer) Lines() int { return f.lines }

// cut splits p at its first line end. A CR that ends p ends its line,
// and an LF that starts the next piece then belongs to it. *lf carries
// where p's first LF is, as its distance from p's end (0: p holds none;
// -1: not yet looked for), from one call to the next on the tails of one
// piece, so that each byte is scanned for an LF once, however the lines
// end: a piece of lines ended by lone CRs is not searched to its end
// again at every line.
func (f *Framer) cut(p []byte, lf *int) (line, rest []byte, ok bool) {
	// Two byte scans, each stopping at the first line end, beat
	// bytes.IndexAny, which builds a set on every call.
	if *lf < 0 {
		*lf = 0
		if i := bytes.IndexByte(p, '\n'); i >= 0 {
			*lf = len(p) - i
		}
	}
	i, end := -1, len(p)
	if *lf > 0 {
		i = len(p) - *lf
		end = i
	}
	if cr := bytes.IndexByte(p[:end], '\r'); cr >= 0 {
		switch {
		case cr+1 == len(p):
			f.skipLF = true
			return p[:cr], nil, true
		case p[cr+1] == '\n':
			*lf = -1
			return p[:cr], p[cr+2:], true
		}
		return p[:cr], p[cr+1:], true
	}
	if i < 0 {
		return nil, nil, false
	}
	*lf = -1
	return p[:i], p[i+1:], true
}

// bom is the UTF-8 byte order mark.
const bom = "\xEF\xBB\xBF"

// field reads one line, without its end, and reports whether it ends an
// event to dispatch.
func (f *Framer) field(line []byte) bool {
	if f.lines == 0 {
		line = bytes.TrimPrefix(line, []byte(bom))
	}
	f.lines++
	if len(line) == 0 {
		if !f.hasData {
			// A blank line after nothing, or after fields without data,
			// dispatches nothing.
			f.typ, f.begun = f.typ[:0], false
			return false
		}
		return true
	}
	if line[0] == ':' {
		return false
	}
	f.begun = true
	name, value := line, []byte(nil)
	if i := bytes.IndexByte(line, ':'); i >= 0 {
		name, value = line[:i], line[i+1:]
		if len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
	}
	switch string(name) {
	case "data":
		if !f.hasData {
			f.cur, f.hasData = value, true
			break
		}
		f.keep()
		if f.Max > 0 && len(f.data)+1+len(value) > f.Max {
			f.err = ErrEventTooLong
			break
		}
		f.data = append(append(f.data, '\n'), value...)
		f.cur = f.data
	case "event":
		f.typ = append(f.typ[:0], value...)
	}
	return false
}

// keep copies the event's data so far into the framer's own buffer.
func (f *Framer) keep() {
	if f.hasData && !f.owned {
		f.data = append(f.data[:0], f.cur...)
		f.cur, f.owned = f.data, true
	}
}

// dispatch is the event read, and makes ready for the next.
func (f *Framer) dispatch() Event {
	ev := Event{Type: f.typ, Data: f.cur}
	f.typ, f.cur, f.data = f.typ[:0], nil, f.data[:0]
	f.hasData, f.owned, f.begun = false, false, false
	return ev
}

func (f *Framer) fail() (Event, bool, error) {
	f.err = ErrEventTooLong
	return Event{}, false, f.err
}
