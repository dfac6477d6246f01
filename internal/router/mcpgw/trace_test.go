package mcpgw

import (
	"net/http"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"gitea.mynodes.xyz/ilker/llmgw/internal/router/observe"
)

// clientTrace sends the client's traceparent with every request.
type clientTrace struct{ bearer }

const (
	clientTraceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	clientSpanID  = "00f067aa0ba902b7"
)

func (c clientTrace) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("traceparent", "00-"+clientTraceID+"-"+clientSpanID+"-01")
	return c.bearer.RoundTrip(r)
}

// A tool call's execute_tool span carries the GenAI conventions' names,
// and joins the client's trace as a child of its span when the client's
// trace is continued, or starts one of llmgw's linked to it.
func TestExecuteToolSpan(t *testing.T) {
	for _, continueClient := range []bool{true, false} {
		a := newFakeServer(t)
		g := newGateway(t)
		exp := tracetest.NewInMemoryExporter()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
		tracing := observe.NewTracing(tp, false, continueClient)
		g.SetObservers(Observers{List: observe.ToolObservers{tracing}, Tracing: tracing})
		g.Set([]Server{{Name: "alpha", URL: a.url}})
		url := serveGateway(t, g, everyKey)
		c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
		s, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: clientTrace{bearer{"sk-a"}}}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		waitTools(t, s, []string{"alpha__echo", "alpha__stall"})
		if _, err := s.CallTool(t.Context(), &mcp.CallToolParams{Name: "alpha__echo", Arguments: map[string]any{"text": "secret argument"}}); err != nil {
			t.Fatal(err)
		}
		s.Close()
		spans := exp.GetSpans()
		if len(spans) != 1 {
			t.Fatalf("continue %v: %d spans, want 1", continueClient, len(spans))
		}
		sp := spans[0]
		attrs := map[attribute.Key]string{}
		for _, kv := range sp.Attributes {
			attrs[kv.Key] = kv.Value.Emit()
			if kv.Value.Emit() == "secret argument" {
				t.Errorf("the arguments are on the span as %s", kv.Key)
			}
		}
		if sp.Name != "execute_tool alpha__echo" || attrs["gen_ai.operation.name"] != "execute_tool" || attrs["gen_ai.tool.name"] != "alpha__echo" || attrs["llmgw.mcp.status"] != "ok" {
			t.Errorf("span %s %v", sp.Name, attrs)
		}
		joined := sp.SpanContext.TraceID().String() == clientTraceID && sp.Parent.SpanID().String() == clientSpanID
		linked := len(sp.Links) == 1 && sp.Links[0].SpanContext.SpanID().String() == clientSpanID
		if continueClient && !joined {
			t.Errorf("continued: span in trace %s under %s, want the client's", sp.SpanContext.TraceID(), sp.Parent.SpanID())
		}
		if !continueClient && (joined || !linked) {
			t.Errorf("linked: span in trace %s, links %v", sp.SpanContext.TraceID(), sp.Links)
		}
	}
}
