package proxy

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"time"

	"gitea.mynodes.xyz/ilker/llmgw/internal/openai"
)

const (
	roleChunk  = `{"choices":[{"delta":{"role":"assistant","content":""},"finish_reason":null}]}`
	tokA       = `{"choices":[{"delta":{"content":"Hel"},"finish_reason":null}]}`
	tokB       = `{"choices":[{"delta":{"content":"lo"},"finish_reason":null}]}`
	finish     = `{"choices":[{"delta":{},"finish_reason":"stop"}]}`
	usageChunk = `{"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":2,"total_tokens":9,"prompt_tokens_details":{"cached_tokens":4}}}`
)

// script is an upstream that writes its pieces in order, flushing after
// each; a func piece runs instead (to wait, or to break the connection).
type script []any

func (s script) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// Reading the body lets the server notice the gateway hanging up, as a
	// real inference server does.
	io.Copy(io.Discard, r.Body)
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	for _, p := range s {
		switch p := p.(type) {
		case string:
			io.WriteString(w, p)
			w.(http.Flusher).Flush()
		case func(http.ResponseWriter, *http.Request):
			p(w, r)
		}
	}
}

func sse(chunks ...string) string {
	var b strings.Builder
	for _, c := range chunks {
		b.WriteString("data: " + c + "\n\n")
	}
	return b.String()
}

// relayThrough serves upstream, relays one call to it through a gateway
// server and returns what the client read and the call's outcome.
func relayThrough(t *testing.T, upstream http.Handler, c Call) (string, Outcome) {
	t.Helper()
	up := httptest.NewServer(upstream)
	defer up.Close()
	return relayTo(t, nil, up.URL, c)
}

// relayTo relays one call to the upstream at url through a gateway server
// whose calls go through rt (nil: llmgw's own), and returns what the
// client read and the call's outcome.
func relayTo(t *testing.T, rt http.RoundTripper, url string, c Call) (string, Outcome) {
	t.Helper()
	p := New(time.Second, rt)
	defer p.CloseIdle()
	outcomes := make(chan Outcome, 1)
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.URL, c.Start = mustURL(t, url), time.Now()
		if c.Header == nil {
			c.Header = Headers("", c.Stream)
		}
		if c.Body == nil {
			c.Body = []byte(`{"model":"m","stream":true}`)
		}
		o := p.Do(r.Context(), w, &c)
		if !o.Wrote && o.Err != nil && o.Status != openai.StatusClientClosed {
			openai.WriteError(w, o.Err)
		}
		outcomes <- o
	}))
	defer gw.Close()
	resp, err := http.Post(gw.URL, "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return string(body), <-outcomes
}

