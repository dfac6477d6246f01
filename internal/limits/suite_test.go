// The behaviour every Limiter shares, run against Local and against Redis:
// rate limits and Retry-After, token reservations and their settling,
// all-or-nothing across scopes, budgets and their periods, Seed, and one
// combined limit under concurrent load.
package limits

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/tenant"
)

// newLimiterFunc makes a fresh, empty limiter for one test.
type newLimiterFunc func(t *testing.T) Limiter

// base is the suite's fake clock at zero: mid-month, mid-morning, UTC.
var base = time.Date(2026, 12, 14, 10, 0, 0, 0, time.UTC)

// flusher is a limiter that settles asynchronously and can be made to
// catch up.
type flusher interface{ Flush(context.Context) error }

// settleNow settles res and, for a limiter that batches, sends the batch,
// so the next admission sees it.
func settleNow(t *testing.T, l Limiter, res Reservation, tokens int64, usd float64) {
	t.Helper()
	l.Settle(t.Context(), res, tokens, usd)
	if f, ok := l.(flusher); ok {
		if err := f.Flush(t.Context()); err != nil {
			t.Fatalf("Flush: %v", err)
		}
	}
}

// outcome is the part of a Decision a test states.
type outcome struct {
	Allowed          bool
	Code, Kind       string
	Scope            string
	RetryAfter       time.Duration
	TooLarge         bool
	Requests, Tokens Header
}

func outcomeOf(d Decision) outcome {
	return outcome{
		Allowed: d.Allowed, Code: d.Code, Kind: d.Kind, Scope: d.Scope,
		RetryAfter: d.RetryAfter, TooLarge: d.TooLarge, Requests: d.Requests, Tokens: d.Tokens,
	}
}

// closeDurations lets Local (nanoseconds) and Redis (microseconds) agree on
// the same arithmetic.
var closeDurations = cmp.Comparer(func(a, b time.Duration) bool {
	d := a - b
	return d >= -time.Microsecond && d <= time.Microsecond
})

type use struct {
	tokens int64
	usd    float64
}

type seed struct {
	scope, period string
	tokens        int64
	usd           float64
	at            time.Duration // after base
}

// step is one admission, optionally preceded by a seed and followed by a
// settlement of what it reserved.
type step struct {
	at     time.Duration // after base
	scopes []Scope       // nil means the case's
	tokens int64
	seed   *seed
	settle *use
	want   outcome
}

func scope(name string, l tenant.Limits) Scope { return Scope{Name: name, Limits: l} }

const (
	day   = 24 * time.Hour
	toJan = 17*day + 14*time.Hour // from base to the next month
)

