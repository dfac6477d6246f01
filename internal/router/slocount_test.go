package router

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"gitea.mynodes.xyz/ilker/llmgw/internal/config"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
	"gitea.mynodes.xyz/ilker/llmgw/internal/openai"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/proxy"
)

// TestSLORequests: each streamed request of a model with an SLO is counted
// met or missed for each kind of sample it gave, judged as goodput judges
// it; a model without an SLO, a plain request and a stream too short for a
// time per token give no count of what they lack. A model's series show
// from the catalog on, at zero.
func TestSLORequests(t *testing.T) {
	reg := prometheus.NewRegistry()
	cfg := config.Default()
	r, err := New(Options{Server: serverOptions(cfg.Server), Router: routerOptions(cfg.Router), Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	cat, err := catalog.New([]catalog.Pool{{Name: "gpu", Endpoints: []catalog.Endpoint{{URL: "http://127.0.0.1:1/v1"}}}},
		[]catalog.Model{
			{Name: "llama", Aliases: []string{"default"}, Pool: "gpu", SLO: catalog.SLO{TTFTp99: 500 * time.Millisecond, TPOTp99: 50 * time.Millisecond}},
			{Name: "ttft-only", Pool: "gpu", SLO: catalog.SLO{TTFTp99: 500 * time.Millisecond}},
			{Name: "none", Pool: "gpu"},
		})
	if err != nil {
		t.Fatal(err)
	}
	r.SetCatalog(cat)

	requests := []struct {
		model      string
		stream     bool
		ttft       time.Duration
		tokens     int64
		decode     time.Duration // tpot is decode/(tokens-1)
		metTTFT    bool          // goodput's verdict on each, where judged
		metTPOT    bool
		judgedTPOT bool
	}{
		{"default", true, 300 * time.Millisecond, 11, 400 * time.Millisecond, true, true, true}, // 40 ms a token
		{"llama", true, 500 * time.Millisecond, 11, 500 * time.Millisecond, true, true, true},   // both at the SLO: met
		{"llama", true, 501 * time.Millisecond, 11, 501 * time.Millisecond, false, false, true}, // both just past
		{"llama", true, 200 * time.Millisecond, 1, 0, true, false, false},                       // one token: no TPOT, and no sample at all
		{"llama", false, 0, 20, 0, false, false, false},                                         // plain: no sample
		{"ttft-only", true, 900 * time.Millisecond, 11, 2 * time.Second, false, false, false},   // TPOT has no SLO
		{"none", true, 900 * time.Millisecond, 11, 2 * time.Second, false, false, false},        // no SLO
	}
	for _, q := range requests {
		req := &parsedRequest{Request: openai.Request{Model: q.model, Stream: q.stream}}
		o := proxy.Outcome{Status: 200, Usage: &openai.Usage{CompletionTokens: q.tokens}, TTFT: q.ttft, Decode: q.decode}
		r.observeTokens(req, dispatchResult{pool: "gpu", outcome: o}, 2*time.Second)
		// Goodput's verdict on the same request, where both kinds are judged.
		if q.stream && q.judgedTPOT {
			_, m := r.resolve(q.model)
			req.model = &m
			if got, want := r.metSLO(req, o), q.metTTFT && q.metTPOT; got != want {
				t.Errorf("%+v: goodput says met = %v, this test %v", q, got, want)
			}
		}
	}
	want := `
# HELP llmgw_slo_requests_total Streamed requests judged against their model's SLO, by model, kind (ttft: time to first token against slo.ttft_p99; tpot: time per output token against slo.tpot_p99) and result: met (no longer than the SLO) or missed. For burn-rate alerts: missed over all is the error ratio.
# TYPE llmgw_slo_requests_total counter
llmgw_slo_requests_total{kind="tpot",model="llama",result="met"} 2
llmgw_slo_requests_total{kind="tpot",model="llama",result="missed"} 1
llmgw_slo_requests_total{kind="ttft",model="llama",result="met"} 2
llmgw_slo_requests_total{kind="ttft",model="llama",result="missed"} 1
llmgw_slo_requests_total{kind="ttft",model="ttft-only",result="met"} 0
llmgw_slo_requests_total{kind="ttft",model="ttft-only",result="missed"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "llmgw_slo_requests_total"); err != nil {
		t.Error(err)
	}
	// One count of each kind for each sample the SLO tracker took.
	if n := r.slo.Len("llama"); n != 3 {
		t.Errorf("SLO tracker holds %d samples for llama, want the 3 counted", n)
	}
}
