package console

// The Audit page: the trail of changes, sign-ins and reloads, newest
// first, filtered by action, who, tenant and window, scoped to the
// session's roles as every other page is.

import (
	"net/http"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/admin"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/audit"
)

// auditPage is the Audit template's data.
type auditPage struct {
	Action, Actor, Tenant, Since string // the filters, as sent
	Actions                      []audit.Action
	Entries                      []audit.Entry
	Error                        string
}

func (c *Console) auditPage(w http.ResponseWriter, r *http.Request, ss *session) {
	v := r.URL.Query()
	page := auditPage{Action: v.Get("action"), Actor: v.Get("actor"), Tenant: v.Get("tenant"), Since: v.Get("since"), Actions: audit.Actions}
	q, e := admin.ParseAuditQuery(v.Get, c.now().UTC())
	if e != nil {
		page.Error = e.Message
		c.render(w, r, http.StatusBadRequest, "audit", ss, page)
		return
	}
	es, err := admin.Audit(r.Context(), c.st, ss.who, q)
	if err != nil {
		c.failed(w, r, ss, "reading the audit trail", err)
		return
	}
	page.Entries = es
	c.render(w, r, http.StatusOK, "audit", ss, page)
}
