// Package lineartest checks, in tests, that work grows linearly with its
// input: it runs the work on n items and on 8n, and fails when the CPU
// time or the bytes allocated grow far more than eightfold. It is for the
// work a client's body drives (parsing, translating, counting), where a
// quadratic step turns a large body into minutes of a gateway's CPU.
// Work that writes (a translation) is held to its output too: at most a
// constant times its input, at both sizes and in what the added items
// add, where output that copies a shared field into every item grows with
// the items times the field.
//
// A shared machine is noisy, so each figure is the least of several runs
// and the bound is loose: linear work gives about 8, quadratic about 64.
// Time is the process's CPU time, not the wall clock's: a run that waits
// for a core busy with another program is not slower for it, and a long
// run waits more often than a short one. Bytes allocated do not depend on
// the machine's load at all, and back the times up.
package lineartest

import (
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

// Factor is how many times more items the larger run has.
const Factor = 8

// Bounds on the larger run's figures over the smaller's. Linear work
// gives about Factor; quadratic work gives Factor², 64. Time is given
// room for a larger input falling out of the CPU's caches and for a
// noisy neighbour; bytes, which are steadier, less.
const (
	maxTimeRatio  = 24
	maxBytesRatio = 20
)

// Sizing: n starts at the caller's and doubles until one run takes
// targetRun of CPU time, so that the clock's resolution and fixed costs
// (a connection, a round trip) are small beside the work; no further
// than maxItems.
const (
	targetRun = 20 * time.Millisecond
	maxItems  = 1 << 20
	runs      = 5 // each size is run this many times; the least counts
	// spareBytes is how much more memory a run may take before the
	// collector runs: several times what the largest linear run here
	// allocates.
	spareBytes = 2 << 30
)

// Work makes the input of n items and returns the run to measure on it,
// which fails t itself if the work goes wrong. Making the input is not
// measured.
type Work func(t testing.TB, n int) (run func())

// Writes makes the input of n items and returns its size in bytes and
// the run to measure on it, which returns the bytes it wrote and fails t
// itself if the work goes wrong.
type Writes func(t testing.TB, n int) (in int, run func() (out int))

// Linear fails t when work on Factor×n items takes more than maxTimeRatio
// times the CPU time, or allocates more than maxBytesRatio times the
// bytes, of work on n items, n being n0 doubled until a run takes
// targetRun. It logs the figures either way.
func Linear(t testing.TB, n0 int, work Work) {
	t.Helper()
	linear(t, n0, func(t testing.TB, n int) (int, func() int) {
		run := work(t, n)
		return 0, func() int { run(); return 0 }
	})
}

// LinearOutput is Linear for work that writes, and fails t too when the
// work on Factor×n items writes more than k times its input's bytes, or
// when the items added to the input add more than k times their bytes to
// the output.
func LinearOutput(t testing.TB, n0 int, k float64, work Writes) {
	t.Helper()
	small, large := linear(t, n0, work)
	ratio := float64(large.out) / float64(max(large.in, 1))
	added := float64(large.out-small.out) / float64(max(large.in-small.in, 1))
	t.Logf("%d bytes in, %d out (x%.2f); then %d in, %d out (x%.2f); the added items x%.2f",
		small.in, small.out, float64(small.out)/float64(max(small.in, 1)), large.in, large.out, ratio, added)
	if ratio > k {
		t.Errorf("%d bytes in wrote %d, %.1f times as many; at most %g times may be written", large.in, large.out, ratio, k)
	}
	if added > k {
		t.Errorf("%d more bytes in wrote %d more, %.1f times as many; at most %g times may be written", large.in-small.in, large.out-small.out, added, k)
	}
}

// linear is Linear for work that writes, and returns what it cost and
// wrote on n items and on Factor×n.
func linear(t testing.TB, n0 int, work Writes) (small, large figures) {
	t.Helper()
	n := max(n0, 1)
	for {
		m := measure(work(t, n))
		if m.cpu >= targetRun || n*2*Factor > maxItems {
			break
		}
		n *= 2
	}
	var least [2]figures
	var run [2]func() int
	for j, items := range []int{n, Factor * n} {
		least[j].in, run[j] = work(t, items)
	}
	for i := range runs {
		// Interleaved, so that a slow spell of the machine slows both.
		for j, r := range run {
			m := measure(least[j].in, r)
			if i == 0 {
				least[j] = m
			}
			least[j] = least[j].min(m)
		}
	}
	small, large = least[0], least[1]
	timeRatio := float64(large.cpu) / float64(max(small.cpu, 1))
	bytesRatio := float64(large.bytes) / float64(max(small.bytes, 1))
	t.Logf("n=%d: %v CPU (%v wall), %d bytes; n=%d: %v CPU (%v wall), %d bytes; x%.1f CPU time, x%.1f bytes",
		n, small.cpu, small.wall, small.bytes, Factor*n, large.cpu, large.wall, large.bytes, timeRatio, bytesRatio)
	if timeRatio > maxTimeRatio {
		t.Errorf("%d times the items took %.1f times the CPU time (%v, then %v); linear work takes about %d times",
			Factor, timeRatio, small.cpu, large.cpu, Factor)
	}
	if bytesRatio > maxBytesRatio {
		t.Errorf("%d times the items allocated %.1f times the bytes (%d, then %d); linear work allocates about %d times",
			Factor, bytesRatio, small.bytes, large.bytes, Factor)
	}
	return small, large
}

// figures are what one run cost, and the bytes it read and wrote.
type figures struct {
	cpu, wall time.Duration
	bytes     uint64
	in, out   int
}

// min is the least of each of f's and g's costs, with f's bytes read and
// written: the same at every run.
func (f figures) min(g figures) figures {
	return figures{min(f.cpu, g.cpu), min(f.wall, g.wall), min(f.bytes, g.bytes), f.in, f.out}
}

// measure is what run, on in bytes, costs: the CPU time and wall time it
// takes, and the bytes the process allocates meanwhile; and what it
// writes. The collector is kept out of the times: a small run's garbage
// fits in the heap's headroom and a large one's does not, so collections
// would fall on the large run alone; the bytes allocated stand for them.
// It still runs once the process holds spareBytes more than before, so
// that quadratic work, allocating gigabytes, cannot take the machine's
// memory.
func measure(in int, run func() int) figures {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	gc := debug.SetGCPercent(-1)
	limit := debug.SetMemoryLimit(int64(before.Sys) + spareBytes)
	defer func() {
		debug.SetMemoryLimit(limit)
		debug.SetGCPercent(gc)
	}()
	start, cpu := time.Now(), cpuTime()
	out := run()
	f := figures{cpu: cpuTime() - cpu, wall: time.Since(start), in: in, out: out}
	runtime.ReadMemStats(&after)
	f.bytes = after.TotalAlloc - before.TotalAlloc
	return f
}
