package ledger

import (
	"context"
	"testing"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/store"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/usage"
)

// discard is a store that takes every write at once.
type discard struct{ store.Store }

func (discard) AddUsage(context.Context, []usage.Record) error { return nil }

// BenchmarkRecord is the request path's share of the ledger: handing one
// record over. The writer's batches, off the request path, are written
// between the timed stretches, so that no record spools.
func BenchmarkRecord(b *testing.B) {
	l := New(discard{}, Options{SpoolDir: b.TempDir()})
	r := rec(1)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if i%DefaultBatchSize == DefaultBatchSize-1 {
			b.StopTimer()
			if err := l.Flush(b.Context()); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
		l.Record(r)
	}
	if n := counter(b, l, resultSpooled); n > 0 {
		b.Fatalf("%d records spooled: the benchmark measures the spool, not Record", n)
	}
}
