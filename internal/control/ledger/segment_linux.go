// A journal segment mapped into memory: an append is a copy into the page
// cache, which the kernel writes back whether or not the process lives.

package ledger

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// segmentFile is a journal segment, mapped.
type segmentFile struct {
	path string
	f    *os.File
	mem  []byte // the file, mapped shared
	off  int    // bytes appended
}

// createSegment makes a segment of size bytes, its blocks allocated and
// its pages mapped up front, so that a full disk fails here and not as a
// fault on an append.
func createSegment(path string, size int) (*segmentFile, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, err
	}
	err = syscall.Fallocate(int(f.Fd()), 0, 0, int64(size))
	if errors.Is(err, syscall.EOPNOTSUPP) {
		err = f.Truncate(int64(size))
	}
	var mem []byte
	if err == nil {
		mem, err = syscall.Mmap(int(f.Fd()), 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED|syscall.MAP_POPULATE)
	}
	if err != nil {
		f.Close()
		os.Remove(path)
		return nil, fmt.Errorf("segment %s: %w", path, err)
	}
	return &segmentFile{path: path, f: f, mem: mem}, nil
}

// fits reports whether n more bytes fit.
func (s *segmentFile) fits(n int) bool { return s.off+n <= len(s.mem) }

// append copies line in; the caller has checked that it fits.
func (s *segmentFile) append(line []byte) error {
	s.off += copy(s.mem[s.off:], line)
	return nil
}

// reset empties the segment: zeros hold no record.
func (s *segmentFile) reset() error {
	clear(s.mem[:s.off])
	s.off = 0
	return nil
}

// remove unmaps the segment and removes its file.
func (s *segmentFile) remove() error {
	return errors.Join(syscall.Munmap(s.mem), s.f.Close(), os.Remove(s.path))
}
