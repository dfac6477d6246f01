package router

// Hedging end to end: a request through the Router to real upstreams that
// stall, answer late or answer at once; which one serves it, what the
// other sees, and what the client gets.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"

	"gitea.mynodes.xyz/ilker/llmgw/internal/config"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/pool"
)

// racer is an upstream that answers after delay, or never when it
// stalls, unless its request is cancelled first. Each answer's text is
// its name, so that answers can be told apart.
type racer struct {
	name      string
	delay     time.Duration
	stall     bool
	status    int           // of its answer; 0 is 200
	hits      atomic.Int64  // requests seen
	cancelled chan struct{} // one value for each request cancelled before it was answered
	quit      chan struct{} // closed when the test ends: stalled requests return
}

func newRacer(t *testing.T, name string, delay time.Duration, stall bool) *racer {
	r := &racer{name: name, delay: delay, stall: stall, cancelled: make(chan struct{}, 8), quit: make(chan struct{})}
	t.Cleanup(func() { close(r.quit) })
	return r
}

// answer is what the racer sends, plain or streamed.
func (rc *racer) answer(stream bool) string {
	if !stream {
		return fmt.Sprintf(`{"id":"c1","object":"chat.completion","model":%q,"choices":[{"index":0,"message":{"role":"assistant","content":%q},"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":2,"total_tokens":11}}`, backendModel, rc.name)
	}
	var b strings.Builder
	for i, tok := range []string{rc.name, " done"} {
		finish := "null"
		if i == 1 {
			finish = `"stop"`
		}
		fmt.Fprintf(&b, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"model\":%q,\"choices\":[{\"index\":0,\"delta\":{\"content\":%q},\"finish_reason\":%s}]}\n\n", backendModel, tok, finish)
	}
	b.WriteString("data: [DONE]\n\n")
	return b.String()
}

func (rc *racer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/health" {
		return
	}
	rc.hits.Add(1)
	body, _ := io.ReadAll(r.Body)
	var req struct{ Stream bool }
	json.Unmarshal(body, &req)
	var late <-chan time.Time
	if !rc.stall {
		late = time.After(rc.delay)
	}
	select {
	case <-r.Context().Done():
		rc.cancelled <- struct{}{}
		return
	case <-rc.quit:
		return
	case <-late:
	}
	if rc.status != 0 {
		w.WriteHeader(rc.status)
		io.WriteString(w, `{"error":{"message":"failing","type":"server_error","param":null,"code":null}}`)
		return
	}
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, rc.answer(false))
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	io.WriteString(w, rc.answer(true))
}

// waitCancelled fails t unless rc sees a request cancelled within ten
// seconds.
func (rc *racer) waitCancelled(t *testing.T) {
	t.Helper()
	select {
	case <-rc.cancelled:
	case <-time.After(10 * time.Second):
		t.Errorf("%s: no request was cancelled", rc.name)
	}
}

// hedgeWait is the wait a hedge test's pool is given: well above the
// prediction for a short prompt on an endpoint that has not answered
// yet (20 ms), so that min_wait decides it.
const hedgeWait = 50 * time.Millisecond

// hedging turns hedging on for pool main, which takes its endpoints in
// turn, and bounds the model's wait for a first byte at ten seconds.
func hedging(c *config.Config) {
	c.Pools[0].Hedge = catalog.Hedge{After: 2, MinWait: hedgeWait}
	inTurn(c)
}

func inTurn(c *config.Config) {
	c.Pools[0].Policy = catalog.PolicyRoundRobin
	c.Models[0].FirstTokenTimeout = 10 * time.Second
}

// pickNext makes endpoint k of pool main the next that round_robin
// picks.
func (g *testGateway) pickNext(k int) {
	p := g.r.snap.Load().pools["main"]
	n := len(p.Endpoints())
	var rt pool.Route
	rt.Prepare(p.Pool, nil, 0, 0, 0)
	for {
		if i, _ := p.Pick(&rt, 1<<n-1, time.Now()); i == (k+n-1)%n {
			return
		}
	}
}

// hedgesText is llmgw_hedges_total for pool main as the exposition format
// writes it: empty when no hedge was sent.
func hedgesText(outcome string) string {
	if outcome == "" {
		return ""
	}
	return fmt.Sprintf("# HELP llmgw_hedges_total Requests also sent to a second endpoint because the first had no first token in time, by pool and outcome: won (the hedge served the request), lost (the first endpoint did), failed (neither did).\n# TYPE llmgw_hedges_total counter\nllmgw_hedges_total{outcome=%q,pool=\"main\"} 1\n", outcome)
}