func mustURL(t *testing.T, raw string) *url.URL {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func TestRelaySplitReadsCRLFAndComments(t *testing.T) {
	whole := ": ping\r\n\r\n" + strings.ReplaceAll(sse(roleChunk, tokA, tokB, finish, usageChunk), "\n", "\r\n") + "data: [DONE]\r\n\r\n"
	var pieces script
	for i := 0; i < len(whole); i += 7 { // events split across reads at odd places
		pieces = append(pieces, whole[i:min(i+7, len(whole))])
	}
	got, o := relayThrough(t, pieces, Call{Stream: true, StripUsage: false})
	want := sse(roleChunk, tokA, tokB, finish, usageChunk) + "data: [DONE]\n\n"
	if got != want {
		t.Errorf("client read\n%q\nwant\n%q", got, want)
	}
	if o.Status != 200 || o.Reason != ReasonNone || o.Err != nil || !o.Wrote {
		t.Errorf("outcome %+v", o)
	}
	if o.Usage == nil || o.Usage.PromptTokens != 7 || o.Usage.CompletionTokens != 2 || o.Usage.CachedTokens() != 4 || o.Estimated {
		t.Errorf("usage %+v estimated %v", o.Usage, o.Estimated)
	}
	if o.TTFT <= 0 || o.Decode < 0 {
		t.Errorf("ttft %v decode %v", o.TTFT, o.Decode)
	}
}

// The relay reads an upstream's stream as the SSE specification does:
// lines may end in a lone CR, an event's data lines are joined (and
// written on as data lines again), comments and unknown fields are
// skipped, and the type of an event is its own. A last event with no
// blank line after it is relayed all the same.
func TestRelayFramesAsTheSpecificationDoes(t *testing.T) {
	multi := "{\"choices\":[{\"delta\":\ndata: {\"content\":\"Hel\"},\"finish_reason\":null}]}"
	up := script{
		"data: {\"choices\":[{\"delta\":\r",
		"data: {\"content\":\"Hel\"},\"finish_reason\":null}]}\r",
		"\r: note\rid: 7\revent: note\r\r",
		"event: delta\ndata: " + tokB + "\r\n\r\n",
		"data: " + finish + "\n\ndata: [DONE]",
	}
	got, o := relayThrough(t, up, Call{Stream: true})
	want := "data: " + multi + "\n\nevent: delta\n" + sse(tokB, finish) + "data: [DONE]\n\n"
	if got != want {
		t.Errorf("client read\n%q\nwant\n%q", got, want)
	}
	if o.Status != 200 || o.Reason != ReasonNone || o.Usage.CompletionTokens != 2 {
		t.Errorf("outcome %+v, usage %+v; want 200, no fault, 2 tokens counted", o, o.Usage)
	}
}

func TestRelayStripsUsageTheClientDidNotAskFor(t *testing.T) {
	got, o := relayThrough(t, script{sse(tokA, tokB, finish, usageChunk, "[DONE]")}, Call{Stream: true, StripUsage: true})
	if strings.Contains(got, "usage") {
		t.Errorf("client saw the usage chunk: %q", got)
	}
	if !strings.HasSuffix(got, "data: [DONE]\n\n") {
		t.Errorf("stream does not end in [DONE]: %q", got)
	}
	if o.Usage == nil || o.Usage.CompletionTokens != 2 || o.Estimated {
		t.Errorf("gateway lost the usage: %+v", o.Usage)
	}
}

func TestRelayWithoutUsageEstimates(t *testing.T) {
	_, o := relayThrough(t, script{sse(roleChunk, tokA, tokB, tokB, finish, "[DONE]")}, Call{Stream: true, PromptEstimate: 11})
	if !o.Estimated || o.Usage.CompletionTokens != 3 || o.Usage.PromptTokens != 11 {
		t.Errorf("usage %+v estimated %v, want 3 completion tokens counted from events", o.Usage, o.Estimated)
	}
}

func TestRelayMissingDone(t *testing.T) {
	t.Run("after a finish the answer is whole", func(t *testing.T) {
		got, o := relayThrough(t, script{sse(tokA, tokB, finish)}, Call{Stream: true})
		if !strings.HasSuffix(got, "data: [DONE]\n\n") || o.Reason != ReasonNone || o.Status != 200 {
			t.Errorf("got %q, outcome %+v", got, o)
		}
	})
	t.Run("without a finish the answer is cut", func(t *testing.T) {
		got, o := relayThrough(t, script{sse(tokA, tokB)}, Call{Stream: true})
		assertCut(t, got, o, ReasonStreamBroken, http.StatusBadGateway)
	})
}

func assertCut(t *testing.T, got string, o Outcome, reason Reason, status int) {
	t.Helper()
	if strings.Contains(got, "[DONE]") {
		t.Errorf("a cut stream ended with [DONE]: %q", got)
	}
	events := strings.Split(strings.TrimSpace(got), "\n\n")
	last := events[len(events)-1]
	if !strings.HasPrefix(last, `data: {"error":{`) {
		t.Errorf("last event %q is not an error event", last)
	}
	if o.Reason != reason || o.Status != status || !o.Wrote {
		t.Errorf("outcome reason %q status %d wrote %v, want %q %d true", o.Reason, o.Status, o.Wrote, reason, status)
	}
}

func TestRelayUpstreamDiesMidStream(t *testing.T) {
	die := func(w http.ResponseWriter, r *http.Request) {
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close()
		}
	}
	got, o := relayThrough(t, script{sse(roleChunk, tokA), die}, Call{Stream: true})
	assertCut(t, got, o, ReasonStreamBroken, http.StatusBadGateway)
	if !strings.Contains(got, "Hel") {
		t.Errorf("the tokens before the break were not relayed: %q", got)
	}
}

