// The ledger's tests: batching, the shutdown flush, and outages of the
// store, after which every record must be in the ledger exactly once.

package ledger

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/store"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/usage"
)

// flaky is a store whose AddUsage fails while down. With lostAck set it
// stores the records and then reports failure, as when a connection
// breaks after the commit.
type flaky struct {
	store.Store
	down    atomic.Bool
	lostAck atomic.Bool

	mu    sync.Mutex // protects calls
	calls []int      // sizes of the AddUsage calls the store took
}

var errDown = errors.New("store is down")

func (f *flaky) AddUsage(ctx context.Context, recs []usage.Record) error {
	if f.down.Load() {
		return errDown
	}
	if err := f.Store.AddUsage(ctx, recs); err != nil {
		return err
	}
	f.mu.Lock()
	f.calls = append(f.calls, len(recs))
	f.mu.Unlock()
	if f.lostAck.Load() {
		return errors.New("connection reset after commit")
	}
	return nil
}

func (f *flaky) callSizes() []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]int(nil), f.calls...)
}

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// rec is record i; its key is its ID, so grouping by key counts each ID.
func rec(i int) usage.Record {
	id := fmt.Sprintf("r%05d", i)
	return usage.Record{ID: id, Time: t0.Add(time.Duration(i) * time.Millisecond), KeyID: id, Tenant: "acme/search",
		Model: "m", Status: 200, PromptTokens: 10, CompletionTokens: 5, CostUSD: 0.5}
}

// assertOnce checks that the store holds records 0..n-1, each exactly once.
// Its queries name an end, as the clock in a synctest bubble is in 2000.
func assertOnce(t *testing.T, st store.Store, n int) {
	t.Helper()
	ctx := context.Background()
	until := t0.Add(24 * time.Hour)
	rows, err := st.Usage(ctx, usage.Query{Until: until})
	if err != nil {
		t.Fatal(err)
	}
	if got := rows[0].Requests; got != int64(n) {
		t.Errorf("ledger holds %d requests, want %d", got, n)
	}
	rows, err = st.Usage(ctx, usage.Query{Until: until, By: usage.ByKey})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, r := range rows {
		got[r.Group] = r.Requests
	}
	want := map[string]int64{}
	for i := range n {
		want[rec(i).ID] = 1
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("requests by record ID (-want +got):\n%s", diff)
	}
}

// segments lists the spool's segment files.
func segments(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*"+segmentExt))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func counter(t testing.TB, l *Ledger, result string) int {
	t.Helper()
	return int(testutil.ToFloat64(l.m.records.WithLabelValues(result)))
}

func TestFlushBatches(t *testing.T) {
	st := &flaky{Store: store.NewMemory()}
	l := New(st, Options{SpoolDir: t.TempDir(), BatchSize: 100})
	const n = 100 * queueBatches // as many as the queue holds
	for i := range n {
		l.Record(rec(i))
	}
	if err := l.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	var want []int
	for range queueBatches {
		want = append(want, 100)
	}
	if diff := cmp.Diff(want, st.callSizes()); diff != "" {
		t.Errorf("AddUsage calls (-want +got):\n%s", diff)
	}
	assertOnce(t, st, n)
	if got := counter(t, l, resultWritten); got != n {
		t.Errorf("written: got %d, want %d", got, n)
	}
}

func TestRunBatchesFullAndOnTick(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &flaky{Store: store.NewMemory()}
		l := New(st, Options{SpoolDir: t.TempDir(), BatchSize: 100, FlushInterval: time.Second})
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() { done <- l.Run(ctx) }()

		for i := range 250 {
			l.Record(rec(i))
		}
		synctest.Wait() // no time has passed: only full batches are written
		if diff := cmp.Diff([]int{100, 100}, st.callSizes()); diff != "" {
			t.Errorf("before the tick, AddUsage calls (-want +got):\n%s", diff)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if diff := cmp.Diff([]int{100, 100, 50}, st.callSizes()); diff != "" {
			t.Errorf("after the tick, AddUsage calls (-want +got):\n%s", diff)
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		assertOnce(t, st, 250)
	})
}

func TestShutdownFlushes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		st := store.NewMemory()
		l := New(st, Options{SpoolDir: dir, BatchSize: 100, FlushInterval: time.Hour})
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() { done <- l.Run(ctx) }()
		for i := range 42 {
			l.Record(rec(i))
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("Run: %v", err)
		}
		assertOnce(t, st, 42)

		// A record arriving after Run has ended waits in the spool for the
		// next start.
		l.Record(rec(42))
		if got := counter(t, l, resultSpooled); got != 1 {
			t.Errorf("spooled after stop: got %d, want 1", got)
		}
		next := New(st, Options{SpoolDir: dir})
		if err := next.Flush(t.Context()); err != nil {
			t.Fatal(err)
		}
		assertOnce(t, st, 43)
	})
}

