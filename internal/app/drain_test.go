package app

// The drain: a gateway told to stop leaves readiness at once, goes on
// taking requests for server.drain_delay while load balancers catch up,
// then closes its API listener and lets every stream in flight finish.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
	"gitea.mynodes.xyz/ilker/llmgw/internal/sim"
)

// streamResult is how one stream read to its end went.
type streamResult struct {
	done   bool  // reports whether data: [DONE] arrived
	events int   // data events before it
	err    error // a status other than 200, an error event, or a cut
}

// readStream sends a streamed chat completion of maxTokens tokens to base
// and reads it to its end, sending on started once its first event has
// arrived.
func readStream(client *http.Client, base string, maxTokens int, started chan<- struct{}) streamResult {
	body := fmt.Sprintf(`{"model":"chat","stream":true,"max_tokens":%d,"ignore_eos":true,"messages":[{"role":"user","content":"count"}]}`, maxTokens)
	resp, err := client.Post(base+"/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		started <- struct{}{}
		return streamResult{err: err}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		started <- struct{}{}
		b, _ := io.ReadAll(resp.Body)
		return streamResult{err: fmt.Errorf("status %d: %s", resp.StatusCode, b)}
	}
	var r streamResult
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if r.events == 0 {
			started <- struct{}{}
		}
		switch {
		case data == "[DONE]":
			r.done = true
			return r
		case strings.HasPrefix(data, `{"error"`):
			r.err = errors.New(data)
			return r
		}
		r.events++
	}
	if r.events == 0 {
		started <- struct{}{}
	}
	r.err = fmt.Errorf("cut after %d events: %v", r.events, sc.Err())
	return r
}

// TestDrainCutsNothing opens 200 streams, ends the gateway's Run context
// as SIGTERM does, and checks each step of the drain: /readyz answers 503
// at once while /livez stays 200; during server.drain_delay a request on
// a kept-alive connection is served with Connection: close, and one on a
// new connection is served; after it, a new connection is refused (the
// listener is closed: ECONNREFUSED, never a half-written answer); and
// every one of the 200 streams ends with [DONE].
func TestDrainCutsNothing(t *testing.T) {
	const (
		streams = 200
		delay   = 3 * time.Second
		// Each stream lasts 200 × 30 ms = 6 s, well past the delay, so
		// that the streams finish after the listener has closed.
		tokens = 200
		tpot   = 30 * time.Millisecond
	)
	ctx := t.Context()
	replicas, err := sim.StartReplicas(ctx, sim.Config{Model: "chat", FixedTiming: true, TTFT: 20 * time.Millisecond, TPOT: tpot}, 2, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var urls []string
	for _, r := range replicas {
		urls = append(urls, r.URL())
		t.Cleanup(r.Close)
	}
	cfg := upstreamConfig("chat", catalog.KindVLLM, urls)
	cfg.Server.Listen, cfg.Server.AdminListen = "127.0.0.1:0", "127.0.0.1:0"
	cfg.Server.DrainDelay = delay
	cfg.Server.ShutdownGrace = 30 * time.Second
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	g, err := newGateway(ctx, cfg, "", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	apiAddr := g.apiLn.Addr().String()
	runCtx, sigterm := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- g.Run(runCtx) }()
	stopped := false
	defer func() {
		if !stopped {
			sigterm()
			<-ran
		}
	}()

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: streams}}
	defer client.CloseIdleConnections()

	// A client that keeps its connection alive, as a load balancer does.
	kept := &http.Client{Transport: &http.Transport{}}
	defer kept.CloseIdleConnections()
	keptAlive := func(when string) bool {
		resp, err := kept.Post(g.URL()+"/chat/completions", "application/json",
			strings.NewReader(`{"model":"chat","max_tokens":2,"messages":[{"role":"user","content":"kept"}]}`))
		if err != nil {
			t.Fatalf("a request on a kept-alive connection %s: %v", when, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("a request on a kept-alive connection %s: status %d", when, resp.StatusCode)
		}
		return !resp.Close
	}
	if !keptAlive("before the signal") {
		t.Error("the gateway closed a client's connection before any drain")
	}
	started := make(chan struct{}, streams)
	results := make(chan streamResult, streams)
	for range streams {
		go func() { results <- readStream(client, g.URL(), tokens, started) }()
	}
	for range streams {
		<-started
	}

	sigterm()
	signalled := time.Now()
	adminStatus := func(path string) int {
		resp, err := http.Get(g.AdminURL() + path)
		if err != nil {
			t.Fatalf("GET %s during the drain: %v", path, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	for adminStatus("/readyz") != http.StatusServiceUnavailable {
		if time.Since(signalled) > time.Second {
			t.Fatal("/readyz still answers 200 a second after the signal")
		}
	}
	if got := adminStatus("/livez"); got != http.StatusOK {
		t.Errorf("/livez during the drain: %d, want 200", got)
	}

	// During the delay: a kept-alive connection is served and told to
	// close, and a new connection is served.
	if keptAlive("during the drain delay") {
		t.Error("during the drain delay the gateway let a client keep its connection alive to a listener about to close")
	}
	fresh := func() *http.Client {
		return &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	}
	sentAfter := time.Since(signalled)
	resp, err := fresh().Post(g.URL()+"/chat/completions", "application/json",
		strings.NewReader(`{"model":"chat","max_tokens":3,"messages":[{"role":"user","content":"during"}]}`))
	if err != nil {
		t.Fatalf("a request during the drain delay: %v", err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("a request during the drain delay: status %d, want 200", resp.StatusCode)
	}
	if sentAfter >= delay {
		t.Fatalf("the requests meant for the drain delay were sent %v after the signal, past the %v delay: the machine is too slow for this test", sentAfter, delay)
	}

	// After the delay: the listener closes, and new connections are refused.
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		c, err := net.Dial("tcp", apiAddr)
		if errors.Is(err, syscall.ECONNREFUSED) {
			break
		}
		// A connection still in the kernel's accept queue as the listener
		// closes is reset: the instant of closing, not a refusal.
		if err != nil && !errors.Is(err, syscall.ECONNRESET) {
			t.Fatalf("dialling the API listener after the delay: %v, want connection refused", err)
		}
		if c != nil {
			c.Close()
		}
		if time.Since(signalled) > delay+5*time.Second {
			t.Fatal("the API listener still accepts 5 s after the drain delay")
		}
		<-tick.C
	}
	closedAfter := time.Since(signalled)
	if closedAfter < delay {
		t.Errorf("the API listener closed %v after the signal, before the %v delay", closedAfter, delay)
	}
	_, err = fresh().Post(g.URL()+"/chat/completions", "application/json",
		strings.NewReader(`{"model":"chat","max_tokens":3,"messages":[{"role":"user","content":"too late"}]}`))
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("a request after the drain delay: %v, want connection refused", err)
	}

	var done, cut int
	for range streams {
		r := <-results
		switch {
		case r.err != nil:
			cut++
			if cut <= 5 {
				t.Errorf("a stream in flight at the signal: %v", r.err)
			}
		case r.done && r.events >= tokens:
			done++
		default:
			cut++
			t.Errorf("a stream ended with [DONE] after %d events, want at least %d", r.events, tokens)
		}
	}
	t.Logf("streams open at the signal: %d; ended with [DONE]: %d; cut: %d; listener closed %v after the signal (drain_delay %v)",
		streams, done, cut, closedAfter.Round(time.Millisecond), delay)
	err = <-ran
	stopped = true
	if err != nil {
		t.Errorf("Run: %v", err)
	}
}
