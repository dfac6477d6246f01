package placement

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// takeAll takes loads from a gateway into b at now, every record
// believed, and returns the sums it was given, by endpoint.
func takeAll(b *Book, from uint64, loads []Load, now time.Time) (map[string]Load, Refusals) {
	sums := make(map[string]Load)
	refused := b.Take(from, loads, now, func(Load) (Refusal, bool) { return 0, true }, func(s Load) { sums[s.Endpoint] = s })
	return sums, refused
}

// TestBookSumsTheGateways: the book sums what each gateway said last at
// each endpoint, replaces a gateway's word with its next, forgets one
// silent for longer than its silence, and gives each changed endpoint's
// sum, zero where nothing is left.
func TestBookSumsTheGateways(t *testing.T) {
	const silence = 250 * time.Millisecond
	b := NewBook(silence)
	t0 := time.Unix(1000, 0)
	takeAll(b, 1, []Load{{Pool: "p", Endpoint: "a", Inflight: 3, Pending: 1, Owed: 100}}, t0)
	sums, _ := takeAll(b, 2, []Load{{Pool: "p", Endpoint: "a", Inflight: 2, Critical: 1}, {Pool: "p", Endpoint: "b", Inflight: 1}}, t0)
	want := map[string]Load{
		"a": {Pool: "p", Endpoint: "a", Inflight: 5, Pending: 1, Owed: 100, Critical: 1},
		"b": {Pool: "p", Endpoint: "b", Inflight: 1},
	}
	if diff := cmp.Diff(want, sums); diff != "" {
		t.Errorf("sums after two gateways (-want +got):\n%s", diff)
	}
	// Gateway 2 now has nothing at b, and less at a.
	sums, _ = takeAll(b, 2, []Load{{Pool: "p", Endpoint: "a", Inflight: 1}}, t0.Add(silence))
	want = map[string]Load{
		"a": {Pool: "p", Endpoint: "a", Inflight: 4, Pending: 1, Owed: 100},
		"b": {Pool: "p", Endpoint: "b"},
	}
	if diff := cmp.Diff(want, sums); diff != "" {
		t.Errorf("sums after gateway 2 spoke again (-want +got):\n%s", diff)
	}
	// Gateway 1 has been silent past the silence; 3 says nothing.
	sums, _ = takeAll(b, 3, nil, t0.Add(silence+time.Millisecond))
	want = map[string]Load{"a": {Pool: "p", Endpoint: "a", Inflight: 1}}
	if diff := cmp.Diff(want, sums); diff != "" {
		t.Errorf("sums once gateway 1 fell silent (-want +got):\n%s", diff)
	}
	if g, e := b.Gateways(), b.Endpoints(); g != 2 || e != 1 {
		t.Errorf("book holds %d gateways and %d sums, want 2 and 1", g, e)
	}
}

// TestBookRefuses: a record check refuses, and a second for one endpoint,
// are refused alone; a message from one gateway past MaxPeers is refused
// whole.
func TestBookRefuses(t *testing.T) {
	b := NewBook(time.Second)
	now := time.Unix(1000, 0)
	check := func(l Load) (Refusal, bool) { return RefusedInflight, l.Inflight <= 10 }
	var sums []Load
	got := b.Take(1, []Load{
		{Pool: "p", Endpoint: "a", Inflight: 1},
		{Pool: "p", Endpoint: "a", Inflight: 2},
		{Pool: "p", Endpoint: "b", Inflight: 11},
	}, now, check, func(s Load) { sums = append(sums, s) })
	var want Refusals
	want.Add(RefusedDuplicate, 1)
	want.Add(RefusedInflight, 1)
	if got != want {
		t.Errorf("refused %v, want %v", got, want)
	}
	if diff := cmp.Diff([]Load{{Pool: "p", Endpoint: "a", Inflight: 1}}, sums); diff != "" {
		t.Errorf("sums (-want +got):\n%s", diff)
	}
	for id := uint64(2); id <= MaxPeers; id++ {
		takeAll(b, id, nil, now)
	}
	_, got = takeAll(b, MaxPeers+1, []Load{{Pool: "p", Endpoint: "a"}, {Pool: "p", Endpoint: "b"}}, now)
	want = Refusals{}
	want.Add(RefusedPeers, 2)
	if got != want {
		t.Errorf("one gateway past MaxPeers: refused %v, want %v", got, want)
	}
}
