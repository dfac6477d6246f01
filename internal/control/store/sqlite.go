// The SQLite store, the default: one file beside the gateway, pure Go
// (modernc.org/sqlite, no cgo), in WAL mode so readers never wait for the
// ledger's writer.

package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/tenant"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/usage"

	"modernc.org/sqlite" // registers the "sqlite" driver
	sqlite3 "modernc.org/sqlite/lib"
)

var _ Store = (*SQLite)(nil)

// sqliteBusyTimeout is how long a writer waits for another writer's lock
// (another process on the same file, or another connection of this one)
// before SQLITE_BUSY. A ledger batch commits in milliseconds, so ten
// seconds is only reached when something is stuck.
const sqliteBusyTimeout = 10 * time.Second

// sqliteParams are set on every connection. _txlock=immediate takes the
// write lock when a transaction begins rather than at its first write, so
// two writers queue on the busy timeout instead of one failing with
// SQLITE_BUSY when it cannot upgrade a read lock. A new database gets
// 16 KiB pages, which write a ledger batch with about a sixth less CPU
// than the default 4 KiB (the page size of an existing file stays as it
// is); it must come before WAL mode, which fixes it.
var sqliteParams = fmt.Sprintf("_pragma=page_size(16384)&_txlock=immediate&_busy_timeout=%d&_journal_mode=WAL&_foreign_keys=1&_pragma=cache_size(-65536)", sqliteBusyTimeout.Milliseconds())

// SQLite is a Store in a SQLite database.
type SQLite struct {
	db *sql.DB
}

// OpenSQLite opens, creating it if missing, the SQLite database at path
// and applies any pending migrations. ":memory:" is a private database
// on one connection that is gone on Close.
func OpenSQLite(ctx context.Context, path string) (*SQLite, error) {
	if path == "" {
		return nil, fmt.Errorf("sqlite store: path is empty; want sqlite:PATH")
	}
	if strings.ContainsRune(path, '?') {
		return nil, fmt.Errorf("sqlite store: path %q may not contain '?'", path)
	}
	db, err := sql.Open("sqlite", path+"?"+sqliteParams)
	if err != nil {
		return nil, fmt.Errorf("sqlite store %s: %w", path, err)
	}
	if path == ":memory:" {
		// Every connection to :memory: is a database of its own, so there
		// must be exactly one, and it must never be closed while idle.
		db.SetMaxOpenConns(1)
		db.SetMaxIdleConns(1)
		db.SetConnMaxIdleTime(0)
		db.SetConnMaxLifetime(0)
	}
	s := &SQLite{db: db}
	if err := s.migrateWhenFree(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("sqlite store %s: %w", path, err)
	}
	return s, nil
}

// migrateWhenFree is migrate, tried again while the file is busy, for up
// to sqliteBusyTimeout. Processes that open a new file together race to
// make it a WAL database, which takes an exclusive lock; where waiting for
// a lock could deadlock, SQLite answers SQLITE_BUSY at once rather than
// wait out the busy timeout, so one of them would fail to start.
func (s *SQLite) migrateWhenFree(ctx context.Context) error {
	deadline := time.Now().Add(sqliteBusyTimeout)
	for {
		err := s.migrate(ctx)
		if err == nil || !isBusy(err) || time.Now().After(deadline) {
			return err
		}
		// A random pause, so that the racers do not meet again.
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Duration(5+rand.IntN(20)) * time.Millisecond):
		}
	}
}

// isBusy reports whether err is SQLite's SQLITE_BUSY, of any extended
// kind.
func isBusy(err error) bool {
	var e *sqlite.Error
	return errors.As(err, &e) && e.Code()&0xff == sqlite3.SQLITE_BUSY
}

// migrate applies, in one transaction, the migrations newer than the
// version recorded. The immediate transaction holds the write lock, so
// two processes opening the same file apply them once.
func (s *SQLite) migrate(ctx context.Context) error {
	ms, err := loadMigrations("sqlite")
	if err != nil {
		return err
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version INTEGER PRIMARY KEY,
		applied INTEGER NOT NULL
	)`); err != nil {
		return fmt.Errorf("migrate: create schema_migrations: %w", err)
	}
	var have int
	if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&have); err != nil {
		return fmt.Errorf("migrate: read version: %w", err)
	}
	for _, m := range ms {
		if m.version <= have {
			continue
		}
		if _, err := tx.ExecContext(ctx, m.sql); err != nil {
			return fmt.Errorf("migrate: apply %s: %w", m.name, err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, applied) VALUES (?, ?)`, m.version, time.Now().UnixNano()); err != nil {
			return fmt.Errorf("migrate: record %s: %w", m.name, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("migrate: commit: %w", err)
	}
	return nil
}

