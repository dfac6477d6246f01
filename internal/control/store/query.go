// What SQLite and Postgres share: the usage aggregate as SQL (which rows a
// usage.Query selects and how they are grouped and summed), and reading
// keys and tenant limits back from rows.

package store

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/tenant"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/usage"
)

// groupColumn is the usage column a Query.By groups on; "" for one total.
func groupColumn(by string) (string, error) {
	switch by {
	case "":
		return "", nil
	case usage.ByModel:
		return "model", nil
	case usage.ByTenant:
		return "tenant", nil
	case usage.ByKey:
		return "key_id", nil
	}
	return "", fmt.Errorf("usage query: cannot group by %q; want %s, %s or %s", by, usage.ByModel, usage.ByTenant, usage.ByKey)
}

// descendantBounds are the byte-wise bounds of the tenant paths below p:
// every "p/..." is at least p+"/" and less than p+"0", '0' being the byte
// after '/'. A range rather than LIKE keeps '_' and '%' in paths literal,
// stays case-sensitive in SQLite, and lets the (tenant, time) index serve it.
func descendantBounds(p string) (lo, hi string) { return p + "/", p + "0" }

// sqlQuery is a statement under construction with its arguments.
type sqlQuery struct {
	b           strings.Builder
	args        []any
	placeholder func(n int) string // see sqlDialect
}

// arg adds v as the next argument and writes its placeholder.
func (q *sqlQuery) arg(v any) {
	q.args = append(q.args, v)
	q.b.WriteString(q.placeholder(len(q.args)))
}

// sqlDialect is how SQLite and Postgres differ in the statements they share.
type sqlDialect struct {
	// placeholder renders the n-th argument, counting from 1.
	placeholder func(n int) string
	// timeArg turns a time into what the database stores.
	timeArg func(time.Time) any
	// timeFilter is the time column as the WHERE clause names it when the
	// query selects a tenant prefix. SQLite's planner, without statistics,
	// prefers the (time) index to a range of tenants even for "the last
	// month", which is most of the ledger; "+time" takes that index out of
	// the running, leaving (tenant, time), which filters on time from the
	// index itself. A key's equality already wins on (key_id, time).
	timeFilter string
	// recordTenant is the tenant column as the latest records' WHERE
	// clause names it. There SQLite's planner takes the (tenant, time)
	// index for a prefix and sorts every record of the subtree, 10,000 for
	// one org of ten in a ledger of 100,000; "+tenant" leaves it the
	// (time) index, walked back from Until and filtered in the index,
	// which stops at the page's size.
	recordTenant string
}

var (
	sqliteDialect = sqlDialect{
		placeholder:  func(int) string { return "?" },
		timeArg:      func(t time.Time) any { return t.UnixNano() },
		timeFilter:   "+time",
		recordTenant: "+tenant",
	}
	postgresDialect = sqlDialect{
		placeholder:  func(n int) string { return fmt.Sprintf("$%d", n) },
		timeArg:      func(t time.Time) any { return t },
		timeFilter:   "time",
		recordTenant: "tenant",
	}
)

// usageSQL builds the aggregate for uq; now stands in for a zero Until.
func usageSQL(uq usage.Query, now time.Time, d sqlDialect) (string, []any, error) {
	col, err := groupColumn(uq.By)
	if err != nil {
		return "", nil, err
	}
	q := &sqlQuery{placeholder: d.placeholder}
	timeCol := "time"
	if uq.TenantPrefix != "" && uq.KeyID == "" {
		timeCol = d.timeFilter
	}
	q.b.WriteString("SELECT ")
	if col != "" {
		q.b.WriteString(col)
	} else {
		q.b.WriteString("''")
	}
	q.b.WriteString(`, COUNT(*),
	CAST(COALESCE(SUM(CASE WHEN status >= 400 THEN 1 ELSE 0 END), 0) AS BIGINT),
	CAST(COALESCE(SUM(prompt_tokens), 0) AS BIGINT),
	CAST(COALESCE(SUM(completion_tokens), 0) AS BIGINT),
	CAST(COALESCE(SUM(cached_tokens), 0) AS BIGINT),
	CAST(COALESCE(SUM(cost_usd), 0) AS DOUBLE PRECISION)
FROM usage WHERE `)
	q.b.WriteString(timeCol)
	q.b.WriteString(" < ")
	until := uq.Until
	if until.IsZero() {
		until = now
	}
	q.arg(d.timeArg(until))
	if !uq.Since.IsZero() {
		q.b.WriteString(" AND " + timeCol + " >= ")
		q.arg(d.timeArg(uq.Since))
	}
	if uq.TenantPrefix != "" {
		lo, hi := descendantBounds(uq.TenantPrefix)
		// The outer range is one index range; the OR inside it drops the
		// siblings between p and p+"/" such as "p-x" and "p.x".
		q.b.WriteString(" AND tenant >= ")
		q.arg(uq.TenantPrefix)
		q.b.WriteString(" AND tenant < ")
		q.arg(hi)
		q.b.WriteString(" AND (tenant = ")
		q.arg(uq.TenantPrefix)
		q.b.WriteString(" OR tenant >= ")
		q.arg(lo)
		q.b.WriteString(")")
	}
	if uq.KeyID != "" {
		q.b.WriteString(" AND key_id = ")
		q.arg(uq.KeyID)
	}
	if col != "" {
		fmt.Fprintf(&q.b, " GROUP BY %s ORDER BY %s", col, col)
	}
	return q.b.String(), q.args, nil
}

