package proxy

// The differential test of llmgw's HTTP/1.1 client: the same upstream
// bytes, read by it and by net/http's transport as StdTransport sets it
// up, must come to the same answer — or llmgw must refuse them — and
// llmgw may reuse a connection only where net/http does.
//
// llmgw refuses a few answers net/http takes (stricterThanNetHTTP):
//   - a 101 Switching Protocols: llmgw asks for no upgrade, and what
//     follows is no HTTP answer (net/http returns it, body and all);
//   - more than max1xx (5) informational heads before the answer: net/http
//     bounds only their bytes;
//   - a trailer with a name that has a space in it, a field folded over
//     two lines, or a line ended by a bare LF: net/http reads trailers
//     with net/textproto, which allows those.
//
// The bounds both clients have are set alike and must agree to the byte:
// 64 KiB of heads, 2 KiB chunk size lines and trailers, 16 KiB of chunk
// framing beyond the data.

import (
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const (
	// secondAnswer is what the upstream answers every call after the first.
	secondAnswer = "HTTP/1.1 200 OK\r\nContent-Length: 13\r\n\r\nsecond answer"
	// fuzzGrace is how long a call may go on once all of its answer is
	// sent, before the upstream closes the connection to end it: a call
	// still waiting then waits for bytes that will not come (a body to the
	// close, or longer than what was sent).
	fuzzGrace = 10 * time.Millisecond
	// fuzzCallTime bounds each call.
	fuzzCallTime = time.Second
	// fuzzMaxAnswer bounds an input: past the head bound, with room.
	fuzzMaxAnswer = maxResponseHead + 32<<10
)

// A fuzz input's flags.
const (
	closeAfterAnswer = 1 << iota // the upstream closes the connection once it has sent the first answer
)

// stricterThanNetHTTP reports whether err is one of the cases llmgw
// refuses where net/http does not.
func stricterThanNetHTTP(err error) bool {
	return errors.Is(err, errSwitchingProtocols) || errors.Is(err, errTooMany1xx) || errors.Is(err, errTrailer)
}

// scriptRun is what one client made of a script.
type scriptRun struct {
	status int // of the first call
	body   string
	err    error
	// ended reports whether the upstream closed the first call's
	// connection for the call to end (fuzzGrace).
	ended bool
	// reused reports whether the second call came on the first's
	// connection.
	reused       bool
	secondStatus int
	second       string
	secondErr    error
}

// runScript has rt make two calls to an upstream that answers the first
// with answer, written in two parts split at split, and every later call
// with secondAnswer.
func runScript(t *testing.T, rt http.RoundTripper, answer []byte, split int, flags byte) scriptRun {
	var run scriptRun
	var first net.Conn // the first call's connection, once written is closed
	written := make(chan struct{})
	var reused atomic.Bool
	s := newScriptedOn(t, fuzzListener(t), func(c net.Conn, conn, req int) bool {
		if conn == 0 && req == 0 {
			defer close(written)
			first = c
			c.Write(answer[:split])
			if 0 < split && split < len(answer) {
				time.Sleep(100 * time.Microsecond)
			}
			c.Write(answer[split:])
			if flags&closeAfterAnswer != 0 {
				c.Close()
				return false
			}
			return true
		}
		if conn == 0 {
			reused.Store(true)
		}
		io.WriteString(c, secondAnswer)
		return true
	})
	type result struct {
		status int
		body   string
		err    error
	}
	done := make(chan result, 1)
	go func() {
		status, body, err := call(rt, s.URL, fuzzCallTime)
		done <- result{status, body, err}
	}()
	var r result
	select {
	case r = <-done:
	case <-written:
		select {
		case r = <-done:
		case <-time.After(fuzzGrace):
			run.ended = true
			first.Close()
			r = <-done
		}
	}
	select {
	case <-written:
	case <-time.After(fuzzCallTime):
		t.Fatal("the upstream is stuck writing the first answer")
	}
	run.status, run.body, run.err = r.status, r.body, r.err
	// Everything sent is in the client's socket: on loopback most often
	// when the write returns, and surely after this.
	time.Sleep(200 * time.Microsecond)
	// llmgw's second call goes as the proxy's calls go, its body beside
	// it, looking at the connection as it sends.
	if tr, ok := rt.(*h1Transport); ok {
		run.secondStatus, run.second, run.secondErr = callWithBodyIn(tr, s.URL, "{}", fuzzCallTime)
	} else {
		run.secondStatus, run.second, run.secondErr = call(rt, s.URL, fuzzCallTime)
	}
	run.reused = reused.Load()
	return run
}

// fuzzListen is the one real listener of a fuzzing process. A listener for
// each input would use up the machine's ports within minutes, each held
// for a minute after by its connections in TIME_WAIT.
var fuzzListen struct {
	once   sync.Once
	ln     net.Listener
	err    error
	active atomic.Pointer[runListener] // the script being run, nil between runs
}

// runListener is one script's view of the shared listener: it accepts the
// connections made while the script runs, and its Close leaves the real
// listener open.
type runListener struct {
	net.Listener // the shared one, for Addr
	conns        chan net.Conn
	done         chan struct{}
	closeOnce    sync.Once
}

func (l *runListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *runListener) Close() error {
	l.closeOnce.Do(func() {
		fuzzListen.active.CompareAndSwap(l, nil)
		close(l.done)
	})
	return nil
}

// fuzzListener is a listener for one script, on the process's shared one.
func fuzzListener(t *testing.T) net.Listener {
	fuzzListen.once.Do(func() {
		fuzzListen.ln, fuzzListen.err = net.Listen("tcp", "127.0.0.1:0")
		if fuzzListen.err != nil {
			return
		}
		go func() {
			for {
				c, err := fuzzListen.ln.Accept()
				if err != nil {
					return
				}
				l := fuzzListen.active.Load()
				if l == nil {
					c.Close()
					continue
				}
				select {
				case l.conns <- c:
				case <-l.done:
					c.Close()
				}
			}
		}()
	})
	if fuzzListen.err != nil {
		t.Fatal(fuzzListen.err)
	}
	l := &runListener{Listener: fuzzListen.ln, conns: make(chan net.Conn), done: make(chan struct{})}
	fuzzListen.active.Store(l)
	return l
}

func FuzzTransportMatchesNetHTTP(f *testing.F) {
	for _, seed := range fuzzSeeds() {
		f.Add([]byte(seed.answer), seed.split, seed.flags)
	}
	// net/http logs the bytes an upstream sends an idle connection.
	prev := log.Writer()
	log.SetOutput(io.Discard)
	f.Cleanup(func() { log.SetOutput(prev) })
	f.Fuzz(func(t *testing.T, answer []byte, split uint16, flags byte) {
		if len(answer) > fuzzMaxAnswer {
			t.Skip()
		}
		at := int(split) % (len(answer) + 1)
		own := newH1Transport(&net.Dialer{Timeout: time.Second}, time.Minute, http.DefaultTransport)
		own.proxyEnv = false
		defer own.CloseIdleConnections()
		std := StdTransport(time.Second)
		defer std.CloseIdleConnections()
		got := runScript(t, own, answer, at, flags)
		want := runScript(t, std, answer, at, flags)

		switch {
		case got.err == nil && want.err != nil:
			t.Errorf("llmgw answered %d %q where net/http failed: %v", got.status, got.body, want.err)
		case got.err == nil && (got.status != want.status || got.body != want.body):
			t.Errorf("llmgw answered %d %q, net/http %d %q", got.status, got.body, want.status, want.body)
		case got.err != nil && want.err == nil && !stricterThanNetHTTP(got.err):
			t.Errorf("llmgw failed (%v) where net/http answered %d %q", got.err, want.status, want.body)
		}
		// A connection net/http let go of only because the upstream
		// closed it, late, to end a call, says nothing of llmgw's.
		if got.reused && !want.reused && !(want.ended && !got.ended) {
			t.Errorf("llmgw reused the connection, net/http did not")
		}
		if got.secondStatus != 200 || got.second != "second answer" || got.secondErr != nil {
			t.Errorf("llmgw's second call got %d %q %v, want 200 \"second answer\"", got.secondStatus, got.second, got.secondErr)
		}
		if t.Failed() {
			t.Logf("answer %q split at %d, flags %#x", answer, at, flags)
			t.Logf("llmgw:    %+v", got)
			t.Logf("net/http: %+v", want)
		}
	})
}

type fuzzSeed struct {
	answer string
	split  uint16
	flags  byte
}

// fuzzSeeds are the inputs every run starts from, beside those in
// testdata/fuzz: each kind of framing, and each way of getting it wrong.
func fuzzSeeds() []fuzzSeed {
	chunked := "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
	pad := "X-Padding: " + strings.Repeat("p", 1000) + "\r\n"
	// A head of exactly n bytes, with the answer it heads.
	headOf := func(n int) string {
		h := "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n"
		for len(h)+len(pad)+2 <= n {
			h += pad
		}
		if rest := n - len(h) - 2; rest > 0 {
			h += "X: " + strings.Repeat("q", rest-5) + "\r\n"
		}
		return h + "\r\nok"
	}
	return []fuzzSeed{
		{"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", 20, 0},
		{"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", 0, 0},
		{chunked + "5;a=b\r\nhello\r\n6;x;y=\"z\"\r\n world\r\n0\r\nX-Trailer: 1\r\nX-Other: a b\r\n\r\n", 50, 0},
		{"HTTP/1.1 200 OK\r\n\r\nto the close", 10, closeAfterAnswer},
		{"HTTP/1.1 200 OK\r\n\r\nto the close, late", 10, 0},
		{"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nok", 0, 0},
		{"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok", 0, 0},
		{"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", 25, 0},
		{strings.Repeat("HTTP/1.1 103 Early Hints\r\n\r\n", 6) + "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", 0, 0},
		{"HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\nConnection: Upgrade\r\n\r\nraw", 0, 0},
		{"HTTP/1.1 204 No Content\r\nTransfer-Encoding: chunked\r\n\r\n", 0, 0},
		{"HTTP/1.1 304 Not Modified\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 0, 0},
		{"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhelloHTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nWRONG", 43, 0},
		{"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhelloHTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nWRONG", 0, 0},
		{chunked + "5\r\nhello\r\n0\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nWRONG", 60, 0},
		{chunked + "5\nhello\n0\n\n", 0, 0},
		{chunked + "5\r\nhello\r\n0\r\nX: 1\n\r\n\r\n", 0, 0},
		{chunked + "+5\r\nhello\r\n0\r\n\r\n", 0, 0},
		{chunked + "-0\r\n\r\n", 0, 0},
		{chunked + "5 ;x\r\nhello\r\n0\r\n\r\n", 0, 0},
		{headOf(maxResponseHead), 0, 0},
		{headOf(maxResponseHead + 1), 0, 0},
		{"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\ncut short", 30, closeAfterAnswer},
		{"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\ncut short, late", 30, 0},
		{"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!", 0, 0},
		{"HTTP/1.1 200 OK\r\nContent-Length: 100\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", 0, 0},
	}
}
