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

// watchdog ends a call that takes too long: waiting for its first byte,
// silent between two events, or past its deadline. One timer serves all
// three, armed each time for the bound that comes first, so a call costs
// one timer however many bounds it has, and no context of its own.
type watchdog struct {
	t        *time.Timer // nil when no bound is set
	end      *ender      // what the watchdog ends the call through
	idle     time.Duration
	deadline time.Time   // zero: none
	started  atomic.Bool // the first byte is in
}

// start arms d to end its call through end: after firstByte without an
// answer, idle between two events, or at the deadline; a zero bound is
// none.
func (d *watchdog) start(end *ender, firstByte, idle time.Duration, deadline time.Time) {
	d.end, d.idle, d.deadline = end, idle, deadline
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
		d.end.end(errDeadline)
	case d.started.Load():
		d.end.end(errIdle)
	default:
		d.end.end(errFirstByte)
	}
}

// ender is how a call ends before its caller's context does, and why:
// its watchdog ends it with a cause, which interrupts what the upstream
// connection the call holds is blocked in, and cancels the context bound
// to the call, if one is (bind). The call has no context of its own: its
// caller's, parent, ends it too, through an AfterFunc on it for as long
// as a connection is held, and a context is made only for what nothing
// else interrupts (a dial, net/http's transport). A nil ender holds
// nothing and is never ended.
type ender struct {
	parent context.Context // the caller's context

	mu     sync.Mutex              // protects the fields below
	c      *h1Conn                 // the connection the call is using; nil between
	ended  bool                    // the call has ended
	hit    bool                    // c was interrupted
	cause  error                   // why the call ended; nil when parent had ended first
	cancel context.CancelCauseFunc // the bound context's; nil when none is
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

// end ends the call for cause, once: the connection it holds, if any,
// is interrupted, and the bound context cancelled. A call whose parent
// has ended already ended for the parent's cause, as a context made from
// parent would have.
func (e *ender) end(cause error) {
	if e == nil {
		return
	}
	e.mu.Lock()
	if e.ended {
		e.mu.Unlock()
		return
	}
	e.ended = true
	if e.parent == nil || e.parent.Err() == nil {
		e.cause = cause
	}
	if e.c != nil && !e.hit {
		e.hit = true
		e.c.interrupt()
	}
	cancel := e.cancel
	e.mu.Unlock()
	if cancel != nil {
		cancel(cause)
	}
}

// why is why the call ended, as context.Cause tells of a context: the
// watchdog's cause, or parent's, or nil while it lasts. A nil ender's
// call ends with parent alone.
func (e *ender) why(parent context.Context) error {
	if e != nil {
		e.mu.Lock()
		cause := e.cause
		e.mu.Unlock()
		if cause != nil {
			return cause
		}
	}
	return context.Cause(parent)
}

// unbind cancels the context last bound to the call, if any: the call is
// done with. Only the call's own goroutine binds, so it reads e.cancel
// without the lock.
func (e *ender) unbind() {
	if e.cancel != nil {
		e.cancel(nil)
	}
}

// bind is a context of parent that the call's end cancels too, and its
// cancel: for what only a context interrupts. A nil ender's is parent.
func (e *ender) bind(parent context.Context) (context.Context, context.CancelCauseFunc) {
	if e == nil {
		return parent, func(error) {}
	}
	ctx, cancel := context.WithCancelCause(parent)
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.ended {
		cancel(e.cause)
	}
	e.cancel = cancel
	return ctx, cancel
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

// afterFunc is context.AfterFunc(ctx, f), through ctx's own AfterFunc
// when it has one, as a request's context from llmgw's HTTP/1.1 server
// does: context.AfterFunc would make a context, a closure, a Done channel
// and a map of children in ctx; ctx's own makes the stop closure alone.
// Either runs f in its own goroutine once ctx ends, and stop reports
// whether it kept f from running.
func afterFunc(ctx context.Context, f func()) (stop func() bool) {
	if a, ok := ctx.(interface{ AfterFunc(func()) func() bool }); ok {
		return a.AfterFunc(f)
	}
	return context.AfterFunc(ctx, f)
}
