package router

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"
)

// BenchmarkTranslatedStream is the relay's cost per streamed token for
// the same upstream stream answered as chat, as Anthropic's Messages API
// and as OpenAI's Responses API: 200 token events through the handler,
// reported per event, side by side.
func BenchmarkTranslatedStream(b *testing.B) {
	const events = 200
	var stream bytes.Buffer
	stream.WriteString(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}` + "\n\n")
	for range events {
		stream.WriteString(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":" token"},"logprobs":null,"finish_reason":null}]}` + "\n\n")
	}
	stream.WriteString(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":""},"logprobs":null,"finish_reason":"stop","stop_reason":null}]}` + "\n\n")
	stream.WriteString(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":31,"completion_tokens":200,"total_tokens":231}}` + "\n\ndata: [DONE]\n\n")
	for _, c := range []struct {
		name, path, body string
	}{
		{"chat", "/v1/chat/completions", `{"model":"default","messages":[{"role":"system","content":"You are a helpful assistant."},{"role":"user","content":"Write a haiku about gateways."}],"max_tokens":200,"stream":true,"stream_options":{"include_usage":true}}`},
		{"anthropic", "/v1/messages", `{"model":"default","system":"You are a helpful assistant.","messages":[{"role":"user","content":"Write a haiku about gateways."}],"max_tokens":200,"stream":true}`},
		{"responses", "/v1/responses", `{"model":"default","instructions":"You are a helpful assistant.","input":"Write a haiku about gateways.","max_output_tokens":200,"stream":true}`},
	} {
		b.Run(c.name, func(b *testing.B) {
			r := benchRouter(b, &cannedTransport{contentType: "text/event-stream", body: stream.Bytes()})
			b.ReportAllocs()
			cpu := cpuTime()
			w := &countingWriter{}
			for b.Loop() {
				w.code, w.tokens = 0, 0
				req := httptest.NewRequest(http.MethodPost, c.path, strings.NewReader(c.body))
				req.Header.Set("anthropic-version", "2023-06-01")
				r.ServeHTTP(w, req)
				if w.code != 200 || w.tokens < events {
					b.Fatal(w.code, w.tokens)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*events), "ns/event")
			// CPU time, not wall time: what a token costs the gateway,
			// whatever else the machine runs.
			b.ReportMetric(float64((cpuTime()-cpu).Nanoseconds())/float64(b.N*events), "cpu-ns/event")
		})
	}
}

// cpuTime is the CPU time, user and system, the process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// countingWriter is a client that reads a stream and keeps nothing but
// its status and how many tokens it held, so that a benchmark measures
// the gateway rather than a buffer growing.
type countingWriter struct {
	h      http.Header
	code   int
	tokens int
}

func (w *countingWriter) Header() http.Header {
	if w.h == nil {
		w.h = http.Header{}
	}
	return w.h
}

func (w *countingWriter) WriteHeader(code int) { w.code = code }

func (w *countingWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = 200
	}
	w.tokens += bytes.Count(b, []byte(" token"))
	return len(b), nil
}

func (w *countingWriter) Flush() {}

func (w *countingWriter) WriteString(s string) (int, error) {
	if w.code == 0 {
		w.code = 200
	}
	w.tokens += strings.Count(s, " token")
	return len(s), nil
}
