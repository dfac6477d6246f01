package admin

// Self: what an API key may read about itself on the API listener — its
// limits, its budget period, what it has used in it and what is left. Only
// ever its own data.

import (
	"context"
	"fmt"
	"time"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/tenant"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/usage"
)

// UsageReader is where Self reads usage sums; store.Store is one.
type UsageReader interface {
	Usage(ctx context.Context, q usage.Query) ([]usage.Row, error)
}

// Self answers a key's questions about itself.
type Self struct {
	st UsageReader
}

// NewSelf returns a Self reading usage from st.
func NewSelf(st UsageReader) *Self { return &Self{st: st} }

// KeyUsage is a key's view of itself: what it is, its limits, and its use
// of the current budget period.
type KeyUsage struct {
	Object   string        `json:"object"` // always "llmgw.key_usage"
	ID       string        `json:"id"`
	Name     string        `json:"name,omitempty"`
	Tenant   string        `json:"tenant"`
	Models   []string      `json:"models,omitempty"`
	Limits   tenant.Limits `json:"limits"`
	Priority string        `json:"priority,omitempty"`
	Expires  time.Time     `json:"expires,omitzero"`

	// Period is the budget period, day or month (UTC), and PeriodStart
	// and PeriodEnd bound the current one.
	Period      string    `json:"period"`
	PeriodStart time.Time `json:"period_start"`
	PeriodEnd   time.Time `json:"period_end"`

	// Usage in the current period.
	Requests         int64   `json:"requests"`
	PromptTokens     int64   `json:"prompt_tokens"`
	CompletionTokens int64   `json:"completion_tokens"`
	CostUSD          float64 `json:"cost_usd"`

	// RemainingTokens and RemainingUSD are what is left of the budgets this
	// period, never below zero; nil (null) when the key has no such budget.
	RemainingTokens *int64   `json:"remaining_budget_tokens"`
	RemainingUSD    *float64 `json:"remaining_budget_usd"`
}

// KeyUsage reports k's limits and its use of the budget period holding
// now. It reads only k's own records.
func (s *Self) KeyUsage(ctx context.Context, k *tenant.Key, now time.Time) (KeyUsage, error) {
	period := k.Limits.Period
	if period == "" {
		period = tenant.PeriodMonth
	}
	u := KeyUsage{
		Object:      "llmgw.key_usage",
		ID:          k.ID,
		Name:        k.Name,
		Tenant:      k.Tenant,
		Models:      k.Models,
		Limits:      k.Limits,
		Priority:    k.Priority,
		Expires:     k.Expires,
		Period:      period,
		PeriodStart: tenant.PeriodStart(period, now),
		PeriodEnd:   tenant.PeriodEnd(period, now),
	}
	rows, err := s.st.Usage(ctx, usage.Query{KeyID: k.ID, Since: u.PeriodStart, Until: u.PeriodEnd})
	if err != nil {
		return KeyUsage{}, fmt.Errorf("admin: reading usage of key %s: %w", k.ID, err)
	}
	for _, r := range rows { // one total row, or none before the first request
		u.Requests += r.Requests
		u.PromptTokens += r.PromptTokens
		u.CompletionTokens += r.CompletionTokens
		u.CostUSD += r.CostUSD
	}
	if b := k.Limits.BudgetTokens; b > 0 {
		left := max(b-u.PromptTokens-u.CompletionTokens, 0)
		u.RemainingTokens = &left
	}
	if b := k.Limits.BudgetUSD; b > 0 {
		left := max(b-u.CostUSD, 0)
		u.RemainingUSD = &left
	}
	return u, nil
}
