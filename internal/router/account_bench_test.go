package router

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"gitea.mynodes.xyz/ilker/llmgw/internal/config"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/tenant"
	"gitea.mynodes.xyz/ilker/llmgw/internal/openai"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/proxy"
)

// BenchmarkAccount is the accounting of one answered request, streamed,
// by a tenant, of a model with both SLOs: every metric a request is
// counted in, no ledger.
func BenchmarkAccount(b *testing.B) {
	benchmarkAccount(b, true)
}

// BenchmarkAccountPlain is BenchmarkAccount for a request not streamed,
// without a key.
func BenchmarkAccountPlain(b *testing.B) {
	benchmarkAccount(b, false)
}

func benchmarkAccount(b *testing.B, stream bool) {
	cfg := config.Default()
	r, err := New(Options{Server: serverOptions(cfg.Server), Router: routerOptions(cfg.Router), Registerer: prometheus.NewRegistry()})
	if err != nil {
		b.Fatal(err)
	}
	cat, err := catalog.New([]catalog.Pool{{Name: "p", Kind: catalog.KindVLLM, Endpoints: []catalog.Endpoint{{URL: "http://10.0.0.1/v1"}}}},
		[]catalog.Model{{Name: "llama", Aliases: []string{"default"}, Pool: "p",
			SLO: catalog.SLO{TTFTp99: 500 * time.Millisecond, TPOTp99: 50 * time.Millisecond}}})
	if err != nil {
		b.Fatal(err)
	}
	r.SetCatalog(cat)
	m, _ := cat.Resolve("default")
	req := &parsedRequest{Request: openai.Request{Model: "default", Stream: stream}, api: apis["/v1/chat/completions"],
		model: m, snap: r.snap.Load(), start: time.Now()}
	if stream {
		req.key = &tenant.Key{ID: "k", Tenant: "acme/search/alice"}
	}
	res := dispatchResult{pool: "p", endpoint: "10.0.0.1", outcome: proxy.Outcome{Status: 200,
		Usage: &openai.Usage{PromptTokens: 31, CompletionTokens: 200}, TTFT: 120 * time.Millisecond, Decode: 4 * time.Second}}
	b.ReportAllocs()
	for b.Loop() {
		r.complete(req, res)
	}
}
