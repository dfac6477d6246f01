// The engine: one replica's scheduler and step loop. Requests wait in a
// FIFO queue, are admitted while MaxSeqs and the KV cache allow, and run
// until their output is complete or their client goes away.

package sim

import (
	"container/heap"
	"context"
	"errors"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Errors submit returns.
var (
	errQueueFull = errors.New("sim: waiting queue full")
	errStopped   = errors.New("sim: replica stopped")
)

// seqState is where a sequence is in its life.
type seqState uint8

const (
	stWaiting seqState = iota
	stRunning
	stDone
)

// seq is one request's sequence. The fields above the line are set before
// submit and never change; the engine's own fields are guarded by its
// mutex; the atomics are how the request's handler follows it.
type seq struct {
	prompt int      // prompt tokens
	hashes []uint64 // chained hashes of the prompt's full blocks
	target int      // output tokens to produce

	// Guarded by engine.mu.
	state     seqState
	arrived   time.Time
	lastToken time.Time
	cached    int // prompt tokens found in the prefix cache
	hit       int // prompt blocks found in the prefix cache
	prefilled int // uncached prompt tokens computed so far
	generated int
	chunk     int            // prefill tokens in the current step; 0 means a decode
	held      []*cachedBlock // block cache: prefix-cache blocks it holds, in prompt order
	node      *radixNode     // radix cache: the deepest tree node it holds; nil before admission
	slot      int            // slot cache: the slot it runs in, from admission
	private   int            // blocks it holds outside the prefix cache
	due       time.Time      // fixed mode: when its next token is due
	heapIndex int            // fixed mode: its place in engine.due
	// onToken, when set, is called under engine.mu with each output
	// token's time as it is produced: how a replica on a virtual clock
	// follows the sequence.
	onToken func(now time.Time)

	produced     atomic.Int32 // output tokens produced so far
	cachedTokens atomic.Int32 // prompt tokens served from the prefix cache
	finished     atomic.Bool  // set after the last produced
	aborted      atomic.Bool  // the replica stopped before it finished
	notify       chan struct{}
}

func newSeq(p promptInfo, target int) *seq {
	return &seq{prompt: p.tokens, hashes: p.hashes, target: target, notify: make(chan struct{}, 1)}
}

// prefillLeft is how many uncached prompt tokens are still to compute.
func (s *seq) prefillLeft() int { return s.prompt - s.cached - s.prefilled }

func (s *seq) wake() {
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

// engine schedules one replica's sequences and runs its step loop.
type engine struct {
	cfg  Config // with defaults
	m    *metrics
	slow atomic.Uint64 // math.Float64bits of the Slow fault; 0 means 1
	wake chan struct{} // a new request or a cancellation; capacity 1

	mu      sync.Mutex // protects everything below
	waiting []*seq     // FIFO
	running []*seq     // in admission order
	step    []*seq     // batch mode: the sequences in the step being run
	due     dueHeap    // fixed mode: running sequences by due time; done ones linger until popped
	kv      prefixCache
	stopped bool
	// pausedAt is when the Hang fault stopped the step loop; zero while it
	// runs.
	pausedAt time.Time
}

func newEngine(cfg Config, reg prometheus.Registerer) *engine {
	e := &engine{
		cfg:  cfg,
		wake: make(chan struct{}, 1),
	}
	switch cfg.Cache {
	case CacheRadix:
		e.kv = newRadixCache(cfg.BlockSize, cfg.NumBlocks)
	case CacheSlots:
		e.kv = newSlotCache(cfg.BlockSize, cfg.NumBlocks, cfg.MaxSeqs)
	default:
		e.kv = newKVCache(cfg.BlockSize, cfg.NumBlocks)
	}
	e.m = newMetrics(reg, cfg, e)
	return e
}

// setSlow sets the Slow fault's step-time multiplier.
func (e *engine) setSlow(f float64) { e.slow.Store(math.Float64bits(f)) }

// pause stops the step loop as of now: nothing is admitted, no step
// starts, and a step under way does not end until resume.
func (e *engine) pause(now time.Time) {
	e.mu.Lock()
	if e.pausedAt.IsZero() {
		e.pausedAt = now
	}
	e.mu.Unlock()
	e.poke()
}

// resume restarts the step loop as of now. Fixed-mode tokens fall due as
// much later as the pause lasted, so a sequence's pace is the same on
// either side of it.
func (e *engine) resume(now time.Time) {
	e.mu.Lock()
	if !e.pausedAt.IsZero() {
		d := now.Sub(e.pausedAt)
		for _, s := range e.due {
			s.due = s.due.Add(d) // the same shift for all keeps the heap's order
		}
		e.pausedAt = time.Time{}
	}
	e.mu.Unlock()
	e.poke()
}

// lockRunning takes e.mu once the engine is not paused, and reports
// whether it did: false when ctx ended first.
func (e *engine) lockRunning(ctx context.Context) bool {
	for {
		e.mu.Lock()
		if e.pausedAt.IsZero() {
			return true
		}
		e.mu.Unlock()
		select {
		case <-e.wake:
		case <-ctx.Done():
			return false
		}
	}
}

// scaled is d as this replica runs it: divided by Speed, multiplied by Slow.
func (e *engine) scaled(d time.Duration) time.Duration {
	f := math.Float64frombits(e.slow.Load())
	if f <= 0 {
		f = 1
	}
	return time.Duration(float64(d) * f / e.cfg.Speed)
}

func (e *engine) poke() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// submit queues s as arrived at now, or refuses it when the queue is full
// or the replica has stopped.
func (e *engine) submit(s *seq, now time.Time) error {
	e.mu.Lock()
	switch {
	case e.stopped:
		e.mu.Unlock()
		return errStopped
	case len(e.waiting) >= e.cfg.MaxWaiting:
		e.mu.Unlock()
		return errQueueFull
	}
	s.arrived = now
	s.state = stWaiting
	e.waiting = append(e.waiting, s)
	e.mu.Unlock()
	e.poke()
	return nil
}

// cancel takes s out of the queue or the batch at once and frees its
// blocks. It does nothing to a finished sequence.
func (e *engine) cancel(s *seq) {
	e.mu.Lock()
	switch s.state {
	case stWaiting:
		e.waiting = slices.DeleteFunc(e.waiting, func(w *seq) bool { return w == s })
	case stRunning:
		e.kv.release(s)
		e.running = slices.DeleteFunc(e.running, func(r *seq) bool { return r == s })
	}
	s.state = stDone
	e.mu.Unlock()
	e.poke()
}

// run is the step loop. It returns when ctx ends, after aborting every
// sequence still queued or running. With nothing to do it blocks until a
// request arrives.
func (e *engine) run(ctx context.Context) {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer e.stop()
	for {
		if !e.lockRunning(ctx) {
			return
		}
		now := time.Now()
		e.admit(now)
		if !e.cfg.FixedTiming && len(e.running) > 0 {
			d := e.plan()
			e.mu.Unlock()
			timer.Reset(d)
			select {
			case <-timer.C:
			case <-ctx.Done():
				return
			}
			if !e.lockRunning(ctx) { // a hang holds the step under way
				return
			}
			e.commit(time.Now())
			e.mu.Unlock()
			continue
		}
		wait := time.Duration(-1)
		if e.cfg.FixedTiming {
			wait = e.tick(now)
		}
		e.mu.Unlock()
		var tc <-chan time.Time
		if wait >= 0 {
			timer.Reset(wait)
			tc = timer.C
		}
		select {
		case <-e.wake:
		case <-tc:
		case <-ctx.Done():
			return
		}
		timer.Stop()
	}
}

// stop refuses new work and aborts what is left.
func (e *engine) stop() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.stopped = true
	for _, s := range slices.Concat(e.waiting, e.running) {
		if s.state == stRunning {
			e.kv.release(s)
		}
		s.state = stDone
		s.aborted.Store(true)
		s.wake()
	}
	e.waiting, e.running, e.due = nil, nil, nil
}

// admit moves sequences from the head of the queue into the batch while
// MaxSeqs and the KV cache allow. A head that does not fit blocks those
// behind it, as in vLLM.
func (e *engine) admit(now time.Time) {
	bs := e.cfg.BlockSize
	for len(e.waiting) > 0 && len(e.running) < e.cfg.MaxSeqs {
		s := e.waiting[0]
		// At least one prompt token is always computed, to produce the
		// first output token from.
		hit := e.kv.match(s.hashes, (s.prompt-1)/bs)
		if !e.kv.allocate(s, hit, e.kv.blocksFor(s.prompt+s.target)) {
			break
		}
		e.waiting[0] = nil
		e.waiting = e.waiting[1:]
		s.state = stRunning
		s.hit, s.cached = hit, hit*bs
		s.cachedTokens.Store(int32(s.cached))
		e.running = append(e.running, s)
		e.m.queueTime.Observe(now.Sub(s.arrived).Seconds())
		e.m.prefixQueries.Add(float64(s.prompt))
		e.m.prefixHits.Add(float64(s.cached))
		e.m.promptTokens.Add(float64(s.prompt))
		if e.cfg.FixedTiming {
			s.due = now.Add(e.scaled(e.cfg.TTFT + time.Duration(s.prefillLeft())*e.cfg.PrefillPerToken))
			heap.Push(&e.due, s)
		}
	}
}

// plan picks the next batch-mode step: a decode for every sequence past
// its prefill, then prefill chunks, oldest first, from what is left of the
// token budget. It returns the step's duration.
func (e *engine) plan() time.Duration {
	e.step = e.step[:0]
	decodes, prefill := 0, 0
	for _, s := range e.running {
		if s.prefillLeft() == 0 {
			s.chunk = 0
			e.step = append(e.step, s)
			decodes++
		}
	}
	budget := e.cfg.MaxBatchedTokens - decodes
	for _, s := range e.running {
		if left := s.prefillLeft(); left > 0 && budget > 0 {
			s.chunk = min(left, budget)
			budget -= s.chunk
			prefill += s.chunk
			e.step = append(e.step, s)
		}
	}
	return e.scaled(e.cfg.StepBase + time.Duration(decodes)*e.cfg.StepPerToken + time.Duration(prefill)*e.cfg.StepPerPrefillToken)
}

// commit applies the step plan chose, as of now. Sequences cancelled
// during the step are skipped.
func (e *engine) commit(now time.Time) {
	for i, s := range e.step {
		e.step[i] = nil
		if s.state != stRunning {
			continue
		}
		if s.chunk > 0 {
			s.prefilled += s.chunk
			if s.prefillLeft() > 0 {
				continue
			}
		}
		e.emit(s, now)
	}
	e.step = e.step[:0]
	e.running = slices.DeleteFunc(e.running, func(s *seq) bool { return s.state != stRunning })
}

// tick emits every fixed-mode token due by now and returns how long until
// the next is due, or -1 when none is.
func (e *engine) tick(now time.Time) time.Duration {
	defer func() {
		e.running = slices.DeleteFunc(e.running, func(s *seq) bool { return s.state != stRunning })
	}()
	for len(e.due) > 0 {
		s := e.due[0]
		if s.state != stRunning {
			heap.Pop(&e.due)
			continue
		}
		if s.due.After(now) {
			return s.due.Sub(now)
		}
		e.emit(s, now)
		if s.state != stRunning {
			heap.Pop(&e.due)
			continue
		}
		s.due = s.due.Add(e.scaled(e.cfg.TPOT))
		heap.Fix(&e.due, 0)
	}
	return -1
}

// emit produces s's next output token at now, finishing s with its last.
func (e *engine) emit(s *seq, now time.Time) {
	if s.generated == 0 {
		e.kv.promote(s, s.hit)
		e.m.ttft.Observe(now.Sub(s.arrived).Seconds())
	} else {
		e.m.itl.Observe(now.Sub(s.lastToken).Seconds())
	}
	s.generated++
	s.lastToken = now
	s.produced.Store(int32(s.generated))
	e.m.generationTokens.Inc()
	if s.generated >= s.target {
		s.state = stDone
		e.kv.release(s)
		e.m.e2e.Observe(now.Sub(s.arrived).Seconds())
		s.finished.Store(true)
	}
	if s.onToken != nil {
		s.onToken(now)
	}
	s.wake()
}

// stats is what the gauges show: sequences running and waiting, and the
// share of KV blocks in use.
func (e *engine) stats() (running, waiting int, kvUsage float64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.running), len(e.waiting), float64(e.kv.used()) / float64(e.kv.capacity())
}

