// Package access is who is using the console and the admin API, and what
// they may do: an identity with its roles, each role either over the
// whole gateway (admin, viewer) or over one tenant subtree (tenant_admin,
// tenant_viewer of a tenant path). Everything here is data and the rules
// that read it; the console and the admin API enforce them.
package access

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// Kind is a role's kind.
type Kind string

// The kinds of role.
const (
	// Admin does everything.
	Admin Kind = "admin"
	// Viewer reads everything: keys, tenants, usage, requests, endpoints
	// and the configuration.
	Viewer Kind = "viewer"
	// TenantAdmin creates, revokes and reads keys, reads usage, requests
	// and spend, and sets limits below its tenant, inside its subtree only.
	TenantAdmin Kind = "tenant_admin"
	// TenantViewer reads keys, limits, usage and requests inside its
	// subtree only.
	TenantViewer Kind = "tenant_viewer"
)

// Role is one role an identity holds. Tenant is the root of the subtree
// of a tenant role (a cleaned tenant path), and empty for the others.
type Role struct {
	Kind   Kind   `json:"kind"`
	Tenant string `json:"tenant,omitempty"`
}

// String is r as ParseRole reads it: "admin", or "tenant_admin:acme".
func (r Role) String() string {
	if r.Tenant == "" {
		return string(r.Kind)
	}
	return string(r.Kind) + ":" + r.Tenant
}

// ParseRole reads a role written as its kind ("admin", "viewer"), or as a
// tenant role's kind and path ("tenant_admin:acme",
// "tenant_viewer:acme/search"). parsePath cleans and checks the path, as
// tenant.ParsePath does.
func ParseRole(s string, parsePath func(string) (string, error)) (Role, error) {
	kind, path, hasPath := strings.Cut(strings.TrimSpace(s), ":")
	switch Kind(kind) {
	case Admin, Viewer:
		if hasPath {
			return Role{}, fmt.Errorf("role %q: %s takes no tenant path", s, kind)
		}
		return Role{Kind: Kind(kind)}, nil
	case TenantAdmin, TenantViewer:
		if !hasPath {
			return Role{}, fmt.Errorf("role %q: %s needs a tenant path, as %s:acme", s, kind, kind)
		}
		p, err := parsePath(path)
		if err != nil {
			return Role{}, fmt.Errorf("role %q: %w", s, err)
		}
		return Role{Kind: Kind(kind), Tenant: p}, nil
	}
	return Role{}, fmt.Errorf("role %q: want admin, viewer, tenant_admin:<path> or tenant_viewer:<path>", s)
}

// Identity is who a request comes from, as signed in or as a bearer token
// names them, and the roles they hold. An identity with no roles may do
// nothing.
type Identity struct {
	// Subject is the identity provider's subject, or "admin token".
	Subject string `json:"subject"`
	// Email is the provider's email claim; empty when it gives none.
	Email string `json:"email,omitempty"`
	Roles []Role `json:"roles"`
}

// AdminTokenSubject is the subject of whoever presents the admin token.
const AdminTokenSubject = "admin token"

// AdminToken is the identity of whoever presents the admin token: an
// admin.
func AdminToken() Identity {
	return Identity{Subject: AdminTokenSubject, Roles: []Role{{Kind: Admin}}}
}

// Actor names the identity in a log line or an audit record: "admin
// token", a subject alone, or a subject and its email.
func (id Identity) Actor() string {
	if id.Email == "" {
		return id.Subject
	}
	return id.Subject + " <" + id.Email + ">"
}

func (id Identity) has(k Kind) bool {
	return slices.ContainsFunc(id.Roles, func(r Role) bool { return r.Kind == k })
}

// IsAdmin reports whether id may do everything.
func (id Identity) IsAdmin() bool { return id.has(Admin) }

// ReadsAll reports whether id may read everything: admin or viewer. Only
// such an identity sees the endpoints and the configuration.
func (id Identity) ReadsAll() bool { return id.has(Admin) || id.has(Viewer) }

// Writes reports whether id may change anything at all: admin, or
// tenant_admin of some subtree.
func (id Identity) Writes() bool { return id.has(Admin) || id.has(TenantAdmin) }

// Any reports whether id holds any role.
func (id Identity) Any() bool { return len(id.Roles) > 0 }

// CanRead reports whether id may read what belongs to the tenant path p:
// a reader of everything, or a tenant role whose subtree holds p. The
// empty path (a record with no tenant) is only for readers of everything.
func (id Identity) CanRead(p string) bool {
	if id.ReadsAll() {
		return true
	}
	return slices.ContainsFunc(id.Roles, func(r Role) bool {
		return (r.Kind == TenantAdmin || r.Kind == TenantViewer) && Within(p, r.Tenant)
	})
}

// CanWrite reports whether id may create, revoke or change keys of the
// tenant path p: an admin, or a tenant_admin whose subtree holds p.
func (id Identity) CanWrite(p string) bool {
	if id.IsAdmin() {
		return true
	}
	return slices.ContainsFunc(id.Roles, func(r Role) bool { return r.Kind == TenantAdmin && Within(p, r.Tenant) })
}

// CanSetLimits reports whether id may set the limits of the tenant level
// p: an admin, or a tenant_admin of a level above p. A tenant admin does
// not set its own level's limits: those bound it, and are the platform's.
func (id Identity) CanSetLimits(p string) bool {
	if id.IsAdmin() {
		return true
	}
	return slices.ContainsFunc(id.Roles, func(r Role) bool {
		return r.Kind == TenantAdmin && p != r.Tenant && Within(p, r.Tenant)
	})
}

// ReadRoots is the roots of the subtrees id may read, none inside
// another, in order; nil for an identity that reads everything, and empty
// (not nil) for one that reads nothing.
func (id Identity) ReadRoots() []string {
	if id.ReadsAll() {
		return nil
	}
	roots := []string{}
	for _, r := range id.Roles {
		if r.Kind == TenantAdmin || r.Kind == TenantViewer {
			roots = append(roots, r.Tenant)
		}
	}
	slices.Sort(roots)
	// After sorting, a root inside another follows it, though perhaps not
	// at once ("acme", "acme-x", "acme/search"): keep those no kept root holds.
	out := roots[:0]
	for _, r := range roots {
		if !slices.ContainsFunc(out, func(o string) bool { return Within(r, o) }) {
			out = append(out, r)
		}
	}
	return out
}

// Narrow is the tenant prefixes a query for prefix (empty for all) reads
// for id: prefix itself for a reader of everything, else each readable
// subtree's part of it: a root inside prefix, or prefix inside a root.
// None means the query reads nothing.
func (id Identity) Narrow(prefix string) []string {
	roots := id.ReadRoots()
	if roots == nil {
		return []string{prefix}
	}
	var out []string
	for _, r := range roots {
		switch {
		case prefix == "" || Within(r, prefix):
			out = append(out, r)
		case Within(prefix, r):
			return []string{prefix}
		}
	}
	return out
}

// Within reports whether the tenant path p is root or below it.
func Within(p, root string) bool {
	return root != "" && (p == root || strings.HasPrefix(p, root+"/"))
}

type ctxKey struct{}

// NewContext is ctx carrying id.
func NewContext(ctx context.Context, id Identity) context.Context {
	return context.WithValue(ctx, ctxKey{}, id)
}

// FromContext is the identity ctx carries; the zero Identity, which may
// do nothing, when it carries none.
func FromContext(ctx context.Context) Identity {
	id, _ := ctx.Value(ctxKey{}).(Identity)
	return id
}
