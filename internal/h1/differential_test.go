package h1

// The same bytes on a connection, to this package's server and to
// net/http's: h1 must see the requests net/http's server sees, the same
// ones in the same order, and never one net/http refuses — two servers
// that read a request differently are how one is smuggled past the other.
//
// h1 may see fewer only where net/http is more lenient than RFC 9112
// allows, and stops reading where net/http reads on. Those cases, each
// recognised by mayStopBefore:
//
//   - An HTTP/1.0 request whose first Connection header has the keep-alive
//     token, but which also asks to close ("Connection: keep-alive, close",
//     or close in a second Connection header), or has keep-alive only
//     inside a larger list element ("Connection: a keep-alive"), so that
//     the parser sets Close. net/http keeps the connection on the first
//     header's word; h1 closes it after the answer, as a close option
//     requires and as keep-alive not clearly asked for allows (RFC 9112,
//     sections 9.3 and 9.6).

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// seenRequest is what a handler saw of one request.
type seenRequest struct {
	Method, RequestURI, Proto, Host string
	Header                          http.Header
	ContentLength                   int64
	TransferEncoding                []string
	Close                           bool
	Body                            string
	BodyErr                         string // the error the body's reading ended with, if not EOF
	Trailer                         http.Header
}

// recorder is a handler that records each request, reads its whole body
// and answers with a short fixed body.
type recorder struct {
	mu   sync.Mutex
	seen []seenRequest
}

func (rec *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	s := seenRequest{
		Method: r.Method, RequestURI: r.RequestURI, Proto: r.Proto, Host: r.Host,
		Header: r.Header, ContentLength: r.ContentLength, TransferEncoding: r.TransferEncoding,
		Close: r.Close, Body: string(body), Trailer: r.Trailer,
	}
	if err != nil {
		s.BodyErr = err.Error()
	}
	rec.mu.Lock()
	rec.seen = append(rec.seen, s)
	rec.mu.Unlock()
	io.WriteString(w, "ok")
}

func (rec *recorder) requests() []seenRequest {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return rec.seen
}

// memConn is a server's end of a connection whose client has sent all it
// will and closed its side: a read returns what is left, then io.EOF, and
// never waits. A read past its deadline fails as on a socket, which both
// servers use to interrupt their own reads. What the server writes is
// kept.
type memConn struct {
	mu       sync.Mutex
	in       []byte
	out      bytes.Buffer
	deadline time.Time // for reading
	isClosed bool

	closed    chan struct{} // closed by Close
	closeOnce sync.Once
}

func newMemConn(in []byte) *memConn { return &memConn{in: in, closed: make(chan struct{})} }

func (c *memConn) Read(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.isClosed:
		return 0, net.ErrClosed
	case !c.deadline.IsZero() && !time.Now().Before(c.deadline):
		return 0, os.ErrDeadlineExceeded
	case len(p) == 0:
		return 0, nil
	case len(c.in) == 0:
		return 0, io.EOF
	}
	n := copy(p, c.in)
	c.in = c.in[n:]
	return n, nil
}

func (c *memConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.isClosed {
		return 0, net.ErrClosed
	}
	return c.out.Write(p)
}

func (c *memConn) Close() error {
	c.mu.Lock()
	c.isClosed = true
	c.mu.Unlock()
	c.closeOnce.Do(func() { close(c.closed) })
	return nil
}

func (c *memConn) written() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return bytes.Clone(c.out.Bytes())
}

func (c *memConn) SetDeadline(t time.Time) error { return c.SetReadDeadline(t) }
func (c *memConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	c.deadline = t
	c.mu.Unlock()
	return nil
}
func (c *memConn) SetWriteDeadline(time.Time) error { return nil }
func (c *memConn) LocalAddr() net.Addr              { return memAddr{} }
func (c *memConn) RemoteAddr() net.Addr             { return memAddr{} }

type memAddr struct{}

func (memAddr) Network() string { return "mem" }
func (memAddr) String() string  { return "mem" }

// oneConnListener hands out one connection, then waits to be closed.
type oneConnListener struct {
	conn      chan net.Conn
	closed    chan struct{}
	closeOnce sync.Once
}

func listenOnce(c net.Conn) *oneConnListener {
	l := &oneConnListener{conn: make(chan net.Conn, 1), closed: make(chan struct{})}
	l.conn <- c
	return l
}

func (l *oneConnListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conn:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *oneConnListener) Close() error {
	l.closeOnce.Do(func() { close(l.closed) })
	return nil
}

func (l *oneConnListener) Addr() net.Addr { return memAddr{} }

// exchange sends in on one connection to a server that serve starts on a
// listener, and returns the requests its handler saw and what it wrote
// back; serve returns how to stop the server.
func exchange(t testing.TB, in []byte, serve func(net.Listener, http.Handler) (stop func())) ([]seenRequest, []byte) {
	t.Helper()
	rec := &recorder{}
	conn := newMemConn(in)
	ln := listenOnce(conn)
	stop := serve(ln, rec)
	defer stop()
	select {
	case <-conn.closed:
	case <-time.After(10 * time.Second):
		t.Fatalf("the server did not close the connection after %q", in)
	}
	return rec.requests(), conn.written()
}

func serveH1(ln net.Listener, h http.Handler) func() {
	s := &Server{Handler: h, Logger: slog.New(slog.DiscardHandler)}
	done := make(chan struct{})
	go func() { s.Serve(ln); close(done) }()
	return func() { s.Close(); <-done }
}

