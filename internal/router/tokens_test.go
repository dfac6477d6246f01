package router

import (
	"math"
	"os"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"gitea.mynodes.xyz/ilker/llmgw/internal/config"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/tenant"
	"gitea.mynodes.xyz/ilker/llmgw/internal/openai"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/proxy"
)

func TestTokenTiming(t *testing.T) {
	usage := func(n int64) *openai.Usage { return &openai.Usage{CompletionTokens: n} }
	tests := []struct {
		name     string
		streamed bool
		o        proxy.Outcome
		took     time.Duration
		tpot     time.Duration
		rate     float64
		ok       bool
	}{
		{"streamed", true, proxy.Outcome{Usage: usage(11), Decode: time.Second}, 3 * time.Second, 100 * time.Millisecond, 10, true},
		{"streamed, one token", true, proxy.Outcome{Usage: usage(1), Decode: time.Second}, time.Second, 0, 0, false},
		{"streamed, no decode time", true, proxy.Outcome{Usage: usage(5)}, time.Second, 0, 0, false},
		{"plain", false, proxy.Outcome{Usage: usage(20)}, 2 * time.Second, 0, 10, true},
		{"plain, no time", false, proxy.Outcome{Usage: usage(20)}, 0, 0, 0, false},
		{"no usage", true, proxy.Outcome{Decode: time.Second}, time.Second, 0, 0, false},
		{"no output", false, proxy.Outcome{Usage: usage(0)}, time.Second, 0, 0, false},
	}
	for _, tt := range tests {
		tpot, rate, ok := tokenTiming(tt.streamed, tt.o, tt.took)
		if tpot != tt.tpot || rate != tt.rate || ok != tt.ok {
			t.Errorf("%s: got %v %v %v, want %v %v %v", tt.name, tpot, rate, ok, tt.tpot, tt.rate, tt.ok)
		}
	}
}

