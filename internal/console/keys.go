package console

// The Keys page: the tenant tree with the limits set on each level, every
// key with its globs, limits, budgets and priority; creating a key, whose
// secret is shown once, and revoking one. Both go through the paths the
// admin API and `llmgw keys` take: keys.Create and admin.Revoke.

import (
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/admin"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/audit"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/keys"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/store"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/tenant"
)

// keysPage is the Keys template's data.
type keysPage struct {
	Tenants []tenantNode
	Keys    []keyRow
	// Created is the key just created, with its plaintext: shown this
	// once. Nil otherwise.
	Created *createdKey
	// Revoked is the id of the key just revoked; empty otherwise.
	Revoked string
	// Error is why the create form was refused, naming the field; Form is
	// what it held, to fill it again.
	Error string
	Form  keys.Spec
	Globs string // Form.Models as typed
}

// keyRow is one key as the page lists it.
type keyRow struct {
	tenant.Key
	Status    string
	CanRevoke bool // the session may revoke it
}

// createdKey is a key just created.
type createdKey struct {
	Plaintext string
	keyRow
}

// tenantNode is one level of the tenant tree.
type tenantNode struct {
	Path   string
	Name   string // the path's last level
	Depth  int    // 0 for an org, 1 for a team, 2 for a user
	Store  *tenant.Limits
	Config *tenant.Limits
	Keys   int // live keys at this level exactly
}

func (c *Console) keysPage(w http.ResponseWriter, r *http.Request, ss *session) {
	page := keysPage{Revoked: r.URL.Query().Get("revoked")}
	if !keys.ValidID(page.Revoked) {
		page.Revoked = ""
	}
	c.renderKeys(w, r, ss, http.StatusOK, page)
}

// renderKeys fills page's tree and keys from the store and renders it.
func (c *Console) renderKeys(w http.ResponseWriter, r *http.Request, ss *session, status int, page keysPage) {
	ctx := r.Context()
	ks, err := c.st.Keys(ctx)
	if err != nil {
		c.failed(w, r, ss, "listing keys", err)
		return
	}
	tls, err := c.st.TenantLimits(ctx)
	if err != nil {
		c.failed(w, r, ss, "listing tenant limits", err)
		return
	}
	ks, tls = admin.VisibleKeys(ks, ss.who), admin.VisibleLimits(tls, ss.who)
	now := c.now()
	// Newest first: the key just made is at the top.
	for i := len(ks) - 1; i >= 0; i-- {
		page.Keys = append(page.Keys, keyRow{Key: ks[i], Status: keys.Status(&ks[i], now), CanRevoke: ss.who.CanWrite(ks[i].Tenant)})
	}
	page.Tenants = tenantTree(ks, tls, admin.VisibleLimits(c.gw.ConfigTenants(), ss.who))
	c.render(w, r, status, "keys", ss, page)
}

// tenantTree is every tenant level named by a key, the store's limits or
// the configuration's, with its ancestors, in path order so that each
// level follows its parent.
func tenantTree(ks []tenant.Key, stored, configured []tenant.TenantLimits) []tenantNode {
	nodes := map[string]*tenantNode{}
	add := func(path string) *tenantNode {
		parts := strings.Split(path, "/")
		var n *tenantNode
		for i := range parts {
			p := strings.Join(parts[:i+1], "/")
			if nodes[p] == nil {
				nodes[p] = &tenantNode{Path: p, Name: parts[i], Depth: i}
			}
			n = nodes[p]
		}
		return n
	}
	for _, tl := range stored {
		l := tl.Limits
		add(tl.Path).Store = &l
	}
	for _, tl := range configured {
		l := tl.Limits
		add(tl.Path).Config = &l
	}
	for i := range ks {
		if ks[i].Tenant == "" {
			continue
		}
		n := add(ks[i].Tenant)
		if ks[i].Revoked.IsZero() {
			n.Keys++
		}
	}
	out := make([]tenantNode, 0, len(nodes))
	for _, n := range nodes {
		out = append(out, *n)
	}
	// Path order with '/' before every other byte, so a level's children
	// come straight after it.
	slices.SortFunc(out, func(a, b tenantNode) int {
		return strings.Compare(strings.ReplaceAll(a.Path, "/", "\x00"), strings.ReplaceAll(b.Path, "/", "\x00"))
	})
	return out
}

