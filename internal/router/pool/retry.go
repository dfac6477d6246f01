package pool

// The retry budget: retries may be at most a share of a pool's recent
// requests, so that a pool that fails does not get its own load again.

import (
	"sync"
	"time"
)

const (
	// budgetWindow is how far back "recent" reaches, in one-second
	// buckets: long enough to hold the requests in flight when an
	// endpoint dies, whose retries come at once.
	budgetWindow = 10
	// MinRetries are allowed in any window, whatever the share: a pool
	// that serves a request a minute can still retry.
	MinRetries = 10
)

// RetryBudget counts a pool's requests and retries over the last
// budgetWindow seconds.
type RetryBudget struct {
	share float64 // catalog.Pool.RetryBudget

	mu      sync.Mutex // protects buckets
	buckets [budgetWindow]budgetBucket
}

type budgetBucket struct {
	second            int64 // the Unix second the counts are for
	requests, retries int64
}

// bucket is now's bucket, emptied first if it held an older second.
// b.mu is held.
func (b *RetryBudget) bucket(now time.Time) *budgetBucket {
	sec := now.Unix()
	k := &b.buckets[sec%budgetWindow]
	if k.second != sec {
		*k = budgetBucket{second: sec}
	}
	return k
}

// Request counts a request's first try.
func (b *RetryBudget) Request(now time.Time) {
	b.mu.Lock()
	b.bucket(now).requests++
	b.mu.Unlock()
}

// Retry reports whether one more retry fits the budget, and counts it if
// it does.
func (b *RetryBudget) Retry(now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	var requests, retries int64
	sec := now.Unix()
	for _, k := range b.buckets {
		if sec-k.second < budgetWindow {
			requests += k.requests
			retries += k.retries
		}
	}
	if float64(retries+1) > max(MinRetries, b.share*float64(requests)) {
		return false
	}
	b.bucket(now).retries++
	return true
}

// carry takes prev's counts, for a pool rebuilt by a reload.
func (b *RetryBudget) carry(prev *RetryBudget) {
	prev.mu.Lock()
	b.buckets = prev.buckets
	prev.mu.Unlock()
}
