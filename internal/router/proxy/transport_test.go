package proxy

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"gitea.mynodes.xyz/ilker/llmgw/internal/openai"
)

// countingServer is an upstream that counts the connections made to it.
type countingServer struct {
	*httptest.Server
	conns atomic.Int64
}

func newCountingServer(t *testing.T, h http.HandlerFunc) *countingServer {
	s := &countingServer{}
	s.Server = httptest.NewUnstartedServer(h)
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.conns.Add(1)
		}
	}
	s.Start()
	t.Cleanup(s.Close)
	return s
}

func newTestTransport() *h1Transport {
	return newH1Transport(&net.Dialer{Timeout: time.Second}, time.Minute, http.DefaultTransport)
}

func post(t *testing.T, rt http.RoundTripper, ctx context.Context, url, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func echo(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	w.Header().Set("Content-Type", r.Header.Get("Content-Type"))
	w.Write(append([]byte(r.Method+" "+r.URL.Path+" "), b...))
}

func TestTransportReusesConnections(t *testing.T) {
	s := newCountingServer(t, echo)
	tr := newTestTransport()
	for i := range 6 {
		resp := post(t, tr, t.Context(), s.URL+"/v1/chat/completions", `{"n":`+string(rune('0'+i))+`}`)
		var b []byte
		if i%2 == 0 {
			b, _ = io.ReadAll(resp.Body)
		} else {
			// Read no further than the length, as the proxy reads plain
			// answers: the connection goes back all the same.
			b = make([]byte, resp.ContentLength)
			io.ReadFull(resp.Body, b)
		}
		resp.Body.Close()
		if want := `POST /v1/chat/completions {"n":` + string(rune('0'+i)) + `}`; string(b) != want || resp.Header.Get("Content-Type") != "application/json" {
			t.Fatalf("got %q %v, want %q", b, resp.Header, want)
		}
	}
	if n := s.conns.Load(); n != 1 {
		t.Errorf("6 requests in turn used %d connections, want 1", n)
	}
}

func TestTransportClosesAConnectionLeftMidAnswer(t *testing.T) {
	s := newCountingServer(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Write(bytes.Repeat([]byte("x"), 64<<10))
	})
	tr := newTestTransport()
	resp := post(t, tr, t.Context(), s.URL, "{}")
	resp.Body.Read(make([]byte, 10))
	resp.Body.Close()
	resp = post(t, tr, t.Context(), s.URL, "{}")
	if b, _ := io.ReadAll(resp.Body); len(b) != 64<<10 {
		t.Errorf("read %d bytes", len(b))
	}
	resp.Body.Close()
	if n := s.conns.Load(); n != 2 {
		t.Errorf("%d connections, want 2: one left mid-answer must not be reused", n)
	}
}

func TestTransportRetriesAConnectionTheServerClosed(t *testing.T) {
	s := newCountingServer(t, echo)
	tr := newTestTransport()
	resp := post(t, tr, t.Context(), s.URL, "a")
	io.ReadAll(resp.Body)
	resp.Body.Close()
	s.CloseClientConnections() // as a server's idle timeout would
	resp = post(t, tr, t.Context(), s.URL, "b")
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "POST / b" || s.conns.Load() != 2 {
		t.Errorf("got %q over %d connections", b, s.conns.Load())
	}
}

