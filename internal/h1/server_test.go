package h1

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// serve runs a Server with h on a loopback listener until the test ends,
// and returns its address; set changes the Server before it serves.
func serve(t *testing.T, h http.Handler, set ...func(*Server)) (*Server, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return serveOn(t, ln, h, set...)
}

// plainListener's connections have no file descriptor to poll, so each
// watches for its client leaving with a goroutine.
type plainListener struct{ net.Listener }

func (l plainListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	return struct{ net.Conn }{c}, err
}

// watchers runs a test with connections watched by the poller, where
// there is one, and by goroutines.
func watchers(t *testing.T, test func(t *testing.T, serve func(http.Handler) string)) {
	t.Run("poller", func(t *testing.T) {
		test(t, func(h http.Handler) string { _, addr := serve(t, h); return addr })
	})
	t.Run("goroutine", func(t *testing.T) {
		test(t, func(h http.Handler) string {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			_, addr := serveOn(t, plainListener{ln}, h)
			return addr
		})
	})
}

func serveOn(t *testing.T, ln net.Listener, h http.Handler, set ...func(*Server)) (*Server, string) {
	t.Helper()
	s := &Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, Logger: slog.New(slog.DiscardHandler)}
	for _, f := range set {
		f(s)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	t.Cleanup(func() {
		s.Close()
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("Serve: %v", err)
		}
	})
	return s, ln.Addr().String()
}

// client is one raw connection to a server, reading its answers with
// net/http's parser.
type client struct {
	t    *testing.T
	conn net.Conn
	br   *bufio.Reader
}

func dial(t *testing.T, addr string) *client {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	return &client{t: t, conn: conn, br: bufio.NewReader(conn)}
}

func (c *client) send(raw string) {
	c.t.Helper()
	if _, err := io.WriteString(c.conn, raw); err != nil {
		c.t.Fatal(err)
	}
}

// answer reads one response to a request with method, and its whole body.
func (c *client) answer(method string) (*http.Response, string) {
	c.t.Helper()
	resp, err := http.ReadResponse(c.br, &http.Request{Method: method})
	if err != nil {
		c.t.Fatalf("reading the answer: %v", err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatalf("reading the body: %v", err)
	}
	return resp, string(body)
}

// closed reports whether the server has closed the connection, with
// nothing more sent.
func (c *client) closed() bool {
	c.t.Helper()
	c.conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, err := c.br.Read(make([]byte, 1))
	return n == 0 && errors.Is(err, io.EOF)
}

// echo answers with the method, the path and the body it read.
var echo = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "text/plain")
	fmt.Fprintf(w, "%s %s %s", r.Method, r.URL.Path, body)
})

