package app

// A gateway started inside another program: the bench's --spawn-sim, and
// tests.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
)

// GatewayOptions describe an in-process gateway in front of upstreams.
type GatewayOptions struct {
	Model     string   // the model name the upstreams serve
	Upstreams []string // base URLs, ending in /v1
	// Policy names the routing policy; empty means the default. The one
	// policy there is now is round-robin.
	Policy string
	// Admission asks for SLO-aware admission, which llmgw does not have
	// yet: asking for it is an error rather than a run that silently
	// measures something else.
	Admission bool
	Logger    *slog.Logger // nil discards logs
	// HTTP is server.http: llmgw's own HTTP/1.1 server and upstream
	// client, or net/http's; empty means the default.
	HTTP string
}

// PolicyRoundRobin is the routing policy llmgw has now: weighted round
// robin over the endpoints that have not just failed.
const PolicyRoundRobin = "round-robin"

// InProcess is a gateway running inside the calling program.
type InProcess struct {
	*Gateway
	cancel context.CancelFunc
	done   chan error
}

// StartGateway starts a gateway on loopback ports in front of o.Upstreams.
func StartGateway(ctx context.Context, o GatewayOptions) (*InProcess, error) {
	if o.Policy != "" && o.Policy != PolicyRoundRobin {
		return nil, fmt.Errorf("unknown routing policy %q; llmgw has %q", o.Policy, PolicyRoundRobin)
	}
	if o.Admission {
		return nil, errors.New("llmgw has no SLO-aware admission to turn on; use admission off")
	}
	cfg := upstreamConfig(o.Model, o.Upstreams)
	cfg.Server.Listen = "127.0.0.1:0"
	cfg.Server.AdminListen = "127.0.0.1:0"
	if o.HTTP != "" {
		cfg.Server.HTTP = o.HTTP
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	g, err := newGateway(ctx, cfg, "", log)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	p := &InProcess{Gateway: g, cancel: cancel, done: make(chan error, 1)}
	go func() { p.done <- g.Run(ctx) }()
	return p, nil
}

// Close drains the gateway and waits for it to stop.
func (p *InProcess) Close() error {
	p.cancel()
	return <-p.done
}
