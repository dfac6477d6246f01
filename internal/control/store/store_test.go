// The one suite every Store passes, run for memory, SQLite, and Postgres
// when LLMGW_TEST_POSTGRES names a database.

package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/tenant"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/usage"
)

func TestMemory(t *testing.T) {
	testStore(t, func(t *testing.T) Store { return NewMemory() })
}

func TestSQLite(t *testing.T) {
	testStore(t, func(t *testing.T) Store { return openTestSQLite(t, filepath.Join(t.TempDir(), "llmgw.db")) })
}

func TestSQLiteInMemory(t *testing.T) {
	testStore(t, func(t *testing.T) Store { return openTestSQLite(t, ":memory:") })
}

func TestPostgres(t *testing.T) {
	base := postgresURL(t)
	testStore(t, func(t *testing.T) Store { return openTestPostgres(t, freshSchema(t, base)) })
}

func openTestSQLite(t *testing.T, path string) *SQLite {
	t.Helper()
	s, err := OpenSQLite(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func openTestPostgres(t testing.TB, url string) *Postgres {
	t.Helper()
	s, err := OpenPostgres(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// postgresURL is LLMGW_TEST_POSTGRES, or skips the test without it.
func postgresURL(t testing.TB) string {
	u := os.Getenv("LLMGW_TEST_POSTGRES")
	if u == "" {
		t.Skip("LLMGW_TEST_POSTGRES is not set; set it to a postgres:// URL to run the Postgres store tests")
	}
	return u
}

var schemaSeq atomic.Int64

// freshSchema creates a schema of its own for one test, dropped when the
// test ends, and returns base with search_path pointing at it.
func freshSchema(t testing.TB, base string) string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("connect to LLMGW_TEST_POSTGRES: %v", err)
	}
	defer conn.Close(ctx)
	schema := fmt.Sprintf("llmgw_test_%d_%d_%d", os.Getpid(), time.Now().UnixNano(), schemaSeq.Add(1))
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatalf("create schema: %v", err)
	}
	t.Cleanup(func() {
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			t.Errorf("connect to drop schema: %v", err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			t.Errorf("drop schema: %v", err)
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("parse LLMGW_TEST_POSTGRES: %v", err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// t0 is the suite's epoch: whole seconds, so every store keeps it exactly.
var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// testStore is the suite every Store implementation passes. open returns
// a new, empty store each time it is called.
func testStore(t *testing.T, open func(t *testing.T) Store) {
	t.Run("Keys", func(t *testing.T) { testKeys(t, open(t)) })
	t.Run("TenantLimits", func(t *testing.T) { testTenantLimits(t, open(t)) })
	t.Run("UsageIdempotent", func(t *testing.T) { testUsageIdempotent(t, open(t)) })
	t.Run("UsageQuery", func(t *testing.T) { testUsageQuery(t, open(t)) })
	t.Run("UsageConcurrent", func(t *testing.T) { testUsageConcurrent(t, open(t)) })
	t.Run("Records", func(t *testing.T) { testRecords(t, open(t)) })
	t.Run("RecordsLimit", func(t *testing.T) { testRecordsLimit(t, open(t)) })
	t.Run("Secret", func(t *testing.T) { testSecret(t, open(t)) })
	t.Run("Audit", func(t *testing.T) { testAudit(t, open(t)) })
	t.Run("Alerts", func(t *testing.T) { testAlerts(t, open(t)) })
	t.Run("Ping", func(t *testing.T) {
		if err := open(t).Ping(t.Context()); err != nil {
			t.Fatalf("Ping: %v", err)
		}
	})
}

func testKeys(t *testing.T, s Store) {
	ctx := t.Context()
	keys := []tenant.Key{
		{
			ID: "k2", Name: "search bot", Tenant: "acme/search", Hash: "h2",
			Models:   []string{"llama-*", "qwen3-8b"},
			Tools:    []string{"github__*", "files__read_text_file"},
			Limits:   tenant.Limits{RPM: 60, TPM: 10000, BudgetTokens: 1e6, BudgetUSD: 12.5, Period: tenant.PeriodDay, ToolRPM: 30},
			Priority: tenant.PriorityCritical, Created: t0.Add(2 * time.Second), Expires: t0.Add(48 * time.Hour),
		},
		{ID: "k1", Tenant: "acme", Hash: "h1", Created: t0.Add(time.Second)},
		{ID: "k3", Tenant: "acme/search/alice", Hash: "h3", Created: t0.Add(time.Second), Priority: tenant.PrioritySheddable},
	}
	for _, k := range keys {
		if err := s.CreateKey(ctx, k); err != nil {
			t.Fatalf("CreateKey(%s): %v", k.ID, err)
		}
	}
	if err := s.CreateKey(ctx, tenant.Key{ID: "k1", Tenant: "other", Created: t0}); !errors.Is(err, ErrExists) {
		t.Errorf("CreateKey of an existing id: got %v, want ErrExists", err)
	}
	if err := s.CreateKey(ctx, tenant.Key{ID: "k9", Tenant: "acme"}); err == nil {
		t.Errorf("CreateKey without a created time: got nil error")
	}

	for _, want := range keys {
		got, err := s.Key(ctx, want.ID)
		if err != nil {
			t.Fatalf("Key(%s): %v", want.ID, err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("Key(%s) (-want +got):\n%s", want.ID, diff)
		}
	}
	if _, err := s.Key(ctx, "nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Key(nope): got %v, want ErrNotFound", err)
	}

	// Oldest first; k1 and k3 were created together and go by ID.
	list, err := s.Keys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, k := range list {
		ids = append(ids, k.ID)
	}
	if diff := cmp.Diff([]string{"k1", "k3", "k2"}, ids); diff != "" {
		t.Errorf("Keys order (-want +got):\n%s", diff)
	}

	at := t0.Add(time.Hour)
	if err := s.RevokeKey(ctx, "k2", at); err != nil {
		t.Fatalf("RevokeKey: %v", err)
	}
	got, err := s.Key(ctx, "k2")
	if err != nil {
		t.Fatal(err)
	}
	if !got.Revoked.Equal(at) || got.Live(at) || !got.Live(at.Add(-time.Second)) {
		t.Errorf("after RevokeKey at %v: Revoked=%v Live(at)=%v", at, got.Revoked, got.Live(at))
	}
	if err := s.RevokeKey(ctx, "nope", at); !errors.Is(err, ErrNotFound) {
		t.Errorf("RevokeKey(nope): got %v, want ErrNotFound", err)
	}
	if k1, _ := s.Key(ctx, "k1"); !k1.Revoked.IsZero() {
		t.Errorf("revoking k2 revoked k1 too: %v", k1.Revoked)
	}
}

func testTenantLimits(t *testing.T, s Store) {
	ctx := t.Context()
	set := func(l tenant.TenantLimits) {
		t.Helper()
		if err := s.SetTenantLimits(ctx, l); err != nil {
			t.Fatalf("SetTenantLimits(%s): %v", l.Path, err)
		}
	}
	list := func() []tenant.TenantLimits {
		t.Helper()
		got, err := s.TenantLimits(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := list(); len(got) != 0 {
		t.Errorf("new store has tenant limits: %v", got)
	}
	set(tenant.TenantLimits{Path: "acme/search", Limits: tenant.Limits{RPM: 100}})
	set(tenant.TenantLimits{Path: "acme", Limits: tenant.Limits{TPM: 5000, BudgetUSD: 100, Period: tenant.PeriodMonth}})
	set(tenant.TenantLimits{Path: "beta", Limits: tenant.Limits{BudgetTokens: 42}})
	// Replacing keeps nothing of the old limits.
	set(tenant.TenantLimits{Path: "acme/search", Limits: tenant.Limits{TPM: 7, Period: tenant.PeriodDay}})
	// Zero limits remove the level; removing one that has none is no error.
	set(tenant.TenantLimits{Path: "beta"})
	set(tenant.TenantLimits{Path: "never-set"})
	// A level that limits tool calls alone is kept.
	set(tenant.TenantLimits{Path: "tools", Limits: tenant.Limits{ToolRPM: 9}})

	want := []tenant.TenantLimits{
		{Path: "acme", Limits: tenant.Limits{TPM: 5000, BudgetUSD: 100, Period: tenant.PeriodMonth}},
		{Path: "acme/search", Limits: tenant.Limits{TPM: 7, Period: tenant.PeriodDay}},
		{Path: "tools", Limits: tenant.Limits{ToolRPM: 9}},
	}
	if diff := cmp.Diff(want, list()); diff != "" {
		t.Errorf("TenantLimits (-want +got):\n%s", diff)
	}
}

// rec is a usage record with the fields the aggregates read.
func rec(id string, at time.Duration, key, ten, model string, status int, prompt, completion, cached int64, cost float64) usage.Record {
	return usage.Record{
		ID: id, Time: t0.Add(at), KeyID: key, Tenant: ten, Model: model, Pool: "p", Endpoint: "http://e:8000",
		PromptTokens: prompt, CompletionTokens: completion, CachedTokens: cached, CostUSD: cost, Status: status,
		TTFT: 150 * time.Millisecond, Duration: 2 * time.Second, Streamed: true, Estimated: id == "r1",
	}
}

func total(t testing.TB, s Store, q usage.Query) usage.Row {
	t.Helper()
	rows, err := s.Usage(t.Context(), q)
	if err != nil {
		t.Fatalf("Usage(%+v): %v", q, err)
	}
	if len(rows) != 1 {
		t.Fatalf("Usage(%+v) total: got %d rows, want 1: %v", q, len(rows), rows)
	}
	return rows[0]
}

func testUsageIdempotent(t *testing.T, s Store) {
	ctx := t.Context()
	if got := total(t, s, usage.Query{}); got != (usage.Row{}) {
		t.Errorf("total of an empty ledger: got %+v, want zeros", got)
	}
	batch := []usage.Record{
		rec("r1", 0, "k1", "acme", "m", 200, 10, 20, 5, 0.5),
		rec("r2", time.Second, "k1", "acme", "m", 200, 1, 2, 0, 0.25),
	}
	for range 2 {
		if err := s.AddUsage(ctx, batch); err != nil {
			t.Fatalf("AddUsage: %v", err)
		}
	}
	// A batch repeating one ID inside itself and one already stored.
	more := []usage.Record{
		rec("r3", 2*time.Second, "k1", "acme", "m", 500, 100, 0, 0, 0),
		rec("r3", 2*time.Second, "k1", "acme", "m", 500, 100, 0, 0, 0),
		rec("r1", 0, "k1", "acme", "m", 200, 10, 20, 5, 0.5),
	}
	if err := s.AddUsage(ctx, more); err != nil {
		t.Fatalf("AddUsage with repeats: %v", err)
	}
	if err := s.AddUsage(ctx, nil); err != nil {
		t.Fatalf("AddUsage(nil): %v", err)
	}
	want := usage.Row{Requests: 3, Errors: 1, PromptTokens: 111, CompletionTokens: 22, CachedTokens: 5, CostUSD: 0.75}
	if diff := cmp.Diff(want, total(t, s, usage.Query{})); diff != "" {
		t.Errorf("total after writing batches twice (-want +got):\n%s", diff)
	}
}

func testUsageQuery(t *testing.T, s Store) {
	recs := []usage.Record{
		rec("a1", 0, "k1", "acme", "llama", 200, 100, 10, 0, 1),
		rec("a2", 1*time.Minute, "k2", "acme/search", "llama", 200, 200, 20, 50, 2),
		rec("a3", 2*time.Minute, "k3", "acme/search/alice", "qwen", 429, 300, 0, 0, 0),
		rec("a4", 3*time.Minute, "k3", "acme/search/alice", "qwen", 200, 400, 40, 0, 4),
		rec("a5", 4*time.Minute, "k4", "acme2", "llama", 200, 1000, 100, 0, 8),
		rec("a6", 5*time.Minute, "k5", "acme-x", "llama", 499, 2000, 5, 0, 0.5),
		rec("a7", 6*time.Minute, "k6", "acme.x/y", "llama", 200, 3000, 0, 0, 0.25),
		rec("a8", 7*time.Minute, "k7", "a_c", "qwen", 503, 5, 0, 0, 0),
		rec("a9", 8*time.Minute, "k8", "abc", "qwen", 200, 7, 0, 0, 0),
		rec("a10", 9*time.Minute, "k9", "", "llama", 399, 9, 1, 0, 0.125),
	}
	if err := s.AddUsage(t.Context(), recs); err != nil {
		t.Fatal(err)
	}
	row := func(g string, req, errs, prompt, completion, cached int64, cost float64) usage.Row {
		return usage.Row{Group: g, Requests: req, Errors: errs, PromptTokens: prompt, CompletionTokens: completion, CachedTokens: cached, CostUSD: cost}
	}
	tests := []struct {
		name string
		q    usage.Query
		want []usage.Row
	}{
		{"everything", usage.Query{}, []usage.Row{row("", 10, 3, 7021, 176, 50, 15.875)}},
		{"prefix is the path and its descendants", usage.Query{TenantPrefix: "acme"},
			[]usage.Row{row("", 4, 1, 1000, 70, 50, 7)}},
		{"prefix of a team", usage.Query{TenantPrefix: "acme/search"},
			[]usage.Row{row("", 3, 1, 900, 60, 50, 6)}},
		{"prefix of a user", usage.Query{TenantPrefix: "acme/search/alice"},
			[]usage.Row{row("", 2, 1, 700, 40, 0, 4)}},
		{"prefix is not a string prefix", usage.Query{TenantPrefix: "acme/sea"},
			[]usage.Row{row("", 0, 0, 0, 0, 0, 0)}},
		{"underscore is literal", usage.Query{TenantPrefix: "a_c"},
			[]usage.Row{row("", 1, 1, 5, 0, 0, 0)}},
		{"dot is literal", usage.Query{TenantPrefix: "acme.x"},
			[]usage.Row{row("", 1, 0, 3000, 0, 0, 0.25)}},
		{"key", usage.Query{KeyID: "k3"}, []usage.Row{row("", 2, 1, 700, 40, 0, 4)}},
		{"since is inclusive", usage.Query{Since: t0.Add(8 * time.Minute)},
			[]usage.Row{row("", 2, 0, 16, 1, 0, 0.125)}},
		{"until is exclusive", usage.Query{Until: t0.Add(2 * time.Minute)},
			[]usage.Row{row("", 2, 0, 300, 30, 50, 3)}},
		{"since and until", usage.Query{Since: t0.Add(time.Minute), Until: t0.Add(3 * time.Minute)},
			[]usage.Row{row("", 2, 1, 500, 20, 50, 2)}},
		{"by model", usage.Query{By: usage.ByModel}, []usage.Row{
			row("llama", 6, 1, 6309, 136, 50, 11.875),
			row("qwen", 4, 2, 712, 40, 0, 4),
		}},
		{"by tenant under a prefix", usage.Query{TenantPrefix: "acme", By: usage.ByTenant}, []usage.Row{
			row("acme", 1, 0, 100, 10, 0, 1),
			row("acme/search", 1, 0, 200, 20, 50, 2),
			row("acme/search/alice", 2, 1, 700, 40, 0, 4),
		}},
		{"by key with every filter", usage.Query{TenantPrefix: "acme", KeyID: "k3", Since: t0.Add(time.Minute), Until: t0.Add(time.Hour), By: usage.ByKey},
			[]usage.Row{row("k3", 2, 1, 700, 40, 0, 4)}},
		{"grouped with nothing selected", usage.Query{TenantPrefix: "zzz", By: usage.ByModel}, nil},
		{"by tenant groups the empty tenant", usage.Query{Since: t0.Add(9 * time.Minute), By: usage.ByTenant},
			[]usage.Row{row("", 1, 0, 9, 1, 0, 0.125)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := s.Usage(t.Context(), tt.q)
			if err != nil {
				t.Fatalf("Usage: %v", err)
			}
			if len(got) == 0 {
				got = nil
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Usage(%+v) (-want +got):\n%s", tt.q, diff)
			}
		})
	}
	if _, err := s.Usage(t.Context(), usage.Query{By: "pool"}); err == nil {
		t.Errorf("Usage(By: pool): got nil error, want one")
	}
}

func testUsageConcurrent(t *testing.T, s Store) {
	const writers, batches, perBatch = 8, 10, 25
	var wg sync.WaitGroup
	errs := make(chan error, writers*batches)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := range batches {
				var recs []usage.Record
				for i := range perBatch {
					// Writer pairs share IDs, so half of what is sent is a repeat.
					id := fmt.Sprintf("w%d-b%d-r%d", w/2, b, i)
					recs = append(recs, rec(id, time.Duration(b)*time.Second, "k", "acme", "m", 200, 1, 2, 0, 0.5))
				}
				if err := s.AddUsage(t.Context(), recs); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("concurrent AddUsage: %v", err)
	}
	const unique = writers / 2 * batches * perBatch
	want := usage.Row{Requests: unique, PromptTokens: unique, CompletionTokens: 2 * unique, CostUSD: unique * 0.5}
	if diff := cmp.Diff(want, total(t, s, usage.Query{})); diff != "" {
		t.Errorf("total after concurrent writes (-want +got):\n%s", diff)
	}
}

// TestMemoryKeepsTheLatestRecords checks that the memory store is bounded:
// past MemoryUsageKept records the oldest go, and the latest stay.
func TestMemoryKeepsTheLatestRecords(t *testing.T) {
	ctx := t.Context()
	m := NewMemory()
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	batch := make([]usage.Record, 0, 1000)
	total := MemoryUsageKept + 2500
	for i := range total {
		batch = append(batch, usage.Record{ID: fmt.Sprintf("r%07d", i), Time: at.Add(time.Duration(i) * time.Second), Model: "m", Status: 200, PromptTokens: 1})
		if len(batch) == cap(batch) || i == total-1 {
			if err := m.AddUsage(ctx, batch); err != nil {
				t.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	rows, err := m.Usage(ctx, usage.Query{Until: at.Add(time.Duration(total) * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	if rows[0].Requests != MemoryUsageKept {
		t.Errorf("kept %d records, want %d", rows[0].Requests, MemoryUsageKept)
	}
	// The 2,500 oldest are gone; the newest is there.
	rows, _ = m.Usage(ctx, usage.Query{Until: at.Add(2500 * time.Second)})
	if rows[0].Requests != 0 {
		t.Errorf("%d of the oldest records are still kept", rows[0].Requests)
	}
	rows, _ = m.Usage(ctx, usage.Query{Since: at.Add(time.Duration(total-1) * time.Second), Until: at.Add(time.Duration(total) * time.Second)})
	if rows[0].Requests != 1 {
		t.Errorf("the newest record is missing")
	}
}

// testSecret asks for two secrets from many goroutines at once, as
// gateways starting together on one store do: each name gets one secret,
// the same to every asker.
func testSecret(t *testing.T, s Store) {
	const askers = 8
	got := make([][2][]byte, askers)
	errs := make(chan error, 2*askers)
	var wg sync.WaitGroup
	for i := range askers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j, name := range []string{"cache-salt", "other"} {
				v, err := s.Secret(t.Context(), name)
				if err != nil {
					errs <- err
				}
				got[i][j] = v
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("Secret: %v", err)
	}
	for i := range got {
		for j := range got[i] {
			if len(got[i][j]) != SecretSize {
				t.Fatalf("asker %d: secret %d is %d bytes, want %d", i, j, len(got[i][j]), SecretSize)
			}
			if !bytes.Equal(got[i][j], got[0][j]) {
				t.Errorf("asker %d got another secret %d than asker 0", i, j)
			}
		}
	}
	if bytes.Equal(got[0][0], got[0][1]) {
		t.Error("two names share a secret")
	}
	again, err := s.Secret(t.Context(), "cache-salt")
	if err != nil || !bytes.Equal(again, got[0][0]) {
		t.Errorf("asked again: %x, %v; want the first %x", again, err, got[0][0])
	}
}
