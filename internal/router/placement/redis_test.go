package placement

import (
	"context"
	"fmt"
	"math"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"
)

// newRedisClient is a client of the test Redis, or the test is skipped.
func newRedisClient(t *testing.T) *redis.Client {
	t.Helper()
	u := os.Getenv("LLMGW_TEST_REDIS")
	if u == "" {
		t.Skip("LLMGW_TEST_REDIS is not set (e.g. redis://127.0.0.1:6379/0); skipping Redis tests")
	}
	o, err := redis.ParseURL(u)
	if err != nil {
		t.Fatalf("LLMGW_TEST_REDIS: %v", err)
	}
	c := redis.NewClient(o)
	t.Cleanup(func() { c.Close() })
	return c
}

// applied is a gateway to a bus: it keeps the placements and peer loads
// the bus gave it, and has the load own.
type applied struct {
	mu    sync.Mutex
	got   []Placement
	known string // the pool it has; placements for others are ignored
	own   []Load
	peers [][]Load // each PeerLoads call's, in order
	from  uint64   // the last PeerLoads call's sender
}

func (a *applied) Place(p Placement) bool { return a.apply(p) }

func (a *applied) Loads(buf []Load) []Load {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append(buf, a.own...)
}

// PeerLoads keeps loads, and refuses as unknown those at endpoints named
// "forged".
func (a *applied) PeerLoads(from uint64, loads []Load) Refusals {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.peers, a.from = append(a.peers, slices.Clone(loads)), from
	var refused Refusals
	for _, l := range loads {
		if l.Endpoint == "forged" {
			refused.Add(RefusedUnknown, 1)
		}
	}
	return refused
}

func (a *applied) setOwn(loads ...Load) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.own = loads
}

// heard is every load message the gateway was given, and the last one's
// sender.
func (a *applied) heard() ([][]Load, uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.peers), a.from
}

func (a *applied) apply(p Placement) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if p.Pool != a.known {
		return false
	}
	p.Hashes = slices.Clone(p.Hashes)
	a.got = append(a.got, p)
	return true
}

func (a *applied) placements() []Placement {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.got)
}

