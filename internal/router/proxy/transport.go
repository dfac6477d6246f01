package proxy

// An HTTP/1.1 client for plain-HTTP upstreams, the self-hosted inference
// servers a gateway sits next to. It writes the request and reads the answer
// on the calling goroutine: no goroutines per connection, and only two small
// buffers, where net/http's transport keeps a reader and a writer goroutine
// for every open connection — which, on a gateway holding thousands of
// streams, is most of its memory and a good share of its CPU. HTTPS and
// proxied endpoints go through net/http's transport, which does those well.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
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
	// staleCheckAfter is how long a connection may sit idle before it is
	// checked for a close by the server before reuse. Inference servers
	// keep idle connections for 5 s (uvicorn) or longer.
	staleCheckAfter = time.Second
)

// h1Transport is the http.RoundTripper for http:// upstreams.
type h1Transport struct {
	dialer      *net.Dialer
	idleTimeout time.Duration     // an idle connection older than this is closed, not reused
	fallback    http.RoundTripper // https, and proxied requests
	proxyEnv    bool              // whether HTTP_PROXY is set, so some http:// calls may go through a proxy

	mu   sync.Mutex
	idle map[string][]*h1Conn // key: host:port; most recently used last
}

func newH1Transport(dialer *net.Dialer, idleTimeout time.Duration, fallback http.RoundTripper) *h1Transport {
	return &h1Transport{
		dialer: dialer, idleTimeout: idleTimeout, fallback: fallback,
		proxyEnv: os.Getenv("HTTP_PROXY") != "" || os.Getenv("http_proxy") != "",
		idle:     make(map[string][]*h1Conn),
	}
}

// h1Conn is one upstream connection.
type h1Conn struct {
	net.Conn
	host  string
	in    inbuf     // read and not yet consumed; no buffer while empty
	since time.Time // when it went idle
}

// writers and heads are the buffers requests are written through and
// answers' heads read through. A connection needs them only for that,
// not for the seconds its stream lasts, so they are shared.
var (
	writers = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, connBufSize) }}
	heads   = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, connBufSize) }}
)

// errStale is a reused connection that the server had closed.
var errStale = errors.New("connection closed by the server while idle")

// aLongTimeAgo is a deadline that has passed: setting it interrupts a
// blocked read or write at once.
var aLongTimeAgo = time.Unix(1, 0)

func (t *h1Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme != "http" || t.proxyEnv && usesProxy(req) {
		return t.fallback.RoundTrip(req)
	}
	ctx := req.Context()
	host := req.URL.Host
	if req.URL.Port() == "" {
		host = net.JoinHostPort(req.URL.Hostname(), "80")
	}
	for attempt := 0; ; attempt++ {
		c, reused, err := t.conn(ctx, host)
		if err != nil {
			closeBody(req)
			return nil, err
		}
		resp, err := t.send(ctx, c, reused, req)
		if err == nil {
			return resp, nil
		}
		// A reused connection the server closed between requests fails
		// before any answer: the request never reached it, so it goes
		// again on a fresh connection, once.
		if reused && attempt == 0 && ctx.Err() == nil && errors.Is(err, errStale) && req.GetBody != nil {
			if req.Body, err = req.GetBody(); err == nil {
				continue
			}
		}
		closeBody(req)
		return nil, err
	}
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

// conn is an idle connection to host that still looks alive, or a new one.
func (t *h1Transport) conn(ctx context.Context, host string) (c *h1Conn, reused bool, err error) {
	now := time.Now()
	for {
		t.mu.Lock()
		list := t.idle[host]
		if len(list) == 0 {
			t.mu.Unlock()
			break
		}
		c = list[len(list)-1]
		list[len(list)-1] = nil
		t.idle[host] = list[:len(list)-1]
		t.mu.Unlock()
		idle := now.Sub(c.since)
		if idle < t.idleTimeout && (idle < staleCheckAfter || c.alive()) {
			return c, true, nil
		}
		c.Close()
	}
	nc, err := t.dialer.DialContext(ctx, "tcp", host)
	if err != nil {
		return nil, false, err
	}
	c = &h1Conn{Conn: nc, host: host}
	c.in.init(nc)
	return c, false, nil
}

// alive reports whether an idle connection is still open: a read that
// would wait says it is, where one that finds the end, an error, or bytes
// no request asked for says it is not.
func (c *h1Conn) alive() bool {
	if c.in.raw == nil {
		return true // the first read will tell, and the call go again
	}
	var peek [1]byte
	var err error
	if rerr := c.in.raw.Read(func(fd uintptr) bool {
		_, _, err = syscall.Recvfrom(int(fd), peek[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		return true
	}); rerr != nil {
		return false
	}
	return err == syscall.EAGAIN
}

// put keeps c for reuse, or closes it when the pool is full.
func (t *h1Transport) put(c *h1Conn) {
	c.since = time.Now()
	t.mu.Lock()
	if list := t.idle[c.host]; len(list) < maxIdlePerHost {
		t.idle[c.host] = append(list, c)
		t.mu.Unlock()
		return
	}
	t.mu.Unlock()
	c.Close()
}

// CloseIdleConnections closes every idle connection.
func (t *h1Transport) CloseIdleConnections() {
	t.mu.Lock()
	idle := t.idle
	t.idle = make(map[string][]*h1Conn)
	t.mu.Unlock()
	for _, list := range idle {
		for _, c := range list {
			c.Close()
		}
	}
	if f, ok := t.fallback.(interface{ CloseIdleConnections() }); ok {
		f.CloseIdleConnections()
	}
}

// send writes req on c and reads the answer's head. The answer's body reads
// from c, which goes back to the pool when the body has been read to its
// end.
func (t *h1Transport) send(ctx context.Context, c *h1Conn, reused bool, req *http.Request) (*http.Response, error) {
	// A context that ends interrupts whatever c is blocked in.
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(aLongTimeAgo) })
	fail := func(err error) (*http.Response, error) {
		stop()
		c.Close()
		if cerr := context.Cause(ctx); cerr != nil {
			return nil, cerr
		}
		return nil, err
	}
	bw := writers.Get().(*bufio.Writer)
	bw.Reset(c)
	err := writeRequest(bw, req)
	bw.Reset(nil)
	writers.Put(bw)
	if err != nil {
		return fail(err)
	}
	// Waiting for the answer holds no buffer.
	if err := c.in.fill(); err != nil {
		if reused && (errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)) {
			// Nothing came back on a reused connection: the server had
			// closed it.
			err = fmt.Errorf("%w: %w", errStale, err)
		}
		return fail(err)
	}
	br := heads.Get().(*bufio.Reader)
	br.Reset(&c.in)
	resp, err := http.ReadResponse(br, req)
	if err == nil {
		past, _ := br.Peek(br.Buffered())
		c.in.unread(past)
	}
	br.Reset(nil)
	heads.Put(br)
	if err != nil {
		return fail(err)
	}
	b := &h1Body{body: body{in: &c.in, framing: framing(resp)}, c: c, t: t, stop: stop, reuse: !resp.Close}
	if b.framing == byLength {
		b.remain = resp.ContentLength
	}
	resp.Body = b
	return resp, nil
}