// prefixCache is a replica's KV cache in blocks with the prefix cache over
// it, as the engine uses it; the engine's mutex guards it. A sequence is
// allocated its blocks at admission, promotes its prefilled prompt blocks
// into the prefix cache at its first token, and releases them when it ends.
type prefixCache interface {
	// match is how many of a prompt's leading full blocks are cached, at
	// most limit.
	match(hashes []uint64, limit int) int
	// allocate gives s need blocks, the first hit of them its prompt's
	// cached ones, evicting if it must; it reports false, changing
	// nothing, when they do not fit.
	allocate(s *seq, hit, need int) bool
	// promote adds s's prefilled full prompt blocks past the first hit to
	// the prefix cache.
	promote(s *seq, hit int)
	// release returns every block s holds.
	release(s *seq)
	// used is how many blocks running sequences hold.
	used() int
	// capacity is the cache's size in blocks.
	capacity() int
	// blocksFor is how many blocks n tokens fill.
	blocksFor(n int) int
}

var (
	_ prefixCache = (*kvCache)(nil)
	_ prefixCache = (*radixCache)(nil)
	_ prefixCache = (*slotCache)(nil)
)

// dueHeap orders fixed-mode sequences by when their next token is due.
type dueHeap []*seq

func (h dueHeap) Len() int           { return len(h) }
func (h dueHeap) Less(i, j int) bool { return h[i].due.Before(h[j].due) }
func (h dueHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].heapIndex = i
	h[j].heapIndex = j
}
func (h *dueHeap) Push(x any) {
	s := x.(*seq)
	s.heapIndex = len(*h)
	*h = append(*h, s)
}
func (h *dueHeap) Pop() any {
	old := *h
	s := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return s
}
