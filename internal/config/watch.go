// Watching the config file for changes, so a reload follows an edit: an
// editor's save, a rename over the file, a file deleted and written anew,
// or a Kubernetes ConfigMap update, which swaps a symlink and never touches
// the file's own name.

package config

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
)

// Debounce timings. An editor's save (write a temporary file, rename it
// over, chmod) or a ConfigMap swap is a burst of events a few milliseconds
// apart; waiting 150ms after the last one makes the burst one reload and
// still feels immediate. A file rewritten without pause is reloaded at
// least every 2s rather than never.
const (
	debounceDelay   = 150 * time.Millisecond
	debounceMaxWait = 2 * time.Second
)

// Watch calls onChange after the file at path is written, replaced by a
// rename, removed, or recreated, or after the symlink it resolves through
// is swapped. A burst of such events gives one call, made once the burst
// has been quiet for 150ms. Calls are made one at a time from Watch's own
// goroutine, so a slow onChange delays the next. onChange only learns
// that the file may have changed: it reloads, and keeps the old config if
// the new file is bad or gone.
//
// The file need not exist yet, but its directory must. Watch returns nil
// when ctx ends, and an error if the directory cannot be watched or the
// operating system's watcher fails; a lost-event overflow is not a failure
// but a reason to call onChange.
func Watch(ctx context.Context, path string, onChange func()) error {
	return watch(ctx, path, debounceDelay, onChange, nil)
}

// watch is Watch with the debounce delay given, and ready, when not nil,
// called once the directory is being watched.
func watch(ctx context.Context, path string, delay time.Duration, onChange func(), ready func()) error {
	file, err := filepath.Abs(path)
	if err != nil {
		return fmt.Errorf("watch config %s: %w", path, err)
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watch config %s: %w", path, err)
	}
	defer w.Close()
	// The directory, not the file: a rename over the file or a symlink swap
	// replaces the inode a watch on the file would follow.
	dir := filepath.Dir(file)
	if err := w.Add(dir); err != nil {
		return fmt.Errorf("watch config %s: %w", path, err)
	}
	target := resolve(file) // the real file path names lead to, or "" when missing
	// targetDir is a second directory watched when the file is a symlink
	// to a file elsewhere, so edits made there are seen too.
	targetDir := ""
	follow := func() {
		d := ""
		if target != "" {
			d = filepath.Dir(target)
		}
		if d == targetDir {
			return
		}
		if targetDir != "" && targetDir != dir {
			_ = w.Remove(targetDir) // may be gone already, as a ConfigMap's old data is
		}
		targetDir = d
		if d != "" && d != dir {
			// Best effort: if it fails, changes still show through dir.
			_ = w.Add(d)
		}
	}
	follow()

	ctx, cancel := context.WithCancel(ctx)
	kicks := make(chan struct{}, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		debounce(ctx, kicks, delay, debounceMaxWait, onChange)
	}()
	defer func() {
		cancel()
		<-done
	}()
	kick := func() {
		select {
		case kicks <- struct{}{}:
		default: // one is pending already
		}
	}
	if ready != nil {
		ready()
	}

	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.Events:
			if !ok {
				return fmt.Errorf("watch config %s: watcher closed", path)
			}
			// A chmod alone leaves the content as it was; indexers and
			// backup tools touch files all the time.
			if ev.Op == fsnotify.Chmod {
				continue
			}
			name := filepath.Clean(ev.Name)
			now := resolve(file)
			if name == file || name == target || now != target {
				target = now
				follow()
				kick()
			}
		case err, ok := <-w.Errors:
			if !ok {
				return fmt.Errorf("watch config %s: watcher closed", path)
			}
			if errors.Is(err, fsnotify.ErrEventOverflow) {
				kick() // events were lost; one of them may have been ours
				continue
			}
			return fmt.Errorf("watch config %s: %w", path, err)
		}
	}
}

// resolve is the real path of file after every symlink, or "" when it
// does not exist.
func resolve(file string) string {
	p, err := filepath.EvalSymlinks(file)
	if err != nil {
		return ""
	}
	return p
}

// debounce calls fire once kicks has been quiet for delay after a kick, or
// once maxWait has passed since the first kick of a burst that never goes
// quiet. It returns when ctx ends, without firing for a pending burst.
func debounce(ctx context.Context, kicks <-chan struct{}, delay, maxWait time.Duration, fire func()) {
	timer := time.NewTimer(delay)
	timer.Stop()
	defer timer.Stop()
	var (
		timeout <-chan time.Time // timer.C while a burst is pending, else nil
		first   time.Time        // when the pending burst began
	)
	for {
		select {
		case <-ctx.Done():
			return
		case <-kicks:
			now := time.Now()
			if timeout == nil {
				first = now
			}
			wait := delay
			if left := first.Add(maxWait).Sub(now); left < wait {
				wait = max(left, 0)
			}
			timer.Reset(wait)
			timeout = timer.C
		case <-timeout:
			timeout = nil
			fire()
		}
	}
}
