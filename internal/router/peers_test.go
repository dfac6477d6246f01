package router

import (
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"gitea.mynodes.xyz/ilker/llmgw/internal/config"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/placement"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/pool"
)

// twoEndpoints is a gateway whose pool main has two endpoints that are
// never called.
func twoEndpoints(t *testing.T) *testGateway {
	t.Helper()
	return newTestGatewayWith(t, Options{}, func(c *config.Config) {
		c.Pools[0].Endpoints = []catalog.Endpoint{{URL: "http://10.0.0.1:8000/v1"}, {URL: "http://10.0.0.2:8000/v1"}}
	})
}

// peersAt is what gateway g holds of the other gateways' load at each
// endpoint of pool main, as the request path would read it at now.
func (g *testGateway) peersAt(now time.Time) []pool.Counts {
	var got []pool.Counts
	for _, e := range g.r.snap.Load().pools["main"].Endpoints() {
		got = append(got, e.Peers(now))
	}
	return got
}

// TestPeerLoadsSumTheOtherGateways: each gateway's message replaces what
// it said before, the endpoints get the sum over the gateways, a gateway
// silent past peerMaxAge is forgotten, and what names no endpoint of
// this gateway's is refused and kept nowhere.
func TestPeerLoadsSumTheOtherGateways(t *testing.T) {
	g := twoEndpoints(t)
	e0, e1 := g.endpointName("main", 0), g.endpointName("main", 1)
	t0 := time.Unix(1000, 0)
	steps := []struct {
		name  string
		from  uint64
		at    time.Time
		loads []placement.Load
		want  []pool.Counts
	}{{
		"one gateway", 1, t0,
		[]placement.Load{{Pool: "main", Endpoint: e0, Inflight: 3, Pending: 2, Owed: 500, Critical: 1}},
		[]pool.Counts{{Inflight: 3, Pending: 2, Owed: 500, Critical: 1}, {}},
	}, {
		"a second, and an endpoint and a pool this gateway lacks", 2, t0,
		[]placement.Load{
			{Pool: "main", Endpoint: e0, Inflight: 2, Pending: 2, Owed: 300},
			{Pool: "main", Endpoint: e1, Inflight: 1},
			{Pool: "main", Endpoint: "gpu-9", Inflight: 7},
			{Pool: "elsewhere", Endpoint: e0, Inflight: 7},
		},
		[]pool.Counts{{Inflight: 5, Pending: 4, Owed: 800, Critical: 1}, {Inflight: 1}},
	}, {
		"the first again, with nothing in flight", 1, t0.Add(10 * time.Millisecond),
		nil,
		[]pool.Counts{{Inflight: 2, Pending: 2, Owed: 300}, {Inflight: 1}},
	}, {
		"the second silent past peerMaxAge", 3, t0.Add(pool.PeerMaxAge + time.Millisecond),
		nil,
		[]pool.Counts{{}, {}},
	}}
	for _, s := range steps {
		g.peerLoads(s.from, s.loads, s.at)
		if diff := cmp.Diff(s.want, g.peersAt(s.at), cmp.AllowUnexported(pool.Counts{})); diff != "" {
			t.Errorf("%s: peers' load by endpoint (-want +got):\n%s", s.name, diff)
		}
	}
	if n := g.r.peers.Gateways(); n != 2 {
		t.Errorf("%d gateways remembered, want 2 (the silent one forgotten)", n)
	}
	if n := g.r.peers.Endpoints(); n != 0 {
		// The names this gateway lacks went with the gateway that sent them.
		t.Errorf("%d sums kept with nothing in flight, want none", n)
	}
}

// TestPeerLoadGoesStale: a load not heard again within peerMaxAge is
// unknown, not a standing count: the gateway that sent it, or the bus,
// has stopped.
func TestPeerLoadGoesStale(t *testing.T) {
	g := twoEndpoints(t)
	t0 := time.Unix(1000, 0)
	g.peerLoads(1, []placement.Load{{Pool: "main", Endpoint: g.endpointName("main", 0), Inflight: 4}}, t0)
	if got := g.peersAt(t0.Add(pool.PeerMaxAge))[0].Inflight; got != 4 {
		t.Errorf("at peerMaxAge: %d in flight, want 4", got)
	}
	if got := g.peersAt(t0.Add(pool.PeerMaxAge + time.Millisecond))[0].Inflight; got != 0 {
		t.Errorf("past peerMaxAge: %d in flight, want none known", got)
	}
}