func checkHedges(t *testing.T, g *testGateway, outcome string) {
	t.Helper()
	if err := testutil.GatherAndCompare(g.reg, strings.NewReader(hedgesText(outcome)), "llmgw_hedges_total"); err != nil {
		t.Error(err)
	}
}

// checkNoneBlamed checks that no call was counted as an upstream's
// failure: no upstream error, no ejection.
func checkNoneBlamed(t *testing.T, g *testGateway) {
	t.Helper()
	if n := testutil.CollectAndCount(g.r.m.upstreamErrors) + testutil.CollectAndCount(g.r.m.ejections); n != 0 {
		t.Errorf("%d upstream error or ejection series; want none", n)
	}
}

// checkSignalsClear waits for every endpoint of pool main to have no
// request in flight, pending or owing prefill: each call, the loser's
// too, took itself off its endpoint's signals.
func checkSignalsClear(t *testing.T, g *testGateway) {
	t.Helper()
	waitFor(t, "the endpoints' signals to clear", func() bool {
		for _, ep := range g.r.snap.Load().pools["main"].Endpoints() {
			if c := ep.Counts(); c.Inflight != 0 || c.Pending != 0 || c.Owed != 0 {
				return false
			}
		}
		return true
	})
}

func chatRequest(stream bool) string {
	return fmt.Sprintf(`{"model":"a","stream":%t,"messages":[{"role":"user","content":"hi"}]}`, stream)
}

// TestHedgeWinsOverAStalledEndpoint: a request whose endpoint never
// answers is answered by the hedge, soon after the hedge wait and long
// before the first-byte timeout; the stalled upstream's request is
// cancelled, the client gets exactly one answer naming the catalog model,
// and the loser counts as no failure of its endpoint.
func TestHedgeWinsOverAStalledEndpoint(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%t", stream), func(t *testing.T) {
			stalled, healthy := newRacer(t, "stalled", 0, true), newRacer(t, "healthy", 0, false)
			g := newTestGateway(t, hedging, stalled, healthy)
			g.pickNext(0)
			start := time.Now()
			resp, body := g.post(t, "/v1/chat/completions", chatRequest(stream))
			took := time.Since(start)
			if resp.StatusCode != 200 {
				t.Fatalf("status %d: %s", resp.StatusCode, body)
			}
			if took < hedgeWait || took > 2*time.Second {
				t.Errorf("answered after %v; want after the hedge wait (%v) and long before the first-byte timeout (10s)", took, hedgeWait)
			}
			if want := strings.ReplaceAll(healthy.answer(stream), backendModel, "m"); body != want {
				t.Errorf("body:\n%s\nwant the hedge's answer alone:\n%s", body, want)
			}
			for _, m := range answerModels(t, body, stream) {
				if m != "m" {
					t.Errorf("the answer names %q, want the catalog's m", m)
				}
			}
			if got := resp.Header.Get(modelHeader); got != "m" {
				t.Errorf("%s: %q, want m", modelHeader, got)
			}
			stalled.waitCancelled(t)
			if stalled.hits.Load() != 1 || healthy.hits.Load() != 1 {
				t.Errorf("requests seen: stalled %d, healthy %d; want 1 and 1", stalled.hits.Load(), healthy.hits.Load())
			}
			checkHedges(t, g, hedgeWon)
			checkSignalsClear(t, g)
			// The loser was cancelled, not failed: no upstream error, no
			// retry, no ejection.
			checkNoneBlamed(t, g)
			if n := testutil.CollectAndCount(g.r.m.retries); n != 0 {
				t.Errorf("%d retry series; want none", n)
			}
			checkEndpointUp(t, g.reg, map[string]int{g.endpointName("main", 0): 1, g.endpointName("main", 1): 1})
			if wasted := testutil.ToFloat64(g.r.m.hedgeWasted.WithLabelValues("main")); wasted < hedgeWait.Seconds() {
				t.Errorf("llmgw_hedge_wasted_seconds_total = %v, want at least the stalled call's %v", wasted, hedgeWait)
			}
			mfs, err := g.reg.Gather()
			if err != nil {
				t.Fatal(err)
			}
			if problems, err := promlint.NewWithMetricFamilies(mfs).Lint(); err != nil || len(problems) > 0 {
				t.Errorf("promlint: %v %v", problems, err)
			}
		})
	}
}

