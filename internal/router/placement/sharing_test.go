package placement

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/pool"
)

// maxBody is the testing gateways' server.max_body_bytes: requests of at
// most 256 prompt tokens.
const maxBody = 1 << 10

// testSharing is a gateway's sharing of pool main, two endpoints that are
// never called, and pool spare, one, as its catalog of models routes to
// them.
type testSharing struct {
	*Sharing
	main *pool.Pool
}

// newSharing shares the pools of a catalog of models (the one model m on
// main when none), main's policy policy (empty for auto).
func newSharing(t *testing.T, policy string, models ...catalog.Model) testSharing {
	t.Helper()
	if models == nil {
		models = []catalog.Model{{Name: "m", Pool: "main"}}
	}
	pools := []catalog.Pool{
		{Name: "main", Policy: policy, Endpoints: []catalog.Endpoint{{URL: "http://10.0.0.1:8000/v1"}, {URL: "http://10.0.0.2:8000/v1"}}},
		{Name: "spare", Endpoints: []catalog.Endpoint{{URL: "http://10.0.1.1:8000/v1"}}},
	}
	cat, err := catalog.New(pools, models)
	if err != nil {
		t.Fatal(err)
	}
	byName := make(map[string]*pool.Pool)
	for _, p := range pools {
		byName[p.Name] = pool.New(p, nil, nil)
	}
	ps := NewPools(cat, byName, maxBody)
	return testSharing{Sharing: NewSharing(func() *Pools { return ps }), main: byName["main"]}
}

// endpointName is the name of endpoint k of pool main.
func (s testSharing) endpointName(k int) string { return s.main.Endpoints()[k].Name() }

// peersAt is what the gateway holds of the other gateways' load at each
// endpoint of pool main, as the request path would read it at now.
func (s testSharing) peersAt(now time.Time) []pool.Counts {
	var got []pool.Counts
	for _, e := range s.main.Endpoints() {
		got = append(got, e.Peers(now))
	}
	return got
}

