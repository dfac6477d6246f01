package telemetry

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

// TestTracesReachAnOTLPCollector: spans made with NewTracing's provider
// arrive at an OTLP/HTTP collector, with llmgw's service name, once the
// provider shuts down.
func TestTracesReachAnOTLPCollector(t *testing.T) {
	got := make(chan *coltrace.ExportTraceServiceRequest, 4)
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" {
			t.Errorf("collector got %s %s (%s)", r.Method, r.URL.Path, r.Header.Get("Content-Type"))
		}
		var req coltrace.ExportTraceServiceRequest
		if err := proto.Unmarshal(b, &req); err != nil {
			t.Error(err)
		}
		got <- &req
		w.Header().Set("Content-Type", "application/x-protobuf")
		out, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
		w.Write(out)
	}))
	defer collector.Close()

	tr, err := NewTracing(context.Background(), collector.URL, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	_, span := tr.Provider.Tracer("test").Start(context.Background(), "chat m")
	span.End()
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case req := <-got:
		rs := req.GetResourceSpans()
		if len(rs) != 1 || len(rs[0].GetScopeSpans()) != 1 || len(rs[0].GetScopeSpans()[0].GetSpans()) != 1 {
			t.Fatalf("collector got %v, want one span", req)
		}
		if name := rs[0].GetScopeSpans()[0].GetSpans()[0].GetName(); name != "chat m" {
			t.Errorf("span %q, want %q", name, "chat m")
		}
		var service string
		for _, kv := range rs[0].GetResource().GetAttributes() {
			if kv.GetKey() == "service.name" {
				service = kv.GetValue().GetStringValue()
			}
		}
		if service != ServiceName {
			t.Errorf("service.name %q, want %q", service, ServiceName)
		}
	default:
		t.Fatal("the collector got no spans")
	}
}

func TestGRPCIsRefused(t *testing.T) {
	env := map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}
	_, err := NewTracing(context.Background(), "", func(k string) string { return env[k] })
	if err == nil || !strings.Contains(err.Error(), "OTEL_EXPORTER_OTLP_PROTOCOL") {
		t.Errorf("err = %v, want one naming OTEL_EXPORTER_OTLP_PROTOCOL", err)
	}
}

func TestOpenAccessLog(t *testing.T) {
	if w, err := OpenAccessLog("off"); w != nil || err != nil {
		t.Errorf("off: %v, %v; want nothing", w, err)
	}
	path := filepath.Join(t.TempDir(), "access.log")
	os.WriteFile(path, []byte("before\n"), 0o600)
	w, err := OpenAccessLog(path)
	if err != nil {
		t.Fatal(err)
	}
	w.Write([]byte(`{"id":"1"}` + "\n"))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	if string(b) != "before\n{\"id\":\"1\"}\n" {
		t.Errorf("file holds %q; want the line appended", b)
	}
	if _, err := OpenAccessLog(filepath.Join(t.TempDir(), "no", "such", "dir")); err == nil || !strings.Contains(err.Error(), "telemetry.access_log") {
		t.Errorf("an unwritable path: %v, want an error naming telemetry.access_log", err)
	}
}

func TestTracesURL(t *testing.T) {
	for in, want := range map[string]string{
		"http://collector:4318":               "http://collector:4318/v1/traces",
		"http://collector:4318/":              "http://collector:4318/v1/traces",
		"https://otel.example/otlp":           "https://otel.example/otlp/v1/traces",
		"http://collector:4318/v1/traces":     "http://collector:4318/v1/traces",
		"https://otel.example/otlp/v1/traces": "https://otel.example/otlp/v1/traces",
	} {
		if got := tracesURL(in); got != want {
			t.Errorf("tracesURL(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestServiceNameFromTheEnvironmentWins(t *testing.T) {
	t.Setenv("OTEL_SERVICE_NAME", "gateway-eu")
	var name string
	for _, kv := range Resource().Attributes() {
		if kv.Key == "service.name" {
			name = kv.Value.AsString()
		}
	}
	if name != "gateway-eu" {
		t.Errorf("service.name %q, want OTEL_SERVICE_NAME's gateway-eu", name)
	}
}