func TestTransportCancelUnblocksARead(t *testing.T) {
	release := make(chan struct{})
	s := newCountingServer(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Write([]byte("first"))
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	defer close(release)
	tr := newTestTransport()
	cause := errors.New("the client left")
	ctx, cancel := context.WithCancelCause(t.Context())
	resp := post(t, tr, ctx, s.URL, "{}")
	buf := make([]byte, 5)
	if _, err := io.ReadFull(resp.Body, buf); err != nil || string(buf) != "first" {
		t.Fatalf("first read: %q %v", buf, err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := resp.Body.Read(buf)
		done <- err
	}()
	cancel(cause)
	select {
	case err := <-done:
		if err == nil {
			t.Error("a read after cancel succeeded")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("cancel did not unblock the read")
	}
	resp.Body.Close()
}

// ownAfterFunc is a context with an AfterFunc of its own, as a request's
// context from llmgw's HTTP/1.1 server has, which counts its calls.
type ownAfterFunc struct {
	context.Context
	calls atomic.Int32
}

func (c *ownAfterFunc) AfterFunc(f func()) func() bool {
	c.calls.Add(1)
	return context.AfterFunc(c.Context, f)
}

// A call whose context has its own AfterFunc is ended through it: the
// end of the context interrupts a read blocked on the upstream.
func TestTransportEndsThroughTheContextsAfterFunc(t *testing.T) {
	release := make(chan struct{})
	s := newCountingServer(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	defer close(release)
	parent, cancel := context.WithCancel(t.Context())
	ctx := &ownAfterFunc{Context: parent}
	resp := post(t, newTestTransport(), ctx, s.URL, "{}")
	defer resp.Body.Close()
	if n := ctx.calls.Load(); n != 1 {
		t.Errorf("the context's AfterFunc was called %d times, want 1", n)
	}
	done := make(chan error, 1)
	go func() {
		_, err := resp.Body.Read(make([]byte, 1))
		done <- err
	}()
	cancel()
	select {
	case err := <-done:
		if err == nil {
			t.Error("a read after the context ended succeeded")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the context's end did not unblock the read")
	}
}

func TestTransportStreamsChunks(t *testing.T) {
	next := make(chan struct{})
	s := newCountingServer(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		for _, ev := range []string{"data: 1\n\n", "data: 2\n\n"} {
			io.WriteString(w, ev)
			w.(http.Flusher).Flush()
			<-next // the next event only once the client has the last
		}
	})
	tr := newTestTransport()
	resp := post(t, tr, t.Context(), s.URL, "{}")
	for _, want := range []string{"data: 1\n\n", "data: 2\n\n"} {
		buf := make([]byte, len(want))
		if _, err := io.ReadFull(resp.Body, buf); err != nil || string(buf) != want {
			t.Fatalf("read %q %v, want %q", buf, err, want)
		}
		next <- struct{}{}
	}
	if rest, err := io.ReadAll(resp.Body); err != nil || len(rest) != 0 {
		t.Errorf("after the stream: %q %v", rest, err)
	}
	resp.Body.Close()
	// The chunked answer was read to its end: the connection is reused.
	resp = post(t, tr, t.Context(), s.URL, "{}")
	go func() { next <- struct{}{}; next <- struct{}{} }()
	io.ReadAll(resp.Body)
	resp.Body.Close()
	if n := s.conns.Load(); n != 1 {
		t.Errorf("%d connections, want 1", n)
	}
}

func TestTransportHonoursConnectionClose(t *testing.T) {
	s := newCountingServer(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Connection", "close")
		w.Write([]byte("bye"))
	})
	tr := newTestTransport()
	for range 2 {
		resp := post(t, tr, t.Context(), s.URL, "{}")
		io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	if n := s.conns.Load(); n != 2 {
		t.Errorf("%d connections, want 2", n)
	}
}

func TestTransportConcurrent(t *testing.T) {
	s := newCountingServer(t, echo)
	tr := newTestTransport()
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			for i := range 20 {
				body := strings.Repeat("y", g*100+i)
				resp := post(t, tr, t.Context(), s.URL+"/x", body)
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if string(b) != "POST /x "+body {
					t.Errorf("goroutine %d request %d: got %d bytes", g, i, len(b))
				}
			}
		})
	}
	wg.Wait()
	if n := s.conns.Load(); n > 16 {
		t.Errorf("%d connections for 16 concurrent callers", n)
	}
}

func TestTransportHTTPSFallsBack(t *testing.T) {
	s := httptest.NewTLSServer(http.HandlerFunc(echo))
	defer s.Close()
	fallback := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: s.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs}}
	tr := newH1Transport(&net.Dialer{}, time.Minute, fallback)
	resp := post(t, tr, t.Context(), s.URL+"/v1", "secure")
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "POST /v1 secure" {
		t.Errorf("got %q", b)
	}
}