// TestHedgeLosesToTheFirstEndpoint: when the first endpoint answers after
// the hedge was sent but before the hedge answers, the client gets the
// first endpoint's answer byte for byte, and the hedge is cancelled.
func TestHedgeLosesToTheFirstEndpoint(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%t", stream), func(t *testing.T) {
			first, second := newRacer(t, "first", 4*hedgeWait, false), newRacer(t, "second", 10*time.Second, false)
			g := newTestGateway(t, hedging, first, second)
			g.pickNext(0)
			resp, body := g.post(t, "/v1/chat/completions", chatRequest(stream))
			if resp.StatusCode != 200 {
				t.Fatalf("status %d: %s", resp.StatusCode, body)
			}
			if want := strings.ReplaceAll(first.answer(stream), backendModel, "m"); body != want {
				t.Errorf("body:\n%s\nwant the first endpoint's answer alone:\n%s", body, want)
			}
			second.waitCancelled(t)
			if second.hits.Load() != 1 {
				t.Errorf("the hedge's endpoint saw %d requests, want 1", second.hits.Load())
			}
			checkHedges(t, g, hedgeLost)
			checkSignalsClear(t, g)
			checkNoneBlamed(t, g)
		})
	}
}

// TestNoHedgeByDefault: without hedge.after, a request that is late is
// waited for, and no other endpoint sees it.
func TestNoHedgeByDefault(t *testing.T) {
	slow, other := newRacer(t, "slow", 6*hedgeWait, false), newRacer(t, "other", 0, false)
	g := newTestGateway(t, inTurn, slow, other)
	g.pickNext(0)
	resp, body := g.post(t, "/v1/chat/completions", chatRequest(true))
	if resp.StatusCode != 200 || !strings.Contains(body, `"slow"`) {
		t.Fatalf("status %d, want the slow endpoint's answer: %s", resp.StatusCode, body)
	}
	if other.hits.Load() != 0 {
		t.Errorf("the other endpoint saw %d requests, want none", other.hits.Load())
	}
	checkHedges(t, g, "")
}

// TestNoHedgeWithoutRetryBudget: a hedge is a retry's worth of load, and
// a pool whose retry budget is spent sends none.
func TestNoHedgeWithoutRetryBudget(t *testing.T) {
	slow, other := newRacer(t, "slow", 6*hedgeWait, false), newRacer(t, "other", 0, false)
	g := newTestGateway(t, hedging, slow, other)
	p := g.r.snap.Load().pools["main"]
	for p.Budget().Retry(time.Now()) {
		// Spent as retries of failed requests would spend it.
	}
	g.pickNext(0)
	resp, body := g.post(t, "/v1/chat/completions", chatRequest(true))
	if resp.StatusCode != 200 || !strings.Contains(body, `"slow"`) {
		t.Fatalf("status %d, want the slow endpoint's answer: %s", resp.StatusCode, body)
	}
	if other.hits.Load() != 0 {
		t.Errorf("the other endpoint saw %d requests, want none", other.hits.Load())
	}
	checkHedges(t, g, "")
}

// TestHedgeOutlivesTheFirstFailure: when the first endpoint fails while
// the hedge is out, the hedge is waited for rather than a third endpoint
// tried; the failure is the first endpoint's, the hedge's answer serves.
func TestHedgeOutlivesTheFirstFailure(t *testing.T) {
	// The first fails well after the hedge wait, the hedge answers well
	// after that.
	failing := newRacer(t, "failing", 6*hedgeWait, false)
	failing.status = http.StatusInternalServerError
	hedge, third := newRacer(t, "hedge", 12*hedgeWait, false), newRacer(t, "third", 0, false)
	g := newTestGateway(t, func(c *config.Config) { hedging(c); c.Server.Retries = 2 }, failing, hedge, third)
	g.pickNext(0)
	resp, body := g.post(t, "/v1/chat/completions", chatRequest(false))
	if resp.StatusCode != 200 || !strings.Contains(body, `"hedge"`) {
		t.Fatalf("status %d, want the hedge's answer: %s", resp.StatusCode, body)
	}
	if failing.hits.Load() != 1 || hedge.hits.Load() != 1 || third.hits.Load() != 0 {
		t.Errorf("requests seen: %d, %d, %d; want 1, 1, 0", failing.hits.Load(), hedge.hits.Load(), third.hits.Load())
	}
	checkHedges(t, g, hedgeWon)
	if got := testutil.ToFloat64(g.r.m.upstreamErrors.WithLabelValues("main", "status_5xx")); got != 1 {
		t.Errorf("llmgw_upstream_errors_total{reason=status_5xx} = %v, want 1", got)
	}
	if n := testutil.CollectAndCount(g.r.m.retries); n != 0 {
		t.Errorf("%d retry series, want none: the hedge is no retry", n)
	}
	if got := testutil.ToFloat64(g.r.m.hedgeWasted.WithLabelValues("main")); got != 0 {
		t.Errorf("llmgw_hedge_wasted_seconds_total = %v, want 0: the failure was no loser's", got)
	}
}

