package h1

import (
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// A request net/http's server refuses is answered with an error, its
// connection closes, and the handler never sees it nor what follows it.
func TestRefusedRequests(t *testing.T) {
	var served atomic.Int32
	_, addr := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		echo(w, r)
	}), func(s *Server) { s.MaxHeaderBytes = 1 << 10 })
	for _, tt := range []struct {
		name, raw string
		status    int
	}{
		{"not HTTP", "HELLO\r\n\r\n", 400},
		{"no Host", "GET / HTTP/1.1\r\n\r\n", 400},
		{"bad header line", "GET / HTTP/1.1\r\nHost: x\r\nno colon\r\n\r\n", 400},
		{"two lengths", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab", 400},
		{"headers too long", "GET / HTTP/1.1\r\nHost: x\r\nX-Long: " + strings.Repeat("a", 8<<10) + "\r\n\r\n", 431},
		{"unknown expectation", "POST / HTTP/1.1\r\nHost: x\r\nExpect: teapot\r\nContent-Length: 1\r\n\r\na", 417},
		// The parser keeps a name with a space before its colon as a
		// header of its own: the body would be read as the next request.
		{"space before a colon", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length : 37\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n", 400},
		{"space in a name", "GET / HTTP/1.1\r\nHost: x\r\nX Y: z\r\n\r\n", 400},
		{"HTTP/9.9", "GET / HTTP/9.9\r\nHost: x\r\n\r\n", 505},
		{"HTTP/2.0 without the preface", "GET / HTTP/2.0\r\nHost: x\r\n\r\n", 505},
		{"HTTP/0.9", "GET / HTTP/0.9\r\nHost: x\r\n\r\n", 505},
		{"absolute form without Host", "GET http://x/ HTTP/1.1\r\n\r\n", 400},
		{"two Hosts", "GET / HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n", 400},
		{"malformed Host", "GET / HTTP/1.1\r\nHost: x y\r\n\r\n", 400},
		{"malformed Host beside an absolute form", "GET http://x/ HTTP/1.1\r\nHost: x/y\r\n\r\n", 400},
	} {
		t.Run(tt.name, func(t *testing.T) {
			served.Store(0)
			c := dial(t, addr)
			c.send(tt.raw)
			resp, body := c.answer("GET")
			if resp.StatusCode != tt.status {
				t.Errorf("status %d, want %d", resp.StatusCode, tt.status)
			}
			if tt.status != 417 && !strings.Contains(body, `"type":"invalid_request_error"`) {
				t.Errorf("body %q is not an OpenAI-style error", body)
			}
			if !c.closed() {
				t.Error("the connection stayed open")
			}
			if n := served.Load(); n != 0 {
				t.Errorf("the handler served %d requests", n)
			}
		})
	}
}

// What net/http's server serves, h1 serves the same: each request's
// answers, as echo gives them.
func TestServedAsNetHTTPServes(t *testing.T) {
	_, addr := serve(t, echo)
	for _, tt := range []struct {
		name, raw string
		want      []string
	}{
		{"empty Host", "GET /a HTTP/1.1\r\nHost:\r\n\r\n", []string{"GET /a "}},
		{"absolute form with Host", "GET http://x/a HTTP/1.1\r\nHost: y\r\n\r\n", []string{"GET /a "}},
		{"HTTP/1.0 expecting 100-continue", "POST /a HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\nhi", []string{"POST /a hi"}},
		{"100-continue among expectations", "POST /a HTTP/1.1\r\nHost: x\r\nExpect: 100-continue, x\r\nContent-Length: 0\r\n\r\n", []string{"POST /a "}},
		{"line break after a POST's body",
			"POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi\r\nGET /b HTTP/1.1\r\nHost: x\r\n\r\n",
			[]string{"POST /a hi", "GET /b "}},
		{"HTTP/1.2 is read as 1.1", "GET /a HTTP/1.2\r\nHost: x\r\n\r\n", []string{"GET /a "}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := dial(t, addr)
			c.send(tt.raw)
			var got []string
			for range tt.want {
				resp, body := c.answer("GET")
				if resp.StatusCode != 200 {
					t.Fatalf("status %d: %s", resp.StatusCode, body)
				}
				got = append(got, body)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("answers (-want +got):\n%s", diff)
			}
		})
	}
}

// A connection carries the next request only when neither the client nor
// the handler asks for it to close.
func TestConnectionClose(t *testing.T) {
	_, addr := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/close" {
			w.Header().Set("Connection", "close")
		}
		io.WriteString(w, r.URL.Path)
	}))
	const next = "GET /next HTTP/1.1\r\nHost: x\r\n\r\n"
	for _, tt := range []struct {
		name, raw string
		kept      bool
	}{
		{"HTTP/1.1", "GET / HTTP/1.1\r\nHost: x\r\n\r\n", true},
		{"close", "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", false},
		{"close in a second Connection", "GET / HTTP/1.1\r\nHost: x\r\nConnection: te\r\nConnection: close\r\n\r\n", false},
		{"close beside another token", "GET / HTTP/1.1\r\nHost: x\r\nConnection: close te\r\n\r\n", false},
		{"the handler closes", "GET /close HTTP/1.1\r\nHost: x\r\n\r\n", false},
		{"HTTP/1.0", "GET / HTTP/1.0\r\n\r\n", false},
		{"HTTP/1.0 keep-alive", "GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", true},
		{"HTTP/1.0 keep-alive in a second Connection", "GET / HTTP/1.0\r\nConnection: te\r\nConnection: keep-alive\r\n\r\n", false},
		{"HTTP/1.0 keep-alive and close", "GET / HTTP/1.0\r\nConnection: keep-alive, close\r\n\r\n", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := dial(t, addr)
			c.send(tt.raw + next)
			if resp, _ := c.answer("GET"); resp.Close == tt.kept {
				t.Errorf("the answer's Close is %v, want %v", resp.Close, !tt.kept)
			}
			if !tt.kept {
				if !c.closed() {
					t.Error("the connection carried the next request")
				}
				return
			}
			if _, body := c.answer("GET"); body != "/next" {
				t.Errorf("the next request's answer %q", body)
			}
		})
	}
}

// A trailer the request did not declare reaches the handler once it has
// read the body, as in net/http.
func TestUndeclaredTrailer(t *testing.T) {
	_, addr := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body)
		io.WriteString(w, r.Trailer.Get("X-Sum"))
	}))
	c := dial(t, addr)
	c.send("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\nX-Sum: 42\r\n\r\n")
	if _, body := c.answer("POST"); body != "42" {
		t.Errorf("the handler saw the trailer as %q, want 42", body)
	}
}
