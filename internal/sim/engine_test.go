package sim

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// The engine tests run in a synctest bubble, where the step loop's timers
// run on a fake clock: step times can be checked exactly.

// testPrompt is a prompt of n tokens named by tag: equal tags share
// content, so a longer prompt with the same tag extends a shorter one.
func testPrompt(tag string, n, blockSize int) promptInfo {
	ph := newPromptHasher(blockSize)
	for i := range n {
		ph.addToken(fmt.Sprintf(" %s%d", tag, i))
	}
	return ph.result()
}

// testEngine is an engine whose loop has not started yet.
func testEngine(cfg Config) (*engine, *prometheus.Registry) {
	reg := prometheus.NewRegistry()
	return newEngine(cfg.withDefaults(), reg), reg
}

// start runs e's loop until the test's bubble ends it.
func start(t *testing.T, e *engine) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
}

// trace is when each of a sequence's tokens arrived, from its submission.
type trace struct {
	times  []time.Duration
	cached int
}

func (tr trace) ttft() time.Duration { return tr.times[0] }

// itls are the gaps between consecutive tokens.
func (tr trace) itls() []time.Duration {
	var out []time.Duration
	for i := 1; i < len(tr.times); i++ {
		out = append(out, tr.times[i]-tr.times[i-1])
	}
	return out
}

// follow submits s and returns a channel that delivers its trace once it
// finishes.
func follow(t *testing.T, e *engine, s *seq) <-chan trace {
	t.Helper()
	t0 := time.Now()
	if err := e.submit(s, time.Now()); err != nil {
		t.Fatalf("submit: %v", err)
	}
	out := make(chan trace, 1)
	go func() {
		var tr trace
		for range s.notify {
			// Whether it ended, read before what it produced: a sequence
			// produces its last token before it ends, so a count read
			// after the end is seen is the whole count.
			done := s.finished.Load() || s.aborted.Load()
			for n := int(s.produced.Load()); len(tr.times) < n; {
				tr.times = append(tr.times, time.Since(t0))
			}
			if done {
				break
			}
		}
		tr.cached = int(s.cachedTokens.Load())
		out <- tr
	}()
	return out
}

func TestBatchTPOTGrowsWithBatch(t *testing.T) {
	const base, perToken = 6 * time.Millisecond, time.Millisecond
	for _, batch := range []int{1, 4, 16} {
		t.Run(fmt.Sprint(batch), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e, _ := testEngine(Config{StepBase: base, StepPerToken: perToken})
				var traces []<-chan trace
				for i := range batch {
					traces = append(traces, follow(t, e, newSeq(testPrompt(fmt.Sprint(i), 20, 16), 5)))
				}
				start(t, e)
				for _, c := range traces {
					tr := <-c
					// One step prefills every prompt, then each step decodes
					// one token for each of the batch.
					wantTTFT := base + time.Duration(20*batch)*perToken
					step := base + time.Duration(batch)*perToken
					want := []time.Duration{step, step, step, step}
					if tr.ttft() != wantTTFT {
						t.Errorf("TTFT = %v, want %v", tr.ttft(), wantTTFT)
					}
					if diff := cmp.Diff(want, tr.itls()); diff != "" {
						t.Errorf("inter-token gaps (-want +got):\n%s", diff)
					}
				}
			})
		})
	}
}

func TestChunkedPrefillSlowsOthers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const base, perToken, budget = 6 * time.Millisecond, 10 * time.Microsecond, 2048
		e, _ := testEngine(Config{StepBase: base, StepPerToken: perToken, MaxBatchedTokens: budget})
		start(t, e)
		short := follow(t, e, newSeq(testPrompt("a", 10, 16), 40))
		time.Sleep(30 * time.Millisecond)
		long := follow(t, e, newSeq(testPrompt("b", 5000, 16), 2))
		a, b := <-short, <-long

		alone := base + perToken
		withChunk := base + budget*perToken // the decode plus 2047 prompt tokens
		lastChunk := base + (1+5000-2*(budget-1))*perToken
		pair := base + 2*perToken // both decoding
		var slowGaps int
		for _, gap := range a.itls() {
			switch gap {
			case alone, pair, lastChunk:
			case withChunk:
				slowGaps++
			default:
				t.Errorf("gap of %v, want one of %v, %v, %v, %v", gap, alone, pair, withChunk, lastChunk)
			}
		}
		if slowGaps != 2 {
			t.Errorf("%d gaps of a full prefill chunk, want 2; gaps: %v", slowGaps, a.itls())
		}
		// The long prompt needs three chunks, after waiting up to a step.
		if min, max := 2*withChunk, 3*withChunk+alone; b.ttft() < min || b.ttft() > max {
			t.Errorf("long prompt's TTFT = %v, want between %v and %v", b.ttft(), min, max)
		}
	})
}

