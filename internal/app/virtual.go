package app

// The bench's --virtual: the in-process gateway's pool and model, built
// from the same configuration as StartGateway's, routed on a virtual
// clock in front of virtual replicas.

import (
	"cmp"
	"fmt"
	"time"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/virtual"
	"gitea.mynodes.xyz/ilker/llmgw/internal/sim"
)

// VirtualRequest and VirtualResult are one request of a virtual run and
// what came of it.
type (
	VirtualRequest = virtual.Request
	VirtualResult  = virtual.Result
)

// VirtualOptions describe a virtual run: a gateway as GatewayOptions
// gives it (Model, Policy, SLO), in front of one virtual replica a
// configuration.
type VirtualOptions struct {
	Model  string
	Policy string
	// Kind is the pool's kind, which sets how routing models the
	// replicas' caches (vllm's blocks, or llamacpp's slots, as many as
	// the first replica runs sequences at once); empty means vllm.
	Kind     string
	SLO      catalog.SLO
	Replicas []sim.Config
	// Drain is how long requests in flight after the last arrival may run
	// before they are cut; zero means until they end.
	Drain time.Duration
}

// RunVirtual replays reqs through the pool of o.Kind that StartGateway
// would build for o, on a virtual clock (see internal/router/virtual).
func RunVirtual(o VirtualOptions, reqs []VirtualRequest) ([]VirtualResult, error) {
	urls := make([]string, len(o.Replicas))
	replicas := make([]*sim.Virtual, len(o.Replicas))
	for i, c := range o.Replicas {
		urls[i] = fmt.Sprintf("http://virtual-%d/v1", i)
		c.Model = o.Model
		replicas[i] = sim.NewVirtual(c)
	}
	kind := cmp.Or(o.Kind, catalog.KindVLLM)
	cfg := upstreamConfig(o.Model, kind, urls)
	if catalog.SlotCache(kind) && len(o.Replicas) > 0 {
		cfg.Pools[0].Slots = o.Replicas[0].MaxSeqs
	}
	if o.Policy != "" {
		cfg.Pools[0].Policy = o.Policy
	}
	cfg.Models[0].SLO = o.SLO
	cat, err := cfg.Catalog()
	if err != nil {
		return nil, err
	}
	return virtual.Run(virtual.Options{
		Pool: cat.Pools()[0], Model: cat.Models()[0], Replicas: replicas, Drain: o.Drain,
	}, reqs)
}
