// The journal: every record, appended to local disk as it is handed to the
// ledger, so that a process killed before the record's batch reaches the
// store leaves the record behind. The writer releases the journal's
// segments once every record in them is in the store or the spool; what a
// killed process leaves is adopted into the spool at the next start and
// replayed, and the store skips the records it already has.
//
// On Linux a segment is a file mapped into memory: an append is a copy
// into the kernel's page cache, with no system call, and the page cache
// outlives the process. Elsewhere an append is a write. Appends are not synced: a record
// journaled is kept if the process dies, not if the host does. The spool,
// which holds records for longer, syncs.

package ledger

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/usage"
)

// journalDir is the journal's directory inside the spool directory.
const journalDir = "journal"

// journal is a directory of segment files in the spool's format. Records
// are numbered in the order they are appended; a segment is emptied once
// the writer has made every record up to its last one durable, and kept
// for reuse: its pages are in memory already, which makes an append to it
// cheaper than one to a new file.
type journal struct {
	dir string

	mu      sync.Mutex // protects everything below, and orders appends with the queue
	cur     *segmentFile
	curLast uint64         // number of the last record in cur
	closed  []segment      // segments no longer appended to, oldest first
	free    []*segmentFile // emptied segments, for reuse
	n       uint64         // number of the last record appended
	file    int            // number of the newest segment file
	failing bool           // the last append failed; logged once until one succeeds
	line    []byte         // the record being appended
}

// segment is a closed journal segment and the number of its last record.
type segment struct {
	f    *segmentFile
	last uint64
}

const (
	// segmentSize is a segment's room: 2,500 records or so. A busy
	// gateway fills a few a second.
	segmentSize = 1 << 20
	// freeSegments is how many emptied segments are kept for reuse: the
	// writer empties one or two each flush.
	freeSegments = 4
)

// openJournal makes dir. Segments already in it are a previous process's,
// which stopped without emptying them: the caller adopts them first.
func openJournal(dir string) (*journal, error) {
	j := &journal{dir: dir}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return j, fmt.Errorf("journal %s: %w", dir, err)
	}
	return j, nil
}

// leftovers returns the segments a previous process left, oldest first.
func (j *journal) leftovers() ([]string, error) {
	return listSegments(j.dir)
}

// appendLocked numbers r and appends it, one line of JSON as the spool's
// are, to the open segment, taking another when it is full; a record that
// cannot be encoded is numbered all the same. j.mu is held: encoding here
// rather than before keeps a request's record from costing an allocation.
func (j *journal) appendLocked(r usage.Record) (uint64, error) {
	j.n++
	line, err := r.AppendJSON(j.line[:0])
	if err != nil {
		return j.n, fmt.Errorf("journal: encode record %q: %w", r.ID, err)
	}
	line = append(line, '\n')
	j.line = line
	if j.cur != nil && !j.cur.fits(len(line)) {
		j.closeLocked()
	}
	if j.cur == nil {
		if j.cur, err = j.takeLocked(len(line)); err != nil {
			return j.n, fmt.Errorf("journal: %w", err)
		}
	}
	if err := j.cur.append(line); err != nil {
		return j.n, fmt.Errorf("journal: %w", err)
	}
	j.curLast = j.n
	return j.n, nil
}

// takeLocked is an empty segment with room for n bytes: a free one, or a
// new file. j.mu is held.
func (j *journal) takeLocked(n int) (*segmentFile, error) {
	if k := len(j.free); k > 0 && j.free[k-1].fits(n) {
		f := j.free[k-1]
		j.free = j.free[:k-1]
		return f, nil
	}
	j.file++
	return createSegment(filepath.Join(j.dir, fmt.Sprintf("%012d%s", j.file, segmentExt)), max(segmentSize, n))
}

// closeLocked ends appends to the open segment, so later ones go to
// another. j.mu is held.
func (j *journal) closeLocked() {
	if j.cur != nil {
		j.closed = append(j.closed, segment{j.cur, j.curLast})
		j.cur = nil
	}
}

// release closes the open segment, so later appends go to another, and
// empties every segment whose records are all numbered upTo or lower.
func (j *journal) release(upTo uint64) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.closeLocked()
	var errs []error
	i := 0
	for ; i < len(j.closed) && j.closed[i].last <= upTo; i++ {
		f := j.closed[i].f
		if err := f.reset(); err != nil || len(j.free) == freeSegments {
			errs = append(errs, err, f.remove())
			continue
		}
		j.free = append(j.free, f)
	}
	j.closed = append(j.closed[:0], j.closed[i:]...)
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	return nil
}

// shut releases every record and removes the segments, for a process
// whose records are all kept elsewhere. Appends after it start anew.
func (j *journal) shut() error {
	err := j.release(j.last())
	j.mu.Lock()
	defer j.mu.Unlock()
	errs := []error{err}
	for _, f := range j.free {
		errs = append(errs, f.remove())
	}
	j.free = nil
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	return nil
}

// last is the number of the last record appended.
func (j *journal) last() uint64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.n
}
