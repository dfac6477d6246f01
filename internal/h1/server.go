// Package h1 is the HTTP/1.1 server of llmgw's API listener.
//
// It runs an http.Handler as net/http's server does, but an open stream
// costs it far less: while a handler waits on its upstream, its connection
// holds no buffers — the request's read buffer goes back to a shared pool
// once the body is read, and a response's write buffer once it is flushed —
// and one goroutine of the smallest size watches for the client to leave.
// net/http keeps 10 KiB of buffers for each connection and response, which
// on a gateway holding thousands of streams is most of its memory.
//
// It speaks HTTP/1.1 and 1.0 over plain TCP: keep-alive, pipelining,
// chunked bodies both ways, Expect: 100-continue. TLS and HTTP/2 belong to
// the load balancer in front; the admin listener stays on net/http. Every
// listener llmgw opens is served by a server made in servers.go, this one
// or net/http's, held to the same deadlines.
package h1

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"gitea.mynodes.xyz/ilker/llmgw/internal/openai"
)

// A Server serves HTTP/1.1 on the listeners given to Serve.
type Server struct {
	Handler http.Handler

	// ReadHeaderTimeout bounds reading a request's line and headers, and
	// IdleTimeout the wait for the next request on a kept-alive
	// connection. Zero means no limit.
	ReadHeaderTimeout time.Duration
	IdleTimeout       time.Duration
	// BodyTimeout bounds reading a request's body, from the end of its
	// headers to its last byte, as a read deadline the handler may set
	// again through http.ResponseController; once the body is read it
	// bounds nothing. Zero means no limit.
	BodyTimeout time.Duration

	// MaxHeaderBytes bounds a request's line and headers; a longer one
	// is answered 431. Zero means http.DefaultMaxHeaderBytes.
	MaxHeaderBytes int

	// Logger gets handler panics, refused requests and failed accepts;
	// nil is slog.Default().
	Logger *slog.Logger

	inShutdown atomic.Bool

	mu        sync.Mutex
	listeners map[net.Listener]struct{}
	conns     map[*conn]struct{}
}

const (
	// readBufSize is the buffer a request's line and headers are read
	// through; a longer line is put together by the parser.
	readBufSize = 4 << 10
	// writeBufSize is what a response gathers before it is sent; more,
	// and it goes out in pieces of this size or straight from the
	// handler's slice.
	writeBufSize = 4 << 10
	// maxDrain is how much of a body the handler left unread is read
	// and dropped to keep the connection; past it, the connection closes.
	maxDrain = 256 << 10
	// drainTimeout bounds that reading.
	drainTimeout = 5 * time.Second
	// lingerTimeout is how long a closing connection reads what the
	// client still sends, so that its answer is not lost to a reset;
	// net/http waits as long.
	lingerTimeout = 500 * time.Millisecond
	// newConnGrace is how long Shutdown lets a connection that has not
	// yet sent its first request send it, as net/http does: a client
	// that has just connected is about to.
	newConnGrace = 5 * time.Second
)

var (
	readers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, readBufSize) }}
	writers = sync.Pool{New: func() any { b := make([]byte, 0, writeBufSize); return &b }}
)

// aLongTimeAgo is a deadline that has passed: setting it interrupts a
// blocked read at once.
var aLongTimeAgo = time.Unix(1, 0)

func (s *Server) logger() *slog.Logger {
	if s.Logger != nil {
		return s.Logger
	}
	return slog.Default()
}

func (s *Server) maxHeaderBytes() int64 {
	if s.MaxHeaderBytes > 0 {
		return int64(s.MaxHeaderBytes)
	}
	return http.DefaultMaxHeaderBytes
}

// Serve accepts connections on ln and serves each on its own goroutine
// until Shutdown or Close, when it returns http.ErrServerClosed. It closes
// ln when it returns.
func (s *Server) Serve(ln net.Listener) error {
	if !s.trackListener(ln, true) {
		ln.Close()
		return http.ErrServerClosed
	}
	defer s.trackListener(ln, false)
	defer ln.Close()

	var backoff time.Duration
	for {
		rwc, err := ln.Accept()
		if err != nil {
			if s.inShutdown.Load() {
				return http.ErrServerClosed
			}
			if errors.Is(err, net.ErrClosed) {
				return err
			}
			// Out of file descriptors, or a connection reset before it
			// was accepted: wait a little and go on, as net/http does.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			s.logger().Warn("accepting a connection", "err", err, "retry_in", backoff)
			time.Sleep(backoff)
			continue
		}
		backoff = 0
		c := &conn{srv: s, rwc: rwc, accepted: time.Now()}
		if !s.trackConn(c, true) {
			rwc.Close()
			return http.ErrServerClosed
		}
		go c.serve()
	}
}

func (s *Server) trackListener(ln net.Listener, add bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !add {
		delete(s.listeners, ln)
		return true
	}
	if s.inShutdown.Load() {
		return false
	}
	if s.listeners == nil {
		s.listeners = make(map[net.Listener]struct{})
	}
	s.listeners[ln] = struct{}{}
	return true
}

func (s *Server) trackConn(c *conn, add bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !add {
		delete(s.conns, c)
		return true
	}
	if s.inShutdown.Load() {
		return false
	}
	if s.conns == nil {
		s.conns = make(map[*conn]struct{})
	}
	s.conns[c] = struct{}{}
	return true
}

// Shutdown stops the server gracefully: it closes the listeners and the
// idle connections, lets the requests being served finish, and closes
// their connections after them. It returns when none are left, or with
// ctx's error when ctx ends first; Close then cuts the rest.
func (s *Server) Shutdown(ctx context.Context) error {
	s.inShutdown.Store(true)
	err := s.closeListeners()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !s.closeIdle() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
	return err
}

// Close closes the listeners and every connection at once, requests in
// flight included.
func (s *Server) Close() error {
	s.inShutdown.Store(true)
	err := s.closeListeners()
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		c.rwc.Close()
	}
	return err
}

func (s *Server) closeListeners() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var err error
	for ln := range s.listeners {
		if cerr := ln.Close(); cerr != nil && !errors.Is(cerr, net.ErrClosed) {
			err = errors.Join(err, cerr)
		}
	}
	return err
}

// closeIdle closes the connections waiting for a request and reports
// whether none are left.
func (s *Server) closeIdle() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		if !c.served.Load() && time.Since(c.accepted) < newConnGrace {
			continue
		}
		if c.state.CompareAndSwap(stateIdle, stateClosed) {
			c.rwc.Close()
		}
	}
	return len(s.conns) == 0
}

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
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	parsed := req
	req = req.WithContext(ctx)
	x := new(requestState)
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
	*body = requestBody{c: c, w: w, req: req, parsed: parsed, src: req.Body, remain: req.ContentLength, cancel: cancel}
	req.Body = body
	w.body = body
	if req.ContentLength == 0 {
		body.done = true // and the watch starts now
		c.startWatch(cancel)
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

// requestState is one request's response and body, made in one allocation.
type requestState struct {
	w    response
	body requestBody
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
func (c *conn) startWatch(cancel context.CancelFunc) {
	if c.br.Buffered() > 0 || c.r.hasPeek {
		return
	}
	c.releaseReader()
	c.watch.start(c, cancel)
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
	remain int64 // bytes of a Content-Length body not yet read; -1 for chunked
	done   bool  // read to its end
	err    error // the error reading ended with
	cancel context.CancelFunc
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
		b.c.startWatch(b.cancel)
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
