package store

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/audit"
)

// testAudit: entries come back newest first (those of one time in the
// order written), selected by action, actor, tenant subtree and window,
// within the limit; pruning removes only what is older than its time.
func testAudit(t *testing.T, s Store) {
	ctx := context.Background()
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	entries := []audit.Entry{
		{Time: t0, Subject: "u-acme", Email: "lena@acme.example", Action: audit.KeyCreate, Target: "key_A", Tenant: "acme/search", Source: "10.0.0.1"},
		{Time: t0.Add(time.Minute), Subject: "admin token", Action: audit.TenantLimits, Target: "acme-x", Tenant: "acme-x", Detail: "rpm 5"},
		{Time: t0.Add(time.Minute), Subject: "u-acme", Email: "lena@acme.example", Action: audit.KeyRevoke, Target: "key_A", Tenant: "acme/search"},
		{Time: t0.Add(2 * time.Minute), Subject: "u-nina", Action: audit.SignInFailed, Detail: "no role", Source: "10.0.0.2"},
		{Time: t0.Add(3 * time.Minute), Subject: "u-acme", Email: "lena@acme.example", Action: audit.KeyCreate, Target: "key_B", Tenant: "acme"},
	}
	for _, e := range entries {
		if err := s.AddAudit(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	at := func(i ...int) []audit.Entry {
		var out []audit.Entry
		for _, n := range i {
			out = append(out, entries[n])
		}
		return out
	}
	until := t0.Add(time.Hour)
	for _, tc := range []struct {
		name string
		q    audit.Query
		want []audit.Entry
	}{
		{"all, newest first", audit.Query{Until: until}, at(4, 3, 2, 1, 0)},
		{"by action", audit.Query{Action: audit.KeyCreate, Until: until}, at(4, 0)},
		{"by subject", audit.Query{Actor: "u-nina", Until: until}, at(3)},
		{"by email", audit.Query{Actor: "lena@acme.example", Until: until}, at(4, 2, 0)},
		{"a subtree, not its sibling", audit.Query{TenantPrefix: "acme", Until: until}, at(4, 2, 0)},
		{"a team", audit.Query{TenantPrefix: "acme/search", Until: until}, at(2, 0)},
		{"a window", audit.Query{Since: t0.Add(time.Minute), Until: t0.Add(3 * time.Minute)}, at(3, 2, 1)},
		{"a limit", audit.Query{Limit: 2, Until: until}, at(4, 3)},
	} {
		want := tc.want
		got, err := s.Audit(ctx, tc.q)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, diff)
		}
	}
	n, err := s.PruneAudit(ctx, t0.Add(time.Minute))
	if err != nil || n != 1 {
		t.Fatalf("pruning before the second minute removed %d, %v; want 1", n, err)
	}
	got, err := s.Audit(ctx, audit.Query{Until: until})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(at(4, 3, 2, 1), got); diff != "" {
		t.Errorf("after pruning (-want +got):\n%s", diff)
	}
}