func runSuite(t *testing.T, newLimiter newLimiterFunc) {
	key := func(l tenant.Limits) Scope { return scope("key:k1", l) }
	cases := []struct {
		name   string
		scopes []Scope
		steps  []step
	}{
		{
			name:   "no scopes",
			scopes: []Scope{},
			steps:  []step{{tokens: 1 << 40, want: outcome{Allowed: true}}},
		},
		{
			name:   "rpm limit and retry-after",
			scopes: []Scope{key(tenant.Limits{RPM: 3})},
			steps: []step{
				{want: outcome{Allowed: true, Requests: Header{3, 2, 20 * time.Second}}},
				{want: outcome{Allowed: true, Requests: Header{3, 1, 40 * time.Second}}},
				{want: outcome{Allowed: true, Requests: Header{3, 0, 60 * time.Second}}},
				{want: outcome{Code: CodeRateLimited, Kind: KindRequests, Scope: "key:k1", RetryAfter: 20 * time.Second, Requests: Header{3, 0, 60 * time.Second}}},
				{at: 19 * time.Second, want: outcome{Code: CodeRateLimited, Kind: KindRequests, Scope: "key:k1", RetryAfter: time.Second, Requests: Header{3, 0, 41 * time.Second}}},
				{at: 20 * time.Second, want: outcome{Allowed: true, Requests: Header{3, 0, 60 * time.Second}}},
				{at: 60 * time.Second, want: outcome{Allowed: true, Requests: Header{3, 1, 40 * time.Second}}},
			},
		},
		{
			name:   "tpm reserve then refund lets the next request in",
			scopes: []Scope{key(tenant.Limits{TPM: 1000})},
			steps: []step{
				{tokens: 600, settle: &use{tokens: 100}, want: outcome{Allowed: true, Tokens: Header{1000, 400, 36 * time.Second}}},
				{tokens: 600, want: outcome{Allowed: true, Tokens: Header{1000, 300, 42 * time.Second}}},
				{tokens: 600, want: outcome{Code: CodeRateLimited, Kind: KindTokens, Scope: "key:k1", RetryAfter: 18 * time.Second, Tokens: Header{1000, 300, 42 * time.Second}}},
			},
		},
		{
			name:   "tpm without a refund refuses",
			scopes: []Scope{key(tenant.Limits{TPM: 1000})},
			steps: []step{
				{tokens: 600, settle: &use{tokens: 600}, want: outcome{Allowed: true, Tokens: Header{1000, 400, 36 * time.Second}}},
				{tokens: 600, want: outcome{Code: CodeRateLimited, Kind: KindTokens, Scope: "key:k1", RetryAfter: 12 * time.Second, Tokens: Header{1000, 400, 36 * time.Second}}},
			},
		},
		{
			name:   "tpm overrun counts",
			scopes: []Scope{key(tenant.Limits{TPM: 1000})},
			steps: []step{
				{tokens: 100, settle: &use{tokens: 1600}, want: outcome{Allowed: true, Tokens: Header{1000, 900, 6 * time.Second}}},
				{want: outcome{Code: CodeRateLimited, Kind: KindTokens, Scope: "key:k1", RetryAfter: 36 * time.Second, Tokens: Header{1000, 0, 96 * time.Second}}},
				{at: 36 * time.Second, want: outcome{Allowed: true, Tokens: Header{1000, 0, 60 * time.Second}}},
				{at: 36 * time.Second, tokens: 1, want: outcome{Code: CodeRateLimited, Kind: KindTokens, Scope: "key:k1", RetryAfter: 60 * time.Millisecond, Tokens: Header{1000, 0, 60 * time.Second}}},
			},
		},
		{
			name:   "a request of no tokens takes a request and no tokens",
			scopes: []Scope{key(tenant.Limits{RPM: 2, TPM: 1000})},
			steps: []step{
				{settle: &use{}, want: outcome{Allowed: true, Requests: Header{2, 1, 30 * time.Second}, Tokens: Header{1000, 1000, 0}}},
				{tokens: 1000, want: outcome{Allowed: true, Requests: Header{2, 0, time.Minute}, Tokens: Header{1000, 0, time.Minute}}},
				{want: outcome{Code: CodeRateLimited, Kind: KindRequests, Scope: "key:k1", RetryAfter: 30 * time.Second, Requests: Header{2, 0, time.Minute}, Tokens: Header{1000, 0, time.Minute}}},
			},
		},
		{
			name:   "a request larger than the tpm can never pass",
			scopes: []Scope{key(tenant.Limits{TPM: 1000})},
			steps: []step{
				{tokens: 1001, want: outcome{Code: CodeRateLimited, Kind: KindTokens, Scope: "key:k1", RetryAfter: time.Minute, TooLarge: true, Tokens: Header{1000, 1000, 0}}},
				{tokens: 1000, want: outcome{Allowed: true, Tokens: Header{1000, 0, time.Minute}}},
			},
		},
		{
			name: "a refused tenant level takes nothing from the key",
			scopes: []Scope{
				key(tenant.Limits{RPM: 10, TPM: 10000}),
				scope("tenant:acme", tenant.Limits{RPM: 1}),
			},
			steps: []step{
				{tokens: 100, want: outcome{Allowed: true, Requests: Header{1, 0, time.Minute}, Tokens: Header{10000, 9900, 600 * time.Millisecond}}},
				{tokens: 100, want: outcome{Code: CodeRateLimited, Kind: KindRequests, Scope: "tenant:acme", RetryAfter: time.Minute, Requests: Header{1, 0, time.Minute}, Tokens: Header{10000, 9900, 600 * time.Millisecond}}},
				{tokens: 100, scopes: []Scope{key(tenant.Limits{RPM: 10, TPM: 10000})}, want: outcome{Allowed: true, Requests: Header{10, 8, 12 * time.Second}, Tokens: Header{10000, 9800, 1200 * time.Millisecond}}},
			},
		},
		{
			name: "a tenant level out of tokens takes nothing from the key or the org",
			scopes: []Scope{
				key(tenant.Limits{RPM: 10, TPM: 10000}),
				scope("tenant:acme", tenant.Limits{RPM: 100}),
				scope("tenant:acme/search", tenant.Limits{TPM: 500}),
			},
			steps: []step{
				{tokens: 400, want: outcome{Allowed: true, Requests: Header{10, 9, 6 * time.Second}, Tokens: Header{500, 100, 48 * time.Second}}},
				{tokens: 400, want: outcome{Code: CodeRateLimited, Kind: KindTokens, Scope: "tenant:acme/search", RetryAfter: 36 * time.Second, Requests: Header{10, 9, 6 * time.Second}, Tokens: Header{500, 100, 48 * time.Second}}},
				{tokens: 400, scopes: []Scope{key(tenant.Limits{RPM: 10, TPM: 10000}), scope("tenant:acme", tenant.Limits{RPM: 100})}, want: outcome{Allowed: true, Requests: Header{10, 8, 12 * time.Second}, Tokens: Header{10000, 9200, 4800 * time.Millisecond}}},
			},
		},
		{
			name: "headers show the tightest scope of each kind",
			scopes: []Scope{
				key(tenant.Limits{RPM: 100, TPM: 1000}),
				scope("tenant:acme", tenant.Limits{RPM: 5, TPM: 100000}),
			},
			steps: []step{
				{tokens: 10, want: outcome{Allowed: true, Requests: Header{5, 4, 12 * time.Second}, Tokens: Header{1000, 990, 600 * time.Millisecond}}},
			},
		},
		{
			name:   "token budget spent refuses with insufficient_quota until the day ends",
			scopes: []Scope{key(tenant.Limits{BudgetTokens: 1000, Period: tenant.PeriodDay})},
			steps: []step{
				{tokens: 10, settle: &use{tokens: 999}, want: outcome{Allowed: true}},
				{tokens: 10, settle: &use{tokens: 1}, want: outcome{Allowed: true}},
				{at: time.Hour, want: outcome{Code: CodeInsufficientQuota, Kind: KindBudgetTokens, Scope: "key:k1", RetryAfter: 13 * time.Hour}},
				{at: 14 * time.Hour, want: outcome{Allowed: true}},
			},
		},
		{
			name:   "dollar budget spent refuses with insufficient_quota until the month ends",
			scopes: []Scope{key(tenant.Limits{BudgetUSD: 1})},
			steps: []step{
				{settle: &use{tokens: 50, usd: 0.75}, want: outcome{Allowed: true}},
				{settle: &use{tokens: 50, usd: 0.25}, want: outcome{Allowed: true}},
				{want: outcome{Code: CodeInsufficientQuota, Kind: KindBudgetUSD, Scope: "key:k1", RetryAfter: toJan}},
			},
		},
		{
			name: "a spent budget outranks a rate limit",
			scopes: []Scope{
				key(tenant.Limits{RPM: 1}),
				scope("tenant:acme", tenant.Limits{BudgetTokens: 10, Period: tenant.PeriodDay}),
			},
			steps: []step{
				{settle: &use{tokens: 10}, want: outcome{Allowed: true, Requests: Header{1, 0, time.Minute}}},
				{want: outcome{Code: CodeInsufficientQuota, Kind: KindBudgetTokens, Scope: "tenant:acme", RetryAfter: 14 * time.Hour, Requests: Header{1, 0, time.Minute}}},
			},
		},
		{
			name:   "budget resets at the month boundary",
			scopes: []Scope{key(tenant.Limits{BudgetTokens: 1000})},
			steps: []step{
				{at: toJan - time.Minute, settle: &use{tokens: 1000}, want: outcome{Allowed: true}},
				{at: toJan - 30*time.Second, want: outcome{Code: CodeInsufficientQuota, Kind: KindBudgetTokens, Scope: "key:k1", RetryAfter: 30 * time.Second}},
				{at: toJan, settle: &use{tokens: 999}, want: outcome{Allowed: true}},
				{at: toJan + time.Hour, settle: &use{tokens: 1}, want: outcome{Allowed: true}},
				{at: toJan + 2*time.Hour, want: outcome{Code: CodeInsufficientQuota, Kind: KindBudgetTokens, Scope: "key:k1", RetryAfter: 31*day - 2*time.Hour}},
			},
		},
		{
			name:   "a request admitted before the boundary is billed to its own period",
			scopes: []Scope{key(tenant.Limits{BudgetTokens: 1000, Period: tenant.PeriodDay})},
			steps: []step{
				{at: 14*time.Hour - time.Second, settle: &use{tokens: 5000}, want: outcome{Allowed: true}},
				{at: 14 * time.Hour, want: outcome{Allowed: true}},
			},
		},
		{
			name:   "seed counts spend from before start-up",
			scopes: []Scope{key(tenant.Limits{BudgetTokens: 1000})},
			steps: []step{
				{seed: &seed{scope: "key:k1", period: tenant.PeriodMonth, tokens: 900}, settle: &use{tokens: 99}, want: outcome{Allowed: true}},
				{settle: &use{tokens: 1}, want: outcome{Allowed: true}},
				{want: outcome{Code: CodeInsufficientQuota, Kind: KindBudgetTokens, Scope: "key:k1", RetryAfter: toJan}},
			},
		},
		{
			name:   "seed never lowers spend",
			scopes: []Scope{key(tenant.Limits{BudgetTokens: 1000})},
			steps: []step{
				{seed: &seed{scope: "key:k1", tokens: 1000}, want: outcome{Code: CodeInsufficientQuota, Kind: KindBudgetTokens, Scope: "key:k1", RetryAfter: toJan}},
				{seed: &seed{scope: "key:k1", tokens: 10}, want: outcome{Code: CodeInsufficientQuota, Kind: KindBudgetTokens, Scope: "key:k1", RetryAfter: toJan}},
			},
		},
		{
			name:   "seed of dollars",
			scopes: []Scope{key(tenant.Limits{BudgetUSD: 2, Period: tenant.PeriodDay})},
			steps: []step{
				{seed: &seed{scope: "key:k1", period: tenant.PeriodDay, usd: 1.5}, settle: &use{usd: 0.25}, want: outcome{Allowed: true}},
				{settle: &use{usd: 0.25}, want: outcome{Allowed: true}},
				{want: outcome{Code: CodeInsufficientQuota, Kind: KindBudgetUSD, Scope: "key:k1", RetryAfter: 14 * time.Hour}},
			},
		},
		{
			name:   "seed of another period changes nothing now",
			scopes: []Scope{key(tenant.Limits{BudgetTokens: 1000, Period: tenant.PeriodDay})},
			steps: []step{
				{seed: &seed{scope: "key:k1", period: tenant.PeriodDay, tokens: 5000, at: -day}, want: outcome{Allowed: true}},
				{at: day, seed: &seed{scope: "key:k1", period: tenant.PeriodDay, tokens: 5000, at: day}, want: outcome{Code: CodeInsufficientQuota, Kind: KindBudgetTokens, Scope: "key:k1", RetryAfter: 14 * time.Hour}},
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := newLimiter(t)
			for i, s := range tc.steps {
				if s.seed != nil {
					if err := l.Seed(t.Context(), s.seed.scope, s.seed.period, s.seed.tokens, s.seed.usd, base.Add(s.seed.at)); err != nil {
						t.Fatalf("step %d: Seed: %v", i, err)
					}
				}
				scopes := tc.scopes
				if s.scopes != nil {
					scopes = s.scopes
				}
				d, err := l.Admit(t.Context(), Request{Scopes: scopes, Tokens: s.tokens, Now: base.Add(s.at)})
				if err != nil {
					t.Fatalf("step %d: Admit: %v", i, err)
				}
				if diff := cmp.Diff(s.want, outcomeOf(d), closeDurations); diff != "" {
					t.Fatalf("step %d: decision (-want +got):\n%s", i, diff)
				}
				if s.settle != nil {
					settleNow(t, l, d.Reservation, s.settle.tokens, s.settle.usd)
				}
			}
		})
	}
}

