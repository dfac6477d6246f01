package app

// A gateway started inside another program: the bench's --spawn-sim, and
// tests.

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"time"

	dto "github.com/prometheus/client_model/go"

	"gitea.mynodes.xyz/ilker/llmgw/internal/config"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/tenant"
)

// GatewayOptions describe an in-process gateway in front of upstreams.
type GatewayOptions struct {
	Model     string   // the model name the upstreams serve
	Upstreams []string // base URLs, ending in /v1
	// Kind is the upstreams' pool kind, which says what load signals they
	// export; empty means openai.
	Kind string
	// Slots is the pool's slots, on a kind whose servers cache per slot;
	// zero means the kind's default.
	Slots int
	// Policy names the routing policy, one of catalog.Policies; empty
	// means the default.
	Policy string
	// SLO is the model's SLO, as an operator would give it in the
	// catalog; zero means none. Admission replaces it with demoSLO.
	SLO catalog.SLO
	// Admission turns on SLO-aware admission for the model, with the
	// class SLOs of classSLOs.
	Admission bool
	// HedgeAfter, when positive, hedges the pool's requests after this
	// many times their predicted TTFT (hedge.after), with the default
	// least wait.
	HedgeAfter float64
	// Redis is limits.redis: gateways given the same one and the same
	// Channel (router.share_channel; empty for the default) share where
	// each prompt was sent, and what each has in flight unless
	// NoShareLoad. Empty means none.
	Redis       string
	Channel     string
	NoShareLoad bool
	Logger      *slog.Logger // nil discards logs
	// HTTP is server.http: llmgw's own HTTP/1.1 server and upstream
	// client, or net/http's; empty means the default.
	HTTP string
	// CacheSecret is router.cache_secret: gateways in front of the same
	// upstreams share one, or their requests share no cached prefix.
	// Empty means a secret of this gateway's own.
	CacheSecret string
	// MaxBodyBytes is server.max_body_bytes; zero means the default.
	MaxBodyBytes int64
}

// InProcess is a gateway running inside the calling program.
type InProcess struct {
	*Gateway
	cancel context.CancelFunc
	done   chan error
}

// StartGateway starts a gateway on loopback ports in front of o.Upstreams.
func StartGateway(ctx context.Context, o GatewayOptions) (*InProcess, error) {
	kind := o.Kind
	if kind == "" {
		kind = catalog.KindOpenAI
	}
	cfg := upstreamConfig(o.Model, kind, o.Upstreams)
	cfg.Pools[0].Slots = o.Slots
	if o.Policy != "" {
		cfg.Pools[0].Policy = o.Policy
	}
	if o.HedgeAfter > 0 {
		cfg.Pools[0].Hedge = catalog.Hedge{After: o.HedgeAfter, MinWait: config.DefaultHedgeMinWait}
	}
	cfg.Models[0].SLO = o.SLO
	if o.Admission {
		m := &cfg.Models[0]
		m.SLO = demoSLO
		m.Admission = catalog.Admission{Enabled: true, Classes: classSLOs}
	}
	cfg.Limits.Redis = o.Redis
	cfg.Router.ShareLoad = !o.NoShareLoad
	cfg.Router.ShareChannel = o.Channel
	cfg.Router.CacheSecret = o.CacheSecret
	cfg.Server.Listen = "127.0.0.1:0"
	cfg.Server.AdminListen = "127.0.0.1:0"
	if o.HTTP != "" {
		cfg.Server.HTTP = o.HTTP
	}
	if o.MaxBodyBytes != 0 {
		cfg.Server.MaxBodyBytes = o.MaxBodyBytes
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

// demoSLO is the demo model's SLO, and a standard request's: an
// interactive chat's first token within a second, and ten tokens a
// second or better after it.
var demoSLO = catalog.SLO{TTFTp99: time.Second, TPOTp99: 100 * time.Millisecond}

// classSLOs are the SLOs of each class when admission is on in process,
// those of the bench's mixed workload: a search service's critical
// requests tight, a batch tenant's sheddable ones loose.
var classSLOs = map[string]catalog.SLO{
	tenant.PriorityCritical:  {TTFTp99: 500 * time.Millisecond, TPOTp99: 50 * time.Millisecond},
	tenant.PriorityStandard:  demoSLO,
	tenant.PrioritySheddable: {TTFTp99: 10 * time.Second, TPOTp99: 250 * time.Millisecond},
}

// CounterSum is the sum of the series of the counter named name in the
// gateway's metrics, those whose label is value when label is not empty;
// zero when it has none.
func (p *InProcess) CounterSum(name, label, value string) (float64, error) {
	mfs, err := p.reg.Gather()
	if err != nil {
		return 0, err
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if label == "" || slices.ContainsFunc(m.GetLabel(), func(l *dto.LabelPair) bool {
				return l.GetName() == label && l.GetValue() == value
			}) {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum, nil
}

// Close drains the gateway and waits for it to stop.
func (p *InProcess) Close() error {
	p.cancel()
	return <-p.done
}
