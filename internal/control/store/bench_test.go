// How fast the aggregates stay on a ledger of a million records, and how
// fast a ledger batch is written.

package store

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/usage"
)

// benchRows is the ledger size the aggregate benchmark is about: a month
// of a busy gateway at about 33,000 requests a day.
const benchRows = 1_000_000

// benchStep is the time between two loaded records: benchRows over 30 days.
const benchStep = 30 * 24 * time.Hour / benchRows

// benchStores are the stores the benchmarks run on; Postgres only when
// LLMGW_TEST_POSTGRES is set.
var benchStores = []struct {
	name string
	open func(b *testing.B) Store
}{
	{"sqlite", func(b *testing.B) Store {
		s, err := OpenSQLite(b.Context(), filepath.Join(b.TempDir(), "bench.db"))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close() })
		return s
	}},
	{"postgres", func(b *testing.B) Store { return openTestPostgres(b, freshSchema(b, postgresURL(b))) }},
}

// The loaded ledger, generated inside the database: record i is at
// end - (benchRows-i)*benchStep, from one of 1000 keys and of 1000 users
// (10 orgs of 5 teams of 20), on one of 8 models; one in 50 failed.
const (
	sqliteBulkLoad = `WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < ?1 - 1)
INSERT INTO usage (id, time, key_id, tenant, model, pool, endpoint, prompt_tokens, completion_tokens, cached_tokens,
	estimated, cost_usd, status, ttft_ns, duration_ns, streamed)
SELECT printf('r%07d', i), ?2 - (?1 - i) * ?3, printf('k%04d', i % 1000),
	'org' || (i % 10) || '/team' || (i / 10 % 5) || '/user' || (i / 50 % 20), 'model-' || (i % 8),
	'pool', 'http://10.0.0.1:8000', 100 + i % 900, 10 + i % 300, i % 64,
	0, (i % 1000) / 1e5, CASE WHEN i % 50 = 0 THEN 500 ELSE 200 END, 200000000, 3000000000, i % 2 = 0
FROM n`
	postgresBulkLoad = `INSERT INTO usage (id, time, key_id, tenant, model, pool, endpoint, prompt_tokens, completion_tokens, cached_tokens,
	estimated, cost_usd, status, ttft_ns, duration_ns, streamed)
SELECT 'r' || lpad(i::text, 7, '0'), $2::timestamptz - ($1 - i) * ($3 * interval '1 microsecond'), 'k' || lpad((i % 1000)::text, 4, '0'),
	'org' || (i % 10) || '/team' || (i / 10 % 5) || '/user' || (i / 50 % 20), 'model-' || (i % 8),
	'pool', 'http://10.0.0.1:8000', 100 + i % 900, 10 + i % 300, i % 64,
	false, ((i % 1000) / 1e5)::double precision, CASE WHEN i % 50 = 0 THEN 500 ELSE 200 END, 200000000, 3000000000, i % 2 = 0
FROM generate_series(0, $1 - 1) AS i`
)

// loadLedger fills s with benchRows records ending at end, in bulk: the
// tenant and key indexes are dropped, the rows generated in time order by
// one statement, and the indexes built again, as a restore would.
func loadLedger(b *testing.B, s Store, end time.Time) {
	b.Helper()
	ctx := b.Context()
	start := time.Now()
	var err error
	switch s := s.(type) {
	case *SQLite:
		err = withoutIndexes(ctx,
			func() (map[string]string, error) {
				return sqliteIndexes(ctx, s)
			},
			func(q string) error { _, err := s.db.ExecContext(ctx, q); return err },
			func() error {
				_, err := s.db.ExecContext(ctx, sqliteBulkLoad, benchRows, end.UnixNano(), int64(benchStep))
				return err
			})
	case *Postgres:
		err = withoutIndexes(ctx,
			func() (map[string]string, error) {
				return postgresIndexes(ctx, s)
			},
			func(q string) error { _, err := s.pool.Exec(ctx, q); return err },
			func() error {
				_, err := s.pool.Exec(ctx, postgresBulkLoad, benchRows, end, benchStep.Microseconds())
				return err
			})
		if err == nil {
			_, err = s.pool.Exec(ctx, "VACUUM ANALYZE usage")
		}
	default:
		b.Fatalf("no bulk load for %T", s)
	}
	if err != nil {
		b.Fatalf("bulk load: %v", err)
	}
	if got := total(b, s, usage.Query{}).Requests; got != benchRows {
		b.Fatalf("loaded %d records, want %d", got, benchRows)
	}
	b.Logf("loaded %d records in %v", benchRows, time.Since(start).Round(time.Millisecond))
}

