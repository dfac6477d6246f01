// The latest ledger records, as SQL both SQLite and Postgres run: which
// records a usage.RecordQuery selects, newest first, and reading them
// back from rows.

package store

import (
	"time"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/usage"
)

// recordColumns are the usage table's columns in the order scanRecord
// reads them.
const recordColumns = `id, time, key_id, tenant, model, pool, endpoint, prompt_tokens, completion_tokens, cached_tokens,
	estimated, cost_usd, status, ttft_ns, duration_ns, streamed, kind, bytes_in, bytes_out`

// recordsSQL builds the query for rq; now stands in for a zero Until.
// Newest first on the (time) index, or, for one key, on (key_id, time):
// either walks back from Until and stops at the limit, however large the
// ledger.
func recordsSQL(rq usage.RecordQuery, now time.Time, d sqlDialect) (string, []any) {
	q := &sqlQuery{placeholder: d.placeholder}
	q.b.WriteString("SELECT " + recordColumns + " FROM usage WHERE time < ")
	until := rq.Until
	if until.IsZero() {
		until = now
	}
	q.arg(d.timeArg(until))
	if !rq.Since.IsZero() {
		q.b.WriteString(" AND time >= ")
		q.arg(d.timeArg(rq.Since))
	}
	if rq.TenantPrefix != "" {
		lo, hi := descendantBounds(rq.TenantPrefix)
		col := d.recordTenant
		q.b.WriteString(" AND " + col + " >= ")
		q.arg(rq.TenantPrefix)
		q.b.WriteString(" AND " + col + " < ")
		q.arg(hi)
		q.b.WriteString(" AND (" + col + " = ")
		q.arg(rq.TenantPrefix)
		q.b.WriteString(" OR " + col + " >= ")
		q.arg(lo)
		q.b.WriteString(")")
	}
	if rq.KeyID != "" {
		q.b.WriteString(" AND key_id = ")
		q.arg(rq.KeyID)
	}
	if rq.Model != "" {
		q.b.WriteString(" AND model = ")
		q.arg(rq.Model)
	}
	if rq.Status != 0 {
		q.b.WriteString(" AND status = ")
		q.arg(rq.Status)
	}
	if rq.Errors {
		q.b.WriteString(" AND status >= 400")
	}
	q.b.WriteString(" ORDER BY time DESC, id DESC LIMIT ")
	q.arg(rq.RecordLimit())
	return q.b.String(), q.args
}

// scanRecord reads a row of recordColumns. Each dialect stores times and
// flags its own way: T is how the time is scanned and toTime reads it
// back.
func scanRecord[T any](r row, toTime func(T) time.Time) (usage.Record, error) {
	var (
		rec                 usage.Record
		at                  T
		estimated, streamed bool
		ttft, dur           int64
	)
	if err := r.Scan(&rec.ID, &at, &rec.KeyID, &rec.Tenant, &rec.Model, &rec.Pool, &rec.Endpoint,
		&rec.PromptTokens, &rec.CompletionTokens, &rec.CachedTokens, &estimated, &rec.CostUSD,
		&rec.Status, &ttft, &dur, &streamed, &rec.Kind, &rec.BytesIn, &rec.BytesOut); err != nil {
		return usage.Record{}, err
	}
	rec.Time, rec.Estimated, rec.Streamed = toTime(at), estimated, streamed
	rec.TTFT, rec.Duration = time.Duration(ttft), time.Duration(dur)
	return rec, nil
}
