package bench

// Where a run's requests go: a URL given with --target, or simulated
// replicas started in-process with --spawn-sim, behind one or more
// in-process gateways unless --direct sends straight to the first replica.

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"gitea.mynodes.xyz/ilker/llmgw/internal/app"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
	"gitea.mynodes.xyz/ilker/llmgw/internal/sim"
)

// target is the endpoint of one run.
type target struct {
	// URLs are the OpenAI API bases, ending in /v1: one, or one per
	// gateway with --gateways.
	URLs     []string
	replicas []*sim.Replica   // spawned; nil for a --target URL
	gateways []*app.InProcess // spawned; nil with --direct or a --target URL
	close    func() error
}

// counted is one sum read from the gateways' counters: the series of the
// counter name whose label is value (every series when label is empty),
// added into to.
type counted struct {
	to                 *float64
	name, label, value string
}

// count adds each of cs over the target's gateways.
func (t *target) count(cs ...counted) error {
	for _, gw := range t.gateways {
		for _, c := range cs {
			v, err := gw.CounterSum(c.name, c.label, c.value)
			if err != nil {
				return err
			}
			*c.to += v
		}
	}
	return nil
}

// hedges is what the target's gateways counted of their hedges.
func (t *target) hedges() (Hedges, error) {
	var h Hedges
	err := t.count(
		counted{&h.Sent, "llmgw_hedges_total", "", ""},
		counted{&h.Won, "llmgw_hedges_total", "outcome", "won"},
		counted{&h.WastedS, "llmgw_hedge_wasted_seconds_total", "", ""},
	)
	return h, err
}

// placements is what the target's gateways counted of the prefix index
// placements they shared.
func (t *target) placements() (Shared, error) {
	return t.shared("llmgw_prefix_placements_total")
}

// loadMessages is what the gateways counted of the load messages they
// shared.
func (t *target) loadMessages() (Shared, error) {
	return t.shared("llmgw_peer_load_messages_total")
}

// quietShares is what the gateways counted of the placements and load
// messages they shared, once the bus has gone quiet: a message is counted
// received by one gateway before its sender hears from Redis that it was
// sent, and a gateway tells the others once more when its last request
// ends, so counts read at once may have a message received and not yet
// sent. It reads them until two readings a settling time apart agree, for
// at most quietWait.
func (t *target) quietShares(ctx context.Context) (placements, loads Shared, err error) {
	const settle, quietWait = 50 * time.Millisecond, 3 * time.Second
	read := func() (Shared, Shared, error) {
		p, err := t.placements()
		if err != nil {
			return p, Shared{}, err
		}
		l, err := t.loadMessages()
		return p, l, err
	}
	if placements, loads, err = read(); err != nil {
		return placements, loads, err
	}
	deadline := time.Now().Add(quietWait)
	for time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return placements, loads, nil
		case <-time.After(settle):
		}
		p, l, err := read()
		if err != nil {
			return p, l, err
		}
		if p == placements && l == loads {
			break
		}
		placements, loads = p, l
	}
	return placements, loads, nil
}

// shared sums the gateways' counter name by outcome.
func (t *target) shared(name string) (Shared, error) {
	var pl Shared
	err := t.count(
		counted{&pl.Sent, name, "outcome", "sent"},
		counted{&pl.Dropped, name, "outcome", "dropped"},
		counted{&pl.Received, name, "outcome", "received"},
		counted{&pl.Ignored, name, "outcome", "ignored"},
	)
	return pl, err
}

// Close stops what the target started; a --target URL has nothing to stop.
func (t *target) Close() error {
	if t.close == nil {
		return nil
	}
	return t.close()
}

// startFaults schedules faults on the target's replicas from now, saying
// on w as each is applied. The returned stop must be called before Close.
func (t *target) startFaults(faults []SimFault, w io.Writer) (stop func()) {
	return scheduleFaults(faults, func(f SimFault) {
		logFault(w, f)
		r := t.replicas[f.Replica]
		switch f.Kind {
		case FaultKill:
			r.Kill()
		case FaultStall:
			cur := r.Server().Faults()
			cur.Hang, cur.HangFor = true, f.For
			r.Server().SetFaults(cur)
		}
	})
}

// openTarget starts or names the target of one run. Spawned replicas are
// started afresh for every run, so each rate of a sweep begins with cold
// caches and empty queues.
func openTarget(ctx context.Context, o *options, stderr io.Writer) (*target, error) {
	if o.spawn == 0 {
		return &target{URLs: []string{o.targetURL}}, nil
	}
	return spawnSim(ctx, o, stderr)
}

