//go:build !linux

// A journal segment written with a system call per append.

package ledger

import (
	"errors"
	"fmt"
	"os"
)

// segmentFile is a journal segment.
type segmentFile struct {
	path      string
	f         *os.File
	size, off int
}

// createSegment makes a segment that takes size bytes.
func createSegment(path string, size int) (*segmentFile, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("segment %s: %w", path, err)
	}
	return &segmentFile{path: path, f: f, size: size}, nil
}

// fits reports whether n more bytes fit.
func (s *segmentFile) fits(n int) bool { return s.off+n <= s.size }

// append writes line.
func (s *segmentFile) append(line []byte) error {
	n, err := s.f.Write(line)
	s.off += n
	return err
}

// reset empties the segment.
func (s *segmentFile) reset() error {
	s.off = 0
	return s.f.Truncate(0)
}

// remove closes the segment and removes its file.
func (s *segmentFile) remove() error { return errors.Join(s.f.Close(), os.Remove(s.path)) }
