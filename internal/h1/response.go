package h1

// The response writer. A response gathers what the handler writes in a
// pooled buffer and sends it, head and body in one write, when the handler
// flushes, when the buffer fills, or when the handler returns. A handler
// that returns having written all of its body without flushing gets a
// Content-Length; one that flushes first gets a chunked body. Between
// flushes a response holds no buffer at all.

import (
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

type response struct {
	c      *conn
	req    *http.Request
	body   *requestBody // req's, whatever the handler makes of req.Body
	header http.Header

	status        int   // 0 until WriteHeader
	contentLength int64 // from the handler's Content-Length header; -1 without one
	written       int64 // body bytes the handler wrote
	buf           *[]byte
	sent          bool // the head is out
	chunked       bool
	noBody        bool // HEAD, or a status that has no body
	finished      bool
	// close is set when the connection ends after this response; the
	// head says so if it is not out yet.
	close bool
	// expectContinue reports whether the client waits for a 100 Continue
	// before it sends the body, not yet sent.
	expectContinue bool
	// writeDeadline reports whether the handler set a write deadline,
	// which ends with the response.
	writeDeadline bool
	err           error // the first write error: the connection is done
}

var (
	_ http.ResponseWriter = (*response)(nil)
	_ http.Flusher        = (*response)(nil)
	_ interface {
		SetReadDeadline(time.Time) error
		SetWriteDeadline(time.Time) error
	} = (*response)(nil) // for http.ResponseController
)

func (w *response) Header() http.Header { return w.header }

func (w *response) WriteHeader(code int) {
	if w.status != 0 || w.finished {
		return
	}
	if code < 100 || code > 999 {
		panic("h1: invalid WriteHeader code " + strconv.Itoa(code))
	}
	if code < 200 {
		return // informational answers are not sent
	}
	w.status = code
	w.noBody = w.req.Method == http.MethodHead || code == http.StatusNoContent || code == http.StatusNotModified
	if cl := w.header.Get("Content-Length"); cl != "" {
		if n, err := strconv.ParseInt(cl, 10, 64); err == nil && n >= 0 {
			w.contentLength = n
		}
	}
}

func (w *response) Write(p []byte) (int, error) {
	if err := w.begin(len(p)); err != nil {
		return 0, err
	}
	if w.noBody {
		return len(p), nil // a HEAD answer's body is not sent
	}
	if len(p) == 0 {
		return 0, nil
	}
	w.written += int64(len(p))
	if w.buf != nil && len(*w.buf)+len(p) <= writeBufSize || w.buf == nil && len(p) < writeBufSize {
		w.gather(p)
		return len(p), nil
	}
	// Too much to gather: send what is held and p with it.
	if err := w.send(p, false); err != nil {
		return 0, err
	}
	return len(p), nil
}

// WriteString is Write without the copy a conversion would make.
func (w *response) WriteString(s string) (int, error) {
	n := len(s)
	if err := w.begin(n); err != nil {
		return 0, err
	}
	if w.noBody {
		return n, nil
	}
	w.written += int64(n)
	for len(s) > 0 {
		if w.buf != nil && len(*w.buf) == writeBufSize {
			if err := w.send(nil, false); err != nil {
				return 0, err
			}
		}
		w.acquire()
		k := min(len(s), writeBufSize-len(*w.buf))
		*w.buf = append(*w.buf, s[:k]...)
		s = s[k:]
	}
	return n, nil
}

// begin readies the response for n more body bytes.
func (w *response) begin(n int) error {
	if err := w.ready(); err != nil {
		return err
	}
	switch {
	case w.noBody && w.req.Method != http.MethodHead:
		return http.ErrBodyNotAllowed
	case w.contentLength >= 0 && w.written+int64(n) > w.contentLength:
		return http.ErrContentLength
	}
	return nil
}

// ready sets the status if the handler has not, and reports whether the
// response can still be written.
func (w *response) ready() error {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	switch {
	case w.err != nil:
		return w.err
	case w.finished:
		return http.ErrHandlerTimeout
	}
	return nil
}

func (w *response) acquire() {
	if w.buf == nil {
		w.buf = writers.Get().(*[]byte)
	}
}

func (w *response) gather(p []byte) {
	w.acquire()
	*w.buf = append(*w.buf, p...)
}

// Flush sends what the handler has written.
func (w *response) Flush() { w.FlushError() }

// FlushError sends what the handler has written, and reports why it could
// not: the client is gone.
func (w *response) FlushError() error {
	if err := w.ready(); err != nil {
		return err
	}
	return w.send(nil, false)
}

// SetReadDeadline sets when reading the request's body times out, for
// http.ResponseController; zero means never. Once the body is all read
// it has nothing left to bound and is ignored: the watch for the client
// leaving, which reads on, is never bounded by it.
func (w *response) SetReadDeadline(t time.Time) error {
	if w.body.done || w.finished {
		return nil
	}
	return w.c.rwc.SetReadDeadline(t)
}

// SetWriteDeadline sets when writing the response times out, for
// http.ResponseController; zero means never. A write that times out
// fails, as does every write after it, and the connection closes after
// the handler returns; a write the response only gathers does not wait
// and succeeds. The deadline ends with the response.
func (w *response) SetWriteDeadline(t time.Time) error {
	if w.finished {
		return nil
	}
	w.writeDeadline = true
	return w.c.rwc.SetWriteDeadline(t)
}

// finish completes the response once the handler has returned.
func (w *response) finish() {
	if w.finished {
		return
	}
	if w.ready() == nil {
		w.send(nil, true)
	}
	w.finished = true
	if !w.noBody && w.contentLength >= 0 && w.written < w.contentLength {
		w.close = true // the body is short of its length: nothing can follow it
	}
}

// send writes the head if it is not out, what is gathered, and p, in one
// write. With last, it ends the body.
func (w *response) send(p []byte, last bool) error {
	if w.err != nil {
		return w.err
	}
	c := w.c
	vec := c.vec[:0]
	var held []byte
	if w.buf != nil {
		held = *w.buf
	}
	n := len(held) + len(p)
	var head *[]byte // pooled, as a connection sends one head for many writes
	if !w.sent {
		w.frame(n, last)
		head = writers.Get().(*[]byte)
		*head = w.appendHead(*head, held, p)
		vec = append(vec, *head)
		w.sent = true
	}
	if n > 0 && !w.noBody {
		if w.chunked {
			vec = append(vec, appendChunkSize(c.chunk[:0], n))
		}
		if len(held) > 0 {
			vec = append(vec, held)
		}
		if len(p) > 0 {
			vec = append(vec, p)
		}
		if w.chunked {
			vec = append(vec, crlf)
		}
	}
	if last && w.chunked {
		vec = append(vec, lastChunk)
	}
	if len(vec) > 0 {
		c.out = vec
		_, w.err = c.out.WriteTo(c.rwc)
		clear(c.vec[:])
	}
	for _, b := range [...]*[]byte{head, w.buf} {
		if b != nil {
			*b = (*b)[:0]
			writers.Put(b)
		}
	}
	w.buf = nil
	return w.err
}

var (
	crlf      = []byte("\r\n")
	lastChunk = []byte("0\r\n\r\n")
)

// frame decides how the body is delimited, when the head goes out with n
// bytes of it: by the handler's Content-Length, by a length of its own when
// the whole body is in hand, else in chunks — or, for an HTTP/1.0 client,
// by closing the connection.
func (w *response) frame(n int, last bool) {
	switch {
	case w.noBody || w.contentLength >= 0:
	case last:
		w.contentLength = int64(n)
	case w.req.ProtoAtLeast(1, 1):
		w.chunked = true
	default:
		w.close = true
	}
	if hasToken(w.header.Get("Connection"), "close") || w.c.srv.inShutdown.Load() {
		w.close = true
	}
}

// appendHead appends the status line and headers; start is the body's
// beginning, for a Content-Type sniffed when the handler set none.
func (w *response) appendHead(b, held, p []byte) []byte {
	b = appendStatusLine(b, w.status)
	for k, vv := range w.header {
		switch k {
		case "Content-Length", "Transfer-Encoding", "Connection":
			continue
		}
		for _, v := range vv {
			b = appendField(b, k, v)
		}
	}
	if _, ok := w.header["Content-Type"]; !ok && !w.noBody && len(held)+len(p) > 0 {
		start := held
		if len(start) == 0 {
			start = p
		}
		b = appendField(b, "Content-Type", http.DetectContentType(start))
	}
	if _, ok := w.header["Date"]; !ok {
		b = append(b, "Date: "...)
		b = append(b, date()...)
		b = append(b, crlf...)
	}
	switch {
	case w.chunked:
		b = append(b, "Transfer-Encoding: chunked\r\n"...)
	case w.contentLength >= 0 && w.status != http.StatusNoContent:
		b = append(b, "Content-Length: "...)
		b = appendInt(b, w.contentLength)
		b = append(b, crlf...)
	}
	switch {
	case w.close:
		b = append(b, "Connection: close\r\n"...)
	case !w.req.ProtoAtLeast(1, 1):
		b = append(b, "Connection: keep-alive\r\n"...)
	}
	return append(b, crlf...)
}

// appendField appends one header line; a line break in a value, which
// would start a header of its own, becomes a space.
func appendField(b []byte, k, v string) []byte {
	b = append(b, k...)
	b = append(b, ": "...)
	if strings.ContainsAny(v, "\r\n") {
		v = strings.NewReplacer("\r", " ", "\n", " ").Replace(v)
	}
	b = append(b, v...)
	return append(b, crlf...)
}

func appendStatusLine(b []byte, code int) []byte {
	b = append(b, "HTTP/1.1 "...)
	b = appendInt(b, int64(code))
	b = append(b, ' ')
	if text := http.StatusText(code); text != "" {
		b = append(b, text...)
	} else {
		b = append(b, "status code "...)
		b = appendInt(b, int64(code))
	}
	return append(b, crlf...)
}

func appendInt(b []byte, n int64) []byte { return strconv.AppendInt(b, n, 10) }

func appendChunkSize(b []byte, n int) []byte {
	b = strconv.AppendInt(b, int64(n), 16)
	return append(b, crlf...)
}

// date is the Date header's value, formatted once a second.
func date() string {
	now := time.Now()
	if d := lastDate.Load(); d != nil && d.unix == now.Unix() {
		return d.text
	}
	d := &dateText{unix: now.Unix(), text: now.UTC().Format(http.TimeFormat)}
	lastDate.Store(d)
	return d.text
}

type dateText struct {
	unix int64
	text string
}

var lastDate atomic.Pointer[dateText]