func serveNetHTTP(ln net.Listener, h http.Handler) func() {
	s := &http.Server{Handler: h, DisableGeneralOptionsHandler: true, ErrorLog: log.New(io.Discard, "", 0)}
	done := make(chan struct{})
	go func() { s.Serve(ln); close(done) }()
	return func() { s.Close(); <-done }
}

// mayStopBefore reports whether h1 may stop reading before the request
// that follows want[:n], where net/http reads on: the cases listed at the
// top of this file.
func mayStopBefore(want []seenRequest, n int) bool {
	if n == 0 {
		return false
	}
	last := want[n-1]
	return last.Proto == "HTTP/1.0" && last.Close && hasToken(last.Header.Get("Connection"), "keep-alive")
}

// compareServers fails t when h1 sees other requests than net/http's
// server does for in, or answers them with anything but HTTP.
func compareServers(t testing.TB, in []byte) {
	t.Helper()
	want, _ := exchange(t, in, serveNetHTTP)
	got, out := exchange(t, in, serveH1)
	if len(got) < len(want) && mayStopBefore(want, len(got)) {
		want = want[:len(got)]
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("for %q, requests seen (-net/http +h1):\n%s", in, diff)
	}
	if err := checkAnswers(out, got); err != nil {
		t.Fatalf("for %q, h1 answered %q: %v", in, out, err)
	}
}

// checkAnswers reports whether out is one well-formed answer to each of
// seen, after any 100 Continue, and then at most a refusal.
func checkAnswers(out []byte, seen []seenRequest) error {
	br := bufio.NewReader(bytes.NewReader(out))
	for i := 0; ; {
		if _, err := br.Peek(1); err == io.EOF {
			if i < len(seen) {
				return errors.New("too few answers")
			}
			return nil
		}
		if i > len(seen) {
			return errors.New("more than one refusal")
		}
		method := http.MethodGet
		if i < len(seen) {
			method = seen[i].Method
		}
		resp, err := http.ReadResponse(br, &http.Request{Method: method})
		if err != nil {
			return err
		}
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			return err
		}
		switch {
		case resp.StatusCode == http.StatusContinue:
			continue
		case i == len(seen) && resp.StatusCode < 400:
			return errors.New("an answer to a request not seen")
		}
		i++
	}
}

func FuzzServerMatchesNetHTTP(f *testing.F) {
	for _, seed := range []string{
		"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
		"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello",
		"GET /a HTTP/1.1\r\nHost: x\r\n\r\nGET /b HTTP/1.1\r\nHost: x\r\n\r\n",
		"POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhiPOST /b HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\n!",
		"POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi\r\nGET /b HTTP/1.1\r\nHost: x\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\nGET /next HTTP/1.1\r\nHost: x\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nTrailer: X-T\r\n\r\n3;ext=1\r\nabc\r\n0\r\nX-T: v\r\n\r\nGET /next HTTP/1.1\r\nHost: x\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\nabc\n0\n\n",
		"GET / HTTP/1.1\nHost: x\n\nGET /lf HTTP/1.1\nHost: x\n\n",
		"GET / HTTP/1.1\r\nHost: x\r\nX-Folded: a\r\n b\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: x\r\nContent-Length : 37\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc",
		"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd",
		"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3, 3\r\n\r\nabc",
		"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: identity\r\nContent-Length: 1\r\n\r\na",
		"GET /a HTTP/1.0\r\n\r\nGET /b HTTP/1.0\r\n\r\n",
		"GET /a HTTP/1.0\r\nConnection: keep-alive\r\n\r\nGET /b HTTP/1.0\r\nConnection: keep-alive\r\n\r\nGET /c HTTP/1.0\r\n\r\n",
		"GET /a HTTP/1.0\r\nConnection: keep-alive, close\r\n\r\nGET /b HTTP/1.0\r\n\r\n",
		"GET /a HTTP/1.0\r\nConnection: foo\r\nConnection: keep-alive\r\n\r\nGET /b HTTP/1.0\r\n\r\n",
		"GET /a HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\nGET /b HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET /a HTTP/1.1\r\nHost: x\r\nConnection: close foo\r\n\r\nGET /b HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET / HTTP/9.9\r\nHost: x\r\n\r\n",
		"GET / HTTP/2.0\r\nHost: x\r\n\r\n",
		"GET / HTTP/1.2\r\nHost: x\r\n\r\n",
		"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
		"GET http://x/a HTTP/1.1\r\n\r\n",
		"GET http://x/a HTTP/1.1\r\nHost: y\r\n\r\n",
		"GET http://x/a HTTP/1.1\r\nHost: y z\r\n\r\n",
		"GET http://x/a HTTP/1.0\r\n\r\n",
		"GET / HTTP/1.1\r\n\r\n",
		"GET / HTTP/1.1\r\nHost:\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: x y\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: x/y\r\n\r\n",
		"CONNECT x:443 HTTP/1.1\r\n\r\n",
		"OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\nhi",
		"POST / HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\nhi",
		"POST / HTTP/1.1\r\nHost: x\r\nExpect: 100-continue, foo\r\nContent-Length: 0\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: x\r\nExpect: teapot\r\nContent-Length: 2\r\n\r\nhi",
		"GET / HTTP/1.1\r\nHost: x\r\nX-Nul: a\x00b\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: x\r\nX-Ctl: a\x01b\x7f\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: x\r\nX-Bare-Cr: a\rb\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: x\r\nX Y: z\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: x\r\nX-Long: " + strings.Repeat("a", 16<<10) + "\r\n\r\n",
		"HEAD / HTTP/1.1\r\nHost: x\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET /a%20b?c=d HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET  / HTTP/1.1\r\nHost: x\r\n\r\n",
		"\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		compareServers(t, in)
	})
}
