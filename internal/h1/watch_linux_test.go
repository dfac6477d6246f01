package h1

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// registration is the poller's entry for connection id, and whether it
// has one.
func registration(id uint64) (polled, bool) {
	poll.mu.Lock()
	defer poll.mu.Unlock()
	e, ok := poll.conns[id]
	return e, ok
}

// inEpoll reports whether connection id is in the poller's epoll
// instance, as the kernel lists it.
func inEpoll(t *testing.T, id uint64) bool {
	t.Helper()
	info, err := os.ReadFile(fmt.Sprintf("/proc/self/fdinfo/%d", poll.epfd))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(info)) {
		f := strings.Fields(line)
		for i := 0; i+1 < len(f); i++ {
			if f[i] == "data:" {
				if d, err := strconv.ParseUint(f[i+1], 16, 64); err == nil && d == id {
					return true
				}
			}
		}
	}
	return false
}

// gone waits until connection id has left the poller, and reports
// whether it did.
func gone(id uint64) bool {
	return eventually(func() bool { _, ok := registration(id); return !ok })
}

// ended waits until an edge on connection id has been noted for its next
// watch, and reports whether one was.
func ended(id uint64) bool {
	return eventually(func() bool { e, _ := registration(id); return e.ended })
}

// eventually reports whether f comes true within a few seconds, asked
// every few milliseconds.
func eventually(f func() bool) bool {
	for range 500 {
		if f() {
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return false
}

// watchedConn is the server's side of a connection, as its handler sees
// it: its number with the poller, and whether its watch runs now.
func watchedConn(w http.ResponseWriter) (id uint64, watched bool) {
	id = w.(*response).c.watch.p.id
	e, ok := registration(id)
	return id, ok && e.ctx != nil
}

// On Linux a connection joins the poller with its first watch and stays
// until it closes: each request's watch begins and ends on the same
// registration. When the connection closes — the client leaving between
// requests — it leaves the poller and the epoll instance.
func TestPollerWatchesEachConnectionOnce(t *testing.T) {
	type seen struct {
		id      uint64
		watched bool
	}
	during := make(chan seen, 2)
	_, addr := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, watched := watchedConn(w)
		during <- seen{id, watched}
		io.WriteString(w, "ok")
	}))
	c := dial(t, addr)
	var first seen
	for i := range 2 {
		c.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		c.answer("GET")
		got := <-during
		if got.id == 0 || !got.watched {
			t.Fatalf("request %d: connection %d watched %v while its handler worked, want a number and true", i, got.id, got.watched)
		}
		if i == 0 {
			first = got
		} else if got.id != first.id {
			t.Errorf("the second request's connection is number %d, the first's %d: registered twice", got.id, first.id)
		}
		e, ok := registration(got.id)
		if !ok || e.ctx != nil {
			t.Errorf("after request %d: registered %v, watched %v; want registered, not watched", i, ok, e.ctx != nil)
		}
		if !inEpoll(t, got.id) {
			t.Errorf("after request %d the connection is not in the epoll instance", i)
		}
	}
	c.conn.Close()
	if !gone(first.id) {
		t.Fatal("a closed connection stays with the poller")
	}
	if inEpoll(t, first.id) {
		t.Error("a closed connection stays in the epoll instance")
	}
}

// A request after the first is watched as the first is: a request
// pipelined during it is not taken for the client leaving, and is kept
// and answered; the request after that ends its context when the client
// leaves.
func TestPollerWatchesEachRequest(t *testing.T) {
	release, started, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	_, addr := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/slow":
			<-release
			if err := r.Context().Err(); err != nil {
				t.Errorf("the slow request's context ended: %v", err)
			}
		case "/wait":
			if _, watched := watchedConn(w); !watched {
				t.Error("the request after a pipelined one is not watched")
			}
			close(started)
			done <- waitDone(r)
			return
		}
		io.WriteString(w, r.URL.Path)
	}))
	c := dial(t, addr)
	c.send("GET /first HTTP/1.1\r\nHost: x\r\n\r\n")
	if _, body := c.answer("GET"); body != "/first" {
		t.Fatalf("answer %q, want /first", body)
	}
	c.send("GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
	time.Sleep(50 * time.Millisecond) // the slow request is watched when the next comes
	c.send("GET /next HTTP/1.1\r\nHost: x\r\n\r\n")
	time.Sleep(50 * time.Millisecond)
	close(release)
	for _, want := range []string{"/slow", "/next"} {
		if _, body := c.answer("GET"); body != want {
			t.Fatalf("answer %q, want %q", body, want)
		}
	}
	c.send("GET /wait HTTP/1.1\r\nHost: x\r\n\r\n")
	<-started
	c.conn.Close()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("the client left during the third request: %v", err)
	}
}

// waitDone waits for r's context to end, and returns why, or an error
// when it has not ended within 10 s.
func waitDone(r *http.Request) error {
	select {
	case <-r.Context().Done():
		return r.Context().Err()
	case <-time.After(10 * time.Second):
		return errors.New("the context did not end")
	}
}

