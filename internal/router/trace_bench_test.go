package router

// What tracing costs a request when every request is traced: the
// benchmarks of bench_test.go with a tracer provider that samples every
// span and batches them to an exporter that drops them, as an OTLP
// exporter's batches leave the request path.

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"gitea.mynodes.xyz/ilker/llmgw/internal/config"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
)

// discardSpans is an exporter that drops what it is given.
type discardSpans struct{}

func (discardSpans) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discardSpans) Shutdown(context.Context) error                             { return nil }

// tracedBenchRouter is benchRouter tracing every request.
func tracedBenchRouter(b *testing.B, rt http.RoundTripper) *Router {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithBatcher(discardSpans{}))
	b.Cleanup(func() { tp.Shutdown(context.Background()) })
	cfg := config.Default()
	r, err := New(Options{Server: serverOptions(cfg.Server), Router: routerOptions(cfg.Router), Registerer: prometheus.NewRegistry(),
		Transport: rt, Telemetry: TelemetryOptions{Tracer: tp}})
	if err != nil {
		b.Fatal(err)
	}
	cat, err := catalog.New([]catalog.Pool{{Name: "p", Kind: catalog.KindOpenAI, Endpoints: []catalog.Endpoint{{URL: "http://10.0.0.1/v1"}, {URL: "http://10.0.0.2/v1"}}}},
		[]catalog.Model{{Name: "llama", Aliases: []string{"default"}, Pool: "p", Upstream: "meta-llama/Llama-3.1-8B-Instruct"}})
	if err != nil {
		b.Fatal(err)
	}
	r.SetCatalog(cat)
	return r
}

// BenchmarkTracedNonStreamedRequest is BenchmarkNonStreamedRequest with
// every request traced: a SERVER and a CLIENT span each.
func BenchmarkTracedNonStreamedRequest(b *testing.B) {
	r := tracedBenchRouter(b, &cannedTransport{contentType: "application/json",
		body: []byte(`{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"Requests flow through"},"finish_reason":"stop"}],"usage":{"prompt_tokens":31,"completion_tokens":4,"total_tokens":35}}`)})
	b.ReportAllocs()
	for b.Loop() {
		w := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(benchPrompt))
		r.ServeHTTP(w, req)
		if w.Code != 200 {
			b.Fatal(w.Code, w.Body)
		}
	}
}

// BenchmarkTracedStreamedEvent is BenchmarkStreamedEvent with every
// request traced, reported per event.
func BenchmarkTracedStreamedEvent(b *testing.B) {
	const events = 200
	var stream bytes.Buffer
	for range events {
		stream.WriteString(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":" token"},"logprobs":null,"finish_reason":null}]}` + "\n\n")
	}
	stream.WriteString(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":31,"completion_tokens":200,"total_tokens":231}}` + "\n\ndata: [DONE]\n\n")
	r := tracedBenchRouter(b, &cannedTransport{contentType: "text/event-stream", body: stream.Bytes()})
	body := strings.Replace(benchPrompt, `"max_tokens":64`, `"max_tokens":200,"stream":true`, 1)
	b.ReportAllocs()
	for b.Loop() {
		w := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(body))
		r.ServeHTTP(w, req)
		if w.Code != 200 {
			b.Fatal(w.Code)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*events), "ns/event")
}
