// Package ledger writes usage records to the store off the request path:
// the router hands each record over without waiting on the store, a
// writer sends them in batches, and while the store is unreachable they
// wait in a local spool, replayed when it answers again. Each record is
// also appended to a local journal as it is handed over, so that one
// whose batch a killed process never wrote is replayed at the next start.
// Replaying a record twice is harmless, since the store skips IDs it has,
// so each request is in the ledger exactly once.
package ledger

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/store"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/usage"
)

// Defaults for Options.
const (
	// DefaultBatchSize records go to the store in one write. A write's
	// commit costs as much as dozens of records, so a busy gateway writes
	// big batches: at 10,000 requests a second, ten writes a second.
	DefaultBatchSize = 1024
	// DefaultFlushInterval is the longest a record waits in a partial
	// batch: short enough that reports and budgets seeded from the store
	// are nearly current.
	DefaultFlushInterval = 200 * time.Millisecond
)

const (
	// queueBatches is how many batches the queue between Record and the
	// writer holds; past that, Record spools. 8 batches of 1,024 are 8 s of
	// a 1,000 request-a-second gateway, which rides out a slow write.
	queueBatches = 8
	// writeTimeout bounds one write to the store, so a store that hangs
	// rather than refusing turns into spooled records, not a stuck writer.
	writeTimeout = 10 * time.Second
	// retryMin and retryMax bound the wait between replays while the
	// spool holds records: doubling from a quarter second, capped so a
	// store back from an outage gets its records within five seconds.
	retryMin = 250 * time.Millisecond
	retryMax = 5 * time.Second
	// replayChunk is how many spooled records go to the store in one
	// write: bigger than a batch, since a replay catches up on many.
	replayChunk = 4096
	// shutdownTimeout bounds the last flush once Run's context is done.
	shutdownTimeout = 10 * time.Second
)

// Options tune a Ledger. Zero values take the defaults.
type Options struct {
	// SpoolDir holds records while the store is unreachable, and the
	// journal in its subdirectory journal; empty means
	// os.TempDir()/llmgw-spool. DefaultSpoolDir suggests one for a store.
	// One process owns a directory.
	SpoolDir string
	// BatchSize is how many records one write carries at most.
	BatchSize int
	// FlushInterval is the longest a record waits for its batch to fill.
	FlushInterval time.Duration
	// Logger gets write failures and replays; nil means none.
	Logger *slog.Logger
	// Registerer gets the ledger's metrics; nil means they are not
	// registered.
	Registerer prometheus.Registerer
	// Now stamps records that come without a time; nil means time.Now.
	Now func() time.Time
}

// DefaultSpoolDir is where a ledger on the store at url spools: beside a
// SQLite file (llmgw.db gives llmgw.db.spool), else os.TempDir()/llmgw-spool.
func DefaultSpoolDir(url string) string {
	if path, ok := strings.CutPrefix(url, "sqlite:"); ok && path != "" && path != ":memory:" {
		return filepath.Join(filepath.Dir(path), filepath.Base(path)+".spool")
	}
	return filepath.Join(os.TempDir(), "llmgw-spool")
}

// Ledger batches usage records into a store. Record is safe for
// concurrent use; Run runs once.
type Ledger struct {
	st        store.Store
	batchSize int
	interval  time.Duration
	log       *slog.Logger
	now       func() time.Time
	m         *metrics
	spool     *spool
	journal   *journal

	queue chan entry

	stopMu  sync.RWMutex // protects stopped against Record's send
	stopped bool         // Run has ended; Record spools directly

	writeMu sync.Mutex     // serialises writes to the store and replays; protects pending, taken
	pending []usage.Record // records taken off the queue, not yet written
	taken   uint64         // journal number of the last record taken off the queue
}

// entry is a queued record and its number in the journal.
type entry struct {
	rec usage.Record
	n   uint64
}

