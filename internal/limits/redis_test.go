// Redis against the shared suite, two limiters sharing one Redis as two
// gateway processes would, failing open and closed when Redis is away, and
// the batching of settlements.
package limits

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	"github.com/redis/go-redis/v9"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/tenant"
)

// prefixSeq tells apart the key prefixes of tests in one run.
var prefixSeq atomic.Int64

// redisURL is the test Redis, or the test is skipped.
func redisURL(t testing.TB) string {
	t.Helper()
	u := os.Getenv("LLMGW_TEST_REDIS")
	if u == "" {
		t.Skip("LLMGW_TEST_REDIS is not set (e.g. redis://127.0.0.1:6379/0); skipping Redis tests")
	}
	return u
}

// newRedisClient connects a client of its own, as a separate gateway
// process would have, and closes it when the test ends.
func newRedisClient(t testing.TB) *redis.Client {
	t.Helper()
	opts, err := redis.ParseURL(redisURL(t))
	if err != nil {
		t.Fatalf("LLMGW_TEST_REDIS: %v", err)
	}
	c := redis.NewClient(opts)
	t.Cleanup(func() { c.Close() })
	return c
}

// testPrefix is a key prefix no other test uses; every key under it is
// deleted when the test ends.
func testPrefix(t testing.TB) string {
	t.Helper()
	p := fmt.Sprintf("{llmgw-test-%d-%d}:", os.Getpid(), prefixSeq.Add(1))
	c := newRedisClient(t)
	t.Cleanup(func() {
		ctx := context.Background()
		iter := c.Scan(ctx, 0, p+"*", 1000).Iterator()
		for iter.Next(ctx) {
			c.Del(ctx, iter.Val())
		}
		if err := iter.Err(); err != nil {
			t.Logf("cleaning up %s: %v", p, err)
		}
	})
	return p
}

func newTestRedis(t testing.TB) *Redis {
	return NewRedis(newRedisClient(t), RedisOptions{Prefix: testPrefix(t), Timeout: time.Second})
}

func TestRedis(t *testing.T) {
	runSuite(t, func(t *testing.T) Limiter { return newTestRedis(t) })
}

// TestRedisCombinedRPM is two gateway processes, each with its own client,
// holding one limit together.
func TestRedisCombinedRPM(t *testing.T) {
	prefix := testPrefix(t)
	a := NewRedis(newRedisClient(t), RedisOptions{Prefix: prefix, Timeout: time.Second})
	b := NewRedis(newRedisClient(t), RedisOptions{Prefix: prefix, Timeout: time.Second})
	runCombinedRPM(t, []Limiter{a, b})
}

// TestRedisKeys checks the counters Redis holds and that each expires.
func TestRedisKeys(t *testing.T) {
	c := newRedisClient(t)
	prefix := testPrefix(t)
	r := NewRedis(c, RedisOptions{Prefix: prefix, Timeout: time.Second})
	lim := tenant.Limits{RPM: 10, TPM: 1000, BudgetTokens: 1 << 20}
	d, err := r.Admit(t.Context(), Request{Scopes: []Scope{{Name: "key:k1", Limits: lim}}, Tokens: 100, Now: base})
	if err != nil || !d.Allowed {
		t.Fatalf("Admit: %+v, %v", d, err)
	}
	settleNow(t, r, d.Reservation, 150, 0.5)

	for _, tc := range []struct {
		key    string
		field  string
		want   string
		maxTTL time.Duration
	}{
		{key: "rpm:key:k1", field: "l", want: "1", maxTTL: 2 * time.Minute},
		{key: "tpm:key:k1", field: "l", want: "150", maxTTL: 2 * time.Minute},
		{key: "budget:key:k1:2026-12-01", field: "t", want: "150", maxTTL: toJan + budgetGrace},
		{key: "budget:key:k1:2026-12-01", field: "u", want: "0.5", maxTTL: toJan + budgetGrace},
	} {
		got, err := c.HGet(t.Context(), prefix+tc.key, tc.field).Result()
		if err != nil || got != tc.want {
			t.Errorf("%s %s = %q, %v; want %q", tc.key, tc.field, got, err, tc.want)
		}
		ttl, err := c.PTTL(t.Context(), prefix+tc.key).Result()
		if err != nil || ttl <= 0 || ttl > tc.maxTTL {
			t.Errorf("%s expires in %v, %v; want in (0, %v]", tc.key, ttl, err, tc.maxTTL)
		}
	}
}

