package app

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
	"gitea.mynodes.xyz/ilker/llmgw/internal/sim"
)

// TestEPPListener serves the Endpoint Picker on epp.listen beside the
// API: its health answers SERVING, a request is picked endpoints of the
// catalog's pool, and the gateway stops cleanly with a stream open.
func TestEPPListener(t *testing.T) {
	ctx := t.Context()
	replicas, err := sim.StartReplicas(ctx, sim.Config{Model: "chat", FixedTiming: true, TTFT: 5 * time.Millisecond, TPOT: time.Millisecond}, 2, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hosts := map[string]bool{}
	var urls []string
	for _, r := range replicas {
		urls = append(urls, r.URL())
		hosts[strings.TrimSuffix(strings.TrimPrefix(r.URL(), "http://"), "/v1")] = true
		t.Cleanup(r.Close)
	}
	cfg := upstreamConfig("chat", catalog.KindVLLM, urls)
	cfg.Server.Listen, cfg.Server.AdminListen, cfg.EPP.Listen = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	g, err := newGateway(ctx, cfg, "", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- g.Run(runCtx) }()
	defer func() { stop(); <-ran }()

	conn, err := grpc.NewClient(g.EPPAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	hc := healthpb.NewHealthClient(conn)
	if r, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: "readiness"}); err != nil || r.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("readiness: %v, %v", r, err)
	}
	st, err := extprocv3.NewExternalProcessorClient(conn).Process(ctx)
	if err != nil {
		t.Fatal(err)
	}
	st.Send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestHeaders{RequestHeaders: &extprocv3.HttpHeaders{
		Headers: &corev3.HeaderMap{Headers: []*corev3.HeaderValue{{Key: ":path", RawValue: []byte("/v1/chat/completions")}}}}}})
	st.Send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestBody{RequestBody: &extprocv3.HttpBody{
		Body: []byte(`{"model":"chat","messages":[{"role":"user","content":"hi"}]}`), EndOfStream: true}}})
	h, err := st.Recv()
	if err != nil {
		t.Fatal(err)
	}
	var dest string
	for _, o := range h.GetRequestHeaders().GetResponse().GetHeaderMutation().GetSetHeaders() {
		if o.Header.Key == "x-gateway-destination-endpoint" {
			dest = string(o.Header.RawValue)
		}
	}
	for _, d := range strings.Split(dest, ",") {
		if !hosts[d] {
			t.Fatalf("destination %q names %q, not one of the pool's %v", dest, d, hosts)
		}
	}
	st.CloseSend()

	stop()
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
	ran <- nil
}
