package proxy

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// scripted is an upstream that writes exact bytes, the test being the
// upstream: its answer func writes each request's answer on the
// connection itself, knowing the connection's number and the request's
// on it (both from 0), and says whether the connection stays open.
type scripted struct {
	ln     net.Listener
	URL    string
	answer func(c net.Conn, conn, req int) (keep bool)

	conns  atomic.Int64 // connections accepted
	mu     sync.Mutex   // protects closed
	closed []int        // the connections that ended, by number, in the order they did
	wg     sync.WaitGroup
}

func newScripted(t testing.TB, answer func(c net.Conn, conn, req int) bool) *scripted {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return newScriptedOn(t, ln, answer)
}

// newScriptedOn is newScripted on ln, which it closes at the test's end.
func newScriptedOn(t testing.TB, ln net.Listener, answer func(c net.Conn, conn, req int) bool) *scripted {
	t.Helper()
	s := &scripted{ln: ln, URL: "http://" + ln.Addr().String(), answer: answer}
	var open sync.Map // of net.Conn
	s.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			open.Store(c, true)
			n := int(s.conns.Add(1) - 1)
			s.wg.Go(func() {
				s.serve(c, n)
				open.Delete(c)
			})
		}
	})
	t.Cleanup(func() {
		ln.Close()
		open.Range(func(c, _ any) bool { c.(net.Conn).Close(); return true })
		s.wg.Wait()
	})
	return s
}

// serve reads requests from c and answers them, until either side closes
// it; it notes when the client's side closed.
func (s *scripted) serve(c net.Conn, n int) {
	defer func() {
		c.Close()
		s.mu.Lock()
		s.closed = append(s.closed, n)
		s.mu.Unlock()
	}()
	br := bufio.NewReader(c)
	for i := 0; ; i++ {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		io.Copy(io.Discard, req.Body)
		if !s.answer(c, n, i) {
			return
		}
	}
}

// ended is the connections that have ended, by number.
func (s *scripted) ended() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int(nil), s.closed...)
}

// waitEnded waits up to d for n connections to have ended, and returns
// those that have.
func (s *scripted) waitEnded(n int, d time.Duration) []int {
	deadline := time.Now().Add(d)
	for {
		e := s.ended()
		if len(e) >= n || time.Now().After(deadline) {
			return e
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// answer is a complete answer of body, kept alive.
func answer(body string) string {
	return "HTTP/1.1 200 OK\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
}
