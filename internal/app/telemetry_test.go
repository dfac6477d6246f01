package app

// The telemetry block through a running gateway: a request carrying a
// client's traceparent is traced to an OTLP/HTTP collector, linked to the
// client's trace or continuing it, its latency on /metrics links to that
// trace in an OpenMetrics scrape, and its access log line names the
// trace; the sampling decision is the gateway's sampler's.

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

// collector is an OTLP/HTTP collector keeping the trace ids of the spans
// it is sent, and of the spans each links to.
type collector struct {
	mu    sync.Mutex
	spans map[string]string // key: span name; value: its trace id, hex
	links map[string]string // key: span name; value: the trace id of its first link, hex
}

func newCollector() *collector {
	return &collector{spans: map[string]string{}, links: map[string]string{}}
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
				if l := s.GetLinks(); len(l) > 0 {
					c.links[s.GetName()] = hexOf(l[0].GetTraceId())
				}
			}
		}
	}
	c.mu.Unlock()
	out, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(out)
}

// traceOf is the trace id of the span named name, and of the span it
// links to.
func (c *collector) traceOf(name string) (trace, linked string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.spans[name], c.links[name]
}

func hexOf(b []byte) string {
	const digits = "0123456789abcdef"
	out := make([]byte, 0, 2*len(b))
	for _, x := range b {
		out = append(out, digits[x>>4], digits[x&15])
	}
	return string(out)
}

// tracedUpstream is an upstream answering a stream of one token, which
// sends the traceparent of each chat request it gets to seen.
func tracedUpstream(t *testing.T, seen chan<- string) *httptest.Server {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if r.URL.Path == "/v1/chat/completions" { // not a probe or a scrape
			seen <- r.Header.Get("traceparent")
		}
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"},\"finish_reason\":\"stop\"}]}\n\n"+
			"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":1,\"total_tokens\":6}}\n\ndata: [DONE]\n\n")
	}))
	t.Cleanup(up.Close)
	return up
}

// clientTraceID is the trace of the client's traceparent, sampled.
const (
	clientTraceID     = "4bf92f3577b34da6a3ce929d0e0e4736"
	clientTraceparent = "00-" + clientTraceID + "-00f067aa0ba902b7-01"
)

// sendTraced sends a streamed chat request to g with the client's
// traceparent, and fails unless it is answered.
func sendTraced(t *testing.T, g *Gateway) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, g.URL()+"/chat/completions",
		strings.NewReader(`{"model":"chat","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("traceparent", clientTraceparent)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
}

// TestTelemetryBlock: a request with a client's traceparent is traced to
// the collector, in a trace of llmgw's linked to the client's, or in the
// client's with client_trace: continue; the request's latency on
// /metrics and its access log line name that trace, and so does the
// traceparent its upstream is sent.
func TestTelemetryBlock(t *testing.T) {
	for _, clientTrace := range []string{config.ClientTraceLink, config.ClientTraceContinue} {
		t.Run(clientTrace, func(t *testing.T) {
			t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "50") // export batches every 50 ms
			col := newCollector()
			cs := httptest.NewServer(col)
			defer cs.Close()
			seen := make(chan string, 1)
			up := tracedUpstream(t, seen)

			logPath := filepath.Join(t.TempDir(), "access.log")
			cfg := upstreamConfig("chat", catalog.KindVLLM, []string{up.URL + "/v1"})
			cfg.Telemetry = config.Telemetry{Traces: config.TracesOTLP, Endpoint: cs.URL, ClientTrace: clientTrace, AccessLog: logPath}
			g := startConfigured(t, cfg)
			sendTraced(t, g)

			deadline := time.Now().Add(10 * time.Second)
			for tr, _ := col.traceOf("chat chat"); tr == ""; tr, _ = col.traceOf("chat chat") {
				if time.Now().After(deadline) {
					t.Fatal("the collector has no span named chat chat, the request's")
				}
				time.Sleep(10 * time.Millisecond)
			}
			traceID, linked := col.traceOf("chat chat")
			switch {
			case clientTrace == config.ClientTraceContinue && traceID != clientTraceID:
				t.Errorf("the request's span is in trace %s, want the client's %s", traceID, clientTraceID)
			case clientTrace == config.ClientTraceLink && (traceID == clientTraceID || linked != clientTraceID):
				t.Errorf("the request's span is in trace %s linked to %q; want a trace of llmgw's linked to the client's %s", traceID, linked, clientTraceID)
			}
			if sent := <-seen; !strings.HasPrefix(sent, "00-"+traceID+"-") {
				t.Errorf("the upstream was sent traceparent %s, want one of trace %s", sent, traceID)
			}

			// /metrics, in OpenMetrics, links the request's duration to its trace.
			if text := scrapeOpenMetrics(t, g); !strings.Contains(text, `trace_id="`+traceID+`"`) {
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
		})
	}
}

// scrapeOpenMetrics is g's /metrics as a scraper asking for OpenMetrics
// gets it.
func scrapeOpenMetrics(t *testing.T, g *Gateway) string {
	t.Helper()
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
	return string(text)
}

// TestSamplerIsTheGateways: with OTEL_TRACES_SAMPLER's parent-based
// sampler at a ratio of 0, a client's sampled traceparent samples
// nothing: its upstream is sent a traceparent of llmgw's, not sampled,
// and no latency on /metrics names a trace.
func TestSamplerIsTheGateways(t *testing.T) {
	t.Setenv("OTEL_TRACES_SAMPLER", "parentbased_traceidratio")
	t.Setenv("OTEL_TRACES_SAMPLER_ARG", "0")
	col := newCollector()
	cs := httptest.NewServer(col)
	defer cs.Close()
	seen := make(chan string, 1)
	up := tracedUpstream(t, seen)
	cfg := upstreamConfig("chat", catalog.KindVLLM, []string{up.URL + "/v1"})
	cfg.Telemetry.Traces, cfg.Telemetry.Endpoint = config.TracesOTLP, cs.URL
	g := startConfigured(t, cfg)
	sendTraced(t, g)

	if sent := <-seen; strings.Contains(sent, clientTraceID) || !strings.HasSuffix(sent, "-00") {
		t.Errorf("the upstream was sent traceparent %s; want one of llmgw's trace, not sampled", sent)
	}
	deadline := time.Now().Add(10 * time.Second)
	text := scrapeOpenMetrics(t, g)
	for !strings.Contains(text, "llmgw_request_duration_seconds_count") {
		if time.Now().After(deadline) {
			t.Fatal("/metrics never timed the request")
		}
		time.Sleep(10 * time.Millisecond)
		text = scrapeOpenMetrics(t, g)
	}
	if strings.Contains(text, "trace_id=") {
		t.Error("/metrics has an exemplar of a request not sampled")
	}
}