// call makes one POST through rt and reads its answer whole, within d.
func call(rt http.RoundTripper, url string, d time.Duration) (status int, body string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader("{}"))
	if err != nil {
		return 0, "", err
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// An informational (1xx) head is not the answer: it is skipped, and the
// answer after it, however late, is the call's — not the next call's.
func TestTransportSkipsInformationalAnswers(t *testing.T) {
	for _, tt := range []struct {
		name  string
		heads string
	}{
		{"100 Continue", "HTTP/1.1 100 Continue\r\n\r\n"},
		{"103 Early Hints", "HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n"},
		{"five of them", strings.Repeat("HTTP/1.1 100 Continue\r\n\r\n", 2) + strings.Repeat("HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n", 3)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := newScripted(t, func(c net.Conn, conn, req int) bool {
				if req == 0 {
					io.WriteString(c, tt.heads)
					time.Sleep(300 * time.Millisecond)
					io.WriteString(c, answer("first"))
				} else {
					io.WriteString(c, answer("second"))
				}
				return true
			})
			tr := newTestTransport()
			defer tr.CloseIdleConnections()
			for _, want := range []string{"first", "second"} {
				status, got, err := call(tr, s.URL, 5*time.Second)
				if status != 200 || got != want || err != nil {
					t.Fatalf("got %d %q %v, want 200 %q", status, got, err, want)
				}
			}
			if n := s.conns.Load(); n != 1 {
				t.Errorf("%d connections, want 1", n)
			}
		})
	}
}

// What no request asks for, or too much of it, fails the call and closes
// its connection: a 101 (llmgw asks for no upgrade), more than max1xx
// informational heads, a head longer than maxResponseHead (in one head or
// over several).
func TestTransportRefusesHeads(t *testing.T) {
	line := "X-Padding: " + strings.Repeat("p", 1000) + "\r\n"
	for _, tt := range []struct {
		name string
		sent string // before the backend stalls
		want error
	}{
		{"101", "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n" + answer("x"), errSwitchingProtocols},
		{"six informational heads", strings.Repeat("HTTP/1.1 103 Early Hints\r\n\r\n", 6) + answer("x"), errTooMany1xx},
		{"an endless head", "HTTP/1.1 200 OK\r\n" + strings.Repeat(line, 4<<10), errHeadTooLarge},
		{"long informational heads", strings.Repeat("HTTP/1.1 103 Early Hints\r\n"+strings.Repeat(line, 20)+"\r\n", 4) + answer("x"), errHeadTooLarge},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := newScripted(t, func(c net.Conn, conn, req int) bool {
				io.WriteString(c, tt.sent)
				io.Copy(io.Discard, c) // until the client closes
				return false
			})
			tr := newTestTransport()
			defer tr.CloseIdleConnections()
			_, got, err := call(tr, s.URL, 5*time.Second)
			if !errors.Is(err, tt.want) {
				t.Fatalf("got %q, %v; want %v", got, err, tt.want)
			}
			if e := s.waitEnded(1, 5*time.Second); len(e) != 1 {
				t.Error("the connection was not closed")
			}
		})
	}
}

