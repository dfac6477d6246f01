// The audit trail in each store: appended to, read back newest first by
// a query both SQLite and Postgres run, and pruned past its retention.

package store

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/audit"
)

// auditColumns are the audit table's columns in the order scanAudit
// reads them.
const auditColumns = `time, subject, email, action, target, tenant, source, detail`

// auditSQL builds the query for aq; now stands in for a zero Until.
// Newest first on the (time, seq) index, walking back from Until and
// stopping at the limit.
func auditSQL(aq audit.Query, now time.Time, d sqlDialect) (string, []any) {
	q := &sqlQuery{placeholder: d.placeholder}
	q.b.WriteString("SELECT " + auditColumns + " FROM audit WHERE time < ")
	until := aq.Until
	if until.IsZero() {
		until = now
	}
	q.arg(d.timeArg(until))
	if !aq.Since.IsZero() {
		q.b.WriteString(" AND time >= ")
		q.arg(d.timeArg(aq.Since))
	}
	if aq.TenantPrefix != "" {
		lo, hi := descendantBounds(aq.TenantPrefix)
		q.b.WriteString(" AND tenant >= ")
		q.arg(aq.TenantPrefix)
		q.b.WriteString(" AND tenant < ")
		q.arg(hi)
		q.b.WriteString(" AND (tenant = ")
		q.arg(aq.TenantPrefix)
		q.b.WriteString(" OR tenant >= ")
		q.arg(lo)
		q.b.WriteString(")")
	}
	if aq.Action != "" {
		q.b.WriteString(" AND action = ")
		q.arg(string(aq.Action))
	}
	if aq.Actor != "" {
		q.b.WriteString(" AND (subject = ")
		q.arg(aq.Actor)
		q.b.WriteString(" OR email = ")
		q.arg(aq.Actor)
		q.b.WriteString(")")
	}
	q.b.WriteString(" ORDER BY time DESC, seq DESC LIMIT ")
	q.arg(aq.EntryLimit())
	return q.b.String(), q.args
}

// scanAudit reads a row of auditColumns; T is how the dialect's time is
// scanned and toTime reads it back.
func scanAudit[T any](r row, toTime func(T) time.Time) (audit.Entry, error) {
	var (
		e      audit.Entry
		at     T
		action string
	)
	if err := r.Scan(&at, &e.Subject, &e.Email, &action, &e.Target, &e.Tenant, &e.Source, &e.Detail); err != nil {
		return audit.Entry{}, err
	}
	e.Time, e.Action = toTime(at), audit.Action(action)
	return e, nil
}

const insertAudit = `INSERT INTO audit (` + auditColumns + `) VALUES `

// AddAudit appends e to the trail.
func (s *SQLite) AddAudit(ctx context.Context, e audit.Entry) error {
	if _, err := s.db.ExecContext(ctx, insertAudit+`(?, ?, ?, ?, ?, ?, ?, ?)`, e.Time.UnixNano(), e.Subject, e.Email, string(e.Action),
		e.Target, e.Tenant, e.Source, e.Detail); err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	return nil
}

// Audit is the latest entries q selects, newest first.
func (s *SQLite) Audit(ctx context.Context, q audit.Query) ([]audit.Entry, error) {
	query, args := auditSQL(q, time.Now(), sqliteDialect)
	rows, err := s.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	defer rows.Close()
	return scanAll(rows, "audit", func(r row) (audit.Entry, error) {
		return scanAudit(r, func(n int64) time.Time { return time.Unix(0, n).UTC() })
	})
}

// PruneAudit removes the entries before before, and reports how many.
func (s *SQLite) PruneAudit(ctx context.Context, before time.Time) (int64, error) {
	res, err := s.db.ExecContext(ctx, `DELETE FROM audit WHERE time < ?`, before.UnixNano())
	if err != nil {
		return 0, fmt.Errorf("audit retention: %w", err)
	}
	return res.RowsAffected()
}

// AddAudit appends e to the trail.
func (s *Postgres) AddAudit(ctx context.Context, e audit.Entry) error {
	if _, err := s.pool.Exec(ctx, insertAudit+`($1, $2, $3, $4, $5, $6, $7, $8)`, e.Time, e.Subject, e.Email, string(e.Action),
		e.Target, e.Tenant, e.Source, e.Detail); err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	return nil
}

// Audit is the latest entries q selects, newest first.
func (s *Postgres) Audit(ctx context.Context, q audit.Query) ([]audit.Entry, error) {
	query, args := auditSQL(q, time.Now(), postgresDialect)
	rows, err := s.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	defer rows.Close()
	return scanAll(rows, "audit", func(r row) (audit.Entry, error) {
		return scanAudit(r, func(t time.Time) time.Time { return t.UTC() })
	})
}

// PruneAudit removes the entries before before, and reports how many.
func (s *Postgres) PruneAudit(ctx context.Context, before time.Time) (int64, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM audit WHERE time < $1`, before)
	if err != nil {
		return 0, fmt.Errorf("audit retention: %w", err)
	}
	return tag.RowsAffected(), nil
}

// AddAudit appends e to the trail.
func (m *Memory) AddAudit(ctx context.Context, e audit.Entry) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return fmt.Errorf("memory store: %w", errClosed)
	}
	e.Time = e.Time.UTC()
	m.audit = append(m.audit, e)
	return nil
}

// Audit is the latest entries q selects, newest first, as the SQL stores
// select them.
func (m *Memory) Audit(ctx context.Context, q audit.Query) ([]audit.Entry, error) {
	until := q.Until
	if until.IsZero() {
		until = time.Now()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []audit.Entry
	// Appended in order of writing; walked back, a later time first.
	all := slices.Clone(m.audit)
	slices.SortStableFunc(all, func(a, b audit.Entry) int { return a.Time.Compare(b.Time) })
	for i := len(all) - 1; i >= 0 && len(out) < q.EntryLimit(); i-- {
		e := all[i]
		switch {
		case !e.Time.Before(until), !q.Since.IsZero() && e.Time.Before(q.Since),
			q.TenantPrefix != "" && e.Tenant != q.TenantPrefix && !strings.HasPrefix(e.Tenant, q.TenantPrefix+"/"),
			q.Action != "" && e.Action != q.Action,
			q.Actor != "" && e.Subject != q.Actor && e.Email != q.Actor:
			continue
		}
		out = append(out, e)
	}
	return out, nil
}

// PruneAudit removes the entries before before, and reports how many.
func (m *Memory) PruneAudit(ctx context.Context, before time.Time) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := len(m.audit)
	m.audit = slices.DeleteFunc(m.audit, func(e audit.Entry) bool { return e.Time.Before(before) })
	return int64(n - len(m.audit)), nil
}
