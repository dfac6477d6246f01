package pool

import (
	"math"
	"testing"
	"time"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
)

// TestPredictTTFTCountsPeers: the prefill the other gateways owe an
// endpoint is ahead of a request, and their pending requests are not
// counted again from the scrape's queue.
func TestPredictTTFTCountsPeers(t *testing.T) {
	e := newEndpoint("a", "http://a/v1", nil)
	e.owed.Store(1000)
	e.pending.Store(2)
	peers := Counts{Inflight: 4, Pending: 1, Owed: 600}
	for _, tc := range []struct {
		name string
		l    *Load
		want float64
	}{
		{"no scrape", nil, priorBase + priorPerToken*(1000+600+500)},
		{"the scrape's queue is the gateways'", &Load{Waiting: 3}, priorBase + priorPerToken*(1000+600+500)},
		{"two more from elsewhere", &Load{Waiting: 5}, priorBase + priorPerToken*(1000+600+500+2*800)},
	} {
		if got := e.predictTTFT(e.costAt(time.Now()), 500, tc.l, peers, 800); math.Abs(got-tc.want) > 1e-12 {
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
	stale := now.Add(-2 * PeerMaxAge).UnixNano()
	for _, tc := range []struct {
		name   string
		peers  *peerLoad // at endpoint 0
		stall  float64
		spare  float64
		want   int
		reason string
	}{
		{"no peer streams", nil, 1, 0, 0, reasonFastest},
		{"8 of a peer's streams", &peerLoad{Counts{Inflight: 8}, now.UnixNano()}, 1, 0, 1, reasonStreams},
		{"8 of a peer's requests owed a prefill", &peerLoad{Counts{Inflight: 8, Pending: 8, Owed: 80}, now.UnixNano()}, 1, 0, 1, reasonStreams},
		{"a peer's streams heard too long ago", &peerLoad{Counts{Inflight: 8}, stale}, 1, 0, 0, reasonFastest},
		{"no peer critical stream", nil, 0, criticalTPOT, 0, reasonFastest},
		{"a peer's critical stream", &peerLoad{Counts{Inflight: 1, Critical: 1}, now.UnixNano()}, 0, criticalTPOT, 1, reasonSpare},
		{"a peer's other stream", &peerLoad{Counts{Inflight: 1}, now.UnixNano()}, 0, criticalTPOT, 0, reasonFastest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// As TestAutoChargesTheStall and TestAutoSparesCriticalStreams:
			// endpoint 1 owes 500 tokens, 50 ms more, and has no stream.
			p := testPool(catalog.PolicyAuto, 1, 1)
			p.Endpoints()[0].peers.Store(tc.peers)
			p.Endpoints()[1].owed.Store(500)
			p.Endpoints()[1].pending.Store(1)
			p.Endpoints()[1].inflight.Store(1)
			rt := routeFor(p, promptText(13, 32), 0) // 2,048 tokens, cached nowhere
			rt.Stall, rt.Spare = tc.stall, tc.spare
			if i, reason := p.Pick(rt, all(p), now); i != tc.want || reason != tc.reason {
				t.Errorf("picked %d (%s), want %d (%s)", i, reason, tc.want, tc.reason)
			}
		})
	}
}