// Bytes an upstream sends past the end of an answer answer nothing: the
// connection they came on is closed, not reused, whether they came with
// the end of the answer or after it — so they never reach the next call.
func TestTransportClosesAConnectionWithBytesPastTheAnswer(t *testing.T) {
	const stray = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nWRONG"
	chunked := "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: text/event-stream\r\n\r\n" +
		"d\r\ndata: first\n\n\r\n0\r\n\r\n"
	for _, tt := range []struct {
		name   string
		answer string
		later  bool // the stray bytes come after a pause, not with the answer
		stream bool // the body is read as the relay reads it, a piece at a time
	}{
		{"by length, with the end", answer("first"), false, false},
		{"by length, after it", answer("first"), true, false},
		{"in chunks, with the end", chunked, false, false},
		{"in chunks, after it", chunked, true, false},
		{"streamed, with the end", chunked, false, true},
		{"streamed, after it", chunked, true, true},
		{"no body, with the end", "HTTP/1.1 204 No Content\r\n\r\n", false, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			wrote := make(chan struct{})
			s := newScripted(t, func(c net.Conn, conn, req int) bool {
				if conn == 0 && req == 0 {
					if tt.later {
						io.WriteString(c, tt.answer)
						time.Sleep(20 * time.Millisecond)
						io.WriteString(c, stray)
					} else {
						io.WriteString(c, tt.answer+stray)
					}
					close(wrote)
					return true
				}
				io.WriteString(c, answer("second"))
				return true
			})
			tr := newTestTransport()
			defer tr.CloseIdleConnections()
			resp := post(t, tr, t.Context(), s.URL, "{}")
			var first []byte
			var err error
			if tt.stream {
				src := piecesOf(resp.Body)
				for {
					piece, perr := src.next(100, true)
					first = append(first, piece...)
					if perr != nil {
						if perr != io.EOF {
							err = perr
						}
						break
					}
				}
			} else {
				first, err = io.ReadAll(resp.Body)
			}
			resp.Body.Close()
			if err != nil {
				t.Fatalf("first answer: %v", err)
			}
			<-wrote
			time.Sleep(30 * time.Millisecond) // the stray bytes are in
			status, got, err := call(tr, s.URL, 5*time.Second)
			if status != 200 || got != "second" || err != nil {
				t.Fatalf("second call got %d %q %v, want 200 \"second\" (first got %q)", status, got, err, first)
			}
			if n := s.conns.Load(); n != 2 {
				t.Errorf("%d connections, want 2", n)
			}
		})
	}
}

// An upstream that closes idle connections soon (a short keep-alive
// timeout), with a FIN or a reset, costs no call: a closed connection is
// found when it leaves the pool, and a call that finds out only by
// writing to it or reading nothing back goes again on a new one.
func TestTransportUpstreamWithAShortKeepAlive(t *testing.T) {
	for _, reset := range []bool{false, true} {
		t.Run(map[bool]string{false: "close", true: "reset"}[reset], func(t *testing.T) {
			s := newScripted(t, func(c net.Conn, conn, req int) bool {
				io.WriteString(c, answer("ok"))
				time.Sleep(100 * time.Millisecond)
				if reset {
					c.(*net.TCPConn).SetLinger(0)
				}
				return false
			})
			tr := newTestTransport()
			defer tr.CloseIdleConnections()
			for i := range 8 {
				if i > 0 {
					time.Sleep(150 * time.Millisecond)
				}
				if status, got, err := call(tr, s.URL, 5*time.Second); status != 200 || got != "ok" || err != nil {
					t.Errorf("call %d: %d %q %v", i, status, got, err)
				}
			}
		})
	}
}

// noFD is a connection whose file descriptor is hidden, so that it
// cannot be looked at before reuse: the call learns it was closed only
// by writing to it.
type noFD struct{ net.Conn }

// A reused connection that cannot be written to, as the server reset it,
// is a stale one: the call goes again on a new connection.
func TestTransportRetriesAWriteToAResetConnection(t *testing.T) {
	s := newScripted(t, func(c net.Conn, conn, req int) bool {
		io.WriteString(c, answer("ok"))
		return true
	})
	tr := newTestTransport()
	defer tr.CloseIdleConnections()

	tr.put(resetConn(t, strings.TrimPrefix(s.URL, "http://")))

	if status, got, err := call(tr, s.URL, 5*time.Second); status != 200 || got != "ok" || err != nil {
		t.Fatalf("got %d %q %v", status, got, err)
	}
}

