package observe

// What becomes of a tool call through /mcp: one ToolCall, the tool
// sibling of Completed, worked out once where the call ends and read by
// the same kinds of observer: its metrics, its execute_tool span, and its
// ledger record.

import (
	"context"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/usage"
)

// ToolStatus is how a tool call ended, a closed set.
type ToolStatus string

// The ends of a tool call.
const (
	ToolOK          ToolStatus = "ok"          // the server answered
	ToolError       ToolStatus = "tool_error"  // the server answered, its result marked an error
	ToolRefused     ToolStatus = "refused"     // not a tool the key may use, or none by that name
	ToolLimited     ToolStatus = "limited"     // past a tool_rpm limit
	ToolFailed      ToolStatus = "failed"      // the server answered with a JSON-RPC error
	ToolTimeout     ToolStatus = "timeout"     // past the server's timeout
	ToolUnavailable ToolStatus = "unavailable" // the server is not connected
	ToolCanceled    ToolStatus = "canceled"    // the client went away first
)

// HTTPStatus is the status a tool call's ledger record carries, as a
// request's would: 200 for an answer, the tool's own errors included.
func (s ToolStatus) HTTPStatus() int {
	switch s {
	case ToolOK, ToolError:
		return http.StatusOK
	case ToolRefused:
		return http.StatusNotFound
	case ToolLimited:
		return http.StatusTooManyRequests
	case ToolTimeout:
		return http.StatusGatewayTimeout
	case ToolUnavailable:
		return http.StatusServiceUnavailable
	case ToolCanceled:
		return 499
	}
	return http.StatusBadGateway
}

// ToolCall is what one tools/call came to.
type ToolCall struct {
	ID            string
	Start         time.Time
	Duration      time.Duration
	KeyID, Tenant string // empty without keys
	// Tool is the name the client called, as /mcp lists it
	// (server__tool), cut to maxToolName bytes; Server is its server's
	// name, empty when no server lists it.
	Tool, Server string
	// Listed reports whether a server lists Tool: the metrics label an
	// unlisted name, which the client chose, as one value.
	Listed            bool
	Status            ToolStatus
	BytesIn, BytesOut int64
	// Span is the call's execute_tool span; nil when traces are off.
	Span trace.Span
}

// maxToolName bounds a tool's name as a call records it: MCP names are
// at most 128 characters.
const maxToolName = 128

// CutToolName is name within maxToolName bytes.
func CutToolName(name string) string {
	if len(name) > maxToolName {
		return name[:maxToolName]
	}
	return name
}

// Record is c's ledger record.
func (c *ToolCall) Record() usage.Record {
	return usage.Record{
		ID: c.ID, Time: c.Start, KeyID: c.KeyID, Tenant: c.Tenant,
		Model: c.Tool, Pool: c.Server, Status: c.Status.HTTPStatus(), Duration: c.Duration,
		Kind: usage.KindTool, BytesIn: c.BytesIn, BytesOut: c.BytesOut,
	}
}

// ToolObserver reads each ToolCall once it has ended.
type ToolObserver interface {
	ObserveTool(c *ToolCall)
}

// ToolObservers hands a ToolCall to each observer in turn.
type ToolObservers []ToolObserver

// ObserveTool hands c to every observer in turn.
func (os ToolObservers) ObserveTool(c *ToolCall) {
	for _, o := range os {
		o.ObserveTool(c)
	}
}

// ObserveTool records c in the ledger: every call once, refused ones too.
func (l Ledger) ObserveTool(c *ToolCall) { l.r.Record(c.Record()) }

// ToolMetrics are the tool calls' metrics, per server and tool.
type ToolMetrics struct {
	calls    *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

var _ ToolObserver = (*ToolMetrics)(nil)

// NewToolMetrics makes the tool calls' metrics, to be registered with
// Collectors.
func NewToolMetrics() *ToolMetrics {
	return &ToolMetrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "llmgw_mcp_tool_calls_total",
			Help: "MCP tool calls through /mcp, by server, tool (as listed, server__tool; other for a name no server lists) and how each ended (status: ok, or an error: tool_error, refused, limited, failed, timeout, unavailable, canceled).",
		}, []string{"server", "tool", "status"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "llmgw_mcp_tool_call_duration_seconds",
			Help:    "How long MCP tool calls through /mcp took, from their arrival to their answer, by server and tool.",
			Buckets: []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"server", "tool"}),
	}
}

// Collectors are the metrics to register.
func (m *ToolMetrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.calls, m.duration}
}

// ObserveTool counts c and its duration.
func (m *ToolMetrics) ObserveTool(c *ToolCall) {
	server, tool := c.Server, c.Tool
	if !c.Listed {
		server, tool = "none", "other"
	}
	m.calls.WithLabelValues(server, tool, string(c.Status)).Inc()
	m.duration.WithLabelValues(server, tool).Observe(c.Duration.Seconds())
}

// StartTool starts the execute_tool span of a call to tool that arrived
// at start with header, as a request's SERVER span starts: its own trace,
// linked to the client's traceparent, unless the client's trace is
// continued. It returns ctx under the span, and the span.
func (t *Tracing) StartTool(ctx context.Context, header http.Header, tool string, start time.Time) (context.Context, trace.Span) {
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindInternal), trace.WithTimestamp(start),
		trace.WithAttributes(semconv.GenAIOperationNameExecuteTool, semconv.GenAIToolName(tool), semconv.GenAIToolType("function"))}
	carrier := propagation.HeaderCarrier(header)
	if t.continueClient {
		ctx = traceContext.Extract(ctx, carrier)
	} else {
		opts = append(opts, trace.WithNewRoot())
		if sc := clientSpan(carrier); sc.IsValid() {
			opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sc}))
		}
	}
	return t.tracer.Start(ctx, "execute_tool "+tool, opts...)
}

// attrToolStatus is how a tool call ended, on its span.
var attrToolStatus = attribute.Key("llmgw.mcp.status")

// ObserveTool ends c's span with how the call ended.
func (t *Tracing) ObserveTool(c *ToolCall) {
	if c.Span == nil {
		return
	}
	c.Span.SetAttributes(attrToolStatus.String(string(c.Status)), attribute.Int64("llmgw.mcp.bytes_in", c.BytesIn),
		attribute.Int64("llmgw.mcp.bytes_out", c.BytesOut))
	if c.Server != "" {
		c.Span.SetAttributes(attribute.String("llmgw.mcp.server", c.Server))
	}
	if c.Status != ToolOK {
		c.Span.SetAttributes(semconv.ErrorTypeKey.String(string(c.Status)))
		c.Span.SetStatus(codes.Error, string(c.Status))
	}
	c.Span.End(trace.WithTimestamp(c.Start.Add(c.Duration)))
}