func TestRelayIdleTimeout(t *testing.T) {
	stall := func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }
	got, o := relayThrough(t, script{sse(tokA), stall}, Call{Stream: true, Idle: 50 * time.Millisecond})
	assertCut(t, got, o, ReasonIdleTimeout, http.StatusGatewayTimeout)
}

func TestFirstByteTimeoutIsRetryable(t *testing.T) {
	stall := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		<-r.Context().Done()
	})
	got, o := relayThrough(t, stall, Call{Stream: true, FirstByte: 50 * time.Millisecond})
	if o.Wrote || o.Reason != ReasonFirstByteTimeout || o.Status != http.StatusGatewayTimeout || !o.Retryable() {
		t.Errorf("outcome %+v", o)
	}
	if !strings.Contains(got, `"code":"timeout"`) {
		t.Errorf("client got %q", got)
	}
}

func TestStreamWithNoEventInTimeIsRetryable(t *testing.T) {
	// Headers at once, then nothing: the wait for the first event is bounded too.
	stall := func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }
	_, o := relayThrough(t, script{stall}, Call{Stream: true, FirstByte: 50 * time.Millisecond, Idle: time.Hour})
	if o.Wrote || o.Reason != ReasonFirstByteTimeout || !o.Retryable() {
		t.Errorf("outcome %+v", o)
	}
}

// The deadline bounds the whole call, whatever the other bounds allow:
// before the first byte, while a stream keeps sending, and while a plain
// answer's body is read. Running out of time is the gateway's own limit,
// not the upstream's fault, so it is neither counted against the upstream
// nor retried.
func TestDeadline(t *testing.T) {
	stall := func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }
	trickle := func(w http.ResponseWriter, r *http.Request) {
		for {
			select {
			case <-r.Context().Done():
				return
			case <-time.After(5 * time.Millisecond):
				io.WriteString(w, sse(tokA))
				w.(http.Flusher).Flush()
			}
		}
	}
	headersThenStall := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", "100")
		io.WriteString(w, `{"choices":`)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	for _, tc := range []struct {
		name     string
		upstream http.Handler
		call     Call
		wrote    bool
	}{
		{"before the first byte", script{stall}, Call{Stream: true, FirstByte: time.Hour, Idle: time.Hour}, false},
		{"a stream that never pauses", script{sse(roleChunk), trickle}, Call{Stream: true, FirstByte: time.Hour, Idle: time.Hour}, true},
		{"a plain answer's body", headersThenStall, Call{Body: []byte(`{"model":"m"}`), FirstByte: time.Hour}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.call.Deadline = time.Now().Add(100 * time.Millisecond)
			got, o := relayThrough(t, tc.upstream, tc.call)
			if o.Status != http.StatusGatewayTimeout || o.Reason != ReasonNone || o.Wrote != tc.wrote || o.Retryable() {
				t.Errorf("outcome status %d reason %q wrote %v retryable %v, want 504, no reason, wrote %v, not retryable",
					o.Status, o.Reason, o.Wrote, o.Retryable(), tc.wrote)
			}
			if !strings.Contains(got, "time limit") || strings.Contains(got, "[DONE]") {
				t.Errorf("client got %q", got)
			}
		})
	}
}

// flushCounter counts the flushes of a response.
type flushCounter struct {
	http.ResponseWriter
	n atomic.Int32
}

func (f *flushCounter) Flush() {
	f.n.Add(1)
	f.ResponseWriter.(http.Flusher).Flush()
}

