package config

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestDebounce runs the debouncer on a fake clock: bursts of kicks become
// one call each, a burst that never goes quiet is still served, and a
// pending burst is dropped when the context ends.
func TestDebounce(t *testing.T) {
	const delay, maxWait = 150 * time.Millisecond, 2 * time.Second
	tests := []struct {
		name  string
		kicks []time.Duration // when each kick comes, from the start
		want  []time.Duration // when each call is made, from the start
	}{
		{"one kick", []time.Duration{0}, []time.Duration{150 * time.Millisecond}},
		{"a burst is one call after it goes quiet",
			[]time.Duration{0, 5 * time.Millisecond, 10 * time.Millisecond, 100 * time.Millisecond},
			[]time.Duration{250 * time.Millisecond}},
		{"two bursts are two calls",
			[]time.Duration{0, 10 * time.Millisecond, time.Second, 1010 * time.Millisecond},
			[]time.Duration{160 * time.Millisecond, 1160 * time.Millisecond}},
		{"a burst that never goes quiet is served every maxWait",
			// Kicks every 70ms: one lands 40ms before each maxWait is up.
			every(0, 70*time.Millisecond, 5*time.Second),
			[]time.Duration{2000 * time.Millisecond, 4030 * time.Millisecond, 5120 * time.Millisecond}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				start := time.Now()
				ctx, cancel := context.WithCancel(t.Context())
				kicks := make(chan struct{})
				var got []time.Duration
				done := make(chan struct{})
				go func() {
					defer close(done)
					debounce(ctx, kicks, delay, maxWait, func() { got = append(got, time.Since(start)) })
				}()
				for _, at := range tt.kicks {
					time.Sleep(at - time.Since(start))
					kicks <- struct{}{}
				}
				time.Sleep(time.Minute) // fake time: lets every pending call happen
				cancel()
				<-done
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("calls at (-want +got):\n%s", diff)
				}
			})
		})
	}
}

// every is kicks at each step from start up to, not including, end.
func every(start, step, end time.Duration) []time.Duration {
	var out []time.Duration
	for at := start; at < end; at += step {
		out = append(out, at)
	}
	return out
}

func TestDebounceDropsPendingOnCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		kicks := make(chan struct{})
		calls := 0
		done := make(chan struct{})
		go func() {
			defer close(done)
			debounce(ctx, kicks, time.Second, time.Minute, func() { calls++ })
		}()
		kicks <- struct{}{}
		time.Sleep(500 * time.Millisecond)
		cancel()
		<-done
		if calls != 0 {
			t.Errorf("%d calls after cancel; want 0", calls)
		}
	})
}

// watcher is Watch running on a file in a temp dir, reporting each call
// of onChange with the file's content at that moment.
type watcher struct {
	path    string
	changes chan string  // the file's content at each call, or "<missing>"
	stop    func() error // ends the watch and returns Watch's result; safe to call again
}

// testDelay is the debounce delay the file-system tests use: longer than
// any burst they make, short enough to keep them quick.
const testDelay = 100 * time.Millisecond

// changeTimeout bounds the wait for a call that should come; it only
// fails a test, never passes one.
const changeTimeout = 5 * time.Second

func startWatch(t *testing.T, path string) *watcher {
	t.Helper()
	w := &watcher{path: path, changes: make(chan string, 16)}
	ctx, cancel := context.WithCancel(t.Context())
	ready := make(chan struct{})
	errc := make(chan error, 1)
	go func() {
		errc <- watch(ctx, path, testDelay, func() {
			data, err := os.ReadFile(path)
			if err != nil {
				w.changes <- "<missing>"
				return
			}
			w.changes <- string(data)
		}, func() { close(ready) })
	}()
	select {
	case <-ready:
	case err := <-errc:
		t.Fatalf("watch: %v", err)
	}
	w.stop = sync.OnceValue(func() error {
		cancel()
		return <-errc
	})
	t.Cleanup(func() { _ = w.stop() })
	return w
}

// next is the content seen at the next call of onChange.
func (w *watcher) next(t *testing.T) string {
	t.Helper()
	select {
	case s := <-w.changes:
		return s
	case <-time.After(changeTimeout):
		t.Fatalf("no change reported within %v", changeTimeout)
		return ""
	}
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// renameOver writes content to a temporary file and renames it over path,
// as editors and config management tools save.
func renameOver(t *testing.T, path, content string) {
	t.Helper()
	tmp := path + ".tmp"
	write(t, tmp, content)
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func TestWatchWrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "llmgw.yaml")
	write(t, path, "v1")
	w := startWatch(t, path)
	write(t, path, "v2")
	if got := w.next(t); got != "v2" {
		t.Errorf("after a write, onChange saw %q; want v2", got)
	}
}

