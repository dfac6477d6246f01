package h1

// The poller watches every connection whose handler works, for the whole
// process: one epoll instance, and one goroutine waiting on it. It hears
// of a connection only when the client closes or resets it. A stream that
// waits on its upstream then costs nothing to watch.
//
// A connection joins the epoll instance with its first watch and stays
// until it closes, which takes it out with its descriptor. It is
// registered edge-triggered for the client's end alone (EPOLLRDHUP, and
// the error and hang-up epoll always reports), not for its bytes: a
// request's watch then begins and ends with no system call, and the
// client's next request, whenever it comes, wakes nobody. An edge comes
// once: one that comes while no watch runs, or that finds the client sent
// more before it closed, is noted, and the next watch looks for itself.
//
// Every system call on a connection's descriptor is made inside its
// RawConn's Control, which keeps the descriptor open meanwhile, so that a
// connection closed and its number given to another is never reached
// through the old one's registration. An event carries its connection's
// number rather than the descriptor, and a number is never used twice, so
// a late event for a connection gone finds nothing.

import (
	"log/slog"
	"net"
	"sync"
	"syscall"
)

var poll poller

type poller struct {
	once sync.Once
	epfd int          // -1 when epoll could not be had: connections watch with goroutines
	log  *slog.Logger // for the poller failing; nil is slog.Default()

	mu      sync.Mutex
	conns   map[uint64]polled // key: the connection's number; every connection registered
	last    uint64            // the last connection's number
	retired bool              // epoll failed: new watches use goroutines
	k       peeker            // the run goroutine's, under mu
}

// polled is one registered connection.
type polled struct {
	rc syscall.RawConn
	// ctx is the handler's context, ended when the client leaves; nil
	// while no watch runs.
	ctx *reqContext
	// ended reports whether an edge came that no watch acted on: the
	// client closed or reset the connection while no watch ran, or after
	// it sent more. The edge does not come again, so each watch from then
	// on looks at the connection as it starts.
	ended bool
}

// pollWatch is the poller's part of a connection's watch.
type pollWatch struct {
	rc   syscall.RawConn // the connection's; nil until its first watch
	noFD bool            // the connection has no descriptor to poll
	id   uint64          // the connection's number, which its events carry; 0 until registered

	// ctlFn is ctl bound once, for rc.Control to register the
	// connection without allocating; epfd and ev are its input, err its
	// result.
	ctlFn func(fd uintptr)
	epfd  int
	ev    syscall.EpollEvent
	err   error
	k     peeker // for a watch that starts after an edge
}

// pollEvents is what a connection is registered for: the client's end of
// it, once for each time it happens. epoll adds an error and a hang-up.
// (Package syscall has EPOLLET as a negative number, its sign bit.)
const pollEvents uint32 = syscall.EPOLLRDHUP | syscall.EPOLLET&0xffffffff

func (p *poller) init() {
	fd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		p.epfd = -1
		return
	}
	p.start(fd)
}

// start runs the poller on the epoll instance epfd.
func (p *poller) start(epfd int) {
	p.epfd, p.conns = epfd, make(map[uint64]polled)
	go p.run()
}

// add watches c until remove, and reports false when it cannot: c then
// watches with a goroutine. c's first watch registers it; a later one
// only notes whom to tell, and looks at c when an edge came meanwhile.
func (p *poller) add(c *conn, ctx *reqContext) bool {
	p.once.Do(p.init)
	w := &c.watch.p
	if p.epfd < 0 || w.noFD {
		return false
	}
	if w.rc == nil {
		if w.rc = rawConn(c.rwc); w.rc == nil {
			w.noFD = true
			return false
		}
		w.ctlFn, w.epfd = w.ctl, p.epfd
	}
	p.mu.Lock()
	if p.retired {
		p.mu.Unlock()
		return false
	}
	register := w.id == 0
	if register {
		p.last++
		w.id = p.last
	}
	// The context is in place before the connection is registered, for an
	// edge that comes at once: the client already gone.
	e := p.conns[w.id]
	e.rc, e.ctx = w.rc, ctx
	p.conns[w.id] = e
	p.mu.Unlock()
	if register {
		w.ev = epollEvent(w.id, pollEvents)
		if err := w.rc.Control(w.ctlFn); err != nil || w.err != nil {
			p.forget(c)
			w.noFD = true // not to be polled: each watch from now on a goroutine's
			return false
		}
	} else if e.ended && w.k.left(w.rc) {
		ctx.cancel()
	}
	return true
}

