package h1

// The servers every listener is served by, held to their deadlines over
// real sockets: a header or a body trickled in is cut at its deadline, an
// idle connection is closed, and an answer that outlasts the body's
// deadline once the body is read is not cut.

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

// testDeadlines are short enough to wait for.
var testDeadlines = Deadlines{Header: deadlineTimeout, Body: deadlineTimeout, Idle: deadlineTimeout}

// eachServer runs test on a server of h made by each constructor, held
// to testDeadlines, given its address; this package's server twice, its
// connections watched by the poller and by goroutines.
func eachServer(t *testing.T, test func(t *testing.T, serve func(h http.Handler) string)) {
	type server interface {
		Serve(net.Listener) error
		Close() error
	}
	servers := []struct {
		name      string
		newServer func(http.Handler) server
		listener  func(net.Listener) net.Listener
	}{
		{"NewServer", func(h http.Handler) server { return NewServer(h, testDeadlines) }, func(ln net.Listener) net.Listener { return ln }},
		{"NewServer, watched by a goroutine", func(h http.Handler) server { return NewServer(h, testDeadlines) }, func(ln net.Listener) net.Listener { return plainListener{ln} }},
		{"NewStdServer", func(h http.Handler) server { return NewStdServer(h, testDeadlines) }, func(ln net.Listener) net.Listener { return ln }},
	}
	for _, s := range servers {
		t.Run(s.name, func(t *testing.T) {
			test(t, func(h http.Handler) string {
				ln, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					t.Fatal(err)
				}
				srv := s.newServer(h)
				go srv.Serve(s.listener(ln))
				t.Cleanup(func() { srv.Close() })
				return ln.Addr().String()
			})
		})
	}
}

// trickle writes a byte of b to c every quarter of deadlineTimeout until
// b or stop ends.
func trickle(c net.Conn, b string, stop <-chan struct{}) {
	tick := time.NewTicker(deadlineTimeout / 4)
	defer tick.Stop()
	for i := range len(b) {
		select {
		case <-stop:
			return
		case <-tick.C:
			if _, err := c.Write([]byte{b[i]}); err != nil {
				return
			}
		}
	}
}

// ended reports whether the server ended the connection within 5 s, a
// refusal sent before it or not: a close or a reset, not the wait
// running out.
func (c *client) ended() bool {
	c.t.Helper()
	c.conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := io.Copy(io.Discard, c.br)
	return !errors.Is(err, os.ErrDeadlineExceeded)
}

// TestServersCutSlowHeaders: headers trickled in past their deadline
// end the connection.
func TestServersCutSlowHeaders(t *testing.T) {
	eachServer(t, func(t *testing.T, serve func(http.Handler) string) {
		c := dial(t, serve(echo))
		stop := make(chan struct{})
		defer close(stop)
		go trickle(c.conn, "GET / HTTP/1.1\r\nHost: x\r\nX-Slow: "+strings.Repeat("x", 100), stop)
		if !c.ended() {
			t.Error("headers trickled past their deadline kept the connection")
		}
	})
}

// TestServersCutSlowBodies: a body trickled in past its deadline fails
// the handler's read with the deadline's error, whether or not the
// handler set one of its own; the answer closes the connection.
func TestServersCutSlowBodies(t *testing.T) {
	eachServer(t, func(t *testing.T, serve func(http.Handler) string) {
		result := make(chan timedErr, 1)
		c := dial(t, serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			start := time.Now()
			_, err := io.ReadAll(r.Body)
			result <- timedErr{err, time.Since(start)}
			if err != nil {
				http.Error(w, "too slow", http.StatusRequestTimeout)
			}
		})))
		const length = 100
		c.send(fmt.Sprintf("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", length))
		stop := make(chan struct{})
		go trickle(c.conn, strings.Repeat("x", length), stop)
		checkTimedOut(t, result)
		close(stop)
		if resp, _ := c.answer("POST"); resp.StatusCode != http.StatusRequestTimeout || !resp.Close {
			t.Errorf("answer %d, close %v; want 408 and the connection closed", resp.StatusCode, resp.Close)
		}
	})
}

// TestServersCloseIdleConnections: a kept-alive connection that sends no
// next request is closed at its deadline.
func TestServersCloseIdleConnections(t *testing.T) {
	eachServer(t, func(t *testing.T, serve func(http.Handler) string) {
		c := dial(t, serve(echo))
		c.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		if resp, body := c.answer("GET"); resp.StatusCode != http.StatusOK || resp.Close || body != "GET / " {
			t.Fatalf("answer %d %q, close %v", resp.StatusCode, body, resp.Close)
		}
		if !c.ended() {
			t.Error("an idle connection was kept past its deadline")
		}
	})
}

// TestServersLiftTheBodyDeadline: an answer that runs on past the body's
// deadline, its body read or with none, is neither cut nor its context
// ended (a profile taken for its seconds, a stream); the connection then
// carries the next request.
func TestServersLiftTheBodyDeadline(t *testing.T) {
	eachServer(t, func(t *testing.T, serve func(http.Handler) string) {
		c := dial(t, serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusRequestTimeout)
				return
			}
			t := time.NewTimer(3 * deadlineTimeout)
			defer t.Stop()
			select {
			case <-r.Context().Done():
				http.Error(w, "the context ended", http.StatusServiceUnavailable)
			case <-t.C:
				fmt.Fprintf(w, "%s", body)
			}
		})))
		c.send("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\nbody")
		if resp, body := c.answer("POST"); resp.StatusCode != http.StatusOK || body != "body" {
			t.Errorf("an answer outlasting the body's deadline: %d %q", resp.StatusCode, body)
		}
		c.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		if resp, body := c.answer("GET"); resp.StatusCode != http.StatusOK || body != "" {
			t.Errorf("a bodiless answer outlasting the body's deadline: %d %q", resp.StatusCode, body)
		}
	})
}

// TestServersNeedEveryDeadline: a server cannot be made without one.
func TestServersNeedEveryDeadline(t *testing.T) {
	for _, d := range []Deadlines{{Body: time.Second, Idle: time.Second}, {Header: time.Second, Idle: time.Second}, {Header: time.Second, Body: time.Second}} {
		for name, make := range map[string]func(){"NewServer": func() { NewServer(echo, d) }, "NewStdServer": func() { NewStdServer(echo, d) }} {
			func() {
				defer func() {
					if recover() == nil {
						t.Errorf("%s with %+v made a server", name, d)
					}
				}()
				make()
			}()
		}
	}
}