// Events that reach the gateway together leave in one write, and none is
// held while the upstream is silent.
func TestRelayFlushesBeforeEveryWait(t *testing.T) {
	release := make(chan struct{})
	up := httptest.NewServer(script{sse(roleChunk, tokA, tokB), func(http.ResponseWriter, *http.Request) { <-release }, sse(finish) + "data: [DONE]\n\n"})
	defer up.Close()
	p := New(time.Second, nil)
	defer p.CloseIdle()
	fc := make(chan *flushCounter, 1)
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f := &flushCounter{ResponseWriter: w}
		fc <- f
		p.Do(r.Context(), f, &Call{URL: mustURL(t, up.URL), Header: Headers("", true), Body: []byte(`{}`), Stream: true, Start: time.Now()})
	}))
	defer gw.Close()
	resp, err := http.Post(gw.URL, "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	first := sse(roleChunk, tokA, tokB)
	buf := make([]byte, len(first))
	if _, err := io.ReadFull(resp.Body, buf); err != nil || string(buf) != first {
		t.Fatalf("while the upstream waits the client read %q, %v; want the three events sent so far", buf, err)
	}
	if n := (<-fc).n.Load(); n != 1 {
		t.Errorf("three events that arrived together took %d flushes, want 1", n)
	}
	close(release)
	rest, _ := io.ReadAll(resp.Body)
	if want := sse(finish) + "data: [DONE]\n\n"; string(rest) != want {
		t.Errorf("then read %q, want %q", rest, want)
	}
}

func TestClientDisconnectCancelsUpstream(t *testing.T) {
	upstreamDone := make(chan struct{})
	up := httptest.NewServer(script{sse(tokA), func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done() // cancelled when the gateway gives up the call
		close(upstreamDone)
	}})
	defer up.Close()
	p := New(time.Second, nil)
	outcomes := make(chan Outcome, 1)
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		outcomes <- p.Do(r.Context(), w, &Call{URL: mustURL(t, up.URL), Header: Headers("", true), Body: []byte(`{}`), Stream: true, Start: time.Now()})
	}))
	defer gw.Close()
	resp, err := http.Post(gw.URL, "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 10)
	io.ReadFull(resp.Body, buf) // the first event is flowing
	resp.Body.Close()           // the client leaves
	select {
	case <-upstreamDone:
	case <-time.After(5 * time.Second):
		t.Fatal("the upstream request was not cancelled when the client left")
	}
	if o := <-outcomes; o.Status != openai.StatusClientClosed || o.Reason != ReasonNone {
		t.Errorf("outcome status %d reason %q, want 499 and no upstream fault", o.Status, o.Reason)
	}
}

func TestUpstreamStatuses(t *testing.T) {
	tests := []struct {
		status    int
		retryable bool
		reason    Reason
		client    int
	}{
		{500, true, ReasonStatus5xx, 502},
		{503, true, ReasonStatus5xx, 502},
		{429, true, ReasonStatus429, 429},
		{401, true, ReasonStatusAuth, 502},
		{403, true, ReasonStatusAuth, 502},
		{402, true, ReasonStatusOther, 502},
		{405, true, ReasonStatusOther, 502},
		{408, true, ReasonStatusOther, 502},
		{409, true, ReasonStatusOther, 502},
		{302, true, ReasonStatusOther, 502},
		{400, false, ReasonNone, 400},
		{404, false, ReasonNone, 404},
		{413, false, ReasonNone, 413},
		{422, false, ReasonNone, 422},
	}
	for _, tt := range tests {
		up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(tt.status)
			io.WriteString(w, `{"error":{"message":"upstream says no","type":"x","param":null,"code":null}}`)
		})
		got, o := relayThrough(t, up, Call{Stream: true})
		if o.Retryable() != tt.retryable || o.Reason != tt.reason || o.Status != tt.client {
			t.Errorf("upstream %d: outcome %+v", tt.status, o)
		}
		if relayed := tt.reason == ReasonNone; strings.Contains(got, "upstream says no") != relayed {
			t.Errorf("upstream %d: client read %q; the upstream's words relayed: want %v", tt.status, got, relayed)
		}
	}
}

func TestPlainAnswer(t *testing.T) {
	body := `{"id":"x","choices":[{"message":{"content":"hi"}}],"usage":{"prompt_tokens":5,"completion_tokens":1,"total_tokens":6}}`
	up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, body)
	})
	got, o := relayThrough(t, up, Call{Body: []byte(`{"model":"m"}`)})
	if got != body || o.Usage.CompletionTokens != 1 || o.Status != 200 || !o.Wrote {
		t.Errorf("got %q, outcome %+v", got, o)
	}
}