// TestLoadsReportsWhatIsInFlight: a gateway tells the others of every
// endpoint where it has a request in flight, and of no other.
func TestLoadsReportsWhatIsInFlight(t *testing.T) {
	g := twoEndpoints(t)
	p := g.r.snap.Load().pools["main"]
	e := p.Endpoints()[1]
	p.Send(1, 200, false, false, time.Now()) // owed a prefill
	for _, critical := range []bool{true, false} {
		c := p.Send(1, 0, false, critical, time.Now())
		c.FirstToken(time.Now()) // decoding
	}
	want := []placement.Load{{Pool: "main", Endpoint: e.Name(), Inflight: 3, Pending: 1, Owed: 200, Critical: 1}}
	if diff := cmp.Diff(want, g.r.Loads(nil)); diff != "" {
		t.Errorf("loads (-want +got):\n%s", diff)
	}
}

// TestCheckLoad: a record is believed when one gateway could have sent it
// for an endpoint of this gateway's catalog, with requests of at most
// maxPrompt tokens (256 here: max_body_bytes 1,024); else it is refused,
// and why.
func TestCheckLoad(t *testing.T) {
	g := twoEndpoints(t)
	p := g.r.snap.Load().pools["main"]
	e0 := g.endpointName("main", 0)
	if got := maxPrompt(g.r.opts.Server.MaxBodyBytes); got != 256 {
		t.Fatalf("maxPrompt %d, want 256", got)
	}
	for _, tc := range []struct {
		name string
		pool *servedPool
		load placement.Load
		why  placement.Refusal // when refused
		ok   bool
	}{
		{"what a gateway sends", p, placement.Load{Endpoint: e0, Inflight: 3, Pending: 2, Owed: 512, Critical: 1}, 0, true},
		{"nothing pending", p, placement.Load{Endpoint: e0, Inflight: 3, Critical: 3}, 0, true},
		{"as many in flight as a gateway can hold", p, placement.Load{Endpoint: e0, Inflight: 65535, Pending: 65535, Owed: 65535 * 256}, 0, true},
		{"a pool this gateway lacks", nil, placement.Load{Endpoint: e0, Inflight: 1}, placement.RefusedUnknown, false},
		{"an endpoint this gateway lacks", p, placement.Load{Endpoint: "gpu-9", Inflight: 1}, placement.RefusedUnknown, false},
		{"one more in flight than a gateway can hold", p, placement.Load{Endpoint: e0, Inflight: 65536}, placement.RefusedInflight, false},
		{"2^31-1 of everything", p, placement.Load{Endpoint: e0, Inflight: math.MaxInt32, Pending: math.MaxInt32, Owed: math.MaxInt32, Critical: math.MaxInt32}, placement.RefusedInflight, false},
		{"more pending than in flight", p, placement.Load{Endpoint: e0, Inflight: 3, Pending: 4}, placement.RefusedCounts, false},
		{"pending and critical past in flight", p, placement.Load{Endpoint: e0, Inflight: 3, Pending: 1, Critical: 3}, placement.RefusedCounts, false},
		{"a count below zero", p, placement.Load{Endpoint: e0, Inflight: 3, Pending: -1}, placement.RefusedCounts, false},
		{"in flight below zero", p, placement.Load{Endpoint: e0, Inflight: -1}, placement.RefusedCounts, false},
		{"owed past the largest prompt", p, placement.Load{Endpoint: e0, Inflight: 1, Pending: 1, Owed: 257}, placement.RefusedOwed, false},
		{"owed with nothing pending", p, placement.Load{Endpoint: e0, Inflight: 1, Owed: 1}, placement.RefusedOwed, false},
		{"owed below zero", p, placement.Load{Endpoint: e0, Inflight: 1, Pending: 1, Owed: -1}, placement.RefusedOwed, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			why, ok := checkLoad(tc.pool, tc.load, 256)
			if ok != tc.ok || !ok && why != tc.why {
				t.Fatalf("ok %v (%s), want %v (%s)", ok, why, tc.ok, tc.why)
			}
		})
	}
}

