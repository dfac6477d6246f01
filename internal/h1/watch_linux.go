package h1

// The poller watches every connection whose handler works, for the whole
// process: one epoll instance, and one goroutine waiting on it. It hears
// of a connection only when something happens there: the client closed
// it, reset it, or sent its next request early. A stream that waits on its
// upstream then costs nothing to watch.
//
// A connection joins the epoll instance with its first watch and stays
// until it closes, which takes it out with its descriptor: each request
// arms its registration (EPOLLONESHOT, re-armed with EPOLL_CTL_MOD) when
// its watch starts and disarms it when the watch ends, one system call
// each. A disarmed registration still reports an error or a hang-up once,
// as epoll always does; the poller lets be an event for a connection with
// no watch running.
//
// Every system call on a connection's descriptor is made inside its
// RawConn's Control, which keeps the descriptor open meanwhile, so that a
// connection closed and its number given to another is never reached
// through the old one's registration. An event carries its connection's
// number rather than the descriptor, and a number is never used twice, so
// a late event for a connection gone finds nothing.

import (
	"context"
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

	// The run goroutine's, for peeking at a connection inside its
	// Control: peekFn is peek bound once, and ev, n and err its input
	// and results.
	peekFn func(fd uintptr)
	ev     syscall.EpollEvent
	buf    [1]byte
	n      int
	err    error
}

// polled is one registered connection.
type polled struct {
	rc syscall.RawConn
	// cancel ends the handler's context when the client leaves; nil
	// while no watch runs, when events are let be.
	cancel context.CancelFunc
	// armed reports whether the registration waits for an event: set
	// when a watch starts, cleared by an event, which disarms it.
	armed bool
}

// pollWatch is the poller's part of a connection's watch.
type pollWatch struct {
	rc   syscall.RawConn // the connection's; nil until its first watch
	noFD bool            // the connection has no descriptor to poll
	id   uint64          // the connection's number, which its events carry; 0 until registered

	// ctlFn is ctl bound once, for rc.Control to register, arm or
	// disarm without allocating; epfd, op and ev are its input, err its
	// result.
	ctlFn func(fd uintptr)
	epfd  int
	op    int
	ev    syscall.EpollEvent
	err   error
}

const (
	// pollEvents are what a watch waits for, once: the next event
	// disarms the registration until it is armed again.
	pollEvents = syscall.EPOLLIN | syscall.EPOLLRDHUP | syscall.EPOLLONESHOT
	// pollOff disarms a registration: no event of pollEvents wakes the
	// poller; epoll adds an error and a hang-up, reported once.
	pollOff = syscall.EPOLLONESHOT
)

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
	p.epfd, p.conns, p.peekFn = epfd, make(map[uint64]polled), p.peek
	go p.run()
}

// add watches c until remove, and reports false when it cannot: c then
// watches with a goroutine. c's first watch registers it; later ones arm
// its registration.
func (p *poller) add(c *conn, cancel context.CancelFunc) bool {
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
	w.op = syscall.EPOLL_CTL_MOD
	if w.id == 0 {
		p.last++
		w.id, w.op = p.last, syscall.EPOLL_CTL_ADD
	}
	// The cancel is in place before the registration is armed, for an
	// event that comes at once.
	p.conns[w.id] = polled{rc: w.rc, cancel: cancel, armed: true}
	p.mu.Unlock()
	w.ev = epollEvent(w.id, pollEvents)
	if err := w.rc.Control(w.ctlFn); err != nil || w.err != nil {
		p.forget(c)
		return false
	}
	return true
}

// remove ends c's watch: its events are let be from now on, and its
// registration, if still armed, is disarmed.
func (p *poller) remove(c *conn) {
	w := &c.watch.p
	p.mu.Lock()
	e, ok := p.conns[w.id]
	if ok {
		p.conns[w.id] = polled{rc: e.rc}
	}
	p.mu.Unlock()
	if ok && e.armed {
		// An event that comes meanwhile finds no cancel: let be. A
		// connection already closed has left the epoll instance with its
		// descriptor, and its Control fails.
		w.op, w.ev = syscall.EPOLL_CTL_MOD, epollEvent(w.id, pollOff)
		w.rc.Control(w.ctlFn)
	}
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

// ctl registers, arms or disarms the watch in the epoll instance; it runs
// inside the connection's Control.
func (w *pollWatch) ctl(fd uintptr) {
	w.err = syscall.EpollCtl(w.epfd, w.op, int(fd), &w.ev)
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
			if !ok {
				continue // a connection gone
			}
			// The event disarmed the registration; a connection with no
			// watch running is let be.
			e.armed = e.cancel != nil && p.happened(e, ev)
			p.conns[id] = e
		}
		p.mu.Unlock()
	}
}

// retire stops the poller after epoll failed, which it does only when
// misused: the instance is gone or was never one. A new watch then uses a
// goroutine. A watch already added hears of nothing more: its handler
// learns that its client left only when a write fails, and its remove
// drops it as usual. The epoll descriptor stays open for those removes,
// so that its number cannot go to another file meanwhile.
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

// happened learns what an event on a watched connection was, by a look
// at what it has to read, and reports whether the connection is watched
// on.
func (p *poller) happened(e polled, ev syscall.EpollEvent) bool {
	p.ev, p.n, p.err = ev, 0, nil
	if e.rc.Control(p.peekFn) != nil {
		e.cancel() // closed by the server
		return false
	}
	switch {
	case p.n > 0:
		// The next request has begun: it is read when this one is done,
		// and the watch stays off until then. Peeked, its bytes are still
		// the connection's.
		return false
	case p.err == syscall.EAGAIN || p.err == syscall.EINTR:
		return true // nothing after all: watched on
	default:
		e.cancel() // closed, or reset
		return false
	}
}

// peek looks at what a connection has to read, and when it has nothing
// yet, watches it on; it runs inside the connection's Control.
func (p *poller) peek(fd uintptr) {
	p.n, _, p.err = syscall.Recvfrom(int(fd), p.buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	if p.n <= 0 && (p.err == syscall.EAGAIN || p.err == syscall.EINTR) {
		p.ev.Events = pollEvents
		syscall.EpollCtl(p.epfd, syscall.EPOLL_CTL_MOD, int(fd), &p.ev)
	}
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
