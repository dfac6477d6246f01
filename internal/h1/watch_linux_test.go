package h1

import (
	"io"
	"net/http"
	"testing"
)

// On Linux the poller watches a connection while its handler works, and
// forgets it when the handler returns.
func TestPollerWatches(t *testing.T) {
	watched := func() int {
		poll.mu.Lock()
		defer poll.mu.Unlock()
		return len(poll.conns)
	}
	during := make(chan int, 1)
	_, addr := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		during <- watched()
		io.WriteString(w, "ok")
	}))
	c := dial(t, addr)
	c.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	c.answer("GET")
	if n := <-during; n != 1 {
		t.Errorf("%d connections polled while the handler worked, want 1", n)
	}
	if n := watched(); n != 0 {
		t.Errorf("%d connections polled after, want 0", n)
	}
}
