package router

import (
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
	if n := r.slo.Len("llama"); n != 1 {
		t.Errorf("SLO samples for llama = %d, want 1", n)
	}
}

func TestSLOPressure(t *testing.T) {
	g := newTestGateway(t, nil, &upstream{})
	if p := g.r.sloPressure("m"); p != 0 {
		t.Errorf("pressure with no samples = %v, want 0", p)
	}
	// TTFT p99 at its SLO (500 ms), TPOT at twice its SLO (50 ms).
	for range 100 { // enough recent samples for a p99
		g.r.slo.Add("m", 500*time.Millisecond, 100*time.Millisecond)
	}
	if p := g.r.sloPressure("a"); p != 2 {
		t.Errorf("pressure = %v, want 2 (TPOT at twice its SLO, asked by alias)", p)
	}
	if p := g.r.sloPressure("nope"); p != 0 {
		t.Errorf("pressure of an unknown model = %v, want 0", p)
	}
}
