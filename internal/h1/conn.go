package h1

// A client connection: the loop that reads its requests one after
// another, hands each to the handler with its response, watches for the
// client leaving while the handler works, and closes the connection when
// it is done. The read deadlines a request is held to are set here: the
// idle wait's, the headers', and the body's in their place.

import (
	"bufio"
	"errors"
	"io"
	"math"
	"net"
	"net/http"
	"runtime/debug"
	"sync/atomic"
	"time"

	"gitea.mynodes.xyz/ilker/llmgw/internal/openai"
)

// A connection is idle while it waits for a request and reads it, active
// while a handler serves one; Shutdown closes it only when idle.
const (
	stateIdle int32 = iota
	stateActive
	stateClosed
)

// conn is one client connection.
type conn struct {
	srv      *Server
	rwc      net.Conn
	remote   string
	accepted time.Time
	state    atomic.Int32
	served   atomic.Bool // whether a request has been read

	r  connReader
	br *bufio.Reader // reads r; nil while a handler waits with the body read

	// afterPost reports whether the last request was a POST, after whose
	// body a client may send stray line breaks.
	afterPost bool

	watch watch // for the client leaving, while a handler runs

	// Scratch for writing responses, reused from one to the next.
	chunk [18]byte    // a chunk's size line
	vec   [5][]byte   // what one write sends
	out   net.Buffers // vec, as written
}

// connReader reads the connection for its bufio.Reader: it bounds what a
// request's headers may take, and hands back first the byte the watch
// read when the client sent its next request early.
type connReader struct {
	c       net.Conn
	remain  int64 // bytes left to read before the headers are too long
	peek    byte
	hasPeek bool
}

var errHeadersTooLong = errors.New("request headers too long")

func (r *connReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if r.remain <= 0 {
		return 0, errHeadersTooLong
	}
	if int64(len(p)) > r.remain {
		p = p[:r.remain]
	}
	if r.hasPeek {
		p[0], r.hasPeek = r.peek, false
		r.remain--
		return 1, nil
	}
	n, err := r.c.Read(p)
	r.remain -= int64(n)
	return n, err
}

func (c *conn) serve() {
	defer func() {
		c.rwc.Close()
		if c.br != nil {
			c.releaseReader()
		}
		c.watch.close(c)
		c.srv.trackConn(c, false)
	}()
	c.r.c = c.rwc
	if a := c.rwc.RemoteAddr(); a != nil {
		c.remote = a.String()
	}
	for first := true; ; first = false {
		req, ok := c.readRequest(first)
		if !ok {
			return
		}
		c.served.Store(true)
		if !c.state.CompareAndSwap(stateIdle, stateActive) {
			return // closed by Shutdown
		}
		if !c.handle(req) || c.srv.inShutdown.Load() {
			c.lingerClose()
			return
		}
		c.state.Store(stateIdle)
	}
}

// readRequest waits for the next request and reads its line and headers.
// It answers a malformed one itself, and reports false when the
// connection is done.
func (c *conn) readRequest(first bool) (*http.Request, bool) {
	if c.br == nil {
		c.br = readers.Get().(*bufio.Reader)
		c.br.Reset(&c.r)
	}
	c.r.remain = math.MaxInt64
	if !first && c.br.Buffered() == 0 && !c.r.hasPeek {
		c.rwc.SetReadDeadline(deadline(c.srv.IdleTimeout))
		if _, err := c.br.Peek(1); err != nil {
			return nil, false // closed, or idle too long
		}
	}
	if d := c.srv.ReadHeaderTimeout; d > 0 || !first {
		c.rwc.SetReadDeadline(deadline(d))
	}
	c.r.remain = c.srv.maxHeaderBytes() + readBufSize // what bufio may read ahead
	if c.afterPost {
		peek, _ := c.br.Peek(4) // an error is the parser's to meet
		c.br.Discard(leadingLineBreaks(peek))
	}
	req, err := readRequest(c.br)
	tooLong := c.r.remain <= 0
	c.r.remain = math.MaxInt64
	if err != nil {
		switch {
		case tooLong:
			c.refuse(http.StatusRequestHeaderFieldsTooLarge, "The request's headers are too long.")
		case errors.Is(err, io.EOF) || isNetError(err):
			// The client closed, or went quiet, between requests.
		default:
			c.srv.logger().Debug("malformed request", "remote", c.remote, "err", err)
			c.refuse(http.StatusBadRequest, "The request is not valid HTTP/1.1.")
		}
		return nil, false
	}
	if status, why := checkRequest(req); status != 0 {
		c.srv.logger().Debug("refused request", "remote", c.remote, "status", status, "why", why)
		c.refuse(status, why)
		return nil, false
	}
	c.afterPost = req.Method == http.MethodPost
	// The headers' deadline stays until the body's takes its place, or,
	// without a body, until the next request's: no read is made
	// meanwhile but the watch's, which is bounded by neither.
	req.RemoteAddr = c.remote
	return req, true
}

