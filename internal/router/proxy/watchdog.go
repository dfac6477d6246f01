package proxy

// A call's bounds in time, and what a call holds while it lasts.

import (
	"context"
	"errors"
	"math"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"gitea.mynodes.xyz/ilker/llmgw/internal/openai"
)

// The causes a watchdog ends a call with.
var (
	errFirstByte = errors.New("no first byte from upstream in time")
	errIdle      = errors.New("upstream stream idle too long")
	errDeadline  = errors.New("request took longer than its time limit")

	errNoURL = errors.New("the endpoint's URL does not parse")
)

// callState is what one call holds while it lasts, made in one
// allocation: the request sent upstream, its body, its watchdog, and a
// plain answer's usage, which its Outcome points to.
type callState struct {
	req   http.Request
	body  requestBody
	dog   watchdog
	end   ender
	usage openai.Usage
}

// watchdog cancels a call that takes too long: waiting for its first
// byte, silent between two events, or past its deadline. One timer serves
// all three, armed each time for the bound that comes first, so a call
// costs one timer and one context however many bounds it has.
type watchdog struct {
	t        *time.Timer // nil when no bound is set
	cancel   context.CancelCauseFunc
	end      *ender // ended after cancel
	idle     time.Duration
	deadline time.Time   // zero: none
	started  atomic.Bool // the first byte is in
}

// start arms d to end its call through cancel, then end: after
// firstByte without an answer, idle between two events, or at the
// deadline; a zero bound is none.
func (d *watchdog) start(cancel context.CancelCauseFunc, end *ender, firstByte, idle time.Duration, deadline time.Time) {
	d.cancel, d.end, d.idle, d.deadline = cancel, end, idle, deadline
	wait, ok := d.bound(firstByte)
	switch {
	case !ok && idle <= 0:
		return
	case !ok:
		wait = math.MaxInt64 // until the first event arms the idle bound
	}
	d.t = time.AfterFunc(wait, d.fire)
}

// fire ends the call with the bound that passed.
func (d *watchdog) fire() {
	switch {
	case !d.deadline.IsZero() && !time.Now().Before(d.deadline):
		d.cancel(errDeadline)
	case d.started.Load():
		d.cancel(errIdle)
	default:
		d.cancel(errFirstByte)
	}
	d.end.end()
}

// ender is how a call's own end, past its cancelled context, reaches the
// upstream connection it is using: the end interrupts what the
// connection is blocked in. The context's end would as well, through an
// AfterFunc on it; interrupting through ender, beside an AfterFunc on the
// context the call's was made from, spares the call's context the
// channel and the map of children an AfterFunc on it would make. A nil
// ender holds nothing and is never ended.
type ender struct {
	mu    sync.Mutex // protects the fields below
	c     *h1Conn    // the connection the call is using; nil between
	ended bool       // the call has ended
	hit   bool       // c was interrupted
}

// hold makes c the connection an end interrupts, at once if the call has
// ended already.
func (e *ender) hold(c *h1Conn) {
	if e == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.c, e.hit = c, e.ended
	if e.ended {
		c.interrupt()
	}
}

// let lets go of c, and reports whether no end interrupted it.
func (e *ender) let(c *h1Conn) bool {
	if e == nil {
		return true
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	hit := e.c == c && e.hit
	if e.c == c {
		e.c, e.hit = nil, false
	}
	return !hit
}

// end ends the call: the connection it holds, if any, is interrupted.
func (e *ender) end() {
	if e == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.ended = true
	if e.c != nil && !e.hit {
		e.hit = true
		e.c.interrupt()
	}
}

// bound is how long the timer waits for a bound of wait (zero: none) and
// the deadline, whichever comes first; false when neither is set.
func (d *watchdog) bound(wait time.Duration) (time.Duration, bool) {
	if d.deadline.IsZero() {
		return wait, wait > 0
	}
	if left := time.Until(d.deadline); wait <= 0 || left < wait {
		return left, true
	}
	return wait, true
}

// rearm points the timer at a bound of wait from now, or the deadline.
func (d *watchdog) rearm(wait time.Duration) {
	if d.t == nil {
		return
	}
	d.started.Store(true)
	if w, ok := d.bound(wait); ok {
		d.t.Reset(w)
	} else {
		d.t.Stop()
	}
}

// event notes that the upstream sent an event: the next must come within
// the idle bound.
func (d *watchdog) event() { d.rearm(d.idle) }

// answered notes that a plain answer's headers are in: only the deadline
// bounds reading the rest.
func (d *watchdog) answered() { d.rearm(0) }

func (d *watchdog) stop() {
	if d.t != nil {
		d.t.Stop()
	}
}
