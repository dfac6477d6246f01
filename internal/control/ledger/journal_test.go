// The journal's tests: what a process that dies before its batch is
// written leaves behind reaches the store at the next start, once, and a
// journal holds nothing once its records are kept elsewhere.

package ledger

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/store"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/usage"
)

// TestJournalReplaysWhatADeadProcessHeld: records handed to a ledger that
// never writes them, as when its process dies between flushes, are
// replayed by the next ledger on the same directory, and those the store
// took before the death are not counted twice.
func TestJournalReplaysWhatADeadProcessHeld(t *testing.T) {
	dir := t.TempDir()
	st := store.NewMemory()
	dead := New(st, Options{SpoolDir: dir, FlushInterval: time.Hour})
	for i := range 10 {
		dead.Record(rec(i))
	}
	// Half of them reached the store before the process died.
	if err := st.AddUsage(t.Context(), []usage.Record{rec(0), rec(1), rec(2), rec(3), rec(4)}); err != nil {
		t.Fatal(err)
	}
	if s := segments(t, filepath.Join(dir, journalDir)); len(s) != 1 {
		t.Fatalf("journal segments before the death: %v, want one", s)
	}

	next := New(st, Options{SpoolDir: dir})
	if got := next.spool.count.Load(); got != 10 {
		t.Errorf("the next ledger adopted %d records into its spool, want 10", got)
	}
	if s := segments(t, filepath.Join(dir, journalDir)); len(s) != 0 {
		t.Errorf("journal segments left after adoption: %v", s)
	}
	if err := next.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	assertOnce(t, st, 10)
	if got := counter(t, next, resultReplayed); got != 10 {
		t.Errorf("replayed %d records, want 10", got)
	}
}

// TestJournalReleasedOnceKept: the journal holds records only until they
// are in the store or the spool, and a clean stop leaves it empty.
func TestJournalReleasedOnceKept(t *testing.T) {
	dir := t.TempDir()
	jdir := filepath.Join(dir, journalDir)
	st := &flaky{Store: store.NewMemory()}
	l := New(st, Options{SpoolDir: dir, BatchSize: 7, FlushInterval: time.Hour})

	for i := range 20 {
		l.Record(rec(i))
	}
	if n := journaled(t, jdir); n != 20 {
		t.Fatalf("the journal holds %d records of the 20 handed over", n)
	}
	if err := l.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := journaled(t, jdir); n != 0 {
		t.Errorf("the journal holds %d records once the store has them all", n)
	}
	// Emptied segments are reused.
	for i := 20; i < 25; i++ {
		l.Record(rec(i))
	}
	if err := l.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	if s := segments(t, jdir); len(s) != 1 {
		t.Errorf("journal segments after two flushes: %v, want the first, reused", s)
	}

	// With the store down, the spool keeps them: the journal is released.
	st.down.Store(true)
	for i := 25; i < 30; i++ {
		l.Record(rec(i))
	}
	if err := l.Flush(t.Context()); err == nil {
		t.Fatal("Flush with the store down: got nil error")
	}
	if n := journaled(t, jdir); n != 0 {
		t.Errorf("the journal holds %d records once the spool has them all", n)
	}
	st.down.Store(false)

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error)
	go func() { done <- l.Run(ctx) }()
	for i := 30; i < 40; i++ {
		l.Record(rec(i))
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if s := segments(t, jdir); len(s) != 0 {
		t.Errorf("journal segments left after a clean stop: %v", s)
	}
	assertOnce(t, st, 40)
}

// killedEnv names the spool directory and SQLite file of the process
// TestKilledProcessLosesNoRecord kills.
const killedEnv = "LLMGW_LEDGER_KILLED_DIR"

// TestKilledProcessLosesNoRecord runs a ledger in a child process that
// records as fast as it can, with small batches flushed often, and kills
// it with SIGKILL once it has handed over thousands of records. Every
// record whose Record call returned before the kill is in the store once a
// new ledger has started on the same directory, exactly once.
func TestKilledProcessLosesNoRecord(t *testing.T) {
	if dir := os.Getenv(killedEnv); dir != "" {
		recordUntilKilled(dir)
		return
	}
	if testing.Short() {
		t.Skip("starts and kills a process")
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestKilledProcessLosesNoRecord$")
	cmd.Env = append(os.Environ(), killedEnv+"="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The child prints each record's number once its Record returned.
	const killAt = 3000
	sc := bufio.NewScanner(out)
	returned := map[int]bool{}
	for sc.Scan() {
		n, err := strconv.Atoi(sc.Text())
		if err != nil || returned[n] {
			t.Fatalf("child said %q", sc.Text())
		}
		if returned[n] = true; len(returned) == killAt {
			break
		}
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	if len(returned) < killAt {
		t.Fatalf("the child stopped after %d records: %v", len(returned), sc.Err())
	}

	ctx := t.Context()
	st, err := store.Open(ctx, "sqlite:"+filepath.Join(dir, "ledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	before := storedIDs(t, st)
	next := New(st, Options{SpoolDir: dir})
	adopted := next.spool.count.Load()
	if err := next.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	after := storedIDs(t, st)
	t.Logf("killed after %d records returned: %d were in the store, %d more in its journal and spool", len(returned), len(before), adopted)
	missing := 0
	for i := range returned {
		if before[rec(i).ID] == 0 {
			missing++
		}
	}
	if missing == 0 {
		t.Errorf("the store held all %d records before the restart: the kill tested nothing", len(before))
	}
	for i := range returned {
		if n := after[rec(i).ID]; n != 1 {
			t.Errorf("record %d is in the store %d times, want once", i, n)
		}
	}
}

// recordUntilKilled is the child of TestKilledProcessLosesNoRecord: it
// records on four goroutines, printing each record's number once Record
// has returned, until it is killed.
func recordUntilKilled(dir string) {
	ctx := context.Background()
	st, err := store.Open(ctx, "sqlite:"+filepath.Join(dir, "ledger.db"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	l := New(st, Options{SpoolDir: dir, BatchSize: 64, FlushInterval: 5 * time.Millisecond})
	go l.Run(ctx)
	var mu sync.Mutex // serialises the lines
	const writers = 4
	for g := range writers {
		go func() {
			for i := g; ; i += writers {
				l.Record(rec(i))
				mu.Lock()
				fmt.Println(i)
				mu.Unlock()
			}
		}()
	}
	select {}
}

// storedIDs counts the store's records by ID.
func storedIDs(t *testing.T, st store.Store) map[string]int64 {
	t.Helper()
	rows, err := st.Usage(t.Context(), usage.Query{Until: t0.Add(24 * time.Hour), By: usage.ByKey})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, r := range rows {
		got[r.Group] = r.Requests
	}
	return got
}

// journaled counts the records in the journal's segments: their lines up
// to the zeros of the room not yet written.
func journaled(t *testing.T, dir string) int {
	t.Helper()
	n := 0
	for _, p := range segments(t, dir) {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		n += bytes.Count(data, []byte("\n"))
	}
	return n
}

// TestLockDirIsOneProcesss: a spool directory taken is refused to a second
// taker, naming the setting to change, until the first lets go.
func TestLockDirIsOneProcesss(t *testing.T) {
	dir := t.TempDir()
	unlock, err := LockDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := LockDir(dir); err == nil || !strings.Contains(err.Error(), "store.spool_dir") {
		t.Fatalf("a second LockDir on a directory taken: %v, want an error naming store.spool_dir", err)
	}
	unlock()
	again, err := LockDir(dir)
	if err != nil {
		t.Fatalf("LockDir once the first let go: %v", err)
	}
	again()
}
