package console

// How long each page takes to render over a ledger of 100,000 records:
// a benchmark per page and store. A page is meant to render within
// 200 ms; docs/CONSOLE.md gives the figures and the command.

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/access"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/admin"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/keys"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/store"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/usage"
)

// benchRecords is the ledger the page benchmarks render over.
const benchRecords = 100_000

// benchPages are the pages measured, with the queries that read most.
var benchPages = []string{
	"/ui/overview", "/ui/endpoints", "/ui/keys", "/ui/config",
	"/ui/usage", // the last 24h by model
	"/ui/usage?since=30d&by=model", "/ui/usage?since=30d&by=tenant", "/ui/usage?since=30d&by=key",
	"/ui/usage?since=30d&by=model&tenant=org3",
	"/ui/usage.csv?since=30d&by=key",
	"/ui/requests", "/ui/requests?limit=1000", "/ui/requests?model=model-5", "/ui/requests?tenant=org3/team1",
	"/ui/requests?errors=1", "/ui/requests?status=500&model=model-1",
}

func BenchmarkPages(b *testing.B) { benchmarkPages(b, access.AdminToken(), benchPages) }

// benchTenantPages are the pages a tenant admin of one org of ten reads,
// each narrowed to its subtree on the server.
var benchTenantPages = []string{
	"/ui/keys", "/ui/usage", "/ui/usage?since=30d&by=model", "/ui/usage?since=30d&by=tenant", "/ui/usage?since=30d&by=key",
	"/ui/usage.csv?since=30d&by=key", "/ui/requests", "/ui/requests?limit=1000", "/ui/audit",
}

// BenchmarkTenantPages is BenchmarkPages for a tenant_admin of org3.
func BenchmarkTenantPages(b *testing.B) {
	benchmarkPages(b, access.Identity{Subject: "lead", Roles: []access.Role{{Kind: access.TenantAdmin, Tenant: "org3"}}}, benchTenantPages)
}

func benchmarkPages(b *testing.B, who access.Identity, pages []string) {
	stores := []struct {
		name string
		open func(b *testing.B) store.Store
	}{
		{"sqlite", func(b *testing.B) store.Store {
			s, err := store.OpenSQLite(context.Background(), filepath.Join(b.TempDir(), "bench.db"))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { s.Close() })
			return s
		}},
		{"memory", func(*testing.B) store.Store { return store.NewMemory() }},
		{"postgres", openBenchPostgres},
	}
	for _, st := range stores {
		b.Run(st.name, func(b *testing.B) {
			s := st.open(b)
			h, cookie := benchConsole(b, s, who)
			for _, page := range pages {
				b.Run(page, func(b *testing.B) {
					for b.Loop() {
						req := httptest.NewRequest("GET", page, nil)
						req.AddCookie(cookie)
						w := httptest.NewRecorder()
						h.ServeHTTP(w, req)
						if w.Code != http.StatusOK {
							b.Fatalf("%s: %d", page, w.Code)
						}
					}
				})
			}
		})
	}
}

// benchConsole fills s with 100 keys and benchRecords records over the
// last 30 days (1,000 keys' worth of ids, 100 users in 10 orgs, 8 models,
// one in 50 failed), and returns a console over it and a session's cookie.
func benchConsole(b *testing.B, s store.Store, who access.Identity) (http.Handler, *http.Cookie) {
	b.Helper()
	ctx := context.Background()
	now := time.Now()
	for i := range 100 {
		if _, _, err := keys.Create(ctx, s, keys.Spec{Tenant: fmt.Sprintf("org%d/team%d", i%10, i%5), Name: fmt.Sprintf("key %d", i), RPM: 60}, now); err != nil {
			b.Fatal(err)
		}
	}
	step := 30 * 24 * time.Hour / benchRecords
	batch := make([]usage.Record, 0, 1000)
	for i := range benchRecords {
		status := 200
		if i%50 == 0 {
			status = 500
		}
		batch = append(batch, usage.Record{
			ID: fmt.Sprintf("r%07d", i), Time: now.Add(-time.Duration(benchRecords-i) * step),
			KeyID: fmt.Sprintf("key_%012d", i%1000), Tenant: fmt.Sprintf("org%d/team%d/user%d", i%10, i/10%5, i/50%2),
			Model: fmt.Sprintf("model-%d", i%8), Pool: "pool", Endpoint: "10.0.0.1:8000", Status: status,
			PromptTokens: int64(100 + i%900), CompletionTokens: int64(10 + i%300), CachedTokens: int64(i % 64),
			CostUSD: float64(i%1000) / 1e5, TTFT: 200 * time.Millisecond, Duration: 3 * time.Second, Streamed: i%2 == 0,
		})
		if len(batch) == cap(batch) {
			if err := s.AddUsage(ctx, batch); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	tc := &fakeGateway{}
	c, err := New(s, tc, Options{Guard: admin.NewGuard(testToken, admin.GuardOptions{})})
	if err != nil {
		b.Fatal(err)
	}
	ss := c.sessions.start(time.Now(), c.guard.Version(), who, time.Time{})
	return c, &http.Cookie{Name: cookieName, Value: ss.id}
}

// openBenchPostgres is a store in a schema of its own on
// LLMGW_TEST_POSTGRES, dropped after; it skips without it.
func openBenchPostgres(b *testing.B) store.Store {
	base := os.Getenv("LLMGW_TEST_POSTGRES")
	if base == "" {
		b.Skip("LLMGW_TEST_POSTGRES is not set")
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	schema := fmt.Sprintf("llmgw_console_bench_%d", time.Now().UnixNano())
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), base)
		if err == nil {
			c.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE")
			c.Close(context.Background())
		}
	})
	s, err := store.OpenPostgres(ctx, base+"&search_path="+schema)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}
