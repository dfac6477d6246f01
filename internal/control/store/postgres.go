// The Postgres store, for several gateway replicas sharing keys, limits
// and one ledger. pgx with a connection pool; batches of usage go in as one
// multi-row insert built from arrays.

package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/tenant"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/usage"
)

var _ Store = (*Postgres)(nil)

// postgresMigrationLock is the advisory lock key held while migrating, so
// replicas starting together apply each migration once. It is "llmgw" in
// ASCII, to stay clear of other applications' keys.
const postgresMigrationLock int64 = 0x6c6c6d6777

// Postgres is a Store in a PostgreSQL database.
type Postgres struct {
	pool *pgxpool.Pool
}

// OpenPostgres connects to the database a postgres:// URL names (pgx
// syntax; search_path=... in the query picks a schema) and applies any
// pending migrations. Errors never include the URL, which may hold a
// password.
func OpenPostgres(ctx context.Context, url string) (*Postgres, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, errors.New("postgres store: cannot parse the url")
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres store %s/%s: %w", cfg.ConnConfig.Host, cfg.ConnConfig.Database, err)
	}
	s := &Postgres{pool: pool}
	if err := s.migrate(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres store %s/%s: %w", cfg.ConnConfig.Host, cfg.ConnConfig.Database, err)
	}
	return s, nil
}

// migrate applies, in one transaction under an advisory lock, the
// migrations newer than the version recorded.
func (s *Postgres) migrate(ctx context.Context) error {
	ms, err := loadMigrations("postgres")
	if err != nil {
		return err
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, postgresMigrationLock); err != nil {
		return fmt.Errorf("migrate: lock: %w", err)
	}
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version INTEGER PRIMARY KEY,
		applied TIMESTAMPTZ NOT NULL DEFAULT now()
	)`); err != nil {
		return fmt.Errorf("migrate: create schema_migrations: %w", err)
	}
	var have int
	if err := tx.QueryRow(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&have); err != nil {
		return fmt.Errorf("migrate: read version: %w", err)
	}
	for _, m := range ms {
		if m.version <= have {
			continue
		}
		if _, err := tx.Exec(ctx, m.sql); err != nil {
			return fmt.Errorf("migrate: apply %s: %w", m.name, err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version) VALUES ($1)`, m.version); err != nil {
			return fmt.Errorf("migrate: record %s: %w", m.name, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("migrate: commit: %w", err)
	}
	return nil
}

// pgTime is t as a nullable timestamptz: nil for the zero time.
func pgTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// fromPgTime is the inverse of pgTime, in UTC.
func fromPgTime(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.UTC()
}

