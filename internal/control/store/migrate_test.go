// Opening by URL, and migrations: applied once, kept on reopen, safe when
// two openers race.

package store

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/tenant"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/usage"
)

func TestOpen(t *testing.T) {
	t.Chdir(t.TempDir())
	tests := []struct {
		url     string
		want    string // the implementation's type, or "" for an error
		wantErr string // part of the error
	}{
		{url: "memory:", want: "*store.Memory"},
		{url: "sqlite:llmgw.db", want: "*store.SQLite"},
		{url: "sqlite:sub/../llmgw2.db", want: "*store.SQLite"},
		{url: "sqlite::memory:", want: "*store.SQLite"},
		{url: "sqlite:", wantErr: "path is empty"},
		{url: "sqlite:a.db?mode=ro", wantErr: "may not contain '?'"},
		{url: "", wantErr: "store url is empty"},
		{url: "mysql://user:secret@db/llmgw", wantErr: `scheme "mysql" is not supported`},
		{url: "postgres://%zz", wantErr: "cannot parse"},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			s, err := Open(t.Context(), tt.url)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Open(%q): got %v, want an error containing %q", tt.url, err, tt.wantErr)
				}
				if strings.Contains(err.Error(), "secret") {
					t.Errorf("Open(%q) error shows the password: %v", tt.url, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Open(%q): %v", tt.url, err)
			}
			defer s.Close()
			if got := typeName(s); got != tt.want {
				t.Errorf("Open(%q) is a %s, want %s", tt.url, got, tt.want)
			}
			if err := s.Ping(t.Context()); err != nil {
				t.Errorf("Ping: %v", err)
			}
		})
	}
}

func typeName(s Store) string {
	switch s.(type) {
	case *Memory:
		return "*store.Memory"
	case *SQLite:
		return "*store.SQLite"
	case *Postgres:
		return "*store.Postgres"
	}
	return "unknown"
}

func TestLoadMigrations(t *testing.T) {
	for _, db := range []string{"sqlite", "postgres"} {
		ms, err := loadMigrations(db)
		if err != nil {
			t.Fatalf("loadMigrations(%s): %v", db, err)
		}
		if len(ms) == 0 || ms[0].version != 1 {
			t.Fatalf("loadMigrations(%s): want versions from 1, got %d migrations", db, len(ms))
		}
		for i := 1; i < len(ms); i++ {
			if ms[i].version <= ms[i-1].version {
				t.Errorf("%s migrations out of order: %s after %s", db, ms[i].name, ms[i-1].name)
			}
		}
	}
}

// testReopen writes through one store, closes it, opens the same database
// again and expects the data kept and each migration recorded once.
func testReopen(t *testing.T, db string, open func() Store, versions func(Store) []int) {
	ctx := t.Context()
	s := open()
	k := tenant.Key{ID: "k1", Tenant: "acme", Hash: "h", Created: t0}
	if err := s.CreateKey(ctx, k); err != nil {
		t.Fatal(err)
	}
	if err := s.AddUsage(ctx, []usage.Record{rec("r1", 0, "k1", "acme", "m", 200, 1, 2, 3, 0.5)}); err != nil {
		t.Fatal(err)
	}
	s.Close()

	s = open()
	defer s.Close()
	if _, err := s.Key(ctx, "k1"); err != nil {
		t.Errorf("key lost on reopen: %v", err)
	}
	if got := total(t, s, usage.Query{}); got.Requests != 1 {
		t.Errorf("usage lost on reopen: %+v", got)
	}
	ms, err := loadMigrations(db)
	if err != nil {
		t.Fatal(err)
	}
	var want []int
	for _, m := range ms {
		want = append(want, m.version)
	}
	if diff := cmp.Diff(want, versions(s)); diff != "" {
		t.Errorf("schema_migrations (-want +got):\n%s", diff)
	}
}

