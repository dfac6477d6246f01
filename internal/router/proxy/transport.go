package proxy

// An HTTP/1.1 client for plain-HTTP upstreams, the self-hosted inference
// servers a gateway sits next to. It writes the request and reads the answer
// on the calling goroutine: no goroutines per connection, and only two small
// buffers, where net/http's transport keeps a reader and a writer goroutine
// for every open connection — which, on a gateway holding thousands of
// streams, is most of its memory and a good share of its CPU. HTTPS and
// proxied endpoints go through net/http's transport, which does those well.
//
// An upstream may be broken or hostile, and an answer must never reach a
// request it does not answer. So a connection is reused only after an
// answer read exactly to its end with nothing after it, and only once a
// look at it when it leaves the pool finds nothing unasked-for and no close.
// The framing is read as strictly as net/http reads it, a little more
// strictly in places (body.go and the differential test list where).

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"sync"
	"syscall"
	"time"
)

const (
	// connBufSize is the size of the buffers requests are written through
	// and answers' heads read through: a request's headers and a small
	// body, an answer's headers and its first events.
	connBufSize = 2 << 10
	// maxIdlePerHost bounds the idle connections kept for one endpoint;
	// as many as the streams a gateway holds to it.
	maxIdlePerHost = 4096
	// maxResponseHead bounds an answer's head, with the informational (1xx)
	// heads before it. An inference server's is under 1 KiB; one that runs
	// on past this is broken or hostile, and the call fails rather than
	// fill memory. net/http's transport is given the same bound
	// (StdTransport).
	maxResponseHead = 64 << 10
	// max1xx bounds the informational heads before an answer's own: an
	// inference server sends none, a server with Early Hints one or two.
	max1xx = 5
)

// h1Transport is the http.RoundTripper for http:// upstreams.
type h1Transport struct {
	dialer *net.Dialer
	// idleTimeout is how long a connection may stay idle: older, it is
	// closed, not reused. Zero means no bound.
	idleTimeout time.Duration
	fallback    http.RoundTripper // https, and proxied requests
	proxyEnv    bool              // whether HTTP_PROXY is set, so some http:// calls may go through a proxy

	mu    sync.Mutex           // protects the fields below
	idle  map[string][]*h1Conn // key: host:port; oldest first
	nidle int                  // connections in idle
	// epochs is each endpoint's epoch, bumped when CloseIdleTo gives up
	// its connections: one of an earlier epoch is closed when its answer
	// ends. Key: host:port; absent is epoch 0.
	epochs    map[string]uint64
	lastEpoch uint64
	reaper    *time.Timer // closes connections idle too long; nil before the first goes idle
	reaping   bool        // reaper is armed
}

func newH1Transport(dialer *net.Dialer, idleTimeout time.Duration, fallback http.RoundTripper) *h1Transport {
	return &h1Transport{
		dialer: dialer, idleTimeout: idleTimeout, fallback: fallback,
		proxyEnv: os.Getenv("HTTP_PROXY") != "" || os.Getenv("http_proxy") != "",
		idle:     make(map[string][]*h1Conn),
		epochs:   make(map[string]uint64),
	}
}

// h1Conn is one upstream connection.
type h1Conn struct {
	net.Conn
	host  string
	epoch uint64     // the endpoint's epoch when it was dialled
	in    inbuf      // read and not yet consumed; no buffer while empty
	out   heldWriter // what a request is written through
	head  headLimit  // what an answer's head is read through
	since time.Time  // when it went idle
	// interrupt ends whatever c is blocked in, at once: made with c's
	// first call, for each of its calls' contexts to run when it ends.
	interrupt func()
}

// headLimit reads an answer's head from its connection, up to a bound
// shared by the answer's head and the informational heads before it.
type headLimit struct {
	in   *inbuf
	left int
}

// errHeadTooLarge is an answer whose head runs past maxResponseHead.
var errHeadTooLarge = fmt.Errorf("proxy: upstream answer's head is longer than %d bytes", maxResponseHead)

func (h *headLimit) Read(p []byte) (int, error) {
	if h.left <= 0 {
		return 0, errHeadTooLarge
	}
	n, err := h.in.Read(p[:min(len(p), h.left)])
	h.left -= n
	return n, err
}

// writers and heads are the buffers requests are written through and
// answers' heads read through. A connection needs them only for that,
// not for the seconds its stream lasts, so they are shared.
var (
	writers = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, connBufSize) }}
	heads   = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, connBufSize) }}
)