// runCombinedRPM has goroutines spread requests over limiters (one per
// gateway process, sharing counters) and checks that together they admit
// the one limit, within 5%.
func runCombinedRPM(t *testing.T, limiters []Limiter) {
	const (
		rpm        = 200
		goroutines = 8
		perG       = 60 // 480 attempts for 200 places
	)
	scopes := []Scope{
		scope("key:shared", tenant.Limits{RPM: rpm * 10}),
		scope("tenant:acme", tenant.Limits{RPM: rpm}),
	}
	burst := func(now time.Time) int64 {
		var allowed atomic.Int64
		var wg sync.WaitGroup
		for g := range goroutines {
			wg.Go(func() {
				for i := range perG {
					l := limiters[(g+i)%len(limiters)]
					d, err := l.Admit(t.Context(), Request{Scopes: scopes, Tokens: 1, Now: now})
					if err != nil {
						t.Errorf("Admit: %v", err)
						return
					}
					if d.Allowed {
						allowed.Add(1)
					}
				}
			})
		}
		wg.Wait()
		return allowed.Load()
	}
	for _, tc := range []struct {
		at   time.Duration
		want int64
	}{
		{at: 0, want: rpm},                      // a full bucket
		{at: 30 * time.Second, want: rpm / 2},   // half a minute refills half
		{at: 150 * time.Second, want: rpm},      // idle long enough to refill all
		{at: 150 * time.Second, want: 0},        // and nothing more at that instant
		{at: 153 * time.Second, want: rpm / 20}, // three seconds refill a twentieth
	} {
		got := burst(base.Add(tc.at))
		tolerance := int64(rpm / 20) // 5% of the limit
		if got < tc.want-tolerance || got > tc.want+tolerance {
			t.Errorf("at +%v: %d admitted, want %d ± %d", tc.at, got, tc.want, tolerance)
		}
	}
}
