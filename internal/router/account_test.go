package router

// One Completed per request: however a request ends — answered, streamed,
// refused at any step, counted, translated, retried, hedged, or left by
// its client — its observers are each handed exactly one Completed, the
// request's own.

import (
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"gitea.mynodes.xyz/ilker/llmgw/internal/config"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/observe"
)

// completions counts the Completed requests it is handed, by id.
type completions struct {
	mu  sync.Mutex
	ids []string
}

func (c *completions) Observe(cp *observe.Completed) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ids = append(c.ids, cp.ID)
}

func (c *completions) seen() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.ids)
}

// counted puts a counting observer first and another last in g's list of
// observers.
func counted(g *testGateway) (first, last *completions) {
	first, last = &completions{}, &completions{}
	g.r.observers = append(append(observe.Observers{first}, g.r.observers...), last)
	return first, last
}

// send sends g a request of body to path with header, reads the answer
// to its end, and returns its X-Request-Id and status.
func send(t *testing.T, g *testGateway, path, body string, header http.Header) (string, int) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, g.url+path, strings.NewReader(body))
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.Header.Get("X-Request-Id"), resp.StatusCode
}

// checkOnce waits until both counters have been handed as many Completed
// requests as ids, and checks they are ids, each once.
func checkOnce(t *testing.T, ids []string, first, last *completions) {
	t.Helper()
	waitFor(t, "every request to be completed", func() bool {
		return len(first.seen()) >= len(ids) && len(last.seen()) >= len(ids)
	})
	want := slices.Sorted(slices.Values(ids))
	for _, c := range []*completions{first, last} {
		if got := slices.Sorted(slices.Values(c.seen())); !slices.Equal(got, want) {
			t.Errorf("observed %v, want each request once: %v", got, want)
		}
	}
}

func TestOneCompletedPerRequest(t *testing.T) {
	chat := `{"model":"m","messages":[{"role":"user","content":"hi"}]}`
	key := func(k string) http.Header { return http.Header{"Authorization": {"Bearer " + k}} }
	anthropic := http.Header{"Authorization": {"Bearer sk-good"}, "Anthropic-Version": {"2023-06-01"}}
	messages := `{"model":"m","max_tokens":8,"stream":true,"messages":[{"role":"user","content":"hi"}]}`

	t.Run("answered and refused", func(t *testing.T) {
		_, tp, log := newTracedOptions(t)
		g := newTestGatewayWith(t, Options{Auth: keyTable{}, Limits: spentLimiter{}, Telemetry: TelemetryOptions{Tracer: tp, AccessLog: log}},
			nil, &upstream{tokens: 3})
		first, last := counted(g)
		var ids []string
		for _, q := range []struct {
			path, body string
			header     http.Header
			status     int
		}{
			{"/v1/chat/completions", chat, key("sk-good"), 200},
			{"/v1/chat/completions", strings.Replace(chat, `"m",`, `"m","stream":true,`, 1), key("sk-good"), 200},
			{"/v1/chat/completions", chat, key("sk-bad"), 401},
			{"/v1/chat/completions", `{"model":`, key("sk-good"), 400},
			{"/v1/chat/completions", `{"model":"gpt-9","messages":[]}`, key("sk-good"), 404},
			{"/v1/chat/completions", strings.Repeat(" ", 2<<10) + chat, key("sk-good"), 413},
			{"/v1/chat/completions", chat, key("sk-rate"), 429},
			{"/v1/embeddings", `{"model":"m","input":"hi","stream":true}`, key("sk-good"), 400},
			{"/v1/messages/count_tokens", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, anthropic, 200},
			{"/v1/messages", messages, anthropic, 200},
		} {
			id, status := send(t, g, q.path, q.body, q.header)
			if status != q.status || id == "" {
				t.Fatalf("%s %.40s: status %d, id %q; want %d", q.path, q.body, status, id, q.status)
			}
			ids = append(ids, id)
		}
		checkOnce(t, ids, first, last)
		if n := strings.Count(log.String(), "\n"); n != len(ids) {
			t.Errorf("%d access log lines, want one a request: %d", n, len(ids))
		}
	})

	t.Run("retried and fallen back", func(t *testing.T) {
		spare := &upstream{tokens: 2}
		g := newTestGateway(t, func(c *config.Config) {
			withSpare(t, spare)(c)
			inTurn(c)
		}, &upstream{status: 503}, &upstream{status: 502})
		first, last := counted(g)
		id, status := send(t, g, "/v1/chat/completions", chat, nil)
		if status != 200 {
			t.Fatalf("status %d, want the fallback's answer", status)
		}
		checkOnce(t, []string{id}, first, last)
	})

	t.Run("hedged", func(t *testing.T) {
		stalled, healthy := newRacer(t, "stalled", 0, true), newRacer(t, "healthy", 0, false)
		g := newTestGateway(t, hedging, stalled, healthy)
		g.pickNext(0)
		first, last := counted(g)
		id, status := send(t, g, "/v1/chat/completions", chatRequest(true), nil)
		if status != 200 {
			t.Fatalf("status %d", status)
		}
		stalled.waitCancelled(t)
		checkHedges(t, g, hedgeWon)
		checkOnce(t, []string{id}, first, last)
	})

	t.Run("left by its client", func(t *testing.T) {
		stalled := newRacer(t, "stalled", 0, true)
		g := newTestGateway(t, func(c *config.Config) { c.Models[0].FirstTokenTimeout = time.Minute }, stalled)
		first, last := counted(g)
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, g.url+"/v1/chat/completions", strings.NewReader(chat))
		go func() {
			waitFor(t, "the upstream to have the request", func() bool { return stalled.hits.Load() > 0 })
			cancel()
		}()
		if _, err := http.DefaultClient.Do(req); !errors.Is(err, context.Canceled) {
			t.Fatalf("the request ended with %v, want it cancelled", err)
		}
		waitFor(t, "the request to be completed", func() bool { return len(last.seen()) > 0 })
		checkOnce(t, last.seen()[:1], first, last)
	})
}

