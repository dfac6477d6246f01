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
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
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
