package router

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"gitea.mynodes.xyz/ilker/llmgw/internal/config"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
	"gitea.mynodes.xyz/ilker/llmgw/internal/openai"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/proxy"
)

// series is family name's series whose labels include want, by the
// labels they have beyond it.
func series(mfs map[string]*dto.MetricFamily, name string, want map[string]string) []*dto.Metric {
	var out []*dto.Metric
	for _, m := range mfs[name].GetMetric() {
		n := 0
		for _, l := range m.GetLabel() {
			if v, ok := want[l.GetName()]; ok && v == l.GetValue() {
				n++
			}
		}
		if n == len(want) {
			out = append(out, m)
		}
	}
	return out
}

// TestGenAIHistograms: a streamed chat, a plain chat and a failed one,
// through a gateway to real upstreams, are in the GenAI histograms with
// the convention's attributes and buckets.
func TestGenAIHistograms(t *testing.T) {
	ok := &upstream{tokens: 5}
	g := newTestGateway(t, nil, ok)
	for _, body := range []string{`{"model":"a","stream":true,"messages":[]}`, `{"model":"m","messages":[]}`} {
		if resp, b := g.post(t, "/v1/chat/completions", body); resp.StatusCode != 200 {
			t.Fatalf("%d %s", resp.StatusCode, b)
		}
	}
	failing := newTestGateway(t, nil, &upstream{status: 500})
	if resp, b := failing.post(t, "/v1/chat/completions", `{"model":"m","messages":[]}`); resp.StatusCode < 500 {
		t.Fatalf("failing upstream answered %d %s", resp.StatusCode, b)
	}

	mfs := gather(t, g.reg)
	attrs := map[string]string{"gen_ai_operation_name": "chat", "gen_ai_provider_name": "openai", "gen_ai_request_model": "m"}
	buckets := map[string][]float64{
		"gen_ai_server_time_to_first_token_seconds":   genAITTFTBuckets,
		"gen_ai_server_time_per_output_token_seconds": genAITPOTBuckets,
		"gen_ai_server_request_duration_seconds":      genAIDurationBuckets,
		"gen_ai_client_token_usage":                   genAITokenBuckets,
	}
	counts := map[string]uint64{ // streamed alone, both, both, and each of both's two kinds
		"gen_ai_server_time_to_first_token_seconds": 1, "gen_ai_server_time_per_output_token_seconds": 1,
		"gen_ai_server_request_duration_seconds": 2, "gen_ai_client_token_usage": 4,
	}
	for name, want := range counts {
		var n uint64
		for _, m := range series(mfs, name, attrs) {
			h := m.GetHistogram()
			n += h.GetSampleCount()
			var bounds []float64
			for _, b := range h.GetBucket() {
				bounds = append(bounds, b.GetUpperBound())
			}
			if !slices.Equal(bounds, buckets[name]) {
				t.Errorf("%s buckets %v, want the convention's %v", name, bounds, buckets[name])
			}
		}
		if n != want {
			t.Errorf("%s{%v}: %d observations, want %d", name, attrs, n, want)
		}
	}
	// Token usage by type: 5 input and 5 output tokens a request.
	for _, typ := range []string{"input", "output"} {
		ms := series(mfs, "gen_ai_client_token_usage", map[string]string{"gen_ai_token_type": typ, "gen_ai_request_model": "m"})
		if len(ms) != 1 || ms[0].GetHistogram().GetSampleSum() != 10 {
			t.Errorf("gen_ai_client_token_usage{gen_ai_token_type=%q}: %v, want one series summing 10", typ, ms)
		}
	}
	if ms := series(mfs, "gen_ai_server_request_duration_seconds", map[string]string{"error_type": ""}); len(ms) != 1 {
		t.Errorf("successful requests' duration in %d series, want 1 with error_type empty", len(ms))
	}
	// The failed request: a duration with its error type, and no first
	// token or usage.
	fmfs := gather(t, failing.reg)
	failed := map[string]string{"error_type": "upstream_status"}
	for k, v := range attrs {
		failed[k] = v
	}
	if ms := series(fmfs, "gen_ai_server_request_duration_seconds", failed); len(ms) != 1 || ms[0].GetHistogram().GetSampleCount() != 1 {
		t.Errorf("failed request's duration: %v, want one series of one with error_type %s", ms, failed["error_type"])
	}
	for _, name := range []string{"gen_ai_server_time_to_first_token_seconds", "gen_ai_server_time_per_output_token_seconds", "gen_ai_client_token_usage"} {
		for _, m := range series(fmfs, name, attrs) {
			if n := m.GetHistogram().GetSampleCount(); n != 0 {
				t.Errorf("failed request observed %d times in %s", n, name)
			}
		}
	}
}