// TestTokenMetricsGolden checks the token families' names, help, labels and
// buckets, as /metrics shows them, after two known requests: a streamed one
// by a tenant (11 tokens decoded in a second: 100 ms a token, 10 a second)
// and a plain one without a tenant (20 tokens in 2 s).
func TestTokenMetricsGolden(t *testing.T) {
	reg := prometheus.NewRegistry()
	cfg := config.Default()
	cfg.Router.TenantLabel = tenant.LevelTeam
	r, err := New(Options{Server: serverOptions(cfg.Server), Router: routerOptions(cfg.Router), Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	cat, err := catalog.New([]catalog.Pool{{Name: "gpu", Endpoints: []catalog.Endpoint{{URL: "http://127.0.0.1:1/v1"}}}},
		[]catalog.Model{{Name: "llama", Aliases: []string{"default"}, Pool: "gpu", SLO: catalog.SLO{TTFTp99: 2 * time.Second, TPOTp99: 50 * time.Millisecond}}})
	if err != nil {
		t.Fatal(err)
	}
	r.SetCatalog(cat)

	streamed := &parsedRequest{Request: openai.Request{Model: "default", Stream: true}, key: &tenant.Key{Tenant: "acme/search/alice"}}
	r.observeTokens(streamed, dispatchResult{pool: "gpu", outcome: proxy.Outcome{
		Usage: &openai.Usage{CompletionTokens: 11}, TTFT: 300 * time.Millisecond, Decode: time.Second,
	}}, 2*time.Second)
	plain := &parsedRequest{Request: openai.Request{Model: "llama"}}
	r.observeTokens(plain, dispatchResult{pool: "gpu", outcome: proxy.Outcome{Usage: &openai.Usage{CompletionTokens: 20}}}, 2*time.Second)

	golden, err := os.Open("testdata/token_metrics.golden")
	if err != nil {
		t.Fatal(err)
	}
	defer golden.Close()
	if err := testutil.GatherAndCompare(reg, golden,
		"llmgw_tpot_seconds", "llmgw_inter_token_seconds", "llmgw_output_tokens_per_second",
		"llmgw_tenant_tpot_seconds", "llmgw_tenant_output_tokens_per_second", "llmgw_model_slo_seconds"); err != nil {
		t.Error(err)
	}
	// The streamed request fed the SLO tracker under the canonical name.
	if n := len(r.slo.by["llama"].ring); n != 1 {
		t.Errorf("SLO samples for llama = %d, want 1", n)
	}
}

func TestSLOTrackerP99(t *testing.T) {
	var tr sloTracker
	now := time.Now()
	for i := 1; i < sloMinSamples; i++ {
		tr.add("m", time.Duration(i)*time.Millisecond, 0)
	}
	if _, _, ok := tr.p99("m", now); ok {
		t.Fatalf("a p99 from %d samples was believed", sloMinSamples-1)
	}
	tr.add("m", sloMinSamples*time.Millisecond, 0)
	if _, _, ok := tr.p99("m", now.Add(sloRecompute-1)); ok {
		t.Error("p99s taken again sooner than sloRecompute")
	}
	ttft, tpot, ok := tr.p99("m", now.Add(sloRecompute))
	if !ok || ttft != sloMinSamples*time.Millisecond || tpot != 0 {
		t.Errorf("p99 of 1..20 ms = %v %v %v, want 20ms 0 true", ttft, tpot, ok)
	}
	// The ring keeps the latest sloSamplesKept: 1000 samples of 1..1000 ms
	// leave 745..1000, whose p99 (index 253 of 256) is 998 ms.
	for i := 1; i <= 1000; i++ {
		tr.add("n", time.Duration(i)*time.Millisecond, time.Duration(i)*time.Microsecond)
	}
	ttft, tpot, _ = tr.p99("n", time.Now())
	if ttft != 998*time.Millisecond || tpot != 998*time.Microsecond {
		t.Errorf("p99 = %v %v, want 998ms 998µs", ttft, tpot)
	}
	if len(tr.by["n"].ring) != sloSamplesKept {
		t.Errorf("ring holds %d, want %d", len(tr.by["n"].ring), sloSamplesKept)
	}
	// Samples older than the window do not count.
	if _, _, ok := tr.p99("n", time.Now().Add(sloWindow+time.Second)); ok {
		t.Error("samples older than the window were counted")
	}
}

func TestSLOPressure(t *testing.T) {
	g := newTestGateway(t, nil, &upstream{})
	if p := g.r.sloPressure("m"); p != 0 {
		t.Errorf("pressure with no samples = %v, want 0", p)
	}
	// TTFT p99 at its SLO (500 ms), TPOT at twice its SLO (50 ms).
	for range sloMinSamples {
		g.r.slo.add("m", 500*time.Millisecond, 100*time.Millisecond)
	}
	if p := g.r.sloPressure("a"); p != 2 {
		t.Errorf("pressure = %v, want 2 (TPOT at twice its SLO, asked by alias)", p)
	}
	if p := g.r.sloPressure("nope"); p != 0 {
		t.Errorf("pressure of an unknown model = %v, want 0", p)
	}
}

func TestStallWeight(t *testing.T) {
	g := newTestGateway(t, nil, &upstream{})
	_, m := g.r.resolve("m") // SLO: TTFT 500 ms, TPOT 50 ms
	now := time.Now()
	if w := g.r.stallWeight(&m, now); w != 0 {
		t.Errorf("weight with no samples = %v, want 0", w)
	}
	tests := []struct {
		name       string
		ttft, tpot time.Duration
		want       float64
	}{
		{"TTFT nearer its SLO", 400 * time.Millisecond, 25 * time.Millisecond, 0},
		{"TPOT nearer, within its SLO", 100 * time.Millisecond, 45 * time.Millisecond, 0},
		{"TPOT past its SLO, TTFT past by more", time.Second, 60 * time.Millisecond, 0},
		{"TPOT past its SLO and nearer by a quarter", 500 * time.Millisecond, 62500 * time.Microsecond, 0.25},
		{"TPOT far past its SLO, TTFT well within", 50 * time.Millisecond, 100 * time.Millisecond, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g.r.slo.by = nil
			for range sloMinSamples {
				g.r.slo.add("m", tt.ttft, tt.tpot)
			}
			if w := g.r.stallWeight(&m, time.Now()); math.Abs(w-tt.want) > 1e-9 {
				t.Errorf("weight = %v, want %v", w, tt.want)
			}
		})
	}
	noSLO := m
	noSLO.SLO.TPOTp99 = 0
	if w := g.r.stallWeight(&noSLO, time.Now()); w != 0 {
		t.Errorf("weight of a model with no TPOT SLO = %v, want 0", w)
	}
}
