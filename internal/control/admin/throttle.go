package admin

// The throttle on guessing the admin token. Every try at it, on /ui,
// /admin and /debug alike, takes a slot from its source's budget and one
// from a budget all sources share, before the token is compared; the
// right token gives both back, a wrong one keeps them until they refill.

import (
	clist "container/list"
	"net/netip"
	"sync"
	"time"
)

// The throttle's budgets. A source is the address a connection comes
// from, an IPv6 one by its /64, which a single host commonly holds whole.
const (
	// sourceBurst is how many tries at the token one source may make at
	// once, and sourceEvery how often it gets one back: 20 a minute, which
	// an operator mistyping never comes near.
	sourceBurst = 20
	sourceEvery = 3 * time.Second
	// sharedBurst and sharedEvery are every source's tries together: ten
	// sources' worth, 200 a minute, 288,000 a day. A token of 16 random
	// letters and digits (95 bits) would take some 10^17 years to guess
	// at that pace.
	sharedBurst = 10 * sourceBurst
	sharedEvery = sourceEvery / 10
	// freshReserve is the part of the shared budget that only a source
	// with no wrong token in the last wrongMemory may take, so that
	// sources that fail, however many, never use up the tries of one that
	// has not: the operator at another address still gets in while they
	// are refused. Only 40 addresses with no recent wrong token, trying
	// within the same 12 s, can empty it.
	freshReserve = 2 * sourceBurst
	// wrongMemory is how long a wrong token keeps its source from the
	// reserve.
	wrongMemory = 10 * time.Minute
	// maxSources bounds the sources remembered, at some 200 bytes each;
	// past it the one heard from longest ago is forgotten, and comes back
	// with a full budget of its own, though not of the shared one.
	maxSources = 4096
	// logEvery is how often one source's failures are logged: the first
	// at once, then a line at most every minute, counting those between.
	logEvery = time.Minute
)

// bucket is a budget of tries that refills one at a time, held as the
// time at which it would be full again (GCRA's theoretical arrival time).
type bucket struct{ full time.Time }

// wait is how long until a try may be taken at now, leaving at least keep
// tries of burst in the bucket; zero when one may be taken at once.
func (b *bucket) wait(now time.Time, burst, keep int, every time.Duration) time.Duration {
	limit := now.Add(time.Duration(burst-1-keep) * every)
	if b.full.After(limit) {
		return b.full.Sub(limit)
	}
	return 0
}

// take takes a try at now.
func (b *bucket) take(now time.Time, every time.Duration) {
	b.full = later(b.full, now).Add(every)
}

// giveBack returns a try taken earlier.
func (b *bucket) giveBack(now time.Time, every time.Duration) {
	b.full = later(b.full.Add(-every), now)
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// sourceOf is the source an address is counted as: an IPv4 address (an
// IPv4-mapped IPv6 one included) by itself, an IPv6 one by its /64. An
// address that does not parse counts as the zero prefix, one source for
// all such.
func sourceOf(remoteAddr string) netip.Prefix {
	ap, err := netip.ParseAddrPort(remoteAddr)
	if err != nil {
		return netip.Prefix{}
	}
	a := ap.Addr().Unmap().WithZone("")
	bits := 32
	if a.Is6() {
		bits = 64
	}
	p, _ := a.Prefix(bits)
	return p
}

// source is what the throttle remembers of one source.
type source struct {
	key   netip.Prefix
	tries bucket
	// wrong and throttled count the source's wrong tokens and tries
	// refused unchecked since its last log line, at logged.
	wrong, throttled int
	logged           time.Time
	lastWrong        time.Time // its last wrong token; zero for none
}

// throttle holds the budgets. Its methods are safe for concurrent use.
type throttle struct {
	mu      sync.Mutex                      // protects the fields below
	shared  bucket                          // every source's tries together
	sources map[netip.Prefix]*clist.Element // key: a source; value: its *source in order
	order   clist.List                      // of *source, the one heard from last at the front
}

func newThrottle() *throttle {
	return &throttle{sources: make(map[netip.Prefix]*clist.Element)}
}

// take takes a slot for a try from src at now, from its own budget and
// the shared one, or neither; it reports how long until one is free when
// it takes none. A source with no wrong token in the last wrongMemory
// may take the shared budget's reserve.
func (t *throttle) take(src netip.Prefix, now time.Time) (time.Duration, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.source(src)
	keep := 0
	if !s.lastWrong.IsZero() && now.Sub(s.lastWrong) < wrongMemory {
		keep = freshReserve
	}
	wait := max(s.tries.wait(now, sourceBurst, 0, sourceEvery), t.shared.wait(now, sharedBurst, keep, sharedEvery))
	if wait > 0 {
		return wait, false
	}
	s.tries.take(now, sourceEvery)
	t.shared.take(now, sharedEvery)
	return 0, true
}

// giveBack returns the slot a try from src took: it held the token.
func (t *throttle) giveBack(src netip.Prefix, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e := t.sources[src]; e != nil {
		e.Value.(*source).tries.giveBack(now, sourceEvery)
	}
	t.shared.giveBack(now, sharedEvery)
}

// note counts a wrong token from src at now, or a try refused unchecked
// (throttled), and reports whether to log now, with the counts since the
// last line.
func (t *throttle) note(src netip.Prefix, now time.Time, throttled bool) (log bool, wrong, refused int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.source(src)
	if throttled {
		s.throttled++
	} else {
		s.wrong++
		s.lastWrong = now
	}
	if !s.logged.IsZero() && now.Sub(s.logged) < logEvery {
		return false, 0, 0
	}
	wrong, refused = s.wrong, s.throttled
	s.wrong, s.throttled, s.logged = 0, 0, now
	return true, wrong, refused
}

// source is src's record, made if there is none, and moved to the front;
// past maxSources the one at the back is forgotten. t.mu must be held.
func (t *throttle) source(src netip.Prefix) *source {
	if e := t.sources[src]; e != nil {
		t.order.MoveToFront(e)
		return e.Value.(*source)
	}
	if t.order.Len() >= maxSources {
		oldest := t.order.Back()
		delete(t.sources, oldest.Value.(*source).key)
		t.order.Remove(oldest)
	}
	s := &source{key: src}
	t.sources[src] = t.order.PushFront(s)
	return s
}
