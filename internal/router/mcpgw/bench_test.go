package mcpgw

import (
	"net/http"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// BenchmarkToolCall is a tool call's round trip from the go-sdk's client,
// to the same in-process server directly and through the gateway (its
// key check, globs, limits and accounting, and the hop), over loopback,
// the two run in turn within each -count.
func BenchmarkToolCall(b *testing.B) {
	a := newFakeServer(b).url
	g := New(Options{MaxBodyBytes: 1 << 20})
	b.Cleanup(g.Close)
	g.SetObservers(Observers{})
	g.Set([]Server{{Name: "alpha", URL: a}})
	gw := serveGateway(b, g, everyKey)
	for _, c := range []struct{ name, url, tool string }{{"direct", a, "echo"}, {"llmgw", gw, "alpha__echo"}} {
		b.Run(c.name, func(b *testing.B) {
			cl := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
			s, err := cl.Connect(b.Context(), &mcp.StreamableClientTransport{Endpoint: c.url, HTTPClient: &http.Client{Transport: bearer{"sk-a"}}}, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			for {
				res, err := s.ListTools(b.Context(), nil)
				if err == nil && len(res.Tools) > 0 {
					break
				}
			}
			args := map[string]any{"text": "benchmark"}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if _, err := s.CallTool(b.Context(), &mcp.CallToolParams{Name: c.tool, Arguments: args}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
