package sim

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// The hang and kill faults. The hang tests run a real http.Server over
// in-memory pipes inside a synctest bubble, so a hang of a second costs
// no wall time and "nothing arrived during it" is exact.

// pipeListener is a net.Listener whose connections are net.Pipe ends,
// made by its dial.
type pipeListener struct {
	conns     chan net.Conn
	closeOnce sync.Once
	done      chan struct{}
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }

func (l *pipeListener) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	client, server := net.Pipe()
	select {
	case l.conns <- server:
		return client, nil
	case <-l.done:
		return nil, net.ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// servePipes serves s over pipes until the test ends and returns a client
// for it; URLs may name any host.
func servePipes(t *testing.T, s *Server) *http.Client {
	ln := newPipeListener()
	hs := &http.Server{Handler: s}
	go hs.Serve(ln)
	tr := &http.Transport{DialContext: ln.dial}
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		hs.Close()
		s.Close()
	})
	return &http.Client{Transport: tr}
}

// timedStream reads an SSE stream, noting when each token chunk came.
type timedStream struct {
	mu    sync.Mutex // protects at, done, err
	at    []time.Duration
	done  bool
	err   error
	ended chan struct{}
}

func readTimed(body io.ReadCloser, t0 time.Time) *timedStream {
	ts := &timedStream{ended: make(chan struct{})}
	go func() {
		defer close(ts.ended)
		defer body.Close()
		sc := bufio.NewScanner(body)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			ts.mu.Lock()
			if data == "[DONE]" {
				ts.done = true
			} else if c := (chunk{}); json.Unmarshal([]byte(data), &c) == nil {
				if _, tok := c.token(); tok {
					ts.at = append(ts.at, time.Since(t0))
				}
			}
			ts.mu.Unlock()
		}
		ts.mu.Lock()
		ts.err = sc.Err()
		ts.mu.Unlock()
	}()
	return ts
}

func (ts *timedStream) count() int {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return len(ts.at)
}

func TestHang(t *testing.T) {
	for _, tt := range []struct {
		name string
		cfg  Config
	}{
		{"fixed timing", Config{TPOT: 10 * time.Millisecond}},
		{"batch timing", Config{StepBase: 10 * time.Millisecond, StepPerToken: time.Microsecond}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const tokens, hangAt, hangFor = 100, 255 * time.Millisecond, time.Second
				s := New(tt.cfg)
				client := servePipes(t, s)
				t0 := time.Now()
				body, _ := json.Marshal(chatBody("x", map[string]any{"stream": true, "max_tokens": tokens, "ignore_eos": true}))
				resp, err := client.Post("http://sim/v1/chat/completions", "application/json", bytes.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				st := readTimed(resp.Body, t0)

				time.Sleep(hangAt)
				synctest.Wait()
				s.SetFaults(Faults{Hang: true, HangFor: hangFor})
				before := st.count()
				if before == 0 || before >= tokens {
					t.Fatalf("%d tokens before the hang; want some, not all", before)
				}
				health := make(chan time.Duration, 1)
				go func() {
					resp, err := client.Get("http://sim/health")
					if err == nil {
						resp.Body.Close()
					}
					health <- time.Since(t0)
				}()
				resp, err = client.Get("http://sim/sim/faults")
				if err != nil {
					t.Fatal(err)
				}
				if f := decode[Faults](t, resp, 200); !f.Hang {
					t.Errorf("/sim/faults during the hang shows %+v", f)
				}

				time.Sleep(hangFor - time.Millisecond)
				synctest.Wait()
				if n := st.count(); n != before {
					t.Errorf("%d tokens arrived during the hang", n-before)
				}
				select {
				case at := <-health:
					t.Errorf("/health answered during the hang, at %v", at)
				default:
				}

				<-st.ended
				if at := <-health; at < hangAt+hangFor {
					t.Errorf("/health answered at %v, before the hang ended at %v", at, hangAt+hangFor)
				}
				if !st.done || st.err != nil || len(st.at) != tokens {
					t.Fatalf("after the hang: [DONE] %v, error %v, %d tokens; want the whole answer", st.done, st.err, len(st.at))
				}
				gap := st.at[before] - st.at[before-1]
				if gap < hangFor || gap > hangFor+50*time.Millisecond {
					t.Errorf("gap across the hang %v, want about %v", gap, hangFor)
				}
				if got := s.Faults(); got.Hang {
					t.Errorf("faults after hang_for: %+v", got)
				}
			})
		})
	}
}

// TestHangUntilCleared shows a hang without hang_for lasting until the
// faults are set again, and a request arriving during it then served.
func TestHangUntilCleared(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(fast)
		client := servePipes(t, s)
		s.SetFaults(Faults{Hang: true, Slow: 2})
		answered := make(chan int, 1)
		go func() {
			body, _ := json.Marshal(chatBody("x", map[string]any{"max_tokens": 3}))
			resp, err := client.Post("http://sim/v1/chat/completions", "application/json", bytes.NewReader(body))
			if err != nil {
				answered <- 0
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			answered <- resp.StatusCode
		}()
		time.Sleep(time.Hour)
		synctest.Wait()
		select {
		case code := <-answered:
			t.Fatalf("answered %d during the hang", code)
		default:
		}
		s.SetFaults(Faults{Slow: 2})
		if code := <-answered; code != 200 {
			t.Errorf("after the hang: status %d", code)
		}
	})
}

func TestKill(t *testing.T) {
	r, err := Start(t.Context(), Config{TPOT: time.Hour}, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	resp := post(t, t.Context(), r.URL()+"/chat/completions", chatBody("x", map[string]any{"stream": true, "max_tokens": 5, "ignore_eos": true}))
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	if line, err := br.ReadString('\n'); err != nil || !strings.HasPrefix(line, "data: ") {
		t.Fatalf("first line %q, %v; want the first token", line, err)
	}
	// The next token is an hour away: the stream is mid-way when the
	// replica dies.
	r.Kill()
	rest, err := io.ReadAll(br)
	if err == nil || bytes.Contains(rest, []byte("[DONE]")) {
		t.Errorf("stream after the kill: %q, error %v; want it cut", rest, err)
	}
	if c, err := net.Dial("tcp", r.Addr()); err == nil {
		c.Close()
		t.Error("connection accepted after the kill")
	}
	r.Server().SetFaults(Faults{}) // a dead replica stays dead
	if c, err := net.Dial("tcp", r.Addr()); err == nil {
		c.Close()
		t.Error("connection accepted after the kill and a fault change")
	}
}