// deadline is d from now, or none when d is zero.
func deadline(d time.Duration) time.Time {
	if d <= 0 {
		return time.Time{}
	}
	return time.Now().Add(d)
}

func isNetError(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, net.ErrClosed)
}

// refuse answers a request that could not be read, and the connection
// closes after it.
func (c *conn) refuse(status int, msg string) {
	body := (&openai.Error{Status: status, Type: "invalid_request_error", Message: msg}).Body()
	b := appendStatusLine(nil, status)
	b = append(b, "Content-Type: application/json\r\nConnection: close\r\nContent-Length: "...)
	b = appendInt(b, int64(len(body)))
	b = append(b, "\r\n\r\n"...)
	b = append(b, body...)
	c.rwc.SetWriteDeadline(time.Now().Add(time.Second))
	if _, err := c.rwc.Write(b); err == nil {
		c.lingerClose()
	}
}

// lingerClose readies a connection the client may still be sending on to
// close: a close with data unread would reset it, and the client could
// lose the answer it has not yet read. The write side closes first; what
// the client sends then is read and dropped, for a while.
func (c *conn) lingerClose() {
	tc, ok := c.rwc.(*net.TCPConn)
	if !ok || tc.CloseWrite() != nil {
		return
	}
	if c.br == nil {
		c.br = readers.Get().(*bufio.Reader)
	}
	c.br.Reset(c.rwc)
	c.rwc.SetReadDeadline(time.Now().Add(lingerTimeout))
	c.br.WriteTo(io.Discard)
}

// handle serves one request and reports whether the connection may carry
// the next.
func (c *conn) handle(req *http.Request) (keepAlive bool) {
	x := new(requestState)
	ctx := &x.ctx
	defer ctx.cancel()
	parsed := req
	req = req.WithContext(ctx)
	w := &x.w
	*w = response{c: c, req: req, header: make(http.Header, 4), contentLength: -1, close: closeAfter(req)}

	// As with net/http, an HTTP/1.0 client's 100-continue is ignored,
	// and any other expectation fails.
	switch expect := req.Header.Get("Expect"); {
	case hasToken(expect, "100-continue"):
		w.expectContinue = req.ProtoAtLeast(1, 1) && req.ContentLength != 0
	case expect != "":
		w.WriteHeader(http.StatusExpectationFailed)
		w.close = true
		w.finish()
		return false
	}
	body := &x.body
	*body = requestBody{c: c, w: w, req: req, parsed: parsed, src: req.Body, remain: req.ContentLength, ctx: ctx}
	req.Body = body
	w.body = body
	if req.ContentLength == 0 {
		body.done = true // and the watch starts now
		c.startWatch(ctx)
	} else if d := c.srv.BodyTimeout; d > 0 || c.srv.ReadHeaderTimeout > 0 {
		// The body's deadline, in place of the headers'. It bounds the
		// body alone: once the body is read nothing reads the connection
		// but the watch, and the next request sets its own.
		c.rwc.SetReadDeadline(deadline(d))
	}

	if !c.runHandler(w, req) {
		c.stopWatch()
		return false
	}
	c.stopWatch()
	// A body the handler left unread is read and dropped if it is short
	// and on its way; otherwise the connection closes after the answer.
	drain := !body.done && body.err == nil && body.remain >= 0 && body.remain <= maxDrain && !w.expectContinue
	if !body.done && !drain {
		w.close = true
	}
	w.finish()
	if w.writeDeadline {
		c.rwc.SetWriteDeadline(time.Time{})
	}
	if w.err != nil || w.close {
		return false
	}
	return !drain || body.drain()
}

// requestState is one request's response, body and context, made in one
// allocation.
type requestState struct {
	w    response
	body requestBody
	ctx  reqContext
}

// runHandler calls the handler, and reports false if it panicked.
func (c *conn) runHandler(w *response, req *http.Request) (ok bool) {
	defer func() {
		if p := recover(); p != nil {
			if p != http.ErrAbortHandler {
				c.srv.logger().Error("handler panicked", "method", req.Method, "path", req.URL.Path, "panic", p, "stack", string(debug.Stack()))
			}
			ok = false
		}
	}()
	c.srv.Handler.ServeHTTP(w, req)
	return true
}

// startWatch watches the client while the handler works, so that the
// handler's context ends at once when the client goes away. The request's
// read buffer goes back to the pool for the while, unless the client has
// already sent more: a pipelined request is not watched.
func (c *conn) startWatch(ctx *reqContext) {
	if c.br.Buffered() > 0 || c.r.hasPeek {
		return
	}
	c.releaseReader()
	c.watch.start(c, ctx)
}

// stopWatch ends the watch, if one runs, and takes a read buffer back.
func (c *conn) stopWatch() {
	if c.br != nil {
		return
	}
	c.watch.stop(c)
	c.br = readers.Get().(*bufio.Reader)
	c.br.Reset(&c.r)
}

func (c *conn) releaseReader() {
	c.br.Reset(nil)
	readers.Put(c.br)
	c.br = nil
}
