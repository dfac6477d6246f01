package admin

// The tenant routes: the limits set on tenant levels in the store. Limits
// from the config file are not listed here; where both set a level, the
// store's win.

import (
	"net/http"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/access"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/audit"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/keys"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/tenant"
	"gitea.mynodes.xyz/ilker/llmgw/internal/openai"
)

func (a *api) listTenants(w http.ResponseWriter, r *http.Request) {
	ls, err := a.st.TenantLimits(r.Context())
	if err != nil {
		a.internal(w, "listing tenant limits", err)
		return
	}
	writeJSON(w, http.StatusOK, newList(VisibleLimits(ls, access.FromContext(r.Context()))))
}

// setTenant sets the limits on one tenant level from a JSON body of
// tenant.Limits; all-zero limits remove the level's limits. An admin sets
// any level's, a tenant admin those below its own level.
func (a *api) setTenant(w http.ResponseWriter, r *http.Request) {
	id := access.FromContext(r.Context())
	if !id.Writes() {
		forbidden(w)
		return
	}
	p, err := tenant.ParsePath(r.PathValue("path"))
	if err != nil {
		openai.WriteError(w, openai.BadRequest("path", "path: must be one to three levels (org/team/user) of letters, digits, '-', '_' and '.'."))
		return
	}
	if !id.CanSetLimits(p) {
		forbidden(w)
		return
	}
	var l tenant.Limits
	if e := decode(w, r, &l); e != nil {
		openai.WriteError(w, e)
		return
	}
	if err := keys.ValidateLimits(l); err != nil {
		e, _ := fieldError(err)
		openai.WriteError(w, e)
		return
	}
	tl := tenant.TenantLimits{Path: p, Limits: l}
	ctx := r.Context()
	if err := a.st.SetTenantLimits(ctx, tl); err != nil {
		a.internal(w, "setting tenant limits", err)
		return
	}
	a.log.Info("admin: tenant limits set", "tenant", p, "removed", l.IsZero(), "actor", id.Actor())
	Note(ctx, a.st, a.log, r, id, audit.Entry{Action: audit.TenantLimits, Target: p, Tenant: p,
		Detail: limitsDetail(l.RPM, l.TPM, l.BudgetTokens, l.BudgetUSD, l.Period)}, a.now())
	if a.ring != nil {
		if err := a.ring.Refresh(ctx); err != nil {
			a.log.Warn("admin: tenant limits stored but not yet applied here; they will be on the next refresh", "err", err)
		}
	}
	writeJSON(w, http.StatusOK, tl)
}
