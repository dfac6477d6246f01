package router

import (
	"context"
	"errors"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"gitea.mynodes.xyz/ilker/llmgw/internal/config"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/tenant"
	"gitea.mynodes.xyz/ilker/llmgw/internal/limits"
	"gitea.mynodes.xyz/ilker/llmgw/internal/openai"
)

// oneKey knows one key, "sk-good", with the given limits.
type oneKey struct{ limits tenant.Limits }

func (k oneKey) Authenticate(_ context.Context, secret string) (*tenant.Key, error) {
	if secret != "sk-good" {
		return nil, openai.Unauthorized("Incorrect API key provided.")
	}
	return &tenant.Key{ID: "key_1", Tenant: "acme/search/alice", Limits: k.limits}, nil
}

// keyedRouter is a router that needs keys and enforces their limits in
// process, in front of up.
func keyedRouter(t *testing.T, lim tenant.Limits, up http.Handler) *Router {
	t.Helper()
	s := httptest.NewServer(up)
	t.Cleanup(s.Close)
	cfg := config.Default()
	cat, err := catalog.New([]catalog.Pool{{Name: "main", Endpoints: []catalog.Endpoint{{URL: s.URL + "/v1"}}}},
		[]catalog.Model{{Name: "m", Pool: "main"}})
	if err != nil {
		t.Fatal(err)
	}
	r, err := New(Options{Server: cfg.Server, Router: cfg.Router, Auth: oneKey{lim}, Limits: limits.NewLocal()})
	if err != nil {
		t.Fatal(err)
	}
	r.SetCatalog(cat)
	return r
}

// watchedBody is a request body that counts the reads made of it.
type watchedBody struct {
	io.Reader
	reads atomic.Int64
}

func (b *watchedBody) Read(p []byte) (int, error) {
	b.reads.Add(1)
	return b.Reader.Read(p)
}

func (*watchedBody) Close() error { return nil }

// TestBodyNotReadWithoutAKey: a request with no key, or a wrong one, is
// refused from its headers, before any of its body is read.
func TestBodyNotReadWithoutAKey(t *testing.T) {
	up := &upstream{tokens: 1}
	r := keyedRouter(t, tenant.Limits{}, up)
	for _, auth := range []string{"", "Bearer sk-wrong"} {
		body := &watchedBody{Reader: strings.NewReader(`{"model":"m","messages":[]}`)}
		req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil)
		req.Body, req.ContentLength = body, 8<<20
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		w := httptest.NewRecorder()
		r.ServeHTTP(w, req)
		if w.Code != http.StatusUnauthorized || body.reads.Load() != 0 {
			t.Errorf("Authorization %q: status %d after %d reads of the body; want 401 after none", auth, w.Code, body.reads.Load())
		}
	}
	if up.hits.Load() != 0 {
		t.Errorf("the upstream was called %d times", up.hits.Load())
	}
}

// TestHugeMaxTokensMeetsTokenLimits: max_tokens near 2^63 must not wrap
// the reservation round to a small number that a TPM limit lets through.
func TestHugeMaxTokensMeetsTokenLimits(t *testing.T) {
	up := &upstream{tokens: 1}
	r := keyedRouter(t, tenant.Limits{TPM: 1000}, up)
	for _, n := range []string{"9223372036854775807", "9223372036854775000", "4611686018427387904"} {
		req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions",
			strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":`+n+`}`))
		req.Header.Set("Authorization", "Bearer sk-good")
		w := httptest.NewRecorder()
		r.ServeHTTP(w, req)
		if w.Code == http.StatusOK {
			t.Errorf("max_tokens %s: 200; want a refusal", n)
		}
	}
	if up.hits.Load() != 0 {
		t.Errorf("the upstream was called %d times", up.hits.Load())
	}
}

func TestAddTokensSaturates(t *testing.T) {
	for _, c := range []struct{ a, b, want int64 }{
		{1, 2, 3},
		{10, math.MaxInt64, math.MaxInt64},
		{math.MaxInt64, 1, math.MaxInt64},
		{math.MaxInt64 - 5, 5, math.MaxInt64},
		{0, math.MaxInt64, math.MaxInt64},
	} {
		if got := addTokens(c.a, c.b); got != c.want {
			t.Errorf("addTokens(%d, %d) = %d; want %d", c.a, c.b, got, c.want)
		}
	}
}

// stalled yields a few bytes of a body, then fails as a connection whose
// client went quiet would.
type stalled struct{ sent bool }

var errStalled = errors.New("stalled")

func (s *stalled) Read(p []byte) (int, error) {
	if s.sent {
		return 0, errStalled
	}
	s.sent = true
	return copy(p, `{"model":`), nil
}

// TestBodyBufferGrowsAsBytesArrive: a claimed Content-Length does not size
// the buffer; what arrives does.
func TestBodyBufferGrowsAsBytesArrive(t *testing.T) {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 8 {
		if _, err := readBody(&stalled{}, 8<<20); !errors.Is(err, errStalled) {
			t.Fatalf("readBody: %v; want the reader's error", err)
		}
	}
	runtime.ReadMemStats(&after)
	if got := after.TotalAlloc - before.TotalAlloc; got > 1<<20 {
		t.Errorf("8 bodies claiming 8 MiB and sending 9 bytes allocated %d bytes; want under 1 MiB", got)
	}
}

func TestReadBody(t *testing.T) {
	long := strings.Repeat("x", 200<<10)
	for _, c := range []struct {
		name    string
		body    string
		length  int64
		wantErr bool
	}{
		{"empty", "", 0, false},
		{"unknown length", long, -1, false},
		{"exact length", long, int64(len(long)), false},
		{"short of its length", long, int64(len(long)) + 1, true},
		{"past its length", long, int64(len(long)) - 1, true},
		{"small", "{}", 2, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := readBody(strings.NewReader(c.body), c.length)
			if c.wantErr {
				if err == nil {
					t.Errorf("no error")
				}
				return
			}
			if err != nil || string(got) != c.body {
				t.Errorf("got %d bytes, err %v; want %d bytes", len(got), err, len(c.body))
			}
		})
	}
}
