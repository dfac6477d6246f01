package router

import (
	"context"
	"errors"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"gitea.mynodes.xyz/ilker/llmgw/internal/config"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/tenant"
	"gitea.mynodes.xyz/ilker/llmgw/internal/limits"
	"gitea.mynodes.xyz/ilker/llmgw/internal/openai"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/proxy"
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
	r, err := New(Options{Server: serverOptions(cfg.Server), Router: routerOptions(cfg.Router), Auth: oneKey{lim}, Limits: limits.NewLocal()})
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
// the reservation round to a small number that a TPM limit lets through;
// past 2^31-1 it is refused outright, and up to there it is reserved in
// full.
func TestHugeMaxTokensMeetsTokenLimits(t *testing.T) {
	up := &upstream{tokens: 1}
	r := keyedRouter(t, tenant.Limits{TPM: 1000}, up)
	for n, want := range map[string]int{
		"9223372036854775807": http.StatusBadRequest,
		"9223372036854775000": http.StatusBadRequest,
		"4611686018427387904": http.StatusBadRequest,
		"2147483647":          http.StatusTooManyRequests,
	} {
		req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions",
			strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":`+n+`}`))
		req.Header.Set("Authorization", "Bearer sk-good")
		w := httptest.NewRecorder()
		r.ServeHTTP(w, req)
		if w.Code != want {
			t.Errorf("max_tokens %s: %d; want %d", n, w.Code, want)
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
		if _, err := proxy.ReadBody(&stalled{}, 8<<20); !errors.Is(err, errStalled) {
			t.Fatalf("readBody: %v; want the reader's error", err)
		}
	}
	runtime.ReadMemStats(&after)
	if got := after.TotalAlloc - before.TotalAlloc; got > 1<<20 {
		t.Errorf("8 bodies claiming 8 MiB and sending 9 bytes allocated %d bytes; want under 1 MiB", got)
	}
}

// TestReloadDropsARemovedEndpointsConnections: a catalog that no longer
// has an endpoint closes the gateway's idle connections to it.
func TestReloadDropsARemovedEndpointsConnections(t *testing.T) {
	closed := make(chan struct{}, 16)
	gone := httptest.NewUnstartedServer(&upstream{tokens: 1})
	gone.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateClosed {
			closed <- struct{}{}
		}
	}
	gone.Start()
	defer gone.Close()
	kept := httptest.NewServer(&upstream{tokens: 1})
	defer kept.Close()

	catalogOf := func(url string) *catalog.Catalog {
		cat, err := catalog.New([]catalog.Pool{{Name: "main", Endpoints: []catalog.Endpoint{{URL: url + "/v1"}}}},
			[]catalog.Model{{Name: "m", Pool: "main"}})
		if err != nil {
			t.Fatal(err)
		}
		return cat
	}
	cfg := config.Default()
	r, err := New(Options{Server: serverOptions(cfg.Server), Router: routerOptions(cfg.Router)})
	if err != nil {
		t.Fatal(err)
	}
	r.SetCatalog(catalogOf(gone.URL))
	w := httptest.NewRecorder()
	r.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(`{"model":"m","messages":[]}`)))
	if w.Code != http.StatusOK {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	select {
	case <-closed:
		t.Fatal("the connection closed before the reload")
	case <-time.After(50 * time.Millisecond):
	}
	r.SetCatalog(catalogOf(kept.URL))
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("the removed endpoint's idle connection is still open 5 s after the reload")
	}
}
