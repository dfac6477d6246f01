package epp

import (
	"context"
	"net"
	"syscall"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"gitea.mynodes.xyz/ilker/llmgw/internal/h1"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/admission"
)

// benchBody is a short chat request, as most are.
const benchBody = `{"model":"m","stream":true,"messages":[{"role":"user","content":"Say hello to the benchmark, briefly."}]}`

// benchAnswer is a short streamed answer: two tokens, usage, done.
var benchAnswer = []byte("data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\ndata: {\"choices\":[{\"delta\":{\"content\":\"!\"}}]}\n\n" +
	"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":12,\"completion_tokens\":2,\"total_tokens\":14}}\n\ndata: [DONE]\n\n")

// cpu is the process's user and system CPU time so far.
func cpu() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU reports the process's CPU time per op since start.
func reportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64(cpu()-start)/float64(b.N), "cpu-ns/op")
}

// BenchmarkPick is a request's steps at the router without the protocol:
// parse, model, pick, the answer's chunk read and the request accounted,
// as Router.Pick and Picked take them.
func BenchmarkPick(b *testing.B) {
	x := newTestEPP(b, 4, nil)
	r := x.router
	ctx := context.Background()
	b.ReportAllocs()
	start := cpu()
	for b.Loop() {
		pk, err := r.Pick(ctx, router.External{Path: "/v1/chat/completions", Body: []byte(benchBody), Class: admission.Standard, Fallbacks: 1})
		if err != nil {
			b.Fatal(err)
		}
		pk.Served(pk.Endpoints[0])
		pk.Headers(200)
		pk.Chunk(benchAnswer)
		pk.End(true)
	}
	reportCPU(b, start)
}

// BenchmarkExchange is the same request through the protocol over a real
// socket: the request's headers and body, the two answers, the answer's
// headers and its one chunk, each answered, the stream closed. The proxy's
// side runs in the same process, so its CPU counts too.
func BenchmarkExchange(b *testing.B) {
	benchExchange(b, newTestEPP(b, 4, nil).client)
}

// benchExchange runs one request's exchange with c each op.
func benchExchange(b *testing.B, c extprocv3.ExternalProcessorClient) {
	ctx := context.Background()
	headers := reqHeaders(false, nil)
	body := reqBody(benchBody, true)
	respHeaders := &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseHeaders{ResponseHeaders: &extprocv3.HttpHeaders{
		Headers: &corev3.HeaderMap{Headers: []*corev3.HeaderValue{{Key: ":status", RawValue: []byte("200")}}}}}}
	respBody := &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseBody{ResponseBody: &extprocv3.HttpBody{Body: benchAnswer, EndOfStream: true}}}
	b.ReportAllocs()
	start := cpu()
	for b.Loop() {
		st, err := c.Process(ctx)
		if err != nil {
			b.Fatal(err)
		}
		st.Send(headers)
		st.Send(body)
		st.Recv()
		st.Recv()
		st.Send(respHeaders)
		st.Send(respBody)
		st.Recv()
		if _, err := st.Recv(); err != nil {
			b.Fatal(err)
		}
		st.CloseSend()
		st.Recv() // the end of the stream
	}
	reportCPU(b, start)
}

// echoEPP answers every message with an empty answer of its phase, and
// nothing else: the protocol's own cost over gRPC, on both sides.
type echoEPP struct {
	extprocv3.UnimplementedExternalProcessorServer
}

func (echoEPP) Process(st extprocv3.ExternalProcessor_ProcessServer) error {
	for {
		m, err := st.Recv()
		if err != nil {
			return nil
		}
		var out *extprocv3.ProcessingResponse
		switch m.Request.(type) {
		case *extprocv3.ProcessingRequest_RequestHeaders:
			continue // answered with the body, as an EPP does
		case *extprocv3.ProcessingRequest_RequestBody:
			st.Send(&extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestHeaders{RequestHeaders: &extprocv3.HeadersResponse{}}})
			out = &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestBody{RequestBody: &extprocv3.BodyResponse{}}}
		case *extprocv3.ProcessingRequest_ResponseHeaders:
			out = &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseHeaders{ResponseHeaders: &extprocv3.HeadersResponse{}}}
		default:
			out = &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseBody{ResponseBody: &extprocv3.BodyResponse{}}}
		}
		st.Send(out)
	}
}

// BenchmarkTransport is BenchmarkExchange's messages to a server that
// does nothing with them: what gRPC and the stream cost both sides, which
// BenchmarkExchange less this leaves to the EPP itself.
func BenchmarkTransport(b *testing.B) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	g := h1.NewGRPCServer(h1.GRPC{Deadlines: h1.Deadlines{Header: 5 * time.Second, Body: 5 * time.Second, Idle: time.Minute}, MaxMessage: 1 << 20})
	extprocv3.RegisterExternalProcessorServer(g, echoEPP{})
	go g.Serve(ln)
	defer g.Stop()
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	benchExchange(b, extprocv3.NewExternalProcessorClient(conn))
}
