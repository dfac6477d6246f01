// Spend alerts in each store: fired once per threshold and period (a
// second firing of the same is no row), read back when due for delivery,
// marked delivered or tried again later, and listed newest first.

package store

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"time"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/alert"
)

// alertColumns are the alerts table's columns in the order scanAlert
// reads them.
const alertColumns = `seq, scope, subject, tenant, kind, period_start, threshold, used, budget, fired, delivered, attempts, next_try, last_error`

// scanAlert reads a row of alertColumns; T and N are how the dialect's
// time and nullable time are scanned, toTime and nullTime read them back.
func scanAlert[T, N any](r row, toTime func(T) time.Time, nullTime func(N) time.Time) (alert.Alert, error) {
	var (
		a                   alert.Alert
		period, fired, next T
		delivered           N
	)
	if err := r.Scan(&a.Seq, &a.Scope, &a.Subject, &a.Tenant, &a.Kind, &period, &a.Threshold, &a.Used, &a.Budget,
		&fired, &delivered, &a.Attempts, &next, &a.LastError); err != nil {
		return alert.Alert{}, err
	}
	a.PeriodStart, a.Fired, a.NextTry, a.Delivered = toTime(period), toTime(fired), toTime(next), nullTime(delivered)
	return a, nil
}

func sqliteTime(n int64) time.Time { return time.Unix(0, n).UTC() }
func sqliteNullTime(n sql.NullInt64) time.Time {
	if !n.Valid {
		return time.Time{}
	}
	return time.Unix(0, n.Int64).UTC()
}