// TestClientLeavingCancelsBothCalls: a client that leaves while its
// request and the hedge are both waiting cancels both, and neither
// endpoint is blamed.
func TestClientLeavingCancelsBothCalls(t *testing.T) {
	a, b := newRacer(t, "a", 0, true), newRacer(t, "b", 0, true)
	g := newTestGateway(t, hedging, a, b)
	g.pickNext(0)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, g.url+"/v1/chat/completions", strings.NewReader(chatRequest(true)))
	if err != nil {
		t.Fatal(err)
	}
	answered := make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		answered <- err
	}()
	waitFor(t, "the hedge to be sent", func() bool { return b.hits.Load() == 1 })
	cancel()
	if err := <-answered; err == nil {
		t.Fatal("the request was answered, want it cancelled")
	}
	a.waitCancelled(t)
	b.waitCancelled(t)
	waitFor(t, "the hedge to be counted", func() bool {
		return testutil.ToFloat64(g.r.m.hedges.WithLabelValues("main", hedgeFailed)) == 1
	})
	checkHedges(t, g, hedgeFailed)
	checkSignalsClear(t, g)
	checkNoneBlamed(t, g)
}

// TestHedgeFollowsReload: a reload that turns hedging on takes effect for
// the next request, as any change to a pool does.
func TestHedgeFollowsReload(t *testing.T) {
	slow, other := newRacer(t, "slow", 6*hedgeWait, false), newRacer(t, "other", 0, false)
	g := newTestGateway(t, inTurn, slow, other)
	cur := g.r.Catalog()
	pools := append([]catalog.Pool(nil), cur.Pools()...)
	pools[0].Hedge = catalog.Hedge{After: 2, MinWait: hedgeWait}
	cat, err := catalog.New(pools, cur.Models())
	if err != nil {
		t.Fatal(err)
	}
	g.r.SetCatalog(cat)
	g.pickNext(0)
	resp, body := g.post(t, "/v1/chat/completions", chatRequest(true))
	if resp.StatusCode != 200 || !strings.Contains(body, `"other"`) {
		t.Fatalf("status %d, want the hedge's answer: %s", resp.StatusCode, body)
	}
	checkHedges(t, g, hedgeWon)
}

// TestAttemptWritersShareOneClient: the first attempt to write takes the
// client's writer with its own headers; the other's headers never reach
// the client, its writes fail and its call is cancelled.
func TestAttemptWritersShareOneClient(t *testing.T) {
	rec := httptest.NewRecorder()
	rec.Header().Set("X-Request-Id", "r1")
	cl := &claim{w: rec, rc: http.NewResponseController(rec)}
	var cancelled [2]error
	var ws [2]*attemptWriter
	for k := range ws {
		ws[k] = &attemptWriter{claim: cl, header: http.Header{}, cancel: func(err error) { cancelled[k] = err }}
		if !cl.join(ws[k]) {
			t.Fatalf("attempt %d could not join", k)
		}
	}
	ws[0].Header().Set("X-From", "first")
	ws[1].Header().Set("X-From", "second")
	ws[1].Header().Set("X-Second", "yes")
	if err := http.NewResponseController(ws[1]).SetWriteDeadline(time.Now().Add(time.Second)); err != nil {
		t.Errorf("a deadline before writing: %v, want it held", err)
	}
	ws[1].WriteHeader(http.StatusTeapot)
	if _, err := ws[1].Write([]byte("second")); err != nil {
		t.Fatal(err)
	}
	if _, err := ws[0].Write([]byte("first")); err != errLostRace {
		t.Errorf("the other attempt's write: %v, want errLostRace", err)
	}
	if err := http.NewResponseController(ws[0]).Flush(); err != errLostRace {
		t.Errorf("the other attempt's flush: %v, want errLostRace", err)
	}
	if cancelled[0] != errLostRace || cancelled[1] != nil {
		t.Errorf("cancelled with %v and %v, want errLostRace and nothing", cancelled[0], cancelled[1])
	}
	if cl.join(&attemptWriter{claim: cl}) {
		t.Error("an attempt joined after the writer was taken")
	}
	got := rec.Result()
	if got.StatusCode != http.StatusTeapot || rec.Body.String() != "second" ||
		got.Header.Get("X-From") != "second" || got.Header.Get("X-Second") != "yes" || got.Header.Get("X-Request-Id") != "r1" {
		t.Errorf("the client got %d %q with headers %v", got.StatusCode, rec.Body.String(), got.Header)
	}
}
