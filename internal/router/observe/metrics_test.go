package observe

import (
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/tenant"
	"gitea.mynodes.xyz/ilker/llmgw/internal/openai"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/proxy"
)

// newMetrics is Metrics registered with a registry of its own, with cat
// in service.
func newMetrics(t *testing.T, cat *catalog.Catalog, tenantLevel string, tenantLimit int) (*Metrics, *prometheus.Registry) {
	t.Helper()
	m := NewMetrics(tenantLevel, tenantLimit)
	return m, registered(t, m, cat)
}

// TestTokenMetricsGolden checks the token families' names, help, labels and
// buckets, as /metrics shows them, after two known requests: a streamed one
// by a tenant (11 tokens decoded in a second: 100 ms a token, 10 a second)
// and a plain one without a tenant (20 tokens in 2 s).
func TestTokenMetricsGolden(t *testing.T) {
	cat, err := catalog.New([]catalog.Pool{{Name: "gpu", Endpoints: []catalog.Endpoint{{URL: "http://127.0.0.1:1/v1"}}}},
		[]catalog.Model{{Name: "llama", Aliases: []string{"default"}, Pool: "gpu", SLO: catalog.SLO{TTFTp99: 2 * time.Second, TPOTp99: 50 * time.Millisecond}}})
	if err != nil {
		t.Fatal(err)
	}
	m, reg := newMetrics(t, cat, tenant.LevelTeam, 0)
	llama, _ := cat.Resolve("default")

	c := finished(llama, true, "gpu", proxy.Outcome{Usage: &openai.Usage{CompletionTokens: 11}, TTFT: 300 * time.Millisecond, Decode: time.Second}, 2*time.Second)
	c.Tenant = m.TenantLabel("acme/search/alice")
	m.Observe(c)
	m.Observe(finished(llama, false, "gpu", proxy.Outcome{Usage: &openai.Usage{CompletionTokens: 20}}, 2*time.Second))

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
}

// TestTokensCountedForTheServingModel: llmgw_tokens_total counts a
// request's tokens under the model that served it — a fallback's, on its
// pool — and llmgw_requests_total under the model label.
func TestTokensCountedForTheServingModel(t *testing.T) {
	cat, err := catalog.New([]catalog.Pool{{Name: "a", Endpoints: []catalog.Endpoint{{URL: "http://a/v1"}}}, {Name: "b", Endpoints: []catalog.Endpoint{{URL: "http://b/v1"}}}},
		[]catalog.Model{{Name: "m", Pool: "a", Fallbacks: []string{"fb"}}, {Name: "fb", Pool: "b"}})
	if err != nil {
		t.Fatal(err)
	}
	m, reg := newMetrics(t, cat, tenant.LevelOrg, 0)
	requested, _ := cat.Resolve("m")
	c := finished(requested, false, "b", proxy.Outcome{Status: 200, Usage: &openai.Usage{PromptTokens: 7, CompletionTokens: 4}}, time.Second)
	c.Record.Model, c.Record.PromptTokens, c.Record.CompletionTokens = "fb", 7, 4
	m.Observe(c)
	mfs := gather(t, reg)
	var tokens []string
	for _, s := range mfs["llmgw_tokens_total"].GetMetric() {
		if v := s.GetCounter().GetValue(); v > 0 {
			tokens = append(tokens, s.GetLabel()[0].GetValue()+" "+s.GetLabel()[1].GetValue()+" "+s.GetLabel()[2].GetValue())
		}
	}
	if len(tokens) != 2 || tokens[0] != "completion fb b" || tokens[1] != "prompt fb b" {
		t.Errorf("tokens counted as %v, want the fallback's on its pool", tokens)
	}
	if got := mfs["llmgw_requests_total"].GetMetric()[0].GetLabel(); got[1].GetValue() != "" || got[2].GetValue() != "m" || got[3].GetValue() != "b" {
		t.Errorf("request counted with labels %v, want model m, pool b, no error", got)
	}
}

// TestMetricsConcurrent: requests of several models and pools observed
// from many goroutines at once (run with -race) are each counted once,
// and a catalog put in service meanwhile loses none.
func TestMetricsConcurrent(t *testing.T) {
	cat := tenantCatalog(t)
	m, reg := newMetrics(t, cat, tenant.LevelOrg, 0)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			model := &catalog.Model{Name: fmt.Sprint("m", g%3), Pool: "gpu"}
			for i := range 200 {
				m.Observe(finished(model, true, fmt.Sprint("p", i%4), streamed(time.Millisecond, 3, time.Millisecond), time.Second))
				if g == 0 && i%50 == 0 {
					m.SetCatalog(cat)
				}
			}
		})
	}
	wg.Wait()
	var n float64
	for _, s := range gather(t, reg)["llmgw_requests_total"].GetMetric() {
		n += s.GetCounter().GetValue()
	}
	if n != 8*200 {
		t.Errorf("%v requests counted, want %d", n, 8*200)
	}
}
