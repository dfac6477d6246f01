package sim

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"gitea.mynodes.xyz/ilker/llmgw/internal/h1"
)

func TestStartReplicas(t *testing.T) {
	t.Run("ephemeral ports", func(t *testing.T) {
		rs, err := StartReplicas(t.Context(), fast, 3, "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, r := range rs {
			defer r.Close()
			if !strings.HasPrefix(r.URL(), "http://127.0.0.1:") || !strings.HasSuffix(r.URL(), "/v1") || seen[r.URL()] {
				t.Errorf("URL %q", r.URL())
			}
			seen[r.URL()] = true
			resp, err := http.Get(r.URL() + "/models")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
		}
	})

	t.Run("consecutive ports", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		rs, err := StartReplicas(t.Context(), fast, 2, ln.Addr().String())
		if err != nil {
			t.Skipf("ports %d and %d not both free: %v", port, port+1, err)
		}
		for i, r := range rs {
			defer r.Close()
			if want := "127.0.0.1:" + strconv.Itoa(port+i); r.Addr() != want {
				t.Errorf("replica %d at %s, want %s", i, r.Addr(), want)
			}
		}
	})

	t.Run("taken port", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		if _, err := StartReplicas(t.Context(), fast, 1, ln.Addr().String()); err == nil {
			t.Error("started on a port already in use")
		}
	})

	t.Run("context ends it", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		r, err := Start(ctx, fast, "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		cancel()
		r.Close() // waits for the shutdown ctx began; safe to repeat
		if _, err := net.Dial("tcp", r.Addr()); err == nil {
			t.Error("still accepting after its context ended")
		}
	})
}

func TestCommand(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	pr, pw := io.Pipe()
	var stderr strings.Builder
	done := make(chan error, 1)
	go func() {
		done <- Command(ctx, []string{"--listen", "127.0.0.1:0", "--replicas", "2", "--model", "tiny", "--ttft", "0", "--tpot", "0"}, pw, &stderr)
		pw.Close()
	}()
	sc := bufio.NewScanner(pr)
	var urls []string
	for len(urls) < 2 && sc.Scan() {
		line := sc.Text()
		if !strings.Contains(line, "model tiny") || !strings.Contains(line, "fixed timing") {
			t.Errorf("line %q", line)
		}
		urls = append(urls, line[strings.LastIndex(line, " ")+1:])
	}
	for _, u := range urls {
		resp := post(t, ctx, u+"/chat/completions", map[string]any{"model": "tiny", "messages": []map[string]any{{"role": "user", "content": "hi"}}})
		decode[answer](t, resp, 200)
	}
	cancel()
	go io.Copy(io.Discard, pr)
	if err := <-done; err != nil {
		t.Errorf("Command returned %v", err)
	}

	for _, args := range [][]string{{"--replicas", "0"}, {"--error-rate", "3"}, {"--bogus"}, {"extra"}} {
		if err := Command(t.Context(), args, io.Discard, io.Discard); err == nil {
			t.Errorf("Command(%q) = nil, want an error", args)
		}
	}
}

// TestReplicaDeadlines: a replica's server cuts a body trickled in past
// its deadline with 408, and closes headers that never end and a
// kept-alive connection left idle, over real sockets.
func TestReplicaDeadlines(t *testing.T) {
	d := h1.Deadlines{Header: 200 * time.Millisecond, Body: 200 * time.Millisecond, Idle: 200 * time.Millisecond}
	r, err := startWithin(t.Context(), fast, "127.0.0.1:0", d)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	dial := func(first string) (net.Conn, *bufio.Reader) {
		c, err := net.Dial("tcp", r.Addr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		c.SetDeadline(time.Now().Add(5 * time.Second))
		io.WriteString(c, first)
		return c, bufio.NewReader(c)
	}
	// ended reports whether the server closed the connection, an answer
	// before it or not, before the test's own deadline.
	ended := func(br *bufio.Reader) bool {
		_, err := io.Copy(io.Discard, br)
		return !errors.Is(err, os.ErrDeadlineExceeded)
	}

	c, br := dial("POST /v1/chat/completions HTTP/1.1\r\nHost: sim\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{")
	go func() { // a byte a while, never the whole body
		for range 40 {
			time.Sleep(50 * time.Millisecond)
			if _, err := io.WriteString(c, " "); err != nil {
				return
			}
		}
	}()
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no answer to a body that never arrives: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(string(b), "did not arrive in time") {
		t.Errorf("%d %s; want 408, the body did not arrive in time", resp.StatusCode, b)
	}

	if _, br := dial("GET /v1/models HTTP/1.1\r\nHost: sim\r\n"); !ended(br) {
		t.Error("headers that never end kept their connection")
	}
	_, br = dial("GET /v1/models HTTP/1.1\r\nHost: sim\r\n\r\n")
	if resp, err := http.ReadResponse(br, nil); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/models: %v", err)
	} else {
		io.Copy(io.Discard, resp.Body)
	}
	if !ended(br) {
		t.Error("an idle connection was kept past its deadline")
	}
}