// CreateKey adds k; an ID already present gives ErrExists. Times keep
// microseconds, Postgres's precision.
func (s *Postgres) CreateKey(ctx context.Context, k tenant.Key) error {
	if err := checkKey(k); err != nil {
		return err
	}
	models, tools, err := keyGlobs(k)
	if err != nil {
		return fmt.Errorf("create key %q: %w", k.ID, err)
	}
	tag, err := s.pool.Exec(ctx, `INSERT INTO keys
		(id, name, tenant, hash, models, rpm, tpm, budget_tokens, budget_usd, period, priority, created, expires, revoked, tools, tool_rpm)
		VALUES ($1, $2, $3, $4, $5::jsonb, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15::jsonb, $16) ON CONFLICT (id) DO NOTHING`,
		k.ID, k.Name, k.Tenant, k.Hash, models,
		k.Limits.RPM, k.Limits.TPM, k.Limits.BudgetTokens, k.Limits.BudgetUSD, k.Limits.Period,
		k.Priority, k.Created, pgTime(k.Expires), pgTime(k.Revoked), tools, k.Limits.ToolRPM)
	if err != nil {
		return fmt.Errorf("create key %q: %w", k.ID, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("create key %q: %w", k.ID, ErrExists)
	}
	return nil
}

const pgKeyColumns = `id, name, tenant, hash, models::text, rpm, tpm, budget_tokens, budget_usd, period, priority, created, expires, revoked, tools::text, tool_rpm`

// scanPgKey reads one row of pgKeyColumns.
func scanPgKey(r row) (tenant.Key, error) { return scanKey(r, fromPgTime) }

// Key returns the key with the given ID, or ErrNotFound.
func (s *Postgres) Key(ctx context.Context, id string) (tenant.Key, error) {
	k, err := scanPgKey(s.pool.QueryRow(ctx, `SELECT `+pgKeyColumns+` FROM keys WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return tenant.Key{}, fmt.Errorf("key %q: %w", id, ErrNotFound)
	}
	if err != nil {
		return tenant.Key{}, fmt.Errorf("key %q: %w", id, err)
	}
	return k, nil
}

// Keys lists every key, oldest first, then by ID.
func (s *Postgres) Keys(ctx context.Context) ([]tenant.Key, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+pgKeyColumns+` FROM keys ORDER BY created, id COLLATE "C"`)
	if err != nil {
		return nil, fmt.Errorf("list keys: %w", err)
	}
	defer rows.Close()
	return scanAll(rows, "list keys", scanPgKey)
}

// RevokeKey sets the key's revocation time, or gives ErrNotFound.
func (s *Postgres) RevokeKey(ctx context.Context, id string, at time.Time) error {
	tag, err := s.pool.Exec(ctx, `UPDATE keys SET revoked = $1 WHERE id = $2`, pgTime(at), id)
	if err != nil {
		return fmt.Errorf("revoke key %q: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("revoke key %q: %w", id, ErrNotFound)
	}
	return nil
}

// SetTenantLimits sets l on its path, replacing what was there, or removes
// the path's limits when l limits nothing.
func (s *Postgres) SetTenantLimits(ctx context.Context, l tenant.TenantLimits) error {
	query, args := setTenantLimitsSQL(l, postgresDialect)
	_, err := s.pool.Exec(ctx, query, args...)
	if err != nil {
		return fmt.Errorf("set tenant limits %q: %w", l.Path, err)
	}
	return nil
}

// TenantLimits lists every tenant level's limits in path order.
func (s *Postgres) TenantLimits(ctx context.Context) ([]tenant.TenantLimits, error) {
	rows, err := s.pool.Query(ctx, tenantLimitsQuery)
	if err != nil {
		return nil, fmt.Errorf("list tenant limits: %w", err)
	}
	defer rows.Close()
	return scanAll(rows, "list tenant limits", scanTenantLimits)
}

// AddUsage writes recs as one statement, one array per column unnested
// into rows, skipping IDs already stored. A batch of any size is one
// round trip and fifteen parameters.
func (s *Postgres) AddUsage(ctx context.Context, recs []usage.Record) error {
	if len(recs) == 0 {
		return nil
	}
	n := len(recs)
	var (
		ids, keyIDs, tenants, models, pools, endpoints = make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		times                                          = make([]time.Time, n)
		prompt, completion, cached, status, ttft, dur  = make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n)
		estimated, streamed                            = make([]bool, n), make([]bool, n)
		cost                                           = make([]float64, n)
		kinds                                          = make([]string, n)
		bytesIn, bytesOut                              = make([]int64, n), make([]int64, n)
	)
	for i, r := range recs {
		ids[i], keyIDs[i], tenants[i], models[i], pools[i], endpoints[i] = r.ID, r.KeyID, r.Tenant, r.Model, r.Pool, r.Endpoint
		times[i] = r.Time
		prompt[i], completion[i], cached[i], status[i] = r.PromptTokens, r.CompletionTokens, r.CachedTokens, int64(r.Status)
		ttft[i], dur[i] = int64(r.TTFT), int64(r.Duration)
		estimated[i], streamed[i], cost[i] = r.Estimated, r.Streamed, r.CostUSD
		kinds[i], bytesIn[i], bytesOut[i] = string(r.Kind), r.BytesIn, r.BytesOut
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO usage
		(id, time, key_id, tenant, model, pool, endpoint, prompt_tokens, completion_tokens, cached_tokens,
		 estimated, cost_usd, status, ttft_ns, duration_ns, streamed, kind, bytes_in, bytes_out)
		SELECT * FROM unnest($1::text[], $2::timestamptz[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[],
			$8::bigint[], $9::bigint[], $10::bigint[], $11::boolean[], $12::double precision[], $13::bigint[],
			$14::bigint[], $15::bigint[], $16::boolean[], $17::text[], $18::bigint[], $19::bigint[])
		ON CONFLICT (id) DO NOTHING`,
		ids, times, keyIDs, tenants, models, pools, endpoints,
		prompt, completion, cached, estimated, cost, status, ttft, dur, streamed, kinds, bytesIn, bytesOut)
	if err != nil {
		return fmt.Errorf("add usage: %w", err)
	}
	return nil
}

// Usage sums the records q selects.
func (s *Postgres) Usage(ctx context.Context, q usage.Query) ([]usage.Row, error) {
	query, args, err := usageSQL(q, time.Now(), postgresDialect)
	if err != nil {
		return nil, err
	}
	// An unnamed statement is planned for its arguments each time. A
	// cached one turns generic after a few runs, and a generic plan cannot
	// tell "one team" from "everyone" and scans the (time) index for both.
	rows, err := s.pool.Query(ctx, query, append([]any{pgx.QueryExecModeExec}, args...)...)
	if err != nil {
		return nil, fmt.Errorf("usage: %w", err)
	}
	defer rows.Close()
	return scanUsageRows(rows)
}

// Records is the latest records q selects, newest first.
func (s *Postgres) Records(ctx context.Context, q usage.RecordQuery) ([]usage.Record, error) {
	query, args := recordsSQL(q, time.Now(), postgresDialect)
	rows, err := s.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("usage records: %w", err)
	}
	defer rows.Close()
	return scanAll(rows, "usage records", func(r row) (usage.Record, error) {
		return scanRecord(r, func(t time.Time) time.Time { return t.UTC() })
	})
}

// Ping reports whether the database answers.
func (s *Postgres) Ping(ctx context.Context) error {
	if err := s.pool.Ping(ctx); err != nil {
		return fmt.Errorf("postgres store: %w", err)
	}
	return nil
}

// Close closes every connection of the pool.
func (s *Postgres) Close() error {
	s.pool.Close()
	return nil
}

// Secret is the secret named name: whichever process inserts first makes
// it, and every one reads back the row that won.
func (s *Postgres) Secret(ctx context.Context, name string) ([]byte, error) {
	if _, err := s.pool.Exec(ctx, `INSERT INTO secrets (name, value, created) VALUES ($1, $2, $3) ON CONFLICT (name) DO NOTHING`,
		name, newSecret(), time.Now()); err != nil {
		return nil, fmt.Errorf("secret %q: %w", name, err)
	}
	var v []byte
	if err := s.pool.QueryRow(ctx, `SELECT value FROM secrets WHERE name = $1`, name).Scan(&v); err != nil {
		return nil, fmt.Errorf("secret %q: %w", name, err)
	}
	return v, nil
}