var (
	// errStale is a reused connection that the server had closed.
	errStale = errors.New("connection closed by the server while idle")
	// errSwitchingProtocols is a 101 answer: llmgw asks for no upgrade,
	// and what follows it is no HTTP answer.
	errSwitchingProtocols = errors.New("proxy: upstream switched protocols unasked")
	// errTooMany1xx is an upstream that sends more than max1xx
	// informational heads before its answer.
	errTooMany1xx = fmt.Errorf("proxy: upstream sent more than %d informational answers", max1xx)
)

// aLongTimeAgo is a deadline that has passed: setting it interrupts a
// blocked read or write at once.
var aLongTimeAgo = time.Unix(1, 0)

func (t *h1Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !t.handles(req) {
		return t.fallback.RoundTrip(req)
	}
	return t.roundTrip(req.Context(), nil, req, nil)
}

// handles reports whether req is for this client rather than its
// fallback: plain HTTP, not through a proxy.
func (t *h1Transport) handles(req *http.Request) bool {
	return req.URL.Scheme == "http" && !(t.proxyEnv && usesProxy(req))
}

// roundTrip sends req, a call that ends when parent does or when end, if
// not nil, is ended (as a call's watchdog ends it): each interrupts what
// the connection is blocked in. A call that went on a reused connection
// the server had closed goes again on a fresh one, its body body when not
// nil, else what req.GetBody gives. With body, an idle connection is
// looked at as the request is sent (sendRequest), and one found closed
// or not quiet gives way to the next, the request unwritten.
func (t *h1Transport) roundTrip(parent context.Context, end *ender, req *http.Request, body []byte) (*http.Response, error) {
	host := hostPort(req.URL.Host)
	fresh := false
	for {
		c, reused, err := t.conn(parent, end, host, fresh, body != nil)
		if err != nil {
			closeBody(req)
			return nil, err
		}
		resp, err := t.send(parent, end, c, reused, req)
		if err == nil {
			return resp, nil
		}
		if errors.Is(err, errNotAlive) && end.why(parent) == nil {
			req.Body = newRequestBody(body)
			continue
		}
		// A reused connection the server closed between requests fails
		// before any answer: the request never reached it, so it goes
		// again on a fresh connection, once.
		if reused && end.why(parent) == nil && errors.Is(err, errStale) {
			switch {
			case body != nil:
				req.Body, fresh = newRequestBody(body), true
				continue
			case req.GetBody != nil:
				if req.Body, err = req.GetBody(); err == nil {
					fresh = true
					continue
				}
			}
		}
		closeBody(req)
		return nil, err
	}
}

// hostPort is host with the http port when it has none: the key
// connections are kept by.
func hostPort(host string) string {
	u := url.URL{Host: host}
	if u.Port() != "" {
		return host
	}
	return net.JoinHostPort(u.Hostname(), "80")
}

func usesProxy(req *http.Request) bool {
	u, err := http.ProxyFromEnvironment(req)
	return err != nil || u != nil
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}

// conn is an idle connection to host that still looks alive, or a new
// one, dialled under parent and end; always a new one when fresh. With
// later, an idle one is handed out unlooked at, for the request's sending
// to look at (sendRequest).
func (t *h1Transport) conn(parent context.Context, end *ender, host string, fresh, later bool) (c *h1Conn, reused bool, err error) {
	now := time.Now()
	t.mu.Lock()
	for !fresh {
		list := t.idle[host]
		if len(list) == 0 {
			break
		}
		c = list[len(list)-1]
		list[len(list)-1] = nil
		t.idle[host] = list[:len(list)-1]
		t.nidle--
		t.mu.Unlock()
		if (t.idleTimeout <= 0 || now.Sub(c.since) < t.idleTimeout) && (later || c.alive()) {
			c.out.look = later
			return c, true, nil
		}
		c.Close()
		t.mu.Lock()
	}
	epoch := t.epochs[host]
	t.mu.Unlock()
	ctx, cancel := end.bind(parent)
	nc, err := t.dialer.DialContext(ctx, "tcp", host)
	cancel(nil)
	if err != nil {
		return nil, false, err
	}
	c = &h1Conn{Conn: nc, host: host, epoch: epoch}
	c.in.init(nc)
	c.out.conn, c.out.in = nc, &c.in
	return c, false, nil
}

// alive reports whether an idle connection is still open with nothing
// unasked-for to read. It is asked each time a connection leaves the
// pool, at the cost of one system call (BenchmarkConnAlive).
func (c *h1Conn) alive() bool { return c.in.quiet() }

