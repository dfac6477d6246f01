package router

// Routing end to end: requests through the Router to real upstreams that
// name their model as the backend does, report cached tokens, fail, and
// fail their health checks.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"gitea.mynodes.xyz/ilker/llmgw/internal/config"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/admission"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/pool"
)

// backend is a fake inference server that answers in the backend's own
// model name, reports promptTokens prompt tokens of which cached(n) were
// cached (on its n-th answer, from 1), and fails its requests or its
// health check on cue.
type backend struct {
	promptTokens int64
	cached       func(n int64) int64 // nil: no prompt_tokens_details
	status       atomic.Int32        // of chat requests; 0 is 200
	health       atomic.Int32        // of /health; 0 is 200
	hits         atomic.Int64        // chat requests seen
}

const backendModel = "org/m-8b"

func (b *backend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/health" {
		if s := b.health.Load(); s != 0 {
			w.WriteHeader(int(s))
		}
		return
	}
	n := b.hits.Add(1)
	body, _ := io.ReadAll(r.Body)
	if s := b.status.Load(); s != 0 {
		w.WriteHeader(int(s))
		io.WriteString(w, `{"error":{"message":"failing","type":"server_error","param":null,"code":null}}`)
		return
	}
	details := ""
	if b.cached != nil {
		details = fmt.Sprintf(`,"prompt_tokens_details":{"cached_tokens":%d}`, b.cached(n))
	}
	usage := fmt.Sprintf(`{"prompt_tokens":%d,"completion_tokens":3,"total_tokens":%d%s}`, b.promptTokens, b.promptTokens+3, details)
	var req struct{ Stream bool }
	json.Unmarshal(body, &req)
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"c1","object":"chat.completion","model":%q,"choices":[{"index":0,"message":{"role":"assistant","content":"a b c"},"finish_reason":"stop"}],"usage":%s}`, backendModel, usage)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	for i, tok := range []string{"a", " b", " c"} {
		finish := "null"
		if i == 2 {
			finish = `"stop"`
		}
		fmt.Fprintf(w, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"model\":%q,\"choices\":[{\"index\":0,\"delta\":{\"content\":%q},\"finish_reason\":%s}]}\n\n", backendModel, tok, finish)
		w.(http.Flusher).Flush()
	}
	fmt.Fprintf(w, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"model\":%q,\"choices\":[],\"usage\":%s}\n\ndata: [DONE]\n\n", backendModel, usage)
}

// endpointName is the name the router gives gateway g's endpoint k of
// pool.
func (g *testGateway) endpointName(pool string, k int) string {
	return g.r.snap.Load().pools[pool].Endpoints()[k].Name()
}

// waitFor polls cond until it holds, and fails t if it does not within
// ten seconds: what it waits for is what other goroutines do on their own
// schedule.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// endpointUpText is llmgw_endpoint_up as the exposition format writes it,
// for the given endpoints of pool main, in name order.
func endpointUpText(up map[string]int) string {
	var b strings.Builder
	b.WriteString("# HELP llmgw_endpoint_up Whether routing sends to the endpoint (1) or has taken it out (0): its health check fails, or it failed requests in a row.\n# TYPE llmgw_endpoint_up gauge\n")
	names := make([]string, 0, len(up))
	for n := range up {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		fmt.Fprintf(&b, "llmgw_endpoint_up{endpoint=%q,pool=\"main\"} %d\n", n, up[n])
	}
	return b.String()
}

func checkEndpointUp(t *testing.T, reg prometheus.Gatherer, up map[string]int) {
	t.Helper()
	if err := testutil.GatherAndCompare(reg, strings.NewReader(endpointUpText(up)), "llmgw_endpoint_up"); err != nil {
		t.Error(err)
	}
}

// withSpare puts a backend on pool spare as model fb, the fallback of m.
func withSpare(t *testing.T, spare http.Handler) func(*config.Config) {
	s := httptest.NewServer(spare)
	t.Cleanup(s.Close)
	return func(c *config.Config) {
		c.Pools[1].Endpoints = []catalog.Endpoint{{URL: s.URL + "/v1"}}
		c.Models[0].Fallbacks = []string{"fb"}
		c.Models = append(c.Models, catalog.Model{Name: "fb", Pool: "spare", Upstream: backendModel})
	}
}

// answerModels is every model an answer names: the plain answer's, or
// each streamed chunk's.
func answerModels(t *testing.T, body string, stream bool) []string {
	t.Helper()
	var models []string
	decode := func(s string) {
		var a struct{ Model *string }
		if err := json.Unmarshal([]byte(s), &a); err != nil {
			t.Fatalf("%v: %s", err, s)
		}
		if a.Model == nil {
			t.Errorf("an answer without a model: %s", s)
			return
		}
		models = append(models, *a.Model)
	}
	if !stream {
		decode(body)
		return models
	}
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok && d != "[DONE]" {
			decode(d)
		}
	}
	return models
}

// TestAnswerNamesTheCatalogModel: whatever the backend calls its model, the
// answer and every streamed chunk name the catalog's model, and
// X-Llmgw-Model says which served: on a fallback, the fallback.
func TestAnswerNamesTheCatalogModel(t *testing.T) {
	main, spare := &backend{promptTokens: 9}, &backend{promptTokens: 9}
	g := newTestGateway(t, withSpare(t, spare), main)
	for _, tc := range []struct {
		name     string
		failMain bool
		stream   bool
		want     string
		// fallbacks is llmgw_fallbacks_total{model=m,to=fb} by class:
		// unavailable, and none.
		fallbacks, unclassed float64
	}{
		{"plain", false, false, "m", 0, 0},
		{"streamed", false, true, "m", 0, 0},
		// The 503 is a failure of class unavailable, and ejects main's
		// one endpoint: the next request falls back with no call failed.
		{"plain on the fallback", true, false, "fb", 1, 0},
		{"streamed on the fallback", true, true, "fb", 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.failMain {
				main.status.Store(503)
			}
			req := `{"model":"a","messages":[]}`
			if tc.stream { // with the usage chunk, which names the model too
				req = `{"model":"a","stream":true,"stream_options":{"include_usage":true},"messages":[]}`
			}
			resp, body := g.post(t, "/v1/chat/completions", req)
			if resp.StatusCode != 200 {
				t.Fatalf("status %d: %s", resp.StatusCode, body)
			}
			if got := resp.Header.Get(modelHeader); got != tc.want {
				t.Errorf("%s: %q, want %q", modelHeader, got, tc.want)
			}
			models := answerModels(t, body, tc.stream)
			if tc.stream && len(models) != 4 {
				t.Errorf("%d chunks, want 4: %s", len(models), body)
			}
			for _, m := range models {
				if m != tc.want {
					t.Errorf("the answer names %q, want %q: %s", m, tc.want, body)
					break
				}
			}
			if got := testutil.ToFloat64(g.r.m.fallbacks.WithLabelValues("m", "fb", "unavailable")); got != tc.fallbacks {
				t.Errorf("llmgw_fallbacks_total{model=m,to=fb,class=unavailable} = %v, want %v", got, tc.fallbacks)
			}
			if got := testutil.ToFloat64(g.r.m.fallbacks.WithLabelValues("m", "fb", "")); got != tc.unclassed {
				t.Errorf(`llmgw_fallbacks_total{model=m,to=fb,class=""} = %v, want %v`, got, tc.unclassed)
			}
		})
	}
}

// healthChecked sets pool main's health check to probe every 20 ms.
func healthChecked(c *config.Config) {
	c.Pools[0].Health = catalog.HealthCheck{Path: "/health", Interval: 20 * time.Millisecond, Timeout: time.Second}
}

// TestEveryEndpointDown: when every endpoint of the pool fails its health
// check, the fallback model serves; with no fallback, one endpoint is
// tried anyway, as a last resort.
func TestEveryEndpointDown(t *testing.T) {
	t.Run("the fallback serves", func(t *testing.T) {
		a, b, spare := &backend{promptTokens: 9}, &backend{promptTokens: 9}, &backend{promptTokens: 9}
		a.health.Store(503)
		b.health.Store(503)
		g := newTestGateway(t, func(c *config.Config) { withSpare(t, spare)(c); healthChecked(c) }, a, b)
		waitDown(t, g, 2)
		resp, body := g.post(t, "/v1/chat/completions", `{"model":"m","messages":[]}`)
		if resp.StatusCode != 200 || resp.Header.Get(modelHeader) != "fb" {
			t.Fatalf("status %d from %q: %s", resp.StatusCode, resp.Header.Get(modelHeader), body)
		}
		if a.hits.Load()+b.hits.Load() != 0 || spare.hits.Load() != 1 {
			t.Errorf("main's endpoints saw %d and %d requests, spare %d; want 0, 0, 1", a.hits.Load(), b.hits.Load(), spare.hits.Load())
		}
		for k := range 2 {
			if got := testutil.ToFloat64(g.r.m.ejections.WithLabelValues("main", g.endpointName("main", k), "health_check")); got != 1 {
				t.Errorf("endpoint %d: %v health-check ejections, want 1", k, got)
			}
		}
	})

	t.Run("no fallback: the last resort", func(t *testing.T) {
		a, b := &backend{promptTokens: 9}, &backend{promptTokens: 9}
		a.health.Store(503)
		b.health.Store(503)
		g := newTestGateway(t, healthChecked, a, b)
		waitDown(t, g, 2)
		resp, body := g.post(t, "/v1/chat/completions", `{"model":"m","messages":[]}`)
		if resp.StatusCode != 200 {
			t.Fatalf("status %d: %s", resp.StatusCode, body)
		}
		if got := a.hits.Load() + b.hits.Load(); got != 1 {
			t.Errorf("%d requests reached the pool, want 1", got)
		}
		if got := testutil.ToFloat64(g.r.m.decisions.WithLabelValues("main", catalog.PolicyAuto, pool.ReasonLastResort)); got != 1 {
			t.Errorf("llmgw_route_decisions_total{reason=last_resort} = %v, want 1", got)
		}
	})
}

// waitDown waits until the first n endpoints of pool main are down.
func waitDown(t *testing.T, g *testGateway, n int) {
	t.Helper()
	waitFor(t, "the health checks to fail", func() bool {
		for _, ep := range g.r.snap.Load().pools["main"].Endpoints()[:n] {
			if !ep.Down() {
				return false
			}
		}
		return true
	})
}

// TestPassiveEjection: an endpoint that fails a request is taken out, for
// pool.EjectBase at first, and comes back by itself.
func TestPassiveEjection(t *testing.T) {
	bad, good := &backend{promptTokens: 9}, &backend{promptTokens: 9}
	bad.status.Store(500)
	g := newTestGateway(t, nil, bad, good)
	badName, goodName := g.endpointName("main", 0), g.endpointName("main", 1)
	var sent time.Time // when the request that failed was sent
	for i := 0; bad.hits.Load() == 0; i++ {
		if i == 10 {
			t.Fatal("10 requests and the failing endpoint was never picked")
		}
		sent = time.Now()
		if resp, body := g.post(t, "/v1/chat/completions", `{"model":"m","messages":[]}`); resp.StatusCode != 200 {
			t.Fatalf("status %d: %s", resp.StatusCode, body)
		}
	}
	if got := testutil.ToFloat64(g.r.m.ejections.WithLabelValues("main", badName, "failures")); got != 1 {
		t.Errorf("llmgw_ejections_total{reason=failures} = %v, want 1", got)
	}
	checkEndpointUp(t, g.reg, map[string]int{badName: 0, goodName: 1})
	for range 5 {
		g.post(t, "/v1/chat/completions", `{"model":"m","messages":[]}`)
	}
	if n := bad.hits.Load(); n != 1 {
		t.Errorf("the ejected endpoint saw %d requests, want 1", n)
	}

	waitFor(t, "the ejection to end", func() bool {
		return testutil.ToFloat64(g.r.m.ejections.WithLabelValues("main", badName, "failures")) == 1 &&
			!g.r.snap.Load().pools["main"].Endpoints()[0].Out(time.Now().UnixNano())
	})
	if took := time.Since(sent); took < pool.EjectBase {
		t.Errorf("back after %v, before the ejection's %v", took, pool.EjectBase)
	}
	checkEndpointUp(t, g.reg, map[string]int{badName: 1, goodName: 1})
}

// TestRetriesGoElsewhere: a request that fails before its first byte is
// sent to an endpoint not yet tried, and counted as a retry.
func TestRetriesGoElsewhere(t *testing.T) {
	bad1, bad2, good := &backend{promptTokens: 9}, &backend{promptTokens: 9}, &backend{promptTokens: 9}
	bad1.status.Store(502)
	bad2.status.Store(503)
	g := newTestGateway(t, func(c *config.Config) { c.Server.Retries = 2; c.Pools[0].Policy = catalog.PolicyRoundRobin }, bad1, bad2, good)
	for range 3 {
		if resp, body := g.post(t, "/v1/chat/completions", `{"model":"m","messages":[]}`); resp.StatusCode != 200 {
			t.Fatalf("status %d: %s", resp.StatusCode, body)
		}
	}
	// Each failing endpoint fails once and is ejected: no endpoint is
	// tried twice for one request, nor after it failed.
	if bad1.hits.Load() != 1 || bad2.hits.Load() != 1 || good.hits.Load() != 3 {
		t.Errorf("requests seen: %d, %d, %d; want 1, 1, 3", bad1.hits.Load(), bad2.hits.Load(), good.hits.Load())
	}
	if got := testutil.ToFloat64(g.r.m.retries.WithLabelValues("main", "status_5xx")); got != 2 {
		t.Errorf("llmgw_retries_total{reason=status_5xx} = %v, want 2", got)
	}
}

// TestRetryBudgetStopsRetries: once a pool's retries reach its budget, a
// failed request is answered with its failure rather than retried. A 429
// does not eject its endpoint, so it keeps being tried first.
func TestRetryBudgetStopsRetries(t *testing.T) {
	limited, good := &backend{promptTokens: 9}, &backend{promptTokens: 9}
	limited.status.Store(429)
	g := newTestGateway(t, func(c *config.Config) {
		c.Pools[0].Policy = catalog.PolicyRoundRobin
		c.Pools[0].RetryBudget = 0.1 // of 30 requests, 3: pool.MinRetries allows more
	}, limited, good)
	var retried, refused int
	for i := range 30 {
		l, gd := limited.hits.Load(), good.hits.Load()
		resp, body := g.post(t, "/v1/chat/completions", `{"model":"m","messages":[]}`)
		switch tried, served := limited.hits.Load() > l, good.hits.Load() > gd; {
		case tried && served:
			retried++
			if refused > 0 {
				t.Errorf("request %d was retried after the budget refused one", i)
			}
			if resp.StatusCode != 200 {
				t.Errorf("request %d: retried, status %d: %s", i, resp.StatusCode, body)
			}
		case tried:
			refused++
			if resp.StatusCode != http.StatusTooManyRequests {
				t.Errorf("request %d: not retried, status %d, want the upstream's 429: %s", i, resp.StatusCode, body)
			}
		}
	}
	if retried != pool.MinRetries || refused == 0 {
		t.Errorf("%d requests retried and %d refused a retry; want %d retried, then refusals", retried, refused, pool.MinRetries)
	}
	if got := testutil.ToFloat64(g.r.m.retries.WithLabelValues("main", "status_429")); got != pool.MinRetries {
		t.Errorf("llmgw_retries_total{reason=status_429} = %v, want %d", got, pool.MinRetries)
	}
}

// prefixRequest is a chat request whose messages are about 4 KiB, 16
// index blocks.
var prefixRequest = fmt.Sprintf(`{"model":"m","messages":[{"role":"system","content":%q},{"role":"user","content":"hi"}]}`, text(42, 4<<10))

func withBigBodies(c *config.Config) { c.Server.MaxBodyBytes = 1 << 20 }

// TestPrefixHitsAreChecked: the index predicts a hit for a prompt sent
// again to the endpoint that served it, once the first answer's first
// token said it was computed; an answer that reports none of it cached
// lowers the endpoint's precision, forgiving one block of the index the
// estimate may be off by, and one that reports it cached confirms the
// prediction.
func TestPrefixHitsAreChecked(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cached func(n int64) int64
		cold   bool
	}{
		{"cold", func(int64) int64 { return 0 }, true},
		{"warm", func(n int64) int64 {
			if n == 1 {
				return 0
			}
			return 1000
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := &backend{promptTokens: 1000, cached: tc.cached}
			g := newTestGateway(t, withBigBodies, up)
			for range 3 {
				if resp, body := g.post(t, "/v1/chat/completions", prefixRequest); resp.StatusCode != 200 {
					t.Fatalf("status %d: %s", resp.StatusCode, body)
				}
			}
			// The first answer was predicted nothing: the second and
			// third each all but the partial last block of 1,000 tokens.
			predicted := testutil.ToFloat64(g.r.m.predicted.WithLabelValues("main"))
			confirmed := testutil.ToFloat64(g.r.m.confirmed.WithLabelValues("main"))
			if predicted < 2*900 || predicted > 2*1000 {
				t.Errorf("llmgw_prefix_predicted_hits_total = %v, want nearly 2000", predicted)
			}
			wantConfirmed, wantPrecision := predicted, 1.0
			if tc.cold {
				// Each miss is a sample of one block's tokens of the
				// prefix's, smoothed in from 1.
				wantConfirmed = 0
				var body map[string]json.RawMessage
				if err := json.Unmarshal([]byte(prefixRequest), &body); err != nil {
					t.Fatal(err)
				}
				block, bytes := float64(g.r.snap.Load().pools["main"].Index().Block()), float64(len(body["messages"]))
				blocks := float64(len(g.promptHashes(t)))
				sample := float64(int64(block/bytes*1000)) / float64(int64(blocks*block/bytes*1000))
				for range 2 {
					wantPrecision += pool.CostSmoothing * (sample - wantPrecision)
				}
			}
			if confirmed != wantConfirmed {
				t.Errorf("llmgw_prefix_confirmed_hits_total = %v, want %v", confirmed, wantConfirmed)
			}
			if got := g.r.snap.Load().pools["main"].Endpoints()[0].Precision(); math.Abs(got-wantPrecision) > 1e-9 {
				t.Errorf("precision %v, want %v", got, wantPrecision)
			}
		})
	}
}

// TestTokensCounted: llmgw_tokens_total counts what the backend reported,
// plain and streamed, under the model that served.
func TestTokensCounted(t *testing.T) {
	up := &backend{promptTokens: 1000, cached: func(int64) int64 { return 640 }}
	g := newTestGateway(t, nil, up)
	for _, body := range []string{`{"model":"a","messages":[]}`, `{"model":"a","stream":true,"messages":[]}`} {
		if resp, b := g.post(t, "/v1/chat/completions", body); resp.StatusCode != 200 {
			t.Fatalf("status %d: %s", resp.StatusCode, b)
		}
	}
	want := `
