package router

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
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
	"google.golang.org/grpc/stats"

	"gitea.mynodes.xyz/ilker/llmgw/internal/config"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/extproc"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/proxy"
)

// fakeEPP is a scripted Endpoint Picker: it names dest (and sets the
// prefill header), or refuses with status, or answers after delay.
type fakeEPP struct {
	extprocv3.UnimplementedExternalProcessorServer
	dest   string
	status int
	delay  time.Duration
	asked  atomic.Int64
	ended  atomic.Int64 // response phases heard to their end
	conns  connCount
	// refuseAnswer answers the answer's headers with an immediate 503.
	refuseAnswer bool

	mu    sync.Mutex
	lines []string // the messages heard, a line each (recorded)
}

// record notes m in a line: its kind, the answer's status and the
// endpoint that served it, a body's end_of_stream and the bytes of the
// answer's body.
func (f *fakeEPP) record(m *extprocv3.ProcessingRequest) {
	l := fmt.Sprintf("%T", m.Request)
	switch r := m.Request.(type) {
	case *extprocv3.ProcessingRequest_RequestHeaders:
		l = "request headers"
	case *extprocv3.ProcessingRequest_RequestBody:
		l = fmt.Sprintf("request body eos=%v", r.RequestBody.EndOfStream)
	case *extprocv3.ProcessingRequest_ResponseHeaders:
		status := ""
		for _, h := range r.ResponseHeaders.GetHeaders().GetHeaders() {
			if h.Key == ":status" {
				status = string(h.RawValue)
			}
		}
		served := m.GetMetadataContext().GetFilterMetadata()[extproc.DestinationNamespace].GetFields()[extproc.ServedKey].GetStringValue()
		l = fmt.Sprintf("response headers :status=%s served=%s", status, served)
	case *extprocv3.ProcessingRequest_ResponseBody:
		l = fmt.Sprintf("response body %q eos=%v", r.ResponseBody.Body, r.ResponseBody.EndOfStream)
	}
	f.mu.Lock()
	f.lines = append(f.lines, l)
	f.mu.Unlock()
}

func (f *fakeEPP) recorded() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.lines...)
}

// connCount counts a gRPC server's connections as they open and end.
type connCount struct{ opened, closed atomic.Int64 }

func (c *connCount) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context   { return ctx }
func (c *connCount) HandleRPC(context.Context, stats.RPCStats)                         {}
func (c *connCount) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }
func (c *connCount) HandleConn(_ context.Context, s stats.ConnStats) {
	switch s.(type) {
	case *stats.ConnBegin:
		c.opened.Add(1)
	case *stats.ConnEnd:
		c.closed.Add(1)
	}
}