// New returns a ledger writing to st. Records already in the spool
// directory are replayed when Run starts, or by Flush. A spool directory
// that cannot be made is logged, and tried again when a record needs it.
func New(st store.Store, opts Options) *Ledger {
	if opts.SpoolDir == "" {
		opts.SpoolDir = filepath.Join(os.TempDir(), "llmgw-spool")
	}
	if opts.BatchSize <= 0 {
		opts.BatchSize = DefaultBatchSize
	}
	if opts.FlushInterval <= 0 {
		opts.FlushInterval = DefaultFlushInterval
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	l := &Ledger{
		st:        st,
		batchSize: opts.BatchSize,
		interval:  opts.FlushInterval,
		log:       opts.Logger,
		now:       opts.Now,
		queue:     make(chan entry, opts.BatchSize*queueBatches),
	}
	sp, err := openSpool(opts.SpoolDir)
	if err != nil {
		l.log.Error("ledger spool unusable; records the store refuses may be lost", "dir", opts.SpoolDir, "err", err)
	}
	l.spool = sp
	l.m = newMetrics(opts.Registerer, func() float64 { return float64(sp.count.Load()) })
	l.journal = l.openJournal(filepath.Join(opts.SpoolDir, journalDir))
	if n := sp.count.Load(); n > 0 {
		l.log.Info("ledger spool holds records from before; replaying them", "dir", opts.SpoolDir, "records", n)
	}
	return l
}

// openJournal opens the journal in dir, first adopting into the spool
// what a process that stopped without releasing it left there.
func (l *Ledger) openJournal(dir string) *journal {
	j, err := openJournal(dir)
	if err != nil {
		l.log.Error("ledger journal unusable; records may be lost if the process dies", "dir", dir, "err", err)
		return j
	}
	left, err := j.leftovers()
	if err != nil {
		l.log.Error("ledger journal", "err", err)
	}
	var adopted int
	for _, p := range left {
		n, err := l.spool.adopt(p)
		if err != nil {
			l.log.Error("ledger journal segment not adopted", "segment", p, "err", err)
			continue
		}
		adopted += n
	}
	if adopted > 0 {
		l.log.Info("ledger journal holds records of a process that stopped before writing them; replaying them",
			"dir", dir, "records", adopted)
	}
	return j
}

// Record hands r to the ledger without waiting on the store, after
// appending it to the journal. A record without a time is stamped now.
// When the queue is full, or Run has ended, r is appended to the spool
// instead, so nothing is lost.
func (l *Ledger) Record(r usage.Record) {
	if r.Time.IsZero() {
		r.Time = l.now()
	}
	l.stopMu.RLock()
	defer l.stopMu.RUnlock()
	// The journal's numbers and the queue's order must agree, so that the
	// writer, taking the record numbered n, knows it has taken every
	// queued record before it.
	j := l.journal
	j.mu.Lock()
	defer j.mu.Unlock()
	n, err := j.appendLocked(r)
	l.noteJournalLocked(err)
	if !l.stopped {
		select {
		case l.queue <- entry{r, n}:
			return
		default:
		}
	}
	l.toSpool([]usage.Record{r})
}

// noteJournalLocked counts a failed append, logging the first of a run of
// them and the append that ends it. The journal's mu is held.
func (l *Ledger) noteJournalLocked(err error) {
	j := l.journal
	switch {
	case err != nil:
		l.m.journalErrors.Inc()
		if !j.failing {
			j.failing = true
			l.log.Error("ledger journal append failed; records are lost if the process dies before writing them", "err", err)
		}
	case j.failing:
		j.failing = false
		l.log.Info("ledger journal appends again")
	}
}

// Run writes batches until ctx ends: a batch when it is full or has
// waited FlushInterval, and, while the spool holds records, replays with
// backoff. When ctx ends it flushes what is queued (to the spool, if the
// store does not take it) and returns nil; an error only if records could
// not be kept anywhere.
func (l *Ledger) Run(ctx context.Context) error {
	l.writeMu.Lock()
	if l.spool.count.Load() > 0 {
		l.replayLocked(ctx)
	}
	l.writeMu.Unlock()

	ticker := time.NewTicker(l.interval)
	defer ticker.Stop()
	var retry *time.Timer // armed while the spool holds records
	backoff := retryMin
	for {
		var retryC <-chan time.Time
		if retry != nil {
			retryC = retry.C
		}
		select {
		case <-ctx.Done():
			if retry != nil {
				retry.Stop()
			}
			return l.shutdown(ctx)
		case e := <-l.queue:
			l.writeMu.Lock()
			l.pending, l.taken = append(l.pending, e.rec), e.n
			l.takeQueuedLocked(l.batchSize - len(l.pending))
			if len(l.pending) >= l.batchSize {
				l.writePendingLocked(ctx)
			}
			l.writeMu.Unlock()
		case <-ticker.C:
			l.writeMu.Lock()
			l.writePendingLocked(ctx)
			l.writeMu.Unlock()
		case <-retryC:
			retry = nil
			l.writeMu.Lock()
			err := l.replayLocked(ctx)
			l.writeMu.Unlock()
			if err != nil {
				backoff = min(2*backoff, retryMax)
			} else {
				backoff = retryMin
			}
		}
		if retry == nil && l.spool.count.Load() > 0 {
			retry = time.NewTimer(backoff)
		}
	}
}

// shutdown stops the queue, writes what it held, and gives the spool one
// last replay.
func (l *Ledger) shutdown(ctx context.Context) error {
	l.stopMu.Lock()
	l.stopped = true
	l.stopMu.Unlock()
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	err := l.Flush(fctx)
	// Every record is written or spooled now, and later ones spool as
	// they are journaled: the journal holds nothing the next start needs.
	if jerr := l.journal.shut(); jerr != nil {
		l.log.Error("ledger journal", "err", jerr)
	}
	if cerr := l.spool.close(); cerr != nil {
		l.log.Error("ledger spool close", "err", cerr)
	}
	if err != nil && l.spool.count.Load() > 0 {
		l.log.Warn("ledger stopped with records in the spool; they are replayed at the next start",
			"records", l.spool.count.Load(), "err", err)
		return nil
	}
	return err
}

// Flush writes every record queued when it is called, then replays the
// spool. It returns an error when the store did not take them all; those
// wait in the spool.
func (l *Ledger) Flush(ctx context.Context) error {
	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	l.takeQueuedLocked(len(l.queue))
	l.writePendingLocked(ctx)
	if l.spool.count.Load() == 0 {
		return nil
	}
	return l.replayLocked(ctx)
}

// takeQueuedLocked moves up to n queued records to pending without waiting.
func (l *Ledger) takeQueuedLocked(n int) {
	for ; n > 0; n-- {
		select {
		case e := <-l.queue:
			l.pending, l.taken = append(l.pending, e.rec), e.n
		default:
			return
		}
	}
}

// writePendingLocked writes the pending records, BatchSize at a time. While
// the spool holds records the store is taken to be down and they join the
// spool directly; replays alone probe the store. When every one is kept,
// the journal is released up to the last of them.
func (l *Ledger) writePendingLocked(ctx context.Context) {
	kept := true
	for i := 0; i < len(l.pending); i += l.batchSize {
		batch := l.pending[i:min(i+l.batchSize, len(l.pending))]
		if l.spool.count.Load() == 0 {
			err := l.add(ctx, batch)
			if err == nil {
				l.m.records.WithLabelValues(resultWritten).Add(float64(len(batch)))
				continue
			}
			l.log.Warn("ledger write failed; spooling the batch", "records", len(batch), "err", err)
		}
		kept = l.toSpool(batch) && kept
	}
	clear(l.pending)
	l.pending = l.pending[:0]
	if kept {
		if err := l.journal.release(l.taken); err != nil {
			l.log.Error("ledger journal", "err", err)
		}
	}
}

// add writes recs to the store within writeTimeout.
func (l *Ledger) add(ctx context.Context, recs []usage.Record) error {
	ctx, cancel := context.WithTimeout(ctx, writeTimeout)
	defer cancel()
	if err := l.st.AddUsage(ctx, recs); err != nil {
		l.m.writeErrors.Inc()
		return err
	}
	return nil
}

// toSpool appends recs to the spool, or counts them dropped if even that
// fails, and reports whether the spool took them.
func (l *Ledger) toSpool(recs []usage.Record) bool {
	if err := l.spool.append(recs); err != nil {
		l.m.records.WithLabelValues(resultDropped).Add(float64(len(recs)))
		l.log.Error("ledger spool failed; usage records lost", "records", len(recs), "err", err)
		return false
	}
	l.m.records.WithLabelValues(resultSpooled).Add(float64(len(recs)))
	return true
}

// replayLocked writes the spool's segments to the store, oldest first,
// removing each once all of it is stored. It stops at the first failure;
// what it wrote of that segment is written again next time, and skipped.
func (l *Ledger) replayLocked(ctx context.Context) error {
	paths, err := l.spool.closed()
	if err != nil {
		l.log.Error("ledger spool", "err", err)
		return err
	}
	for _, p := range paths {
		recs, bad, err := readSegment(p)
		if err != nil {
			l.log.Error("ledger spool segment unreadable", "segment", p, "err", err)
			return err
		}
		if bad > 0 {
			l.log.Warn("ledger spool segment has damaged lines; skipping them", "segment", p, "lines", bad)
		}
		for i := 0; i < len(recs); i += replayChunk {
			chunk := recs[i:min(i+replayChunk, len(recs))]
			if err := l.add(ctx, chunk); err != nil {
				l.log.Warn("ledger replay failed; retrying later", "spooled", l.spool.count.Load(), "err", err)
				return fmt.Errorf("replay spool: %w", err)
			}
		}
		if err := l.spool.remove(p, len(recs)); err != nil {
			l.log.Error("ledger spool", "err", err)
			return err
		}
		l.m.records.WithLabelValues(resultReplayed).Add(float64(len(recs)))
		l.log.Info("ledger replayed spooled records", "records", len(recs))
	}
	return nil
}
