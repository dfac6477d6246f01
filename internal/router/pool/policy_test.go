package pool

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
)

// testPool is a pool of the policy with one endpoint per weight, at
// http://10.0.0.<i+1>:8000/v1.
func testPool(policy string, weights ...int) *Pool {
	cp := catalog.Pool{Name: "p", Policy: policy}
	for i, w := range weights {
		cp.Endpoints = append(cp.Endpoints, catalog.Endpoint{URL: fmt.Sprintf("http://10.0.0.%d:8000/v1", i+1), Weight: w})
	}
	return New(cp, nil, nil)
}

// all is every endpoint of p as candidates.
func all(p *Pool) uint64 { return 1<<len(p.endpoints) - 1 }

// promptText is blocks whole index blocks of prompt text.
func promptText(seed uint64, blocks int) []byte {
	return text(seed, blocks*BlockBytes(DefaultKVBlock))
}

// routeFor prepares prompt for p, at a token a bytesPerToken.
func routeFor(p *Pool, prompt []byte, slo time.Duration) *Route {
	var rt Route
	rt.Prepare(p, prompt, 0, int64(len(prompt)/BytesPerToken), slo)
	return &rt
}

// hold notes in p's index that endpoint i holds the first blocks of
// prompt.
func hold(p *Pool, prompt []byte, blocks, i int) {
	x := p.index.Load()
	x.Add(HashBlocks(nil, prompt, x.block, 0)[:blocks], i)
}

func TestRoundRobinWeights(t *testing.T) {
	p := testPool(catalog.PolicyRoundRobin, 3, 1, 2)
	rt := routeFor(p, nil, 0)
	got := make([]int, 3)
	for range 600 {
		i, reason := p.Pick(rt, all(p), time.Now())
		if reason != reasonTurn {
			t.Fatalf("reason %q", reason)
		}
		got[i]++
	}
	if diff := cmp.Diff([]int{300, 100, 200}, got); diff != "" {
		t.Errorf("picks by endpoint (-want +got):\n%s", diff)
	}
	for range 20 {
		if i, _ := p.Pick(rt, 0b010, time.Now()); i != 1 {
			t.Fatalf("picked %d, the only candidate is 1", i)
		}
	}
	if i, _ := p.Pick(rt, 0, time.Now()); i != -1 {
		t.Errorf("picked %d with no candidates", i)
	}
}

func TestLeastRequest(t *testing.T) {
	p := testPool(catalog.PolicyLeastRequest, 1, 2, 1)
	p.endpoints[0].inflight.Store(3)
	p.endpoints[1].inflight.Store(5) // 2.5 for its weight of 2
	p.endpoints[2].inflight.Store(4)
	rt := routeFor(p, promptText(1, 4), 0)
	for range 10 {
		if i, reason := p.Pick(rt, all(p), time.Now()); i != 1 || reason != reasonLeastRequest {
			t.Fatalf("picked %d (%s), want 1: the fewest in flight for its weight", i, reason)
		}
	}
	if i, _ := p.Pick(rt, 0b101, time.Now()); i != 0 {
		t.Errorf("without 1, picked %d, want 0", i)
	}
	// Ties go to each in turn.
	p.endpoints[0].inflight.Store(2)
	p.endpoints[2].inflight.Store(2)
	seen := map[int]int{}
	for range 10 {
		i, _ := p.Pick(rt, 0b101, time.Now())
		seen[i]++
	}
	if seen[0] == 0 || seen[2] == 0 {
		t.Errorf("a tie went one way only: %v", seen)
	}
}

