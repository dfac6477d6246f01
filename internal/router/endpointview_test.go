package router

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"

	"gitea.mynodes.xyz/ilker/llmgw/internal/config"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
)

// vllmMetrics is what a vLLM server's /metrics says of its load.
const vllmMetrics = `# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{model_name="m"} 3
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="m"} 5
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{model_name="m"} 0.25
`

// TestEndpointViewShowsEveryEndpoint: a pool of five real servers, one
// serving vLLM's metrics, one refusing connections, one serving garbage,
// one answering too late and one answering 503. Every one shows on the
// gateway's /metrics; the good one with its load and the time of its last
// scrape, the others with no scrape yet and their failures counted by
// reason.
func TestEndpointViewShowsEveryEndpoint(t *testing.T) {
	serve := func(metrics func(w http.ResponseWriter, r *http.Request)) string {
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/metrics" && r.URL.Path != "/health" {
				w.WriteHeader(http.StatusNotFound)
				return
			}
			metrics(w, r) // a probe is answered as a scrape is
		}))
		t.Cleanup(s.Close)
		return s.URL
	}
	good := serve(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, vllmMetrics) })
	garbage := serve(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "<html><body>\x00\xff not metrics at all</body></html>\n")
	})
	slow := serve(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	status := serve(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) })
	closed := httptest.NewServer(http.NotFoundHandler())
	refused := closed.URL
	closed.Close()

	p := catalog.Pool{Name: "main", Kind: catalog.KindVLLM,
		// Scrapes are given their max age to answer, probes their timeout:
		// time enough for a loaded machine, short enough for the slow
		// endpoint to fail twice in a second.
		Metrics: catalog.Scrape{Path: "/metrics", Interval: 20 * time.Millisecond, MaxAge: 400 * time.Millisecond},
		Health:  catalog.HealthCheck{Path: "/health", Interval: 400 * time.Millisecond, Timeout: 400 * time.Millisecond},
		Endpoints: []catalog.Endpoint{{Name: "good", URL: good + "/v1"}, {Name: "refused", URL: refused + "/v1"},
			{Name: "garbage", URL: garbage + "/v1"}, {Name: "slow", URL: slow + "/v1"}, {Name: "status", URL: status + "/v1"}}}
	config.PoolDefaults(&p)
	cat, err := catalog.New([]catalog.Pool{p}, []catalog.Model{{Name: "m", Pool: "main"}})
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	reg := prometheus.NewRegistry()
	r, err := New(Options{Server: serverOptions(cfg.Server), Router: routerOptions(cfg.Router), Registerer: reg, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	r.SetCatalog(cat)
	defer r.Close()

	// Wait until every endpoint has failed, or answered, a few times.
	failing := map[string]string{"refused": "connect", "garbage": "parse", "slow": "timeout", "status": "status"}
	probeFailing := map[string]string{"refused": "connect", "slow": "timeout", "status": "status"}
	var mfs map[string]*dto.MetricFamily
	for deadline := time.Now().Add(10 * time.Second); ; {
		mfs = gather(t, reg)
		done := value(mfs, "llmgw_endpoint_last_scrape_success_timestamp_seconds", "good") > 0
		for ep, reason := range failing {
			done = done && value(mfs, "llmgw_endpoint_scrape_failures_total", ep, reason) >= 2
		}
		for ep, reason := range probeFailing {
			done = done && value(mfs, "llmgw_endpoint_probe_failures_total", ep, reason) >= 2
		}
		if done {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("endpoints not seen failing by reason in 10s: %v", mfs)
		}
		time.Sleep(20 * time.Millisecond)
	}

	var all []*dto.MetricFamily
	for _, mf := range mfs {
		all = append(all, mf)
	}
	if problems, err := promlint.NewWithMetricFamilies(all).Lint(); err != nil || len(problems) > 0 {
		t.Errorf("promlint: %v %v", problems, err)
	}

	// The load is the good endpoint's alone: the others read none.
	want := `
# HELP llmgw_endpoint_kv_cache_usage_ratio Share of the endpoint's KV cache in use, 0 to 1, as its last scrape read it while routing believes it.
# TYPE llmgw_endpoint_kv_cache_usage_ratio gauge
llmgw_endpoint_kv_cache_usage_ratio{endpoint="good",pool="main"} 0.25
# HELP llmgw_endpoint_requests_running Requests in the endpoint's running batch, as its last scrape read them while routing believes it.
# TYPE llmgw_endpoint_requests_running gauge
llmgw_endpoint_requests_running{endpoint="good",pool="main"} 5
# HELP llmgw_endpoint_requests_waiting Requests queued at the endpoint, as its last scrape read them while routing believes it (no older than the pool's metrics.max_age).
# TYPE llmgw_endpoint_requests_waiting gauge
llmgw_endpoint_requests_waiting{endpoint="good",pool="main"} 3
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"llmgw_endpoint_requests_waiting", "llmgw_endpoint_requests_running", "llmgw_endpoint_kv_cache_usage_ratio"); err != nil {
		t.Error(err)
	}
	// Every endpoint shows: a scrape time (zero for none yet), a predicted
	// first-token time, and each reason's count.
	for _, name := range []string{"llmgw_endpoint_last_scrape_success_timestamp_seconds", "llmgw_endpoint_predicted_ttft_seconds"} {
		if n, err := testutil.GatherAndCount(reg, name); err != nil || n != 5 {
			t.Errorf("%s: %d series (%v), want one for each of 5 endpoints", name, n, err)
		}
	}
	if n, err := testutil.GatherAndCount(reg, "llmgw_endpoint_scrape_failures_total"); err != nil || n != 5*4 {
		t.Errorf("llmgw_endpoint_scrape_failures_total: %d series (%v), want 5 endpoints × 4 reasons", n, err)
	}
	if n, err := testutil.GatherAndCount(reg, "llmgw_endpoint_probe_failures_total"); err != nil || n != 5*3 {
		t.Errorf("llmgw_endpoint_probe_failures_total: %d series (%v), want 5 endpoints × 3 reasons", n, err)
	}
	if at := value(mfs, "llmgw_endpoint_last_scrape_success_timestamp_seconds", "good"); at < float64(start.Unix()) || at > float64(time.Now().Unix()+1) {
		t.Errorf("good endpoint's last scrape at %v, want since %v", at, start.Unix())
	}
	for ep, reason := range failing {
		if at := value(mfs, "llmgw_endpoint_last_scrape_success_timestamp_seconds", ep); at != 0 {
			t.Errorf("%s: last good scrape at %v, want 0: never", ep, at)
		}
		for _, other := range []string{"connect", "timeout", "status", "parse"} {
			if n := value(mfs, "llmgw_endpoint_scrape_failures_total", ep, other); other != reason && n != 0 {
				t.Errorf("%s: %v scrape failures for %s, want all for %s", ep, n, other, reason)
			}
		}
	}
	for _, reason := range []string{"connect", "timeout", "status", "parse"} {
		if n := value(mfs, "llmgw_endpoint_scrape_failures_total", "good", reason); n != 0 {
			t.Errorf("good: %v scrape failures for %s, want 0", n, reason)
		}
	}
	for _, ep := range []string{"good", "garbage"} {
		for _, reason := range []string{"connect", "timeout", "status"} {
			if n := value(mfs, "llmgw_endpoint_probe_failures_total", ep, reason); n != 0 {
				t.Errorf("%s: %v probe failures for %s, want 0", ep, n, reason)
			}
		}
	}
	// A reload that keeps two endpoints keeps what was seen of them, and
	// the others are gone.
	before := value(mfs, "llmgw_endpoint_scrape_failures_total", "status", "status")
	p.Endpoints = []catalog.Endpoint{p.Endpoints[0], p.Endpoints[4]}
	cat, err = catalog.New([]catalog.Pool{p}, []catalog.Model{{Name: "m", Pool: "main"}})
	if err != nil {
		t.Fatal(err)
	}
	r.SetCatalog(cat)
	after := gather(t, reg)
	if n := value(after, "llmgw_endpoint_scrape_failures_total", "status", "status"); n < before {
		t.Errorf("status: %v scrape failures after the reload, %v before: want them kept", n, before)
	}
	if n, err := testutil.GatherAndCount(reg, "llmgw_endpoint_scrape_failures_total"); err != nil || n != 2*4 {
		t.Errorf("after the reload, %d scrape failure series (%v), want 2 endpoints × 4 reasons", n, err)
	}

	// The predicted first token is the cost model's prior (20 ms, and
	// 100 µs a token) for the pool's mean prompt of 1000 tokens, and at
	// the good endpoint the 3 requests it says are waiting, at 1000 each.
	for ep, want := range map[string]float64{"good": 0.42, "status": 0.12} {
		if got := value(mfs, "llmgw_endpoint_predicted_ttft_seconds", ep); got < want-0.001 || got > want+0.001 {
			t.Errorf("%s: predicted TTFT = %v, want %v", ep, got, want)
		}
	}
}

// gather is reg's families by name.
func gather(t *testing.T, reg prometheus.Gatherer) map[string]*dto.MetricFamily {
	t.Helper()
	got, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	mfs := make(map[string]*dto.MetricFamily, len(got))
	for _, mf := range got {
		mfs[mf.GetName()] = mf
	}
	return mfs
}

// value is the value of family name's series for endpoint, and reason
// when given; -1 when there is none.
func value(mfs map[string]*dto.MetricFamily, name, endpoint string, reason ...string) float64 {
	for _, m := range mfs[name].GetMetric() {
		match := true
		for _, l := range m.GetLabel() {
			switch l.GetName() {
			case "endpoint":
				match = match && l.GetValue() == endpoint
			case "reason":
				match = match && len(reason) > 0 && l.GetValue() == reason[0]
			}
		}
		if !match {
			continue
		}
		switch {
		case m.GetGauge() != nil:
			return m.GetGauge().GetValue()
		case m.GetCounter() != nil:
			return m.GetCounter().GetValue()
		}
	}
	return -1
}