// unreachable is a limiter on a Redis that refuses connections, with its
// metrics in a registry of its own.
func unreachable(t *testing.T, failOpen bool) (*Redis, *prometheus.Registry) {
	reg := prometheus.NewPedanticRegistry()
	return NewRedis(unreachableClient(t), RedisOptions{FailOpen: failOpen, Registerer: reg}), reg
}

// unreachableClient is a client of a Redis address that refuses
// connections, and does not retry.
func unreachableClient(t *testing.T) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialerRetries: 1, DialTimeout: 50 * time.Millisecond})
	t.Cleanup(func() { c.Close() })
	return c
}

func TestRedisUnreachable(t *testing.T) {
	req := Request{Scopes: []Scope{{Name: "key:k1", Limits: tenant.Limits{RPM: 1, TPM: 100}}}, Tokens: 10, Now: base}
	for _, tc := range []struct {
		name      string
		failOpen  bool
		wantAllow bool
		wantErr   error
		metrics   string
	}{
		{
			name: "fail open lets requests through without headers", failOpen: true, wantAllow: true,
			metrics: `
# HELP llmgw_limits_redis_errors_total Admissions Redis did not answer, by whether the request was let through (open) or refused (closed).
# TYPE llmgw_limits_redis_errors_total counter
llmgw_limits_redis_errors_total{decision="closed"} 0
llmgw_limits_redis_errors_total{decision="open"} 2
`,
		},
		{
			name: "fail closed refuses with ErrUnavailable", failOpen: false, wantErr: ErrUnavailable,
			metrics: `
# HELP llmgw_limits_redis_errors_total Admissions Redis did not answer, by whether the request was let through (open) or refused (closed).
# TYPE llmgw_limits_redis_errors_total counter
llmgw_limits_redis_errors_total{decision="closed"} 2
llmgw_limits_redis_errors_total{decision="open"} 0
`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, reg := unreachable(t, tc.failOpen)
			for range 2 {
				d, err := r.Admit(t.Context(), req)
				if !errors.Is(err, tc.wantErr) || (err == nil) != (tc.wantErr == nil) {
					t.Fatalf("Admit error = %v, want %v", err, tc.wantErr)
				}
				if d.Allowed != tc.wantAllow || d.Requests != (Header{}) || d.Tokens != (Header{}) {
					t.Fatalf("Admit = %+v, want allowed %v and no headers", outcomeOf(d), tc.wantAllow)
				}
				if tc.wantAllow && d.Reservation.Tokens() != 0 {
					t.Fatalf("failing open reserved %d tokens, want 0", d.Reservation.Tokens())
				}
			}
			if err := testutil.GatherAndCompare(reg, strings.NewReader(tc.metrics), "llmgw_limits_redis_errors_total"); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestRedisAdmitAbandoned checks that a caller that gave up is told so,
// and is not counted as Redis failing.
func TestRedisAdmitAbandoned(t *testing.T) {
	r, reg := unreachable(t, false)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := r.Admit(ctx, Request{Scopes: []Scope{{Name: "key:k1", Limits: tenant.Limits{RPM: 1}}}, Now: base})
	if !errors.Is(err, context.Canceled) || errors.Is(err, ErrUnavailable) {
		t.Fatalf("Admit error = %v, want context.Canceled and not ErrUnavailable", err)
	}
	want := `
# HELP llmgw_limits_redis_errors_total Admissions Redis did not answer, by whether the request was let through (open) or refused (closed).
# TYPE llmgw_limits_redis_errors_total counter
llmgw_limits_redis_errors_total{decision="closed"} 0
llmgw_limits_redis_errors_total{decision="open"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "llmgw_limits_redis_errors_total"); err != nil {
		t.Error(err)
	}
}

// TestRedisSettleUnreachable checks that settlements Redis never took are
// counted, and that Settle itself returns at once.
func TestRedisSettleUnreachable(t *testing.T) {
	r, reg := unreachable(t, true)
	d, _ := r.Admit(t.Context(), Request{Scopes: []Scope{{Name: "key:k1", Limits: tenant.Limits{TPM: 100}}}, Tokens: 10, Now: base})
	for range 3 {
		r.Settle(t.Context(), d.Reservation, 10, 0.01)
	}
	if err := r.Flush(t.Context()); err == nil {
		t.Fatal("Flush to an unreachable Redis: no error")
	}
	want := `
# HELP llmgw_limits_settle_dropped_total Settlements of used tokens and cost that never reached Redis.
# TYPE llmgw_limits_settle_dropped_total counter
llmgw_limits_settle_dropped_total 3
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "llmgw_limits_settle_dropped_total"); err != nil {
		t.Error(err)
	}
}

// TestRedisSettlesNothingForNothing: a reservation of no tokens settled
// with nothing used, a count of a prompt's tokens, sends nothing to Redis.
func TestRedisSettlesNothingForNothing(t *testing.T) {
	r := NewRedis(unreachableClient(t), RedisOptions{})
	var sent []settlement
	r.send = func(_ context.Context, batch []settlement) error {
		sent = append(sent, batch...)
		return nil
	}
	scopes := []Scope{{Name: "key:k1", Limits: tenant.Limits{RPM: 10, TPM: 100, BudgetTokens: 1000}}}
	none := newReservation(Request{Scopes: scopes, Now: base}, 0)
	some := newReservation(Request{Scopes: scopes, Tokens: 5, Now: base}, 5)
	r.Settle(t.Context(), none, 0, 0)
	r.Settle(t.Context(), none, 3, 0) // used what it did not reserve: settled
	r.Settle(t.Context(), some, 0, 0) // gives its tokens back: settled
	if err := r.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	if len(sent) != 2 || sent[0].used != 3 || sent[1].res.tokens != 5 {
		t.Errorf("sent %+v; want the two settlements that change a counter", sent)
	}
}

func TestRedisMetricsLint(t *testing.T) {
	_, reg := unreachable(t, true)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	problems, err := promlint.NewWithMetricFamilies(mfs).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
}

// TestRedisRunBatches checks, on a fake clock, that Run sends settlements
// within flushEvery, at once when a batch fills, and what is left when it
// stops.
func TestRedisRunBatches(t *testing.T) {
	c := unreachableClient(t) // outside the bubble: the client starts goroutines of its own
	res := newReservation(Request{Scopes: []Scope{{Name: "key:k1"}}, Tokens: 1, Now: base}, 1)
	synctest.Test(t, func(t *testing.T) {
		r := NewRedis(c, RedisOptions{})
		sent := make(chan int, 16)
		r.send = func(_ context.Context, batch []settlement) error {
			sent <- len(batch)
			return nil
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() { done <- r.Run(ctx) }()

		start := time.Now()
		r.Settle(ctx, res, 1, 0)
		r.Settle(ctx, res, 1, 0)
		if got := <-sent; got != 2 || time.Since(start) != flushEvery {
			t.Errorf("first batch: %d settlements after %v, want 2 after %v", got, time.Since(start), flushEvery)
		}

		start = time.Now()
		for range flushBatch {
			r.Settle(ctx, res, 1, 0)
		}
		if got := <-sent; got != flushBatch || time.Since(start) != 0 {
			t.Errorf("full batch: %d settlements after %v, want %d at once", got, time.Since(start), flushBatch)
		}

		r.Settle(ctx, res, 1, 0)
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		if got := len(sent); got != 1 {
			t.Fatalf("after stopping: %d batches sent, want 1", got)
		}
		if got := <-sent; got != 1 {
			t.Errorf("last batch: %d settlements, want 1", got)
		}
	})
}
