package router

import (
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"gitea.mynodes.xyz/ilker/llmgw/internal/config"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/placement"
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
func (g *testGateway) peersAt(now time.Time) []loadCounts {
	var got []loadCounts
	for _, e := range g.r.snap.Load().pools["main"].endpoints {
		got = append(got, e.freshPeers(now))
	}
	return got
}

// TestPeerLoadsSumTheOtherGateways: each gateway's message replaces what
// it said before, the endpoints get the sum over the gateways, a gateway
// silent past peerMaxAge is forgotten, and what names no endpoint of
// this gateway's is passed over.
func TestPeerLoadsSumTheOtherGateways(t *testing.T) {
	g := twoEndpoints(t)
	e0, e1 := g.endpointName("main", 0), g.endpointName("main", 1)
	t0 := time.Unix(1000, 0)
	steps := []struct {
		name  string
		from  uint64
		at    time.Time
		loads []placement.Load
		want  []loadCounts
	}{{
		"one gateway", 1, t0,
		[]placement.Load{{Pool: "main", Endpoint: e0, Inflight: 3, Pending: 1, Owed: 500, Critical: 1}},
		[]loadCounts{{inflight: 3, pending: 1, owed: 500, critical: 1}, {}},
	}, {
		"a second, and an endpoint and a pool this gateway lacks", 2, t0,
		[]placement.Load{
			{Pool: "main", Endpoint: e0, Inflight: 2, Pending: 2, Owed: 300},
			{Pool: "main", Endpoint: e1, Inflight: 1},
			{Pool: "main", Endpoint: "gpu-9", Inflight: 7},
			{Pool: "elsewhere", Endpoint: e0, Inflight: 7},
		},
		[]loadCounts{{inflight: 5, pending: 3, owed: 800, critical: 1}, {inflight: 1}},
	}, {
		"the first again, with nothing in flight", 1, t0.Add(10 * time.Millisecond),
		nil,
		[]loadCounts{{inflight: 2, pending: 2, owed: 300}, {inflight: 1}},
	}, {
		"the second silent past peerMaxAge", 3, t0.Add(peerMaxAge + time.Millisecond),
		nil,
		[]loadCounts{{}, {}},
	}}
	for _, s := range steps {
		g.r.peerLoads(s.from, s.loads, s.at)
		if diff := cmp.Diff(s.want, g.peersAt(s.at), cmp.AllowUnexported(loadCounts{})); diff != "" {
			t.Errorf("%s: peers' load by endpoint (-want +got):\n%s", s.name, diff)
		}
	}
	if n := len(g.r.peers.from); n != 2 {
		t.Errorf("%d gateways remembered, want 2 (the silent one forgotten)", n)
	}
	if n := len(g.r.peers.sum); n != 0 {
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
	g.r.peerLoads(1, []placement.Load{{Pool: "main", Endpoint: g.endpointName("main", 0), Inflight: 4}}, t0)
	if got := g.peersAt(t0.Add(peerMaxAge))[0].inflight; got != 4 {
		t.Errorf("at peerMaxAge: %d in flight, want 4", got)
	}
	if got := g.peersAt(t0.Add(peerMaxAge + time.Millisecond))[0].inflight; got != 0 {
		t.Errorf("past peerMaxAge: %d in flight, want none known", got)
	}
}

// TestLoadsReportsWhatIsInFlight: a gateway tells the others of every
// endpoint where it has a request in flight, and of no other.
func TestLoadsReportsWhatIsInFlight(t *testing.T) {
	g := twoEndpoints(t)
	e := g.r.snap.Load().pools["main"].endpoints[1]
	e.inflight.Store(3)
	e.pending.Store(1)
	e.owed.Store(200)
	e.critical.Store(1)
	want := []placement.Load{{Pool: "main", Endpoint: e.name, Inflight: 3, Pending: 1, Owed: 200, Critical: 1}}
	if diff := cmp.Diff(want, g.r.Loads(nil)); diff != "" {
		t.Errorf("loads (-want +got):\n%s", diff)
	}
}

// TestPredictTTFTCountsPeers: the prefill the other gateways owe an
// endpoint is ahead of a request, and their pending requests are not
// counted again from the scrape's queue.
func TestPredictTTFTCountsPeers(t *testing.T) {
	e := newEndpoint("a", "http://a/v1")
	e.owed.Store(1000)
	e.pending.Store(2)
	peers := loadCounts{inflight: 4, pending: 1, owed: 600}
	for _, tc := range []struct {
		name string
		l    *endpointLoad
		want float64
	}{
		{"no scrape", nil, priorBase + priorPerToken*(1000+600+500)},
		{"the scrape's queue is the gateways'", &endpointLoad{waiting: 3}, priorBase + priorPerToken*(1000+600+500)},
		{"two more from elsewhere", &endpointLoad{waiting: 5}, priorBase + priorPerToken*(1000+600+500+2*800)},
	} {
		if got := e.predictTTFT(500, tc.l, peers, 800); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestAutoReadsThePeers: requests another gateway sent to an endpoint wait
// out a prefill there as this gateway's own do, and a long prefill below
// critical keeps off an endpoint where another gateway's critical streams
// decode; a load heard too long ago counts for nothing.
func TestAutoReadsThePeers(t *testing.T) {
	const criticalTPOT = 0.05
	now := time.Now()
	stale := now.Add(-2 * peerMaxAge).UnixNano()
	for _, tc := range []struct {
		name   string
		peers  *peerLoad // at endpoint 0
		stall  float64
		spare  float64
		want   int
		reason string
	}{
		{"no peer streams", nil, 1, 0, 0, reasonFastest},
		{"8 of a peer's streams", &peerLoad{loadCounts{inflight: 8}, now.UnixNano()}, 1, 0, 1, reasonStreams},
		{"8 of a peer's requests owed a prefill", &peerLoad{loadCounts{inflight: 8, pending: 8, owed: 80}, now.UnixNano()}, 1, 0, 1, reasonStreams},
		{"a peer's streams heard too long ago", &peerLoad{loadCounts{inflight: 8}, stale}, 1, 0, 0, reasonFastest},
		{"no peer critical stream", nil, 0, criticalTPOT, 0, reasonFastest},
		{"a peer's critical stream", &peerLoad{loadCounts{inflight: 1, critical: 1}, now.UnixNano()}, 0, criticalTPOT, 1, reasonSpare},
		{"a peer's other stream", &peerLoad{loadCounts{inflight: 1}, now.UnixNano()}, 0, criticalTPOT, 0, reasonFastest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// As TestAutoChargesTheStall and TestAutoSparesCriticalStreams:
			// endpoint 1 owes 500 tokens, 50 ms more, and has no stream.
			p := testPool(catalog.PolicyAuto, 1, 1)
			p.endpoints[0].peers.Store(tc.peers)
			p.endpoints[1].owed.Store(500)
			p.endpoints[1].pending.Store(1)
			p.endpoints[1].inflight.Store(1)
			rt := routeFor(p, promptText(13, 32), 0) // 2,048 tokens, cached nowhere
			rt.stall, rt.spare = tc.stall, tc.spare
			if i, reason := p.pick(rt, all(p), now); i != tc.want || reason != tc.reason {
				t.Errorf("picked %d (%s), want %d (%s)", i, reason, tc.want, tc.reason)
			}
		})
	}
}
