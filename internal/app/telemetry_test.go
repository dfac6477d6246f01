package app

// The telemetry block through a running gateway: a request carrying a
// client's traceparent is traced to an OTLP/HTTP collector, its latency
// on /metrics links to that trace in an OpenMetrics scrape, and its
// access log line names the trace.

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"gitea.mynodes.xyz/ilker/llmgw/internal/config"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
)

// collector is an OTLP/HTTP collector keeping the names and trace ids of
// the spans it is sent.
type collector struct {
	mu    sync.Mutex
	spans map[string]string // key: span name; value: its trace id, hex
}

func (c *collector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	var req coltrace.ExportTraceServiceRequest
	if r.URL.Path != "/v1/traces" || proto.Unmarshal(b, &req) != nil {
		http.Error(w, "not OTLP", http.StatusBadRequest)
		return
	}
	c.mu.Lock()
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				c.spans[s.GetName()] = hexOf(s.GetTraceId())
			}
		}
	}
	c.mu.Unlock()
	out, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(out)
}

func (c *collector) traceOf(name string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.spans[name]
}

func hexOf(b []byte) string {
	const digits = "0123456789abcdef"
	out := make([]byte, 0, 2*len(b))
	for _, x := range b {
		out = append(out, digits[x>>4], digits[x&15])
	}
	return string(out)
}

func TestTelemetryBlock(t *testing.T) {
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "50") // export batches every 50 ms
	col := &collector{spans: map[string]string{}}
	cs := httptest.NewServer(col)
	defer cs.Close()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"},\"finish_reason\":\"stop\"}]}\n\n"+
			"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":1,\"total_tokens\":6}}\n\ndata: [DONE]\n\n")
	}))
	defer up.Close()

	logPath := filepath.Join(t.TempDir(), "access.log")
	cfg := upstreamConfig("chat", catalog.KindVLLM, []string{up.URL + "/v1"})
	cfg.Telemetry = config.Telemetry{Traces: config.TracesOTLP, Endpoint: cs.URL, AccessLog: logPath}
	g := startConfigured(t, cfg)

	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	req, _ := http.NewRequest(http.MethodPost, g.URL()+"/chat/completions",
		strings.NewReader(`{"model":"chat","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("traceparent", "00-"+traceID+"-00f067aa0ba902b7-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}

	deadline := time.Now().Add(10 * time.Second)
	for col.traceOf("chat chat") == "" {
		if time.Now().After(deadline) {
			t.Fatal("the collector has no span named chat chat, the request's")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := col.traceOf("chat chat"); got != traceID {
		t.Errorf("the request's span is in trace %s, want the client's %s", got, traceID)
	}

	// /metrics, in OpenMetrics, links the request's duration to its trace.
	mreq, _ := http.NewRequest(http.MethodGet, g.AdminURL()+"/metrics", nil)
	mreq.Header.Set("Accept", "application/openmetrics-text;version=1.0.0")
	mresp, err := http.DefaultClient.Do(mreq)
	if err != nil {
		t.Fatal(err)
	}
	text, _ := io.ReadAll(mresp.Body)
	mresp.Body.Close()
	if ct := mresp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/openmetrics-text") {
		t.Errorf("/metrics answered %q to a scraper asking for OpenMetrics", ct)
	}
	if !strings.Contains(string(text), `trace_id="`+traceID+`"`) {
		t.Errorf("no exemplar of trace %s on /metrics", traceID)
	}

	// The access log's line names the trace.
	var line struct {
		Model     string `json:"model"`
		Status    int    `json:"status"`
		TraceID   string `json:"trace_id"`
		ErrorType string `json:"error_type"`
	}
	b, _ := os.ReadFile(logPath)
	if err := json.Unmarshal(b, &line); err != nil || line.TraceID != traceID || line.Status != 200 || line.Model != "chat" || line.ErrorType != "" {
		t.Errorf("access log %q (%v); want one line of trace %s, status 200, model chat, no error_type", b, err, traceID)
	}
}
