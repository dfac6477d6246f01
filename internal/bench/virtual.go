package bench

// --virtual: a run replayed on a virtual clock through the in-process
// gateway's routing in front of virtual replicas (internal/app's
// RunVirtual), its results in the shape the driver gives them.

import (
	"gitea.mynodes.xyz/ilker/llmgw/internal/app"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
)

// runVirtual replays reqs on a virtual clock, as spawnSim's gateway and
// replicas would serve them.
func runVirtual(o *options, reqs []Request) ([]Result, error) {
	cfgs, err := o.replicaConfigs()
	if err != nil {
		return nil, err
	}
	vo := app.VirtualOptions{Model: o.model, Policy: o.policy, Kind: o.kind(), Replicas: cfgs, Drain: o.drain}
	if o.workload != WorkloadMixed { // as spawnSim's gateway: see there
		vo.SLO = catalog.SLO{TTFTp99: o.slo.TTFT, TPOTp99: o.slo.TPOT}
	}
	vreqs := make([]app.VirtualRequest, len(reqs))
	for i := range reqs {
		r := &reqs[i]
		vreqs[i] = app.VirtualRequest{At: r.At, Body: requestBody(o.model, r), Tenant: r.Tenant, Class: r.Class}
	}
	vres, err := app.RunVirtual(vo, vreqs)
	if err != nil {
		return nil, err
	}
	results := make([]Result, len(reqs))
	for i, v := range vres {
		r := &reqs[i]
		res := &results[i]
		*res = Result{
			Tenant: r.Tenant, Class: r.Class, SLO: r.SLO, Start: r.At, Asked: int64(r.MaxTokens),
			TTFT: v.TTFT, E2E: v.Last, LastToken: v.Last, Tokens: v.Tokens, Gaps: v.Gaps,
			PromptTokens: int64(v.PromptTokens), CompletionTokens: int64(v.Tokens), CachedTokens: int64(v.CachedTokens),
		}
		if v.Answered {
			res.Outcome, res.Status = OutcomeOK, 200
		} else {
			res.Outcome, res.Err = OutcomeError, v.Err
		}
	}
	return results, nil
}
