package router

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"gitea.mynodes.xyz/ilker/llmgw/internal/config"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/placement"
)

// TestSharingIsTheCatalogInService: what the router shares with the other
// gateways is the pools of the catalog it serves: the loads of its own
// calls, and the others' loads at its endpoints, which routing then
// reads; once a catalog without the pool is in service, the pool is
// neither told of nor believed about.
func TestSharingIsTheCatalogInService(t *testing.T) {
	g := newTestGatewayWith(t, Options{}, func(c *config.Config) {
		c.Pools[0].Endpoints = []catalog.Endpoint{{URL: "http://10.0.0.1:8000/v1"}, {URL: "http://10.0.0.2:8000/v1"}}
	})
	sh := g.r.Sharing()
	p := g.r.snap.Load().pools["main"]
	e0, e1 := g.endpointName("main", 0), g.endpointName("main", 1)
	call := p.Send(1, 200, false, false, time.Now())
	want := []placement.Load{{Pool: "main", Endpoint: e1, Inflight: 1, Pending: 1, Owed: 200}}
	if diff := cmp.Diff(want, sh.Loads(nil)); diff != "" {
		t.Errorf("loads (-want +got):\n%s", diff)
	}
	other := []placement.Load{{Pool: "main", Endpoint: e0, Inflight: 3}}
	if got := sh.PeerLoads(1, other); got != (placement.Refusals{}) {
		t.Errorf("refused %v of a load at an endpoint the router serves", got)
	}
	if got := p.Endpoints()[0].Peers(time.Now()).Inflight; got != 3 {
		t.Errorf("routing reads %d in flight of the other gateways', want 3", got)
	}

	cat, err := catalog.New([]catalog.Pool{{Name: "spare"}}, []catalog.Model{{Name: "m", Pool: "spare"}})
	if err != nil {
		t.Fatal(err)
	}
	g.r.SetCatalog(cat)
	if got := sh.Loads(nil); len(got) != 0 {
		t.Errorf("loads %v of a pool no longer served, want none", got)
	}
	var unknown placement.Refusals
	unknown.Add(placement.RefusedUnknown, 1)
	if got := sh.PeerLoads(2, other); got != unknown {
		t.Errorf("refused %v of a load at a pool no longer served, want %v", got, unknown)
	}
	call.Done(0)
}