// replicaSpeeds is each spawned replica's speed: --sim-speeds, or
// --sim-speed for all.
func (o *options) replicaSpeeds() []float64 {
	if o.simSpeeds != nil {
		return o.simSpeeds
	}
	speeds := make([]float64, o.spawn)
	for i := range speeds {
		speeds[i] = o.simSpeed
	}
	return speeds
}

// replicaConfigs are the spawned replicas' configurations: each of
// kind is the spawned gateways' pool kind: --pool-kind, else llamacpp in
// front of replicas of the llamacpp profile, else vllm.
func (o *options) kind() string {
	switch {
	case o.poolKind != "":
		return o.poolKind
	case o.simProfile == sim.ProfileLlamaCpp && !o.simInstant:
		return catalog.KindLlamaCpp
	}
	return catalog.KindVLLM
}

// o.simProfile (chunked when empty) with o.simNumBlocks at its speed.
func (o *options) replicaConfigs() ([]sim.Config, error) {
	profile, err := sim.ProfileNamed(cmp.Or(o.simProfile, sim.DefaultProfile))
	if err != nil {
		return nil, fmt.Errorf("--sim-profile: %w", err)
	}
	var cfgs []sim.Config
	for _, speed := range o.replicaSpeeds() {
		cfg := profile.Apply(sim.Config{Model: o.model, Speed: speed, NumBlocks: o.simNumBlocks})
		if o.simInstant {
			cfg = sim.Config{Model: o.model, Speed: speed, FixedTiming: true, NumBlocks: o.simNumBlocks}
		}
		cfgs = append(cfgs, cfg)
	}
	return cfgs, nil
}

// spawnSim starts o.spawn replicas on free loopback ports, each of
// o.simProfile (chunked when empty) with o.simNumBlocks at its speed, and, unless --direct, o.gateways gateways in front of them that
// log to stderr from --log-level up.
func spawnSim(ctx context.Context, o *options, stderr io.Writer) (*target, error) {
	t := &target{}
	var gateways []*app.InProcess
	stop := func() error {
		var err error
		for _, gw := range gateways {
			if e := gw.Close(); e != nil && !errors.Is(e, context.Canceled) {
				err = errors.Join(err, e)
			}
		}
		for _, r := range t.replicas {
			r.Close()
		}
		return err
	}
	t.close = stop
	cfgs, err := o.replicaConfigs()
	if err != nil {
		return nil, err
	}
	for i, cfg := range cfgs {
		r, err := sim.Start(ctx, cfg, "127.0.0.1:0")
		if err != nil {
			stop()
			return nil, fmt.Errorf("--spawn-sim: replica %d: %w", i, err)
		}
		t.replicas = append(t.replicas, r)
	}
	if o.direct {
		t.URLs = []string{t.replicas[0].URL()}
		return t, nil
	}
	// A llamacpp pool runs as many slots as a replica runs sequences.
	slots := 0
	if catalog.SlotCache(o.kind()) {
		slots = cfgs[0].MaxSeqs
	}
	upstreams := make([]string, len(t.replicas))
	for i, r := range t.replicas {
		upstreams[i] = r.URL()
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: o.logLevel}))
	// The gateway's model has the SLO its requests are measured by, as an
	// operator's catalog would give it; mixed has one per class, which
	// only admission gives the gateway.
	var slo catalog.SLO
	if o.workload != WorkloadMixed {
		slo = catalog.SLO{TTFTp99: o.slo.TTFT, TPOTp99: o.slo.TPOT}
	}
	// The gateways of this run share a channel of their own: those of
	// another run, or a gateway in production, on the same Redis would
	// otherwise be counted among their peers.
	channel := fmt.Sprintf("llmgw-bench:%d:%d", os.Getpid(), time.Now().UnixNano())
	// They send to the same replicas, as an operator's do, and so share
	// the secret their cache salts are made from.
	secret := rand.Text()
	for i := range max(o.gateways, 1) {
		gw, err := app.StartGateway(ctx, app.GatewayOptions{
			Model: o.model, Kind: o.kind(), Slots: slots, Upstreams: upstreams, Policy: o.policy, SLO: slo, Admission: o.admission == "on",
			HedgeAfter: o.hedge, Redis: o.redisURL, Channel: channel, NoShareLoad: !o.shareLoad, CacheSecret: secret, Logger: log.With("gateway", i),
		})
		if err != nil {
			stop()
			return nil, fmt.Errorf("--spawn-sim: starting gateway %d: %w", i, err)
		}
		gateways = append(gateways, gw)
		t.gateways = gateways
		t.URLs = append(t.URLs, gw.URL())
	}
	return t, nil
}
