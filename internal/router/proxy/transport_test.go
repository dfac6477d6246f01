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
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
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
