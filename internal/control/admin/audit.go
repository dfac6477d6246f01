package admin

// The audit trail as the admin API and the console write and read it:
// each change noted with who made it and from where, and the trail read
// back scoped like everything else.

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"time"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/access"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/audit"
	"gitea.mynodes.xyz/ilker/llmgw/internal/openai"
)

// AuditStore is where the trail is kept; store.Store is one.
type AuditStore interface {
	AddAudit(ctx context.Context, e audit.Entry) error
	Audit(ctx context.Context, q audit.Query) ([]audit.Entry, error)
}

// Note appends e to the trail for who, from r's address (r may be nil
// for the gateway's own changes), at now. The change is made already, so
// a failure to write is logged, not returned.
func Note(ctx context.Context, st AuditStore, log *slog.Logger, r *http.Request, who access.Identity, e audit.Entry, now time.Time) {
	e.Time, e.Subject, e.Email = now.UTC(), who.Subject, who.Email
	if r != nil {
		e.Source = SourceAddr(r)
	}
	if err := st.AddAudit(context.WithoutCancel(ctx), e); err != nil && log != nil {
		log.Error("audit: an entry could not be written", "action", string(e.Action), "actor", who.Actor(), "target", e.Target, "err", err)
	}
}

// SourceAddr is the address r came from, without its port.
func SourceAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// Audit is the latest entries q selects that who may read: a reader of
// everything reads the whole trail, a tenant role the entries of its
// subtrees alone, never those of no tenant (sign-ins, reloads). Newest
// first, at most q's limit.
func Audit(ctx context.Context, st AuditStore, who access.Identity, q audit.Query) ([]audit.Entry, error) {
	prefixes := who.Narrow(q.TenantPrefix)
	if len(prefixes) == 1 {
		q.TenantPrefix = prefixes[0]
		return st.Audit(ctx, q)
	}
	var out []audit.Entry
	for _, p := range prefixes {
		q.TenantPrefix = p
		es, err := st.Audit(ctx, q)
		if err != nil {
			return nil, err
		}
		out = append(out, es...)
	}
	slices.SortStableFunc(out, func(a, b audit.Entry) int { return b.Time.Compare(a.Time) })
	if n := q.EntryLimit(); len(out) > n {
		out = out[:n]
	}
	return out, nil
}

// limitsDetail is tenant limits in words, for an entry's detail.
func limitsDetail(rpm, tpm, budgetTokens int64, budgetUSD float64, period string) string {
	s := ""
	add := func(v string) {
		if s != "" {
			s += ", "
		}
		s += v
	}
	if rpm > 0 {
		add("rpm " + strconv.FormatInt(rpm, 10))
	}
	if tpm > 0 {
		add("tpm " + strconv.FormatInt(tpm, 10))
	}
	if budgetTokens > 0 {
		add("budget_tokens " + strconv.FormatInt(budgetTokens, 10))
	}
	if budgetUSD > 0 {
		add("budget_usd " + strconv.FormatFloat(budgetUSD, 'f', -1, 64))
	}
	if s == "" {
		return "removed"
	}
	if period != "" {
		add("period " + period)
	}
	return s
}

// ParseAuditQuery reads an audit query from URL parameters, as the admin
// API and the console take them: action (one of audit.Actions), actor (a
// subject or an email), tenant (a path; its descendants are included),
// since (as usage's) and limit. An error is a 400 naming the parameter.
func ParseAuditQuery(get func(string) string, now time.Time) (audit.Query, *openai.Error) {
	q := audit.Query{Until: now, Action: audit.Action(get("action")), Actor: get("actor")}
	if q.Action != "" && !slices.Contains(audit.Actions, q.Action) {
		return q, openai.BadRequest("action", "action: must be one of the audit trail's actions, such as key.create or signin.")
	}
	u, e := ParseUsageQuery(func(name string) string {
		if name == "tenant" || name == "since" {
			return get(name)
		}
		return ""
	}, now)
	if e != nil {
		return q, e
	}
	q.TenantPrefix, q.Since = u.TenantPrefix, u.Since
	if l := get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n <= 0 {
			return q, openai.BadRequest("limit", "limit: must be a positive whole number.")
		}
		q.Limit = n
	}
	return q, nil
}

// auditList is the audit route's JSON: the entries, newest first.
func (a *api) auditList(w http.ResponseWriter, r *http.Request) {
	q, e := ParseAuditQuery(r.URL.Query().Get, a.now().UTC())
	if e != nil {
		openai.WriteError(w, e)
		return
	}
	es, err := Audit(r.Context(), a.st, access.FromContext(r.Context()), q)
	if err != nil {
		a.internal(w, "reading the audit trail", err)
		return
	}
	writeJSON(w, http.StatusOK, newList(es))
}