// TestRedisSharesPlacements: two gateways' buses on one channel each
// apply what the other publishes, and never what they publish
// themselves; a placement for a pool a gateway lacks is counted ignored.
func TestRedisSharesPlacements(t *testing.T) {
	channel := fmt.Sprintf("llmgw-test-placements-%d-%d", os.Getpid(), time.Now().UnixNano())
	a := NewRedis(newRedisClient(t), Options{Channel: channel, Placements: true})
	b := NewRedis(newRedisClient(t), Options{Channel: channel, Placements: true})
	atA, atB := &applied{known: "main"}, &applied{known: "main"}
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	for _, run := range []struct {
		bus *Redis
		to  *applied
	}{{a, atA}, {b, atB}} {
		wg.Go(func() {
			if err := run.bus.Run(ctx, run.to); err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	}
	defer func() { cancel(); wg.Wait() }()

	// Publish/subscribe keeps nothing for a subscriber not yet there:
	// publish until b has subscribed and applied one.
	first := Placement{Pool: "main", Endpoint: "gpu-0", Block: 256, Hashes: []uint64{1, 2, 3}}
	deadline := time.Now().Add(10 * time.Second)
	for len(atB.placements()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the other gateway never received a placement")
		}
		a.Publish(first)
		time.Sleep(20 * time.Millisecond)
	}
	// Then a batch: two records in one message, one for a pool b lacks.
	second := Placement{Pool: "main", Endpoint: "gpu-1", Block: 256, Drop: true, Hashes: []uint64{9}}
	a.Publish(Placement{Pool: "other", Endpoint: "gpu-0", Block: 256, Hashes: []uint64{4}})
	a.Publish(second)
	var got []Placement
	for got = atB.placements(); !cmp.Equal(got[len(got)-1], second); got = atB.placements() {
		if time.Now().After(deadline) {
			t.Fatal("the batch never arrived")
		}
		time.Sleep(5 * time.Millisecond)
	}
	n := len(got) - 1 // the first placement, some of the times it was sent
	for i, p := range got[:n] {
		if diff := cmp.Diff(first, p); diff != "" {
			t.Errorf("placement %d (-want +got):\n%s", i, diff)
		}
	}
	if len(atA.placements()) != 0 {
		t.Errorf("a gateway applied %d of its own placements", len(atA.placements()))
	}
	if got, want := testutil.ToFloat64(b.m.placements.ignored), 1.0; got != want {
		t.Errorf("ignored %v, want %v", got, want)
	}
	// A placement is counted received once applied, and sent once Redis
	// has taken it, which may be after the other gateway has applied it.
	reach(t, "received", b.m.placements.received, float64(n+1), deadline)
	if got, want := testutil.ToFloat64(b.m.placements.received), float64(n+1); got != want {
		t.Errorf("received %v, want %v", got, want)
	}
	reach(t, "sent", a.m.placements.sent, float64(n+2), deadline)
}

// TestRedisSharesLoads: a gateway with requests in flight sends its whole
// load every loadEvery, and once more, empty, when it has none; then it
// falls silent. The other gets each message with the sender's id.
func TestRedisSharesLoads(t *testing.T) {
	channel := fmt.Sprintf("llmgw-test-loads-%d-%d", os.Getpid(), time.Now().UnixNano())
	a := NewRedis(newRedisClient(t), Options{Channel: channel, Loads: true})
	b := NewRedis(newRedisClient(t), Options{Channel: channel, Loads: true})
	atA, atB := &applied{}, &applied{}
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() { a.Run(ctx, atA) })
	wg.Go(func() { b.Run(ctx, atB) })
	defer func() { cancel(); wg.Wait() }()

	busy := []Load{{Pool: "main", Endpoint: "gpu-0", Inflight: 3, Pending: 1, Owed: 700}}
	atA.setOwn(busy...)
	deadline := time.Now().Add(10 * time.Second)
	for got, _ := atB.heard(); len(got) < 3; got, _ = atB.heard() {
		if time.Now().After(deadline) {
			t.Fatalf("the other gateway heard %d load messages, want 3", len(got))
		}
		time.Sleep(loadEvery)
	}
	got, from := atB.heard()
	if from != a.id {
		t.Errorf("sender %d, want a's id %d", from, a.id)
	}
	for i, l := range got {
		if diff := cmp.Diff(busy, l); diff != "" {
			t.Errorf("message %d (-want +got):\n%s", i, diff)
		}
	}
	atA.setOwn()
	for got, _ = atB.heard(); len(got[len(got)-1]) != 0; got, _ = atB.heard() {
		if time.Now().After(deadline) {
			t.Fatal("the gateway never said it had nothing in flight")
		}
		time.Sleep(loadEvery)
	}
	n := len(got)
	time.Sleep(10 * loadEvery)
	if got, _ = atB.heard(); len(got) != n {
		t.Errorf("an idle gateway sent %d more load messages", len(got)-n)
	}
	if h, _ := atA.heard(); len(h) != 0 {
		t.Errorf("b, with nothing in flight, sent %d load messages", len(h))
	}
	if got, want := testutil.ToFloat64(b.m.loads.received), float64(n); got != want {
		t.Errorf("received %v, want %v", got, want)
	}
}