// refusals is a Refusals with the given counts.
func refusals(counts map[placement.Refusal]int) placement.Refusals {
	var r placement.Refusals
	for why, n := range counts {
		r.Add(why, n)
	}
	return r
}

// TestPeerLoadsRefuseRecordsAlone: of a message, the records no gateway
// could send are refused and counted, and the rest stand; a second record
// for one endpoint is refused, not added.
func TestPeerLoadsRefuseRecordsAlone(t *testing.T) {
	g := twoEndpoints(t)
	e0, e1 := g.endpointName("main", 0), g.endpointName("main", 1)
	t0 := time.Unix(1000, 0)
	got := g.peerLoads(1, []placement.Load{
		{Pool: "main", Endpoint: e0, Inflight: 2, Pending: 1, Owed: 200},
		{Pool: "main", Endpoint: e0, Inflight: 9, Pending: 9, Owed: 9},
		{Pool: "main", Endpoint: e1, Inflight: math.MaxInt32, Pending: math.MaxInt32, Owed: math.MaxInt32},
		{Pool: "main", Endpoint: "gpu-9", Inflight: 1},
		{Pool: "main", Endpoint: "gpu-10", Inflight: 1, Pending: 1, Owed: 1 << 20},
	}, t0)
	want := refusals(map[placement.Refusal]int{placement.RefusedDuplicate: 1, placement.RefusedInflight: 1, placement.RefusedUnknown: 2})
	if got != want {
		t.Errorf("refused %v, want %v", got, want)
	}
	if diff := cmp.Diff([]pool.Counts{{Inflight: 2, Pending: 1, Owed: 200}, {}}, g.peersAt(t0), cmp.AllowUnexported(pool.Counts{})); diff != "" {
		t.Errorf("peers' load by endpoint (-want +got):\n%s", diff)
	}
	if n := g.r.peers.Endpoints(); n != 1 {
		t.Errorf("%d sums kept, want 1: a refused record is kept nowhere", n)
	}
}

// TestPeerLoadsKeepAtMostMaxPeers: the loads of placement.MaxPeers gateways are
// kept; a message from one more is refused whole while they speak, and
// taken once one has fallen silent.
func TestPeerLoadsKeepAtMostMaxPeers(t *testing.T) {
	g := twoEndpoints(t)
	e0 := g.endpointName("main", 0)
	one := []placement.Load{{Pool: "main", Endpoint: e0, Inflight: 1}}
	t0 := time.Unix(1000, 0)
	for id := range uint64(placement.MaxPeers) {
		if got := g.peerLoads(id+1, one, t0); got != (placement.Refusals{}) {
			t.Fatalf("gateway %d: refused %v", id+1, got)
		}
	}
	two := append(one, placement.Load{Pool: "main", Endpoint: e0, Inflight: 1})
	if got, want := g.peerLoads(placement.MaxPeers+1, two, t0), refusals(map[placement.Refusal]int{placement.RefusedPeers: 2}); got != want {
		t.Errorf("one gateway more: refused %v, want %v", got, want)
	}
	if got := g.peersAt(t0)[0].Inflight; got != placement.MaxPeers {
		t.Errorf("%d in flight believed, want %d", got, placement.MaxPeers)
	}
	// The first speaks again; the others fall silent.
	later := t0.Add(pool.PeerMaxAge)
	g.peerLoads(1, one, later)
	later = later.Add(time.Millisecond)
	if got := g.peerLoads(placement.MaxPeers+1, one, later); got != (placement.Refusals{}) {
		t.Errorf("once the others are silent: refused %v", got)
	}
	if got := g.peersAt(later)[0].Inflight; got != 2 {
		t.Errorf("%d in flight believed, want 2", got)
	}
	if n := g.r.peers.Gateways(); n != 2 {
		t.Errorf("%d gateways kept, want 2", n)
	}
}