// A 204, a 304 and an answer to HEAD have no body, whatever their headers
// say: the call does not wait for one, and the connection is reused.
func TestTransportAnswersWithNoBody(t *testing.T) {
	for _, tt := range []struct {
		name, method, head string
	}{
		{"204, chunked", http.MethodPost, "HTTP/1.1 204 No Content\r\nTransfer-Encoding: chunked\r\n\r\n"},
		{"304, chunked", http.MethodPost, "HTTP/1.1 304 Not Modified\r\nTransfer-Encoding: chunked\r\n\r\n"},
		{"304, a length", http.MethodPost, "HTTP/1.1 304 Not Modified\r\nContent-Length: 100\r\n\r\n"},
		{"HEAD, chunked", http.MethodHead, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"},
		{"HEAD, a length", http.MethodHead, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := newScripted(t, func(c net.Conn, conn, req int) bool {
				if req == 0 {
					io.WriteString(c, tt.head)
				} else {
					io.WriteString(c, answer("second"))
				}
				return true
			})
			tr := newTestTransport()
			defer tr.CloseIdleConnections()
			ctx, cancel := context.WithTimeout(t.Context(), time.Second)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, tt.method, s.URL, nil)
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if len(b) != 0 || err != nil {
				t.Fatalf("body %q, %v; want none", b, err)
			}
			if status, got, err := call(tr, s.URL, 5*time.Second); status != 200 || got != "second" || err != nil {
				t.Fatalf("second call got %d %q %v", status, got, err)
			}
			if n := s.conns.Load(); n != 1 {
				t.Errorf("%d connections, want 1", n)
			}
		})
	}
}

