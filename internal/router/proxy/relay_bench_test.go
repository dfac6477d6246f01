package proxy

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
)

// discardWriter is a client that keeps nothing, so that a benchmark
// measures the relay rather than a buffer growing.
type discardWriter struct{ h http.Header }

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) WriteHeader(int)             {}
func (w *discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *discardWriter) Flush()                      {}

func (w *discardWriter) WriteString(s string) (int, error) { return len(s), nil }

// BenchmarkRelay is one streamed answer of 200 token events from an
// upstream through llmgw's own client and the relay, reported per event:
// the upstream's pieces framed, each chunk timed, counted and renamed,
// the usage picked up.
func BenchmarkRelay(b *testing.B) {
	const events = 200
	stream := strings.Repeat(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":" token"},"logprobs":null,"finish_reason":null}]}`+"\n\n", events) +
		`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":31,"completion_tokens":200,"total_tokens":231}}` + "\n\ndata: [DONE]\n\n"
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, stream)
	}))
	defer up.Close()
	p := New(time.Second, nil)
	defer p.CloseIdle()
	u, err := url.Parse(up.URL)
	if err != nil {
		b.Fatal(err)
	}
	h := Headers("", true)
	w := &discardWriter{h: http.Header{}}
	b.ReportAllocs()
	for b.Loop() {
		o := p.Do(context.Background(), w, &Call{URL: u, Header: h, Body: []byte(`{"model":"m","stream":true}`), Stream: true,
			StripUsage: true, Model: "llama", Start: time.Now(), Idle: time.Minute})
		if o.Status != http.StatusOK || o.Usage == nil || o.Usage.CompletionTokens != events {
			b.Fatalf("outcome %+v", o)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*events), "ns/event")
}

// BenchmarkPlainCall is one plain (not streamed) chat answer from an
// upstream through llmgw's own client: the call sent, the answer's head
// and body read, its usage picked up and the answer written.
func BenchmarkPlainCall(b *testing.B) {
	answer := `{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"Requests flow through"},"finish_reason":"stop"}],"usage":{"prompt_tokens":31,"completion_tokens":4,"total_tokens":35}}`
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header()["Content-Type"] = []string{"application/json"}
		io.WriteString(w, answer)
	}))
	defer up.Close()
	p := New(time.Second, nil)
	defer p.CloseIdle()
	u, err := url.Parse(up.URL)
	if err != nil {
		b.Fatal(err)
	}
	h := Headers("", false)
	body := []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
	w := &discardWriter{h: http.Header{}}
	b.ReportAllocs()
	for b.Loop() {
		o := p.Do(context.Background(), w, &Call{URL: u, Header: h, Body: body, Model: "llama", Start: time.Now(),
			FirstByte: time.Minute, Idle: time.Minute})
		if o.Status != http.StatusOK || o.Usage == nil || o.Usage.CompletionTokens != 4 {
			b.Fatalf("outcome %+v", o)
		}
	}
}
