//go:build unix

package ledger

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// LockDir takes dir, the spool and journal of one process, for this one:
// a second process on the same directory would replay the first's
// journal while it is still written. The lock is an flock on dir/lock,
// which the kernel lets go of when the process ends, however it ends.
// unlock lets go of it sooner.
func LockDir(dir string) (unlock func(), err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("spool %s: %w", dir, err)
	}
	f, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("spool %s: %w", dir, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("spool directory %s is another llmgw process's: give each process its own (store.spool_dir)", dir)
		}
		return nil, fmt.Errorf("spool %s: lock: %w", dir, err)
	}
	return func() { f.Close() }, nil
}