func TestTTFTAndPrefixCache(t *testing.T) {
	for _, fixed := range []bool{false, true} {
		t.Run(fmt.Sprintf("fixed=%v", fixed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cfg := Config{StepBase: 5 * time.Millisecond, StepPerToken: 50 * time.Microsecond}
				if fixed {
					cfg = Config{TTFT: 20 * time.Millisecond, PrefillPerToken: 100 * time.Microsecond, TPOT: 10 * time.Millisecond}
				}
				e, reg := testEngine(cfg)
				start(t, e)
				var ttfts []time.Duration
				for _, n := range []int{100, 1000, 4000} {
					tr := <-follow(t, e, newSeq(testPrompt(fmt.Sprint(n), n, 16), 3))
					if tr.cached != 0 {
						t.Errorf("%d-token prompt: %d cached tokens on first sight, want 0", n, tr.cached)
					}
					ttfts = append(ttfts, tr.ttft())
				}
				for i := 1; i < len(ttfts); i++ {
					if ttfts[i] <= ttfts[i-1] {
						t.Errorf("TTFTs for 100, 1000, 4000 tokens = %v, want increasing", ttfts)
					}
				}
				// The same 4000 tokens again, then 4000 more after them:
				// every full block but the last token's is cached.
				again := <-follow(t, e, newSeq(testPrompt("4000", 4000, 16), 3))
				if want := 3984; again.cached != want {
					t.Errorf("repeat: %d cached tokens, want %d", again.cached, want)
				}
				longer := <-follow(t, e, newSeq(testPrompt("4000", 8000, 16), 3))
				if longer.cached != 4000 {
					t.Errorf("extension: %d cached tokens, want 4000", longer.cached)
				}
				if again.ttft() >= ttfts[0] {
					t.Errorf("repeat's TTFT %v, want below the 100-token prompt's %v", again.ttft(), ttfts[0])
				}
				if fixed {
					if want := 20*time.Millisecond + 4000*100*time.Microsecond; longer.ttft() != want {
						t.Errorf("extension's TTFT = %v, want TTFT + 4000 × prefill = %v", longer.ttft(), want)
					}
				}
				hits := testutil.ToFloat64(e.m.prefixHits)
				queries := testutil.ToFloat64(e.m.prefixQueries)
				if hits != 3984+4000 || queries != 100+1000+4000+4000+8000 {
					t.Errorf("prefix cache hits/queries = %v/%v, want %v/%v", hits, queries, 3984+4000, 17100)
				}
				if n, err := testutil.GatherAndCount(reg, "vllm:time_to_first_token_seconds"); err != nil || n != 1 {
					t.Errorf("TTFT histogram series = %d, %v", n, err)
				}
			})
		})
	}
}

func TestFixedTimingIsExact(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, _ := testEngine(Config{TTFT: 50 * time.Millisecond, TPOT: 20 * time.Millisecond, Speed: 2})
		start(t, e)
		// Fixed timing ignores the batch: each sequence keeps its own clock.
		var cs []<-chan trace
		for i := range 10 {
			cs = append(cs, follow(t, e, newSeq(testPrompt(fmt.Sprint(i), 30, 16), 4)))
		}
		for _, c := range cs {
			tr := <-c
			want := []time.Duration{25 * time.Millisecond, 35 * time.Millisecond, 45 * time.Millisecond, 55 * time.Millisecond}
			if diff := cmp.Diff(want, tr.times); diff != "" {
				t.Errorf("token times at speed 2 (-want +got):\n%s", diff)
			}
		}
	})
}

func TestZeroLatency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, _ := testEngine(Config{FixedTiming: true})
		start(t, e)
		tr := <-follow(t, e, newSeq(testPrompt("z", 500, 16), 100))
		if len(tr.times) != 100 || tr.times[99] != 0 {
			t.Errorf("token times %v; want 100 at once", tr.times)
		}
	})
}

func TestSlowFault(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, _ := testEngine(Config{StepBase: 4 * time.Millisecond, StepPerToken: time.Millisecond})
		e.setSlow(3)
		start(t, e)
		tr := <-follow(t, e, newSeq(testPrompt("s", 10, 16), 3))
		want := []time.Duration{3 * 14 * time.Millisecond, 3 * 19 * time.Millisecond, 3 * 24 * time.Millisecond}
		if diff := cmp.Diff(want, tr.times); diff != "" {
			t.Errorf("token times with slow=3 (-want +got):\n%s", diff)
		}
	})
}

func TestFullKVCacheMakesRequestsWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// 10 blocks of 16 tokens: the first request takes 9 of them.
		e, reg := testEngine(Config{NumBlocks: 10, StepBase: 10 * time.Millisecond, StepPerToken: time.Microsecond})
		start(t, e)
		first := follow(t, e, newSeq(testPrompt("a", 100, 16), 40))
		time.Sleep(time.Millisecond)
		second := follow(t, e, newSeq(testPrompt("b", 50, 16), 10))
		synctest.Wait()

		running, waiting, usage := e.stats()
		if running != 1 || waiting != 1 || usage != 0.9 {
			t.Errorf("running, waiting, KV usage = %d, %d, %v; want 1, 1, 0.9", running, waiting, usage)
		}
		if got := metricValue(t, reg, "vllm:num_requests_waiting"); got != 1 {
			t.Errorf("vllm:num_requests_waiting = %v, want 1", got)
		}
		a := <-first
		b := <-second
		// The second started only once the first had finished.
		if b.ttft() <= a.times[len(a.times)-1] {
			t.Errorf("second's first token at %v, before the first finished at %v", b.ttft(), a.times[len(a.times)-1])
		}
		if _, waiting, usage := e.stats(); waiting != 0 || usage != 0 {
			t.Errorf("after both: waiting %d, KV usage %v; want 0, 0", waiting, usage)
		}
	})
}

func TestMaxSeqsAndQueueLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, _ := testEngine(Config{MaxSeqs: 1, MaxWaiting: 2, StepBase: time.Millisecond})
		a := follow(t, e, newSeq(testPrompt("a", 10, 16), 5))
		b := follow(t, e, newSeq(testPrompt("b", 10, 16), 5))
		if err := e.submit(newSeq(testPrompt("c", 10, 16), 5), time.Now()); err != errQueueFull {
			t.Errorf("third submit = %v, want errQueueFull", err)
		}
		start(t, e)
		synctest.Wait()
		if r, w, _ := e.stats(); r != 1 || w != 1 {
			t.Errorf("running, waiting = %d, %d; want 1, 1", r, w)
		}
		ta, tb := <-a, <-b
		if tb.ttft() <= ta.times[4] {
			t.Errorf("second began at %v, before the first ended at %v", tb.ttft(), ta.times[4])
		}
	})
}

func TestCancelFreesAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, _ := testEngine(Config{MaxSeqs: 1, StepBase: 10 * time.Millisecond})
		start(t, e)
		long := newSeq(testPrompt("a", 100, 16), 1000)
		if err := e.submit(long, time.Now()); err != nil {
			t.Fatal(err)
		}
		waiter := follow(t, e, newSeq(testPrompt("b", 10, 16), 2))
		time.Sleep(25 * time.Millisecond) // mid-step
		e.cancel(long)
		if r, w, usage := e.stats(); r != 0 || w != 1 || usage != 0 {
			t.Errorf("after cancel: running %d, waiting %d, KV usage %v; want 0, 1, 0", r, w, usage)
		}
		tr := <-waiter
		if len(tr.times) != 2 {
			t.Errorf("waiting request produced %d tokens, want 2", len(tr.times))
		}
	})
}

func TestStopAbortsEverything(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, _ := testEngine(Config{MaxSeqs: 1})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { e.run(ctx); close(done) }()
		s1, s2 := newSeq(testPrompt("a", 10, 16), 1000), newSeq(testPrompt("b", 10, 16), 10)
		c1, c2 := follow(t, e, s1), follow(t, e, s2)
		time.Sleep(50 * time.Millisecond)
		cancel()
		<-done
		<-c1
		<-c2
		if !s1.aborted.Load() || !s2.aborted.Load() {
			t.Errorf("aborted = %v, %v; want both", s1.aborted.Load(), s2.aborted.Load())
		}
		if err := e.submit(newSeq(testPrompt("c", 10, 16), 1), time.Now()); err != errStopped {
			t.Errorf("submit after stop = %v, want errStopped", err)
		}
	})
}

// metricValue is the value of the first series of a gauge or counter.
func metricValue(t *testing.T, g prometheus.Gatherer, name string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			m := mf.GetMetric()[0]
			if m.GetCounter() != nil {
				return m.GetCounter().GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}