func TestPrefixPolicyFollowsTheLongestMatchWhateverTheLoad(t *testing.T) {
	p := testPool(catalog.PolicyPrefix, 1, 1, 1)
	prompt := promptText(2, 8)
	hold(p, prompt, 8, 2)
	hold(p, prompt, 3, 0)
	p.endpoints[2].inflight.Store(500)
	p.endpoints[2].owed.Store(1 << 20)
	rt := routeFor(p, prompt, 0)
	if i, reason := p.Pick(rt, all(p), time.Now()); i != 2 || reason != reasonPrefixHit {
		t.Errorf("picked %d (%s), want 2, which holds all 8 blocks", i, reason)
	}
	if i, reason := p.Pick(rt, 0b011, time.Now()); i != 0 || reason != reasonPrefixHit {
		t.Errorf("without 2, picked %d (%s), want 0, which holds 3", i, reason)
	}
	rt = routeFor(p, promptText(3, 8), 0)
	seen := map[int]int{}
	for range 9 {
		i, reason := p.Pick(rt, all(p), time.Now())
		if reason != reasonNoPrefix {
			t.Fatalf("reason %q for a prompt nobody holds", reason)
		}
		seen[i]++
	}
	if len(seen) != 3 {
		t.Errorf("a prompt nobody holds went to %v, want each in turn", seen)
	}
}

// TestGIEScoring: queue min-max normalized (2), free KV cache (2), share of
// the prompt's blocks held (3).
func TestGIEScoring(t *testing.T) {
	type ep struct {
		waiting, kv float64
		held        int // of the prompt's 4 blocks
	}
	tests := []struct {
		name string
		eps  [2]ep
		want int
	}{
		// 0 + 2×0.5 + 3×1 = 4 against 2 + 2×0.5 + 0 = 3.
		{"a whole prefix outweighs a slightly longer queue", [2]ep{{5, 0.5, 4}, {4, 0.5, 0}}, 0},
		// 0 + 1 + 3×0.25 = 1.75 against 3.
		{"a quarter of the prefix does not", [2]ep{{5, 0.5, 1}, {4, 0.5, 0}}, 1},
		// Min-max: 101 against 100 is as far apart as any two queues.
		{"queues are normalized over the candidates", [2]ep{{101, 0.1, 0}, {100, 0.1, 0}}, 1},
		// 2 + 2×0.05 + 0 = 2.1 against 0 + 2×0.9 + 0.75 = 2.55.
		{"free cache and a little prefix beat the shortest queue", [2]ep{{3, 0.95, 0}, {9, 0.1, 1}}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := testPool(catalog.PolicyGIE, 1, 1)
			prompt := promptText(4, 4)
			now := time.Now()
			for i, e := range tt.eps {
				p.endpoints[i].scrape.Store(&Load{Waiting: e.waiting, KVUsage: e.kv, At: now})
				if e.held > 0 {
					hold(p, prompt, e.held, i)
				}
			}
			rt := routeFor(p, prompt, 0)
			for range 4 { // whatever the turn
				if i, reason := p.Pick(rt, all(p), now); i != tt.want || reason != reasonScore {
					t.Fatalf("picked %d (%s), want %d", i, reason, tt.want)
				}
			}
		})
	}
}

// TestGIEDoesNotBelieveAStaleScrape: a scrape older than the pool's max
// age is unknown: the queue is this gateway's own pending requests and the
// cache counts as full.
func TestGIEDoesNotBelieveAStaleScrape(t *testing.T) {
	now := time.Now()
	for _, tc := range []struct {
		age  time.Duration
		want int
	}{
		{0, 0},               // believed: idle, empty cache
		{2 * time.Second, 1}, // stale: 5 pending and a full cache
	} {
		p := testPool(catalog.PolicyGIE, 1, 1)
		p.endpoints[0].scrape.Store(&Load{Waiting: 0, KVUsage: 0, At: now.Add(-tc.age)})
		p.endpoints[0].pending.Store(5)
		p.endpoints[1].scrape.Store(&Load{Waiting: 3, KVUsage: 0.5, At: now})
		rt := routeFor(p, promptText(5, 4), 0)
		if i, _ := p.Pick(rt, all(p), now); i != tc.want {
			t.Errorf("with endpoint 0's scrape %v old, picked %d, want %d", tc.age, i, tc.want)
		}
	}
}