// TestModelLabelIsTheRequestsOwn: a request is counted under the model it
// resolved to in the catalog it was served from, on every metric, even
// when a reload takes the model away before it ends; a model its key may
// not use is counted as unknown, as a model no one has is.
func TestModelLabelIsTheRequestsOwn(t *testing.T) {
	t.Run("reloaded away", func(t *testing.T) {
		arrived, release := make(chan struct{}, 1), make(chan struct{})
		up := &upstream{tokens: 3}
		g := newTestGateway(t, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/v1/chat/completions" {
				arrived <- struct{}{}
				<-release
			}
			up.ServeHTTP(w, r)
		}))
		done := make(chan int)
		go func() {
			_, status := send(t, g, "/v1/chat/completions", `{"model":"a","stream":true,"messages":[]}`, nil)
			done <- status
		}()
		<-arrived
		other, err := catalog.New([]catalog.Pool{{Name: "main", Endpoints: []catalog.Endpoint{{URL: "http://127.0.0.1:1/v1"}}}},
			[]catalog.Model{{Name: "other", Pool: "main"}})
		if err != nil {
			t.Fatal(err)
		}
		g.r.SetCatalog(other)
		close(release)
		if status := <-done; status != 200 {
			t.Fatalf("status %d", status)
		}
		waitFor(t, "the request to be counted", func() bool { return len(gather(t, g.reg)["llmgw_requests_total"].GetMetric()) > 0 })
		if got := g.sample(t, "llmgw_requests_total", "model", "m", "pool", "main", "code", "200", "error_type", ""); got != 1 {
			t.Errorf("llmgw_requests_total{model=m} = %v, want the request counted under the model it was served as", got)
		}
		mfs := gather(t, g.reg)
		for _, name := range []string{"llmgw_ttft_seconds", "llmgw_tpot_seconds", "gen_ai_server_request_duration_seconds"} {
			for _, s := range mfs[name].GetMetric() {
				for _, l := range s.GetLabel() {
					if (l.GetName() == "model" || l.GetName() == "gen_ai_request_model") && l.GetValue() != "m" {
						t.Errorf("%s has a series of model %q, want m alone", name, l.GetValue())
					}
				}
			}
		}
		if n := g.r.slo.Len("m"); n != 1 {
			t.Errorf("the SLO tracker holds %d samples of m, want the stream's", n)
		}
	})
	t.Run("hidden from the key", func(t *testing.T) {
		g := newTestGatewayWith(t, Options{Auth: keyTable{}}, nil, &upstream{tokens: 3})
		if _, status := send(t, g, "/v1/chat/completions", `{"model":"m","messages":[]}`, http.Header{"Authorization": {"Bearer sk-other"}}); status != 404 {
			t.Fatalf("status %d, want 404", status)
		}
		waitFor(t, "the request to be counted", func() bool { return len(gather(t, g.reg)["llmgw_requests_total"].GetMetric()) > 0 })
		if got := g.sample(t, "llmgw_requests_total", "model", observe.Unknown, "pool", "none", "code", "404", "error_type", string(observe.CallerNotFound)); got != 1 {
			t.Errorf("a model the key may not use is not counted as unknown: %v", got)
		}
	})
}
