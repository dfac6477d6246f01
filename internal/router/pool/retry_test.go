package pool

import (
	"testing"
	"time"
)

// retries is how many retries b allows at now, counting each.
func retries(b *RetryBudget, now time.Time) int {
	n := 0
	for b.Retry(now) {
		n++
		if n > 1e6 {
			panic("the budget never runs out")
		}
	}
	return n
}

func TestRetryBudget(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)

	t.Run("minRetries with no requests", func(t *testing.T) {
		b := RetryBudget{share: 0.2}
		if got := retries(&b, t0); got != MinRetries {
			t.Errorf("%d retries, want %d", got, MinRetries)
		}
	})

	t.Run("a share of the requests", func(t *testing.T) {
		b := RetryBudget{share: 0.2}
		for i := range 200 {
			b.Request(t0.Add(time.Duration(i) * 10 * time.Millisecond)) // over two seconds
		}
		if got := retries(&b, t0.Add(3*time.Second)); got != 40 {
			t.Errorf("%d retries after 200 requests, want 40", got)
		}
	})

	t.Run("the window slides", func(t *testing.T) {
		b := RetryBudget{share: 0.5}
		for range 100 {
			b.Request(t0)
		}
		if got := retries(&b, t0.Add(2*time.Second)); got != 50 {
			t.Fatalf("%d retries, want 50", got)
		}
		// Nine seconds on, the requests and the retries still count.
		if b.Retry(t0.Add(9 * time.Second)) {
			t.Error("a retry allowed 9s later, with the budget spent")
		}
		// Past the window the first second's requests are forgotten, and
		// the retries of the second second still count.
		if got := retries(&b, t0.Add(10*time.Second)); got != 0 {
			t.Errorf("%d retries at 10s, want 0: the retries of 2s are still in the window", got)
		}
		if got := retries(&b, t0.Add(12*time.Second)); got != MinRetries {
			t.Errorf("%d retries at 12s, want %d", got, MinRetries)
		}
	})

	t.Run("a reload carries the counts", func(t *testing.T) {
		var prev RetryBudget
		prev.share = 0.2
		for range 100 {
			prev.Request(t0)
		}
		next := RetryBudget{share: 0.2}
		next.carry(&prev)
		if got := retries(&next, t0); got != 20 {
			t.Errorf("%d retries after a reload, want 20", got)
		}
	})
}