// withoutIndexes drops the indexes list names (name → CREATE statement),
// runs load, and creates them again.
func withoutIndexes(ctx context.Context, list func() (map[string]string, error), exec func(string) error, load func() error) error {
	idx, err := list()
	if err != nil {
		return err
	}
	for name := range idx {
		if err := exec("DROP INDEX " + name); err != nil {
			return err
		}
	}
	if err := load(); err != nil {
		return err
	}
	for _, create := range idx {
		if err := exec(create); err != nil {
			return err
		}
	}
	return nil
}

func sqliteIndexes(ctx context.Context, s *SQLite) (map[string]string, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = 'usage' AND name <> 'usage_time_cover' AND sql IS NOT NULL`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return indexDefs(rows)
}

func postgresIndexes(ctx context.Context, s *Postgres) (map[string]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT indexname, indexdef FROM pg_indexes
		WHERE schemaname = current_schema() AND tablename = 'usage' AND indexname NOT IN ('usage_pkey', 'usage_time_cover')`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return indexDefs(rows)
}

// indexDefs reads rows of (index name, CREATE statement) into a map.
func indexDefs(rows rowScanner) (map[string]string, error) {
	type def struct{ name, create string }
	defs, err := scanAll(rows, "list indexes", func(r row) (def, error) {
		var d def
		return d, r.Scan(&d.name, &d.create)
	})
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(defs))
	for _, d := range defs {
		out[d.name] = d.create
	}
	return out, nil
}

// BenchmarkUsageAggregate times the budget and report queries on a ledger
// of a million records: one org's last week by model (about 23,000
// records), one team's month (20,000), and one key's month by model (1,000).
func BenchmarkUsageAggregate(b *testing.B) {
	end := time.Now().Truncate(time.Second)
	queries := []struct {
		name string
		q    usage.Query
		want int64 // records the rows sum to, about; proof the query selects what it should
	}{
		{"org-week-by-model", usage.Query{TenantPrefix: "org3", Since: end.Add(-7 * 24 * time.Hour), By: usage.ByModel}, benchRows / 10 * 7 / 30},
		{"team-month", usage.Query{TenantPrefix: "org3/team2", Since: end.Add(-30 * 24 * time.Hour)}, benchRows / 50},
		{"key-month-by-model", usage.Query{KeyID: "k0042", Since: end.Add(-30 * 24 * time.Hour), By: usage.ByModel}, benchRows / 1000},
	}
	for _, st := range benchStores {
		b.Run(st.name, func(b *testing.B) {
			s := st.open(b)
			loadLedger(b, s, end)
			for _, qq := range queries {
				b.Run(qq.name, func(b *testing.B) {
					var n int64
					for b.Loop() {
						rows, err := s.Usage(b.Context(), qq.q)
						if err != nil {
							b.Fatal(err)
						}
						n = 0
						for _, r := range rows {
							n += r.Requests
						}
					}
					if n < qq.want*9/10 || n > qq.want*11/10 {
						b.Errorf("%s selected %d records, want about %d", qq.name, n, qq.want)
					}
				})
			}
		})
	}
}

// BenchmarkAddUsage times writing one ledger batch of new records, at the
// ledger's default batch size and at a quarter of it.
func BenchmarkAddUsage(b *testing.B) {
	for _, st := range benchStores {
		for _, batch := range []int{256, 1024} {
			b.Run(fmt.Sprintf("%s/batch-%d", st.name, batch), func(b *testing.B) {
				s := st.open(b)
				recs := make([]usage.Record, batch)
				n := 0
				for b.Loop() {
					for i := range recs {
						recs[i] = rec(fmt.Sprintf("r%09d", n), time.Duration(n)*time.Millisecond,
							fmt.Sprintf("k%d", n%100), fmt.Sprintf("org%d/team%d", n%10, n%7), "m", 200, 100, 10, 0, 0.001)
						n++
					}
					if err := s.AddUsage(b.Context(), recs); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "records/s")
			})
		}
	}
}
