// The journal: every record, appended to local disk as it is handed to the
// ledger, so that a process killed before the record's batch reaches the
// store leaves the record behind. The writer releases the journal's
// segments once every record in them is in the store or the spool; what a
// killed process leaves is adopted into the spool at the next start and
// replayed, and the store skips the records it already has.
//
// Appends are not synced: a record journaled is kept if the process dies,
// not if the host does. The spool, which holds records for longer, syncs.

package ledger

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/usage"
)

// journalDir is the journal's directory inside the spool directory.
const journalDir = "journal"

// journal is a directory of segment files in the spool's format. Records
// are numbered in the order they are appended; a segment is removed once
// the writer has made every record up to its last one durable.
type journal struct {
	dir string

	mu      sync.Mutex // protects everything below, and orders appends with the queue
	cur     *os.File   // the segment appends go to; nil until the next append
	curLast uint64     // number of the last record in cur
	closed  []segment  // segments no longer appended to, oldest first
	n       uint64     // number of the last record appended
	file    int        // number of the newest segment file
	failing bool       // the last append failed; logged once until one succeeds
}

// segment is a closed journal file and the number of its last record.
type segment struct {
	path string
	last uint64
}

// openJournal makes dir. Segments already in it are a previous process's,
// which stopped without releasing them: the caller adopts them first.
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

// appendLocked numbers the next record and writes it, one encoded JSON
// line, to the open segment; a record that could not be encoded (err) is
// numbered all the same. j.mu is held.
func (j *journal) appendLocked(line []byte, err error) (uint64, error) {
	j.n++
	if err != nil {
		return j.n, err
	}
	if j.cur == nil {
		j.file++
		f, err := os.OpenFile(filepath.Join(j.dir, fmt.Sprintf("%012d%s", j.file, segmentExt)),
			os.O_CREATE|os.O_WRONLY|os.O_APPEND|os.O_TRUNC, 0o600)
		if err != nil {
			return j.n, fmt.Errorf("journal: %w", err)
		}
		j.cur = f
	}
	j.curLast = j.n
	if _, err := j.cur.Write(line); err != nil {
		return j.n, fmt.Errorf("journal: write %s: %w", j.cur.Name(), err)
	}
	return j.n, nil
}

// release closes the open segment, so later appends start a new one, and
// removes every segment whose records are all numbered upTo or lower.
func (j *journal) release(upTo uint64) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	var errs []error
	if j.cur != nil {
		errs = append(errs, j.cur.Close())
		j.closed = append(j.closed, segment{j.cur.Name(), j.curLast})
		j.cur = nil
	}
	i := 0
	for ; i < len(j.closed) && j.closed[i].last <= upTo; i++ {
		if err := os.Remove(j.closed[i].path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	j.closed = append(j.closed[:0], j.closed[i:]...)
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

// encodeLine is r as one line of a segment.
func encodeLine(r usage.Record) ([]byte, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("journal: encode record %q: %w", r.ID, err)
	}
	return append(b, '\n'), nil
}