// put keeps c for reuse, or closes it: when the pool is full, or when
// CloseIdleTo gave up its endpoint's connections since it was dialled.
// Connections to the endpoint idle too long are closed on the way.
func (t *h1Transport) put(c *h1Conn) {
	now := time.Now()
	c.since = now
	t.mu.Lock()
	list, old := t.expire(t.idle[c.host], now)
	keep := c.epoch == t.epochs[c.host] && len(list) < maxIdlePerHost
	if keep {
		list = append(list, c)
		t.nidle++
		t.armLocked(t.idleTimeout)
	}
	t.idle[c.host] = list
	t.mu.Unlock()
	closeAll(old)
	if !keep {
		c.Close()
	}
}

// expire takes the connections idle too long at now off the front of an
// endpoint's list, and returns what is left and them. t.mu is held.
func (t *h1Transport) expire(list []*h1Conn, now time.Time) (kept, old []*h1Conn) {
	if t.idleTimeout <= 0 {
		return list, nil
	}
	i := 0
	for i < len(list) && now.Sub(list[i].since) >= t.idleTimeout {
		i++
	}
	if i == 0 {
		return list, nil
	}
	old = append([]*h1Conn(nil), list[:i]...)
	n := copy(list, list[i:])
	clear(list[n:])
	t.nidle -= i
	return list[:n], old
}

// armLocked sets the reaper to go off in d, unless it is set already.
// t.mu is held.
func (t *h1Transport) armLocked(d time.Duration) {
	if t.reaping || t.idleTimeout <= 0 {
		return
	}
	t.reaping = true
	if t.reaper == nil {
		t.reaper = time.AfterFunc(d, t.reap)
	} else {
		t.reaper.Reset(d)
	}
}

// reap closes the connections idle too long, and sets itself to go off
// again when the oldest left will be, if any is.
func (t *h1Transport) reap() {
	now := time.Now()
	var old []*h1Conn
	t.mu.Lock()
	t.reaping = false
	var oldest time.Time
	for host, list := range t.idle {
		list, gone := t.expire(list, now)
		old = append(old, gone...)
		if len(list) == 0 {
			delete(t.idle, host)
			continue
		}
		t.idle[host] = list
		if oldest.IsZero() || list[0].since.Before(oldest) {
			oldest = list[0].since
		}
	}
	if t.nidle > 0 {
		t.armLocked(oldest.Add(t.idleTimeout).Sub(now))
	}
	t.mu.Unlock()
	closeAll(old)
}

func closeAll(conns []*h1Conn) {
	for _, c := range conns {
		c.Close()
	}
}

// CloseIdleConnections closes every idle connection.
func (t *h1Transport) CloseIdleConnections() {
	t.mu.Lock()
	idle := t.idle
	t.idle = make(map[string][]*h1Conn)
	t.nidle = 0
	if t.reaping {
		t.reaper.Stop()
		t.reaping = false
	}
	t.mu.Unlock()
	for _, list := range idle {
		closeAll(list)
	}
	if f, ok := t.fallback.(interface{ CloseIdleConnections() }); ok {
		f.CloseIdleConnections()
	}
}

// closeIdleTo closes the idle connections to host (host:port, or a host
// alone for port 80), and has those in use close when their answers end
// rather than come back; connections dialled after it are kept as ever.
// The fallback cannot close one endpoint's connections, so all of its
// idle ones are closed.
func (t *h1Transport) closeIdleTo(host string) {
	host = hostPort(host)
	t.mu.Lock()
	t.lastEpoch++
	t.epochs[host] = t.lastEpoch
	list := t.idle[host]
	delete(t.idle, host)
	t.nidle -= len(list)
	t.mu.Unlock()
	closeAll(list)
	if f, ok := t.fallback.(interface{ CloseIdleConnections() }); ok {
		f.CloseIdleConnections()
	}
}

