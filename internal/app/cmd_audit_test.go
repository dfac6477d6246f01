package app

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/audit"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/store"
)

// TestAuditCommand: `llmgw audit` prints the trail newest first, filtered
// by action, actor, tenant subtree and window, and refuses a bad flag
// before opening the store.
func TestAuditCommand(t *testing.T) {
	url := "sqlite:" + filepath.Join(t.TempDir(), "llmgw.db")
	st, err := store.Open(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for _, e := range []audit.Entry{
		{Time: now.Add(-48 * time.Hour), Subject: "u-acme", Email: "lena@acme.example", Action: audit.KeyCreate, Target: "key_old", Tenant: "acme/search", Source: "10.0.0.1"},
		{Time: now.Add(-2 * time.Hour), Subject: "admin token", Action: audit.TenantLimits, Target: "acme2", Tenant: "acme2", Detail: "rpm 5"},
		{Time: now.Add(-time.Hour), Subject: "u-acme", Email: "lena@acme.example", Action: audit.KeyRevoke, Target: "key_old", Tenant: "acme/search"},
		{Time: now.Add(-time.Minute), Subject: "u-nina", Action: audit.SignInFailed, Detail: "identity provider: no role"},
	} {
		if err := st.AddAudit(t.Context(), e); err != nil {
			t.Fatal(err)
		}
	}
	st.Close()
	run := func(args ...string) (string, error) {
		var stdout, stderr bytes.Buffer
		err := AuditCommand(context.Background(), append([]string{"--store", url}, args...), &stdout, &stderr)
		return stdout.String(), err
	}
	for _, tc := range []struct {
		args []string
		want []string // the TARGET or DETAIL of each row, in order
	}{
		{nil, []string{"identity provider: no role", "key.revoke", "tenant.limits", "key.create"}},
		{[]string{"--action", "key.create"}, []string{"key_old"}},
		{[]string{"--actor", "lena@acme.example"}, []string{"key.revoke", "key.create"}},
		{[]string{"--tenant", "acme"}, []string{"key.revoke", "key.create"}},
		{[]string{"--since", "3h"}, []string{"signin.failed", "key.revoke", "tenant.limits"}},
		{[]string{"--limit", "1"}, []string{"signin.failed"}},
	} {
		out, err := run(tc.args...)
		if err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != len(tc.want)+1 || !strings.HasPrefix(lines[0], "TIME") {
			t.Errorf("%v: %d rows, want %d:\n%s", tc.args, len(lines)-1, len(tc.want), out)
			continue
		}
		for i, w := range tc.want {
			if !strings.Contains(lines[i+1], w) {
				t.Errorf("%v: row %d is %q, want %q in it", tc.args, i+1, lines[i+1], w)
			}
		}
	}
	for _, bad := range [][]string{{"--action", "key.delete"}, {"--tenant", "a//b"}, {"--limit", "0"}, {"--since", "soon"}} {
		if _, err := run(bad...); err == nil {
			t.Errorf("%v: no error", bad)
		}
	}
}