// TestPeerLoadsSumTheOtherGateways: each gateway's message replaces what
// it said before, the endpoints get the sum over the gateways, a gateway
// silent past peerMaxAge is forgotten, and what names no endpoint of
// this gateway's is refused and kept nowhere.
func TestPeerLoadsSumTheOtherGateways(t *testing.T) {
	g := newSharing(t, "")
	e0, e1 := g.endpointName(0), g.endpointName(1)
	t0 := time.Unix(1000, 0)
	steps := []struct {
		name  string
		from  uint64
		at    time.Time
		loads []Load
		want  []pool.Counts
	}{{
		"one gateway", 1, t0,
		[]Load{{Pool: "main", Endpoint: e0, Inflight: 3, Pending: 2, Owed: 500, Critical: 1}},
		[]pool.Counts{{Inflight: 3, Pending: 2, Owed: 500, Critical: 1}, {}},
	}, {
		"a second, and an endpoint and a pool this gateway lacks", 2, t0,
		[]Load{
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
		g.take(s.from, s.loads, s.at)
		if diff := cmp.Diff(s.want, g.peersAt(s.at), cmp.AllowUnexported(pool.Counts{})); diff != "" {
			t.Errorf("%s: peers' load by endpoint (-want +got):\n%s", s.name, diff)
		}
	}
	if n := g.book.Gateways(); n != 2 {
		t.Errorf("%d gateways remembered, want 2 (the silent one forgotten)", n)
	}
	if n := g.book.Endpoints(); n != 0 {
		// The names this gateway lacks went with the gateway that sent them.
		t.Errorf("%d sums kept with nothing in flight, want none", n)
	}
}

// TestPeerLoadGoesStale: a load not heard again within peerMaxAge is
// unknown, not a standing count: the gateway that sent it, or the bus,
// has stopped.
func TestPeerLoadGoesStale(t *testing.T) {
	g := newSharing(t, "")
	t0 := time.Unix(1000, 0)
	g.take(1, []Load{{Pool: "main", Endpoint: g.endpointName(0), Inflight: 4}}, t0)
	if got := g.peersAt(t0.Add(pool.PeerMaxAge))[0].Inflight; got != 4 {
		t.Errorf("at peerMaxAge: %d in flight, want 4", got)
	}
	if got := g.peersAt(t0.Add(pool.PeerMaxAge + time.Millisecond))[0].Inflight; got != 0 {
		t.Errorf("past peerMaxAge: %d in flight, want none known", got)
	}
}

// TestNothingSharedBeforeACatalog: before the first catalog a gateway
// says nothing, believes nothing and places nothing.
func TestNothingSharedBeforeACatalog(t *testing.T) {
	s := NewSharing(func() *Pools { return nil })
	if got := s.Loads(nil); len(got) != 0 {
		t.Errorf("loads %v, want none", got)
	}
	loads := []Load{{Pool: "main", Endpoint: "e", Inflight: 1}}
	if got, want := s.PeerLoads(1, loads), refusals(map[Refusal]int{RefusedUnknown: 1}); got != want {
		t.Errorf("refused %v, want %v", got, want)
	}
	if s.Place(Placement{Pool: "main", Endpoint: "e", Block: 64, Hashes: []uint64{1}}) {
		t.Error("placed")
	}
}

// TestLoadsReportsWhatIsInFlight: a gateway tells the others of every
// endpoint where it has a request in flight, and of no other.
func TestLoadsReportsWhatIsInFlight(t *testing.T) {
	g := newSharing(t, "")
	p := g.main
	e := p.Endpoints()[1]
	p.Send(1, 200, false, false, time.Now()) // owed a prefill
	for _, critical := range []bool{true, false} {
		c := p.Send(1, 0, false, critical, time.Now())
		c.FirstToken(time.Now()) // decoding
	}
	want := []Load{{Pool: "main", Endpoint: e.Name(), Inflight: 3, Pending: 1, Owed: 200, Critical: 1}}
	if diff := cmp.Diff(want, g.Loads(nil)); diff != "" {
		t.Errorf("loads (-want +got):\n%s", diff)
	}
}

// TestCheckLoad: a record is believed when one gateway could have sent it
// for an endpoint of this gateway's catalog, with requests of at most
// maxPrompt tokens (256 here: max_body_bytes 1,024); else it is refused,
// and why.
func TestCheckLoad(t *testing.T) {
	g := newSharing(t, "")
	ps := g.pools()
	e0 := g.endpointName(0)
	if got := maxPrompt(maxBody); got != 256 {
		t.Fatalf("maxPrompt %d, want 256", got)
	}
	for _, tc := range []struct {
		name string
		load Load
		why  Refusal // when refused
		ok   bool
	}{
		{"what a gateway sends", Load{Pool: "main", Endpoint: e0, Inflight: 3, Pending: 2, Owed: 512, Critical: 1}, 0, true},
		{"nothing pending", Load{Pool: "main", Endpoint: e0, Inflight: 3, Critical: 3}, 0, true},
		{"as many in flight as a gateway can hold", Load{Pool: "main", Endpoint: e0, Inflight: 65535, Pending: 65535, Owed: 65535 * 256}, 0, true},
		{"a pool this gateway lacks", Load{Pool: "other", Endpoint: e0, Inflight: 1}, RefusedUnknown, false},
		{"an endpoint this gateway lacks", Load{Pool: "main", Endpoint: "gpu-9", Inflight: 1}, RefusedUnknown, false},
		{"one more in flight than a gateway can hold", Load{Pool: "main", Endpoint: e0, Inflight: 65536}, RefusedInflight, false},
		{"2^31-1 of everything", Load{Pool: "main", Endpoint: e0, Inflight: math.MaxInt32, Pending: math.MaxInt32, Owed: math.MaxInt32, Critical: math.MaxInt32}, RefusedInflight, false},
		{"more pending than in flight", Load{Pool: "main", Endpoint: e0, Inflight: 3, Pending: 4}, RefusedCounts, false},
		{"pending and critical past in flight", Load{Pool: "main", Endpoint: e0, Inflight: 3, Pending: 1, Critical: 3}, RefusedCounts, false},
		{"a count below zero", Load{Pool: "main", Endpoint: e0, Inflight: 3, Pending: -1}, RefusedCounts, false},
		{"in flight below zero", Load{Pool: "main", Endpoint: e0, Inflight: -1}, RefusedCounts, false},
		{"owed past the largest prompt", Load{Pool: "main", Endpoint: e0, Inflight: 1, Pending: 1, Owed: 257}, RefusedOwed, false},
		{"owed with nothing pending", Load{Pool: "main", Endpoint: e0, Inflight: 1, Owed: 1}, RefusedOwed, false},
		{"owed below zero", Load{Pool: "main", Endpoint: e0, Inflight: 1, Pending: 1, Owed: -1}, RefusedOwed, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			why, ok := ps.check(tc.load)
			if ok != tc.ok || !ok && why != tc.why {
				t.Fatalf("ok %v (%s), want %v (%s)", ok, why, tc.ok, tc.why)
			}
		})
	}
}

// refusals is a Refusals with the given counts.
func refusals(counts map[Refusal]int) Refusals {
	var r Refusals
	for why, n := range counts {
		r.Add(why, n)
	}
	return r
}

// TestPeerLoadsRefuseRecordsAlone: of a message, the records no gateway
// could send are refused and counted, and the rest stand; a second record
// for one endpoint is refused, not added.
func TestPeerLoadsRefuseRecordsAlone(t *testing.T) {
	g := newSharing(t, "")
	e0, e1 := g.endpointName(0), g.endpointName(1)
	t0 := time.Unix(1000, 0)
	got := g.take(1, []Load{
		{Pool: "main", Endpoint: e0, Inflight: 2, Pending: 1, Owed: 200},
		{Pool: "main", Endpoint: e0, Inflight: 9, Pending: 9, Owed: 9},
		{Pool: "main", Endpoint: e1, Inflight: math.MaxInt32, Pending: math.MaxInt32, Owed: math.MaxInt32},
		{Pool: "main", Endpoint: "gpu-9", Inflight: 1},
		{Pool: "main", Endpoint: "gpu-10", Inflight: 1, Pending: 1, Owed: 1 << 20},
	}, t0)
	want := refusals(map[Refusal]int{RefusedDuplicate: 1, RefusedInflight: 1, RefusedUnknown: 2})
	if got != want {
		t.Errorf("refused %v, want %v", got, want)
	}
	if diff := cmp.Diff([]pool.Counts{{Inflight: 2, Pending: 1, Owed: 200}, {}}, g.peersAt(t0), cmp.AllowUnexported(pool.Counts{})); diff != "" {
		t.Errorf("peers' load by endpoint (-want +got):\n%s", diff)
	}
	if n := g.book.Endpoints(); n != 1 {
		t.Errorf("%d sums kept, want 1: a refused record is kept nowhere", n)
	}
}

// TestPeerLoadsKeepAtMostMaxPeers: the loads of MaxPeers gateways are
// kept; a message from one more is refused whole while they speak, and
// taken once one has fallen silent.
func TestPeerLoadsKeepAtMostMaxPeers(t *testing.T) {
	g := newSharing(t, "")
	e0 := g.endpointName(0)
	one := []Load{{Pool: "main", Endpoint: e0, Inflight: 1}}
	t0 := time.Unix(1000, 0)
	for id := range uint64(MaxPeers) {
		if got := g.take(id+1, one, t0); got != (Refusals{}) {
			t.Fatalf("gateway %d: refused %v", id+1, got)
		}
	}
	two := append(one, Load{Pool: "main", Endpoint: e0, Inflight: 1})
	if got, want := g.take(MaxPeers+1, two, t0), refusals(map[Refusal]int{RefusedPeers: 2}); got != want {
		t.Errorf("one gateway more: refused %v, want %v", got, want)
	}
	if got := g.peersAt(t0)[0].Inflight; got != MaxPeers {
		t.Errorf("%d in flight believed, want %d", got, MaxPeers)
	}
	// The first speaks again; the others fall silent.
	later := t0.Add(pool.PeerMaxAge)
	g.take(1, one, later)
	later = later.Add(time.Millisecond)
	if got := g.take(MaxPeers+1, one, later); got != (Refusals{}) {
		t.Errorf("once the others are silent: refused %v", got)
	}
	if got := g.peersAt(later)[0].Inflight; got != 2 {
		t.Errorf("%d in flight believed, want 2", got)
	}
	if n := g.book.Gateways(); n != 2 {
		t.Errorf("%d gateways kept, want 2", n)
	}
}

// TestPeerSumCutToOneGateway: however many gateways speak, an endpoint
// is believed to have from them together no more than one gateway could
// have there. With admission on the pool's one model and two endpoints,
// a gateway has at most 2 calls × 4 × 2 endpoints = 16 requests pending,
// owing 16 × 256 tokens.
func TestPeerSumCutToOneGateway(t *testing.T) {
	g := newSharing(t, "", catalog.Model{Name: "m", Pool: "main", Admission: catalog.Admission{Enabled: true}})
	e0 := g.endpointName(0)
	t0 := time.Unix(1000, 0)
	var refused Refusals
	for id := range uint64(20) {
		r := g.take(id+1, []Load{{Pool: "main", Endpoint: e0, Inflight: 3, Pending: 3, Owed: 3 * 256}}, t0)
		for why, n := range r {
			refused.Add(Refusal(why), n)
		}
	}
	want := []pool.Counts{{Inflight: 60, Pending: 16, Owed: 16 * 256}, {}}
	if diff := cmp.Diff(want, g.peersAt(t0), cmp.AllowUnexported(pool.Counts{})); diff != "" {
		t.Errorf("peers' load by endpoint (-want +got):\n%s", diff)
	}
	// The sixth gateway's 18 pending are past 16: it and the fourteen
	// after it each leave the sum cut.
	if want := refusals(map[Refusal]int{RefusedSum: 15}); refused != want {
		t.Errorf("refused %v, want %v", refused, want)
	}
}

// TestPeerCaps: what one gateway can have pending at an endpoint of a
// pool: as many as in flight, unless every request that can reach the
// pool passes a gate, and then callsPerRequest × PendingPerEndpoint for
// each endpoint of the gates they pass. Pool main has two endpoints,
// spare one.
func TestPeerCaps(t *testing.T) {
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
			ps := newSharing(t, "", tc.models...).pools()
			for name, pending := range map[string]int64{"main": tc.main, "spare": tc.spare} {
				want := pool.Counts{Inflight: 65535, Pending: pending, Owed: pending * 256, Critical: 65535}
				if got := ps.byName[name].cap; got != want {
					t.Errorf("%s: %+v, want %+v", name, got, want)
				}
			}
		})
	}
}

