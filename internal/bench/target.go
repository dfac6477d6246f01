package bench

// Where a run's requests go: a URL given with --target, or simulated
// replicas started in-process with --spawn-sim, behind an in-process
// gateway unless --direct sends straight to the first replica.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"gitea.mynodes.xyz/ilker/llmgw/internal/app"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
	"gitea.mynodes.xyz/ilker/llmgw/internal/sim"
)

// target is the endpoint of one run.
type target struct {
	URL   string // OpenAI API base, ending in /v1
	close func() error
}

// Close stops what the target started; a --target URL has nothing to stop.
func (t *target) Close() error {
	if t.close == nil {
		return nil
	}
	return t.close()
}

// openTarget starts or names the target of one run. Spawned replicas are
// started afresh for every run, so each rate of a sweep begins with cold
// caches and empty queues.
func openTarget(ctx context.Context, o *options, stderr io.Writer) (*target, error) {
	if o.spawn == 0 {
		return &target{URL: o.targetURL}, nil
	}
	return spawnSim(ctx, o, stderr)
}

// spawnSim starts o.spawn replicas on free loopback ports and, unless
// --direct, a gateway in front of them that logs to stderr from --log-level up.
func spawnSim(ctx context.Context, o *options, stderr io.Writer) (*target, error) {
	cfg := sim.Config{Model: o.model, Speed: o.simSpeed, FixedTiming: o.simInstant}
	replicas, err := sim.StartReplicas(ctx, cfg, o.spawn, "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("--spawn-sim: %w", err)
	}
	stopReplicas := func() {
		for _, r := range replicas {
			r.Close()
		}
	}
	if o.direct {
		return &target{URL: replicas[0].URL(), close: func() error { stopReplicas(); return nil }}, nil
	}
	upstreams := make([]string, len(replicas))
	for i, r := range replicas {
		upstreams[i] = r.URL()
	}
	gw, err := app.StartGateway(ctx, app.GatewayOptions{
		Model: o.model, Kind: catalog.KindVLLM, Upstreams: upstreams, Policy: o.policy, Admission: o.admission == "on",
		Logger: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: o.logLevel})),
	})
	if err != nil {
		stopReplicas()
		return nil, fmt.Errorf("--spawn-sim: starting the gateway: %w", err)
	}
	return &target{URL: gw.URL(), close: func() error {
		err := gw.Close()
		stopReplicas()
		if errors.Is(err, context.Canceled) {
			err = nil
		}
		return err
	}}, nil
}
