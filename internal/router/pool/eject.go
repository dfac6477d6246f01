package pool

// Passive ejection: an endpoint that fails requests is passed over for a
// while, longer each time it fails again without serving one between. And
// cooldowns: an endpoint whose provider answered 429 with Retry-After is
// passed over for exactly that long.

import (
	"sync/atomic"
	"time"
)

// health is whether an endpoint's health probe passes, and whether it
// is ejected for failing requests.
type health struct {
	down         atomic.Bool  // the last health probe failed
	ejectedUntil atomic.Int64 // unix nanoseconds; passive ejection
	failures     atomic.Int32 // requests failed in a row
	ejections    atomic.Int32 // ejections since the last success
	cooledUntil  atomic.Int64 // unix nanoseconds; until when a provider asked not to be called (Retry-After)
}

// maxCooldown bounds how long one Retry-After takes an endpoint out: a
// provider's own quota windows are a minute or less, and a header that
// asks for hours (or a hostile one) must not empty a pool for that long.
const maxCooldown = 5 * time.Minute

// CoolFor takes the endpoint out for d from now, as a provider's 429
// asked with Retry-After (at most maxCooldown), unless it is already
// out for longer; d of zero or less does nothing. It reports whether it
// took the endpoint out for longer than it was. Unlike an ejection, a
// cooldown is not a failure: the endpoint's next success or failure
// leaves it be, and it ends when d has passed, no later.
func (h *health) CoolFor(d time.Duration, now time.Time) bool {
	if d <= 0 {
		return false
	}
	until := now.Add(min(d, maxCooldown)).UnixNano()
	for {
		cur := h.cooledUntil.Load()
		if cur >= until {
			return false
		}
		if h.cooledUntil.CompareAndSwap(cur, until) {
			return true
		}
	}
}

// Passive outlier ejection: an endpoint that fails ejectAfter requests in
// a row is ejected for ejectBase, doubling with each ejection that follows
// without a success in between, up to ejectMax. One failure is enough:
// every request sent to a failing endpoint costs its client a wasted round
// trip before the retry, while passing over a healthy one for a second
// costs the pool a second of one endpoint. A second at first keeps a
// restarting server (back within seconds) from waiting long, and half a
// minute bounds how long a recovered one stays out.
const (
	ejectAfter = 1
	EjectBase  = time.Second
	ejectMax   = 30 * time.Second
)

// Failed counts a failed request, and ejects the endpoint after ejectAfter
// in a row, or after one when it is just back from an ejection. It reports
// whether this failure ejected it.
func (h *health) Failed(now time.Time) bool {
	until := h.ejectedUntil.Load()
	if until > now.UnixNano() {
		return false // a request sent before the ejection: its outage already counted
	}
	n := h.failures.Add(1)
	back := h.ejections.Load() > 0 && h.ejectedUntil.Load() <= now.UnixNano()
	if n < ejectAfter && !back {
		return false
	}
	k := h.ejections.Load() + 1
	wait := min(EjectBase<<min(k-1, 5), ejectMax)
	// Of failures that race here, one ejects; the others were the same
	// outage.
	if !h.ejectedUntil.CompareAndSwap(until, now.Add(wait).UnixNano()) {
		return false
	}
	h.ejections.Store(k)
	h.failures.Store(0)
	return true
}

// Succeeded counts a request the endpoint served: one brings an ejected
// endpoint back for good.
func (h *health) Succeeded() {
	if h.failures.Load() != 0 {
		h.failures.Store(0)
	}
	if h.ejections.Load() != 0 {
		h.ejections.Store(0)
		h.ejectedUntil.Store(0)
	}
}