// TestSGLang: the least loaded when load is unbalanced (more than 64 apart
// and more than 1.5 times); else the longest prefix when it covers more
// than 0.3 of the prompt; else the smallest cache.
func TestSGLang(t *testing.T) {
	tests := []struct {
		name     string
		inflight [3]int64
		held     int // of the prompt's 10 blocks, on endpoint 0
		want     int
		reason   string
	}{
		{"unbalanced: the least loaded", [3]int64{100, 30, 31}, 10, 1, reasonImbalanced},
		{"64 apart is not unbalanced", [3]int64{64, 0, 0}, 10, 0, reasonPrefixHit},
		{"1.5 times is not unbalanced", [3]int64{300, 200, 200}, 10, 0, reasonPrefixHit},
		{"0.4 of the prompt cached", [3]int64{0, 0, 0}, 4, 0, reasonPrefixHit},
		{"0.3 of the prompt cached is not more than 0.3", [3]int64{0, 0, 0}, 3, 2, reasonSmallest},
		{"nothing cached: the smallest cache", [3]int64{0, 0, 0}, 0, 2, reasonSmallest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := testPool(catalog.PolicySGLang, 1, 1, 1)
			prompt := promptText(6, 10)
			if tt.held > 0 {
				hold(p, prompt, tt.held, 0)
			}
			// Caches of 20 + held, 10 and 5 blocks of other prompts.
			for i, n := range []int{20, 10, 5} {
				hold(p, promptText(uint64(100+i), n), n, i)
			}
			for i, n := range tt.inflight {
				p.endpoints[i].inflight.Store(n)
			}
			rt := routeFor(p, prompt, 0)
			if i, reason := p.Pick(rt, all(p), time.Now()); i != tt.want || reason != tt.reason {
				t.Errorf("picked %d (%s), want %d (%s)", i, reason, tt.want, tt.reason)
			}
		})
	}
}