# HELP llmgw_tokens_total Tokens served, by model, pool and kind: prompt, completion, and cached (prompt tokens the backend served from its prefix cache).
# TYPE llmgw_tokens_total counter
llmgw_tokens_total{kind="cached",model="m",pool="main"} 1280
llmgw_tokens_total{kind="completion",model="m",pool="main"} 6
llmgw_tokens_total{kind="prompt",model="m",pool="main"} 2000
`
	if err := testutil.GatherAndCompare(g.reg, strings.NewReader(want), "llmgw_tokens_total"); err != nil {
		t.Error(err)
	}
}

// memoryServers is an in-memory RoundTripper in front of a handler per
// host, for synctest bubbles, where sockets do not work. A host set
// stalled answers nothing until its request is cancelled.
type memoryServers struct {
	handlers map[string]http.Handler // key: host
	mu       sync.Mutex              // protects stalled
	stalled  map[string]bool         // key: host
}

func (m *memoryServers) stall(host string, stalled bool) {
	m.mu.Lock()
	m.stalled[host] = stalled
	m.mu.Unlock()
}

func (m *memoryServers) RoundTrip(r *http.Request) (*http.Response, error) {
	m.mu.Lock()
	stalled := m.stalled[r.URL.Host]
	m.mu.Unlock()
	if stalled {
		<-r.Context().Done()
		return nil, r.Context().Err()
	}
	h, ok := m.handlers[r.URL.Host]
	if !ok {
		return nil, fmt.Errorf("no server at %s", r.URL.Host)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	resp := w.Result()
	resp.Request = r
	return resp, nil
}

// TestHealthProbeTakesAStalledEndpointOut: with the default health check
// (every second, half a second to answer), an endpoint whose /health stops
// answering is out of the pool within two seconds, and back once it
// answers again.
func TestHealthProbeTakesAStalledEndpointOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := &backend{promptTokens: 9}, &backend{promptTokens: 9}
		servers := &memoryServers{handlers: map[string]http.Handler{"a.test": a, "b.test": b}, stalled: map[string]bool{}}
		p := catalog.Pool{Name: "main", Health: catalog.HealthCheck{Path: "/health"},
			Endpoints: []catalog.Endpoint{{URL: "http://a.test/v1"}, {URL: "http://b.test/v1"}}}
		config.PoolDefaults(&p)
		if p.Health.Interval != time.Second || p.Health.Timeout != 500*time.Millisecond {
			t.Fatalf("default health check %+v, want every 1s within 500ms", p.Health)
		}
		cat, err := catalog.New([]catalog.Pool{p}, []catalog.Model{{Name: "m", Pool: "main"}})
		if err != nil {
			t.Fatal(err)
		}
		cfg := config.Default()
		reg := prometheus.NewRegistry()
		r, err := New(Options{Server: serverOptions(cfg.Server), Router: routerOptions(cfg.Router), Registerer: reg, Transport: servers,
			ProbeClient: &http.Client{Transport: servers}, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		r.SetCatalog(cat)
		defer r.Close()
		chat := func() {
			t.Helper()
			w := httptest.NewRecorder()
			r.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(`{"model":"m","messages":[]}`)))
			if w.Code != 200 {
				t.Fatalf("status %d: %s", w.Code, w.Body)
			}
		}

		synctest.Wait() // the first probes have answered
		checkEndpointUp(t, reg, map[string]int{"a.test": 1, "b.test": 1})

		servers.stall("a.test", true) // just after a probe: the worst case
		time.Sleep(1400 * time.Millisecond)
		synctest.Wait()
		// The probe at 1 s has not yet run out of its 500 ms.
		checkEndpointUp(t, reg, map[string]int{"a.test": 1, "b.test": 1})
		time.Sleep(600 * time.Millisecond)
		synctest.Wait()
		checkEndpointUp(t, reg, map[string]int{"a.test": 0, "b.test": 1})
		if got := testutil.ToFloat64(r.m.ejections.WithLabelValues("main", "a.test", "health_check")); got != 1 {
			t.Errorf("llmgw_ejections_total{reason=health_check} = %v, want 1", got)
		}
		for range 4 {
			chat()
		}
		if a.hits.Load() != 0 || b.hits.Load() != 4 {
			t.Errorf("a saw %d requests and b %d while a was out; want 0 and 4", a.hits.Load(), b.hits.Load())
		}

		servers.stall("a.test", false)
		// A probe already waiting may still time out: back within one
		// interval and one timeout.
		time.Sleep(1500 * time.Millisecond)
		synctest.Wait()
		checkEndpointUp(t, reg, map[string]int{"a.test": 1, "b.test": 1})
	})
}

// TestRenamingAHostileStream: a backend's chunks that name the model oddly
// (an escaped key, twice, not as a string, only inside the choices) or are
// not JSON at all reach the client renamed only where the top-level model
// is a string, and otherwise byte for byte, each in its place.
func TestRenamingAHostileStream(t *testing.T) {
	chunks := []struct{ sent, want string }{
		{`{"id":"1","model":"org/m-8b","choices":[{"delta":{"content":"a"}}]}`, `{"id":"1","model":"m","choices":[{"delta":{"content":"a"}}]}`},
		{`{"id":"2","mod\u0065l":"org/m-8b","choices":[{"delta":{"content":"b"}}]}`, `{"id":"2","mod\u0065l":"m","choices":[{"delta":{"content":"b"}}]}`},
		{`{"id":"3","Model":"org/m-8b","choices":[{"delta":{"content":"c"}}]}`, `{"id":"3","Model":"org/m-8b","choices":[{"delta":{"content":"c"}}]}`},
		{`{"id":"4","model":{"name":"org/m-8b"},"choices":[{"delta":{"content":"d"}}]}`, `{"id":"4","model":{"name":"org/m-8b"},"choices":[{"delta":{"content":"d"}}]}`},
		{`{"id":"5","choices":[{"delta":{"content":"e"},"model":"org/m-8b"}]}`, `{"id":"5","choices":[{"delta":{"content":"e"},"model":"org/m-8b"}]}`},
		{`{"id":"6","model":"org/m-8b","model":"org/m-8b","choices":[{"delta":{"content":"f"}}]}`, `{"id":"6","model":"m","model":"org/m-8b","choices":[{"delta":{"content":"f"}}]}`},
		{`{"id":"7","model":"org/m-8b","choices":[{"delta":{"content":"g"}}]`, `{"id":"7","model":"m","choices":[{"delta":{"content":"g"}}]`},
		{`not json, "model":"org/m-8b"`, `not json, "model":"org/m-8b"`},
	}
	upstream := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		for _, c := range chunks {
			fmt.Fprintf(w, "data: %s\n\n", c.sent)
			w.(http.Flusher).Flush()
		}
		io.WriteString(w, "data: [DONE]\n\n")
	})
	g := newTestGateway(t, nil, upstream)
	resp, body := g.post(t, "/v1/chat/completions", `{"model":"m","stream":true,"messages":[]}`)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	var got []string
	for _, line := range strings.Split(body, "\n") {
		if d, ok := strings.CutPrefix(line, "data: "); ok && d != "[DONE]" {
			got = append(got, d)
		}
	}
	if len(got) != len(chunks) {
		t.Fatalf("%d events, want %d:\n%s", len(got), len(chunks), body)
	}
	for i, c := range chunks {
		if got[i] != c.want {
			t.Errorf("chunk %d:\n got %s\nwant %s", i+1, got[i], c.want)
		}
	}
}

// TestWaitedRequestRoutedBySLOLeft: auto routes an admitted request by
// what is left of its TTFT SLO. The endpoint that holds a long prompt's
// prefix but owes 1.2 s of prefill is the pick for a request that has
// its whole 10 s, and not for one that waited 9 s in the admission queue:
// the second left is within reach only of the idle endpoint.
func TestWaitedRequestRoutedBySLOLeft(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := &backend{promptTokens: 4000}, &backend{promptTokens: 4000}
		servers := &memoryServers{handlers: map[string]http.Handler{"a.test": a, "b.test": b}, stalled: map[string]bool{}}
		p := catalog.Pool{Name: "main", Policy: catalog.PolicyAuto,
			Endpoints: []catalog.Endpoint{{URL: "http://a.test/v1"}, {URL: "http://b.test/v1"}}}
		m := catalog.Model{Name: "m", Pool: "main", SLO: catalog.SLO{TTFTp99: 10 * time.Second},
			Admission: catalog.Admission{Enabled: true, Queue: 8}}
		cat, err := catalog.New([]catalog.Pool{p}, []catalog.Model{m})
		if err != nil {
			t.Fatal(err)
		}
		cfg := config.Default()
		r, err := New(Options{Server: serverOptions(cfg.Server), Router: routerOptions(cfg.Router), Registerer: prometheus.NewRegistry(),
			Transport: servers, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		r.SetCatalog(cat)
		defer r.Close()

		// About 4,000 prompt tokens, by the gateway's estimate.
		prompt := strings.Repeat("the quick brown fox jumps over the lazy dog. ", 355)
		body := `{"model":"m","messages":[{"role":"user","content":"` + prompt + `"}]}`
		chat := func(done chan<- int) {
			w := httptest.NewRecorder()
			req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(body))
			req.Header.Set("x-llmgw-priority", "critical") // waits rather than being refused
			r.ServeHTTP(w, req)
			done <- w.Code
		}
		hits := func() [2]int64 { return [2]int64{a.hits.Load(), b.hits.Load()} }
		code := make(chan int, 1)

		// The first answer puts the prefix in the index at one endpoint:
		// the holder.
		chat(code)
		if c := <-code; c != http.StatusOK {
			t.Fatalf("first request: %d", c)
		}
		holder, idle := 0, 1
		if hits()[0] == 0 {
			holder, idle = 1, 0
		}
		eps := r.snap.Load().pools["main"].Endpoints()
		// Both cost 20 ms and 100 µs a prompt token; the holder owes
		// 12,000 tokens of prefill: 1.22 s predicted, past 1.2 × the
		// second left to the waited request, against 0.42 s at
		// the other, where a stream decodes that computing the prefix
		// again would stall, which costs 1.6 s more.
		setCosts := func() {
			for _, e := range eps {
				e.SetCost(0.020, 100e-6)
			}
		}
		mp := r.snap.Load().pools["main"]
		mp.Send(holder, 12_000, false, false, time.Now())
		stream := mp.Send(idle, 0, false, false, time.Now())
		stream.FirstToken(time.Now())

		setCosts()
		before := hits()
		chat(code)
		if c := <-code; c != http.StatusOK {
			t.Fatalf("fresh request: %d", c)
		}
		if got := hits(); got[holder]-before[holder] != 1 {
			t.Fatalf("a request with its whole SLO went to the idle endpoint (hits %v → %v); want the prefix holder %d", before, got, holder)
		}

		held := fillWith(t, r, "m", admission.PendingPerEndpoint*len(eps))
		setCosts()
		before = hits()
		go chat(code)
		synctest.Wait()
		time.Sleep(9 * time.Second)
		synctest.Wait()
		if got := hits(); got != before {
			t.Fatalf("served while the gate was full: hits %v → %v", before, got)
		}
		held[0].FirstToken() // the event that admits it, 9 s after it arrived
		if c := <-code; c != http.StatusOK {
			t.Fatalf("waited request: %d", c)
		}
		if got := hits(); got[idle]-before[idle] != 1 {
			t.Errorf("a request with 1 s of its SLO left went to the prefix holder owing 1.2 s of prefill (hits %v → %v); want the idle endpoint %d", before, got, idle)
		}
		for _, tk := range held {
			tk.End(0)
		}
	})
}

// text is n bytes of lowercase letters from seed.
func text(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x5eed))
	b := make([]byte, n)
	for i := range b {
		b[i] = 'a' + byte(r.IntN(26))
	}
	return b
}
