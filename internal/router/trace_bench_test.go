package router

// What tracing costs a request when every request is traced: the
// benchmarks of bench_test.go with a tracer provider that samples every
// span and batches them to an exporter that drops them, as an OTLP
// exporter's batches leave the request path.

import (
	"context"
	"net/http"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

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
	return benchRouterWith(b, rt, catalog.KindOpenAI, TelemetryOptions{Tracer: tp})
}

// BenchmarkTracedNonStreamedRequest is BenchmarkNonStreamedRequest with
// every request traced: a SERVER and a CLIENT span each.
func BenchmarkTracedNonStreamedRequest(b *testing.B) {
	benchNonStreamed(b, tracedBenchRouter(b, benchAnswer))
}

// BenchmarkTracedStreamedEvent is BenchmarkStreamedEvent with every
// request traced, reported per event.
func BenchmarkTracedStreamedEvent(b *testing.B) {
	benchStreamed(b, tracedBenchRouter)
}

// BenchmarkTracedClientTrace is BenchmarkTracedNonStreamedRequest with a
// client's traceparent and tracestate on every request.
func BenchmarkTracedClientTrace(b *testing.B) {
	benchNonStreamedWith(b, tracedBenchRouter(b, benchAnswer),
		http.Header{"Traceparent": {clientTraceparent}, "Tracestate": {clientTracestate}})
}