func (f *fakeEPP) Process(st extprocv3.ExternalProcessor_ProcessServer) error {
	f.asked.Add(1)
	var body []byte
	for {
		m, err := st.Recv()
		if err != nil {
			return nil
		}
		f.record(m)
		switch r := m.Request.(type) {
		case *extprocv3.ProcessingRequest_RequestBody:
			body = append(body, r.RequestBody.Body...)
			if !r.RequestBody.EndOfStream {
				continue
			}
			time.Sleep(f.delay)
			if f.status != 0 {
				return st.Send(&extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ImmediateResponse{ImmediateResponse: &extprocv3.ImmediateResponse{
					Status:  &typev3.HttpStatus{Code: typev3.StatusCode(f.status)},
					Headers: &extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{{Header: &corev3.HeaderValue{Key: "retry-after", RawValue: []byte("7")}}}},
					Body:    []byte("shed"),
				}}})
			}
			rewritten := []byte(strings.Replace(string(body), `"org/m-8b"`, `"picked/m"`, 1))
			st.Send(&extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestHeaders{RequestHeaders: &extprocv3.HeadersResponse{
				Response: &extprocv3.CommonResponse{ClearRouteCache: true, HeaderMutation: &extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{
					{Header: &corev3.HeaderValue{Key: extproc.DestinationHeader, RawValue: []byte(f.dest)}},
					{Header: &corev3.HeaderValue{Key: "x-prefiller-host-port", RawValue: []byte("10.0.0.9:8000")}},
					{Header: &corev3.HeaderValue{Key: ":path", RawValue: []byte("/v1/chat/completions")}}, // as llm-d's EPP sets it
				}}}}}})
			st.Send(&extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestBody{RequestBody: &extprocv3.BodyResponse{
				Response: &extprocv3.CommonResponse{BodyMutation: &extprocv3.BodyMutation{Mutation: &extprocv3.BodyMutation_StreamedResponse{
					StreamedResponse: &extprocv3.StreamedBodyResponse{Body: rewritten, EndOfStream: true}}}}}}})
		case *extprocv3.ProcessingRequest_ResponseHeaders:
			if f.refuseAnswer {
				st.Send(&extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ImmediateResponse{ImmediateResponse: &extprocv3.ImmediateResponse{
					Status: &typev3.HttpStatus{Code: typev3.StatusCode_ServiceUnavailable}, Body: []byte("refused")}}})
			}
		case *extprocv3.ProcessingRequest_ResponseBody:
			if r.ResponseBody.EndOfStream {
				f.ended.Add(1)
			}
		}
	}
}

// serveFakeEPP serves f on a real socket and returns its address.
func serveFakeEPP(t *testing.T, f *fakeEPP) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer(grpc.StatsHandler(&f.conns))
	extprocv3.RegisterExternalProcessorServer(g, f)
	go g.Serve(ln)
	t.Cleanup(g.Stop)
	return ln.Addr().String()
}

// seen is an upstream that records what each request carried.
type seen struct {
	status   int
	hits     atomic.Int64
	prefill  atomic.Value // the x-prefiller-host-port header
	lastBody atomic.Value
}

func (s *seen) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.hits.Add(1)
	b, _ := io.ReadAll(r.Body)
	s.lastBody.Store(string(b))
	s.prefill.Store(r.Header.Get("x-prefiller-host-port"))
	if s.status != 0 {
		w.WriteHeader(s.status)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, `{"choices":[{"message":{"content":"hi"}}],"usage":{"prompt_tokens":5,"completion_tokens":1,"total_tokens":6}}`)
}

// eppGateway is a gateway whose pool main, of two upstreams, asks the EPP
// at addr (in mode, with timeout).
func eppGateway(t *testing.T, addr, mode string, timeout time.Duration, ups ...http.Handler) *testGateway {
	return newTestGateway(t, func(c *config.Config) {
		c.Pools[0].Policy = catalog.PolicyEPP
		c.Pools[0].EPP = catalog.EPP{Address: addr, FailureMode: mode, Timeout: timeout}
	}, ups...)
}

const eppBody = `{"model":"m","messages":[{"role":"user","content":"hi"}]}`

// TestEPPPoolGoesWhereTold: the request lands on the endpoint the EPP
// named first, with the header it set and the body it rewrote; a failed
// first endpoint is followed by the next the EPP named; the EPP hears the
// call's end.
func TestEPPPoolGoesWhereTold(t *testing.T) {
	a, b := &seen{}, &seen{}
	f := &fakeEPP{}
	g := eppGateway(t, serveFakeEPP(t, f), catalog.FailClose, time.Second, a, b)
	hosts := endpointHosts(g)
	f.dest = hosts[1] + "," + hosts[0]
	for range 3 {
		if resp, body := g.post(t, "/v1/chat/completions", eppBody); resp.StatusCode != 200 {
			t.Fatalf("status %d: %s", resp.StatusCode, body)
		}
	}
	if a.hits.Load() != 0 || b.hits.Load() != 3 {
		t.Fatalf("hits %d and %d, want all 3 on the endpoint the EPP named first", a.hits.Load(), b.hits.Load())
	}
	if got := b.prefill.Load(); got != "10.0.0.9:8000" {
		t.Errorf("x-prefiller-host-port %q, want the EPP's", got)
	}
	if got := b.lastBody.Load().(string); !strings.Contains(got, `"model":"picked/m"`) {
		t.Errorf("body %s, want the EPP's rewrite", got)
	}
	waitUntil(t, func() bool { return f.ended.Load() == 3 })

	b.status = http.StatusInternalServerError
	if resp, body := g.post(t, "/v1/chat/completions", eppBody); resp.StatusCode != 200 || a.hits.Load() != 1 {
		t.Fatalf("status %d (%s), %d hits on the second endpoint named: want the retry there", resp.StatusCode, body, a.hits.Load())
	}
}

