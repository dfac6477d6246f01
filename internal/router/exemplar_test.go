package router

// Exemplars and prompt content: a sampled request's TTFT and duration
// carry its trace id as an exemplar, shown in an OpenMetrics scrape; an
// unsampled one's carry none. Prompt messages reach a span only when
// content recording is on.

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// exemplarTraceIDs is the trace_id of every exemplar of the histogram
// named name in g's registry.
func exemplarTraceIDs(t *testing.T, g *testGateway, name string) []string {
	t.Helper()
	mfs, err := g.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			var exs []*dto.Exemplar
			for _, b := range m.GetHistogram().GetBucket() {
				if b.GetExemplar() != nil {
					exs = append(exs, b.GetExemplar())
				}
			}
			for _, ex := range exs {
				for _, l := range ex.GetLabel() {
					if l.GetName() == "trace_id" {
						ids = append(ids, l.GetValue())
					}
				}
			}
		}
	}
	return ids
}

func TestExemplarsLinkLatencyToTheTrace(t *testing.T) {
	g, exp, _ := tracedGateway(t, false, nil, &upstream{tokens: 3})
	resp, body := g.post(t, "/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	server, _ := serverSpan(t, exp)
	traceID := server.SpanContext.TraceID().String()
	waitFor(t, "the request to be timed", func() bool { return len(exemplarTraceIDs(t, g, "llmgw_request_duration_seconds")) == 1 })
	for _, name := range []string{"llmgw_ttft_seconds", "llmgw_request_duration_seconds",
		"gen_ai_server_time_to_first_token_seconds", "gen_ai_server_request_duration_seconds"} {
		if got := exemplarTraceIDs(t, g, name); len(got) != 1 || got[0] != traceID {
			t.Errorf("%s exemplars' trace ids %v, want [%s], the request span's", name, got, traceID)
		}
	}

	// As a scraper asking for OpenMetrics reads them.
	s := httptest.NewServer(promhttp.HandlerFor(g.reg, promhttp.HandlerOpts{EnableOpenMetrics: true}))
	defer s.Close()
	req, _ := http.NewRequest(http.MethodGet, s.URL, nil)
	req.Header.Set("Accept", "application/openmetrics-text;version=1.0.0")
	mresp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	text, _ := io.ReadAll(mresp.Body)
	mresp.Body.Close()
	if ct := mresp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/openmetrics-text") {
		t.Fatalf("Content-Type %q, want OpenMetrics", ct)
	}
	for _, name := range []string{"llmgw_ttft_seconds_bucket", "llmgw_request_duration_seconds_bucket"} {
		found := false
		for line := range strings.SplitSeq(string(text), "\n") {
			if strings.HasPrefix(line, name+"{") && strings.Contains(line, ` # {`) && strings.Contains(line, `trace_id="`+traceID+`"`) {
				found = true
			}
		}
		if !found {
			t.Errorf("no %s line with an exemplar of trace %s in the OpenMetrics scrape", name, traceID)
		}
	}
}

func TestNoExemplarWhenNotSampled(t *testing.T) {
	exp, tp, log := newTracedOptions(t, sdktrace.WithSampler(sdktrace.NeverSample()))
	g := newTestGatewayWith(t, Options{Telemetry: TelemetryOptions{Tracer: tp, AccessLog: log}}, nil, &upstream{tokens: 3})
	g.post(t, "/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	waitFor(t, "the request to be counted", func() bool {
		mfs, _ := g.reg.Gather()
		for _, mf := range mfs {
			if mf.GetName() == "llmgw_request_duration_seconds" {
				return true
			}
		}
		return false
	})
	for _, name := range []string{"llmgw_ttft_seconds", "llmgw_request_duration_seconds",
		"gen_ai_server_time_to_first_token_seconds", "gen_ai_server_request_duration_seconds"} {
		if got := exemplarTraceIDs(t, g, name); len(got) != 0 {
			t.Errorf("%s has exemplars %v for a request not sampled", name, got)
		}
	}
	if n := len(exp.GetSpans()); n != 0 {
		t.Errorf("%d spans exported for a request not sampled", n)
	}
}

func TestPromptContentOnlyWhenSwitchedOn(t *testing.T) {
	body := `{"model":"m","messages":[{"role":"system","content":"be brief"},{"role":"user","content":[{"type":"text","text":"secret prompt"},{"type":"image_url","image_url":{"url":"https://x/cat.png"}}]}]}`
	for _, on := range []bool{false, true} {
		g, exp, _ := tracedGateway(t, on, nil, &upstream{tokens: 1})
		resp, b := g.post(t, "/v1/chat/completions", body)
		if resp.StatusCode != 200 {
			t.Fatalf("status %d: %s", resp.StatusCode, b)
		}
		_, spans := serverSpan(t, exp)
		var with []string
		for _, s := range spans {
			for _, kv := range s.Attributes {
				if strings.Contains(kv.Value.Emit(), "secret prompt") {
					with = append(with, s.Name+" "+string(kv.Key))
				}
			}
		}
		server, _ := serverSpan(t, exp)
		got, set := attrs(server)["gen_ai.input.messages"]
		switch {
		case !on && (set || len(with) > 0):
			t.Errorf("content off: the prompt is on the spans: %v", with)
		case on:
			want := `[{"role":"system","parts":[{"type":"text","content":"be brief"}]},{"role":"user","parts":[{"type":"text","content":"secret prompt"},{"type":"uri","modality":"image","uri":"https://x/cat.png"}]}]`
			if got.AsString() != want {
				t.Errorf("content on: gen_ai.input.messages = %s, want %s", got.AsString(), want)
			}
		}
	}
}