// TestAuto: with the prior cost model (20 ms and 100 µs a token), a
// prompt of 2,048 tokens takes 0.2248 s on an idle endpoint; on one that
// holds all of it, 0.02 s plus the prefill it owes, less the 0.2048 s the
// cache saves.
func TestAuto(t *testing.T) {
	tests := []struct {
		name      string
		owed      int64 // prefill owed on endpoint 0, which holds the prompt
		precision float64
		slo       time.Duration
		want      int
		reason    string
		idle      bool // nothing in flight on endpoint 1; else two streams
	}{
		// 0.32 s predicted, against the cold endpoint's 0.2248, where
		// computing the prompt again stalls two streams: scored 0.2248 +
		// 4 × 0.2048 = 1.044.
		{"a cached prefix worth the wait", 3000, 1, 0, 0, reasonPrefix, false},
		// Where nothing would wait behind the prompt, computing it again
		// costs no one but this request.
		{"a cached prefix, nothing in flight elsewhere", 3000, 1, 0, 1, reasonFastest, true},
		{"a cached prefix on an idle endpoint", 0, 1, 0, 0, reasonFastest, false},
		// 0.228 s predicted against 0.2248, within 5 ms: a near tie,
		// which the holder keeps.
		{"a near tie stays with the prefix", 2080, 1, 0, 0, reasonPrefix, true},
		// 0.24 s, within a tenth but not 5 ms: rendezvous hashing's.
		{"a wider tie goes by the place key", 2200, 1, 0, 1, reasonFastest, true},
		// 1.52 s predicted, against the cold endpoint's 1.044 and the
		// stall its prefill gives its two streams at stallFloor, 0.5 ×
		// 2 × 0.2048.
		{"the cached endpoint badly loaded", 15000, 1, 0, 1, reasonFastest, false},
		// Its hits mostly not confirmed, it keeps the prompt all the
		// same: sending it there is what caches it there again.
		{"a prefix the endpoint's answers do not confirm", 3000, minPrecision, 0, 0, reasonPrefix, false},
		// The cold endpoint scores 1.249: 0.2248 s, 4 × 0.2048 for the
		// prompt computed again, and 0.5 × 2 × 0.2048 for its two
		// streams' stall. 0.62 s is past 1.2 × a 0.5 s SLO, charged all
		// of 2 × 0.5 s: 1.62.
		{"past the SLO", 6000, 1, 500 * time.Millisecond, 1, reasonFastest, false},
		// Below 0.8 × a 0.8 s SLO: no charge.
		{"within the SLO", 6000, 1, 800 * time.Millisecond, 0, reasonPrefix, false},
		// 0.5 s of a 1 s SLO spent waiting for admission: 0.62 s is past
		// what is left.
		{"within the SLO, not what is left of it", 6000, 1, SLOLeft(time.Second, time.Unix(0, 0), time.Unix(0, 5e8)), 1, reasonFastest, false},
		// 0.52 s, just past a 0.5 s SLO: 0.6 of the charge makes 1.12,
		// less than the cold endpoint's 1.249. The whole charge would
		// make 1.52 and send it there.
		{"just past the SLO, charged in part", 5000, 1, 500 * time.Millisecond, 0, reasonPrefix, false},
		// 0.32 s is past a 0.3 s SLO, charged in full from 0.36 s: even
		// then 0.92 would be less than the 1.249 computing the prompt
		// again costs. A miss is not worth more than half its SLO of
		// prefill.
		{"past the SLO, where the prefill elsewhere costs more", 3000, 1, 300 * time.Millisecond, 0, reasonPrefix, false},
		// Neither is within 0.1 s: both are charged in full, and the
		// best score still wins.
		{"none within the SLO", 3000, 1, 100 * time.Millisecond, 0, reasonPrefix, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := testPool(catalog.PolicyAuto, 1, 1)
			prompt := promptText(7, 32) // 8 KiB: 2,048 tokens
			hold(p, prompt, 32, 0)
			p.endpoints[0].owed.Store(tt.owed)
			if !tt.idle {
				p.endpoints[1].inflight.Store(2)
			}
			if tt.precision < 1 {
				p.endpoints[0].hits.Store(math.Float64bits(tt.precision))
			}
			rt := routeFor(p, prompt, tt.slo)
			if i, reason := p.Pick(rt, all(p), time.Now()); i != tt.want || reason != tt.reason {
				t.Errorf("picked %d (%s), want %d (%s)", i, reason, tt.want, tt.reason)
			}
		})
	}
}

// TestAutoSparesAnEvictingCache: a new prompt goes where its first
// token comes soonest unless that endpoint's cache was found to evict the
// prefixes the index expected there: storing it there pushes others out,
// charged at evictCredit for the share found gone.
func TestAutoSparesAnEvictingCache(t *testing.T) {
	for _, tt := range []struct {
		name      string
		precision float64 // endpoint 0's
		want      int
		reason    string
	}{
		{"a cache that keeps its prefixes", 1, 0, reasonFastest},
		// 0.2248 s against 0.2748, plus 8 × 0.2048 × 0.7 = 1.147 s
		// for the prefixes pushed out.
		{"a cache that evicts", 0.3, 1, reasonEvict},
		// 8 × 0.2048 × 0.05 = 0.082 s: past the 50 ms and the near tie.
		{"a cache that evicts one prefix in twenty", 0.95, 1, reasonEvict},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := testPool(catalog.PolicyAuto, 1, 1)
			p.endpoints[0].hits.Store(math.Float64bits(tt.precision))
			p.endpoints[1].owed.Store(500) // 50 ms slower to a first token
			rt := routeFor(p, promptText(11, 32), 0)
			if i, reason := p.Pick(rt, all(p), time.Now()); i != tt.want || reason != tt.reason {
				t.Errorf("picked %d (%s), want %d (%s)", i, reason, tt.want, tt.reason)
			}
		})
	}
}

