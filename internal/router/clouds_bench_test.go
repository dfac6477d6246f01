package router

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"gitea.mynodes.xyz/ilker/llmgw/internal/config"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
)

// BenchmarkHostedPool is one whole chat completion through the handler to
// a pool of each hosted kind, side by side, its upstream a canned answer
// in the kind's own API: what a request to a hosted pool costs the
// gateway beside one to an OpenAI-compatible pool. A bedrock pool's calls
// are signed (static credentials from the environment), a vertex pool's
// are not timed here, as its token comes from the network.
func BenchmarkHostedPool(b *testing.B) {
	b.Setenv("AWS_ACCESS_KEY_ID", "AKIDBENCH")
	b.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
	b.Setenv("AWS_CONFIG_FILE", b.TempDir()+"/none")
	b.Setenv("AWS_SHARED_CREDENTIALS_FILE", b.TempDir()+"/none")
	b.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	for _, c := range []struct {
		pool   catalog.Pool
		answer string
	}{
		{catalog.Pool{Kind: catalog.KindOpenAI}, string(benchAnswer.body)},
		{catalog.Pool{Kind: catalog.KindAnthropic, APIKey: "k"}, `{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"Requests flow through"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":31,"output_tokens":4}}`},
		{catalog.Pool{Kind: catalog.KindBedrock, Region: "us-east-1"}, `{"output":{"message":{"role":"assistant","content":[{"text":"Requests flow through"}]}},"stopReason":"end_turn","usage":{"inputTokens":31,"outputTokens":4,"totalTokens":35},"metrics":{"latencyMs":100}}`},
		{catalog.Pool{Kind: catalog.KindGemini, APIKey: "k"}, `{"candidates":[{"content":{"role":"model","parts":[{"text":"Requests flow through"}]},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":31,"candidatesTokenCount":4,"totalTokenCount":35}}`},
	} {
		b.Run(c.pool.Kind, func(b *testing.B) {
			cfg := config.Default()
			r, err := New(Options{Server: serverOptions(cfg.Server), Router: routerOptions(cfg.Router), Registerer: prometheus.NewRegistry(),
				Transport: &cannedTransport{contentType: "application/json", body: []byte(c.answer)}})
			if err != nil {
				b.Fatal(err)
			}
			p := c.pool
			p.Name, p.Endpoints = "p", []catalog.Endpoint{{URL: "http://10.0.0.1/v1"}, {URL: "http://10.0.0.2/v1"}}
			cat, err := catalog.New([]catalog.Pool{p}, []catalog.Model{{Name: "llama", Aliases: []string{"default"}, Pool: "p", Upstream: "meta-llama/Llama-3.1-8B-Instruct"}})
			if err != nil {
				b.Fatal(err)
			}
			r.SetCatalog(cat)
			b.ReportAllocs()
			cpu := cpuTime()
			for b.Loop() {
				w := httptest.NewRecorder()
				r.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(benchPrompt)))
				if w.Code != 200 || !strings.Contains(w.Body.String(), "Requests flow through") {
					b.Fatal(w.Code, w.Body.String())
				}
			}
			b.ReportMetric(float64((cpuTime()-cpu).Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
	}
}