// TestLoadsSaysNoMoreThanIsBelieved: what a gateway tells the others
// passes check: a prompt whose estimate is past maxPrompt (a translated
// body longer than the client's) owes maxPrompt, as far as the others
// hear.
func TestLoadsSaysNoMoreThanIsBelieved(t *testing.T) {
	g := newSharing(t, "")
	p := g.main
	e := p.Endpoints()[0]
	p.Send(0, 500, false, false, time.Now())
	p.Send(0, 500, false, false, time.Now())
	for range 1<<17 - 2 {
		c := p.Send(0, 0, false, false, time.Now())
		c.FirstToken(time.Now())
	}
	want := []Load{{Pool: "main", Endpoint: e.Name(), Inflight: 65535, Pending: 2, Owed: 512}}
	got := g.Loads(nil)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("loads (-want +got):\n%s", diff)
	}
	for _, l := range got {
		if why, ok := g.pools().check(l); !ok {
			t.Errorf("%+v is refused: %s", l, why)
		}
	}
}

// TestForgedLoadsLeaveRoutingAlone: counts no gateway could send, from
// however many made-up gateways, leave auto's pick where it was.
func TestForgedLoadsLeaveRoutingAlone(t *testing.T) {
	g := newSharing(t, catalog.PolicyAuto)
	p := g.main
	p.Send(1, 500, false, false, time.Now()) // endpoint 0 is the faster, by 50 ms
	now := time.Now()
	prompt := text(13, 32*pool.BlockBytes(pool.DefaultKVBlock))
	pick := func() (int, string) {
		var rt pool.Route
		rt.Prepare(p, prompt, 0, int64(len(prompt)/pool.BytesPerToken), 0)
		rt.Stall = 1
		return p.Pick(&rt, 1<<len(p.Endpoints())-1, now)
	}
	wantI, wantReason := pick()
	forged := []Load{{Pool: "main", Endpoint: p.Endpoints()[wantI].Name(),
		Inflight: math.MaxInt32, Pending: math.MaxInt32, Owed: math.MaxInt32, Critical: math.MaxInt32}}
	var refused Refusals
	for id := range uint64(1000) {
		r := g.take(id+1, forged, now)
		for why, n := range r {
			refused.Add(Refusal(why), n)
		}
	}
	if i, reason := pick(); i != wantI || reason != wantReason {
		t.Errorf("picked %d (%s) with forged loads, want %d (%s) as without", i, reason, wantI, wantReason)
	}
	if want := refusals(map[Refusal]int{RefusedInflight: MaxPeers, RefusedPeers: 1000 - MaxPeers}); refused != want {
		t.Errorf("refused %v, want %v", refused, want)
	}
}

// TestPlacementsCarryAllTheIndexReads: a placement of every block the
// index reads of a prompt is one the bus takes.
func TestPlacementsCarryAllTheIndexReads(t *testing.T) {
	if pool.MaxPrefixBlocks > MaxHashes {
		t.Errorf("the index reads %d blocks of a prompt, and the bus carries placements of %d", pool.MaxPrefixBlocks, MaxHashes)
	}
}

// text is n bytes of lowercase letters from seed.
func text(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x5eed))
	b := make([]byte, n)
	for i := range b {
		b[i] = 'a' + byte(r.IntN(26))
	}
	return b
}