// rowScanner is what sql.Rows and pgx.Rows share.
type rowScanner interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}

// row is one row to scan: what sql.Row, pgx.Row and both Rows share.
type row interface {
	Scan(dest ...any) error
}

// scanAll reads every row with scan; what names the listing in errors.
func scanAll[T any](rows rowScanner, what string, scan func(row) (T, error)) ([]T, error) {
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}

// scanKey reads a row of the keys table's columns in their usual order.
// Each dialect stores times its own way: T is how they are scanned, and
// toTime reads one back (zero for none).
func scanKey[T any](r row, toTime func(T) time.Time) (tenant.Key, error) {
	var (
		k                         tenant.Key
		models, tools             string
		created, expires, revoked T
	)
	if err := r.Scan(&k.ID, &k.Name, &k.Tenant, &k.Hash, &models,
		&k.Limits.RPM, &k.Limits.TPM, &k.Limits.BudgetTokens, &k.Limits.BudgetUSD, &k.Limits.Period,
		&k.Priority, &created, &expires, &revoked, &tools, &k.Limits.ToolRPM); err != nil {
		return tenant.Key{}, err
	}
	if err := json.Unmarshal([]byte(models), &k.Models); err != nil {
		return tenant.Key{}, fmt.Errorf("key %q: models: %w", k.ID, err)
	}
	if len(k.Models) == 0 {
		k.Models = nil
	}
	if err := json.Unmarshal([]byte(tools), &k.Tools); err != nil {
		return tenant.Key{}, fmt.Errorf("key %q: tools: %w", k.ID, err)
	}
	if len(k.Tools) == 0 {
		k.Tools = nil
	}
	k.Created, k.Expires, k.Revoked = toTime(created), toTime(expires), toTime(revoked)
	return k, nil
}

// tenantLimitsQuery lists every tenant level's limits in path order, in
// both dialects.
const tenantLimitsQuery = `SELECT path, rpm, tpm, budget_tokens, budget_usd, period, tool_rpm FROM tenant_limits ORDER BY path`

// setTenantLimitsSQL is the statement that sets l on its path, replacing
// what was there, or removes the path's limits when l limits nothing.
func setTenantLimitsSQL(l tenant.TenantLimits, d sqlDialect) (string, []any) {
	p := d.placeholder
	if l.IsZero() {
		return `DELETE FROM tenant_limits WHERE path = ` + p(1), []any{l.Path}
	}
	return `INSERT INTO tenant_limits (path, rpm, tpm, budget_tokens, budget_usd, period, tool_rpm)
		VALUES (` + p(1) + `, ` + p(2) + `, ` + p(3) + `, ` + p(4) + `, ` + p(5) + `, ` + p(6) + `, ` + p(7) + `)
		ON CONFLICT (path) DO UPDATE SET rpm = excluded.rpm, tpm = excluded.tpm,
			budget_tokens = excluded.budget_tokens, budget_usd = excluded.budget_usd, period = excluded.period,
			tool_rpm = excluded.tool_rpm`,
		[]any{l.Path, l.RPM, l.TPM, l.BudgetTokens, l.BudgetUSD, l.Period, l.ToolRPM}
}

func scanTenantLimits(r row) (tenant.TenantLimits, error) {
	var l tenant.TenantLimits
	err := r.Scan(&l.Path, &l.RPM, &l.TPM, &l.BudgetTokens, &l.BudgetUSD, &l.Period, &l.ToolRPM)
	return l, err
}

// scanUsageRows reads the rows usageSQL selects. A total over no records
// is one row of zeros.
func scanUsageRows(rows rowScanner) ([]usage.Row, error) {
	var out []usage.Row
	for rows.Next() {
		var r usage.Row
		if err := rows.Scan(&r.Group, &r.Requests, &r.Errors, &r.PromptTokens, &r.CompletionTokens, &r.CachedTokens, &r.CostUSD); err != nil {
			return nil, fmt.Errorf("scan usage row: %w", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read usage rows: %w", err)
	}
	return out, nil
}

// keyGlobs is k's model and tool globs as the keys table holds them, JSON
// arrays.
func keyGlobs(k tenant.Key) (models, tools string, err error) {
	m, err := json.Marshal(nonNil(k.Models))
	if err != nil {
		return "", "", err
	}
	t, err := json.Marshal(nonNil(k.Tools))
	if err != nil {
		return "", "", err
	}
	return string(m), string(t), nil
}
