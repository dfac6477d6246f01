package router

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"gitea.mynodes.xyz/ilker/llmgw/internal/config"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/admission"
)

// cannedTransport answers every upstream call with the same response, in
// memory, so that a benchmark measures the gateway and nothing else.
type cannedTransport struct {
	contentType string
	body        []byte
}

func (c *cannedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	io.Copy(io.Discard, r.Body)
	r.Body.Close()
	return &http.Response{
		StatusCode:    200,
		Header:        http.Header{"Content-Type": {c.contentType}},
		Body:          io.NopCloser(bytes.NewReader(c.body)),
		ContentLength: int64(len(c.body)),
		Request:       r,
	}, nil
}

func benchRouter(b *testing.B, rt http.RoundTripper) *Router {
	return benchRouterWith(b, rt, catalog.KindOpenAI, TelemetryOptions{})
}

// benchRouterOf is benchRouter with a pool of kind, whose endpoints are
// neither scraped nor probed.
func benchRouterOf(b *testing.B, rt http.RoundTripper, kind string) *Router {
	return benchRouterWith(b, rt, kind, TelemetryOptions{})
}

// benchRouterWith is benchRouterOf with telemetry.
func benchRouterWith(b *testing.B, rt http.RoundTripper, kind string, tel TelemetryOptions) *Router {
	cfg := config.Default()
	r, err := New(Options{Server: serverOptions(cfg.Server), Router: routerOptions(cfg.Router), Registerer: prometheus.NewRegistry(),
		Transport: rt, Telemetry: tel})
	if err != nil {
		b.Fatal(err)
	}
	cat, err := catalog.New([]catalog.Pool{{Name: "p", Kind: kind, Endpoints: []catalog.Endpoint{{URL: "http://10.0.0.1/v1"}, {URL: "http://10.0.0.2/v1"}}}},
		[]catalog.Model{{Name: "llama", Aliases: []string{"default"}, Pool: "p", Upstream: "meta-llama/Llama-3.1-8B-Instruct"}})
	if err != nil {
		b.Fatal(err)
	}
	r.SetCatalog(cat)
	return r
}

const benchPrompt = `{"model":"default","messages":[{"role":"system","content":"You are a helpful assistant."},{"role":"user","content":"Write a haiku about gateways."}],"max_tokens":64}`

// benchAnswer is the whole chat answer the benchmarks' upstream gives.
var benchAnswer = &cannedTransport{contentType: "application/json", body: []byte(`{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"Requests flow through"},"finish_reason":"stop"}],"usage":{"prompt_tokens":31,"completion_tokens":4,"total_tokens":35}}`)}

// BenchmarkNonStreamedRequest is one whole chat completion through the
// handler: parse, resolve, dispatch, relay, account.
func BenchmarkNonStreamedRequest(b *testing.B) {
	benchNonStreamed(b, benchRouter(b, benchAnswer))
}

// benchNonStreamed sends r benchPrompt, b.N times.
func benchNonStreamed(b *testing.B, r *Router) {
	benchNonStreamedWith(b, r, nil)
}

// benchNonStreamedWith is benchNonStreamed with header on every request.
func benchNonStreamedWith(b *testing.B, r *Router, header http.Header) {
	b.ReportAllocs()
	for b.Loop() {
		w := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(benchPrompt))
		for k, v := range header {
			req.Header[k] = v
		}
		r.ServeHTTP(w, req)
		if w.Code != 200 {
			b.Fatal(w.Code, w.Body)
		}
	}
}

// BenchmarkSaltedRequest is BenchmarkNonStreamedRequest to a pool of kind
// vllm, each request sent with its isolation domain's cache_salt.
func BenchmarkSaltedRequest(b *testing.B) {
	r := benchRouterOf(b, benchAnswer, catalog.KindVLLM)
	b.ReportAllocs()
	for b.Loop() {
		w := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(benchPrompt))
		req.Header.Set(admission.TenantHeader, "acme/search")
		r.ServeHTTP(w, req)
		if w.Code != 200 {
			b.Fatal(w.Code, w.Body)
		}
	}
}

// BenchmarkStreamedEvent is the relay's cost per streamed event: a stream
// of 200 token events through the handler, reported per event.
func BenchmarkStreamedEvent(b *testing.B) {
	benchStreamed(b, benchRouter)
}

// benchStreamed sends a router that newRouter makes a request streamed
// 200 token events, b.N times, and reports the time per event.
func benchStreamed(b *testing.B, newRouter func(*testing.B, http.RoundTripper) *Router) {
	const events = 200
	var stream bytes.Buffer
	for range events {
		stream.WriteString(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":" token"},"logprobs":null,"finish_reason":null}]}` + "\n\n")
	}
	stream.WriteString(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":31,"completion_tokens":200,"total_tokens":231}}` + "\n\ndata: [DONE]\n\n")
	r := newRouter(b, &cannedTransport{contentType: "text/event-stream", body: stream.Bytes()})
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