func TestKeepAlive(t *testing.T) {
	pause := func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(200 * time.Millisecond):
		case <-r.Context().Done():
		}
	}
	got, o := relayThrough(t, script{sse(tokA), pause, sse(finish, "[DONE]")}, Call{Stream: true, KeepAlive: 20 * time.Millisecond})
	if !strings.Contains(got, ": keep-alive\n\n") || o.Status != 200 {
		t.Errorf("no keep-alive during a silence: %q", got)
	}
}

func TestLongLine(t *testing.T) {
	big := `{"choices":[{"delta":{"content":"` + strings.Repeat("x", 3*relayBufSize) + `"}}]}`
	got, o := relayThrough(t, script{sse(big, finish, "[DONE]")}, Call{Stream: true})
	if !strings.Contains(got, big) || o.Usage.CompletionTokens != 1 {
		t.Errorf("a line longer than the buffer was not relayed whole (outcome %+v)", o)
	}
}

// TestEndlessLine: an upstream that streams a line with no end breaks its
// stream once the line passes maxEventLine, rather than grow the relay's
// memory without bound; the client is told, and gets no [DONE].
func TestEndlessLine(t *testing.T) {
	endless := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, sse(tokA))
		io.WriteString(w, "data: ")
		piece := strings.Repeat("x", 64<<10)
		for range 2 * maxEventLine / len(piece) {
			if _, err := io.WriteString(w, piece); err != nil {
				return
			}
		}
	})
	got, o := relayThrough(t, endless, Call{Stream: true})
	assertCut(t, got, o, ReasonStreamBroken, http.StatusBadGateway)
	if !errors.Is(o.Err, errLineTooLong) {
		t.Errorf("err %v; want %v", o.Err, errLineTooLong)
	}
}

// TestEndlessEvent: an upstream whose event's data lines never meet a
// blank line, each line short, and in lone-CR line ends, is held to the
// same bound: its stream breaks once the joined data passes
// maxEventLine.
func TestEndlessEvent(t *testing.T) {
	endless := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, sse(tokA))
		piece := strings.Repeat("data: "+strings.Repeat("x", 56)+"\r", 1<<10)
		for range 2 * maxEventLine / len(piece) {
			if _, err := io.WriteString(w, piece); err != nil {
				return
			}
		}
	})
	got, o := relayThrough(t, endless, Call{Stream: true})
	assertCut(t, got, o, ReasonStreamBroken, http.StatusBadGateway)
	if !errors.Is(o.Err, errLineTooLong) {
		t.Errorf("err %v; want %v", o.Err, errLineTooLong)
	}
}

func TestPlainAnswerOverTheLimitIsRefused(t *testing.T) {
	defer func(n int64) { maxResponseBytes = n }(maxResponseBytes)
	maxResponseBytes = 100
	answer := `{"choices":[{"message":{"content":"` + strings.Repeat("x", 200) + `"}}]}`
	for _, chunked := range []bool{false, true} {
		up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			if chunked { // no length: the limit is found reading
				w.(http.Flusher).Flush()
			} else {
				w.Header().Set("Content-Length", strconv.Itoa(len(answer)))
			}
			io.WriteString(w, answer)
		})
		got, o := relayThrough(t, up, Call{Body: []byte(`{"model":"m"}`)})
		if o.Status != http.StatusBadGateway || o.Wrote || strings.Contains(got, "xxx") {
			t.Errorf("an answer over the limit (chunked %v): status %d wrote %v, client got %q", chunked, o.Status, o.Wrote, got)
		}
	}
}

// An answer that ends before its Content-Length is broken, not whole.
func TestPlainAnswerCutShort(t *testing.T) {
	up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", "100")
		io.WriteString(w, `{"choices":`)
		w.(http.Flusher).Flush()
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			conn.Close()
		}
	})
	got, o := relayThrough(t, up, Call{Body: []byte(`{"model":"m"}`)})
	if o.Status != http.StatusBadGateway || o.Reason != ReasonStreamBroken || o.Wrote || strings.Contains(got, "choices") {
		t.Errorf("an answer cut short: outcome %+v, client got %q", o, got)
	}
}

