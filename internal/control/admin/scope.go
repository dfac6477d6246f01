package admin

// Scoping: what an identity's roles let it read of the keys, tenant
// limits, usage and requests in the store, and change of them. The admin
// API and the console both read through these, so that a tenant role sees
// its subtree alone on each: in lists, in totals and in lookups by id,
// where a key outside it answers as a missing one.

import (
	"cmp"
	"context"
	"errors"
	"net/http"
	"slices"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/access"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/tenant"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/usage"
	"gitea.mynodes.xyz/ilker/llmgw/internal/openai"
)

// ErrForbidden is a change the identity's roles do not allow, on
// something they may read.
var ErrForbidden = errors.New("admin: the roles held do not allow this")

// forbiddenMessage is the refusal of a request whose roles do not allow
// it; it says nothing of what the path holds.
const forbiddenMessage = "Your roles do not allow this; nothing was changed."

// forbidden answers 403 with forbiddenMessage.
func forbidden(w http.ResponseWriter) { openai.WriteError(w, openai.Forbidden(forbiddenMessage)) }

// VisibleKeys is the keys of ks id may read, in their order.
func VisibleKeys(ks []tenant.Key, id access.Identity) []tenant.Key {
	return visible(ks, id, func(k tenant.Key) string { return k.Tenant })
}

// VisibleLimits is the tenant levels of ls id may read, in their order.
func VisibleLimits(ls []tenant.TenantLimits, id access.Identity) []tenant.TenantLimits {
	return visible(ls, id, func(l tenant.TenantLimits) string { return l.Path })
}

// visible is the items of xs whose tenant path id may read, in their
// order; xs itself when id reads everything.
func visible[T any](xs []T, id access.Identity, path func(T) string) []T {
	if id.ReadsAll() {
		return xs
	}
	var out []T
	for _, x := range xs {
		if id.CanRead(path(x)) {
			out = append(out, x)
		}
	}
	return out
}

// RecordReader is where the scoped reads read the ledger; store.Store is
// one.
type RecordReader interface {
	UsageReader
	Records(ctx context.Context, q usage.RecordQuery) ([]usage.Record, error)
}

// Usage is the sums q asks for, over the subtrees id may read alone: q's
// tenant prefix narrowed to each of them, and their rows added up by
// group. A query that reaches none of them has no rows.
func Usage(ctx context.Context, st UsageReader, id access.Identity, q usage.Query) ([]usage.Row, error) {
	prefixes := id.Narrow(q.TenantPrefix)
	if len(prefixes) == 1 {
		q.TenantPrefix = prefixes[0]
		return st.Usage(ctx, q)
	}
	byGroup := map[string]*usage.Row{}
	for _, p := range prefixes {
		q.TenantPrefix = p
		rows, err := st.Usage(ctx, q)
		if err != nil {
			return nil, err
		}
		for _, r := range rows {
			sum := byGroup[r.Group]
			if sum == nil {
				sum = &usage.Row{Group: r.Group}
				byGroup[r.Group] = sum
			}
			sum.Requests += r.Requests
			sum.Errors += r.Errors
			sum.PromptTokens += r.PromptTokens
			sum.CompletionTokens += r.CompletionTokens
			sum.CachedTokens += r.CachedTokens
			sum.CostUSD += r.CostUSD
		}
	}
	out := make([]usage.Row, 0, len(byGroup))
	for _, r := range byGroup {
		out = append(out, *r)
	}
	slices.SortFunc(out, func(a, b usage.Row) int { return cmp.Compare(a.Group, b.Group) })
	return out, nil
}

// Records is the latest records q asks for, from the subtrees id may read
// alone, newest first, at most q's limit of them.
func Records(ctx context.Context, st RecordReader, id access.Identity, q usage.RecordQuery) ([]usage.Record, error) {
	prefixes := id.Narrow(q.TenantPrefix)
	if len(prefixes) == 1 {
		q.TenantPrefix = prefixes[0]
		return st.Records(ctx, q)
	}
	var out []usage.Record
	for _, p := range prefixes {
		q.TenantPrefix = p
		recs, err := st.Records(ctx, q)
		if err != nil {
			return nil, err
		}
		out = append(out, recs...)
	}
	slices.SortStableFunc(out, func(a, b usage.Record) int { return b.Time.Compare(a.Time) })
	if n := q.RecordLimit(); len(out) > n {
		out = out[:n]
	}
	return out, nil
}