// TestAutoLearnsTheEngine: the holder of a prompt's prefix, owing 12,000
// tokens of prefill, is left for an idle endpoint when its first tokens
// have shown that what is owed ahead delays them (prompts computed one
// after another), and kept when they have shown it does not (a slot a
// request): the same scene, two engines, told apart by their answers
// alone.
func TestAutoLearnsTheEngine(t *testing.T) {
	for _, tt := range []struct {
		engine   string
		perAhead float64 // what a token owed ahead costs a first token
		want     int
		reason   string
	}{
		{"serial prefill", 100e-6, 1, reasonFastest},
		{"slots", 0, 0, reasonFastest}, // its first token is the soonest there, too
	} {
		t.Run(tt.engine, func(t *testing.T) {
			p := testPool(catalog.PolicyAuto, 1, 1)
			rng := rand.New(rand.NewPCG(5, 6))
			for _, e := range p.endpoints {
				for range 100 {
					own, ahead := float64(rng.IntN(4000)), float64(rng.IntN(20000))
					e.learn(time.Now(), dur(0.020+100e-6*own+tt.perAhead*ahead), own, ahead, 0)
				}
			}
			prompt := promptText(7, 32) // 2,048 tokens
			hold(p, prompt, 32, 0)
			p.endpoints[0].owed.Store(12000)
			rt := routeFor(p, prompt, 0)
			if i, reason := p.Pick(rt, all(p), time.Now()); i != tt.want || reason != tt.reason {
				t.Errorf("picked %d (%s), want %d (%s); learned %+v", i, reason, tt.want, tt.reason, *p.endpoints[0].firstTokenCost())
			}
		})
	}
}

// TestAutoSparesCriticalStreams: a request below critical sends a long
// prefill elsewhere than where critical streams decode, while another
// endpoint has none; a short one, or a critical request, goes where it is
// fastest.
func TestAutoSparesCriticalStreams(t *testing.T) {
	const criticalTPOT = 0.05 // a stall of up to 50 ms, 500 tokens at the prior cost, is let through
	tests := []struct {
		name     string
		cached   int     // blocks of the prompt endpoint 0 holds
		critical [2]int  // critical streams decoding on each endpoint
		spare    float64 // the route's critical TPOT SLO; 0 for a critical request
		want     int
		reason   string
	}{
		{"a long prefill spares the critical streams", 0, [2]int{1, 0}, criticalTPOT, 1, reasonSpare},
		{"no critical stream anywhere", 0, [2]int{0, 0}, criticalTPOT, 0, reasonFastest},
		{"a critical request goes where it is fastest", 0, [2]int{1, 0}, 0, 0, reasonFastest},
		{"critical streams everywhere", 0, [2]int{1, 2}, criticalTPOT, 0, reasonFastest},
		// 2 of 32 blocks uncached: 128 tokens, a 12.8 ms stall.
		{"a short prefill past a cached prefix", 30, [2]int{1, 0}, criticalTPOT, 0, reasonFastest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := testPool(catalog.PolicyAuto, 1, 1)
			prompt := promptText(11, 32) // 2,048 tokens
			if tt.cached > 0 {
				hold(p, prompt, tt.cached, 0)
			}
			// Endpoint 1 owes 500 tokens: 50 ms slower than endpoint 0.
			p.endpoints[1].owed.Store(500)
			for i, n := range tt.critical {
				p.endpoints[i].critical.Store(int64(n))
			}
			rt := routeFor(p, prompt, 0)
			rt.Spare = tt.spare
			if i, reason := p.Pick(rt, all(p), time.Now()); i != tt.want || reason != tt.reason {
				t.Errorf("picked %d (%s), want %d (%s)", i, reason, tt.want, tt.reason)
			}
		})
	}
}

