package access

import (
	"errors"
	"slices"
	"testing"
)

func path(p string) (string, error) {
	if p == "" {
		return "", errors.New("tenant path is empty")
	}
	return p, nil
}

func TestParseRole(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Role
		err  bool
	}{
		{"admin", Role{Kind: Admin}, false},
		{"viewer", Role{Kind: Viewer}, false},
		{"tenant_admin:acme", Role{Kind: TenantAdmin, Tenant: "acme"}, false},
		{"tenant_viewer:acme/search", Role{Kind: TenantViewer, Tenant: "acme/search"}, false},
		{"admin:acme", Role{}, true},
		{"tenant_admin", Role{}, true},
		{"tenant_admin:", Role{}, true},
		{"root", Role{}, true},
	} {
		got, err := ParseRole(tc.in, path)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("ParseRole(%q) = %v, %v; want %v, error %v", tc.in, got, err, tc.want, tc.err)
		}
		if err == nil && got.String() != tc.in {
			t.Errorf("%v.String() = %q, want %q", got, got.String(), tc.in)
		}
	}
}

func TestRoles(t *testing.T) {
	tenantAdmin := Identity{Subject: "a", Roles: []Role{{Kind: TenantAdmin, Tenant: "acme"}}}
	tenantViewer := Identity{Subject: "v", Roles: []Role{{Kind: TenantViewer, Tenant: "acme/search"}}}
	for _, tc := range []struct {
		name                string
		id                  Identity
		path                string
		read, write, limits bool
	}{
		{"admin anywhere", AdminToken(), "beta", true, true, true},
		{"admin, no tenant", AdminToken(), "", true, true, true},
		{"viewer reads", Identity{Roles: []Role{{Kind: Viewer}}}, "beta", true, false, false},
		{"tenant admin at its root", tenantAdmin, "acme", true, true, false},
		{"tenant admin below", tenantAdmin, "acme/search/al", true, true, true},
		{"tenant admin, a sibling org", tenantAdmin, "acme-x", false, false, false},
		{"tenant admin, another org", tenantAdmin, "beta", false, false, false},
		{"tenant admin, no tenant", tenantAdmin, "", false, false, false},
		{"tenant viewer below", tenantViewer, "acme/search/al", true, false, false},
		{"tenant viewer above", tenantViewer, "acme", false, false, false},
		{"nobody", Identity{Subject: "n"}, "acme", false, false, false},
	} {
		if got := tc.id.CanRead(tc.path); got != tc.read {
			t.Errorf("%s: CanRead = %v", tc.name, got)
		}
		if got := tc.id.CanWrite(tc.path); got != tc.write {
			t.Errorf("%s: CanWrite = %v", tc.name, got)
		}
		if got := tc.id.CanSetLimits(tc.path); got != tc.limits {
			t.Errorf("%s: CanSetLimits = %v", tc.name, got)
		}
	}
}

func TestNarrow(t *testing.T) {
	two := Identity{Roles: []Role{{Kind: TenantViewer, Tenant: "acme/search"}, {Kind: TenantAdmin, Tenant: "beta"},
		{Kind: TenantViewer, Tenant: "acme-x"}, {Kind: TenantViewer, Tenant: "beta/ops"}}}
	for _, tc := range []struct {
		id     Identity
		prefix string
		want   []string
	}{
		{AdminToken(), "", []string{""}},
		{AdminToken(), "acme", []string{"acme"}},
		{two, "", []string{"acme-x", "acme/search", "beta"}},
		{two, "acme", []string{"acme/search"}},
		{two, "beta/ops/al", []string{"beta/ops/al"}},
		{two, "gamma", nil},
		{Identity{}, "", nil},
	} {
		if got := tc.id.Narrow(tc.prefix); !slices.Equal(got, tc.want) {
			t.Errorf("%v.Narrow(%q) = %q, want %q", tc.id.Roles, tc.prefix, got, tc.want)
		}
	}
}