func TestKeepAliveAndPipelining(t *testing.T) {
	_, addr := serve(t, echo)
	c := dial(t, addr)
	c.send("POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello")
	resp, body := c.answer("POST")
	if resp.StatusCode != 200 || body != "POST /a hello" || resp.ContentLength != int64(len(body)) || resp.Close {
		t.Fatalf("first answer: %d %q, length %d, close %v", resp.StatusCode, body, resp.ContentLength, resp.Close)
	}
	if resp.Header.Get("Date") == "" {
		t.Error("no Date header")
	}

	// Two requests in one write, the second with a chunked body: both are
	// answered, in order, on the same connection.
	c.send("GET /b HTTP/1.1\r\nHost: x\r\n\r\n" +
		"POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n")
	for _, want := range []string{"GET /b ", "POST /c abcde"} {
		if _, body := c.answer("GET"); body != want {
			t.Fatalf("pipelined answer %q, want %q", body, want)
		}
	}

	c.send("GET /d HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
	resp, body = c.answer("GET")
	if body != "GET /d " || !resp.Close {
		t.Fatalf("answer to Connection: close: %q, close %v", body, resp.Close)
	}
	if !c.closed() {
		t.Error("the connection stayed open after Connection: close")
	}
}

func TestHTTP10(t *testing.T) {
	_, addr := serve(t, echo)

	c := dial(t, addr)
	c.send("GET /a HTTP/1.0\r\n\r\n")
	resp, body := c.answer("GET")
	if body != "GET /a " || !resp.Close {
		t.Fatalf("HTTP/1.0: %q, close %v", body, resp.Close)
	}
	if !c.closed() {
		t.Error("an HTTP/1.0 connection without keep-alive stayed open")
	}

	c = dial(t, addr)
	c.send("GET /b HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
	resp, body = c.answer("GET")
	if body != "GET /b " || resp.Close || resp.Header.Get("Connection") != "keep-alive" {
		t.Fatalf("HTTP/1.0 keep-alive: %q, close %v, Connection %q", body, resp.Close, resp.Header.Get("Connection"))
	}
	c.send("GET /c HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
	if _, body := c.answer("GET"); body != "GET /c " {
		t.Fatalf("second HTTP/1.0 request: %q", body)
	}
}

// A streamed answer reaches the client piece by piece, each as the handler
// flushes it, in chunks.
func TestFlushStreams(t *testing.T) {
	next := make(chan string)
	_, addr := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for s := range next {
			io.WriteString(w, s)
			w.(http.Flusher).Flush()
		}
	}))
	c := dial(t, addr)
	c.send("GET /s HTTP/1.1\r\nHost: x\r\n\r\n")
	next <- "data: 1\n\n"
	resp, err := http.ReadResponse(c.br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.TransferEncoding; len(got) != 1 || got[0] != "chunked" {
		t.Fatalf("Transfer-Encoding %v, want chunked", got)
	}
	buf := make([]byte, 64)
	for _, event := range []string{"data: 1\n\n", "data: 2\n\n", "data: 3\n\n"} {
		if event != "data: 1\n\n" {
			next <- event
		}
		n, err := io.ReadAtLeast(resp.Body, buf, len(event))
		if err != nil || string(buf[:n]) != event {
			t.Fatalf("read %q, %v; want %q before the handler writes more", buf[:n], err, event)
		}
	}
	close(next)
	if rest, err := io.ReadAll(resp.Body); err != nil || len(rest) != 0 {
		t.Fatalf("after the last event: %q, %v", rest, err)
	}
}

// When the client goes away, the handler's context ends at once — whether
// it had a body to read or not — and with it the functions given to
// context.AfterFunc and the contexts made from it, as the proxy ends its
// calls through them.
func TestClientGoneCancels(t *testing.T) { watchers(t, testClientGoneCancels) }

func testClientGoneCancels(t *testing.T, serve func(http.Handler) string) {
	for _, raw := range []string{
		"GET /wait HTTP/1.1\r\nHost: x\r\n\r\n",
		"POST /wait HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}",
	} {
		started, ended := make(chan struct{}), make(chan error, 1)
		addr := serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.ReadAll(r.Body)
			after := make(chan struct{})
			context.AfterFunc(r.Context(), func() { close(after) })
			child, cancel := context.WithCancel(r.Context())
			defer cancel()
			close(started)
			timeout := time.After(10 * time.Second)
			for _, c := range []<-chan struct{}{r.Context().Done(), after, child.Done()} {
				select {
				case <-c:
				case <-timeout:
					ended <- errors.New("the context, its AfterFunc or its child did not end")
					return
				}
			}
			ended <- child.Err()
		}))
		c := dial(t, addr)
		c.send(raw)
		<-started
		c.conn.Close()
		if err := <-ended; !errors.Is(err, context.Canceled) {
			t.Errorf("%q: %v", raw[:10], err)
		}
	}
}

// The watch for the client leaving does not take a pipelined request for
// one: it is read and answered after the first.
func TestPipelinedDuringHandler(t *testing.T) { watchers(t, testPipelinedDuringHandler) }

func testPipelinedDuringHandler(t *testing.T, serve func(http.Handler) string) {
	release := make(chan struct{})
	addr := serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			<-release
			if err := r.Context().Err(); err != nil {
				t.Errorf("the first request's context ended: %v", err)
			}
		}
		io.WriteString(w, r.URL.Path)
	}))
	c := dial(t, addr)
	c.send("GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
	time.Sleep(50 * time.Millisecond) // the watch is reading when the second request comes
	c.send("GET /next HTTP/1.1\r\nHost: x\r\n\r\n")
	time.Sleep(50 * time.Millisecond)
	close(release)
	for _, want := range []string{"/slow", "/next"} {
		if _, body := c.answer("GET"); body != want {
			t.Fatalf("answer %q, want %q", body, want)
		}
	}
}

func TestExpectContinue(t *testing.T) {
	_, addr := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/refuse" {
			http.Error(w, "no", http.StatusForbidden)
			return
		}
		echo(w, r)
	}))

	c := dial(t, addr)
	c.send("POST /a HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n")
	line, err := c.br.ReadString('\n')
	if err != nil || line != "HTTP/1.1 100 Continue\r\n" {
		t.Fatalf("before the body: %q, %v", line, err)
	}
	c.br.ReadString('\n')
	c.send("hi")
	if _, body := c.answer("POST"); body != "POST /a hi" {
		t.Fatalf("answer %q", body)
	}

	// Refused before the body is sent: the client never sends it, so the
	// connection cannot carry another request.
	c = dial(t, addr)
	c.send("POST /refuse HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n")
	resp, _ := c.answer("POST")
	if resp.StatusCode != 403 || !resp.Close {
		t.Fatalf("refused: %d, close %v", resp.StatusCode, resp.Close)
	}
}

