package app

// The web console on the admin listener: the console's view of the
// gateway, as values from the router's status, the catalog in service
// and the last reload.

import (
	"time"

	"gitea.mynodes.xyz/ilker/llmgw/internal/console"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/tenant"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/status"
)

// newConsole is the console over g's store, router and reloads.
func (g *Gateway) newConsole() (*console.Console, error) {
	opts := console.Options{Guard: g.guard, Keyring: g.keyring, Logger: g.log}
	if g.oidc != nil {
		opts.OIDC = g.oidc
	}
	return console.New(g.store, consoleView{g}, opts)
}

// noteReload keeps the outcome of loading the configuration at at, and
// the changed fields left for a restart, for the console's Config page.
func (g *Gateway) noteReload(at time.Time, err error, restart []string) {
	r := &console.Reload{At: at, File: g.configPath, NeedRestart: restart}
	if err != nil {
		r.Err = err.Error()
	}
	g.lastReload.Store(r)
}

// consoleView is the console's Gateway.
type consoleView struct{ g *Gateway }

var _ console.Gateway = consoleView{}

func (v consoleView) Catalog() *catalog.Catalog { return v.g.router.Catalog() }

// ConfigTenants is the keyring's, which each reload sets; none without
// keys, where no tenant limit is enforced.
func (v consoleView) ConfigTenants() []tenant.TenantLimits {
	if v.g.keyring == nil {
		return nil
	}
	return v.g.keyring.ConfigTenants()
}

func (v consoleView) LastReload() console.Reload {
	if r := v.g.lastReload.Load(); r != nil {
		return *r
	}
	return console.Reload{File: v.g.configPath}
}

func (v consoleView) Status(now time.Time) console.Status {
	return consoleStatus(v.g.router.Status(now))
}

// consoleStatus is the router's status as the console takes it.
func consoleStatus(rs status.Status) console.Status {
	var st console.Status
	for _, m := range rs.Models {
		st.Models = append(st.Models, console.ModelStatus{
			Name: m.Name, Pool: m.Pool, RequestsPerSecond: m.RequestsPerSecond, ErrorRate: m.ErrorRate,
			TTFTp99: m.TTFTp99, TPOTp99: m.TPOTp99, SLOTTFT: m.SLO.TTFTp99, SLOTPOT: m.SLO.TPOTp99, Samples: m.Samples,
			Admission: m.Admission, Queued: m.Queued, Goodput: m.Goodput,
		})
	}
	for _, p := range rs.Pools {
		ps := console.PoolStatus{Name: p.Name, Kind: p.Kind, Policy: p.Policy}
		for _, e := range p.Endpoints {
			ps.Endpoints = append(ps.Endpoints, console.EndpointStatus{
				Name: e.Name, Down: e.Down, EjectedFor: e.EjectedFor, Ejections: e.Ejections,
				Inflight: e.Own.Inflight, Pending: e.Own.Pending, Peers: e.Peers.Inflight,
				Waiting: e.Waiting, KVUsage: e.KVUsage, Models: e.Models, ListsModels: e.Models != nil, PrefixHits: e.PrefixHits,
				ColdStart: e.ColdStart, ColdStartLearned: e.ColdStartLearned,
				PredictedTTFT: e.PredictedTTFT, MeasuredTTFT: e.MeasuredTTFT, BatchLimit: e.BatchLimit,
				PerKiloToken: secs(1000 * e.Cost.PerToken), PerKiloAhead: secs(1000 * e.Cost.PerAhead), PerQueued: secs(e.Cost.PerWaiting),
				Step: secs(e.Decode.Step), PerStream: secs(e.Decode.PerStream), StepPerKiloToken: secs(1000 * e.Decode.PerPrefillToken),
			})
		}
		for _, m := range rs.Models {
			if m.Pool == p.Name && m.ListsLoaded {
				ps.Loaded = append(ps.Loaded, console.ModelLoaded{Model: m.Name, On: m.LoadedOn})
			}
		}
		st.Pools = append(st.Pools, ps)
	}
	return st
}

// secs is s seconds as a duration.
func secs(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
