// The spool: records the store could not take, kept on local disk as JSON
// lines until they are replayed. Appends go to the newest segment file;
// replay takes the closed segments and removes each only once the store
// has taken every record in it.

package ledger

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/usage"
)

// segmentExt ends every spool segment's name: NNNNNNNNNNNN.jsonl.
const segmentExt = ".jsonl"

// maxSpoolLine is the longest line a segment is read with. A record is a
// few hundred bytes; a longer line is damage and is skipped.
const maxSpoolLine = 1 << 20

// spool is a directory of segment files. One process owns a directory.
type spool struct {
	dir string

	mu  sync.Mutex // protects cur, seq and the files in dir
	cur *os.File   // the segment appends go to; nil until the next append
	seq int        // number of the newest segment

	count atomic.Int64 // records in every segment, the open one included
}

// openSpool makes dir if needed and counts the records already in it.
func openSpool(dir string) (*spool, error) {
	s := &spool{dir: dir}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return s, fmt.Errorf("spool %s: %w", dir, err)
	}
	paths, err := s.list()
	if err != nil {
		return s, err
	}
	var n int64
	for _, p := range paths {
		if v, err := strconv.Atoi(strings.TrimSuffix(filepath.Base(p), segmentExt)); err == nil && v > s.seq {
			s.seq = v
		}
		recs, _, err := readSegment(p)
		if err != nil {
			return s, err
		}
		n += int64(len(recs))
	}
	s.count.Store(n)
	return s, nil
}

// list returns the segment files, oldest first.
func (s *spool) list() ([]string, error) { return listSegments(s.dir) }

// listSegments returns the segment files in dir, oldest first.
func listSegments(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("spool %s: %w", dir, err)
	}
	var out []string
	for _, e := range entries {
		if !e.IsDir() && strings.HasSuffix(e.Name(), segmentExt) {
			out = append(out, filepath.Join(dir, e.Name()))
		}
	}
	sort.Strings(out) // zero-padded numbers sort in order
	return out, nil
}

// append writes recs to the open segment and syncs it to disk before
// returning, so a record appended is a record kept.
func (s *spool) append(recs []usage.Record) error {
	var buf []byte
	for _, r := range recs {
		b, err := json.Marshal(r)
		if err != nil {
			return fmt.Errorf("spool: encode record %q: %w", r.ID, err)
		}
		buf = append(append(buf, b...), '\n')
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur == nil {
		if err := os.MkdirAll(s.dir, 0o700); err != nil {
			return fmt.Errorf("spool %s: %w", s.dir, err)
		}
		s.seq++
		f, err := os.OpenFile(filepath.Join(s.dir, fmt.Sprintf("%012d%s", s.seq, segmentExt)), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			return fmt.Errorf("spool: %w", err)
		}
		s.cur = f
	}
	if _, err := s.cur.Write(buf); err != nil {
		return fmt.Errorf("spool: write %s: %w", s.cur.Name(), err)
	}
	if err := s.cur.Sync(); err != nil {
		return fmt.Errorf("spool: sync %s: %w", s.cur.Name(), err)
	}
	s.count.Add(int64(len(recs)))
	return nil
}

// closed closes the open segment, so later appends start a new one, and
// returns every segment, oldest first: all of them are now safe to replay.
func (s *spool) closed() ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur != nil {
		err := s.cur.Close()
		s.cur = nil
		if err != nil {
			return nil, fmt.Errorf("spool: close segment: %w", err)
		}
	}
	return s.list()
}

// remove deletes a replayed segment that held n records.
func (s *spool) remove(path string, n int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("spool: %w", err)
	}
	s.count.Add(-int64(n))
	return nil
}

// close closes the open segment, if any.
func (s *spool) close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur == nil {
		return nil
	}
	err := s.cur.Close()
	s.cur = nil
	return err
}

// readSegment reads a segment's records. Lines that do not decode, such
// as the last one after a crash mid-write, are skipped and counted in bad.
func readSegment(path string) (recs []usage.Record, bad int, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, fmt.Errorf("spool: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), maxSpoolLine)
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 {
			continue
		}
		var r usage.Record
		if err := json.Unmarshal(line, &r); err != nil || r.ID == "" {
			bad++
			continue
		}
		recs = append(recs, r)
	}
	if err := sc.Err(); errors.Is(err, bufio.ErrTooLong) {
		// Damage past repair: keep what came before it.
		bad++
	} else if err != nil {
		return nil, bad, fmt.Errorf("spool: read %s: %w", path, err)
	}
	return recs, bad, nil
}

// adopt moves a journal segment a stopped process left into the spool, as
// its newest segment and synced like the rest, and returns how many
// records it holds. The segment is first cut after its last whole line:
// what follows is room never written, or a line cut short by the death,
// whose record was never handed over. A segment with no record is removed.
func (s *spool) adopt(path string) (int, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("spool: %w", err)
	}
	end := bytes.LastIndexByte(data, '\n') + 1
	if end < len(data) {
		if err := os.Truncate(path, int64(end)); err != nil {
			return 0, fmt.Errorf("spool: %w", err)
		}
	}
	recs, _, err := readSegment(path)
	if err != nil {
		return 0, err
	}
	if len(recs) == 0 {
		return 0, os.Remove(path)
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return 0, fmt.Errorf("spool: %w", err)
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, fmt.Errorf("spool: sync %s: %w", path, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	if err := os.Rename(path, filepath.Join(s.dir, fmt.Sprintf("%012d%s", s.seq, segmentExt))); err != nil {
		return 0, fmt.Errorf("spool: %w", err)
	}
	s.count.Add(int64(len(recs)))
	return len(recs), nil
}