// An upstream that claims a long answer and sends little costs the
// gateway what it sent, not what it claimed.
func TestReadAnswerGrowsAsBytesArrive(t *testing.T) {
	stalled := errors.New("stalled")
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := readAnswer(io.MultiReader(strings.NewReader("0123456789"), iotest.ErrReader(stalled)), 60<<20)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, stalled) {
		t.Errorf("got %v, want the reader's error", err)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 1<<20 {
		t.Errorf("10 bytes of a claimed 60 MiB allocated %d bytes", n)
	}
}

func TestReadAnswer(t *testing.T) {
	long := strings.Repeat("0123456789", 30<<10) // past firstAlloc
	for _, tt := range []struct {
		name   string
		body   io.Reader
		length int64
		want   string
		err    bool
	}{
		{"a length", strings.NewReader("hello"), 5, "hello", false},
		{"empty", strings.NewReader(""), 0, "", false},
		{"a long answer", strings.NewReader(long), int64(len(long)), long, false},
		{"a long answer, a byte at a time", iotest.OneByteReader(strings.NewReader(long)), int64(len(long)), long, false},
		{"shorter than its length", strings.NewReader("hell"), 5, "", true},
		{"longer than its length", strings.NewReader("hello!"), 5, "", true},
		{"no length", iotest.HalfReader(strings.NewReader(long)), -1, long, false},
		{"a length over the limit", strings.NewReader(""), maxResponseBytes + 1, "", true},
		{"a failed read", iotest.TimeoutReader(strings.NewReader(long)), int64(len(long)), "", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := readAnswer(tt.body, tt.length)
			if string(got) != tt.want || (err != nil) != tt.err {
				t.Errorf("got %d bytes, %v; want %d bytes, error %v", len(got), err, len(tt.want), tt.err)
			}
		})
	}
}

// A client that sends a request and reads none of its answer holds the
// call no longer than the idle bound: the write to it times out, and the
// call ends as one whose client left.
func TestPlainAnswerToAClientThatDoesNotRead(t *testing.T) {
	big := `{"x":"` + strings.Repeat("x", 16<<20) + `"}` // more than the sockets between hold
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(big)))
		io.WriteString(w, big)
	}))
	defer up.Close()
	p := New(time.Second, nil)
	defer p.CloseIdle()
	outcomes := make(chan Outcome, 1)
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		outcomes <- p.Do(r.Context(), w, &Call{URL: mustURL(t, up.URL), Header: Headers("", false), Body: []byte(`{}`),
			Start: time.Now(), Idle: 200 * time.Millisecond})
	}))
	defer gw.Close()
	conn, err := net.Dial("tcp", gw.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close() // before gw.Close, which waits for the handler
	conn.(*net.TCPConn).SetReadBuffer(4 << 10)
	io.WriteString(conn, "POST / HTTP/1.1\r\nHost: gw\r\nContent-Length: 2\r\n\r\n{}")
	select {
	case o := <-outcomes:
		if o.Status != openai.StatusClientClosed || o.Reason != ReasonNone || !o.Wrote {
			t.Errorf("outcome status %d reason %q wrote %v, want 499, no upstream fault, wrote", o.Status, o.Reason, o.Wrote)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a client that does not read held the call")
	}
}

// chunk is s as one chunk of a chunked body.
func chunk(s string) string { return fmt.Sprintf("%x\r\n%s\r\n", len(s), s) }

// Every kind of answer comes to the same outcome through llmgw's own
// client and through net/http's (StdTransport), which an operator may
// choose to carry every call.
func TestProxyWithEitherTransport(t *testing.T) {
	const plain = `{"choices":[{"message":{"content":"hi"}}],"usage":{"prompt_tokens":5,"completion_tokens":1,"total_tokens":6}}`
	plainAnswer := "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " + strconv.Itoa(len(plain)) + "\r\n\r\n" + plain
	events := sse(tokA, finish) + "data: [DONE]\n\n"
	stream := "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n" + chunk(events) + "0\r\n\r\n"
	refusal := `{"error":{"message":"no"}}`
	for _, tt := range []struct {
		name     string
		upstream string
		stream   bool
		status   int    // the outcome's
		reason   Reason // the outcome's
		client   string // what the client reads; empty: an error body
	}{
		{"plain", plainAnswer, false, 200, ReasonNone, plain},
		{"stream", stream, true, 200, ReasonNone, events},
		{"informational heads, then plain", "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\n\r\n" + plainAnswer, false, 200, ReasonNone, plain},
		{"informational heads, then a stream", "HTTP/1.1 103 Early Hints\r\n\r\n" + stream, true, 200, ReasonNone, events},
		{"101", "HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\nConnection: Upgrade\r\n\r\n", true, 502, ReasonConnect, ""},
		{"400", "HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nContent-Length: " + strconv.Itoa(len(refusal)) + "\r\n\r\n" + refusal, false, 400, ReasonNone, refusal},
		{"503", "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n", true, 502, ReasonStatus5xx, ""},
		{"204", "HTTP/1.1 204 No Content\r\nTransfer-Encoding: chunked\r\n\r\n", false, 502, ReasonStatusOther, ""},
	} {
		for _, std := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s, net/http %v", tt.name, std), func(t *testing.T) {
				s := newScripted(t, func(c net.Conn, conn, req int) bool {
					io.WriteString(c, tt.upstream)
					return true
				})
				var rt http.RoundTripper
				if std {
					rt = StdTransport(time.Second)
				}
				got, o := relayTo(t, rt, s.URL, Call{Stream: tt.stream, Deadline: time.Now().Add(5 * time.Second)})
				if o.Status != tt.status || o.Reason != tt.reason {
					t.Errorf("outcome status %d reason %q, want %d %q (%v)", o.Status, o.Reason, tt.status, tt.reason, o.Err)
				}
				if tt.client != "" && got != tt.client || tt.client == "" && !strings.Contains(got, `"error"`) {
					t.Errorf("client read %q, want %q", got, tt.client)
				}
			})
		}
	}
}