// Connections idle longer than the idle timeout are closed even when no
// call comes to take them, and the timer that closes them is left unset
// once none is idle.
func TestTransportReapsIdleConnections(t *testing.T) {
	s := newScripted(t, func(c net.Conn, conn, req int) bool {
		io.WriteString(c, answer("ok"))
		return true
	})
	tr := newH1Transport(&net.Dialer{Timeout: time.Second}, 100*time.Millisecond, http.DefaultTransport)
	defer tr.CloseIdleConnections()
	// Three answers open at once, on three connections, then all idle.
	var open []*http.Response
	for range 3 {
		open = append(open, post(t, tr, t.Context(), s.URL, "{}"))
	}
	for _, resp := range open {
		io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	if e := s.ended(); len(e) != 0 {
		t.Fatalf("connections %v ended before they were idle long", e)
	}
	if e := s.waitEnded(3, 2*time.Second); len(e) != 3 {
		t.Fatalf("%d of 3 idle connections closed", len(e))
	}
	time.Sleep(50 * time.Millisecond)
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if tr.nidle != 0 || len(tr.idle) != 0 || tr.reaping {
		t.Errorf("after the reaping: %d idle, %d endpoints listed, timer set %v", tr.nidle, len(tr.idle), tr.reaping)
	}
}

// CloseIdleTo gives up one endpoint's connections: the idle ones close
// at once, one in use when its answer ends; the other endpoints' stay,
// and later calls to the endpoint pool their connections again.
func TestCloseIdleTo(t *testing.T) {
	ok := func(c net.Conn, conn, req int) bool {
		io.WriteString(c, answer("ok"))
		return true
	}
	a, b := newScripted(t, ok), newScripted(t, ok)
	tr := newTestTransport()
	p := &Proxy{rt: tr}
	defer p.CloseIdle()
	read := func(resp *http.Response) {
		t.Helper()
		if got, err := io.ReadAll(resp.Body); string(got) != "ok" || err != nil {
			t.Fatalf("got %q %v", got, err)
		}
		resp.Body.Close()
	}
	busy := post(t, tr, t.Context(), a.URL, "{}") // a's connection 0, in use
	read(post(t, tr, t.Context(), a.URL, "{}"))   // a's connection 1, idle
	read(post(t, tr, t.Context(), b.URL, "{}"))   // b's connection 0, idle

	p.CloseIdleTo(strings.TrimPrefix(a.URL, "http://"))
	if e := a.waitEnded(1, 2*time.Second); !cmp.Equal(e, []int{1}) {
		t.Fatalf("a's connections ended: %v, want [1]", e)
	}
	read(busy)
	if e := a.waitEnded(2, 2*time.Second); !cmp.Equal(e, []int{1, 0}) {
		t.Fatalf("a's connections ended: %v, want [1 0]", e)
	}
	for range 2 {
		read(post(t, tr, t.Context(), a.URL, "{}"))
		read(post(t, tr, t.Context(), b.URL, "{}"))
	}
	if n := a.conns.Load(); n != 3 {
		t.Errorf("a: %d connections, want 3 (one more after CloseIdleTo, reused)", n)
	}
	if n, e := b.conns.Load(), b.ended(); n != 1 || len(e) != 0 {
		t.Errorf("b: %d connections, %v ended; want 1, none", n, e)
	}
}

// The look an idle connection gets each time it leaves the pool, against
// a whole call on a reused connection: the cost of never reusing one the
// upstream closed or wrote to while it was idle.
func BenchmarkConnAlive(b *testing.B) {
	_, down := tcpPair(b)
	c := idleConn(down)
	b.ReportAllocs()
	for b.Loop() {
		if !c.alive() {
			b.Fatal("an open connection is not alive")
		}
	}
}

func BenchmarkTransportReusedCall(b *testing.B) {
	s := newScripted(b, func(c net.Conn, conn, req int) bool {
		io.WriteString(c, answer("ok"))
		return true
	})
	tr := newTestTransport()
	defer tr.CloseIdleConnections()
	b.ReportAllocs()
	for b.Loop() {
		if status, _, err := call(tr, s.URL, 5*time.Second); status != 200 || err != nil {
			b.Fatal(status, err)
		}
	}
}

// resetConn is a connection to host that its server has reset, as if it
// had served a call: the pool's to hand out next.
func resetConn(t *testing.T, host string) *h1Conn {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	srv, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	srv.(*net.TCPConn).SetLinger(0)
	srv.Close()
	time.Sleep(20 * time.Millisecond) // the reset is in
	c := &h1Conn{Conn: noFD{nc}, host: host}
	c.in.init(c.Conn)
	return c
}

// A call through the proxy that meets a stale connection goes again on a
// new one with the whole of its body.
func TestProxyResendsItsBodyAfterAStaleConnection(t *testing.T) {
	got := make(chan string, 2)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- string(b)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`)
	}))
	defer up.Close()
	p := New(time.Second, nil)
	defer p.CloseIdle()
	u, err := url.Parse(up.URL)
	if err != nil {
		t.Fatal(err)
	}
	p.rt.(*h1Transport).put(resetConn(t, u.Host))
	w := httptest.NewRecorder()
	o := p.Do(context.Background(), w, &Call{URL: u, Header: Headers("", false), Body: []byte(`{"model":"m"}`), Start: time.Now()})
	if o.Status != http.StatusOK || o.Err != nil {
		t.Fatalf("outcome %+v", o)
	}
	if b := <-got; b != `{"model":"m"}` {
		t.Fatalf("upstream got %q", b)
	}
}

// A call blocked writing its request to an upstream that reads nothing
// ends when its watchdog fires, or when its caller's context ends, with
// the cause of each.
func TestCallStuckWritingEnds(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close() // held open, never read
		}
	}()
	u, err := url.Parse("http://" + ln.Addr().String() + "/v1/chat/completions")
	if err != nil {
		t.Fatal(err)
	}
	body := make([]byte, 32<<20) // past what the sockets' buffers take
	for _, tt := range []struct {
		name       string
		firstByte  time.Duration
		leaveAfter time.Duration
		want       int
	}{
		{"the first byte's bound", 100 * time.Millisecond, 0, http.StatusGatewayTimeout},
		{"the client leaving", 0, 100 * time.Millisecond, openai.StatusClientClosed},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := New(time.Second, nil)
			defer p.CloseIdle()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tt.leaveAfter > 0 {
				time.AfterFunc(tt.leaveAfter, cancel)
			}
			done := make(chan Outcome, 1)
			go func() {
				done <- p.Do(ctx, httptest.NewRecorder(), &Call{URL: u, Header: Headers("", false), Body: body, Start: time.Now(), FirstByte: tt.firstByte})
			}()
			select {
			case o := <-done:
				if o.Status != tt.want {
					t.Fatalf("status %d, want %d (%v)", o.Status, tt.want, o.Err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("the call is still writing")
			}
		})
	}
}
