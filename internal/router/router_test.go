package router

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"

	"gitea.mynodes.xyz/ilker/llmgw/internal/config"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/observe"
)

// upstream is a fake inference server: it streams n tokens, or answers
// with status when it is not 200, and counts the requests it saw.
type upstream struct {
	status int
	tokens int
	hits   atomic.Int64
	bodies chan []byte // when not nil, every request body is sent here
}

func (u *upstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	u.hits.Add(1)
	body, _ := io.ReadAll(r.Body)
	if u.bodies != nil {
		u.bodies <- body
	}
	if u.status != 0 && u.status != 200 {
		w.WriteHeader(u.status)
		io.WriteString(w, `{"error":{"message":"down","type":"server_error","param":null,"code":null}}`)
		return
	}
	var req struct{ Stream bool }
	json.Unmarshal(body, &req)
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"choices":[{"message":{"content":"hi"}}],"usage":{"prompt_tokens":5,"completion_tokens":%d,"total_tokens":%d}}`, u.tokens, u.tokens+5)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	for i := range u.tokens {
		fmt.Fprintf(w, "data: {\"choices\":[{\"delta\":{\"content\":\"t%d\"}}]}\n\n", i)
		w.(http.Flusher).Flush()
	}
	fmt.Fprintf(w, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":%d,\"total_tokens\":%d}}\n\ndata: [DONE]\n\n", u.tokens, u.tokens+5)
}

type testGateway struct {
	r   *Router
	reg *prometheus.Registry
	url string
}

// newTestGateway serves a router whose catalog has model m (alias a) on a
// pool of the given upstreams, and model fb on a pool of fallback ones.
func newTestGateway(t *testing.T, mutate func(*config.Config), upstreams ...http.Handler) *testGateway {
	t.Helper()
	return newTestGatewayWith(t, Options{}, mutate, upstreams...)
}

// newTestGatewayWith is newTestGateway with opts for the router, whose
// server and router settings and registerer it fills in.
func newTestGatewayWith(t *testing.T, opts Options, mutate func(*config.Config), upstreams ...http.Handler) *testGateway {
	t.Helper()
	cfg := config.Default()
	cfg.Server.MaxBodyBytes = 1 << 10
	cfg.Pools = []catalog.Pool{{Name: "main"}, {Name: "spare"}}
	for _, u := range upstreams {
		s := httptest.NewServer(u)
		t.Cleanup(s.Close)
		cfg.Pools[0].Endpoints = append(cfg.Pools[0].Endpoints, catalog.Endpoint{URL: s.URL + "/v1"})
	}
	cfg.Models = []catalog.Model{{Name: "m", Aliases: []string{"a"}, Pool: "main", Upstream: "org/m-8b",
		SLO: catalog.SLO{TTFTp99: 500 * time.Millisecond, TPOTp99: 50 * time.Millisecond}}}
	if mutate != nil {
		mutate(&cfg)
	}
	cat, err := catalog.New(cfg.Pools, cfg.Models)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	opts.Server, opts.Router, opts.Registerer = serverOptions(cfg.Server), routerOptions(cfg.Router), reg
	r, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	r.SetCatalog(cat)
	s := httptest.NewServer(r)
	t.Cleanup(s.Close)
	return &testGateway{r: r, reg: reg, url: s.URL}
}

// sample is the value of the series of family name in g's registry whose
// labels are labels, as name, value pairs: a counter's or a gauge's, and
// 0 when there is none.
func (g *testGateway) sample(t *testing.T, name string, labels ...string) float64 {
	t.Helper()
	for _, m := range gather(t, g.reg)[name].GetMetric() {
		if len(m.GetLabel()) != len(labels)/2 {
			continue
		}
		match := true
		for _, l := range m.GetLabel() {
			match = match && slices.ContainsFunc(slices.Collect(pairs(labels)), func(p [2]string) bool {
				return p[0] == l.GetName() && p[1] == l.GetValue()
			})
		}
		if match {
			return m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return 0
}

// pairs is kv, name then value, as pairs.
func pairs(kv []string) func(yield func([2]string) bool) {
	return func(yield func([2]string) bool) {
		for i := 0; i+1 < len(kv); i += 2 {
			if !yield([2]string{kv[i], kv[i+1]}) {
				return
			}
		}
	}
}

func (g *testGateway) post(t *testing.T, path, body string) (*http.Response, string) {
	t.Helper()
	resp, err := http.Post(g.url+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

func TestStreamedRequestIsTimedAndCounted(t *testing.T) {
	up := &upstream{tokens: 5, bodies: make(chan []byte, 1)}
	g := newTestGateway(t, nil, up)
	resp, body := g.post(t, "/v1/chat/completions", `{"model":"a","stream":true,"messages":[]}`)
	if resp.StatusCode != 200 || strings.Contains(body, "usage") || !strings.HasSuffix(body, "data: [DONE]\n\n") {
		t.Fatalf("%d %q", resp.StatusCode, body)
	}
	sent := string(<-up.bodies)
	if want := `{"model":"org/m-8b","stream":true,"messages":[],"stream_options":{"include_usage":true}}`; sent != want {
		t.Errorf("upstream got %s, want %s", sent, want)
	}
	if resp.Header.Get("X-Request-Id") == "" {
		t.Error("no X-Request-Id")
	}
	checks := []struct {
		got, want float64
	}{
		{g.sample(t, "llmgw_requests_total", "model", "m", "pool", "main", "code", "200", "error_type", ""), 1},
		{testutil.ToFloat64(g.r.m.inflight.WithLabelValues("m")), 0},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("got %v, want %v", c.got, c.want)
		}
	}
	// Five tokens: four gaps, one first-token time, one TPOT.
	wantCounts := map[string]uint64{"llmgw_inter_token_seconds": 4, "llmgw_ttft_seconds": 1, "llmgw_tpot_seconds": 1, "llmgw_output_tokens_per_second": 1}
	mfs, err := g.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if want, ok := wantCounts[mf.GetName()]; ok {
			if got := mf.GetMetric()[0].GetHistogram().GetSampleCount(); got != want {
				t.Errorf("%s count = %d, want %d", mf.GetName(), got, want)
			}
			delete(wantCounts, mf.GetName())
		}
	}
	if len(wantCounts) > 0 {
		t.Errorf("not observed: %v", wantCounts)
	}
	problems, err := promlint.NewWithMetricFamilies(mfs).Lint()
	if err != nil || len(problems) > 0 {
		t.Errorf("promlint: %v %v", problems, err)
	}
}

func TestRetriesAnotherEndpointBeforeTheFirstByte(t *testing.T) {
	bad, good := &upstream{status: 500}, &upstream{tokens: 2}
	g := newTestGateway(t, nil, bad, good)
	for i := range 4 {
		resp, body := g.post(t, "/v1/chat/completions", `{"model":"m","stream":true}`)
		if resp.StatusCode != 200 || !strings.Contains(body, "[DONE]") {
			t.Fatalf("request %d: %d %q", i, resp.StatusCode, body)
		}
	}
	// The failing endpoint is passed over once it failed.
	if bad.hits.Load() != 1 || good.hits.Load() != 4 {
		t.Errorf("bad saw %d, good %d; want 1 and 4", bad.hits.Load(), good.hits.Load())
	}
	if got := testutil.ToFloat64(g.r.m.upstreamErrors.WithLabelValues("main", "status_5xx")); got != 1 {
		t.Errorf("upstream errors = %v, want 1", got)
	}
}

func TestFallbackModel(t *testing.T) {
	spare := httptest.NewServer(&upstream{tokens: 3})
	t.Cleanup(spare.Close)
	g := newTestGateway(t, func(c *config.Config) {
		c.Pools[1].Endpoints = []catalog.Endpoint{{URL: spare.URL + "/v1"}}
		c.Models[0].Fallbacks = []string{"fb"}
		c.Models = append(c.Models, catalog.Model{Name: "fb", Pool: "spare"})
	}, &upstream{status: 503}, &upstream{status: 502})
	resp, body := g.post(t, "/v1/chat/completions", `{"model":"m"}`)
	if resp.StatusCode != 200 || !strings.Contains(body, `"completion_tokens":3`) {
		t.Fatalf("%d %q", resp.StatusCode, body)
	}
	if got := g.sample(t, "llmgw_requests_total", "model", "m", "pool", "spare", "code", "200", "error_type", ""); got != 1 {
		t.Errorf("requests{pool=spare} = %v", got)
	}
}

// TestRefusedCredentialsTryElsewhere: an endpoint that refuses the
// gateway's credentials failed as a 5xx fails: another endpoint of the
// pool, or the model's fallback, answers before the client has seen a
// byte.
func TestRefusedCredentialsTryElsewhere(t *testing.T) {
	for _, status := range []int{401, 403} {
		t.Run(fmt.Sprintf("%d, another endpoint", status), func(t *testing.T) {
			bad, good := &upstream{status: status}, &upstream{tokens: 2}
			g := newTestGateway(t, nil, bad, good)
			for i := range 4 {
				resp, body := g.post(t, "/v1/chat/completions", `{"model":"m","stream":true}`)
				if resp.StatusCode != 200 || !strings.Contains(body, "[DONE]") {
					t.Fatalf("request %d: %d %q", i, resp.StatusCode, body)
				}
			}
			if bad.hits.Load() != 1 || good.hits.Load() != 4 {
				t.Errorf("bad saw %d, good %d; want 1 and 4", bad.hits.Load(), good.hits.Load())
			}
			if got := testutil.ToFloat64(g.r.m.upstreamErrors.WithLabelValues("main", "status_auth")); got != 1 {
				t.Errorf("llmgw_upstream_errors_total{reason=status_auth} = %v, want 1", got)
			}
		})
		t.Run(fmt.Sprintf("%d, the fallback", status), func(t *testing.T) {
			spare := httptest.NewServer(&upstream{tokens: 3})
			t.Cleanup(spare.Close)
			g := newTestGateway(t, func(c *config.Config) {
				c.Pools[1].Endpoints = []catalog.Endpoint{{URL: spare.URL + "/v1"}}
				c.Models[0].Fallbacks = []string{"fb"}
				c.Models = append(c.Models, catalog.Model{Name: "fb", Pool: "spare"})
			}, &upstream{status: status})
			resp, body := g.post(t, "/v1/chat/completions", `{"model":"m"}`)
			if resp.StatusCode != 200 || !strings.Contains(body, `"completion_tokens":3`) {
				t.Fatalf("%d %q", resp.StatusCode, body)
			}
		})
	}
}

func TestAllEndpointsDown(t *testing.T) {
	g := newTestGateway(t, nil, &upstream{status: 500}, &upstream{status: 500})
	resp, body := g.post(t, "/v1/chat/completions", `{"model":"m"}`)
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(body, `"type":"upstream_error"`) {
		t.Errorf("%d %s", resp.StatusCode, body)
	}
}

func TestErrors(t *testing.T) {
	g := newTestGateway(t, nil, &upstream{tokens: 1})
	tests := []struct {
		method, path, body string
		status             int
		code, param        string
	}{
		{"POST", "/v1/chat/completions", `{"model":`, 400, "", ""},
		{"POST", "/v1/chat/completions", `{"messages":[]}`, 400, "", "model"},
		{"POST", "/v1/chat/completions", `{"model":"gpt-9"}`, 404, "model_not_found", "model"},
		{"POST", "/v1/chat/completions", `{"model":"m","x":"` + strings.Repeat("y", 2000) + `"}`, 413, "request_too_large", ""},
		{"GET", "/v1/chat/completions", ``, 405, "", ""},
		{"POST", "/v1/embeddings", `{"model":"m","stream":true,"input":"x"}`, 400, "", "stream"},
		{"POST", "/v1/nothing", `{}`, 404, "unknown_url", ""},
		{"DELETE", "/v1/models", ``, 405, "", ""},
	}
	for _, tt := range tests {
		req, _ := http.NewRequest(tt.method, g.url+tt.path, strings.NewReader(tt.body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var e struct {
			Error struct {
				Message string
				Type    string
				Param   *string
				Code    *string
			}
		}
		err = json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if err != nil || resp.StatusCode != tt.status || e.Error.Message == "" || e.Error.Type == "" {
			t.Errorf("%s %s: %d %+v (%v), want %d", tt.method, tt.path, resp.StatusCode, e, err, tt.status)
			continue
		}
		if got := deref(e.Error.Code); got != tt.code {
			t.Errorf("%s %s: code %q, want %q", tt.method, tt.path, got, tt.code)
		}
		if got := deref(e.Error.Param); got != tt.param {
			t.Errorf("%s %s: param %q, want %q", tt.method, tt.path, got, tt.param)
		}
	}
	if got := g.sample(t, "llmgw_requests_total", "model", observe.Unknown, "pool", "none", "code", "404", "error_type", string(observe.CallerNotFound)); got != 1 {
		t.Errorf("unknown models are not counted under one label: %v", got)
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func TestModelsList(t *testing.T) {
	g := newTestGateway(t, nil, &upstream{})
	resp, err := http.Get(g.url + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct {
		Object string
		Data   []struct{ ID, Object string }
	}
	json.NewDecoder(resp.Body).Decode(&list)
	if list.Object != "list" || len(list.Data) != 2 || list.Data[0].ID != "m" || list.Data[1].ID != "a" || list.Data[0].Object != "model" {
		t.Errorf("%+v", list)
	}
}

func TestSetCatalogStopsReportingRemovedModels(t *testing.T) {
	g := newTestGateway(t, nil, &upstream{})
	if n := len(gather(t, g.reg)["llmgw_model_slo_seconds"].GetMetric()); n != 2 {
		t.Fatalf("%d SLO series, want 2", n)
	}
	cat, err := catalog.New([]catalog.Pool{{Name: "p", Endpoints: []catalog.Endpoint{{URL: "http://x/v1"}}}},
		[]catalog.Model{{Name: "other", Pool: "p", SLO: catalog.SLO{TPOTp99: time.Second}}})
	if err != nil {
		t.Fatal(err)
	}
	g.r.SetCatalog(cat)
	want := `
# HELP llmgw_model_slo_seconds A model's SLO from the catalog, by kind: ttft_p99 or tpot_p99. For alerting against the histograms.
# TYPE llmgw_model_slo_seconds gauge
llmgw_model_slo_seconds{kind="tpot_p99",model="other"} 1
`
	if err := testutil.GatherAndCompare(g.reg, strings.NewReader(want), "llmgw_model_slo_seconds"); err != nil {
		t.Error(err)
	}
}

// Each call reaches the endpoint's path for its API and carries the pool's
// key, the JSON content type and, for a stream, the event-stream Accept.
func TestUpstreamRequestHeadersAndPath(t *testing.T) {
	type seen struct {
		path   string
		header http.Header
	}
	calls := make(chan seen, 4)
	up := &upstream{tokens: 2}
	capture := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls <- seen{r.URL.Path, r.Header.Clone()}
		up.ServeHTTP(w, r)
	})
	g := newTestGateway(t, func(c *config.Config) { c.Pools[0].APIKey = "sk-upstream" }, capture)
	for _, tc := range []struct {
		path, body, wantPath, wantAccept string
	}{
		{"/v1/chat/completions", `{"model":"m","messages":[]}`, "/v1/chat/completions", ""},
		{"/v1/chat/completions", `{"model":"m","stream":true,"messages":[]}`, "/v1/chat/completions", "text/event-stream"},
		{"/v1/completions", `{"model":"m","prompt":"x"}`, "/v1/completions", ""},
	} {
		if resp, body := g.post(t, tc.path, tc.body); resp.StatusCode != 200 {
			t.Fatalf("%s: status %d: %s", tc.body, resp.StatusCode, body)
		}
		c := <-calls
		if c.path != tc.wantPath {
			t.Errorf("%s: upstream path %q, want %q", tc.body, c.path, tc.wantPath)
		}
		for k, want := range map[string]string{"Authorization": "Bearer sk-upstream", "Content-Type": "application/json", "Accept": tc.wantAccept} {
			if got := c.header.Get(k); got != want {
				t.Errorf("%s: upstream %s %q, want %q", tc.body, k, got, want)
			}
		}
	}
}

// server.request_timeout bounds a request end to end: an upstream that
// answers nothing within it is cut off with a 504, neither retried nor
// counted against the upstream, since the limit is the gateway's own.
func TestRequestTimeout(t *testing.T) {
	up := &upstream{tokens: 1}
	stall := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		up.hits.Add(1)
		io.Copy(io.Discard, r.Body)
		<-r.Context().Done()
	})
	g := newTestGateway(t, func(c *config.Config) {
		c.Server.RequestTimeout = 100 * time.Millisecond
		c.Server.FirstTokenTimeout = time.Hour
	}, stall, stall)
	resp, body := g.post(t, "/v1/chat/completions", `{"model":"m","messages":[]}`)
	if resp.StatusCode != http.StatusGatewayTimeout || !strings.Contains(body, "time limit") {
		t.Errorf("status %d, body %s; want 504 naming the time limit", resp.StatusCode, body)
	}
	if n := up.hits.Load(); n != 1 {
		t.Errorf("the upstream was called %d times, want once", n)
	}
	if n := testutil.CollectAndCount(g.r.m.upstreamErrors); n != 0 {
		t.Errorf("%d upstream error series after the gateway's own timeout", n)
	}
}
