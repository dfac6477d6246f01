// Package lineartest checks, in tests, that work grows linearly with its
// input: it runs the work on n items and on 8n, and fails when the CPU
// time or the bytes allocated grow far more than eightfold. It is for the
// work a client's body drives (parsing, translating, counting), where a
// quadratic step turns a large body into minutes of a gateway's CPU.
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

// Linear fails t when work on Factor×n items takes more than maxTimeRatio
// times the CPU time, or allocates more than maxBytesRatio times the
// bytes, of work on n items, n being n0 doubled until a run takes
// targetRun. It logs the figures either way.
func Linear(t testing.TB, n0 int, work Work) {
	t.Helper()
	n := max(n0, 1)
	for {
		m := measure(work(t, n))
		if m.cpu >= targetRun || n*2*Factor > maxItems {
			break
		}
		n *= 2
	}
	run := [2]func(){work(t, n), work(t, Factor*n)}
	var least [2]figures
	for i := range runs {
		// Interleaved, so that a slow spell of the machine slows both.
		for j, r := range run {
			m := measure(r)
			if i == 0 {
				least[j] = m
			}
			least[j] = least[j].min(m)
		}
	}
	small, large := least[0], least[1]
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
}

// figures are what one run cost.
type figures struct {
	cpu, wall time.Duration
	bytes     uint64
}

// min is the least of each of f's and g's figures.
func (f figures) min(g figures) figures {
	return figures{min(f.cpu, g.cpu), min(f.wall, g.wall), min(f.bytes, g.bytes)}
}

// measure is what run costs: the CPU time and wall time it takes, and
// the bytes the process allocates meanwhile. The collector is kept out of
// the times: a small run's garbage fits in the heap's headroom and a large
// one's does not, so collections would fall on the large run alone; the
// bytes allocated stand for them. It still runs once the process holds
// spareBytes more than before, so that quadratic work, allocating
// gigabytes, cannot take the machine's memory.
func measure(run func()) figures {
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
	run()
	f := figures{cpu: cpuTime() - cpu, wall: time.Since(start)}
	runtime.ReadMemStats(&after)
	f.bytes = after.TotalAlloc - before.TotalAlloc
	return f
}
