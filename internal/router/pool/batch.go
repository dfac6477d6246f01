package pool

// The batch limit: how many requests an endpoint may have in flight so
// that its step time, as its streams' gaps show it, stays within the TPOT
// aim admission holds the pool to.

import (
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// The batch limit's constants. It starts at batchStart when admission
// first holds the endpoint to a TPOT aim, and never drops below batchMin:
// one request always runs.
const (
	batchStart = 4
	batchMin   = 1
	// batchSteps is how many steps' gaps the step time is measured over
	// before a decision: enough that the steps carrying a prompt's
	// prefill, which slow every stream in them, count in the share they
	// have, and few enough to decide about once a second.
	batchSteps = 16
	// batchCut and batchGrow bound one decision: never below half at
	// once, nor above twice.
	batchCut  = 0.5
	batchGrow = 2
)

// batchLimit is how many requests an endpoint may have in flight while a
// TPOT aim is in play. It is decided on requests' ends, once the gaps of
// batchSteps steps are in since the last decision: over the aim, the
// limit is cut in proportion (a step's time grows about linearly with
// the tokens in it), at most once a round — the ends of a limit's worth
// of requests, the time a cut takes to show; under the aim, while the
// limit binds, it grows by half the proportion.
type batchLimit struct {
	mu    sync.Mutex
	limit float64 // 0: not yet set
	ends  int     // requests ended since the last cut
	cut   bool    // the limit has been cut at least once
	// The gap sums at the last decision.
	gapNanos, gaps int64
	// bits is limit for readers without the lock (float64 bits).
	bits atomic.Uint64
}

// tuneBatch decides the endpoint's batch limit on a request's end, with
// inflight requests in flight just before it and aim the step time that
// admission holds the pool to.
func (s *stepModel) tuneBatch(aim time.Duration, inflight int64) {
	if aim <= 0 {
		return
	}
	b := &s.batch
	b.mu.Lock()
	defer b.mu.Unlock()
	n := float64(inflight)
	b.ends++
	sum, count := s.gapNanos.Load(), s.gaps.Load()
	if count-b.gaps < int64(batchSteps*max(inflight, 1)) {
		return
	}
	step := float64(sum-b.gapNanos) / float64(count-b.gaps)
	b.gapNanos, b.gaps = sum, count
	if b.limit == 0 {
		b.limit = batchStart // an endpoint that was out when the aim came
	}
	ratio := float64(aim) / step
	switch {
	case ratio < 1 && (!b.cut || float64(b.ends) >= b.limit):
		b.limit = max(batchMin, min(b.limit, n)*max(ratio, batchCut))
		b.ends, b.cut = 0, true
	case ratio >= 1 && n >= b.limit-1:
		b.limit *= min(1+(ratio-1)/2, batchGrow)
	}
	b.bits.Store(math.Float64bits(b.limit))
}

// StartBatch gives the endpoint its first batch limit, batchStart, when
// admission first holds it to an aim: like a TCP connection's first
// window, the limit starts small and doubles while the step time allows,
// so that a burst at the start, before anything is measured, cannot fill
// the server's batch. The requests it already has stay.
func (s *stepModel) StartBatch() {
	if s.batch.bits.Load() != 0 {
		return
	}
	b := &s.batch
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.limit == 0 {
		b.limit = batchStart
		b.gapNanos, b.gaps = s.gapNanos.Load(), s.gaps.Load()
		b.bits.Store(math.Float64bits(b.limit))
	}
}

// batchRoom is the endpoint's batch limit and how many more requests it
// may have in flight under it; both zero when it has none.
func (e *Endpoint) batchRoom() (limit float64, room int64) {
	limit = math.Float64frombits(e.batch.bits.Load())
	if limit == 0 {
		return 0, 0
	}
	return limit, max(int64(limit)-e.inflight.Load(), 0)
}

// SetBatchLimit sets the endpoint's batch limit, in place of what its
// step times decided: for tests that need an endpoint at a known limit.
func (s *stepModel) SetBatchLimit(limit float64) {
	b := &s.batch
	b.mu.Lock()
	defer b.mu.Unlock()
	b.limit = limit
	b.bits.Store(math.Float64bits(limit))
}