// TestAutoChargesTheStall: a long prefill goes where fewer requests are
// in flight, a little later to its first token, whether they decode now
// or are still owed a prefill of their own, charged the stall at the
// weight given and never below stallFloor; with as many to stall on
// each, it goes where its first token comes soonest.
func TestAutoChargesTheStall(t *testing.T) {
	tests := []struct {
		name     string
		stall    float64
		requests int64 // in flight on endpoint 0
		pending  bool  // and still owed a prefill: 10 tokens each
		want     int
		reason   string
	}{
		// Without a weight, stallFloor's: 0.2248 + 0.5 × 8 × 0.2048 =
		// 1.044 against 0.2748 + 0.5 × 0.2048.
		{"no weight: the floor's", 0, 8, false, 1, reasonStreams},
		// 0.2248 s predicted on endpoint 0, and 8 streams held 0.2048 s
		// each: 1.8632 against endpoint 1's 0.2748 + 0.2048 for its one
		// request.
		{"the streams outweigh 50 ms", 1, 8, false, 1, reasonStreams},
		// 8 requests owed 80 tokens of prefill, 8 ms more, decode by the
		// time this prompt's prefill runs.
		{"requests still owed a prefill count too", 1, 8, true, 1, reasonStreams},
		{"no weight: the floor's, prefills owed", 0, 8, true, 1, reasonStreams},
		{"a light weight: the floor's", 0.01, 8, false, 1, reasonStreams},
		// One request to stall on each: 0.2248 + 0.5 × 0.2048 against
		// 0.2748 + 0.5 × 0.2048.
		{"as many to stall on each: the soonest first token", 0, 1, false, 0, reasonFastest},
		// Endpoint 1's one request is stalled instead.
		{"no request to stall", 1, 0, false, 0, reasonFastest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := testPool(catalog.PolicyAuto, 1, 1)
			prompt := promptText(13, 32) // 2,048 tokens, cached nowhere
			// Endpoint 0 has the requests; endpoint 1 owes 500 tokens,
			// 50 ms more, for one request.
			p.endpoints[0].inflight.Store(tt.requests)
			if tt.pending {
				p.endpoints[0].pending.Store(tt.requests)
				p.endpoints[0].owed.Store(10 * tt.requests)
			}
			p.endpoints[1].owed.Store(500)
			p.endpoints[1].pending.Store(1)
			p.endpoints[1].inflight.Store(1)
			rt := routeFor(p, prompt, 0)
			rt.Stall = tt.stall
			if i, reason := p.Pick(rt, all(p), time.Now()); i != tt.want || reason != tt.reason {
				t.Errorf("picked %d (%s), want %d (%s)", i, reason, tt.want, tt.reason)
			}
		})
	}
}

func TestSLOLeft(t *testing.T) {
	start := time.Unix(100, 0)
	for _, tc := range []struct {
		slo, waited, want time.Duration
	}{
		{2 * time.Second, 0, 2 * time.Second},
		{2 * time.Second, 500 * time.Millisecond, 1500 * time.Millisecond},
		{2 * time.Second, 3 * time.Second, time.Nanosecond}, // past it
		{0, time.Second, 0}, // no SLO
	} {
		if got := SLOLeft(tc.slo, start, start.Add(tc.waited)); got != tc.want {
			t.Errorf("sloLeft(%v) after %v = %v, want %v", tc.slo, tc.waited, got, tc.want)
		}
	}
}

