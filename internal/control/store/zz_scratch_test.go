package store

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/usage"
)

func (s *SQLite) addUsageMulti(ctx context.Context, recs []usage.Record, per int) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	mk := func(n int) string {
		var b strings.Builder
		b.WriteString(`INSERT INTO usage (id, time, key_id, tenant, model, pool, endpoint, prompt_tokens, completion_tokens, cached_tokens, estimated, cost_usd, status, ttft_ns, duration_ns, streamed) VALUES `)
		for i := range n {
			if i > 0 {
				b.WriteString(",")
			}
			b.WriteString("(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)")
		}
		b.WriteString(" ON CONFLICT (id) DO NOTHING")
		return b.String()
	}
	stmt, err := tx.PrepareContext(ctx, mk(per))
	if err != nil {
		return err
	}
	defer stmt.Close()
	args := make([]any, 0, 16*per)
	for len(recs) > 0 {
		n := min(per, len(recs))
		args = args[:0]
		for _, r := range recs[:n] {
			args = append(args, r.ID, r.Time.UnixNano(), r.KeyID, r.Tenant, r.Model, r.Pool, r.Endpoint,
				r.PromptTokens, r.CompletionTokens, r.CachedTokens, r.Estimated, r.CostUSD, r.Status,
				int64(r.TTFT), int64(r.Duration), r.Streamed)
		}
		if n == per {
			_, err = stmt.ExecContext(ctx, args...)
		} else {
			_, err = tx.ExecContext(ctx, mk(n), args...)
		}
		if err != nil {
			return err
		}
		recs = recs[n:]
	}
	return tx.Commit()
}

func BenchmarkZZMulti(b *testing.B) {
	for _, per := range []int{1, 16, 64} {
		b.Run(fmt.Sprint(per), func(b *testing.B) {
			s, err := OpenSQLite(b.Context(), filepath.Join(b.TempDir(), "bench.db"))
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			recs := make([]usage.Record, 1024)
			n := 0
			for b.Loop() {
				for i := range recs {
					recs[i] = rec(fmt.Sprintf("r%09d", n), time.Duration(n)*time.Millisecond,
						fmt.Sprintf("k%d", n%100), fmt.Sprintf("org%d/team%d", n%10, n%7), "m", 200, 100, 10, 0, 0.001)
					n++
				}
				if err := s.addUsageMulti(b.Context(), recs, per); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "records/s")
		})
	}
}