// createKey makes a key from the form, and shows its plaintext once.
func (c *Console) createKey(w http.ResponseWriter, r *http.Request, ss *session) {
	spec, globs, field, msg := specFromForm(r)
	if p, err := tenant.ParsePath(spec.Tenant); err == nil && !ss.who.CanWrite(p) {
		c.forbidden(w, r, ss)
		return
	}
	page := keysPage{Form: spec, Globs: globs}
	if msg != "" {
		page.Error = field + ": " + msg
		c.renderKeys(w, r, ss, http.StatusBadRequest, page)
		return
	}
	now := c.now()
	plain, k, err := keys.Create(r.Context(), c.st, spec, now)
	if err != nil {
		if fe, ok := keys.AsFieldError(err); ok {
			page.Error = fe.Field + ": " + fe.Message + "."
			c.renderKeys(w, r, ss, http.StatusBadRequest, page)
			return
		}
		c.failed(w, r, ss, "creating a key", err)
		return
	}
	c.log.Info("console: key created", "key_id", k.ID, "tenant", k.Tenant, "actor", ss.who.Actor())
	admin.Note(r.Context(), c.st, c.log, r, ss.who, audit.Entry{Action: audit.KeyCreate, Target: k.ID, Tenant: k.Tenant, Detail: k.Name}, now)
	c.renderKeys(w, r, ss, http.StatusCreated, keysPage{Created: &createdKey{Plaintext: plain, keyRow: keyRow{Key: k, Status: keys.Status(&k, now), CanRevoke: true}}})
}

// specFromForm reads a key's spec from the create form. A number that
// does not parse is refused here, naming its field; everything else is
// keys.Create's to check.
func specFromForm(r *http.Request) (spec keys.Spec, globs, field, msg string) {
	f := r.PostFormValue
	globs = f("models")
	spec = keys.Spec{Tenant: strings.TrimSpace(f("tenant")), Name: f("name"), Period: f("period"), Priority: f("priority"), ExpiresIn: strings.TrimSpace(f("expires_in"))}
	for _, g := range strings.FieldsFunc(globs, func(r rune) bool { return r == ',' || r == ' ' || r == '\n' || r == '\r' || r == '\t' }) {
		spec.Models = append(spec.Models, g)
	}
	for _, n := range []struct {
		name string
		dst  *int64
	}{{"rpm", &spec.RPM}, {"tpm", &spec.TPM}, {"budget_tokens", &spec.BudgetTokens}} {
		if v := strings.TrimSpace(f(n.name)); v != "" {
			x, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return spec, globs, n.name, "must be a whole number."
			}
			*n.dst = x
		}
	}
	if v := strings.TrimSpace(f("budget_usd")); v != "" {
		x, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return spec, globs, "budget_usd", "must be a number of dollars."
		}
		spec.BudgetUSD = x
	}
	return spec, globs, "", ""
}

// revokeKey revokes the key named in the path, and goes back to the list.
func (c *Console) revokeKey(w http.ResponseWriter, r *http.Request, ss *session) {
	k, err := admin.Revoke(r.Context(), c.st, c.opts.Keyring, ss.who, r.PathValue("id"), c.now())
	switch {
	case errors.Is(err, store.ErrNotFound):
		c.render(w, r, http.StatusNotFound, "error", ss, errorPage{Message: "No key has that id."})
		return
	case errors.Is(err, admin.ErrForbidden):
		c.forbidden(w, r, ss)
		return
	case err != nil:
		c.failed(w, r, ss, "revoking a key", err)
		return
	}
	c.log.Info("console: key revoked", "key_id", k.ID, "tenant", k.Tenant, "actor", ss.who.Actor())
	admin.Note(r.Context(), c.st, c.log, r, ss.who, audit.Entry{Action: audit.KeyRevoke, Target: k.ID, Tenant: k.Tenant}, c.now())
	http.Redirect(w, r, "/ui/keys?revoked="+k.ID, http.StatusSeeOther)
}
