package extproc

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
)

// recorder is an EPP that names dest and records, in a line each, the
// messages of every stream; it answers the answer's phase as Envoy's
// ext_proc expects, or with an immediate answer when refuse is set, or
// reads nothing of it while stall is open.
type recorder struct {
	extprocv3.UnimplementedExternalProcessorServer
	dest   string
	refuse bool
	stall  chan struct{} // when not nil, the answer's phase is read once it is closed
	quiet  bool          // records nothing

	mu    sync.Mutex
	lines []string
	ended atomic.Int64 // streams whose end_of_stream came
	done  atomic.Int64 // streams ended
}

func (r *recorder) Process(st extprocv3.ExternalProcessor_ProcessServer) error {
	defer r.done.Add(1)
	for {
		m, err := st.Recv()
		if err != nil {
			return nil
		}
		if !r.quiet {
			r.mu.Lock()
			r.lines = append(r.lines, line(m))
			r.mu.Unlock()
		}
		var out *extprocv3.ProcessingResponse
		switch q := m.Request.(type) {
		case *extprocv3.ProcessingRequest_RequestBody:
			if !q.RequestBody.EndOfStream {
				continue
			}
			st.Send(&extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestHeaders{RequestHeaders: &extprocv3.HeadersResponse{
				Response: &extprocv3.CommonResponse{HeaderMutation: &extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{
					{Header: &corev3.HeaderValue{Key: DestinationHeader, RawValue: []byte(r.dest)}}}}}}}})
			out = &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestBody{RequestBody: &extprocv3.BodyResponse{}}}
			if r.stall != nil {
				st.Send(out)
				<-r.stall
				continue
			}
		case *extprocv3.ProcessingRequest_ResponseHeaders:
			out = &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseHeaders{ResponseHeaders: &extprocv3.HeadersResponse{}}}
			if r.refuse {
				out = &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ImmediateResponse{ImmediateResponse: &extprocv3.ImmediateResponse{
					Status: &typev3.HttpStatus{Code: typev3.StatusCode_ServiceUnavailable}}}}
			}
		case *extprocv3.ProcessingRequest_ResponseBody:
			out = &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseBody{ResponseBody: &extprocv3.BodyResponse{}}}
			if q.ResponseBody.EndOfStream {
				r.ended.Add(1)
			}
		}
		if out != nil {
			st.Send(out)
		}
	}
}

// line is m in a line: its kind, its headers but the request's, the
// served endpoint, its body and end_of_stream.
func line(m *extprocv3.ProcessingRequest) string {
	switch q := m.Request.(type) {
	case *extprocv3.ProcessingRequest_RequestHeaders:
		return "request headers"
	case *extprocv3.ProcessingRequest_RequestBody:
		return fmt.Sprintf("request body %q eos=%v", q.RequestBody.Body, q.RequestBody.EndOfStream)
	case *extprocv3.ProcessingRequest_ResponseHeaders:
		var hs []string
		for _, h := range q.ResponseHeaders.GetHeaders().GetHeaders() {
			hs = append(hs, h.Key+": "+string(h.RawValue))
		}
		served := m.GetMetadataContext().GetFilterMetadata()[DestinationNamespace].GetFields()[ServedKey].GetStringValue()
		return fmt.Sprintf("response headers %s served=%s", strings.Join(hs, ", "), served)
	case *extprocv3.ProcessingRequest_ResponseBody:
		return fmt.Sprintf("response body %q eos=%v", q.ResponseBody.Body, q.ResponseBody.EndOfStream)
	}
	return fmt.Sprintf("%T", m.Request)
}

func (r *recorder) recorded() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.lines...)
}

// serve serves r on a real socket and returns a Client of it.
func serve(t testing.TB, r *recorder) (*Client, *grpc.Server) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	extprocv3.RegisterExternalProcessorServer(g, r)
	go g.Serve(ln)
	t.Cleanup(g.Stop)
	c, err := Dial(ln.Addr().String(), false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, g
}

