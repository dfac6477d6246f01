package epp

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/structpb"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
	"gitea.mynodes.xyz/ilker/llmgw/internal/h1"
	"gitea.mynodes.xyz/ilker/llmgw/internal/openai"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/admission"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/extproc"
)

// testEPP is llmgw's EPP on a real socket, over a router whose model m
// (alias a, upstream name org/m-8b) is served by a pool of upstreams.
type testEPP struct {
	router *router.Router
	addr   string // the EPP's listener
	client extprocv3.ExternalProcessorClient
	conn   *grpc.ClientConn
	reg    *prometheus.Registry
	hosts  []string // each upstream's host:port, in the pool's order
	urls   []string
	hits   []*atomic.Int64 // requests each upstream took
}

// upstreamAnswer streams three tokens and its usage, or answers whole.
func upstreamAnswer(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if !strings.Contains(string(body), `"stream":true`) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"choices":[{"message":{"content":"hi"}}],"usage":{"prompt_tokens":5,"completion_tokens":1,"total_tokens":6}}`)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	for i := range 3 {
		fmt.Fprintf(w, "data: {\"choices\":[{\"delta\":{\"content\":\"t%d\"}}]}\n\n", i)
		w.(http.Flusher).Flush()
		time.Sleep(5 * time.Millisecond)
	}
	io.WriteString(w, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":3,\"total_tokens\":8}}\n\ndata: [DONE]\n\n")
}

func newTestEPP(t testing.TB, upstreams int, mutate func(*catalog.Pool, *catalog.Model)) *testEPP {
	t.Helper()
	x := &testEPP{reg: prometheus.NewRegistry()}
	p := catalog.Pool{Name: "main"}
	for range upstreams {
		hits := new(atomic.Int64)
		x.hits = append(x.hits, hits)
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			hits.Add(1)
			upstreamAnswer(w, r)
		}))
		t.Cleanup(s.Close)
		p.Endpoints = append(p.Endpoints, catalog.Endpoint{URL: s.URL + "/v1"})
		x.hosts = append(x.hosts, strings.TrimPrefix(s.URL, "http://"))
		x.urls = append(x.urls, s.URL+"/v1")
	}
	m := catalog.Model{Name: "m", Aliases: []string{"a"}, Pool: "main", Upstream: "org/m-8b",
		SLO: catalog.SLO{TTFTp99: 2 * time.Second, TPOTp99: 200 * time.Millisecond}}
	if mutate != nil {
		mutate(&p, &m)
	}
	cat, err := catalog.New([]catalog.Pool{p}, []catalog.Model{m})
	if err != nil {
		t.Fatal(err)
	}
	r, err := router.New(router.Options{
		Server:     router.ServerOptions{MaxBodyBytes: 1 << 10, RequestTimeout: time.Minute, Retries: 1},
		Registerer: x.reg,
	})
	if err != nil {
		t.Fatal(err)
	}
	r.SetCatalog(cat)
	t.Cleanup(r.Close)
	x.router = r
	g := h1.NewGRPCServer(h1.GRPC{Deadlines: h1.Deadlines{Header: 5 * time.Second, Body: 2 * time.Second, Idle: time.Minute}, MaxMessage: 1 << 20})
	New(Options{Router: r, MaxBodyBytes: 1 << 10, BodyTimeout: 300 * time.Millisecond, Fallbacks: 1}).Register(g)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go g.Serve(ln)
	t.Cleanup(g.Stop)
	x.addr = ln.Addr().String()
	x.conn, err = grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { x.conn.Close() })
	x.client = extprocv3.NewExternalProcessorClient(x.conn)
	return x
}

// run sends msgs on one Process stream and reads answers until want of
// them, or an immediate answer, have come.
func (x *testEPP) run(t *testing.T, msgs []*extprocv3.ProcessingRequest, want int) []*extprocv3.ProcessingResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := x.client.Process(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range msgs {
		if err := st.Send(m); err != nil {
			t.Fatal(err)
		}
	}
	var got []*extprocv3.ProcessingResponse
	for len(got) < want {
		r, err := st.Recv()
		if err != nil {
			t.Fatalf("after %d answers: %v", len(got), err)
		}
		got = append(got, r)
		if r.GetImmediateResponse() != nil {
			break
		}
	}
	st.CloseSend()
	return got
}

// reqHeaders is a request's headers, path first, with the subset hint
// in its metadata when subset is not nil.
func reqHeaders(eos bool, subset []string, kv ...string) *extprocv3.ProcessingRequest {
	hs := []*corev3.HeaderValue{{Key: ":path", RawValue: []byte("/v1/chat/completions")}, {Key: "hi", RawValue: []byte("mom")}}
	for i := 0; i+1 < len(kv); i += 2 {
		hs = append(hs, &corev3.HeaderValue{Key: kv[i], RawValue: []byte(kv[i+1])})
	}
	m := &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestHeaders{
		RequestHeaders: &extprocv3.HttpHeaders{Headers: &corev3.HeaderMap{Headers: hs}, EndOfStream: eos}}}
	if subset != nil {
		list := make([]any, len(subset))
		for i, s := range subset {
			list[i] = s
		}
		st, _ := structpb.NewStruct(map[string]any{extproc.SubsetKey: list})
		m.MetadataContext = &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{extproc.SubsetNamespace: st}}
	}
	return m
}

// reqBody is one chunk of a request's body.
func reqBody(b string, eos bool) *extprocv3.ProcessingRequest {
	return &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestBody{
		RequestBody: &extprocv3.HttpBody{Body: []byte(b), EndOfStream: eos}}}
}

// routeTo is the request phase's two answers: headers naming dest, and
// the body rewritten.
func routeTo(dest, body string) []*extprocv3.ProcessingResponse {
	set := []*corev3.HeaderValueOption{
		{Header: &corev3.HeaderValue{Key: extproc.DestinationHeader, RawValue: []byte(dest)}},
		{Header: &corev3.HeaderValue{Key: "content-length", RawValue: []byte(strconv.Itoa(len(body)))}},
	}
	return []*extprocv3.ProcessingResponse{{
		Response: &extprocv3.ProcessingResponse_RequestHeaders{RequestHeaders: &extprocv3.HeadersResponse{
			Response: &extprocv3.CommonResponse{ClearRouteCache: true, HeaderMutation: &extprocv3.HeaderMutation{SetHeaders: set}}}},
		DynamicMetadata: destinationMetadata(dest),
	}, streamed(true, []byte(body), true)}
}

// reject is an immediate answer of err.
func reject(err *openai.Error) []*extprocv3.ProcessingResponse {
	return []*extprocv3.ProcessingResponse{immediate(err)}
}

// destOf is the destination header a request phase's answer set.
func destOf(got []*extprocv3.ProcessingResponse) string {
	for _, h := range got[0].GetRequestHeaders().GetResponse().GetHeaderMutation().GetSetHeaders() {
		if h.Header.Key == extproc.DestinationHeader {
			return string(h.Header.RawValue)
		}
	}
	return ""
}

// TestRequestPhase re-expresses the request-phase sequences of llm-d's
// hermetic tests: a body whole or split, bad bodies, a missing model,
// the rewrite header, subsets, sizes, a header-only request.
func TestRequestPhase(t *testing.T) {
	x := newTestEPP(t, 1, nil)
	one := x.hosts[0]
	rewritten := `{"model":"org/m-8b","messages":[{"role":"user","content":"hi"}]}`
	tests := []struct {
		name string
		msgs []*extprocv3.ProcessingRequest
		want []*extprocv3.ProcessingResponse
	}{
		{"buffered request", []*extprocv3.ProcessingRequest{reqHeaders(false, nil), reqBody(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`, true)},
			routeTo(one, rewritten)},
		{"split body across chunks", []*extprocv3.ProcessingRequest{reqHeaders(false, nil), reqBody(`{"model":"`, false), reqBody(`a","messages":[{"role":"user",`, false), reqBody(`"content":"hi"}]}`, true)},
			routeTo(one, rewritten)},
		{"rewrite request model", []*extprocv3.ProcessingRequest{reqHeaders(false, nil, extproc.RewriteHeader, "a"), reqBody(`{"model":"other","messages":[{"role":"user","content":"hi"}]}`, true)},
			routeTo(one, rewritten)},
		{"invalid json body", []*extprocv3.ProcessingRequest{reqHeaders(false, nil), reqBody(`{"model":`, true)},
			reject(openai.AsError(new(openai.Request).Parse([]byte(`{"model":`))))},
		{"missing model", []*extprocv3.ProcessingRequest{reqHeaders(false, nil), reqBody(`{"prompt":"hello world"}`, true)},
			reject(openai.BadRequest("model", "You must provide a model parameter."))},
		{"unknown model", []*extprocv3.ProcessingRequest{reqHeaders(false, nil), reqBody(`{"model":"nope","prompt":"x"}`, true)},
			reject(openai.ModelNotFound("nope"))},
		{"header only", []*extprocv3.ProcessingRequest{reqHeaders(true, nil)},
			reject(openai.AsError(new(openai.Request).Parse(nil)))},
		{"too large", []*extprocv3.ProcessingRequest{reqHeaders(false, nil), reqBody(`{"model":"m","prompt":"`+strings.Repeat("x", 1<<10)+`"}`, true)},
			reject(openai.TooLarge(1 << 10))},
		{"body late", []*extprocv3.ProcessingRequest{reqHeaders(false, nil), reqBody(`{"model":"m",`, false)},
			reject(openai.BodyTimedOut())},
		{"subset: partial match", []*extprocv3.ProcessingRequest{reqHeaders(false, []string{"192.168.1.3:8000", one}), reqBody(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`, true)},
			routeTo(one, rewritten)},
		{"subset: no endpoint matches", []*extprocv3.ProcessingRequest{reqHeaders(false, []string{"192.168.1.99:8000"}), reqBody(`{"model":"m","prompt":"x"}`, true)},
			reject(openai.Unavailable("No endpoint of the subset the proxy named is in the model's pool.", nil))},
		{"subset: empty", []*extprocv3.ProcessingRequest{reqHeaders(false, []string{}), reqBody(`{"model":"m","prompt":"x"}`, true)},
			reject(openai.Unavailable("No endpoint of the subset the proxy named is in the model's pool.", nil))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := x.run(t, tt.msgs, len(tt.want))
			if d := cmp.Diff(tt.want, got, protocmp.Transform()); d != "" {
				t.Errorf("answers (-want +got):\n%s", d)
			}
		})
	}
}

// TestSubsetPicksWithin holds the pick and its fallbacks to the subset:
// of three endpoints, two in the subset are named, the third never.
func TestSubsetPicksWithin(t *testing.T) {
	x := newTestEPP(t, 3, nil)
	subset := []string{x.hosts[0], x.hosts[2]}
	for range 6 {
		got := x.run(t, []*extprocv3.ProcessingRequest{reqHeaders(false, subset), reqBody(`{"model":"m","prompt":"x"}`, true)}, 2)
		dests := strings.Split(destOf(got), ",")
		if len(dests) != 2 || dests[0] == dests[1] {
			t.Fatalf("destinations %q, want the pick and one fallback", dests)
		}
		for _, d := range dests {
			if d != x.hosts[0] && d != x.hosts[2] {
				t.Fatalf("destination %s is outside the subset %q", d, subset)
			}
		}
	}
}

// TestHealth answers SERVING for the protocol's services and the ext_proc
// service's name.
func TestHealth(t *testing.T) {
	x := newTestEPP(t, 1, nil)
	hc := healthpb.NewHealthClient(x.conn)
	for _, svc := range []string{"liveness", "readiness", "envoy.service.ext_proc.v3.ExternalProcessor"} {
		r, err := hc.Check(context.Background(), &healthpb.HealthCheckRequest{Service: svc})
		if err != nil || r.Status != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("health of %q: %v, %v", svc, r, err)
		}
	}
}

// proxyCall is what a proxy does with the EPP's answer: it sends the
// rewritten body to the first destination and returns the answer's
// status, content type and chunks as they came.
func proxyCall(t *testing.T, base string, body []byte) (int, string, [][]byte) {
	t.Helper()
	resp, err := http.Post(base+"/chat/completions", "application/json", strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var chunks [][]byte
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			chunks = append(chunks, append([]byte(nil), buf[:n]...))
		}
		if err != nil {
			break
		}
	}
	return resp.StatusCode, resp.Header.Get("Content-Type"), chunks
}

// TestResponsePhase drives a whole exchange as Envoy does: the request
// phase, then the upstream's real answer passed through the EPP chunk by
// chunk, the served endpoint in the metadata. Each chunk comes back as
// it was sent, and the request is counted as the gateway counts its own:
// one llmgw_requests_total, its first token timed.
func TestResponsePhase(t *testing.T) {
	for _, stream := range []bool{true, false} {
		t.Run("stream="+strconv.FormatBool(stream), func(t *testing.T) {
			x := newTestEPP(t, 2, nil)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			st, err := x.client.Process(ctx)
			if err != nil {
				t.Fatal(err)
			}
			body := fmt.Sprintf(`{"model":"a","stream":%t,"messages":[{"role":"user","content":"hi"}]}`, stream)
			st.Send(reqHeaders(false, nil))
			st.Send(reqBody(body, true))
			h, _ := st.Recv()
			b, _ := st.Recv()
			dest := strings.Split(destOf([]*extprocv3.ProcessingResponse{h}), ",")[0]
			i := 0
			if dest == x.hosts[1] {
				i = 1
			}
			sent := b.GetRequestBody().GetResponse().GetBodyMutation().GetStreamedResponse().GetBody()
			if !strings.Contains(string(sent), `"model":"org/m-8b"`) {
				t.Fatalf("body sent upstream %s, want the upstream name", sent)
			}
			status, ctype, chunks := proxyCall(t, x.urls[i], sent)
			served, _ := structpb.NewStruct(map[string]any{extproc.ServedKey: dest})
			st.Send(&extprocv3.ProcessingRequest{
				Request: &extprocv3.ProcessingRequest_ResponseHeaders{ResponseHeaders: &extprocv3.HttpHeaders{Headers: &corev3.HeaderMap{Headers: []*corev3.HeaderValue{
					{Key: ":status", RawValue: []byte(strconv.Itoa(status))}, {Key: "content-type", RawValue: []byte(ctype)}}}}},
				MetadataContext: &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{extproc.DestinationNamespace: served}},
			})
			if r, err := st.Recv(); err != nil || r.GetResponseHeaders() == nil {
				t.Fatalf("response headers answered %v, %v", r, err)
			}
			chunks = append(chunks, nil) // the end of the stream, empty
			for k, c := range chunks {
				eos := k == len(chunks)-1
				st.Send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseBody{ResponseBody: &extprocv3.HttpBody{Body: c, EndOfStream: eos}}})
				r, err := st.Recv()
				if err != nil {
					t.Fatal(err)
				}
				if d := cmp.Diff(streamed(false, c, eos), r, protocmp.Transform()); d != "" {
					t.Fatalf("chunk %d (-want +got):\n%s", k, d)
				}
			}
			st.CloseSend()
			waitFor(t, func() bool { return sample(t, x.reg, "llmgw_requests_total", "code", "200") == 1 })
			wantTTFT, wantTokens := 0.0, 1.0
			if stream {
				wantTTFT, wantTokens = 1, 3
			}
			if n := sample(t, x.reg, "llmgw_ttft_seconds", "model", "m"); n != wantTTFT {
				t.Errorf("llmgw_ttft_seconds counted %v requests, want %v", n, wantTTFT)
			}
			if n := sample(t, x.reg, "llmgw_tokens_total", "kind", "completion"); n != wantTokens {
				t.Errorf("completion tokens counted %v, want %v from the answer's usage", n, wantTokens)
			}
		})
	}
}

// sample sums the series of family name in reg with label k = v: a
// counter's or gauge's values, a histogram's counts.
func sample(t *testing.T, reg *prometheus.Registry, name, k, v string) float64 {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == k && l.GetValue() == v {
					sum += m.GetCounter().GetValue() + m.GetGauge().GetValue() + float64(m.GetHistogram().GetSampleCount())
				}
			}
		}
	}
	return sum
}

// waitFor polls ok for up to five seconds.
func waitFor(t *testing.T, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if ok() {
			return
		}
	}
	t.Fatal("condition not met within 5s")
}

// TestPoolAskingLlmgwsEPP puts llmgw's epp pool in front of llmgw's own
// EPP, as the same ext_proc client drives llm-d's: every request lands
// where the EPP said, and the EPP counts each request once, answered 200,
// from the end the pool reports, its first token and usage read from the
// answer the pool streams it.
func TestPoolAskingLlmgwsEPP(t *testing.T) {
	x := newTestEPP(t, 2, nil)
	p := catalog.Pool{Name: "front", Policy: catalog.PolicyEPP, EPP: catalog.EPP{Address: x.addr, FailureMode: catalog.FailClose, Timeout: 2 * time.Second}}
	// The front's endpoints are the EPP's own, so that its picks, by
	// host:port, are endpoints of the front's pool.
	for _, u := range x.urls {
		p.Endpoints = append(p.Endpoints, catalog.Endpoint{URL: u})
	}
	cat, err := catalog.New([]catalog.Pool{p}, []catalog.Model{{Name: "m", Pool: "front"}})
	if err != nil {
		t.Fatal(err)
	}
	freg := prometheus.NewRegistry()
	front, err := router.New(router.Options{Server: router.ServerOptions{MaxBodyBytes: 1 << 20, RequestTimeout: time.Minute, FirstTokenTimeout: 10 * time.Second, IdleTimeout: 10 * time.Second}, Registerer: freg})
	if err != nil {
		t.Fatal(err)
	}
	front.SetCatalog(cat)
	t.Cleanup(front.Close)
	fs := httptest.NewServer(front)
	t.Cleanup(fs.Close)
	const n = 8
	for k := range n {
		body := fmt.Sprintf(`{"model":"m","stream":%t,"messages":[{"role":"user","content":"hi %d"}]}`, k%2 == 0, k)
		resp, err := http.Post(fs.URL+"/v1/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("request %d: status %d: %s", k, resp.StatusCode, b)
		}
	}
	if got := sample(t, freg, "llmgw_route_decisions_total", "reason", "epp"); got != n {
		t.Errorf("the front went where the EPP said %v times, want all %d", got, n)
	}
	if got := x.hits[0].Load() + x.hits[1].Load(); got != n {
		t.Errorf("the servers took %d requests, want %d", got, n)
	}
	waitFor(t, func() bool { return sample(t, x.reg, "llmgw_requests_total", "code", "200") == n })
	if got := sample(t, x.reg, "llmgw_requests_total", "code", "499"); got != 0 {
		t.Errorf("the EPP counted %v requests as abandoned, want none", got)
	}
	// The EPP learned from the answers the pool told it as they came:
	// each stream's first token, and every answer's usage.
	if got := sample(t, x.reg, "llmgw_ttft_seconds", "model", "m"); got != n/2 {
		t.Errorf("the EPP timed %v first tokens, want one for each of the %d streams", got, n/2)
	}
	if got, want := sample(t, x.reg, "llmgw_tokens_total", "kind", "completion"), float64(n/2*3+n/2*1); got != want {
		t.Errorf("the EPP counted %v completion tokens, want %v from the answers' usage", got, want)
	}
	if got := sample(t, freg, "llmgw_epp_response_dropped_total", "pool", "front"); got != 0 {
		t.Errorf("the pool dropped %v pieces of answers, want none", got)
	}
}

// open starts a Process stream and sends a streamed chat request's
// headers, with the objective header when not empty, and body.
func (x *testEPP) open(t *testing.T, ctx context.Context, objective, body string) extprocv3.ExternalProcessor_ProcessClient {
	t.Helper()
	st, err := x.client.Process(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var kv []string
	if objective != "" {
		kv = []string{extproc.ObjectiveHeader, objective}
	}
	st.Send(reqHeaders(false, nil, kv...))
	st.Send(reqBody(body, true))
	return st
}

// TestAdmissionThroughEPP overloads a pool of one endpoint through the
// EPP: the objective header is the class, a sheddable request is shed at
// once with an immediate 429, and a critical one is queued, its headers'
// answer held until the answers reported on the other streams free the
// endpoint.
func TestAdmissionThroughEPP(t *testing.T) {
	x := newTestEPP(t, 1, func(_ *catalog.Pool, m *catalog.Model) {
		m.Admission = catalog.Admission{Enabled: true, Classes: map[string]catalog.SLO{"sheddable": {TTFTp99: 50 * time.Millisecond}}}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// About 105 prompt tokens: within sheddable's 50 ms on an idle
	// endpoint, past it with four such prompts ahead (as the gateway's
	// own admission test).
	body := `{"model":"m","stream":true,"messages":[{"role":"user","content":"` + strings.Repeat("x", 360) + `"}]}`
	var held []extprocv3.ExternalProcessor_ProcessClient
	for range admission.PendingPerEndpoint {
		st := x.open(t, ctx, "standard", body)
		if r, err := st.Recv(); err != nil || r.GetRequestHeaders() == nil {
			t.Fatalf("standard: %v, %v; want its pick", r, err)
		}
		st.Recv()
		held = append(held, st)
	}
	shed := x.open(t, ctx, "sheddable", body)
	r, err := shed.Recv()
	if err != nil || r.GetImmediateResponse().GetStatus().GetCode() != 429 {
		t.Fatalf("sheddable under overload: %v, %v; want an immediate 429", r, err)
	}
	critical := x.open(t, ctx, "critical", body)
	answered := make(chan *extprocv3.ProcessingResponse, 1)
	go func() {
		r, _ := critical.Recv()
		answered <- r
	}()
	waitFor(t, func() bool { return sample(t, x.reg, "llmgw_queue_depth", "class", "critical") == 1 })
	select {
	case r := <-answered:
		t.Fatalf("a queued request was answered %v before the endpoint freed up", r)
	case <-time.After(50 * time.Millisecond):
	}
	// The held streams' answers come and end, which frees the endpoint
	// for the queued one.
	for _, st := range held {
		st.Send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseHeaders{ResponseHeaders: &extprocv3.HttpHeaders{
			Headers: &corev3.HeaderMap{Headers: []*corev3.HeaderValue{{Key: ":status", RawValue: []byte("200")}}}}}})
		st.Send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseBody{ResponseBody: &extprocv3.HttpBody{
			Body: []byte("data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\ndata: [DONE]\n\n"), EndOfStream: true}}})
	}
	select {
	case r := <-answered:
		if r.GetRequestHeaders() == nil {
			t.Fatalf("critical: %v, want its pick", r)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the queued critical request was not picked for once the endpoint freed up")
	}
}

// TestServedEndpointCounts: when the proxy reports it served the request
// from another endpoint than the pick, the call is counted there, in
// flight until its answer ends.
func TestServedEndpointCounts(t *testing.T) {
	x := newTestEPP(t, 2, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st := x.open(t, ctx, "", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	h, err := st.Recv()
	if err != nil {
		t.Fatal(err)
	}
	st.Recv()
	picked := strings.Split(destOf([]*extprocv3.ProcessingResponse{h}), ",")[0]
	other := x.hosts[0]
	if picked == other {
		other = x.hosts[1]
	}
	served, _ := structpb.NewStruct(map[string]any{extproc.ServedKey: other})
	st.Send(&extprocv3.ProcessingRequest{
		Request: &extprocv3.ProcessingRequest_ResponseHeaders{ResponseHeaders: &extprocv3.HttpHeaders{Headers: &corev3.HeaderMap{Headers: []*corev3.HeaderValue{
			{Key: ":status", RawValue: []byte("200")}}}}},
		MetadataContext: &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{extproc.DestinationNamespace: served}},
	})
	if _, err := st.Recv(); err != nil {
		t.Fatal(err)
	}
	inflight := func() map[string]int64 {
		got := map[string]int64{}
		for _, p := range x.router.Status(time.Now()).Pools {
			for _, e := range p.Endpoints {
				got[strings.TrimSuffix(strings.TrimPrefix(e.URL, "http://"), "/v1")] = e.Own.Inflight
			}
		}
		return got
	}
	if got := inflight(); got[other] != 1 || got[picked] != 0 {
		t.Fatalf("in flight %v; want the call at %s, the endpoint served from, not at the pick %s", got, other, picked)
	}
	st.Send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseBody{ResponseBody: &extprocv3.HttpBody{
		Body: []byte("data: [DONE]\n\n"), EndOfStream: true}}})
	st.Recv()
	if got := inflight(); got[other] != 0 || got[picked] != 0 {
		t.Errorf("in flight %v after the answer's end, want none", got)
	}
}
