// How much admission and settling cost: in process, and one round trip to
// Redis.
package limits

import (
	"testing"
	"time"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/tenant"
)

// benchScopes is a key and two tenant levels, every limit set, none ever
// reached.
var benchScopes = []Scope{
	{Name: "key:k1", Limits: tenant.Limits{RPM: 1 << 40, TPM: 1 << 50, BudgetTokens: 1 << 60, BudgetUSD: 1e12}},
	{Name: "tenant:acme", Limits: tenant.Limits{RPM: 1 << 40, TPM: 1 << 50, BudgetUSD: 1e12}},
	{Name: "tenant:acme/search", Limits: tenant.Limits{RPM: 1 << 40, TPM: 1 << 50, BudgetTokens: 1 << 60, Period: tenant.PeriodDay}},
}

func benchAdmitSettle(b *testing.B, l Limiter) {
	b.ReportAllocs()
	now := base
	for b.Loop() {
		now = now.Add(time.Microsecond)
		d, err := l.Admit(b.Context(), Request{Scopes: benchScopes, Tokens: 500, Now: now})
		if err != nil || !d.Allowed {
			b.Fatalf("Admit: %+v, %v", outcomeOf(d), err)
		}
		l.Settle(b.Context(), d.Reservation, 300, 0.001)
	}
}

// BenchmarkLocalAdmit is one admission and its settlement, in process.
func BenchmarkLocalAdmit(b *testing.B) {
	benchAdmitSettle(b, NewLocal())
}

// BenchmarkLocalAdmitParallel is the same from every core at once, on
// separate keys sharing the tenant levels.
func BenchmarkLocalAdmitParallel(b *testing.B) {
	l := NewLocal()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		now := base
		for pb.Next() {
			now = now.Add(time.Microsecond)
			d, err := l.Admit(b.Context(), Request{Scopes: benchScopes, Tokens: 500, Now: now})
			if err != nil || !d.Allowed {
				b.Errorf("Admit: %+v, %v", outcomeOf(d), err)
				return
			}
			l.Settle(b.Context(), d.Reservation, 300, 0.001)
		}
	})
}

// BenchmarkRedisAdmit is one admission, a round trip to Redis, and its
// settlement queued; batches are sent as they fill.
func BenchmarkRedisAdmit(b *testing.B) {
	r := newTestRedis(b)
	ctx := b.Context()
	go r.Run(ctx)
	benchAdmitSettle(b, r)
}
