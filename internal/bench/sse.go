package bench

// Reading a server-sent event stream one event at a time, as the bytes
// arrive: lines end in LF, CRLF or a lone CR; lines starting with a colon
// are comments; data lines of one event are joined with newlines; a blank
// line ends the event. Nothing of the body is held beyond the current
// event, so timing an event is timing its arrival.

import (
	"bufio"
	"bytes"
	"io"
)

// maxEventBytes bounds one SSE line. A streamed chunk is a few hundred
// bytes; the final usage chunk a little more. A megabyte leaves room for a
// server that sends a whole answer in one event.
const maxEventBytes = 1 << 20

// Event is one server-sent event. Data is valid only until the next call
// to Next.
type Event struct {
	Name string // the event field; empty for the default "message"
	Data []byte
}

// EventReader reads events from a stream.
type EventReader struct {
	sc     *bufio.Scanner
	skipLF bool   // the last line ended in CR: a following LF belongs to it
	data   []byte // the event being read
	name   string
}

// NewEventReader reads events from r.
func NewEventReader(r io.Reader) *EventReader {
	er := &EventReader{}
	er.sc = bufio.NewScanner(r)
	er.sc.Buffer(make([]byte, 0, 4096), maxEventBytes)
	er.sc.Split(er.splitLine)
	return er
}

// splitLine splits at LF, CRLF or CR. A CR at the end of what has arrived
// ends the line at once (so no event waits for the next byte), and an LF
// that then follows is dropped.
func (er *EventReader) splitLine(data []byte, atEOF bool) (int, []byte, error) {
	if er.skipLF && len(data) > 0 {
		er.skipLF = false
		if data[0] == '\n' {
			return 1, nil, nil
		}
	}
	// Two byte scans, each stopping at the first line end, beat
	// bytes.IndexAny, which builds a set on every call.
	i := bytes.IndexByte(data, '\n')
	end := len(data)
	if i >= 0 {
		end = i
	}
	if cr := bytes.IndexByte(data[:end], '\r'); cr >= 0 {
		i = cr
	}
	if i >= 0 {
		if data[i] == '\n' {
			return i + 1, data[:i], nil
		}
		if i+1 < len(data) {
			if data[i+1] == '\n' {
				return i + 2, data[:i], nil
			}
			return i + 1, data[:i], nil
		}
		er.skipLF = true
		return i + 1, data[:i], nil
	}
	if atEOF && len(data) > 0 {
		return len(data), data, nil
	}
	return 0, nil, nil
}

// Next reads the next event. It returns io.EOF when the stream ends
// cleanly between events, io.ErrUnexpectedEOF when it ends inside one,
// and any read error as it comes.
func (er *EventReader) Next() (Event, error) {
	er.data = er.data[:0]
	er.name = ""
	started := false // some field of this event has been seen
	hasData := false
	for er.sc.Scan() {
		line := er.sc.Bytes()
		if len(line) == 0 {
			if hasData {
				return Event{Name: er.name, Data: er.data}, nil
			}
			// A blank line after nothing, or after fields without data,
			// dispatches nothing.
			er.name = ""
			started = false
			continue
		}
		if line[0] == ':' {
			continue // comment
		}
		started = true
		field, value := line, []byte(nil)
		if i := bytes.IndexByte(line, ':'); i >= 0 {
			field, value = line[:i], line[i+1:]
			if len(value) > 0 && value[0] == ' ' {
				value = value[1:]
			}
		}
		switch string(field) {
		case "data":
			if hasData {
				er.data = append(er.data, '\n')
			}
			er.data = append(er.data, value...)
			hasData = true
		case "event":
			er.name = string(value)
		}
	}
	if err := er.sc.Err(); err != nil {
		return Event{}, err
	}
	if started {
		return Event{}, io.ErrUnexpectedEOF
	}
	return Event{}, io.EOF
}
