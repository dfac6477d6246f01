package admin

// The usage route: sums from the ledger, by model, tenant or key, over a
// tenant subtree and a time window.

import (
	"net/http"
	"time"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/access"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/keys"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/tenant"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/usage"
	"gitea.mynodes.xyz/ilker/llmgw/internal/openai"
)

// usageAnswer is the usage route's JSON: the window summed and its rows.
type usageAnswer struct {
	Object string      `json:"object"` // always "list"
	Since  time.Time   `json:"since,omitzero"`
	Until  time.Time   `json:"until"`
	By     string      `json:"by,omitempty"`
	Data   []usage.Row `json:"data"`
}

// ParseUsageQuery reads a usage query from URL parameters, as the admin
// API and `llmgw usage` take them: tenant (a path; its descendants are
// included), key (a key ID), since (a duration back from now, such as 24h
// or 7d, or an RFC 3339 time; empty means since the start), and by (model,
// tenant or key; empty means one total). An error is a 400 naming the
// parameter.
func ParseUsageQuery(get func(string) string, now time.Time) (usage.Query, *openai.Error) {
	q := usage.Query{Until: now, By: get("by")}
	if t := get("tenant"); t != "" {
		p, err := tenant.ParsePath(t)
		if err != nil {
			return q, openai.BadRequest("tenant", "tenant: must be one to three levels (org/team/user) of letters, digits, '-', '_' and '.'.")
		}
		q.TenantPrefix = p
	}
	if id := get("key"); id != "" {
		if !keys.ValidID(id) {
			return q, openai.BadRequest("key", "key: must be a key id (key_ and 12 characters), never the key itself.")
		}
		q.KeyID = id
	}
	if s := get("since"); s != "" {
		if d, err := keys.ParseDuration(s); err == nil && d > 0 {
			q.Since = now.Add(-d)
		} else if t, err := time.Parse(time.RFC3339, s); err == nil {
			q.Since = t
		} else {
			return q, openai.BadRequest("since", `since: must be a positive duration such as "24h" or "7d", or an RFC 3339 time.`)
		}
	}
	switch q.By {
	case "", usage.ByModel, usage.ByTenant, usage.ByKey:
	default:
		return q, openai.BadRequest("by", "by: must be model, tenant or key.")
	}
	return q, nil
}

func (a *api) usage(w http.ResponseWriter, r *http.Request) {
	now := a.now().UTC()
	q, e := ParseUsageQuery(r.URL.Query().Get, now)
	if e != nil {
		openai.WriteError(w, e)
		return
	}
	rows, err := Usage(r.Context(), a.st, access.FromContext(r.Context()), q)
	if err != nil {
		a.internal(w, "reading usage", err)
		return
	}
	if rows == nil {
		rows = []usage.Row{}
	}
	writeJSON(w, http.StatusOK, usageAnswer{Object: "list", Since: q.Since, Until: q.Until, By: q.By, Data: rows})
}