// answerGoroutines counts the goroutines of answers' phases.
func answerGoroutines() int { return len(answerStacks()) }

// answerStacks are the stacks of the goroutines of answers' phases.
func answerStacks() []string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var gs []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "extproc.(*Answer)") {
			gs = append(gs, g)
		}
	}
	return gs
}

// waitUntil polls ok for up to five seconds.
func waitUntil(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		if ok() {
			return
		}
	}
	t.Fatalf("%s: not within 5s; the answers' goroutines:\n%s", what, strings.Join(answerStacks(), "\n\n"))
}

type count struct{ n atomic.Int64 }

func (c *count) Add(f float64) { c.n.Add(int64(f)) }

const body = `{"model":"m","stream":true}`

// TestResponsePhaseSequence: the EPP is told the request, then the
// answer as a proxy in full-duplex streamed mode tells it: its headers
// with :status and the endpoint that served it, each piece of its body
// in order, end_of_stream with the last. An answer that never came (no
// 2xx) is told at Done, its status and an empty end.
func TestResponsePhaseSequence(t *testing.T) {
	const host = "10.0.0.1:8000"
	request := []string{"request headers", fmt.Sprintf("request body %q eos=true", body)}
	for _, tt := range []struct {
		name   string
		status int
		pieces []string
		want   []string
	}{
		{"stream", 200, []string{"data: a\n\n", "data: b\n\n", ""}, []string{
			"response headers :status: 200, content-type: text/event-stream served=" + host,
			`response body "data: a\n\n" eos=false`, `response body "data: b\n\n" eos=false`, `response body "" eos=true`}},
		{"no answer", 503, nil, []string{
			"response headers :status: 502 served=" + host, `response body "" eos=true`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := &recorder{dest: host}
			c, _ := serve(t, r)
			dropped := &count{}
			a, err := c.Ask(context.Background(), Request{Path: "/v1/chat/completions", Body: []byte(body), Dropped: dropped}, time.Second)
			if err != nil {
				t.Fatal(err)
			}
			piece := a.Tap(tt.status, http.Header{"Content-Type": {"text/event-stream"}}, host)
			if (piece != nil) != (tt.status == 200) {
				t.Fatalf("Tap of a %d answer took its body: %v", tt.status, piece != nil)
			}
			for k, p := range tt.pieces {
				piece([]byte(p), k == len(tt.pieces)-1)
			}
			a.Done(502, host)
			waitUntil(t, "the stream's end", func() bool { return r.done.Load() == 1 })
			if d := cmp.Diff(append(request, tt.want...), r.recorded()); d != "" {
				t.Errorf("messages (-want +got):\n%s", d)
			}
			if dropped.n.Load() != 0 {
				t.Errorf("%d pieces dropped, want none", dropped.n.Load())
			}
			waitUntil(t, "the answer's goroutines to end", func() bool { return answerGoroutines() == 0 })
		})
	}
}