// remove ends c's watch: an edge from now on is noted for the next.
func (p *poller) remove(c *conn) {
	w := &c.watch.p
	p.mu.Lock()
	if e, ok := p.conns[w.id]; ok {
		e.ctx = nil
		p.conns[w.id] = e
	}
	p.mu.Unlock()
}

// forget drops c's registration as c closes, which takes its descriptor
// out of the epoll instance; an event already on its way finds nothing.
func (p *poller) forget(c *conn) {
	w := &c.watch.p
	if w.id == 0 {
		return
	}
	p.mu.Lock()
	delete(p.conns, w.id)
	p.mu.Unlock()
	w.id = 0
}

// ctl registers the connection with the epoll instance; it runs inside
// the connection's Control.
func (w *pollWatch) ctl(fd uintptr) {
	w.err = syscall.EpollCtl(w.epfd, syscall.EPOLL_CTL_ADD, int(fd), &w.ev)
}

// run waits for events until epoll fails, when the poller retires.
func (p *poller) run() {
	var events [64]syscall.EpollEvent
	for {
		n, err := syscall.EpollWait(p.epfd, events[:], -1)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			p.retire(err)
			return
		}
		p.mu.Lock()
		for _, ev := range events[:n] {
			id := eventID(ev)
			e, ok := p.conns[id]
			switch {
			case !ok:
				// A connection gone.
			case e.ctx != nil && p.k.left(e.rc):
				e.ctx.cancel()
			default:
				e.ended = true
				p.conns[id] = e
			}
		}
		p.mu.Unlock()
	}
}

// retire stops the poller after epoll failed, which it does only when
// misused: the instance is gone or was never one. A new watch then uses a
// goroutine. A watch already added hears of nothing more: its handler
// learns that its client left only when a write fails, and its remove
// drops it as usual. The epoll descriptor stays open meanwhile, so that
// its number cannot go to another file while connections are registered.
func (p *poller) retire(err error) {
	p.mu.Lock()
	p.retired = true
	p.mu.Unlock()
	log := p.log
	if log == nil {
		log = slog.Default()
	}
	log.Error("watching connections with epoll failed; each connection now watches with a goroutine", "err", err)
}

// peeker looks at what a connection has to read, without taking it.
type peeker struct {
	fn  func(fd uintptr) // look bound once, as a method value is an allocation
	buf [1]byte
	n   int
	err error
}

// left reports whether the client of rc has left: closed the connection
// with nothing more sent, or reset it; and whether the server has closed
// it. Bytes sent are the next request, read when this one is done, and
// still the connection's: they were only peeked at.
func (k *peeker) left(rc syscall.RawConn) bool {
	if k.fn == nil {
		k.fn = k.look
	}
	k.n, k.err = 0, nil
	if rc.Control(k.fn) != nil {
		return true // closed by the server
	}
	switch {
	case k.n > 0:
		return false
	case k.err == syscall.EAGAIN || k.err == syscall.EINTR:
		return false // nothing after all
	}
	return true
}

// look peeks at the connection's next byte; it runs inside the
// connection's Control.
func (k *peeker) look(fd uintptr) {
	k.n, _, k.err = syscall.Recvfrom(int(fd), k.buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
}

// epollEvent is the registration of connection id for events.
func epollEvent(id uint64, events uint32) syscall.EpollEvent {
	return syscall.EpollEvent{Events: events, Fd: int32(uint32(id)), Pad: int32(uint32(id >> 32))}
}

// eventID is the number of the connection ev is for.
func eventID(ev syscall.EpollEvent) uint64 {
	return uint64(uint32(ev.Fd)) | uint64(uint32(ev.Pad))<<32
}

// rawConn is conn's raw connection, or nil when it has no file
// descriptor.
func rawConn(conn net.Conn) syscall.RawConn {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	return rc
}