// reach waits until counter c is at least want, and fails t if it is not
// by deadline: counters another goroutine adds to after the effect a test
// saw.
func reach(t *testing.T, name string, c prometheus.Counter, want float64, deadline time.Time) {
	t.Helper()
	for got := testutil.ToFloat64(c); got < want; got = testutil.ToFloat64(c) {
		if time.Now().After(deadline) {
			t.Fatalf("%s %v, want at least %v", name, got, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestPublishNeverBlocks: with nothing sending, Publish drops what the
// queue cannot hold, and counts it.
func TestPublishNeverBlocks(t *testing.T) {
	bus := NewRedis(nil, Options{})
	for range queueLen + 10 {
		bus.Publish(Placement{Pool: "main"})
	}
	if got := testutil.ToFloat64(bus.m.placements.dropped); got != 10 {
		t.Errorf("dropped %v, want 10", got)
	}
}

// BenchmarkPublish is what a placement costs the request path: a send on
// the queue. The queue is emptied, off the clock, whenever it fills, so
// every Publish measured is queued, none dropped.
func BenchmarkPublish(b *testing.B) {
	bus := NewRedis(nil, Options{})
	p := Placement{Pool: "main", Endpoint: "gpu-0", Block: 256, Hashes: make([]uint64, 64)}
	b.ReportAllocs()
	for b.Loop() {
		if len(bus.queue) == cap(bus.queue) {
			b.StopTimer()
			for len(bus.queue) > 0 {
				<-bus.queue
			}
			b.StartTimer()
		}
		bus.Publish(p)
	}
	if d := testutil.ToFloat64(bus.m.placements.dropped); d != 0 {
		b.Fatalf("%v placements dropped", d)
	}
}

// TestRedisRefusesWhatNoGatewaySends: messages written to the channels by
// something other than a gateway are refused, and counted by why: one
// longer than any gateway sends, unread; a placement of more blocks than
// a prompt gives, while the others of its message are applied; and a load
// the gateway refuses (here, one at an endpoint named "forged").
func TestRedisRefusesWhatNoGatewaySends(t *testing.T) {
	channel := fmt.Sprintf("llmgw-test-refused-%d-%d", os.Getpid(), time.Now().UnixNano())
	bus := NewRedis(newRedisClient(t), Options{Channel: channel, Placements: true, Loads: true})
	at := &applied{known: "main"}
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() { bus.Run(ctx, at) })
	defer func() { cancel(); wg.Wait() }()

	forger := newRedisClient(t)
	publish := func(ch string, msg []byte) int64 {
		t.Helper()
		n, err := forger.Publish(t.Context(), ch, msg).Result()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	// Publish/subscribe keeps nothing for a subscriber not yet there:
	// an empty load message until the bus has subscribed to both.
	deadline := time.Now().Add(10 * time.Second)
	for publish(channel+loadSuffix, loadMessage(9)) == 0 || publish(channel, message(9)) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the bus never subscribed")
		}
		time.Sleep(5 * time.Millisecond)
	}
	huge := make([]byte, maxMessage+1)
	huge[0] = version
	publish(channel, huge)
	publish(channel+loadSuffix, huge)
	kept := Placement{Pool: "main", Endpoint: "gpu-0", Block: 256, Hashes: make([]uint64, MaxHashes)}
	publish(channel, message(9, Placement{Pool: "main", Endpoint: "gpu-1", Block: 256, Hashes: make([]uint64, MaxHashes+1)}, kept))
	publish(channel+loadSuffix, loadMessage(9,
		Load{Pool: "main", Endpoint: "forged", Inflight: math.MaxInt32, Pending: math.MaxInt32, Owed: math.MaxInt32},
		Load{Pool: "main", Endpoint: "gpu-0", Inflight: 1}))

	reach(t, "placements received", bus.m.placements.received, 1, deadline)
	reach(t, "load records refused as unknown", bus.m.loadsRefused[RefusedUnknown], 1, deadline)
	for _, c := range []struct {
		name string
		c    prometheus.Counter
		want float64
	}{
		{"placement messages too large", bus.m.placementsRefused[RefusedTooLarge], 1},
		{"placements of too many blocks", bus.m.placementsRefused[RefusedHashes], 1},
		{"placements received", bus.m.placements.received, 1},
		{"load messages too large", bus.m.loadsRefused[RefusedTooLarge], 1},
		{"load records refused as unknown", bus.m.loadsRefused[RefusedUnknown], 1},
	} {
		if got := testutil.ToFloat64(c.c); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	if got := at.placements(); len(got) != 1 || len(got[0].Hashes) != MaxHashes {
		t.Errorf("applied %d placements, want the one of %d blocks", len(got), MaxHashes)
	}
}
