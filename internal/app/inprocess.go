package app

// A gateway started inside another program: the bench's --spawn-sim, and
// tests.

import (
	"context"
	"errors"
	"io"
	"log/slog"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
)

// GatewayOptions describe an in-process gateway in front of upstreams.
type GatewayOptions struct {
	Model     string   // the model name the upstreams serve
	Upstreams []string // base URLs, ending in /v1
	// Kind is the upstreams' pool kind, which says what load signals they
	// export; empty means openai.
	Kind string
	// Policy names the routing policy, one of catalog.Policies; empty
	// means the default.
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

// InProcess is a gateway running inside the calling program.
type InProcess struct {
	*Gateway
	cancel context.CancelFunc
	done   chan error
}

// StartGateway starts a gateway on loopback ports in front of o.Upstreams.
func StartGateway(ctx context.Context, o GatewayOptions) (*InProcess, error) {
	if o.Admission {
		return nil, errors.New("llmgw has no SLO-aware admission to turn on; use admission off")
	}
	kind := o.Kind
	if kind == "" {
		kind = catalog.KindOpenAI
	}
	cfg := upstreamConfig(o.Model, kind, o.Upstreams)
	if o.Policy != "" {
		cfg.Pools[0].Policy = o.Policy
	}
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
