package observe

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
)

// newGenAI is GenAI registered with a registry of its own.
func newGenAI(t *testing.T) (*GenAI, *prometheus.Registry) {
	t.Helper()
	g := NewGenAI()
	return g, registered(t, g, nil)
}

// TestGenAIExemplar: a request's exemplar goes with its first-token and
// duration observations, in the convention's buckets, and with no other.
func TestGenAIExemplar(t *testing.T) {
	g, reg := newGenAI(t)
	m := &catalog.Model{Name: "m", Pool: "gpu"}
	c := finished(m, true, "gpu", streamed(300*time.Millisecond, 11, time.Second), 2*time.Second)
	c.Provider = ProviderName(catalog.KindOpenAI)
	c.Exemplar = prometheus.Labels{"trace_id": "4bf92f3577b34da6a3ce929d0e0e4736"}
	g.Observe(c)
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
	buckets := map[string][]float64{
		"gen_ai_server_time_to_first_token_seconds":   genAITTFTBuckets,
		"gen_ai_server_time_per_output_token_seconds": genAITPOTBuckets,
		"gen_ai_server_request_duration_seconds":      genAIDurationBuckets,
		"gen_ai_client_token_usage":                   genAITokenBuckets,
	}
	for name, want := range buckets {
		for _, m := range mfs[name].GetMetric() {
			var bounds []float64
			for _, b := range m.GetHistogram().GetBucket() {
				bounds = append(bounds, b.GetUpperBound())
			}
			if !slices.Equal(bounds, want) {
				t.Errorf("%s buckets %v, want the convention's %v", name, bounds, want)
			}
		}
	}
}

// TestGenAIAttributes: each pool kind's provider and each API's operation
// are the convention's values where it has one.
func TestGenAIAttributes(t *testing.T) {
	providers := map[string]string{catalog.KindOpenAI: "openai", catalog.KindAnthropic: "anthropic",
		catalog.KindAzure: "azure.ai.openai", catalog.KindVLLM: "vllm", catalog.KindSGLang: "sglang"}
	for kind, want := range providers {
		if got := ProviderName(kind); got != want {
			t.Errorf("kind %s: gen_ai_provider_name %q, want %q", kind, got, want)
		}
	}
	for _, tt := range []struct {
		counts, generates bool
		path, want        string
	}{
		{false, true, "/chat/completions", "chat"}, {false, true, "/completions", "text_completion"},
		{false, false, "/embeddings", "embeddings"}, {true, false, "", "count_tokens"},
	} {
		if got := Operation(tt.counts, tt.generates, tt.path); got != tt.want {
			t.Errorf("%+v: gen_ai_operation_name %q, want %q", tt, got, tt.want)
		}
	}
}
