// Package telemetry sets up what llmgw emits besides its Prometheus
// metrics: an OpenTelemetry tracer provider that exports spans over
// OTLP/HTTP, configured by the telemetry block's plain values and the
// standard OTEL_* environment variables, and the access log's writer.
// The router is handed the results; it never sees how they were made.
package telemetry

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"sync"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
)

// ServiceName is service.name when OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES name none.
const ServiceName = "llmgw"

// Tracing is a tracer provider exporting over OTLP/HTTP: spans are
// batched and sent off the request path.
type Tracing struct {
	Provider *sdktrace.TracerProvider
}

// NewTracing builds the tracer provider. endpoint, when not empty, is the
// OTLP/HTTP endpoint's base URL (http://collector:4318), to which
// /v1/traces is added; otherwise the exporter reads OTEL_EXPORTER_OTLP_TRACES_ENDPOINT and
// OTEL_EXPORTER_OTLP_ENDPOINT. The sampler is OTEL_TRACES_SAMPLER's
// (parentbased_always_on when unset), and the resource's attributes
// OTEL_SERVICE_NAME's and OTEL_RESOURCE_ATTRIBUTES', as the SDK reads
// them. Only the http/protobuf protocol is spoken: an
// OTEL_EXPORTER_OTLP_PROTOCOL of grpc is refused.
func NewTracing(ctx context.Context, endpoint string, getenv func(string) string) (*Tracing, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	for _, v := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if p := strings.TrimSpace(getenv(v)); p != "" {
			if p != "http/protobuf" {
				return nil, fmt.Errorf("%s: llmgw exports traces over http/protobuf only, got %q", v, p)
			}
			break
		}
	}
	var opts []otlptracehttp.Option
	if endpoint != "" {
		opts = append(opts, otlptracehttp.WithEndpointURL(tracesURL(endpoint)))
	}
	exp, err := otlptracehttp.New(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("telemetry.traces: the OTLP exporter: %w", err)
	}
	return &Tracing{Provider: NewProvider(sdktrace.NewBatchSpanProcessor(exp))}, nil
}

// tracesPath is where an OTLP/HTTP collector takes spans.
const tracesPath = "/v1/traces"

// tracesURL is the URL spans are sent to for the base URL of an OTLP/HTTP
// endpoint, as OTEL_EXPORTER_OTLP_ENDPOINT is read: /v1/traces added to
// its path, unless it ends in it already.
func tracesURL(endpoint string) string {
	u, err := url.Parse(endpoint)
	if err != nil {
		return endpoint // the exporter says what is wrong with it
	}
	if !strings.HasSuffix(u.Path, tracesPath) {
		u.Path = strings.TrimSuffix(u.Path, "/") + tracesPath
	}
	return u.String()
}

// NewProvider is a tracer provider whose spans go to sp, with llmgw's
// resource: what NewTracing builds, and what tests build around an
// in-memory exporter.
func NewProvider(sp sdktrace.SpanProcessor, opts ...sdktrace.TracerProviderOption) *sdktrace.TracerProvider {
	return sdktrace.NewTracerProvider(append([]sdktrace.TracerProviderOption{
		sdktrace.WithSpanProcessor(sp), sdktrace.WithResource(Resource()),
	}, opts...)...)
}

// Resource is what every span says of the process: the SDK's name and
// version, service.name llmgw, and what OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES say, which win over llmgw's own.
func Resource() *resource.Resource {
	r, err := resource.New(context.Background(),
		resource.WithSchemaURL(semconv.SchemaURL),
		resource.WithTelemetrySDK(),
		resource.WithAttributes(semconv.ServiceName(ServiceName)),
		resource.WithFromEnv(), // after llmgw's: the environment's name wins
	)
	if err != nil && r == nil {
		// An OTEL_RESOURCE_ATTRIBUTES that does not parse: llmgw's own.
		return resource.NewWithAttributes(semconv.SchemaURL, semconv.ServiceName(ServiceName))
	}
	return r
}

// Shutdown sends the spans still batched and stops the exporter, within
// ctx.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	return t.Provider.Shutdown(ctx)
}

// OpenAccessLog is the writer telemetry.access_log names: nil for off,
// os.Stderr or os.Stdout, or the file at that path opened for appending
// (created 0640). Closing it closes the file; closing stderr or stdout
// does nothing. Writes are whole lines from one goroutine at a time.
func OpenAccessLog(spec string) (io.WriteCloser, error) {
	switch spec {
	case "", "off":
		return nil, nil
	case "stderr":
		return &lockedWriter{w: os.Stderr}, nil
	case "stdout":
		return &lockedWriter{w: os.Stdout}, nil
	}
	f, err := os.OpenFile(spec, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
	if err != nil {
		return nil, fmt.Errorf("telemetry.access_log: %w", err)
	}
	return &lockedWriter{w: f, c: f}, nil
}

// lockedWriter writes one line at a time, so that lines written at once
// never interleave.
type lockedWriter struct {
	mu sync.Mutex // protects w
	w  io.Writer
	c  io.Closer // nil for stderr and stdout, which stay open
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

func (l *lockedWriter) Close() error {
	if l.c == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.c.Close()
}
