package proxy

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"
)

// callWithBody makes a call as the proxy does, its body handed beside the
// request, with 5 s to make it: the path on which an idle connection is
// looked at as the request is sent.
func callWithBody(tr *h1Transport, rawURL, body string) (status int, got string, err error) {
	return callWithBodyIn(tr, rawURL, body, 5*time.Second)
}

func callWithBodyIn(tr *h1Transport, rawURL, body string, d time.Duration) (status int, got string, err error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return 0, "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	req := &http.Request{Method: http.MethodPost, URL: u, Host: u.Host, Header: http.Header{},
		Body: newRequestBody([]byte(body)), ContentLength: int64(len(body))}
	resp, err := tr.roundTrip(ctx, nil, req, []byte(body))
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// An idle connection that the upstream closed, reset, or sent bytes on
// that no request asked for is found as the next request is sent, before
// any of it is written there: the request goes on a new connection and
// gets its own answer, for a request that fits the write buffer and one
// that does not (whose first part is written before the wait for the
// answer begins).
func TestTransportLooksAtAnIdleConnectionAsItSends(t *testing.T) {
	const stray = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nWRONG"
	for _, idle := range []string{"closed", "reset", "stray bytes"} {
		for _, size := range []int{2, 3 * connBufSize} {
			t.Run(idle+", "+strconv.Itoa(size)+" bytes", func(t *testing.T) {
				s := newScripted(t, func(c net.Conn, conn, req int) bool {
					io.WriteString(c, answer("answer "+strconv.Itoa(conn)+"."+strconv.Itoa(req)))
					if conn > 0 {
						return true
					}
					time.Sleep(20 * time.Millisecond) // the first answer is read, its connection idle
					switch idle {
					case "closed":
						return false
					case "reset":
						c.(*net.TCPConn).SetLinger(0)
						return false
					}
					io.WriteString(c, stray)
					io.Copy(io.Discard, c) // until the client closes
					return false
				})
				tr := newTestTransport()
				defer tr.CloseIdleConnections()
				body := `{"p":"` + strings.Repeat("x", size) + `"}`
				if _, got, err := callWithBody(tr, s.URL, body); got != "answer 0.0" || err != nil {
					t.Fatalf("first call: %q, %v", got, err)
				}
				if idle != "stray bytes" && len(s.waitEnded(1, 5*time.Second)) != 1 {
					t.Fatal("the upstream did not close the idle connection")
				}
				time.Sleep(40 * time.Millisecond) // the close, reset or stray bytes are in
				status, got, err := callWithBody(tr, s.URL, body)
				if status != http.StatusOK || got != "answer 1.0" || err != nil {
					t.Errorf("second call: %d %q %v; want 200 %q on a new connection", status, got, err, "answer 1.0")
				}
				if n := s.conns.Load(); n != 2 {
					t.Errorf("%d connections, want 2", n)
				}
				if idle == "stray bytes" {
					if e := s.waitEnded(1, 5*time.Second); len(e) != 1 || e[0] != 0 {
						t.Errorf("ended %v; want the connection with stray bytes closed", e)
					}
				}
			})
		}
	}
}

// A request on a connection whose socket takes only part of it at once
// is written whole, the rest with a write that waits, and gets its
// answer.
func TestTransportSendsARequestLargerThanTheSocketTakes(t *testing.T) {
	s := newScripted(t, func(c net.Conn, conn, req int) bool {
		io.WriteString(c, answer("done"))
		return true
	})
	tr := newTestTransport()
	defer tr.CloseIdleConnections()
	body := strings.Repeat("y", 16<<20)
	for i := range 2 {
		if status, got, err := callWithBody(tr, s.URL, body); status != http.StatusOK || got != "done" || err != nil {
			t.Fatalf("call %d: %d %q %v", i, status, got, err)
		}
	}
	if n := s.conns.Load(); n != 1 {
		t.Errorf("%d connections, want 1", n)
	}
}