// TestAutoPlacesColdPromptsAlikeInEveryGateway: two gateways that built
// their pools apart, list the endpoints in another order and see a little
// different load, still send each cold prompt to the same endpoint, and
// spread prompts over the pool.
func TestAutoPlacesColdPromptsAlikeInEveryGateway(t *testing.T) {
	weights := []int{1, 1, 1, 1, 1, 1, 1, 1}
	a := testPool(catalog.PolicyAuto, weights...)
	cp := catalog.Pool{Name: "p", Policy: catalog.PolicyAuto}
	for i := len(weights) - 1; i >= 0; i-- {
		cp.Endpoints = append(cp.Endpoints, catalog.Endpoint{URL: fmt.Sprintf("http://10.0.0.%d:8000/v1", i+1)})
	}
	b := New(cp, nil, nil)
	// Gateway b has 2 ms of prefill owed on three endpoints: within the
	// 5 ms that makes a near tie.
	for _, i := range []int{0, 3, 5} {
		b.endpoints[i].owed.Store(20)
	}
	spread := map[string]int{}
	for seed := range uint64(200) {
		prompt := promptText(1000+seed, 2)
		ia, ra := a.Pick(routeFor(a, prompt, 0), all(a), time.Now())
		ib, rb := b.Pick(routeFor(b, prompt, 0), all(b), time.Now())
		if a.endpoints[ia].url != b.endpoints[ib].url {
			t.Errorf("prompt %d: gateway a picked %s (%s), b %s (%s)", seed, a.endpoints[ia].url, ra, b.endpoints[ib].url, rb)
		}
		for _, r := range []string{ra, rb} {
			if r != reasonCold && r != reasonFastest {
				t.Errorf("prompt %d: reason %q for a cold prompt", seed, r)
			}
		}
		spread[a.endpoints[ia].url]++
	}
	if len(spread) != len(weights) {
		t.Errorf("200 cold prompts went to %d of %d endpoints: %v", len(spread), len(weights), spread)
	}
}

func TestCandidates(t *testing.T) {
	p := testPool(catalog.PolicyAuto, 1, 1, 1, 1, 1)
	now := time.Now()
	p.endpoints[1].down.Store(true)
	p.endpoints[2].ejectedUntil.Store(now.Add(time.Second).UnixNano())
	p.endpoints[4].ejectedUntil.Store(now.Add(-time.Second).UnixNano()) // its ejection is over
	const tried = 1 << 3
	if got, want := p.Candidates(tried, now, false), uint64(0b10001); got != want {
		t.Errorf("candidates %05b, want %05b: not tried, down or ejected", got, want)
	}
	if got, want := p.Candidates(tried, now, true), uint64(0b10111); got != want {
		t.Errorf("relaxed candidates %05b, want %05b: all not tried", got, want)
	}
	if got := p.Candidates(all(p), now, true); got != 0 {
		t.Errorf("candidates %05b with every endpoint tried", got)
	}
}

// TestCandidatesPassOverAFullBatch: an endpoint at its batch limit is no
// candidate while another has room, and is one when none has.
func TestCandidatesPassOverAFullBatch(t *testing.T) {
	p := testPool(catalog.PolicyRoundRobin, 1, 1, 1)
	for _, e := range p.endpoints {
		e.batch.bits.Store(math.Float64bits(2))
	}
	now := time.Now()
	p.endpoints[0].inflight.Add(2)
	if got := p.Candidates(0, now, false); got != 0b110 {
		t.Errorf("candidates = %03b, want 110", got)
	}
	p.endpoints[1].inflight.Add(2)
	p.endpoints[2].inflight.Add(3)
	if got := p.Candidates(0, now, false); got != 0b111 {
		t.Errorf("all full: candidates = %03b, want 111", got)
	}
}

// TestEveryReasonCounted: each reason a policy may give has its counter,
// which a pick's caller increments without looking; one left out of
// Reasons would be a nil counter.
func TestEveryReasonCounted(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "policy.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	ast.Inspect(f, func(n ast.Node) bool {
		v, ok := n.(*ast.ValueSpec)
		if !ok {
			return true
		}
		for i, name := range v.Names {
			if !strings.HasPrefix(strings.ToLower(name.Name), "reason") || i >= len(v.Values) {
				continue
			}
			lit, ok := v.Values[i].(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				continue
			}
			reason, _ := strconv.Unquote(lit.Value)
			found++
			if !slices.Contains(Reasons, reason) {
				t.Errorf("%s (%q) is not in Reasons", name.Name, reason)
			}
		}
		return true
	})
	if found != len(Reasons) {
		t.Errorf("policy.go declares %d reasons, Reasons has %d", found, len(Reasons))
	}
}
