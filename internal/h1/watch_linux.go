package h1

// The poller watches every connection whose handler works, for the whole
// process: one epoll instance, and one goroutine waiting on it. It hears
// of a connection only when something happens there: the client closed
// it, reset it, or sent its next request early. A stream that waits on its
// upstream then costs nothing to watch.
//
// Every system call on a connection's descriptor is made inside its
// RawConn's Control, which keeps the descriptor open meanwhile, so that a
// connection closed and its number given to another is never reached
// through the old one's watch. An event carries its watch's number rather
// than the descriptor, and a number is never used twice, so a late event
// for an ended watch finds nothing.

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
	conns   map[uint64]polled // key: the watch's number
	last    uint64            // the last watch's number
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

// polled is one connection's watch.
type polled struct {
	rc     syscall.RawConn
	cancel context.CancelFunc
}

// pollWatch is the poller's part of a connection's watch.
type pollWatch struct {
	rc   syscall.RawConn // the connection's; nil until its first watch
	noFD bool            // the connection has no descriptor to poll
	id   uint64          // the current watch's number, which its events carry

	// ctlFn is ctl bound once, for rc.Control to add or remove the
	// watch without allocating; epfd, op and ev are its input, err its
	// result.
	ctlFn func(fd uintptr)
	epfd  int
	op    int
	ev    syscall.EpollEvent
	err   error
}

const pollEvents = syscall.EPOLLIN | syscall.EPOLLRDHUP | syscall.EPOLLONESHOT

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
// watches with a goroutine.
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
		w.ctlFn = w.ctl
	}
	p.mu.Lock()
	if p.retired {
		p.mu.Unlock()
		return false
	}
	p.last++
	w.id = p.last
	p.conns[w.id] = polled{rc: w.rc, cancel: cancel}
	p.mu.Unlock()
	w.epfd, w.op, w.ev = p.epfd, syscall.EPOLL_CTL_ADD, epollEvent(w.id)
	if err := w.rc.Control(w.ctlFn); err != nil || w.err != nil {
		p.forget(w.id)
		return false
	}
	return true
}

// remove ends c's watch. A connection already closed has left the epoll
// instance with its descriptor, and is not looked for there.
func (p *poller) remove(c *conn) {
	w := &c.watch.p
	if p.forget(w.id) {
		w.op = syscall.EPOLL_CTL_DEL
		w.rc.Control(w.ctlFn)
	}
}

// forget drops watch id and reports whether it was there.
func (p *poller) forget(id uint64) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.conns[id]; !ok {
		return false
	}
	delete(p.conns, id)
	return true
}

// ctl adds the watch to, or removes it from, the epoll instance; it runs
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
			if e, ok := p.conns[eventID(ev)]; ok {
				p.happened(e, ev)
			}
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
// at what it has to read.
func (p *poller) happened(e polled, ev syscall.EpollEvent) {
	p.ev, p.n, p.err = ev, 0, nil
	if e.rc.Control(p.peekFn) != nil {
		e.cancel() // closed by the server
		return
	}
	switch {
	case p.n > 0:
		// The next request has begun: it is read when this one is done,
		// and the watch stays off until then.
	case p.err == syscall.EAGAIN || p.err == syscall.EINTR:
		// Nothing after all: watched on.
	default:
		e.cancel() // closed, or reset
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

// epollEvent is the event to watch for, carrying watch id.
func epollEvent(id uint64) syscall.EpollEvent {
	return syscall.EpollEvent{Events: pollEvents, Fd: int32(uint32(id)), Pad: int32(uint32(id >> 32))}
}

// eventID is the number of the watch ev is for.
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