// TestResponsePhaseNeverWaits: an EPP that reads nothing of the answer
// holds up none of it: every piece is taken at once, those past the queue
// dropped and counted; the EPP is told the end all the same once it
// reads, and the answer's goroutines end after Done.
func TestResponsePhaseNeverWaits(t *testing.T) {
	r := &recorder{dest: "10.0.0.1:8000", stall: make(chan struct{})}
	c, _ := serve(t, r)
	dropped := &count{}
	// The EPP has 10 s after Done to take what was queued and the end.
	a, err := c.Ask(context.Background(), Request{Path: "/v1/chat/completions", Body: []byte(body), Dropped: dropped}, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	const pieces = 2000 // of 4 KiB: 8 MiB, past the queue and the window gRPC gives a stream
	taken := make(chan struct{})
	go func() {
		defer close(taken)
		piece := a.Tap(200, nil, "10.0.0.1:8000")
		b := []byte(strings.Repeat("x", 4<<10))
		for range pieces {
			piece(b, false)
		}
		piece(nil, true)
	}()
	select {
	case <-taken:
	case <-time.After(10 * time.Second):
		t.Fatal("the answer's pieces waited on an EPP that reads nothing")
	}
	if dropped.n.Load() == 0 {
		t.Fatal("nothing dropped: the queue is not bounded")
	}
	a.Done(200, "10.0.0.1:8000")
	close(r.stall)
	waitUntil(t, "the stream's end", func() bool { return r.done.Load() == 1 })
	if r.ended.Load() != 1 {
		t.Errorf("the EPP heard %d ends, want 1", r.ended.Load())
	}
	told := 0
	for _, l := range r.recorded() {
		if strings.HasPrefix(l, `response body "xxx`) {
			told++
		}
	}
	if told+int(dropped.n.Load()) != pieces {
		t.Errorf("%d pieces told and %d dropped, want the %d sent", told, dropped.n.Load(), pieces)
	}
	waitUntil(t, "the answer's goroutines to end", func() bool { return answerGoroutines() == 0 })
}

// TestResponsePhaseEPPGone: an EPP that never takes the end, or that
// went away mid-answer, holds nothing open: the stream ends within the
// timeout after Done, and so do the answer's goroutines; what came after
// it went is dropped and counted.
func TestResponsePhaseEPPGone(t *testing.T) {
	t.Run("stalled", func(t *testing.T) {
		r := &recorder{dest: "10.0.0.1:8000", stall: make(chan struct{})}
		defer close(r.stall)
		c, _ := serve(t, r)
		a, err := c.Ask(context.Background(), Request{Path: "/v1/chat/completions", Body: []byte(body)}, 100*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		a.Tap(200, nil, "10.0.0.1:8000")([]byte("data: a\n\n"), false)
		a.Done(200, "10.0.0.1:8000")
		waitUntil(t, "the answer's goroutines to end", func() bool { return answerGoroutines() == 0 })
	})
	t.Run("gone", func(t *testing.T) {
		r := &recorder{dest: "10.0.0.1:8000"}
		c, g := serve(t, r)
		dropped := &count{}
		a, err := c.Ask(context.Background(), Request{Path: "/v1/chat/completions", Body: []byte(body), Dropped: dropped}, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		piece := a.Tap(200, nil, "10.0.0.1:8000")
		g.Stop()
		// The replies' reader sees the stream end; the sender waits for
		// Done.
		waitUntil(t, "the replies' reader to end", func() bool { return answerGoroutines() == 1 })
		piece([]byte("data: a\n\n"), false)
		a.Done(200, "10.0.0.1:8000")
		waitUntil(t, "the answer's goroutines to end", func() bool { return answerGoroutines() == 0 })
		if dropped.n.Load() != 1 {
			t.Errorf("%d pieces dropped, want the one after the EPP went", dropped.n.Load())
		}
	})
}

// TestResponsePhaseImmediateIgnored: an EPP that answers the answer's
// headers with an immediate answer changes nothing of it: its pieces are
// still taken, and Done ends the stream.
func TestResponsePhaseImmediateIgnored(t *testing.T) {
	r := &recorder{dest: "10.0.0.1:8000", refuse: true}
	c, _ := serve(t, r)
	a, err := c.Ask(context.Background(), Request{Path: "/v1/chat/completions", Body: []byte(body)}, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	piece := a.Tap(200, nil, "10.0.0.1:8000")
	piece([]byte("data: a\n\n"), false)
	piece(nil, true)
	a.Done(200, "10.0.0.1:8000")
	waitUntil(t, "the stream's end", func() bool { return r.done.Load() == 1 })
	waitUntil(t, "the answer's goroutines to end", func() bool { return answerGoroutines() == 0 })
	if got := r.recorded(); len(got) != 5 || r.ended.Load() != 1 {
		t.Errorf("the EPP heard %q, want the answer to its end", got)
	}
}
