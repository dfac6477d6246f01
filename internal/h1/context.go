package h1

// A request's context. It ends when the client leaves while the handler
// works, when the body cannot be read, or when the handler returns, and
// carries no values and no deadline. It is made in the request's one
// allocation, and keeps the functions that are to run at its end itself
// (AfterFunc): a context.WithCancel context would be two allocations
// more, and each context.AfterFunc on it four (a child context, its stop
// closure, the Done channel and the map of children).

import (
	"context"
	"sync"
	"time"
)

// reqContext is a request's context. Its zero value is a context that
// has not ended.
type reqContext struct {
	mu   sync.Mutex    // protects the fields below
	done chan struct{} // made when Done is first asked for, or at the end
	err  error         // context.Canceled once ended
	// funcs are the AfterFunc functions to run at the end, in the order
	// they came; inline holds the first few.
	funcs  []afterFunc
	inline [2]afterFunc
	last   uint64 // the last AfterFunc's id
}

type afterFunc struct {
	id uint64
	f  func()
}

var _ context.Context = (*reqContext)(nil)

// closedDone is the Done channel of a context that ended before any was
// asked for.
var closedDone = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

func (x *reqContext) Deadline() (time.Time, bool) { return time.Time{}, false }

func (x *reqContext) Done() <-chan struct{} {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.done == nil {
		x.done = make(chan struct{})
	}
	return x.done
}

func (x *reqContext) Err() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.err
}

// Value is nil for every key: a request's context carries none.
func (x *reqContext) Value(any) any { return nil }

func (x *reqContext) String() string { return "h1.requestContext" }

// AfterFunc arranges for f to run in its own goroutine once x ends, at
// once if it has; stop reports whether it kept f from running. It is the
// method context.AfterFunc and context.WithCancel look for on a parent,
// so that a context made from x neither starts a goroutine nor allocates
// more than stop.
func (x *reqContext) AfterFunc(f func()) (stop func() bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.err != nil {
		go f()
		return stopNothing
	}
	if x.funcs == nil {
		x.funcs = x.inline[:0]
	}
	x.last++
	id := x.last
	x.funcs = append(x.funcs, afterFunc{id: id, f: f})
	return func() bool { return x.stop(id) }
}

func stopNothing() bool { return false }

// stop takes the AfterFunc function id off the list, and reports whether
// it was there to take: it has not run, and will not.
func (x *reqContext) stop(id uint64) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	for i, a := range x.funcs {
		if a.id == id {
			n := len(x.funcs)
			copy(x.funcs[i:], x.funcs[i+1:])
			x.funcs[n-1] = afterFunc{} // let go of f
			x.funcs = x.funcs[:n-1]
			return true
		}
	}
	return false
}

// cancel ends x, once, and starts its AfterFunc functions.
func (x *reqContext) cancel() {
	x.mu.Lock()
	if x.err != nil {
		x.mu.Unlock()
		return
	}
	x.err = context.Canceled
	if x.done == nil {
		x.done = closedDone
	} else {
		close(x.done)
	}
	funcs := x.funcs
	x.funcs = nil
	x.mu.Unlock()
	for _, a := range funcs {
		go a.f()
	}
}