// FireAlert stores a, due at once, and reports whether it is new: the
// same threshold of the same budget in the same period is stored once.
func (s *SQLite) FireAlert(ctx context.Context, a alert.Alert) (bool, error) {
	res, err := s.db.ExecContext(ctx, `INSERT INTO alerts (scope, subject, tenant, kind, period_start, threshold, used, budget, fired, next_try)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
		a.Scope, a.Subject, a.Tenant, a.Kind, a.PeriodStart.UnixNano(), a.Threshold, a.Used, a.Budget, a.Fired.UnixNano(), a.Fired.UnixNano())
	if err != nil {
		return false, fmt.Errorf("alerts: %w", err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// DueAlerts is the undelivered alerts due at now, the longest due first,
// at most limit.
func (s *SQLite) DueAlerts(ctx context.Context, now time.Time, limit int) ([]alert.Alert, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+alertColumns+` FROM alerts WHERE delivered IS NULL AND next_try <= ? ORDER BY next_try, seq LIMIT ?`,
		now.UnixNano(), limit)
	if err != nil {
		return nil, fmt.Errorf("alerts: %w", err)
	}
	defer rows.Close()
	return scanAll(rows, "alerts", func(r row) (alert.Alert, error) { return scanAlert(r, sqliteTime, sqliteNullTime) })
}

// MarkAlert records a delivery tried: delivered at a time, or not (zero)
// and due again at next with why.
func (s *SQLite) MarkAlert(ctx context.Context, seq int64, delivered time.Time, attempts int, next time.Time, lastErr string) error {
	var d any
	if !delivered.IsZero() {
		d = delivered.UnixNano()
	}
	if _, err := s.db.ExecContext(ctx, `UPDATE alerts SET delivered = ?, attempts = ?, next_try = ?, last_error = ? WHERE seq = ?`,
		d, attempts, next.UnixNano(), lastErr, seq); err != nil {
		return fmt.Errorf("alerts: %w", err)
	}
	return nil
}

// Alerts is the latest alerts fired, newest first, at most limit.
func (s *SQLite) Alerts(ctx context.Context, limit int) ([]alert.Alert, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+alertColumns+` FROM alerts ORDER BY fired DESC, seq DESC LIMIT ?`, limit)
	if err != nil {
		return nil, fmt.Errorf("alerts: %w", err)
	}
	defer rows.Close()
	return scanAll(rows, "alerts", func(r row) (alert.Alert, error) { return scanAlert(r, sqliteTime, sqliteNullTime) })
}

func pgTimeUTC(t time.Time) time.Time { return t.UTC() }
func pgNullTime(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.UTC()
}

// FireAlert stores a, due at once, and reports whether it is new.
func (s *Postgres) FireAlert(ctx context.Context, a alert.Alert) (bool, error) {
	tag, err := s.pool.Exec(ctx, `INSERT INTO alerts (scope, subject, tenant, kind, period_start, threshold, used, budget, fired, next_try)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) ON CONFLICT DO NOTHING`,
		a.Scope, a.Subject, a.Tenant, a.Kind, a.PeriodStart, a.Threshold, a.Used, a.Budget, a.Fired, a.Fired)
	if err != nil {
		return false, fmt.Errorf("alerts: %w", err)
	}
	return tag.RowsAffected() == 1, nil
}

// DueAlerts is the undelivered alerts due at now, the longest due first.
func (s *Postgres) DueAlerts(ctx context.Context, now time.Time, limit int) ([]alert.Alert, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+alertColumns+` FROM alerts WHERE delivered IS NULL AND next_try <= $1 ORDER BY next_try, seq LIMIT $2`, now, limit)
	if err != nil {
		return nil, fmt.Errorf("alerts: %w", err)
	}
	defer rows.Close()
	return scanAll(rows, "alerts", func(r row) (alert.Alert, error) { return scanAlert(r, pgTimeUTC, pgNullTime) })
}

// MarkAlert records a delivery tried.
func (s *Postgres) MarkAlert(ctx context.Context, seq int64, delivered time.Time, attempts int, next time.Time, lastErr string) error {
	var d *time.Time
	if !delivered.IsZero() {
		d = &delivered
	}
	if _, err := s.pool.Exec(ctx, `UPDATE alerts SET delivered = $1, attempts = $2, next_try = $3, last_error = $4 WHERE seq = $5`,
		d, attempts, next, lastErr, seq); err != nil {
		return fmt.Errorf("alerts: %w", err)
	}
	return nil
}

// Alerts is the latest alerts fired, newest first, at most limit.
func (s *Postgres) Alerts(ctx context.Context, limit int) ([]alert.Alert, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+alertColumns+` FROM alerts ORDER BY fired DESC, seq DESC LIMIT $1`, limit)
	if err != nil {
		return nil, fmt.Errorf("alerts: %w", err)
	}
	defer rows.Close()
	return scanAll(rows, "alerts", func(r row) (alert.Alert, error) { return scanAlert(r, pgTimeUTC, pgNullTime) })
}

// alertKey is what makes an alert the same as another.
type alertKey struct {
	scope, subject, kind string
	period               int64
	threshold            int
}

// FireAlert stores a, due at once, and reports whether it is new.
func (m *Memory) FireAlert(ctx context.Context, a alert.Alert) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, x := range m.alerts {
		if (alertKey{x.Scope, x.Subject, x.Kind, x.PeriodStart.UnixNano(), x.Threshold}) == (alertKey{a.Scope, a.Subject, a.Kind, a.PeriodStart.UnixNano(), a.Threshold}) {
			return false, nil
		}
	}
	a.Seq = int64(len(m.alerts) + 1)
	a.NextTry, a.Delivered, a.Attempts, a.LastError = a.Fired, time.Time{}, 0, ""
	m.alerts = append(m.alerts, a)
	return true, nil
}

// DueAlerts is the undelivered alerts due at now, the longest due first.
func (m *Memory) DueAlerts(ctx context.Context, now time.Time, limit int) ([]alert.Alert, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []alert.Alert
	for _, a := range m.alerts {
		if a.Delivered.IsZero() && !a.NextTry.After(now) {
			out = append(out, a)
		}
	}
	slices.SortStableFunc(out, func(a, b alert.Alert) int { return a.NextTry.Compare(b.NextTry) })
	return out[:min(len(out), limit)], nil
}

// MarkAlert records a delivery tried.
func (m *Memory) MarkAlert(ctx context.Context, seq int64, delivered time.Time, attempts int, next time.Time, lastErr string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if seq < 1 || int(seq) > len(m.alerts) {
		return ErrNotFound
	}
	a := &m.alerts[seq-1]
	a.Delivered, a.Attempts, a.NextTry, a.LastError = delivered, attempts, next, lastErr
	return nil
}

// Alerts is the latest alerts fired, newest first, at most limit.
func (m *Memory) Alerts(ctx context.Context, limit int) ([]alert.Alert, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := slices.Clone(m.alerts)
	slices.Reverse(out)
	slices.SortStableFunc(out, func(a, b alert.Alert) int { return b.Fired.Compare(a.Fired) })
	return out[:min(len(out), limit)], nil
}
