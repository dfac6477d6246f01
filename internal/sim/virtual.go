// A replica on its caller's clock: the same engine, scheduler and prefix
// cache as a served replica, with no server and no timers. The caller
// submits requests at times of its choosing and moves the replica on to
// the time of its next event, so a run of hours takes the CPU time of its
// steps alone, and the same calls always give the same tokens at the same
// times.

package sim

import (
	"container/heap"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Virtual is a replica on a virtual clock. It is not safe for concurrent
// use. Its step loop is the served replica's: in batch mode a step is
// planned when the last one ends, and requests that arrive during it wait
// for its end; in fixed mode a request is admitted on arrival and each of
// its tokens falls due on its own.
type Virtual struct {
	e       *engine
	stepEnd time.Time // batch mode: when the step under way ends; zero when none is
}

// NewVirtual is a replica of cfg, on a clock that starts wherever its
// first call says.
func NewVirtual(cfg Config) *Virtual {
	cfg = cfg.withDefaults()
	return &Virtual{e: newEngine(cfg, prometheus.NewRegistry())}
}

// Config is the replica's configuration, defaults filled in.
func (v *Virtual) Config() Config { return v.e.cfg }

// Answer is what a chat completion submitted to a Virtual came to, as far
// as it has got.
type Answer struct {
	PromptTokens, CachedTokens int
	// Asked is the answer's length: its tokens come one by one until
	// Tokens reaches it.
	Asked  int
	Tokens int
}

// Done reports whether every token of the answer is produced.
func (a *Answer) Done() bool { return a.Tokens >= a.Asked }

// Submit queues a chat completions body at now, as a served replica would
// take it: the same checks, the same prompt and prefix-cache keys, the
// same answer length. Each of its tokens is given to onToken, with a,
// when it is produced. The error is an *openai.Error for a body the
// replica refuses, or the engine's when its queue is full.
func (v *Virtual) Submit(body []byte, now time.Time, onToken func(a *Answer, at time.Time)) (*Answer, error) {
	c, p, err := parseChat(body, v.e.cfg.BlockSize)
	if err != nil {
		return nil, err
	}
	p, gen, err := v.e.cfg.plan(chatEndpoint, c, p)
	if err != nil {
		return nil, err
	}
	a := &Answer{PromptTokens: p.tokens, Asked: gen.tokens}
	s := newSeq(p, gen.tokens)
	s.onToken = func(at time.Time) {
		a.Tokens = s.generated
		a.CachedTokens = s.cached
		if onToken != nil {
			onToken(a, at)
		}
	}
	if err := v.e.submit(s, now); err != nil {
		return nil, err
	}
	v.e.mu.Lock()
	defer v.e.mu.Unlock()
	if v.e.cfg.FixedTiming {
		v.e.admit(now)
	} else if v.stepEnd.IsZero() {
		v.e.admit(now)
		v.plan(now)
	}
	return a, nil
}

// Next is the time of the replica's next event, and false when it has
// nothing to do until a request is submitted.
func (v *Virtual) Next() (time.Time, bool) {
	if !v.e.cfg.FixedTiming {
		return v.stepEnd, !v.stepEnd.IsZero()
	}
	v.e.mu.Lock()
	defer v.e.mu.Unlock()
	for len(v.e.due) > 0 {
		if s := v.e.due[0]; s.state == stRunning {
			return s.due, true
		}
		heap.Pop(&v.e.due)
	}
	return time.Time{}, false
}

// Advance runs the replica's events up to and including now: in batch
// mode the step ending then, and the next one planned; in fixed mode the
// tokens due by then, and the queue admitted as the served loop admits it
// on waking.
func (v *Virtual) Advance(now time.Time) {
	v.e.mu.Lock()
	defer v.e.mu.Unlock()
	if v.e.cfg.FixedTiming {
		v.e.admit(now)
		v.e.tick(now)
		return
	}
	for !v.stepEnd.IsZero() && !v.stepEnd.After(now) {
		end := v.stepEnd
		v.e.commit(end)
		v.e.admit(end)
		v.plan(end)
	}
}

// plan starts the next batch-mode step at now, if anything runs. Under
// v.e.mu.
func (v *Virtual) plan(now time.Time) {
	v.stepEnd = time.Time{}
	if len(v.e.running) > 0 {
		v.stepEnd = now.Add(v.e.plan())
	}
}

// Load is what a scrape of the replica's metrics would read now: the
// requests running and waiting, and the share of the KV cache in use.
func (v *Virtual) Load() (running, waiting int, kvUsage float64) { return v.e.stats() }
