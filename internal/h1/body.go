package h1

// A request's body as the handler reads it: what starts the watch for the
// client leaving once it is all read, the 100 Continue sent before its
// first read, and what is read and dropped of a body the handler left.

import (
	"errors"
	"io"
	"net/http"
	"time"
)

// requestBody is a request's body as the handler reads it. It learns when
// the body is all read, which starts the watch for the client leaving, and
// sends 100 Continue before the first read when the client waits for it.
type requestBody struct {
	c   *conn
	w   *response
	req *http.Request // as the handler has it
	// parsed is req as the parser made it, before it had a context: a
	// trailer the request did not declare is kept there. It is let go
	// once the body is read, as a stream holds its body for its life.
	parsed *http.Request
	src    io.ReadCloser
	remain int64       // bytes of a Content-Length body not yet read; -1 for chunked
	done   bool        // read to its end
	err    error       // the error reading ended with
	ctx    *reqContext // ended when the client leaves, once the body is read
}

func (b *requestBody) Read(p []byte) (int, error) {
	if b.done {
		return 0, io.EOF
	}
	if b.err != nil {
		return 0, b.err
	}
	if b.w.expectContinue && !b.w.sent {
		b.w.expectContinue = false
		if _, err := io.WriteString(b.c.rwc, "HTTP/1.1 100 Continue\r\n\r\n"); err != nil {
			b.err = err
			return 0, err
		}
	}
	n, err := b.src.Read(p)
	if b.remain > 0 {
		b.remain -= int64(n)
	}
	if errors.Is(err, io.EOF) || b.remain == 0 {
		b.done = true
		if b.req.Trailer == nil {
			b.req.Trailer = b.parsed.Trailer
		}
		b.parsed = nil
		b.c.startWatch(b.ctx)
		if n > 0 {
			err = nil
		} else {
			err = io.EOF
		}
	} else if err != nil {
		b.err = err
	}
	return n, err
}

func (b *requestBody) Close() error { return nil }

// drain reads what the handler left of the body, up to maxDrain, and
// reports whether the connection can carry the next request.
func (b *requestBody) drain() bool {
	if b.err != nil {
		return false
	}
	b.c.rwc.SetReadDeadline(time.Now().Add(drainTimeout))
	defer b.c.rwc.SetReadDeadline(time.Time{})
	n, err := io.CopyN(io.Discard, b.src, maxDrain+1)
	return n <= maxDrain && errors.Is(err, io.EOF)
}