// streamedAnswer is an upstream's stream in three pieces, each flushed.
var streamedAnswer = []string{
	"data: {\"choices\":[{\"delta\":{\"content\":\"he\"}}]}\n\n",
	"data: {\"choices\":[{\"delta\":{\"content\":\"llo\"}}]}\n\n",
	"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":2,\"total_tokens\":7}}\n\ndata: [DONE]\n\n",
}

// TestEPPPoolTellsTheAnswer: the EPP hears one request's exchange in the
// order Envoy in full-duplex streamed mode sends it: the request's
// headers and body, the answer's headers with its status and the
// endpoint that served it, its body as the upstream sent it, piece by
// piece, and end_of_stream last. An immediate answer to the answer's
// phase changes nothing of what the client gets.
func TestEPPPoolTellsTheAnswer(t *testing.T) {
	for _, refuse := range []bool{false, true} {
		t.Run(fmt.Sprintf("immediate answer %v", refuse), func(t *testing.T) {
			up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body)
				w.Header().Set("Content-Type", "text/event-stream")
				for _, p := range streamedAnswer {
					io.WriteString(w, p)
					w.(http.Flusher).Flush()
					time.Sleep(10 * time.Millisecond)
				}
			})
			f := &fakeEPP{refuseAnswer: refuse}
			g := eppGateway(t, serveFakeEPP(t, f), catalog.FailClose, time.Second, up)
			f.dest = endpointHosts(g)[0]
			resp, body := g.post(t, "/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
			if resp.StatusCode != 200 || !strings.Contains(body, `"llo"`) || !strings.HasSuffix(body, "data: [DONE]\n\n") {
				t.Fatalf("client got %d: %q; want the whole stream", resp.StatusCode, body)
			}
			waitUntil(t, func() bool { return f.ended.Load() == 1 })
			got := f.recorded()
			want := []string{"request headers", "request body eos=true", "response headers :status=200 served=" + f.dest}
			if len(got) < len(want)+1 {
				t.Fatalf("the EPP heard %q", got)
			}
			if d := cmp.Diff(want, got[:len(want)]); d != "" {
				t.Errorf("the request and the answer's headers (-want +got):\n%s", d)
			}
			var told strings.Builder
			for k, l := range got[len(want):] {
				var piece string
				var eos bool
				if _, err := fmt.Sscanf(l, "response body %q eos=%t", &piece, &eos); err != nil {
					t.Fatalf("message %d: %q is no piece of the answer's body", len(want)+k, l)
				}
				if eos != (k == len(got)-len(want)-1) {
					t.Errorf("message %d: %q; want end_of_stream on the last alone", len(want)+k, l)
				}
				told.WriteString(piece)
			}
			if told.String() != strings.Join(streamedAnswer, "") {
				t.Errorf("the EPP was told the body %q, want the upstream's %q", told.String(), strings.Join(streamedAnswer, ""))
			}
		})
	}
}