// outage sends records while the store is down, checks they wait in the
// spool, brings the store back and checks each is stored exactly once.
func outage(t *testing.T, inner store.Store) {
	ctx := t.Context()
	dir := t.TempDir()
	st := &flaky{Store: inner}
	reg := prometheus.NewRegistry()
	l := New(st, Options{SpoolDir: dir, BatchSize: 50, Registerer: reg})

	for i := range 100 {
		l.Record(rec(i))
	}
	if err := l.Flush(ctx); err != nil {
		t.Fatalf("Flush with the store up: %v", err)
	}
	st.down.Store(true)
	for i := 100; i < 400; i++ {
		l.Record(rec(i))
		if i%100 == 0 {
			if err := l.Flush(ctx); !errors.Is(err, errDown) {
				t.Fatalf("Flush with the store down: got %v, want errDown", err)
			}
		}
	}
	if err := l.Flush(ctx); !errors.Is(err, errDown) {
		t.Fatalf("Flush with the store down: got %v, want errDown", err)
	}
	assertOnce(t, inner, 100)
	if got := testutil.ToFloat64(l.m.spooled); got != 300 {
		t.Errorf("spooled records gauge: got %v, want 300", got)
	}
	if len(segments(t, dir)) == 0 {
		t.Errorf("no spool segment in %s", dir)
	}

	st.down.Store(false)
	if err := l.Flush(ctx); err != nil {
		t.Fatalf("Flush after the store came back: %v", err)
	}
	assertOnce(t, inner, 400)
	if s := segments(t, dir); len(s) != 0 {
		t.Errorf("spool segments left after replay: %v", s)
	}
	f, err := os.Open(filepath.Join("testdata", "metrics_after_outage.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := testutil.GatherAndCompare(reg, f,
		"llmgw_ledger_records_total", "llmgw_ledger_spooled_records"); err != nil {
		t.Error(err)
	}
	if n := testutil.ToFloat64(l.m.writeErrors); n < 1 {
		t.Errorf("write errors: got %v, want at least 1", n)
	}
}

func TestOutageMemory(t *testing.T) { outage(t, store.NewMemory()) }

func TestOutageSQLite(t *testing.T) {
	st, err := store.OpenSQLite(t.Context(), filepath.Join(t.TempDir(), "llmgw.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	outage(t, st)
}

func TestOutageRetriesWithBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		inner := store.NewMemory()
		st := &flaky{Store: inner}
		st.down.Store(true)
		l := New(st, Options{SpoolDir: dir, BatchSize: 10, FlushInterval: 100 * time.Millisecond})
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() { done <- l.Run(ctx) }()

		for i := range 95 {
			l.Record(rec(i))
			if i%10 == 0 {
				time.Sleep(50 * time.Millisecond)
			}
		}
		// A minute down: retries back off to retryMax and keep failing.
		time.Sleep(time.Minute)
		synctest.Wait()
		assertOnce(t, inner, 0)
		if got := l.spool.count.Load(); got != 95 {
			t.Errorf("spooled while down: got %d, want 95", got)
		}
		failures := testutil.ToFloat64(l.m.writeErrors)
		// Retries are at most retryMax apart, at least retryMin.
		if minTries := float64(time.Minute / retryMax); failures < minTries || failures > float64(time.Minute/retryMin) {
			t.Errorf("write errors in a minute down: %v, want between %v and %v", failures, minTries, time.Minute/retryMin)
		}

		st.down.Store(false)
		time.Sleep(retryMax)
		synctest.Wait()
		assertOnce(t, inner, 95)
		if got := counter(t, l, resultReplayed); got != 95 {
			t.Errorf("replayed: got %d, want 95", got)
		}
		if s := segments(t, dir); len(s) != 0 {
			t.Errorf("spool segments left after replay: %v", s)
		}
		// Back to writing straight to the store.
		l.Record(rec(95))
		time.Sleep(200 * time.Millisecond)
		synctest.Wait()
		assertOnce(t, inner, 96)
		if got := counter(t, l, resultWritten); got != 1 {
			t.Errorf("written after recovery: got %d, want 1", got)
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

func TestLostAcknowledgementCountsOnce(t *testing.T) {
	inner := store.NewMemory()
	st := &flaky{Store: inner}
	l := New(st, Options{SpoolDir: t.TempDir(), BatchSize: 10})
	st.lostAck.Store(true)
	for i := range 25 {
		l.Record(rec(i))
	}
	// Stored, but the ledger was told otherwise: the records are spooled,
	// and each replay stores them again.
	if err := l.Flush(t.Context()); err == nil {
		t.Fatal("Flush: got nil error with acknowledgements lost")
	}
	if err := l.Flush(t.Context()); err == nil {
		t.Fatal("second Flush: got nil error with acknowledgements lost")
	}
	st.lostAck.Store(false)
	if err := l.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	assertOnce(t, inner, 25)
}

func TestSpoolSurvivesRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		inner := store.NewMemory()
		st := &flaky{Store: inner}
		st.down.Store(true)
		first := New(st, Options{SpoolDir: dir})
		for i := range 70 {
			first.Record(rec(i))
		}
		if err := first.Flush(t.Context()); err == nil {
			t.Fatal("Flush with the store down: got nil error")
		}
		// The process ends here without a shutdown; the store comes back.
		st.down.Store(false)

		second := New(st, Options{SpoolDir: dir})
		if got := testutil.ToFloat64(second.m.spooled); got != 70 {
			t.Errorf("a new ledger counts %v spooled records, want 70", got)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() { done <- second.Run(ctx) }()
		synctest.Wait() // the replay at start, before any time passes
		assertOnce(t, inner, 70)
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		if s := segments(t, dir); len(s) != 0 {
			t.Errorf("spool segments left after replay: %v", s)
		}
	})
}

func TestFullQueueSpools(t *testing.T) {
	inner := store.NewMemory()
	l := New(inner, Options{SpoolDir: t.TempDir(), BatchSize: 1})
	const n = 100
	for i := range n {
		l.Record(rec(i))
	}
	if got, want := counter(t, l, resultSpooled), n-queueBatches; got != want {
		t.Errorf("spooled with a full queue: got %d, want %d", got, want)
	}
	if err := l.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	assertOnce(t, inner, n)
}

func TestDamagedSpoolLineSkipped(t *testing.T) {
	dir := t.TempDir()
	good := []string{
		`{"id":"r00000","time":"2025-03-01T12:00:00Z","key_id":"r00000","model":"m","status":200}`,
		`{"id":"r00001","time":"2025-03-01T12:00:00Z","key_id":"r00001","model":"m","status":200}`,
	}
	body := strings.Join(good, "\n") + "\n" + `{"id":"r00002","time":"2025-03-0` // torn by a crash
	if err := os.WriteFile(filepath.Join(dir, "000000000007"+segmentExt), []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	inner := store.NewMemory()
	l := New(inner, Options{SpoolDir: dir})
	if got := l.spool.count.Load(); got != 2 {
		t.Errorf("records counted in a damaged spool: got %d, want 2", got)
	}
	if err := l.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	assertOnce(t, inner, 2)
	// New segments number on from the highest found.
	l.toSpool([]usage.Record{rec(5)})
	if got := segments(t, dir); len(got) != 1 || filepath.Base(got[0]) != "000000000008"+segmentExt {
		t.Errorf("segment after 7: got %v, want 000000000008%s", got, segmentExt)
	}
}

func TestRecordStampsTime(t *testing.T) {
	inner := store.NewMemory()
	now := t0.Add(time.Hour)
	l := New(inner, Options{SpoolDir: t.TempDir(), Now: func() time.Time { return now }})
	r := rec(0)
	r.Time = time.Time{}
	l.Record(r)
	if err := l.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		since time.Time
		want  int64
	}{{now, 1}, {now.Add(time.Nanosecond), 0}} {
		rows, err := inner.Usage(t.Context(), usage.Query{Since: tc.since, Until: now.Add(time.Second)})
		if err != nil {
			t.Fatal(err)
		}
		if rows[0].Requests != tc.want {
			t.Errorf("records since %v: got %d, want %d", tc.since, rows[0].Requests, tc.want)
		}
	}
}

func TestMetricsLint(t *testing.T) {
	reg := prometheus.NewRegistry()
	New(store.NewMemory(), Options{SpoolDir: t.TempDir(), Registerer: reg})
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
}

func TestDefaultSpoolDir(t *testing.T) {
	tmp := filepath.Join(os.TempDir(), "llmgw-spool")
	tests := []struct{ url, want string }{
		{"sqlite:llmgw.db", filepath.Join(".", "llmgw.db.spool")},
		{"sqlite:/var/lib/llmgw/llmgw.db", "/var/lib/llmgw/llmgw.db.spool"},
		{"sqlite::memory:", tmp},
		{"postgres://db/llmgw", tmp},
		{"memory:", tmp},
	}
	for _, tt := range tests {
		if got := DefaultSpoolDir(tt.url); got != tt.want {
			t.Errorf("DefaultSpoolDir(%q) = %q, want %q", tt.url, got, tt.want)
		}
	}
}