// TestGenAIExemplar: an exemplar given with a request goes with its
// first-token and duration observations.
func TestGenAIExemplar(t *testing.T) {
	reg := prometheus.NewRegistry()
	cfg := config.Default()
	r, err := New(Options{Server: serverOptions(cfg.Server), Router: routerOptions(cfg.Router), Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	cat := tenantCatalog(t)
	r.SetCatalog(cat)
	m, _ := cat.Resolve("m")
	req := &parsedRequest{Request: openai.Request{Model: "m", Stream: true}, api: apis["/v1/chat/completions"], model: m}
	res := dispatchResult{pool: "gpu", outcome: proxy.Outcome{Status: 200, Usage: &openai.Usage{PromptTokens: 3, CompletionTokens: 11}, TTFT: 300 * time.Millisecond, Decode: time.Second}}
	r.observeGenAI(req, res, 2*time.Second, "", prometheus.Labels{"trace_id": "4bf92f3577b34da6a3ce929d0e0e4736"})
	mfs := gather(t, reg)
	for name, bucket := range map[string]float64{"gen_ai_server_time_to_first_token_seconds": 0.5, "gen_ai_server_request_duration_seconds": 2.56} {
		var got []string
		for _, m := range mfs[name].GetMetric() {
			for _, b := range m.GetHistogram().GetBucket() {
				if e := b.GetExemplar(); e != nil {
					got = append(got, fmt.Sprintf("%v %v %v", b.GetUpperBound(), e.GetLabel()[0].GetValue(), e.GetValue()))
				}
			}
		}
		if len(got) != 1 || got[0] != fmt.Sprintf("%v 4bf92f3577b34da6a3ce929d0e0e4736 %v", bucket, map[string]float64{"gen_ai_server_time_to_first_token_seconds": 0.3, "gen_ai_server_request_duration_seconds": 2}[name]) {
			t.Errorf("%s exemplars %v, want the trace in bucket %v", name, got, bucket)
		}
	}
	for _, m := range mfs["gen_ai_server_time_per_output_token_seconds"].GetMetric() {
		for _, b := range m.GetHistogram().GetBucket() {
			if b.GetExemplar() != nil {
				t.Errorf("time per output token has an exemplar")
			}
		}
	}
}

// TestGenAIAttributes: each API's operation and each pool kind's provider
// are the convention's values where it has one.
func TestGenAIAttributes(t *testing.T) {
	ops := map[string]string{"/v1/chat/completions": "chat", "/v1/messages": "chat", "/v1/responses": "chat",
		"/v1/completions": "text_completion", "/v1/embeddings": "embeddings"}
	for path, want := range ops {
		if got := operation(apis[path]); got != want {
			t.Errorf("%s: gen_ai_operation_name %q, want %q", path, got, want)
		}
	}
	providers := map[string]string{catalog.KindOpenAI: "openai", catalog.KindAnthropic: "anthropic",
		catalog.KindAzure: "azure.ai.openai", catalog.KindVLLM: "vllm", catalog.KindSGLang: "sglang"}
	for kind, want := range providers {
		if got := providerName(kind); got != want {
			t.Errorf("kind %s: gen_ai_provider_name %q, want %q", kind, got, want)
		}
	}
}
