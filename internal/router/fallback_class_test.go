package router

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.opentelemetry.io/otel/trace"

	"gitea.mynodes.xyz/ilker/llmgw/internal/config"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
)

// refusing answers every call with status and body.
func refusing(status int, body string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		io.WriteString(w, body)
	})
}

const contextTooLong = `{"error":{"message":"This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`

// classGateway serves model m on pool main, whose one endpoint is main,
// and model long on pool spare, whose endpoint is spare; m's fallbacks
// by class are byClass.
func classGateway(t *testing.T, main, spare http.Handler, byClass map[catalog.ErrorClass][]string) *testGateway {
	sp := httptest.NewServer(spare)
	t.Cleanup(sp.Close)
	return newTestGateway(t, func(c *config.Config) {
		c.Pools[1].Endpoints = []catalog.Endpoint{{URL: sp.URL + "/v1"}}
		c.Models[0].FallbacksByClass = byClass
		c.Models = append(c.Models, catalog.Model{Name: "long", Pool: "spare"})
	}, main)
}

// TestFallbackByClass: a prompt past the model's context window goes to
// the fallback for context_window_exceeded, a 429 to the one for
// rate_limited; without one, the client gets the provider's 400, and a
// 401 about the pool's credentials never reaches it as a 401.
func TestFallbackByClass(t *testing.T) {
	const ask = `{"model":"m","messages":[{"role":"user","content":"a long prompt"}]}`
	for _, c := range []struct {
		name      string
		main      http.Handler
		byClass   map[catalog.ErrorClass][]string
		want      int
		wantModel string
		wantIn    string
	}{
		{"context window to the longer model", refusing(400, contextTooLong),
			map[catalog.ErrorClass][]string{catalog.ClassContextWindow: {"long"}}, 200, "long", `"content"`},
		{"context window without a fallback for it", refusing(400, contextTooLong),
			map[catalog.ErrorClass][]string{catalog.ClassRateLimited: {"long"}}, 400, "m", `"code":"context_length_exceeded"`},
		{"rate limited to its fallback", refusing(429, `{"error":{"message":"slow down"}}`),
			map[catalog.ErrorClass][]string{catalog.ClassRateLimited: {"long"}}, 200, "long", `"content"`},
		{"a 401 with no fallback", refusing(401, `{"error":{"message":"Incorrect API key provided: sk-pool-key"}}`),
			map[catalog.ErrorClass][]string{catalog.ClassContextWindow: {"long"}}, 502, "m", "refused the gateway's credentials"},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := classGateway(t, c.main, &upstream{tokens: 2}, c.byClass)
			resp, body := g.post(t, "/v1/chat/completions", ask)
			if resp.StatusCode != c.want || !strings.Contains(body, c.wantIn) || resp.Header.Get(modelHeader) != c.wantModel {
				t.Errorf("answered %d by %q: %s; want %d by %q with %s", resp.StatusCode, resp.Header.Get(modelHeader), body, c.want, c.wantModel, c.wantIn)
			}
			if strings.Contains(body, "sk-pool-key") {
				t.Errorf("the provider's words reached the client: %s", body)
			}
			for class := range c.byClass {
				want := 0.0
				if c.wantModel == "long" {
					want = 1 // the fallback served the class's failure, and is counted under it
				}
				if got := testutil.ToFloat64(g.r.m.fallbacks.WithLabelValues("m", "long", string(class))); got != want {
					t.Errorf("llmgw_fallbacks_total{model=m,to=long,class=%s} = %v, want %v", class, got, want)
				}
			}
		})
	}
}

// TestBothContextWindowsExceeded: when the longer model's window is
// exceeded too, the client gets the provider's 400, once.
func TestBothContextWindowsExceeded(t *testing.T) {
	g := classGateway(t, refusing(400, contextTooLong), refusing(400, contextTooLong),
		map[catalog.ErrorClass][]string{catalog.ClassContextWindow: {"long"}})
	resp, body := g.post(t, "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"x"}]}`)
	if resp.StatusCode != 400 || !strings.Contains(body, `"code":"context_length_exceeded"`) || strings.Count(body, `"error"`) != 1 {
		t.Errorf("answered %d %s", resp.StatusCode, body)
	}
}

// TestFallbackByClassTraced: the call to a class's fallback carries the
// class in llmgw.route.fallback_class; the call before it does not.
func TestFallbackByClassTraced(t *testing.T) {
	sp := httptest.NewServer(&upstream{tokens: 2})
	t.Cleanup(sp.Close)
	g, exp, _ := tracedGateway(t, false, func(c *config.Config) {
		c.Pools[1].Endpoints = []catalog.Endpoint{{URL: sp.URL + "/v1"}}
		c.Models[0].FallbacksByClass = map[catalog.ErrorClass][]string{catalog.ClassContextWindow: {"long"}}
		c.Models = append(c.Models, catalog.Model{Name: "long", Pool: "spare"})
	}, refusing(400, contextTooLong))
	if resp, body := g.post(t, "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"x"}]}`); resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	_, spans := serverSpan(t, exp)
	var classes []string
	for _, s := range spans {
		if s.SpanKind == trace.SpanKindClient {
			classes = append(classes, attrs(s)["llmgw.route.fallback_class"].AsString())
		}
	}
	if len(classes) != 2 || classes[0] != "" || classes[1] != "context_window_exceeded" {
		t.Errorf("the calls' fallback classes: %q", classes)
	}
}
