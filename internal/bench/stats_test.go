package bench

import (
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestPercentile(t *testing.T) {
	ten := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	hundred := make([]float64, 100)
	for i := range hundred {
		hundred[i] = float64(i + 1)
	}
	tests := []struct {
		name   string
		sorted []float64
		p      float64
		want   float64
	}{
		{"none", nil, .5, 0},
		{"one", []float64{7}, .99, 7},
		{"p50 of ten", ten, .5, 5},
		{"p90 of ten", ten, .9, 9},
		{"p99 of ten", ten, .99, 10},
		{"p100 of ten", ten, 1, 10},
		{"p1 of ten", ten, .01, 1},
		{"p50 of hundred", hundred, .5, 50},
		{"p99 of hundred", hundred, .99, 99},
		{"p99 of two", []float64{1, 2}, .99, 2},
	}
	for _, tt := range tests {
		if got := Percentile(tt.sorted, tt.p); got != tt.want {
			t.Errorf("%s: Percentile(p=%v) = %v, want %v", tt.name, tt.p, got, tt.want)
		}
	}
}

func ms32(d ...int) []float32 {
	out := make([]float32, len(d))
	for i, v := range d {
		out[i] = float32(v) / 1000
	}
	return out
}

func TestSummarise(t *testing.T) {
	slo := SLO{TTFT: 100 * time.Millisecond, TPOT: 20 * time.Millisecond}
	ms := time.Millisecond
	results := []Result{
		// Meets both: TTFT 50ms, 5 tokens over 40ms → TPOT 10ms.
		{Tenant: "a", Class: "critical", SLO: slo, Outcome: OutcomeOK, Start: 0, TTFT: 50 * ms, LastToken: 90 * ms, E2E: 100 * ms,
			Tokens: 5, Gaps: ms32(10, 10, 10, 10), PromptTokens: 100, CompletionTokens: 5, CachedTokens: 50},
		// Misses TTFT: 150ms.
		{Tenant: "a", Class: "critical", SLO: slo, Outcome: OutcomeOK, Start: 100 * ms, TTFT: 150 * ms, LastToken: 160 * ms, E2E: 200 * ms,
			Tokens: 2, Gaps: ms32(10), PromptTokens: 100, CompletionTokens: 2, CachedTokens: 0},
		// Misses TPOT: 3 tokens over 60ms → 30ms.
		{Tenant: "b", Class: "standard", SLO: slo, Outcome: OutcomeOK, Start: 200 * ms, TTFT: 40 * ms, LastToken: 100 * ms, E2E: 300 * ms,
			Tokens: 3, Gaps: ms32(30, 30), PromptTokens: 200, CompletionTokens: 3, CachedTokens: 150},
		// One token: no TPOT, meets the SLO on TTFT alone.
		{Tenant: "b", Class: "standard", SLO: slo, Outcome: OutcomeOK, Start: 300 * ms, TTFT: 20 * ms, LastToken: 20 * ms, E2E: 400 * ms,
			Tokens: 1, PromptTokens: 100, CompletionTokens: 1},
		{Tenant: "b", Class: "standard", SLO: slo, Outcome: OutcomeRejected, Status: 429, Start: 400 * ms, E2E: ms, Asked: 8},
		{Tenant: "b", Class: "sheddable", SLO: slo, Outcome: OutcomeError, Status: 502, Start: 500 * ms, E2E: 1500 * ms, PromptTokens: 0, Asked: 4},
		{Tenant: "b", Class: "sheddable", SLO: slo, Outcome: OutcomeDropped, Asked: 100},
		// No SLO at all: met whenever completed.
		{Tenant: "c", Class: "standard", Outcome: OutcomeOK, Start: 600 * ms, TTFT: 5 * time.Second, LastToken: 6 * time.Second, E2E: 6 * time.Second,
			Tokens: 2, Gaps: ms32(1000), PromptTokens: 0, CompletionTokens: 2},
	}
	rep := Summarise(results)
	wall := 6.6 // the last request started at 0.6s and took 6s
	want := Stats{
		Requests: 8, OK: 5, Errors: 1, Rejected: 1, Dropped: 1,
		Goodput: 3.0 / 8,
		Late:    1, // the second, 150ms against 100ms
		// The one 429 took 1ms.
		Rejectedp50: 0.001, Rejectedp99: 0.001,
		// TTFT samples sorted: 0.02 0.04 0.05 0.15 5.
		TTFTp50: 0.05, TTFTp90: 5, TTFTp99: 5,
		// TPOT samples: 0.01 (req 1), 0.01 (req 2: 10ms/1), 0.03, 1 (req 8).
		TPOTp50: 0.01, TPOTp90: 1, TPOTp99: 1,
		// Gaps: 10×5, 30×2, 1000: eight samples.
		ITLp50: 0.01, ITLp90: 1, ITLp99: 1,
		// E2E of completed: 0.1 0.2 0.3 0.4 6.
		E2Ep50: 0.3, E2Ep90: 6, E2Ep99: 6,
		PromptTokens: 500, CompletionTokens: 13, CachedTokens: 200,
		// The served ones asked for no length: their 13 served, with the
		// 8 of the 429 and the 4 of the 502; the dropped one was not sent.
		AskedTokens:      25,
		PrefixHitRate:    200.0 / 500,
		WallSeconds:      wall,
		AchievedRate:     5 / wall,
		OutputTokensPerS: 13 / wall,
	}
	approx := cmpopts.EquateApprox(0, 1e-6)
	if diff := cmp.Diff(want, rep.Stats, approx); diff != "" {
		t.Errorf("overall (-want +got):\n%s", diff)
	}
	goodput := func(m map[string]Stats) map[string]float64 {
		out := map[string]float64{}
		for k, s := range m {
			out[k] = s.Goodput
		}
		return out
	}
	if diff := cmp.Diff(map[string]float64{"critical": 0.5, "standard": 2.0 / 4, "sheddable": 0}, goodput(rep.ByClass), approx); diff != "" {
		t.Errorf("goodput by class (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]float64{"a": 0.5, "b": 1.0 / 5, "c": 1}, goodput(rep.ByTenant), approx); diff != "" {
		t.Errorf("goodput by tenant (-want +got):\n%s", diff)
	}
	if got := rep.ByTenant["a"].PrefixHitRate; math.Abs(got-50.0/200) > 1e-9 {
		t.Errorf("tenant a prefix hit rate %v, want 0.25", got)
	}
}

func TestMetSLO(t *testing.T) {
	slo := SLO{TTFT: time.Second, TPOT: 50 * time.Millisecond}
	tests := []struct {
		name string
		r    Result
		want bool
	}{
		{"within both", Result{SLO: slo, Outcome: OutcomeOK, Tokens: 3, TTFT: time.Second, LastToken: 1100 * time.Millisecond}, true},
		{"ttft just over", Result{SLO: slo, Outcome: OutcomeOK, Tokens: 3, TTFT: time.Second + 1, LastToken: 1100 * time.Millisecond}, false},
		{"tpot over", Result{SLO: slo, Outcome: OutcomeOK, Tokens: 3, TTFT: 0, LastToken: 101*time.Millisecond + 1}, false},
		{"usage says more tokens than events", Result{SLO: slo, Outcome: OutcomeOK, Tokens: 2, CompletionTokens: 5, TTFT: 0, LastToken: 200 * time.Millisecond}, true},
		{"no token with a ttft slo", Result{SLO: slo, Outcome: OutcomeOK}, false},
		{"no token, no slo", Result{Outcome: OutcomeOK}, true},
		{"rejected", Result{Outcome: OutcomeRejected}, false},
		{"error", Result{Outcome: OutcomeError, Tokens: 3}, false},
		{"dropped", Result{Outcome: OutcomeDropped}, false},
	}
	for _, tt := range tests {
		if got := tt.r.MetSLO(); got != tt.want {
			t.Errorf("%s: MetSLO() = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestSummariseRunsRatesOverEveryRun checks that a sweep's pooled figures
// divide by the time all its runs took, not by the longest run's.
func TestSummariseRunsRatesOverEveryRun(t *testing.T) {
	run := func(n int) []Result {
		var rs []Result
		for i := range n {
			rs = append(rs, Result{Outcome: OutcomeOK, Start: time.Duration(i) * time.Second / time.Duration(n), E2E: time.Second / time.Duration(n)})
		}
		return rs
	}
	a, b := run(10), run(20) // 10 and 20 requests, each run 1 s of wall time
	if got := Summarise(a).AchievedRate; got != 10 {
		t.Errorf("one run: %v req/s, want 10", got)
	}
	if got := SummariseRuns(a, b).AchievedRate; got != 15 {
		t.Errorf("two runs of 1 s: %v req/s, want 30 requests / 2 s = 15", got)
	}
}

func TestJain(t *testing.T) {
	for _, tc := range []struct {
		xs   []float64
		want float64
	}{
		{nil, 0},
		{[]float64{7}, 0},
		{[]float64{0, 0}, 0},
		{[]float64{3, 3, 3}, 1},
		{[]float64{5, 1, 1}, 49.0 / 81},
		{[]float64{1, 0, 0, 0}, 0.25},
	} {
		if got := jain(tc.xs); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("jain(%v) = %v, want %v", tc.xs, got, tc.want)
		}
	}
	rep := Summarise([]Result{
		{Tenant: "a", Outcome: OutcomeOK, CompletionTokens: 50},
		{Tenant: "b", Outcome: OutcomeOK, CompletionTokens: 10},
		{Tenant: "c", Outcome: OutcomeOK, CompletionTokens: 10},
	})
	if math.Abs(rep.Jain-49.0/81) > 1e-12 {
		t.Errorf("report's jain = %v, want %v", rep.Jain, 49.0/81)
	}
}

func TestMaxMinShares(t *testing.T) {
	for _, tc := range []struct {
		name     string
		demands  []float64
		total    float64
		want     []float64
		wantJain float64
	}{
		// Level 1.5: the two small demands are met, the large one gets the
		// 1.5 left. Jain = 3.5² / (3 · (1.5² + 1 + 1)) = 12.25 / 12.75.
		{"two met, one capped", []float64{5, 1, 1}, 3.5, []float64{1.5, 1, 1}, 12.25 / 12.75},
		// Every demand above the level 2: equal shares.
		{"all capped", []float64{9, 4, 3}, 6, []float64{2, 2, 2}, 1},
		// Enough for every demand: each gets its own, 1 of the 8 left over.
		// Jain = 7² / (3 · (16 + 4 + 1)) = 49 / 63.
		{"all met", []float64{4, 2, 1}, 8, []float64{4, 2, 1}, 49.0 / 63},
		// Exactly enough: the last demand is met at the level.
		{"exactly enough", []float64{3, 1}, 4, []float64{3, 1}, 16.0 / 20},
		// A tenant that asked nothing gets nothing; the others split 4.
		{"one asked nothing", []float64{0, 5, 5}, 4, []float64{0, 2, 2}, 16.0 / 24},
		{"one tenant", []float64{5}, 3, []float64{3}, 0},
		{"no tenant", nil, 3, []float64{}, 0},
		{"nothing served", []float64{2, 2}, 0, []float64{0, 0}, 0},
	} {
		got := maxMinShares(tc.demands, tc.total)
		if diff := cmp.Diff(tc.want, got, cmpopts.EquateApprox(0, 1e-12)); diff != "" {
			t.Errorf("%s: maxMinShares(%v, %v) (-want +got):\n%s", tc.name, tc.demands, tc.total, diff)
		}
		if j := jain(got); math.Abs(j-tc.wantJain) > 1e-12 {
			t.Errorf("%s: jain of shares %v = %v, want %v", tc.name, got, j, tc.wantJain)
		}
	}
}

// TestSummariseJainMaxMin is the noisy workload in small: one tenant asks
// five times what each of two others asks, and the pool serves less than
// all of it.
func TestSummariseJainMaxMin(t *testing.T) {
	rep := Summarise([]Result{
		// loud asks 50 and is served 15.
		{Tenant: "loud", Outcome: OutcomeOK, CompletionTokens: 10, Asked: 10},
		{Tenant: "loud", Outcome: OutcomeOK, CompletionTokens: 5, Asked: 5},
		{Tenant: "loud", Outcome: OutcomeRejected, Asked: 20},
		{Tenant: "loud", Outcome: OutcomeRejected, Asked: 15},
		// quiet1 asks 10, served in full.
		{Tenant: "quiet1", Outcome: OutcomeOK, CompletionTokens: 10, Asked: 10},
		// quiet2 asks 10 and is served 6.
		{Tenant: "quiet2", Outcome: OutcomeOK, CompletionTokens: 6, Asked: 6},
		{Tenant: "quiet2", Outcome: OutcomeError, Asked: 4},
		// Dropped by the driver: not sent, so no demand.
		{Tenant: "quiet2", Outcome: OutcomeDropped, Asked: 30},
	})
	// Served 15, 10, 6: Jain = 31² / (3 · (225 + 100 + 36)) = 961 / 1083.
	// Max-min sharing of the 31 over demands 50, 10, 10: both quiet
	// tenants met, loud gets 11. Jain = 31² / (3 · (121 + 100 + 100)) =
	// 961 / 963.
	if want := 961.0 / 1083; math.Abs(rep.Jain-want) > 1e-12 {
		t.Errorf("jain = %v, want %v", rep.Jain, want)
	}
	if want := 961.0 / 963; math.Abs(rep.JainMaxMin-want) > 1e-12 {
		t.Errorf("jain_max_min = %v, want %v", rep.JainMaxMin, want)
	}
	asked := map[string]int64{}
	for k, s := range rep.ByTenant {
		asked[k] = s.AskedTokens
	}
	if diff := cmp.Diff(map[string]int64{"loud": 50, "quiet1": 10, "quiet2": 10}, asked); diff != "" {
		t.Errorf("asked tokens by tenant (-want +got):\n%s", diff)
	}
	// Served max-min fairly already: the two figures agree.
	fair := Summarise([]Result{
		{Tenant: "loud", Outcome: OutcomeOK, CompletionTokens: 11, Asked: 11},
		{Tenant: "loud", Outcome: OutcomeRejected, Asked: 39},
		{Tenant: "quiet1", Outcome: OutcomeOK, CompletionTokens: 10, Asked: 10},
		{Tenant: "quiet2", Outcome: OutcomeOK, CompletionTokens: 10, Asked: 10},
	})
	if math.Abs(fair.Jain-fair.JainMaxMin) > 1e-12 || math.Abs(fair.Jain-961.0/963) > 1e-12 {
		t.Errorf("max-min fair run: jain %v, jain_max_min %v, want both %v", fair.Jain, fair.JainMaxMin, 961.0/963)
	}
}
