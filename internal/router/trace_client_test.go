package router

// A client's trace context at the trust boundary, over real sockets: what
// an upstream receives of the traceparent, tracestate and baggage a
// client sends, and what is exported, with the client's trace linked (the
// default) or continued, on gateways that sample everything or nothing;
// and the span names and attributes a client's own strings make.

import (
	"io"
	"net/http"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// clientTracestate is a client's tracestate, carrying what it would have
// an upstream read.
const clientTracestate = "exfil=c2VjcmV0LWZyb20tdGhlLWNsaWVudA"

// sendTraced sends body to path with the client's traceparent (its flags
// given), tracestate and baggage, and fails unless the answer is a 200.
func sendTraced(t *testing.T, g *testGateway, path, body, flags string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, g.url+path, strings.NewReader(body))
	req.Header.Set("Anthropic-Version", "2023-06-01")
	req.Header.Set("traceparent", "00-"+clientTraceID+"-"+clientSpanID+"-"+flags)
	req.Header.Set("tracestate", clientTracestate)
	req.Header.Set("baggage", "user=alice,tenant=acme")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("%s: status %d: %s", path, resp.StatusCode, b)
	}
}

// sentTrace is the trace context up's one request carried: the trace id
// and flags of its traceparent, its tracestate and its baggage.
func sentTrace(t *testing.T, up *tapped) (traceID, flags, tracestate, baggage string) {
	t.Helper()
	seen := up.headers()
	if len(seen) != 1 {
		t.Fatalf("the upstream got %d requests, want 1", len(seen))
	}
	parts := strings.Split(seen[0].Get("traceparent"), "-")
	if len(parts) != 4 {
		t.Fatalf("the upstream got traceparent %q", seen[0].Get("traceparent"))
	}
	return parts[1], parts[3], seen[0].Get("tracestate"), seen[0].Get("baggage")
}

// checkLinked checks that the SERVER span of exp starts a trace of its
// own, traceID, linked to the client's span with none of its tracestate,
// and that no span carries the client's tracestate.
func checkLinked(t *testing.T, exp *tracetest.InMemoryExporter, traceID string) {
	t.Helper()
	server, spans := serverSpan(t, exp)
	if server.Parent.IsValid() {
		t.Errorf("the request's span has parent %s in trace %s; want a trace of its own", server.Parent.SpanID(), server.Parent.TraceID())
	}
	if got := server.SpanContext.TraceID().String(); got != traceID {
		t.Errorf("the request's span is in trace %s; the upstream was sent %s", got, traceID)
	}
	if len(server.Links) != 1 {
		t.Fatalf("the request's span has %d links, want 1 to the client's span", len(server.Links))
	}
	l := server.Links[0].SpanContext
	if l.TraceID().String() != clientTraceID || l.SpanID().String() != clientSpanID || l.TraceState().Len() != 0 {
		t.Errorf("the request's span links to %s/%s (tracestate %q), want the client's %s/%s and no tracestate",
			l.TraceID(), l.SpanID(), l.TraceState(), clientTraceID, clientSpanID)
	}
	for _, s := range spans {
		if s.SpanContext.TraceState().Len() != 0 {
			t.Errorf("span %q carries tracestate %q", s.Name, s.SpanContext.TraceState())
		}
	}
}

// TestClientTraceIsLinked: with the client's trace linked, on every API
// that calls an upstream, the upstream is sent a trace id of llmgw's and
// none of the client's tracestate or baggage, and the request's span
// starts that trace, linked to the client's span.
func TestClientTraceIsLinked(t *testing.T) {
	for _, tc := range []struct{ path, body string }{
		{"/v1/chat/completions", chatRequest(true)},
		{"/v1/completions", `{"model":"a","prompt":"hi"}`},
		{"/v1/embeddings", `{"model":"a","input":"hi"}`},
		{"/v1/messages", `{"model":"a","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`},
		{"/v1/responses", `{"model":"a","input":"hi"}`},
	} {
		t.Run(tc.path, func(t *testing.T) {
			up := &tapped{next: &upstream{tokens: 2}}
			g, exp, _ := tracedGateway(t, false, nil, up)
			sendTraced(t, g, tc.path, tc.body, "01")
			traceID, _, tracestate, baggage := sentTrace(t, up)
			if traceID == clientTraceID {
				t.Errorf("the upstream was sent the client's trace id %s", traceID)
			}
			if tracestate != "" || baggage != "" {
				t.Errorf("the upstream was sent tracestate %q and baggage %q; want neither", tracestate, baggage)
			}
			checkLinked(t, exp, traceID)
		})
	}
}

