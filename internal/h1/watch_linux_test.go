package h1

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// On Linux the poller watches a connection while its handler works, and
// forgets it when the handler returns.
func TestPollerWatches(t *testing.T) {
	watched := func() int {
		poll.mu.Lock()
		defer poll.mu.Unlock()
		return len(poll.conns)
	}
	during := make(chan int, 1)
	_, addr := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		during <- watched()
		io.WriteString(w, "ok")
	}))
	c := dial(t, addr)
	c.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	c.answer("GET")
	if n := <-during; n != 1 {
		t.Errorf("%d connections polled while the handler worked, want 1", n)
	}
	if n := watched(); n != 0 {
		t.Errorf("%d connections polled after, want 0", n)
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
	if p.add(&conn{rwc: server}, func() {}) || p.last != 0 {
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
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ca := &conn{rwc: a}
	if !poll.add(ca, cancel) {
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

	b.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 2)
	if n, err := b.Read(buf); string(buf[:n]) != "x" {
		t.Errorf("the connection with the reused descriptor read %q, %v; want its byte", buf[:n], err)
	}
}