// framing is how the end of resp's body is known.
func framing(resp *http.Response) int {
	switch {
	case len(resp.TransferEncoding) > 0 && resp.TransferEncoding[0] == "chunked":
		return byChunks
	case resp.ContentLength >= 0:
		return byLength
	}
	return byClose
}

// writeRequest writes req as HTTP/1.1 with a known length, as llmgw's calls
// always have, and flushes.
func writeRequest(w *bufio.Writer, req *http.Request) error {
	if req.ContentLength < 0 || req.Body != nil && req.ContentLength == 0 && req.Body != http.NoBody {
		return errors.New("proxy: a request body of unknown length")
	}
	w.WriteString(req.Method)
	w.WriteByte(' ')
	w.WriteString(req.URL.RequestURI())
	w.WriteString(" HTTP/1.1\r\nHost: ")
	w.WriteString(req.URL.Host)
	w.WriteString("\r\nContent-Length: ")
	w.WriteString(strconv.FormatInt(req.ContentLength, 10))
	w.WriteString("\r\n")
	for k, vs := range req.Header {
		for _, v := range vs {
			w.WriteString(k)
			w.WriteString(": ")
			w.WriteString(v)
			w.WriteString("\r\n")
		}
	}
	w.WriteString("\r\n")
	if req.Body != nil {
		n, err := io.Copy(w, req.Body)
		req.Body.Close()
		if err != nil {
			return err
		}
		if n != req.ContentLength {
			return fmt.Errorf("proxy: request body was %d bytes, not the %d announced", n, req.ContentLength)
		}
	}
	return w.Flush()
}

// h1Body is an answer's body. Read to its end, it returns its connection
// to the pool; closed early, it closes the connection, whose rest of the
// answer is unread.
type h1Body struct {
	body
	c     *h1Conn
	t     *h1Transport
	stop  func() bool
	reuse bool

	mu       sync.Mutex // protects finished: Close may come from another goroutine
	finished bool
}

func (b *h1Body) next(max int, wait bool) ([]byte, error) {
	piece, err := b.body.next(max, wait)
	if err == io.EOF {
		b.finish(b.reuse)
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
		b.finish(b.reuse)
		err = io.EOF
	}
	return n, err
}

func (b *h1Body) Close() error {
	b.finish(false)
	return nil
}

// finish releases the connection once: back to the pool when reuse holds
// and the context did not end mid-answer, closed otherwise.
func (b *h1Body) finish(reuse bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.finished {
		return
	}
	b.finished = true
	if b.stop() && reuse && len(b.c.in.buffered()) == 0 {
		b.c.in.release()
		b.t.put(b.c)
		return
	}
	b.c.Close()
}