// TestSamplingIsTheGateways: a client's sampled flag decides nothing
// unless its trace is continued. Linked, a client that does not sample
// is sampled by a gateway sampling everything, and one that samples is
// not by a gateway sampling nothing, whose upstream is told so; both
// gateways sample as the SDK's parent-based samplers do, which would
// follow the client's flag if they were shown it. Continued, the client's
// trace, tracestate and flag are followed.
func TestSamplingIsTheGateways(t *testing.T) {
	nothing := sdktrace.ParentBased(sdktrace.TraceIDRatioBased(0))
	for _, tc := range []struct {
		name      string
		continued bool
		sampler   sdktrace.Sampler // nil: the SDK's default, parent-based always on
		flags     string           // the client's
		sampled   bool             // whether the request is sampled
	}{
		{name: "a client not sampling, linked", flags: "00", sampled: true},
		{name: "a client sampling, linked, on a gateway sampling nothing", sampler: nothing, flags: "01", sampled: false},
		{name: "a client sampling, continued", continued: true, flags: "01", sampled: true},
		{name: "a client not sampling, continued", continued: true, flags: "00", sampled: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var opts []sdktrace.TracerProviderOption
			if tc.sampler != nil {
				opts = append(opts, sdktrace.WithSampler(tc.sampler))
			}
			exp, tp, log := newTracedOptions(t, opts...)
			up := &tapped{next: &upstream{tokens: 2}}
			g := newTestGatewayWith(t, Options{Telemetry: TelemetryOptions{Tracer: tp, AccessLog: log,
				ContinueClientTrace: tc.continued}}, nil, up)
			sendTraced(t, g, "/v1/chat/completions", chatRequest(false), tc.flags)
			traceID, flags, tracestate, baggage := sentTrace(t, up)
			if want := map[bool]string{true: "01", false: "00"}[tc.sampled]; flags != want {
				t.Errorf("the upstream was sent flags %s, want %s", flags, want)
			}
			if baggage != "" {
				t.Errorf("the upstream was sent baggage %q", baggage)
			}
			switch {
			case tc.continued && (traceID != clientTraceID || tracestate != clientTracestate):
				t.Errorf("the upstream was sent trace %s, tracestate %q; want the client's %s, %q", traceID, tracestate, clientTraceID, clientTracestate)
			case !tc.continued && (traceID == clientTraceID || tracestate != ""):
				t.Errorf("the upstream was sent trace %s, tracestate %q; want a trace of llmgw's and no tracestate", traceID, tracestate)
			}

			// The access log's line is written once the request's span
			// has ended, and so been exported if it was sampled.
			waitFor(t, "the access log's line", func() bool { return log.String() != "" })
			n := len(exp.GetSpans())
			switch {
			case !tc.sampled:
				if n != 0 {
					t.Errorf("%d spans exported of a request not sampled", n)
				}
			case n == 0:
				t.Error("no span exported of a request the gateway samples")
			case tc.continued:
				server, _ := serverSpan(t, exp)
				if server.SpanContext.TraceID().String() != clientTraceID || server.Parent.SpanID().String() != clientSpanID {
					t.Errorf("the request's span is in trace %s under %s, want the client's %s under %s",
						server.SpanContext.TraceID(), server.Parent.SpanID(), clientTraceID, clientSpanID)
				}
			default:
				checkLinked(t, exp, traceID)
				if server, _ := serverSpan(t, exp); !server.SpanContext.IsSampled() {
					t.Error("the request's span is exported but not sampled")
				}
			}
		})
	}
}

// TestUnknownModelsLeaveTheSpanName: the request's span is named for its
// model only when the catalog knows the name, so that names a client
// makes up do not each name spans.
func TestUnknownModelsLeaveTheSpanName(t *testing.T) {
	g, exp, _ := tracedGateway(t, false, nil, &upstream{tokens: 1})
	resp, body := g.post(t, "/v1/chat/completions", `{"model":"made-up-1234","messages":[{"role":"user","content":"hi"}]}`)
	if resp.StatusCode != 404 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	server, _ := serverSpan(t, exp)
	if server.Name != "chat" {
		t.Errorf("the span of a request for an unknown model is named %q, want chat", server.Name)
	}
	checkAttrs(t, server, map[string]string{"gen_ai.request.model": "made-up-1234"})
}

// TestLongHostLeavesNoServerAddress: a Host longer than any DNS name puts
// no server.address on the request's span; one that is a name does.
func TestLongHostLeavesNoServerAddress(t *testing.T) {
	const maxHostName = 253 // the longest DNS name
	for _, host := range []string{"gateway.example:8080", strings.Repeat("h", 64<<10)} {
		g, exp, _ := tracedGateway(t, false, nil, &upstream{tokens: 1})
		req, _ := http.NewRequest(http.MethodPost, g.url+"/v1/chat/completions", strings.NewReader(chatRequest(false)))
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		server, _ := serverSpan(t, exp)
		got, set := attrs(server)["server.address"]
		switch {
		case len(host) > maxHostName && set:
			t.Errorf("a Host of %d bytes is on the span as server.address (%d bytes)", len(host), len(got.AsString()))
		case len(host) <= maxHostName && got.AsString() != "gateway.example":
			t.Errorf("server.address = %q, want gateway.example", got.AsString())
		}
	}
}
