package h1

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// deadlineTimeout is the deadline the tests below set: long enough for a
// busy machine to meet it, short enough to wait for.
const deadlineTimeout = 200 * time.Millisecond

// timedErr is an error a handler met, and how long after it set its
// deadline.
type timedErr struct {
	err   error
	after time.Duration
}

// checkTimedOut fails t unless the handler's error is its deadline's,
// and came at about the deadline.
func checkTimedOut(t *testing.T, result <-chan timedErr) {
	t.Helper()
	select {
	case r := <-result:
		if !errors.Is(r.err, os.ErrDeadlineExceeded) {
			t.Fatalf("the handler's error: %v, want its deadline's", r.err)
		}
		if r.after > deadlineTimeout+2*time.Second {
			t.Errorf("the deadline ended the handler's wait %v after it was set, want about %v", r.after, deadlineTimeout)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the handler still waits, long past its deadline")
	}
}

// A write deadline ends a stream whose client stopped reading: the write
// that meets it fails, and the connection closes rather than carry the
// next request.
func TestWriteDeadline(t *testing.T) { watchers(t, testWriteDeadline) }

func testWriteDeadline(t *testing.T, serve func(http.Handler) string) {
	var served atomic.Int32
	result := make(chan timedErr, 1)
	addr := serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if served.Add(1) > 1 {
			return
		}
		rc := http.NewResponseController(w)
		start := time.Now()
		if err := rc.SetWriteDeadline(start.Add(deadlineTimeout)); err != nil {
			result <- timedErr{fmt.Errorf("setting the deadline: %w", err), 0}
			return
		}
		chunk := bytes.Repeat([]byte("data: x\n\n"), 8<<10)
		for time.Since(start) < 10*time.Second {
			_, err := w.Write(chunk)
			if err == nil {
				err = rc.Flush()
			}
			if err != nil {
				result <- timedErr{err, time.Since(start)}
				return
			}
		}
	}))
	c := dial(t, addr)
	c.send("GET /stream HTTP/1.1\r\nHost: x\r\n\r\nGET /next HTTP/1.1\r\nHost: x\r\n\r\n")
	checkTimedOut(t, result)

	// What was sent is there to read, and then the connection's end.
	if _, err := io.Copy(io.Discard, c.conn); err != nil {
		t.Errorf("reading to the connection's end: %v", err)
	}
	if n := served.Load(); n != 1 {
		t.Errorf("%d requests served, want the first only", n)
	}
}

// A read deadline ends the reading of a body that trickles in too slowly.
func TestReadDeadline(t *testing.T) { watchers(t, testReadDeadline) }

func testReadDeadline(t *testing.T, serve func(http.Handler) string) {
	result := make(chan timedErr, 1)
	addr := serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		if err := http.NewResponseController(w).SetReadDeadline(start.Add(deadlineTimeout)); err != nil {
			result <- timedErr{fmt.Errorf("setting the deadline: %w", err), 0}
			return
		}
		_, err := io.ReadAll(r.Body)
		result <- timedErr{err, time.Since(start)}
		if err != nil {
			http.Error(w, "too slow", http.StatusRequestTimeout)
		}
	}))
	c := dial(t, addr)
	const length = 100
	c.send(fmt.Sprintf("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", length))
	stop := make(chan struct{})
	go func() {
		tick := time.NewTicker(deadlineTimeout / 4)
		defer tick.Stop()
		for range length {
			select {
			case <-stop:
				return
			case <-tick.C:
				c.conn.Write([]byte("x"))
			}
		}
	}()
	checkTimedOut(t, result)
	close(stop)
	if resp, _ := c.answer("POST"); resp.StatusCode != http.StatusRequestTimeout || !resp.Close {
		t.Errorf("answer %d, close %v; want 408 and the connection closed", resp.StatusCode, resp.Close)
	}
}

// A read deadline bounds the body only: the handler's context does not
// end when a stream outlasts it, and the next request is read as usual.
func TestReadDeadlineEndsWithBody(t *testing.T) { watchers(t, testReadDeadlineEndsWithBody) }

func testReadDeadlineEndsWithBody(t *testing.T, serve func(http.Handler) string) {
	addr := serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := http.NewResponseController(w).SetReadDeadline(time.Now().Add(deadlineTimeout)); err != nil {
			t.Errorf("setting the deadline: %v", err)
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("reading the body: %v", err)
		}
		if r.URL.Path == "/stream" {
			select {
			case <-r.Context().Done():
				t.Error("the context ended at the body's read deadline")
			case <-time.After(2 * deadlineTimeout):
			}
		}
		fmt.Fprintf(w, "%s %s", r.URL.Path, body)
	}))
	c := dial(t, addr)
	c.send("POST /stream HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi")
	if _, body := c.answer("POST"); body != "/stream hi" {
		t.Fatalf("answer %q", body)
	}
	time.Sleep(deadlineTimeout) // past the second request's deadline, had it been kept
	c.send("POST /next HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nho")
	if _, body := c.answer("POST"); body != "/next ho" {
		t.Fatalf("the next answer %q", body)
	}
}

// A write deadline ends with its response: the next response on the
// connection writes as long as it needs.
func TestWriteDeadlineEndsWithResponse(t *testing.T) {
	big := strings.Repeat("x", 1<<20)
	_, addr := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/first" {
			if err := http.NewResponseController(w).SetWriteDeadline(time.Now().Add(deadlineTimeout)); err != nil {
				t.Errorf("setting the deadline: %v", err)
			}
			io.WriteString(w, "first")
			return
		}
		time.Sleep(2 * deadlineTimeout)
		if _, err := io.WriteString(w, big); err != nil {
			t.Errorf("writing the next answer: %v", err)
		}
	}))
	c := dial(t, addr)
	c.send("GET /first HTTP/1.1\r\nHost: x\r\n\r\n")
	if _, body := c.answer("GET"); body != "first" {
		t.Fatalf("answer %q", body)
	}
	c.send("GET /next HTTP/1.1\r\nHost: x\r\n\r\n")
	if _, body := c.answer("GET"); len(body) != len(big) {
		t.Fatalf("the next answer has %d bytes, want %d", len(body), len(big))
	}
}