// A body the handler does not read is dropped when short, and the
// connection goes on; a long one closes it.
func TestUnreadBody(t *testing.T) {
	_, addr := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ignored")
	}))
	c := dial(t, addr)
	c.send("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello")
	if resp, body := c.answer("POST"); body != "ignored" || resp.Close {
		t.Fatalf("short body: %q, close %v", body, resp.Close)
	}
	c.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	if _, body := c.answer("GET"); body != "ignored" {
		t.Fatalf("after a dropped body: %q", body)
	}

	c = dial(t, addr)
	c.send(fmt.Sprintf("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", maxDrain+1))
	if resp, _ := c.answer("POST"); !resp.Close {
		t.Fatal("a long unread body left the connection open")
	}
	if !c.closed() {
		t.Error("the connection stayed open")
	}
}

func TestHeadAndNoContent(t *testing.T) {
	_, addr := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/none" {
			w.WriteHeader(http.StatusNoContent)
			if _, err := io.WriteString(w, "x"); !errors.Is(err, http.ErrBodyNotAllowed) {
				t.Errorf("writing a 204's body: %v", err)
			}
			return
		}
		w.Header().Set("Content-Length", "5")
		io.WriteString(w, "hello")
	}))
	c := dial(t, addr)
	c.send("HEAD / HTTP/1.1\r\nHost: x\r\n\r\n")
	resp, body := c.answer("HEAD")
	if resp.ContentLength != 5 || body != "" {
		t.Fatalf("HEAD: length %d, body %q", resp.ContentLength, body)
	}
	c.send("GET /none HTTP/1.1\r\nHost: x\r\n\r\n")
	if resp, body := c.answer("GET"); resp.StatusCode != 204 || body != "" || resp.Header.Get("Content-Length") != "" {
		t.Fatalf("204: %d %q, Content-Length %q", resp.StatusCode, body, resp.Header.Get("Content-Length"))
	}
	c.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	if _, body := c.answer("GET"); body != "hello" {
		t.Fatalf("after HEAD and 204: %q", body)
	}
}

// Large writes pass through, and a handler's Content-Length is kept to: a
// short body closes the connection, since nothing can follow it.
func TestLargeAndShortBodies(t *testing.T) {
	big := strings.Repeat("0123456789", 3000)
	_, addr := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/big":
			io.WriteString(w, big[:10])
			w.Write([]byte(big[10:]))
		case "/short":
			w.Header().Set("Content-Length", "10")
			io.WriteString(w, "12345")
		}
	}))
	c := dial(t, addr)
	c.send("GET /big HTTP/1.1\r\nHost: x\r\n\r\n")
	if _, body := c.answer("GET"); body != big {
		t.Fatalf("big body: %d bytes, want %d", len(body), len(big))
	}
	c.send("GET /short HTTP/1.1\r\nHost: x\r\n\r\n")
	resp, err := http.ReadResponse(c.br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadAll(resp.Body); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("reading a short body: %v, want an unexpected EOF", err)
	}
}

func TestPanicClosesConnection(t *testing.T) {
	_, addr := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/panic" {
			panic("boom")
		}
		io.WriteString(w, "fine")
	}))
	c := dial(t, addr)
	c.send("GET /panic HTTP/1.1\r\nHost: x\r\n\r\n")
	if !c.closed() {
		t.Fatal("the connection stayed open after a panic")
	}
	c = dial(t, addr)
	c.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	if _, body := c.answer("GET"); body != "fine" {
		t.Fatalf("after a panic: %q", body)
	}
}

func TestReadHeaderTimeout(t *testing.T) {
	_, addr := serve(t, echo, func(s *Server) { s.ReadHeaderTimeout = 100 * time.Millisecond })
	c := dial(t, addr)
	c.send("GET / HTTP/1.1\r\n") // and never the rest
	if !c.closed() {
		t.Fatal("a request whose headers never end kept its connection")
	}
}

// Shutdown closes idle connections at once, lets a request being served
// finish and closes its connection after it, and returns when none is
// left.
func TestShutdown(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	s, addr := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			close(started)
			<-release
		}
		io.WriteString(w, "done")
	}))
	idle := dial(t, addr)
	idle.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	idle.answer("GET")
	busy := dial(t, addr)
	busy.send("GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
	<-started

	var shutdown atomic.Bool
	done := make(chan error, 1)
	go func() { done <- s.Shutdown(context.Background()); shutdown.Store(true) }()
	if !idle.closed() {
		t.Error("Shutdown left an idle connection open")
	}
	if shutdown.Load() {
		t.Fatal("Shutdown returned with a request in flight")
	}
	close(release)
	resp, body := busy.answer("GET")
	if body != "done" || !resp.Close {
		t.Errorf("the request in flight: %q, close %v", body, resp.Close)
	}
	if err := <-done; err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	if _, err := net.Dial("tcp", addr); err == nil {
		t.Error("the listener still accepts")
	}
}