func sqliteVersions(t *testing.T) func(Store) []int {
	return func(s Store) []int {
		rows, err := s.(*SQLite).db.QueryContext(t.Context(), `SELECT version FROM schema_migrations ORDER BY version`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var out []int
		for rows.Next() {
			var v int
			if err := rows.Scan(&v); err != nil {
				t.Fatal(err)
			}
			out = append(out, v)
		}
		return out
	}
}

func postgresVersions(t *testing.T) func(Store) []int {
	return func(s Store) []int {
		rows, err := s.(*Postgres).pool.Query(t.Context(), `SELECT version FROM schema_migrations ORDER BY version`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var out []int
		for rows.Next() {
			var v int
			if err := rows.Scan(&v); err != nil {
				t.Fatal(err)
			}
			out = append(out, v)
		}
		return out
	}
}

func TestSQLiteReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "llmgw.db")
	testReopen(t, "sqlite", func() Store {
		s, err := OpenSQLite(t.Context(), path)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}, sqliteVersions(t))
}

func TestPostgresReopen(t *testing.T) {
	u := freshSchema(t, postgresURL(t))
	testReopen(t, "postgres", func() Store {
		s, err := OpenPostgres(t.Context(), u)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}, postgresVersions(t))
}

// testRacingOpens opens one new database from several goroutines at once,
// as replicas starting together do; each must succeed.
func testRacingOpens(t *testing.T, open func(context.Context) (Store, error), versions func(Store) []int) {
	const openers = 4
	stores := make([]Store, openers)
	errs := make([]error, openers)
	var wg sync.WaitGroup
	for i := range openers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			stores[i], errs[i] = open(t.Context())
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("opener %d: %v", i, err)
		}
		defer stores[i].Close()
	}
	db := "postgres"
	if _, ok := stores[0].(*SQLite); ok {
		db = "sqlite"
	}
	ms, err := loadMigrations(db)
	if err != nil {
		t.Fatal(err)
	}
	var want []int
	for _, m := range ms {
		want = append(want, m.version)
	}
	if diff := cmp.Diff(want, versions(stores[0])); diff != "" {
		t.Errorf("schema_migrations after racing opens (-want +got):\n%s", diff)
	}
}

func TestSQLiteRacingOpens(t *testing.T) {
	path := filepath.Join(t.TempDir(), "llmgw.db")
	testRacingOpens(t, func(ctx context.Context) (Store, error) { return OpenSQLite(ctx, path) }, sqliteVersions(t))
}

func TestPostgresRacingOpens(t *testing.T) {
	u := freshSchema(t, postgresURL(t))
	testRacingOpens(t, func(ctx context.Context) (Store, error) { return OpenPostgres(ctx, u) }, postgresVersions(t))
}

// TestSQLiteConcurrentWriters checks that two stores on one file, as two
// processes would be, both write without SQLITE_BUSY.
func TestSQLiteConcurrentWriters(t *testing.T) {
	path := filepath.Join(t.TempDir(), "llmgw.db")
	a, b := openTestSQLite(t, path), openTestSQLite(t, path)
	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for i, s := range []*SQLite{a, b, a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 10 {
				r := rec("", time.Duration(j), "k", "acme", "m", 200, 1, 0, 0, 0)
				r.ID = string(rune('a'+i)) + string(rune('0'+j))
				if err := s.AddUsage(t.Context(), []usage.Record{r}); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("AddUsage from two stores on one file: %v", err)
	}
	if got := total(t, a, usage.Query{}); got.Requests != 40 {
		t.Errorf("requests: got %d, want 40", got.Requests)
	}
	var mode string
	if err := a.db.QueryRowContext(t.Context(), `PRAGMA journal_mode`).Scan(&mode); err != nil && err != sql.ErrNoRows {
		t.Fatal(err)
	}
	if mode != "wal" {
		t.Errorf("journal_mode: got %q, want wal", mode)
	}
	var pageSize int
	if err := a.db.QueryRowContext(t.Context(), `PRAGMA page_size`).Scan(&pageSize); err != nil {
		t.Fatal(err)
	}
	if pageSize != 16384 {
		t.Errorf("page_size of a new database: got %d, want 16384", pageSize)
	}
}
