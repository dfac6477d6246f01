// Local against the shared suite, plus what only Local has: the sweep of
// idle counters.
package limits

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/tenant"
)

func TestLocal(t *testing.T) {
	runSuite(t, func(*testing.T) Limiter { return NewLocal() })
}

func TestLocalCombinedRPM(t *testing.T) {
	runCombinedRPM(t, []Limiter{NewLocal()})
}

func TestLocalAdmitNeedsTime(t *testing.T) {
	if _, err := NewLocal().Admit(t.Context(), Request{Scopes: []Scope{{Name: "key:k1"}}}); err == nil {
		t.Fatal("Admit without Now: no error")
	}
}

// TestLocalSweep checks that idle counters are dropped once their buckets
// have drained and their budget period has ended, and not before.
func TestLocalSweep(t *testing.T) {
	l := NewLocal()
	admit := func(name string, lim tenant.Limits, at time.Duration) Decision {
		t.Helper()
		d, err := l.Admit(t.Context(), Request{Scopes: []Scope{{Name: name, Limits: lim}}, Tokens: 10, Now: base.Add(at)})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	kept := func() []string {
		l.mu.Lock()
		defer l.mu.Unlock()
		var names []string
		for _, name := range []string{"key:budget", "key:overrun", "key:rate"} {
			if _, ok := l.scopes[name]; ok {
				names = append(names, name)
			}
		}
		return names
	}
	day := tenant.Limits{RPM: 10, TPM: 100, Period: tenant.PeriodDay}

	admit("key:rate", tenant.Limits{RPM: 10, TPM: 100}, 0) // reserved, never settled: spends nothing
	d := admit("key:budget", day, 0)
	l.Settle(t.Context(), d.Reservation, 50, 0) // spend until the day ends, 14h on

	admit("key:probe", tenant.Limits{}, 5*time.Minute)
	if diff := cmp.Diff([]string{"key:budget"}, kept()); diff != "" {
		t.Errorf("at +5m (-want +got):\n%s", diff)
	}

	d = admit("key:overrun", day, 14*time.Hour-time.Minute)
	l.Settle(t.Context(), d.Reservation, 1000, 0) // 1000 of a TPM of 100: ten minutes to drain

	admit("key:probe", tenant.Limits{}, 14*time.Hour+5*time.Minute)
	if diff := cmp.Diff([]string{"key:overrun"}, kept()); diff != "" {
		t.Errorf("at +14h5m (-want +got):\n%s", diff)
	}
	admit("key:probe", tenant.Limits{}, 14*time.Hour+10*time.Minute)
	if diff := cmp.Diff([]string(nil), kept()); diff != "" {
		t.Errorf("at +14h10m (-want +got):\n%s", diff)
	}
}