// nanos is t as SQLite stores it; NULL for the zero time.
func nanos(t time.Time) sql.NullInt64 {
	if t.IsZero() {
		return sql.NullInt64{}
	}
	return sql.NullInt64{Int64: t.UnixNano(), Valid: true}
}

// fromNanos is the inverse of nanos, in UTC.
func fromNanos(n sql.NullInt64) time.Time {
	if !n.Valid {
		return time.Time{}
	}
	return time.Unix(0, n.Int64).UTC()
}

// CreateKey adds k; an ID already present gives ErrExists.
func (s *SQLite) CreateKey(ctx context.Context, k tenant.Key) error {
	if err := checkKey(k); err != nil {
		return err
	}
	models, tools, err := keyGlobs(k)
	if err != nil {
		return fmt.Errorf("create key %q: %w", k.ID, err)
	}
	res, err := s.db.ExecContext(ctx, `INSERT INTO keys
		(id, name, tenant, hash, models, rpm, tpm, budget_tokens, budget_usd, period, priority, created, expires, revoked, tools, tool_rpm)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING`,
		k.ID, k.Name, k.Tenant, k.Hash, models,
		k.Limits.RPM, k.Limits.TPM, k.Limits.BudgetTokens, k.Limits.BudgetUSD, k.Limits.Period,
		k.Priority, k.Created.UnixNano(), nanos(k.Expires), nanos(k.Revoked), tools, k.Limits.ToolRPM)
	if err != nil {
		return fmt.Errorf("create key %q: %w", k.ID, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("create key %q: %w", k.ID, err)
	} else if n == 0 {
		return fmt.Errorf("create key %q: %w", k.ID, ErrExists)
	}
	return nil
}

const sqliteKeyColumns = `id, name, tenant, hash, models, rpm, tpm, budget_tokens, budget_usd, period, priority, created, expires, revoked, tools, tool_rpm`

// scanSQLiteKey reads one row of sqliteKeyColumns.
func scanSQLiteKey(r row) (tenant.Key, error) { return scanKey(r, fromNanos) }

// Key returns the key with the given ID, or ErrNotFound.
func (s *SQLite) Key(ctx context.Context, id string) (tenant.Key, error) {
	k, err := scanSQLiteKey(s.db.QueryRowContext(ctx, `SELECT `+sqliteKeyColumns+` FROM keys WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return tenant.Key{}, fmt.Errorf("key %q: %w", id, ErrNotFound)
	}
	if err != nil {
		return tenant.Key{}, fmt.Errorf("key %q: %w", id, err)
	}
	return k, nil
}

// Keys lists every key, oldest first, then by ID.
func (s *SQLite) Keys(ctx context.Context) ([]tenant.Key, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+sqliteKeyColumns+` FROM keys ORDER BY created, id`)
	if err != nil {
		return nil, fmt.Errorf("list keys: %w", err)
	}
	defer rows.Close()
	return scanAll(rows, "list keys", scanSQLiteKey)
}

// RevokeKey sets the key's revocation time, or gives ErrNotFound.
func (s *SQLite) RevokeKey(ctx context.Context, id string, at time.Time) error {
	res, err := s.db.ExecContext(ctx, `UPDATE keys SET revoked = ? WHERE id = ?`, nanos(at), id)
	if err != nil {
		return fmt.Errorf("revoke key %q: %w", id, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("revoke key %q: %w", id, err)
	} else if n == 0 {
		return fmt.Errorf("revoke key %q: %w", id, ErrNotFound)
	}
	return nil
}

// SetTenantLimits sets l on its path, replacing what was there, or removes
// the path's limits when l limits nothing.
func (s *SQLite) SetTenantLimits(ctx context.Context, l tenant.TenantLimits) error {
	query, args := setTenantLimitsSQL(l, sqliteDialect)
	_, err := s.db.ExecContext(ctx, query, args...)
	if err != nil {
		return fmt.Errorf("set tenant limits %q: %w", l.Path, err)
	}
	return nil
}

// TenantLimits lists every tenant level's limits in path order.
func (s *SQLite) TenantLimits(ctx context.Context) ([]tenant.TenantLimits, error) {
	rows, err := s.db.QueryContext(ctx, tenantLimitsQuery)
	if err != nil {
		return nil, fmt.Errorf("list tenant limits: %w", err)
	}
	defer rows.Close()
	return scanAll(rows, "list tenant limits", scanTenantLimits)
}

// AddUsage writes recs in one transaction, skipping IDs already stored.
func (s *SQLite) AddUsage(ctx context.Context, recs []usage.Record) error {
	if len(recs) == 0 {
		return nil
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("add usage: %w", err)
	}
	defer tx.Rollback()
	stmt, err := tx.PrepareContext(ctx, `INSERT INTO usage
		(id, time, key_id, tenant, model, pool, endpoint, prompt_tokens, completion_tokens, cached_tokens,
		 estimated, cost_usd, status, ttft_ns, duration_ns, streamed, kind, bytes_in, bytes_out)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING`)
	if err != nil {
		return fmt.Errorf("add usage: %w", err)
	}
	defer stmt.Close()
	// Each row runs without ctx: modernc.org/sqlite watches a cancellable
	// context with a goroutine per statement, which would cost more than
	// the row. A row cannot wait on anything (the transaction took the
	// write lock when it began), so checking ctx between rows bounds the
	// batch as well.
	rowCtx := context.WithoutCancel(ctx)
	for _, r := range recs {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("add usage: %w", err)
		}
		if _, err := stmt.ExecContext(rowCtx, r.ID, r.Time.UnixNano(), r.KeyID, r.Tenant, r.Model, r.Pool, r.Endpoint,
			r.PromptTokens, r.CompletionTokens, r.CachedTokens, r.Estimated, r.CostUSD, r.Status,
			int64(r.TTFT), int64(r.Duration), r.Streamed, string(r.Kind), r.BytesIn, r.BytesOut); err != nil {
			return fmt.Errorf("add usage %q: %w", r.ID, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("add usage: commit: %w", err)
	}
	return nil
}

// Usage sums the records q selects.
func (s *SQLite) Usage(ctx context.Context, q usage.Query) ([]usage.Row, error) {
	query, args, err := usageSQL(q, time.Now(), sqliteDialect)
	if err != nil {
		return nil, err
	}
	rows, err := s.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("usage: %w", err)
	}
	defer rows.Close()
	return scanUsageRows(rows)
}

// Records is the latest records q selects, newest first.
func (s *SQLite) Records(ctx context.Context, q usage.RecordQuery) ([]usage.Record, error) {
	query, args := recordsSQL(q, time.Now(), sqliteDialect)
	rows, err := s.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("usage records: %w", err)
	}
	defer rows.Close()
	return scanAll(rows, "usage records", func(r row) (usage.Record, error) {
		return scanRecord(r, func(n int64) time.Time { return time.Unix(0, n).UTC() })
	})
}

// Ping reports whether the database answers.
func (s *SQLite) Ping(ctx context.Context) error {
	if err := s.db.PingContext(ctx); err != nil {
		return fmt.Errorf("sqlite store: %w", err)
	}
	return nil
}

// Close closes the database.
func (s *SQLite) Close() error { return s.db.Close() }

// nonNil is s, or an empty slice for nil, so it is stored as [] not null.
func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// checkKey refuses a key the stores cannot keep: one without an ID, or
// without a creation time to list it by.
func checkKey(k tenant.Key) error {
	if k.ID == "" {
		return fmt.Errorf("create key: id is empty")
	}
	if k.Created.IsZero() {
		return fmt.Errorf("create key %q: created time is zero", k.ID)
	}
	return nil
}

// Secret is the secret named name: whichever process inserts first makes
// it, and every one reads back the row that won.
func (s *SQLite) Secret(ctx context.Context, name string) ([]byte, error) {
	if _, err := s.db.ExecContext(ctx, `INSERT INTO secrets (name, value, created) VALUES (?, ?, ?) ON CONFLICT (name) DO NOTHING`,
		name, newSecret(), time.Now().UnixNano()); err != nil {
		return nil, fmt.Errorf("secret %q: %w", name, err)
	}
	var v []byte
	if err := s.db.QueryRowContext(ctx, `SELECT value FROM secrets WHERE name = ?`, name).Scan(&v); err != nil {
		return nil, fmt.Errorf("secret %q: %w", name, err)
	}
	return v, nil
}
