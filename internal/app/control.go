package app

// Adapters between the control plane and the router's small interfaces,
// and the start-up work that carries budgets across restarts.

import (
	"context"
	"errors"
	"time"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/admin"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/keys"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/store"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/tenant"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/usage"
	"gitea.mynodes.xyz/ilker/llmgw/internal/limits"
	"gitea.mynodes.xyz/ilker/llmgw/internal/openai"
)

// keyAuth answers the router's authentication with OpenAI-style errors: one
// message for every key that does not work, so that a caller learns nothing
// of which keys exist.
type keyAuth struct{ ring *keys.Keyring }

func (a keyAuth) Authenticate(ctx context.Context, plaintext string) (*tenant.Key, error) {
	k, err := a.ring.Authenticate(ctx, plaintext)
	switch {
	case err == nil:
		return k, nil
	case errors.Is(err, keys.ErrInvalidKey), errors.Is(err, keys.ErrRevoked), errors.Is(err, keys.ErrExpired):
		return nil, openai.Unauthorized("Incorrect, revoked or expired API key.")
	case ctx.Err() != nil:
		return nil, &openai.Error{Status: openai.StatusClientClosed, Message: "client went away", Err: err}
	}
	return nil, openai.Unavailable("API keys cannot be checked right now; try again shortly.", err)
}

// selfUsage gives the router a key's view of its own usage.
type selfUsage struct{ s *admin.Self }

func (u selfUsage) KeyUsage(ctx context.Context, k *tenant.Key, now time.Time) (any, error) {
	return u.s.KeyUsage(ctx, k, now)
}

// seedBudgets gives a process-local limiter what each key and tenant level
// has spent so far this period, from the ledger, so that a restart does not
// hand out a fresh budget.
func seedBudgets(ctx context.Context, st store.Store, l limits.Limiter, ring *keys.Keyring, now time.Time) error {
	ks, err := st.Keys(ctx)
	if err != nil {
		return err
	}
	var errs []error
	seed := func(scope string, lim tenant.Limits, q usage.Query) {
		if lim.BudgetTokens == 0 && lim.BudgetUSD == 0 {
			return
		}
		q.Since = tenant.PeriodStart(lim.Period, now)
		rows, err := st.Usage(ctx, q)
		if err != nil || len(rows) == 0 {
			errs = append(errs, err)
			return
		}
		r := rows[0]
		errs = append(errs, l.Seed(ctx, scope, lim.Period, r.PromptTokens+r.CompletionTokens, r.CostUSD, now))
	}
	for _, k := range ks {
		if k.Live(now) {
			seed("key:"+k.ID, k.Limits, usage.Query{KeyID: k.ID})
		}
	}
	tls, err := st.TenantLimits(ctx)
	errs = append(errs, err)
	seen := map[string]bool{}
	for _, tl := range tls {
		seen[tl.Path] = true
		seed("tenant:"+tl.Path, tl.Limits, usage.Query{TenantPrefix: tl.Path})
	}
	if ring != nil {
		for _, k := range ks {
			for _, tl := range ring.TenantLimits(k.Tenant) {
				if !seen[tl.Path] {
					seen[tl.Path] = true
					seed("tenant:"+tl.Path, tl.Limits, usage.Query{TenantPrefix: tl.Path})
				}
			}
		}
	}
	return errors.Join(errs...)
}