// TestPeerSumCutToOneGateway: however many gateways speak, an endpoint
// is believed to have from them together no more than one gateway could
// have there. With admission on the pool's one model and two endpoints,
// a gateway has at most 2 calls × 4 × 2 endpoints = 16 requests pending,
// owing 16 × 256 tokens.
func TestPeerSumCutToOneGateway(t *testing.T) {
	g := newTestGatewayWith(t, Options{}, func(c *config.Config) {
		c.Pools[0].Endpoints = []catalog.Endpoint{{URL: "http://10.0.0.1:8000/v1"}, {URL: "http://10.0.0.2:8000/v1"}}
		c.Models[0].Admission = catalog.Admission{Enabled: true}
	})
	e0 := g.endpointName("main", 0)
	t0 := time.Unix(1000, 0)
	var refused placement.Refusals
	for id := range uint64(20) {
		r := g.peerLoads(id+1, []placement.Load{{Pool: "main", Endpoint: e0, Inflight: 3, Pending: 3, Owed: 3 * 256}}, t0)
		for why, n := range r {
			refused.Add(placement.Refusal(why), n)
		}
	}
	want := []pool.Counts{{Inflight: 60, Pending: 16, Owed: 16 * 256}, {}}
	if diff := cmp.Diff(want, g.peersAt(t0), cmp.AllowUnexported(pool.Counts{})); diff != "" {
		t.Errorf("peers' load by endpoint (-want +got):\n%s", diff)
	}
	// The sixth gateway's 18 pending are past 16: it and the fourteen
	// after it each leave the sum cut.
	if want := refusals(map[placement.Refusal]int{placement.RefusedSum: 15}); refused != want {
		t.Errorf("refused %v, want %v", refused, want)
	}
}

// TestSetPeerCaps: what one gateway can have pending at an endpoint of a
// pool: as many as in flight, unless every request that can reach the
// pool passes a gate, and then callsPerRequest × admitPendingPerEndpoint
// for each endpoint of the gates they pass. Pool main has two endpoints,
// spare one.
func TestSetPeerCaps(t *testing.T) {
	on := catalog.Admission{Enabled: true}
	for _, tc := range []struct {
		name        string
		models      []catalog.Model
		main, spare int64 // pending
	}{
		{"no admission", []catalog.Model{{Name: "m", Pool: "main"}}, 65535, 65535},
		{"admission", []catalog.Model{{Name: "m", Pool: "main", Admission: on}}, 16, 65535},
		{"a model without admission beside", []catalog.Model{{Name: "m", Pool: "main", Admission: on}, {Name: "n", Pool: "main"}}, 65535, 65535},
		{"a fallback with admission", []catalog.Model{
			{Name: "m", Pool: "main", Admission: on, Fallbacks: []string{"fb"}},
			{Name: "fb", Pool: "spare", Admission: on}}, 24, 24},
		{"a fallback without admission", []catalog.Model{
			{Name: "m", Pool: "main", Admission: on, Fallbacks: []string{"fb"}},
			{Name: "fb", Pool: "spare"}}, 65535, 65535},
		{"falling back to a pool that admits its own alone", []catalog.Model{
			{Name: "m", Pool: "main", Fallbacks: []string{"fb"}},
			{Name: "fb", Pool: "spare", Admission: on}}, 65535, 65535},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newTestGatewayWith(t, Options{}, func(c *config.Config) {
				c.Pools[0].Endpoints = []catalog.Endpoint{{URL: "http://10.0.0.1:8000/v1"}, {URL: "http://10.0.0.2:8000/v1"}}
				c.Pools[1].Endpoints = []catalog.Endpoint{{URL: "http://10.0.1.1:8000/v1"}}
				c.Models = tc.models
			})
			s := g.r.snap.Load()
			for name, pending := range map[string]int64{"main": tc.main, "spare": tc.spare} {
				want := pool.Counts{Inflight: 65535, Pending: pending, Owed: pending * 256, Critical: 65535}
				if got := s.pools[name].peerCap; got != want {
					t.Errorf("%s: %+v, want %+v", name, got, want)
				}
			}
		})
	}
}