// send writes req on c and reads the answer's head. The answer's body reads
// from c, which goes back to the pool when the body has been read to its
// end.
func (t *h1Transport) send(parent context.Context, end *ender, c *h1Conn, reused bool, req *http.Request) (*http.Response, error) {
	// The call's end interrupts whatever c is blocked in.
	if c.interrupt == nil {
		c.interrupt = func() { c.SetDeadline(aLongTimeAgo) }
	}
	stop := afterFunc(parent, c.interrupt)
	end.hold(c)
	fail := func(err error) (*http.Response, error) {
		stop()
		end.let(c)
		c.Close()
		if cerr := end.why(parent); cerr != nil {
			return nil, cerr
		}
		return nil, err
	}
	if err := c.sendRequest(req); err != nil {
		if reused && closedByPeer(err) {
			// Nothing came back on a reused connection, or it could not
			// be written to: the server had closed it.
			err = fmt.Errorf("%w: %w", errStale, err)
		}
		return fail(err)
	}
	resp, err := c.readHead(req)
	if err != nil {
		return fail(err)
	}
	// A connection is kept unless the upstream says to close it, or the
	// answer's status is one no server sends as a final answer (below
	// 200), after which net/http trusts the connection no more either.
	reuse := !resp.Close && resp.StatusCode >= 200
	if resp.Body == http.NoBody {
		// No body follows the head (a 204 or 304, a length of 0): the
		// connection is done with.
		t.release(c, stop, end, reuse)
		return resp, nil
	}
	b := &h1Body{body: body{in: &c.in, framing: byClose}, c: c, t: t, stop: stop, callEnd: end, reuse: reuse}
	switch {
	case len(resp.TransferEncoding) > 0 && resp.TransferEncoding[0] == "chunked":
		b.framing = byChunks
	case resp.ContentLength >= 0:
		b.framing, b.remain = byLength, resp.ContentLength
	}
	resp.Body = b
	return resp, nil
}

// closedByPeer reports whether err is a connection the other end had
// closed or reset.
func closedByPeer(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// readHead reads an answer's head, skipping the informational (1xx) heads
// before it as net/http does. A 101 is an error. parseHead reads a common
// head in place, http.ReadResponse any other: they decide the framing, and
// by a Body of http.NoBody that none follows (a 204, a 304, an answer to
// HEAD whatever its headers say); the caller sets any other Body.
func (c *h1Conn) readHead(req *http.Request) (resp *http.Response, err error) {
	if resp, n, ok := parseHead(c.in.buffered(), req); ok {
		c.in.consume(n)
		return resp, nil
	}
	c.head = headLimit{in: &c.in, left: maxResponseHead}
	br := heads.Get().(*bufio.Reader)
	br.Reset(&c.head)
	for n := 0; ; n++ {
		resp, err = http.ReadResponse(br, req)
		if err != nil {
			if c.head.left <= 0 {
				err = errHeadTooLarge
			}
			break
		}
		if resp.StatusCode == http.StatusSwitchingProtocols {
			resp, err = nil, errSwitchingProtocols
			break
		}
		if resp.StatusCode < 100 || resp.StatusCode > 199 {
			break
		}
		if n == max1xx {
			resp, err = nil, errTooMany1xx
			break
		}
	}
	if err == nil {
		past, _ := br.Peek(br.Buffered())
		c.in.unread(past)
	}
	br.Reset(nil)
	heads.Put(br)
	return resp, err
}

// release gives c back to the pool once its answer is read: when reuse
// holds, the call did not end mid-answer (stop and end, its two ways to
// end, are both let go of first), and the upstream sent nothing past the
// answer's end. Otherwise c is closed.
func (t *h1Transport) release(c *h1Conn, stop func() bool, end *ender, reuse bool) {
	stopped := stop()
	if end.let(c) && stopped && reuse && len(c.in.buffered()) == 0 {
		c.in.release()
		t.put(c)
		return
	}
	c.Close()
}

// h1Body is an answer's body. Read to its end, it returns its connection
// to the pool; closed early, it closes the connection, whose rest of the
// answer is unread.
type h1Body struct {
	body
	c       *h1Conn
	t       *h1Transport
	stop    func() bool
	callEnd *ender // with stop, how the call's end reaches c
	reuse   bool
	ended   bool // read to its end: the connection, maybe another call's now, is not to be touched

	mu       sync.Mutex // protects finished: Close may come from another goroutine
	finished bool
}

func (b *h1Body) next(max int, wait bool) ([]byte, error) {
	if b.ended {
		return nil, io.EOF
	}
	piece, err := b.body.next(max, wait)
	if err == io.EOF {
		b.end()
	}
	return piece, err
}

func (b *h1Body) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	piece, err := b.next(len(p), true)
	n := copy(p, piece)
	if err == nil && b.body.complete() {
		// The end comes with the last bytes, as net/http's bodies say it,
		// so that a reader that stops at the length still gives the
		// connection back.
		b.end()
		err = io.EOF
	}
	return n, err
}

func (b *h1Body) Close() error {
	b.finish(false)
	return nil
}

// end is the body read to its end, by the goroutine reading it: only it
// may give the connection back, as that gives up the buffer it reads.
func (b *h1Body) end() {
	b.ended = true
	b.finish(b.reuse)
}

// finish releases the connection once.
func (b *h1Body) finish(reuse bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.finished {
		return
	}
	b.finished = true
	b.t.release(b.c, b.stop, b.callEnd, reuse)
}