// A client that closes its connection while no watch runs — here while
// its request's body waits to be read — is noticed when the watch
// starts: the edge, which does not come again, was noted.
func TestPollerNoticesEndBeforeWatch(t *testing.T) {
	done := make(chan error, 1)
	_, addr := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/wait" {
			id, _ := watchedConn(w)
			if !ended(id) {
				t.Error("the client's closing was not noted")
			}
			io.ReadAll(r.Body)
			done <- waitDone(r)
			return
		}
		io.WriteString(w, r.URL.Path)
	}))
	c := dial(t, addr)
	c.send("GET /first HTTP/1.1\r\nHost: x\r\n\r\n") // registers the connection
	c.answer("GET")
	c.send("POST /wait HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
	c.conn.(*net.TCPConn).CloseWrite()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("the client closed before the watch: %v", err)
	}
}

// A client that sends its next request and then closes while a request is
// watched is not taken to have left: the request is answered, its context
// whole. The next request, read after it, is watched with the end already
// come, and its context ends, as net/http's server ends it.
func TestPollerEndAfterPipelined(t *testing.T) {
	release, done := make(chan struct{}), make(chan error, 1)
	_, addr := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/slow":
			<-release
			if err := r.Context().Err(); err != nil {
				t.Errorf("the slow request's context ended: %v", err)
			}
		case "/next":
			done <- waitDone(r)
		}
		io.WriteString(w, r.URL.Path)
	}))
	c := dial(t, addr)
	c.send("GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
	time.Sleep(50 * time.Millisecond) // the slow request is watched when the next comes
	c.send("GET /next HTTP/1.1\r\nHost: x\r\n\r\n")
	c.conn.(*net.TCPConn).CloseWrite()
	time.Sleep(50 * time.Millisecond)
	close(release)
	if _, body := c.answer("GET"); body != "/slow" {
		t.Fatalf("answer %q, want /slow", body)
	}
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("the request after the client closed: %v", err)
	}
}

// A poller whose epoll fails retires, once, rather than spin: its
// goroutine ends, it says so once, and a new watch falls back to a
// goroutine of its own.
func TestPollerRetires(t *testing.T) {
	// A pipe is no epoll instance: waiting on it fails at once.
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	var logged bytes.Buffer
	p := &poller{epfd: int(r.Fd()), conns: make(map[uint64]polled), log: slog.New(slog.NewTextHandler(&logged, nil))}
	p.once.Do(func() {})
	done := make(chan struct{})
	go func() { p.run(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the poller still waits on what is not an epoll instance")
	}
	if n := strings.Count(logged.String(), "\n"); n != 1 {
		t.Errorf("the poller logged %d lines, want 1: %s", n, &logged)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	server, client := acceptPair(t, ln)
	defer client.Close()
	if p.add(&conn{rwc: server}, new(reqContext)) || p.last != 0 {
		t.Error("a retired poller took a watch")
	}
}

// acceptPair connects to ln and returns both ends.
func acceptPair(t *testing.T, ln net.Listener) (server, client net.Conn) {
	t.Helper()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server, err = ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { server.Close(); client.Close() })
	return server, client
}

// fdOf is c's file descriptor, for the test to compare.
func fdOf(t *testing.T, c net.Conn) uintptr {
	t.Helper()
	rc, err := c.(syscall.Conn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var fd uintptr
	if err := rc.Control(func(f uintptr) { fd = f }); err != nil {
		t.Fatal(err)
	}
	return fd
}

// An event for a watch whose connection the server has closed never
// reaches the connection that has its descriptor's number now: the
// closed one's handler is told it is over, and the other's bytes are
// left alone; removing the watch after the close is safe.
func TestPollerEventAfterClose(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	a, aClient := acceptPair(t, ln)
	// A copy of a's descriptor keeps its socket, and so its epoll
	// registration, past a's close, as a child process's copy would.
	dup, err := a.(*net.TCPConn).File()
	if err != nil {
		t.Fatal(err)
	}
	defer dup.Close()
	aFD := fdOf(t, a)
	ctx := new(reqContext)
	ca := &conn{rwc: a}
	if !poll.add(ca, ctx) {
		t.Fatal("the poller took no watch")
	}
	bClient, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer bClient.Close()
	a.Close()
	b, err := ln.Accept() // given the lowest number free: a's
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if fdOf(t, b) != aFD {
		t.Skip("the next connection did not get the closed one's descriptor")
	}
	io.WriteString(bClient, "x")
	time.Sleep(50 * time.Millisecond) // b has its byte when a's event comes
	aClient.Close()
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Error("the watch of a connection the server closed did not end its context")
	}
	poll.remove(ca)
	poll.forget(ca)

	b.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 2)
	if n, err := b.Read(buf); string(buf[:n]) != "x" {
		t.Errorf("the connection with the reused descriptor read %q, %v; want its byte", buf[:n], err)
	}
}
