package proxy

// The relay of a binary event stream (AWS's
// application/vnd.amazon.eventstream, which Bedrock's ConverseStream
// answers in): messages each led by their total length, cut whole from
// the upstream's bytes and handed, each as one event, to the call's
// Provider, which reads them as chat chunks. Flushing, timing and the
// stream's end are as for SSE (stream.go).

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"

	"gitea.mynodes.xyz/ilker/llmgw/internal/openai"
)

// Bounds of one event-stream message: its prelude (total and headers'
// lengths and their CRC) and its own CRC make 16 bytes, and no message
// passes maxEventLine.
const minMessage = 16

var errBadMessage = errors.New("upstream sent an event-stream message of impossible length")

// frameMessages reads src's messages and hands each to ob as soon as it
// is whole, as frameEvents does SSE events. A stream that ends inside a
// message is broken.
func frameMessages(dog *watchdog, sw *streamWriter, src pieceReader, ob *observer) (readErr, clientErr error) {
	var buf []byte // what is read of the messages not yet handed on
	for {
		for len(buf) >= 4 {
			n := binary.BigEndian.Uint32(buf)
			if n < minMessage || n > maxEventLine {
				return errBadMessage, nil
			}
			if len(buf) < int(n) {
				break
			}
			dog.event()
			if err := ob.event(openai.Event{Data: buf[:n:n]}); err != nil {
				return nil, err
			}
			buf = buf[n:]
		}
		if len(buf) == 0 {
			buf = nil // the next piece starts a fresh buffer
		}
		piece, err := src.next(math.MaxInt, false)
		if errors.Is(err, errWouldWait) {
			if err := sw.flush(); err != nil {
				return nil, err
			}
			piece, err = src.next(math.MaxInt, true)
		}
		if err != nil {
			if errors.Is(err, io.EOF) && len(buf) > 0 {
				err = fmt.Errorf("upstream stream ended inside a message of %d bytes read: %w", len(buf), io.ErrUnexpectedEOF)
			}
			return err, nil
		}
		// The piece is valid until the next read: it is copied.
		buf = append(buf, piece...)
	}
}