func TestWatchRenameOver(t *testing.T) {
	path := filepath.Join(t.TempDir(), "llmgw.yaml")
	write(t, path, "v1")
	w := startWatch(t, path)
	renameOver(t, path, "v2")
	if got := w.next(t); got != "v2" {
		t.Errorf("after a rename over the file, onChange saw %q; want v2", got)
	}
}

func TestWatchRemoveAndRecreate(t *testing.T) {
	// The file may be missing when the watch starts, too.
	path := filepath.Join(t.TempDir(), "llmgw.yaml")
	w := startWatch(t, path)
	write(t, path, "v1")
	if got := w.next(t); got != "v1" {
		t.Errorf("after the file was created, onChange saw %q; want v1", got)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if got := w.next(t); got != "<missing>" {
		t.Errorf("after the file was removed, onChange saw %q; want it missing", got)
	}
	write(t, path, "v2")
	if got := w.next(t); got != "v2" {
		t.Errorf("after the file was recreated, onChange saw %q; want v2", got)
	}
}

// TestWatchBurstIsOneCall saves the way an editor does, several events in
// a row, and checks that it gives one call: the next call after it is
// for a later, separate write.
func TestWatchBurstIsOneCall(t *testing.T) {
	path := filepath.Join(t.TempDir(), "llmgw.yaml")
	write(t, path, "v1")
	w := startWatch(t, path)

	write(t, path, "v2")
	renameOver(t, path, "v3")
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
	write(t, path, "v4")

	if got := w.next(t); got != "v4" {
		t.Errorf("after a burst, onChange saw %q; want v4", got)
	}
	write(t, path, "v5")
	if got := w.next(t); got != "v5" {
		t.Errorf("the call after the burst saw %q; want v5 (a second call for the burst?)", got)
	}
}

func TestWatchIgnoresOtherFiles(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "llmgw.yaml")
	write(t, path, "v1")
	w := startWatch(t, path)

	write(t, filepath.Join(dir, ".llmgw.yaml.swp"), "editor state")
	write(t, filepath.Join(dir, "other.yaml"), "x")
	write(t, path, "v2")
	if got := w.next(t); got != "v2" {
		t.Errorf("first call saw %q; want v2, from the config's own write", got)
	}
}

// TestWatchConfigMapSwap updates a file the way Kubernetes updates a
// mounted ConfigMap: the file is a symlink through ..data, and an update
// swaps ..data to a new directory, never touching the file's name.
func TestWatchConfigMapSwap(t *testing.T) {
	dir := t.TempDir()
	mkdata := func(name, content string) {
		if err := os.Mkdir(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
		write(t, filepath.Join(dir, name, "llmgw.yaml"), content)
	}
	symlink := func(target, name string) {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	mkdata("..2025_01_01", "v1")
	symlink("..2025_01_01", "..data")
	symlink("..data/llmgw.yaml", "llmgw.yaml")
	path := filepath.Join(dir, "llmgw.yaml")
	w := startWatch(t, path)

	mkdata("..2025_01_02", "v2")
	symlink("..2025_01_02", "..data_tmp")
	if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(dir, "..2025_01_01")); err != nil {
		t.Fatal(err)
	}
	if got := w.next(t); got != "v2" {
		t.Errorf("after the ConfigMap swap, onChange saw %q; want v2", got)
	}
}

// TestWatchSymlinkElsewhere follows a config file that is a symlink to a
// file in another directory, edited there.
func TestWatchSymlinkElsewhere(t *testing.T) {
	real := filepath.Join(t.TempDir(), "real.yaml")
	write(t, real, "v1")
	path := filepath.Join(t.TempDir(), "llmgw.yaml")
	if err := os.Symlink(real, path); err != nil {
		t.Fatal(err)
	}
	w := startWatch(t, path)
	write(t, real, "v2")
	if got := w.next(t); got != "v2" {
		t.Errorf("after the symlink's target was written, onChange saw %q; want v2", got)
	}
}

func TestWatchStopsWithContext(t *testing.T) {
	path := filepath.Join(t.TempDir(), "llmgw.yaml")
	w := startWatch(t, path)
	if err := w.stop(); err != nil {
		t.Errorf("Watch returned %v after its context ended; want nil", err)
	}
}

func TestWatchMissingDirectory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "no-such-dir", "llmgw.yaml")
	err := Watch(t.Context(), path, func() { t.Error("onChange called") })
	if err == nil {
		t.Error("Watch of a file in a missing directory succeeded")
	}
}
