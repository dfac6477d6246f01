package bench

// Reading a server-sent event stream one event at a time, as the bytes
// arrive, with the gateway's own framer (openai.Framer): lines end in LF,
// CRLF or a lone CR; lines starting with a colon are comments; data lines
// of one event are joined with newlines; a blank line ends the event.
// Nothing of the body is held beyond the current event, so timing an
// event is timing its arrival.

import (
	"errors"
	"io"

	"gitea.mynodes.xyz/ilker/llmgw/internal/openai"
)

// maxEventBytes bounds one SSE line, and one event's data. A streamed
// chunk is a few hundred bytes; the final usage chunk a little more. A
// megabyte leaves room for a server that sends a whole answer in one
// event.
const maxEventBytes = 1 << 20

// readBufSize is the read buffer: a few events of a few hundred bytes.
const readBufSize = 4 << 10

// Event is one server-sent event. Data is valid only until the next call
// to Next.
type Event struct {
	Name string // the event field; empty for the default "message"
	Data []byte
}

// EventReader reads events from a stream.
type EventReader struct {
	r       io.Reader
	f       openai.Framer
	buf     []byte
	piece   []byte // read and not yet framed
	readErr error  // the read error that ends the stream, once piece is framed
	err     error  // what Next returns from now on
}

// NewEventReader reads events from r.
func NewEventReader(r io.Reader) *EventReader {
	return &EventReader{r: r, f: openai.Framer{Max: maxEventBytes}, buf: make([]byte, readBufSize)}
}

// maxEmptyReads is how many reads in a row may return nothing before the
// stream fails with io.ErrNoProgress, as bufio.Scanner counts them.
const maxEmptyReads = 100

// Next reads the next event. It returns io.EOF when the stream ends
// cleanly between events, io.ErrUnexpectedEOF when it ends inside one
// (an event with no blank line after it is not taken), and any read error
// as it comes.
func (er *EventReader) Next() (Event, error) {
	empty := 0
	for er.err == nil {
		ev, ok, err := er.f.Next(&er.piece)
		switch {
		case err != nil:
			er.err = err
		case ok:
			return Event{Name: string(ev.Type), Data: ev.Data}, nil
		case er.readErr != nil:
			er.err = er.end()
		default:
			n, err := er.r.Read(er.buf)
			er.piece, er.readErr = er.buf[:n], err
			if empty++; n > 0 {
				empty = 0
			} else if err == nil && empty >= maxEmptyReads {
				er.readErr = io.ErrNoProgress
			}
		}
	}
	return Event{}, er.err
}

// end is what ends a stream whose reads ended with er.readErr.
func (er *EventReader) end() error {
	if !errors.Is(er.readErr, io.EOF) {
		return er.readErr
	}
	if _, _, err := er.f.End(); err != nil {
		return err
	}
	return io.EOF
}
