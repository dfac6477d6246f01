package console

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/tenant"
)

// TestTenantTree: every level named by a key, the store or the
// configuration is in the tree with its ancestors, each right after its
// parent, with the limits set on it and its live keys.
func TestTenantTree(t *testing.T) {
	now := time.Now()
	ks := []tenant.Key{
		{ID: "k1", Tenant: "acme/search/alice"},
		{ID: "k2", Tenant: "acme/search/alice", Revoked: now},
		{ID: "k3", Tenant: "acme-x"},
		{ID: "k4", Tenant: "acme"},
	}
	stored := []tenant.TenantLimits{{Path: "acme/search", Limits: tenant.Limits{RPM: 60}}}
	configured := []tenant.TenantLimits{{Path: "beta", Limits: tenant.Limits{BudgetUSD: 5}}}
	type node struct {
		Path        string
		Depth, Keys int
		Store, Conf bool
	}
	var got []node
	for _, n := range tenantTree(ks, stored, configured) {
		got = append(got, node{n.Path, n.Depth, n.Keys, n.Store != nil, n.Config != nil})
	}
	want := []node{
		{"acme", 0, 1, false, false},
		{"acme/search", 1, 0, true, false},
		{"acme/search/alice", 2, 1, false, false},
		{"acme-x", 0, 1, false, false},
		{"beta", 0, 0, false, true},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("tenant tree (-want +got):\n%s", diff)
	}
}
