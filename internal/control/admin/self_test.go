package admin

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/store"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/tenant"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/usage"
)

func TestSelfKeyUsage(t *testing.T) {
	st := store.NewMemory()
	ctx := context.Background()
	now := time.Date(2025, 6, 15, 12, 0, 0, 0, time.UTC)
	recs := []usage.Record{
		// key A this month and this day
		{ID: "1", Time: now.Add(-time.Hour), KeyID: "key_aaaaaaaaaaaa", Tenant: "acme", Model: "m", PromptTokens: 100, CompletionTokens: 50, CostUSD: 1.25, Status: 200},
		// key A this month, an earlier day
		{ID: "2", Time: time.Date(2025, 6, 2, 0, 0, 0, 0, time.UTC), KeyID: "key_aaaaaaaaaaaa", Tenant: "acme", Model: "m", PromptTokens: 10, CompletionTokens: 10, CostUSD: 0.5, Status: 200},
		// key A last month
		{ID: "3", Time: time.Date(2025, 5, 31, 23, 59, 0, 0, time.UTC), KeyID: "key_aaaaaaaaaaaa", Tenant: "acme", Model: "m", PromptTokens: 9999, Status: 200},
		// key B, same tenant, now
		{ID: "4", Time: now.Add(-time.Minute), KeyID: "key_bbbbbbbbbbbb", Tenant: "acme", Model: "m", PromptTokens: 7777, CostUSD: 99, Status: 200},
	}
	if err := st.AddUsage(ctx, recs); err != nil {
		t.Fatal(err)
	}
	self := NewSelf(st)
	i64 := func(v int64) *int64 { return &v }
	f64 := func(v float64) *float64 { return &v }

	tests := []struct {
		name string
		key  tenant.Key
		want KeyUsage
	}{
		{
			name: "monthly token budget",
			key:  tenant.Key{ID: "key_aaaaaaaaaaaa", Name: "a", Tenant: "acme", Priority: "standard", Limits: tenant.Limits{RPM: 5, BudgetTokens: 200}},
			want: KeyUsage{
				Object: "llmgw.key_usage", ID: "key_aaaaaaaaaaaa", Name: "a", Tenant: "acme", Priority: "standard",
				Limits: tenant.Limits{RPM: 5, BudgetTokens: 200},
				Period: "month", PeriodStart: time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC), PeriodEnd: time.Date(2025, 7, 1, 0, 0, 0, 0, time.UTC),
				Requests: 2, PromptTokens: 110, CompletionTokens: 60, CostUSD: 1.75,
				RemainingTokens: i64(30),
			},
		},
		{
			name: "daily dollar budget, overspent",
			key:  tenant.Key{ID: "key_aaaaaaaaaaaa", Tenant: "acme", Limits: tenant.Limits{BudgetUSD: 1, Period: "day"}},
			want: KeyUsage{
				Object: "llmgw.key_usage", ID: "key_aaaaaaaaaaaa", Tenant: "acme",
				Limits: tenant.Limits{BudgetUSD: 1, Period: "day"},
				Period: "day", PeriodStart: time.Date(2025, 6, 15, 0, 0, 0, 0, time.UTC), PeriodEnd: time.Date(2025, 6, 16, 0, 0, 0, 0, time.UTC),
				Requests: 1, PromptTokens: 100, CompletionTokens: 50, CostUSD: 1.25,
				RemainingUSD: f64(0),
			},
		},
		{
			name: "unused key",
			key:  tenant.Key{ID: "key_cccccccccccc", Tenant: "acme", Limits: tenant.Limits{BudgetTokens: 10, BudgetUSD: 2}},
			want: KeyUsage{
				Object: "llmgw.key_usage", ID: "key_cccccccccccc", Tenant: "acme",
				Limits: tenant.Limits{BudgetTokens: 10, BudgetUSD: 2},
				Period: "month", PeriodStart: time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC), PeriodEnd: time.Date(2025, 7, 1, 0, 0, 0, 0, time.UTC),
				RemainingTokens: i64(10), RemainingUSD: f64(2),
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := self.KeyUsage(ctx, &tt.key, now)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("KeyUsage (-want +got):\n%s", diff)
			}
		})
	}

	// Without budgets the remaining fields are JSON nulls.
	got, err := self.KeyUsage(ctx, &tenant.Key{ID: "key_aaaaaaaaaaaa", Tenant: "acme"}, now)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(got)
	var m map[string]any
	json.Unmarshal(b, &m)
	for _, f := range []string{"remaining_budget_tokens", "remaining_budget_usd"} {
		if v, ok := m[f]; !ok || v != nil {
			t.Errorf("%s = %v (present %v), want null", f, v, ok)
		}
	}

	st.Close()
	if _, err := self.KeyUsage(ctx, &tenant.Key{ID: "key_aaaaaaaaaaaa"}, now); err == nil {
		t.Errorf("KeyUsage with the store closed succeeded")
	}
}
