package router

// Spans through a real gateway, recorded by the SDK's in-memory exporter:
// a streamed chat request and a Messages request through a hedged pool,
// whose first endpoint stalls and whose hedge answers. Each must give one
// SERVER span, starting a trace linked to the client's traceparent, and
// one CLIENT span per call, each call carrying its own span's traceparent
// upstream.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"gitea.mynodes.xyz/ilker/llmgw/internal/config"
)

// tracedUpstream is an upstream that stalls until its request is
// cancelled, or answers with usage (9 prompt tokens, 4 of them cached, 2
// completion tokens) and finish_reason stop. It keeps the traceparent
// of every request it sees.
type tracedUpstream struct {
	stall bool
	quit  chan struct{}

	mu           sync.Mutex
	traceparents []string
}

func newTracedUpstream(t *testing.T, stall bool) *tracedUpstream {
	u := &tracedUpstream{stall: stall, quit: make(chan struct{})}
	t.Cleanup(func() { close(u.quit) })
	return u
}

func (u *tracedUpstream) seen() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.traceparents...)
}

func (u *tracedUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/health" {
		return
	}
	u.mu.Lock()
	u.traceparents = append(u.traceparents, r.Header.Get("traceparent"))
	u.mu.Unlock()
	body, _ := io.ReadAll(r.Body)
	if u.stall {
		select {
		case <-r.Context().Done():
		case <-u.quit:
		}
		return
	}
	const usage = `"usage":{"prompt_tokens":9,"completion_tokens":2,"total_tokens":11,"prompt_tokens_details":{"cached_tokens":4}}`
	var req struct{ Stream bool }
	json.Unmarshal(body, &req)
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"c1","object":"chat.completion","model":%q,"choices":[{"index":0,"message":{"role":"assistant","content":"hello"},"finish_reason":"stop"}],%s}`, backendModel, usage)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	fmt.Fprintf(w, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"model\":%q,\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hel\"},\"finish_reason\":null}]}\n\n", backendModel)
	fmt.Fprintf(w, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"model\":%q,\"choices\":[{\"index\":0,\"delta\":{\"content\":\"lo\"},\"finish_reason\":\"stop\"}]}\n\n", backendModel)
	fmt.Fprintf(w, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"model\":%q,\"choices\":[],%s}\n\ndata: [DONE]\n\n", backendModel, usage)
}

// lineBuffer is an access log in memory.
type lineBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lineBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lineBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// tracedGateway is a test gateway whose spans go to the returned
// in-memory exporter, every one sampled unless a client's traceparent
// says otherwise, and whose access log to the returned buffer.
func tracedGateway(t *testing.T, content bool, mutate func(*config.Config), upstreams ...http.Handler) (*testGateway, *tracetest.InMemoryExporter, *lineBuffer) {
	t.Helper()
	exp, tp, log := newTracedOptions(t)
	g := newTestGatewayWith(t, Options{Telemetry: TelemetryOptions{Tracer: tp, RecordContent: content, AccessLog: log}}, mutate, upstreams...)
	return g, exp, log
}

// newTracedOptions is an in-memory exporter, a tracer provider exporting
// each span to it as it ends, and an access log in memory. The provider
// samples every span whose parent does not say otherwise, unless opts
// give it another sampler.
func newTracedOptions(t *testing.T, opts ...sdktrace.TracerProviderOption) (*tracetest.InMemoryExporter, *sdktrace.TracerProvider, *lineBuffer) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(append([]sdktrace.TracerProviderOption{sdktrace.WithSyncer(exp)}, opts...)...)
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	return exp, tp, &lineBuffer{}
}

// serverSpan waits for the one SERVER span exp has, and returns every
// span it has then.
func serverSpan(t *testing.T, exp *tracetest.InMemoryExporter) (tracetest.SpanStub, tracetest.SpanStubs) {
	t.Helper()
	var spans tracetest.SpanStubs
	waitFor(t, "the request's span to end", func() bool {
		spans = exp.GetSpans()
		for _, s := range spans {
			if s.SpanKind == trace.SpanKindServer {
				return true
			}
		}
		return false
	})
	var server []tracetest.SpanStub
	for _, s := range spans {
		if s.SpanKind == trace.SpanKindServer {
			server = append(server, s)
		}
	}
	if len(server) != 1 {
		t.Fatalf("%d SERVER spans, want 1", len(server))
	}
	return server[0], spans
}

func attrs(s tracetest.SpanStub) map[attribute.Key]attribute.Value {
	m := make(map[attribute.Key]attribute.Value, len(s.Attributes))
	for _, kv := range s.Attributes {
		m[kv.Key] = kv.Value
	}
	return m
}

// checkAttrs checks that s has each of want, with its value as Emit
// writes it.
func checkAttrs(t *testing.T, s tracetest.SpanStub, want map[string]string) {
	t.Helper()
	got := attrs(s)
	for k, v := range want {
		if g, ok := got[attribute.Key(k)]; !ok || g.Emit() != v {
			t.Errorf("span %q: %s = %q (set %v), want %q", s.Name, k, g.Emit(), ok, v)
		}
	}
}

// clientTraceparent is the caller's span: a trace the gateway links to.
const (
	clientTraceID     = "0af7651916cd43dd8448eb211c80319c"
	clientSpanID      = "b7ad6b7169203331"
	clientTraceparent = "00-" + clientTraceID + "-" + clientSpanID + "-01"
)

func TestSpansOfAHedgedRequest(t *testing.T) {
	for _, tc := range []struct {
		name, path, body string
		header           http.Header
		want             map[string]string // of the SERVER span
	}{
		{name: "streamed chat", path: "/v1/chat/completions",
			body: `{"model":"a","stream":true,"max_tokens":32,"messages":[{"role":"user","content":"secret prompt"}]}`,
			want: map[string]string{"gen_ai.request.stream": "true", "gen_ai.request.max_tokens": "32"}},
		{name: "messages", path: "/v1/messages",
			body:   `{"model":"a","max_tokens":32,"messages":[{"role":"user","content":"secret prompt"}]}`,
			header: http.Header{"Anthropic-Version": {"2023-06-01"}},
			want:   map[string]string{"gen_ai.request.stream": "false", "gen_ai.request.max_tokens": "32"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stalled, healthy := newTracedUpstream(t, true), newTracedUpstream(t, false)
			g, exp, _ := tracedGateway(t, false, hedging, stalled, healthy)
			g.pickNext(0)
			req, _ := http.NewRequest(http.MethodPost, g.url+tc.path, strings.NewReader(tc.body))
			for k, v := range tc.header {
				req.Header[k] = v
			}
			req.Header.Set("traceparent", clientTraceparent)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("status %d: %s", resp.StatusCode, body)
			}
			server, spans := serverSpan(t, exp)

			// The SERVER span starts a trace linked to the client's.
			if server.Name != "chat a" {
				t.Errorf("SERVER span named %q, want %q", server.Name, "chat a")
			}
			checkLinked(t, exp, server.SpanContext.TraceID().String())
			want := map[string]string{
				"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai",
				"gen_ai.request.model": "a", "gen_ai.response.model": "m",
				"gen_ai.usage.input_tokens": "9", "gen_ai.usage.output_tokens": "2", "gen_ai.usage.cache_read.input_tokens": "4",
				"gen_ai.response.finish_reasons": `["stop"]`, "server.address": "127.0.0.1",
				"llmgw.pool": "main", "llmgw.endpoint": g.endpointName("main", 1), "http.response.status_code": "200",
			}
			for k, v := range tc.want {
				want[k] = v
			}
			checkAttrs(t, server, want)
			got := attrs(server)
			for _, k := range []attribute.Key{"error.type", "gen_ai.system", "gen_ai.input.messages"} {
				if v, ok := got[k]; ok {
					t.Errorf("SERVER span has %s = %q; want none", k, v.Emit())
				}
			}

			// One CLIENT span per call, the hedge's too, each a child of
			// the SERVER span, and each call carrying its own span's
			// traceparent.
			if len(spans) != 3 {
				t.Fatalf("%d spans, want 3: the request's and one per call", len(spans))
			}
			for k, up := range []*tracedUpstream{stalled, healthy} {
				var client *tracetest.SpanStub
				for i := range spans {
					if spans[i].SpanKind == trace.SpanKindClient && attrs(spans[i])["llmgw.endpoint"].Emit() == g.endpointName("main", k) {
						client = &spans[i]
					}
				}
				if client == nil {
					t.Fatalf("no CLIENT span for endpoint %d", k)
				}
				if client.Parent.SpanID() != server.SpanContext.SpanID() || client.SpanContext.TraceID() != server.SpanContext.TraceID() {
					t.Errorf("endpoint %d's span is not a child of the request's", k)
				}
				if client.Name != "chat "+backendModel {
					t.Errorf("CLIENT span named %q, want %q", client.Name, "chat "+backendModel)
				}
				sent := fmt.Sprintf("00-%s-%s-01", server.SpanContext.TraceID(), client.SpanContext.SpanID())
				if got := up.seen(); len(got) != 1 || got[0] != sent {
					t.Errorf("endpoint %d received traceparent %q, want [%s]", k, got, sent)
				}
				checkAttrs(t, *client, map[string]string{
					"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.request.model": backendModel,
					"server.address": "127.0.0.1", "llmgw.pool": "main", "llmgw.route.policy": "round_robin",
				})
				a := attrs(*client)
				if _, ok := a["llmgw.route.predicted_ttft_seconds"]; !ok {
					t.Errorf("endpoint %d's span has no predicted TTFT", k)
				}
				if _, ok := a["llmgw.route.prefix_hit_ratio"]; !ok {
					t.Errorf("endpoint %d's span has no prefix hit", k)
				}
				if k == 0 {
					checkAttrs(t, *client, map[string]string{"llmgw.hedge.lost": "true"})
					if _, ok := a["error.type"]; ok {
						t.Errorf("the stalled call, cancelled for the hedge, has error.type %s", a["error.type"].Emit())
					}
				} else {
					checkAttrs(t, *client, map[string]string{"gen_ai.usage.output_tokens": "2", "gen_ai.response.finish_reasons": `["stop"]`})
				}
			}
			if n := testutil.ToFloat64(g.r.m.hedges.WithLabelValues("main", hedgeWon)); n != 1 {
				t.Errorf("llmgw_hedges_total{outcome=won} = %v, want 1: the hedge did not serve", n)
			}
		})
	}
}

// tapped records the headers of each request before next serves it.
type tapped struct {
	next http.Handler
	mu   sync.Mutex
	seen []http.Header
}

func (h *tapped) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	h.seen = append(h.seen, r.Header.Clone())
	h.mu.Unlock()
	h.next.ServeHTTP(w, r)
}

// headers is the headers of each request seen so far.
func (h *tapped) headers() []http.Header {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]http.Header(nil), h.seen...)
}

// TestEachRetryHasItsSpan: a call that fails before its first byte and
// the retry that answers are two CLIENT spans, the first with the
// upstream's error type, and each upstream gets its own call's
// traceparent; with no traceparent from the client the request starts a
// trace of its own.
func TestEachRetryHasItsSpan(t *testing.T) {
	failing, answering := &tapped{next: &upstream{status: 500}}, &tapped{next: &upstream{tokens: 2}}
	g, exp, _ := tracedGateway(t, false, inTurn, failing, answering)
	g.pickNext(0)
	resp, body := g.post(t, "/v1/chat/completions", chatRequest(false))
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	server, spans := serverSpan(t, exp)
	if server.Parent.IsValid() {
		t.Errorf("the request's span has a parent %s; the client sent none", server.Parent.SpanID())
	}
	if len(spans) != 3 {
		t.Fatalf("%d spans, want 3: the request's and one per call", len(spans))
	}
	for k, up := range []*tapped{failing, answering} {
		var client *tracetest.SpanStub
		for i := range spans {
			if spans[i].SpanKind == trace.SpanKindClient && attrs(spans[i])["llmgw.endpoint"].Emit() == g.endpointName("main", k) {
				client = &spans[i]
			}
		}
		if client == nil || client.Parent.SpanID() != server.SpanContext.SpanID() {
			t.Fatalf("endpoint %d: no CLIENT span under the request's", k)
		}
		sent := fmt.Sprintf("00-%s-%s-01", server.SpanContext.TraceID(), client.SpanContext.SpanID())
		if seen := up.headers(); len(seen) != 1 || seen[0].Get("traceparent") != sent {
			t.Errorf("endpoint %d received %d requests, want 1 with traceparent %s", k, len(seen), sent)
		}
		errType, failed := attrs(*client)["error.type"]
		switch {
		case k == 0 && errType.AsString() != "upstream_status":
			t.Errorf("the failed call's error.type = %q, want upstream_status", errType.AsString())
		case k == 1 && failed:
			t.Errorf("the retry that answered has error.type %q", errType.AsString())
		}
	}
	if _, failed := attrs(server)["error.type"]; failed {
		t.Error("the request, answered by its retry, has an error.type")
	}
}

// TestPlainAnswerFinishReason: a traced plain answer's finish_reason is on
// its spans, as a stream's is; an upstream's decoy inside a string, an
// escaped reason or one of 100 KB puts no word of its own there.
func TestPlainAnswerFinishReason(t *testing.T) {
	for _, tc := range []struct {
		name, choice, want string
	}{
		{"a server's word", `"message":{"role":"assistant","content":"hi"},"finish_reason":"length"`, `["length"]`},
		{"a decoy in the content", `"message":{"role":"assistant","content":"\"finish_reason\":\"evil\""},"finish_reason":"stop"`, `["stop"]`},
		{"an escaped reason", `"message":{"role":"assistant","content":"hi"},"finish_reason":"st\u006fp"`, `["other"]`},
		{"a reason of 100 KB", `"message":{"role":"assistant","content":"hi"},"finish_reason":"` + strings.Repeat("x", 100<<10) + `"`, `["other"]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body)
				w.Header().Set("Content-Type", "application/json")
				io.WriteString(w, `{"choices":[{"index":0,`+tc.choice+`}],"usage":{"prompt_tokens":5,"completion_tokens":1,"total_tokens":6}}`)
			})
			g, exp, _ := tracedGateway(t, false, nil, up)
			resp, body := g.post(t, "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
			if resp.StatusCode != 200 {
				t.Fatalf("status %d: %s", resp.StatusCode, body)
			}
			server, spans := serverSpan(t, exp)
			checkAttrs(t, server, map[string]string{"gen_ai.response.finish_reasons": tc.want})
			for _, s := range spans {
				if s.SpanKind == trace.SpanKindClient {
					checkAttrs(t, s, map[string]string{"gen_ai.response.finish_reasons": tc.want})
				}
			}
		})
	}
}