// TestEPPPoolFailures: the EPP's refusals reach the client as llmgw's own
// errors, and an EPP down or late fails open or closed as configured.
func TestEPPPoolFailures(t *testing.T) {
	down := func() string { // an address nobody listens on
		ln, _ := net.Listen("tcp", "127.0.0.1:0")
		addr := ln.Addr().String()
		ln.Close()
		return addr
	}()
	tests := []struct {
		name       string
		epp        *fakeEPP // nil: down
		mode       string
		wantStatus int
		wantIn     string // in the error body
	}{
		{"429 shed", &fakeEPP{status: 429}, catalog.FailOpen, 429, "overloaded"},
		{"503 no endpoint", &fakeEPP{status: 503}, catalog.FailOpen, 503, "found no endpoint"},
		{"down, fail_close", nil, catalog.FailClose, 503, "did not answer"},
		{"down, fail_open", nil, catalog.FailOpen, 200, ""},
		{"late, fail_close", &fakeEPP{delay: time.Second}, catalog.FailClose, 503, "did not answer"},
		{"late, fail_open", &fakeEPP{delay: time.Second}, catalog.FailOpen, 200, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			addr := down
			if tt.epp != nil {
				addr = serveFakeEPP(t, tt.epp)
			}
			up := &seen{}
			g := eppGateway(t, addr, tt.mode, 200*time.Millisecond, up)
			if tt.epp != nil {
				tt.epp.dest = endpointHosts(g)[0]
			}
			start := time.Now()
			resp, body := g.post(t, "/v1/chat/completions", eppBody)
			if resp.StatusCode != tt.wantStatus || !strings.Contains(body, tt.wantIn) {
				t.Fatalf("status %d, body %s; want %d with %q", resp.StatusCode, body, tt.wantStatus, tt.wantIn)
			}
			if tt.wantStatus == 429 && resp.Header.Get("Retry-After") != "7" {
				t.Errorf("Retry-After %q, want the EPP's 7", resp.Header.Get("Retry-After"))
			}
			if took := time.Since(start); took > 900*time.Millisecond {
				t.Errorf("took %s: the timeout of 200ms was not kept", took)
			}
			if wantHits := int64(0); tt.wantStatus == 200 {
				wantHits = 1
				if up.hits.Load() != wantHits {
					t.Errorf("upstream hit %d times, want %d", up.hits.Load(), wantHits)
				}
			} else if up.hits.Load() != 0 {
				t.Errorf("upstream hit %d times after a refusal", up.hits.Load())
			}
		})
	}
}

