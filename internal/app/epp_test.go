package app

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/extproc"
	"gitea.mynodes.xyz/ilker/llmgw/internal/sim"
)

// TestEPPListener serves the Endpoint Picker on epp.listen beside the
// API, over TLS with a certificate of its own: its health answers
// SERVING, llmgw's own ext_proc client is picked endpoints of the
// catalog's pool, a plain-text client gets no answer, and the gateway
// stops cleanly.
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
	cfg.EPP.TLS = true
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

	conn, err := grpc.NewClient(g.EPPAddr(), grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{InsecureSkipVerify: true})))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	hc := healthpb.NewHealthClient(conn)
	if r, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: "readiness"}); err != nil || r.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("readiness: %v, %v", r, err)
	}
	// The same client a pool of policy epp asks with, over TLS.
	c, err := extproc.Dial(g.EPPAddr(), true)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	a, err := c.Ask(ctx, extproc.Request{Path: "/v1/chat/completions", Body: []byte(`{"model":"chat","messages":[{"role":"user","content":"hi"}]}`)}, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range a.Endpoints {
		if !hosts[d] {
			t.Fatalf("destinations %q name %q, not one of the pool's %v", a.Endpoints, d, hosts)
		}
	}
	a.Done(200, a.Endpoints[0])

	// In plain text, a TLS listener answers nothing.
	plain, err := extproc.Dial(g.EPPAddr(), false)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if _, err := plain.Ask(ctx, extproc.Request{Path: "/v1/chat/completions", Body: []byte(`{"model":"chat"}`)}, time.Second); !errors.Is(err, extproc.ErrNoAnswer) {
		t.Errorf("plain text to a TLS listener: %v, want no answer", err)
	}

	stop()
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
	ran <- nil
}
