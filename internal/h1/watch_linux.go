package h1

// The poller watches every connection whose handler works, for the whole
// process: one epoll instance, and one goroutine waiting on it. It hears
// of a connection only when something happens there: the client closed
// it, reset it, or sent its next request early. A stream that waits on its
// upstream then costs nothing to watch.

import (
	"context"
	"sync"
	"syscall"
)

var poll poller

type poller struct {
	once sync.Once
	epfd int // -1 when epoll could not be had: connections watch with goroutines

	mu    sync.Mutex
	conns map[int32]polled // key: file descriptor
	gen   int32            // the last watch's number, so that a late event for an earlier one is known
	peek  [1]byte          // the run goroutine's
}

// polled is one connection's watch.
type polled struct {
	c      *conn
	cancel context.CancelFunc
	gen    int32
}

const pollEvents = syscall.EPOLLIN | syscall.EPOLLRDHUP | syscall.EPOLLONESHOT

func (p *poller) init() {
	fd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		p.epfd = -1
		return
	}
	p.epfd, p.conns = fd, make(map[int32]polled)
	go p.run()
}

// add watches c until remove, and reports false when it cannot: c then
// watches with a goroutine.
func (p *poller) add(c *conn, cancel context.CancelFunc) bool {
	p.once.Do(p.init)
	w := &c.watch
	if p.epfd < 0 || w.fd < 0 {
		return false
	}
	if w.fd == 0 {
		w.fd = fdOf(c.rwc)
		if w.fd < 0 {
			return false
		}
	}
	p.mu.Lock()
	p.gen++
	w.gen = p.gen
	p.conns[w.fd] = polled{c: c, cancel: cancel, gen: w.gen}
	p.mu.Unlock()
	ev := syscall.EpollEvent{Events: pollEvents, Fd: w.fd, Pad: w.gen}
	if err := syscall.EpollCtl(p.epfd, syscall.EPOLL_CTL_ADD, int(w.fd), &ev); err != nil {
		p.forget(c)
		return false
	}
	return true
}

// remove ends c's watch.
func (p *poller) remove(c *conn) {
	if p.forget(c) {
		syscall.EpollCtl(p.epfd, syscall.EPOLL_CTL_DEL, int(c.watch.fd), nil)
	}
}

// forget drops c's watch and reports whether it was there.
func (p *poller) forget(c *conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	e, ok := p.conns[c.watch.fd]
	if !ok || e.c != c || e.gen != c.watch.gen {
		return false
	}
	delete(p.conns, c.watch.fd)
	return true
}

func (p *poller) run() {
	var events [64]syscall.EpollEvent
	for {
		n, err := syscall.EpollWait(p.epfd, events[:], -1)
		if err != nil {
			continue // EINTR
		}
		p.mu.Lock()
		for _, ev := range events[:n] {
			if e, ok := p.conns[ev.Fd]; ok && e.gen == ev.Pad {
				p.happened(e, ev)
			}
		}
		p.mu.Unlock()
	}
}

// happened learns what an event on a watched connection was, by a look
// at what it has to read.
func (p *poller) happened(e polled, ev syscall.EpollEvent) {
	n, _, err := syscall.Recvfrom(int(ev.Fd), p.peek[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	switch {
	case n > 0:
		// The next request has begun: it is read when this one is done,
		// and the watch stays off until then.
	case err == syscall.EAGAIN || err == syscall.EINTR:
		// Nothing after all: watch on.
		ev.Events = pollEvents
		syscall.EpollCtl(p.epfd, syscall.EPOLL_CTL_MOD, int(ev.Fd), &ev)
	default:
		e.cancel() // closed, or reset
	}
}

// fdOf is conn's file descriptor, or -1 when it has none.
func fdOf(conn any) int32 {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return -1
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return -1
	}
	fd := int32(-1)
	rc.Control(func(f uintptr) { fd = int32(f) })
	return fd
}