// TestEPPPoolReloadClosesConnection: a reload that moves a pool to
// another EPP closes the old EPP's connection once its calls have ended,
// one that keeps the address keeps the connection, and a pool removed
// closes its EPP's.
func TestEPPPoolReloadClosesConnection(t *testing.T) {
	old, moved := &fakeEPP{}, &fakeEPP{}
	g := eppGateway(t, serveFakeEPP(t, old), catalog.FailClose, time.Second, &seen{})
	old.dest = endpointHosts(g)[0]
	moved.dest = old.dest
	movedAddr := serveFakeEPP(t, moved)
	post := func() {
		t.Helper()
		if resp, body := g.post(t, "/v1/chat/completions", eppBody); resp.StatusCode != 200 {
			t.Fatalf("status %d: %s", resp.StatusCode, body)
		}
	}
	reload := func(mutate func([]catalog.Pool) []catalog.Pool) {
		t.Helper()
		cur := g.r.Catalog()
		pools := mutate(append([]catalog.Pool(nil), cur.Pools()...))
		models := append([]catalog.Model(nil), cur.Models()...)
		for i := range models {
			if !slices.ContainsFunc(pools, func(p catalog.Pool) bool { return p.Name == models[i].Pool }) {
				models[i].Pool = pools[0].Name
			}
		}
		cat, err := catalog.New(pools, models)
		if err != nil {
			t.Fatal(err)
		}
		g.r.SetCatalog(cat)
	}
	post()
	reload(func(p []catalog.Pool) []catalog.Pool { p[0].EPP.Timeout = 2 * time.Second; return p })
	post()
	waitUntil(t, func() bool { return old.ended.Load() == 2 })
	if old.conns.opened.Load() != 1 || old.conns.closed.Load() != 0 {
		t.Fatalf("the same address after a reload: %d connections opened, %d closed; want one kept open", old.conns.opened.Load(), old.conns.closed.Load())
	}

	reload(func(p []catalog.Pool) []catalog.Pool { p[0].EPP.Address = movedAddr; return p })
	waitUntil(t, func() bool { return old.conns.closed.Load() == 1 })
	post()
	if old.asked.Load() != 2 || moved.asked.Load() != 1 {
		t.Fatalf("asked %d and %d times, want the request after the reload at the new EPP", old.asked.Load(), moved.asked.Load())
	}

	// A request that read the catalog before the reload asks the EPP in
	// service, not the old one's closed connection.
	before := g.r.snap.Load().pools["main"]
	third := &fakeEPP{dest: old.dest}
	reload(func(p []catalog.Pool) []catalog.Pool { p[0].EPP.Address = serveFakeEPP(t, third); return p })
	waitUntil(t, func() bool { return moved.conns.closed.Load() == 1 })
	call := proxy.Call{Body: []byte(eppBody), Header: http.Header{}}
	o, err := before.epp.Order(t.Context(), extproc.Query{ID: "late", Path: "/v1/chat/completions"}, before.Pool, &call)
	if err != nil || o == nil || third.asked.Load() != 1 {
		t.Fatalf("a request holding the catalog before the reload: order %v, err %v, the EPP in service asked %d times; want once", o, err, third.asked.Load())
	}
	o.Done(before.Pool, http.StatusOK, "")
	waitUntil(t, func() bool { return third.ended.Load() == 1 })

	// The pool goes: main's models move to spare.
	reload(func(p []catalog.Pool) []catalog.Pool {
		p[1].Endpoints = p[0].Endpoints
		return p[1:]
	})
	waitUntil(t, func() bool { return third.conns.closed.Load() == 1 })
}

// endpointHosts is the host:port of each endpoint of g's pool main.
func endpointHosts(g *testGateway) []string {
	var hosts []string
	for _, ep := range g.r.snap.Load().pools["main"].Endpoints() {
		h, _ := ep.Host()
		hosts = append(hosts, h)
	}
	return hosts
}

// waitUntil polls ok for up to five seconds.
func waitUntil(t *testing.T, ok func() bool) {
	t.Helper()
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		if ok() {
			return
		}
	}
	t.Fatal("condition not met within 5s")
}

// TestEPPClientRetireWaitsForAnswers: a retired client's connection stays
// while an answer it gave is not Done, and closes at its Done; it asks no
// more.
func TestEPPClientRetireWaitsForAnswers(t *testing.T) {
	f := &fakeEPP{dest: "10.0.0.1:8000"}
	c, err := extproc.Dial(serveFakeEPP(t, f), false)
	if err != nil {
		t.Fatal(err)
	}
	a, err := c.Ask(context.Background(), extproc.Request{Path: "/v1/chat/completions", Body: []byte(eppBody)}, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c.Retire()
	if _, err := c.Ask(context.Background(), extproc.Request{Path: "/v1/chat/completions", Body: []byte(eppBody)}, time.Second); !errors.Is(err, extproc.ErrRetired) {
		t.Fatalf("ask after Retire: %v, want ErrRetired", err)
	}
	time.Sleep(50 * time.Millisecond)
	if f.conns.closed.Load() != 0 {
		t.Fatal("the connection closed under an answer not Done")
	}
	a.Done(200, "10.0.0.1:8000")
	waitUntil(t, func() bool { return f.conns.closed.Load() == 1 })
	if f.ended.Load() != 1 {
		t.Errorf("%d response phases heard, want the Done's", f.ended.Load())
	}
}