// TestLoadsSaysNoMoreThanIsBelieved: what a gateway tells the others
// passes checkLoad: a prompt whose estimate is past maxPrompt (a
// translated body longer than the client's) owes maxPrompt, as far as
// the others hear.
func TestLoadsSaysNoMoreThanIsBelieved(t *testing.T) {
	g := twoEndpoints(t)
	p := g.r.snap.Load().pools["main"]
	e := p.Endpoints()[0]
	p.Send(0, 500, false, false, time.Now())
	p.Send(0, 500, false, false, time.Now())
	for range 1<<17 - 2 {
		c := p.Send(0, 0, false, false, time.Now())
		c.FirstToken(time.Now())
	}
	want := []placement.Load{{Pool: "main", Endpoint: e.Name(), Inflight: 65535, Pending: 2, Owed: 512}}
	got := g.r.Loads(nil)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("loads (-want +got):\n%s", diff)
	}
	for _, l := range got {
		if why, ok := checkLoad(p, l, maxPrompt(g.r.opts.Server.MaxBodyBytes)); !ok {
			t.Errorf("%+v is refused: %s", l, why)
		}
	}
}

// TestForgedLoadsLeaveRoutingAlone: counts no gateway could send, from
// however many made-up gateways, leave auto's pick where it was.
func TestForgedLoadsLeaveRoutingAlone(t *testing.T) {
	g := newTestGatewayWith(t, Options{}, func(c *config.Config) {
		c.Pools[0].Endpoints = []catalog.Endpoint{{URL: "http://10.0.0.1:8000/v1"}, {URL: "http://10.0.0.2:8000/v1"}}
		c.Pools[0].Policy = catalog.PolicyAuto
	})
	p := g.r.snap.Load().pools["main"]
	p.Send(1, 500, false, false, time.Now()) // endpoint 0 is the faster, by 50 ms
	now := time.Now()
	prompt := text(13, 32*pool.BlockBytes(pool.DefaultKVBlock))
	pick := func() (int, string) {
		var rt pool.Route
		rt.Prepare(p.Pool, prompt, 0, int64(len(prompt)/bytesPerToken), 0)
		rt.Stall = 1
		return p.Pick(&rt, 1<<len(p.Endpoints())-1, now)
	}
	wantI, wantReason := pick()
	forged := []placement.Load{{Pool: "main", Endpoint: p.Endpoints()[wantI].Name(),
		Inflight: math.MaxInt32, Pending: math.MaxInt32, Owed: math.MaxInt32, Critical: math.MaxInt32}}
	var refused placement.Refusals
	for id := range uint64(1000) {
		r := g.peerLoads(id+1, forged, now)
		for why, n := range r {
			refused.Add(placement.Refusal(why), n)
		}
	}
	if i, reason := pick(); i != wantI || reason != wantReason {
		t.Errorf("picked %d (%s) with forged loads, want %d (%s) as without", i, reason, wantI, wantReason)
	}
	if want := refusals(map[placement.Refusal]int{placement.RefusedInflight: placement.MaxPeers, placement.RefusedPeers: 1000 - placement.MaxPeers}); refused != want {
		t.Errorf("refused %v, want %v", refused, want)
	}
}

// TestPlacementsCarryAllTheIndexReads: a placement of every block the
// index reads of a prompt is one the bus takes.
func TestPlacementsCarryAllTheIndexReads(t *testing.T) {
	if pool.MaxPrefixBlocks > placement.MaxHashes {
		t.Errorf("the index reads %d blocks of a prompt, and the bus carries placements of %d", pool.MaxPrefixBlocks, placement.MaxHashes)
	}
}

// peerLoads is PeerLoads as of now.
func (g *testGateway) peerLoads(from uint64, loads []placement.Load, now time.Time) placement.Refusals {
	return peerLoads(g.r.peers, g.r.snap.Load(), maxPrompt(g.r.opts.Server.MaxBodyBytes), from, loads, now)
}
