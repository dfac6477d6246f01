package h1

// The watch for a client leaving while its request's handler works, which
// ends the handler's context at once. Where the system allows, one poller
// watches every connection for the process (watch_linux.go): a waiting
// stream then costs no goroutine for it. Elsewhere, and for connections
// without a file descriptor, a connection has a goroutine of its own that
// reads from it.

import (
	"sync/atomic"
	"time"
)

// watch is one connection's watch.
type watch struct {
	polled bool      // by the poller; otherwise by the goroutine below
	p      pollWatch // the poller's part

	// The connection's goroutine, started with its first watch. It lasts
	// as long as the connection, so that its stack shrinks to the
	// smallest size and stays there, where one per request would start
	// at the runtime's average.
	watches  chan *reqContext // a watch to begin, and the context to end when the client leaves
	watched  chan struct{}    // a watch has ended
	aborting atomic.Bool      // the watch is being ended by the server
	buf      [1]byte
}

func (w *watch) start(c *conn, ctx *reqContext) {
	if w.polled = poll.add(c, ctx); w.polled {
		return
	}
	if w.watches == nil {
		w.watches, w.watched = make(chan *reqContext, 1), make(chan struct{})
		go w.read(c)
	}
	// The goroutine reads with no deadline of the request's, the
	// headers' or the body's: a stream outlasting it is not a client
	// gone.
	c.rwc.SetReadDeadline(time.Time{})
	w.watches <- ctx
}

func (w *watch) read(c *conn) {
	for ctx := range w.watches {
		n, err := c.rwc.Read(w.buf[:])
		if n > 0 {
			// The next request has begun: it is read when this one is done.
			c.r.peek, c.r.hasPeek = w.buf[0], true
		} else if err != nil && !w.aborting.Load() {
			ctx.cancel()
		}
		w.watched <- struct{}{}
	}
}

func (w *watch) stop(c *conn) {
	if w.polled {
		poll.remove(c)
		return
	}
	w.aborting.Store(true)
	c.rwc.SetReadDeadline(aLongTimeAgo)
	<-w.watched
	c.rwc.SetReadDeadline(time.Time{})
	w.aborting.Store(false)
}

// close ends the connection's goroutine, if it has one, and its
// registration with the poller, if it has one, as the connection closes.
func (w *watch) close(c *conn) {
	if w.watches != nil {
		close(w.watches)
	}
	poll.forget(c)
}
