package router

import (
	"testing"

	dto "github.com/prometheus/client_model/go"
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
	counts := map[string]uint64{ // streamed alone, both, both, and each of both's two kinds
		"gen_ai_server_time_to_first_token_seconds": 1, "gen_ai_server_time_per_output_token_seconds": 1,
		"gen_ai_server_request_duration_seconds": 2, "gen_ai_client_token_usage": 4,
	}
	for name, want := range counts {
		var n uint64
		for _, m := range series(mfs, name, attrs) {
			n += m.GetHistogram().GetSampleCount()
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

// TestGenAIOperations: each API's operation is the convention's value.
func TestGenAIOperations(t *testing.T) {
	ops := map[string]string{"/v1/chat/completions": "chat", "/v1/messages": "chat", "/v1/responses": "chat",
		"/v1/completions": "text_completion", "/v1/embeddings": "embeddings"}
	for path, want := range ops {
		if got := operation(apis[path]); got != want {
			t.Errorf("%s: gen_ai_operation_name %q, want %q", path, got, want)
		}
	}
}
