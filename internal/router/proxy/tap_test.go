package proxy

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// recordedTap records what a Call's Tap is told.
type recordedTap struct {
	mu     sync.Mutex
	status int
	ctype  string
	host   string
	body   bytes.Buffer
	eos    int  // pieces with eos
	after  bool // a piece came after one with eos
	pieces int
}

func (r *recordedTap) tap(status int, h http.Header, host string) func([]byte, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.status, r.ctype, r.host = status, h.Get("Content-Type"), host
	return func(b []byte, eos bool) {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.eos > 0 && len(b) > 0 {
			r.after = true
		}
		r.body.Write(b)
		r.pieces++
		if eos {
			r.eos++
		}
	}
}

// TestTapSeesTheUpstreamsAnswer: through either transport, a Call's Tap
// is told the upstream's status, headers and host, then its body as the
// upstream sent it — with the usage chunk the client is not shown and the
// model's name as the upstream wrote it — ending with eos.
func TestTapSeesTheUpstreamsAnswer(t *testing.T) {
	events := sse(roleChunk, tokA, tokB, finish, usageChunk) + "data: [DONE]\n\n"
	plain := `{"model":"org/m-8b","choices":[{"message":{"content":"hi"}}],"usage":{"prompt_tokens":5,"completion_tokens":1,"total_tokens":6}}`
	for _, stream := range []bool{true, false} {
		for _, std := range []bool{false, true} {
			t.Run(fmt.Sprintf("stream %v, net/http %v", stream, std), func(t *testing.T) {
				want, ctype := plain, "application/json"
				var up http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					w.Header().Set("Content-Type", ctype)
					w.Write([]byte(plain))
				})
				if stream {
					want, ctype, up = events, "text/event-stream", script{sse(roleChunk, tokA), sse(tokB, finish), sse(usageChunk) + "data: [DONE]\n\n"}
				}
				s := newServer(t, up)
				var rt http.RoundTripper
				if std {
					rt = StdTransport(time.Second)
				}
				rec := &recordedTap{}
				got, o := relayTo(t, rt, s.URL, Call{Stream: stream, StripUsage: stream, Model: "m", Tap: rec.tap})
				if o.Status != 200 || got == want {
					t.Fatalf("outcome %d, client read %q: want 200 and the answer changed for the client", o.Status, got)
				}
				rec.mu.Lock()
				defer rec.mu.Unlock()
				if rec.status != 200 || rec.ctype != ctype || rec.host != mustURL(t, s.URL).Host {
					t.Errorf("tap told status %d, content type %q, host %q; want 200, %q, %q", rec.status, rec.ctype, rec.host, ctype, mustURL(t, s.URL).Host)
				}
				if rec.body.String() != want {
					t.Errorf("tap read %q, want the upstream's %q", rec.body.String(), want)
				}
				if rec.eos == 0 || rec.after {
					t.Errorf("%d pieces, %d with eos, a piece after the end %v: want the end last", rec.pieces, rec.eos, rec.after)
				}
			})
		}
	}
}

// TestTapDeclined: a Tap that returns nil for an answer is told its head
// and none of its body, and the answer is relayed as without a Tap.
func TestTapDeclined(t *testing.T) {
	s := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
		w.Write([]byte("busy"))
	}))
	var status int
	_, o := relayTo(t, nil, s.URL, Call{Tap: func(st int, _ http.Header, _ string) func([]byte, bool) { status = st; return nil }})
	if status != http.StatusServiceUnavailable || o.Reason != ReasonStatus5xx {
		t.Errorf("tap told %d, outcome %q; want 503 and the upstream's 5xx", status, o.Reason)
	}
}

// newServer is h on a test server, closed with the test.
func newServer(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return s
}