func TestReadBody(t *testing.T) {
	long := strings.Repeat("x", 200<<10)
	for _, c := range []struct {
		name    string
		body    string
		length  int64
		wantErr bool
	}{
		{"empty", "", 0, false},
		{"unknown length", long, -1, false},
		{"exact length", long, int64(len(long)), false},
		{"short of its length", long, int64(len(long)) + 1, true},
		{"past its length", long, int64(len(long)) - 1, true},
		{"small", "{}", 2, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := ReadBody(strings.NewReader(c.body), c.length)
			if c.wantErr {
				if err == nil {
					t.Errorf("no error")
				}
				return
			}
			if err != nil || string(got) != c.body {
				t.Errorf("got %d bytes, err %v; want %d bytes", len(got), err, len(c.body))
			}
		})
	}
}

// A call's bounds end it through either client alike: llmgw's own by
// interrupting the connection, net/http's by the context bound to the
// call (ender.bind).
func TestBoundsWithEitherTransport(t *testing.T) {
	const headers = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
	for _, tt := range []struct {
		name     string
		upstream string // sent, then nothing until the call ends
		call     Call
		reason   Reason
	}{
		{"no first byte", "", Call{FirstByte: 50 * time.Millisecond}, ReasonFirstByteTimeout},
		{"no event", headers + chunk(sse(tokA)), Call{Stream: true, Idle: 50 * time.Millisecond}, ReasonIdleTimeout},
	} {
		for _, std := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s, net/http %v", tt.name, std), func(t *testing.T) {
				s := newScripted(t, func(c net.Conn, conn, req int) bool {
					io.WriteString(c, tt.upstream)
					// Until the call closes the connection, or, where
					// its bound fails to end it, for 2 s.
					c.SetReadDeadline(time.Now().Add(2 * time.Second))
					io.Copy(io.Discard, c)
					return false
				})
				var rt http.RoundTripper
				if std {
					rt = StdTransport(time.Second)
				}
				start := time.Now()
				_, o := relayTo(t, rt, s.URL, tt.call)
				if o.Status != http.StatusGatewayTimeout || o.Reason != tt.reason {
					t.Errorf("outcome status %d reason %q, want 504 %q (%v)", o.Status, o.Reason, tt.reason, o.Err)
				}
				if d := time.Since(start); d > time.Second {
					t.Errorf("the call ended after %v", d)
				}
			})
		}
	}
}
