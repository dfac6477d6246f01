package router

// Hedging: a request whose endpoint is much later with its first token
// than predicted is also sent to a second endpoint of the pool, and the
// first of the two to write to the client serves it; the other is
// cancelled at once, so that its backend stops working for it. A pool
// hedges only when its hedge.after is set, a request at most once, and
// each hedge spends the pool's retry budget as a retry does.
// docs/ROUTING.md says when it pays.

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/pool"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/proxy"
)

// errLostRace ends the attempt that did not write to the client first.
var errLostRace = errors.New("another endpoint answered first")

// Hedge outcomes: the outcome label of llmgw_hedges_total.
const (
	hedgeWon    = "won"    // the hedge served the request
	hedgeLost   = "lost"   // the first endpoint did
	hedgeFailed = "failed" // neither did: both failed, or the client left
)

// hedgeWait is how long a call to endpoint i waits for its first token
// before it is hedged: hedge.after times the endpoint's predicted TTFT,
// and at least hedge.min_wait. The prediction is the pick's own when the
// policy made one (auto), else the one auto would have made.
func (p *servedPool) hedgeWait(rt *pool.Route, i int, now time.Time) time.Duration {
	pred := p.Predicted(rt, i, now)
	return max(time.Duration(p.hedge.After*pred*float64(time.Second)), p.hedge.MinWait)
}

// hedges reports whether a try may be hedged: the pool hedges and has
// another endpoint, and the request may still send to one more.
func (p *servedPool) hedges(triesLeft int, relaxed bool) bool {
	return p.hedge.After > 0 && len(p.Endpoints()) > 1 && triesLeft > 0 && !relaxed
}

// attempt is one call of a hedged try.
type attempt struct {
	i       int // the endpoint's index in its pool
	w       *attemptWriter
	started atomic.Bool // its first token is in

	// Set on the call's goroutine before it reports its end.
	out  proxy.Outcome
	lost bool          // cancelled because the other attempt wrote first
	took time.Duration // from sending to the end
}

// raced is what a hedged try came to.
type raced struct {
	outcome  proxy.Outcome // the winner's; when neither wrote, the last to end
	endpoint int           // the index of the endpoint outcome is from
	hedge    int           // the hedge's endpoint; -1 when none was sent
}

// race sends call to endpoint first of p and, when it has no first token
// within the pool's hedge wait, to a second endpoint not in tried, within
// the retry budget. The first to write to the client serves the request,
// and the other is cancelled. One that fails before writing leaves the
// other to finish. Each attempt that did not lose is settled against its
// endpoint as any call is; the losers' time is counted as wasted. race
// returns once every call it made has ended.
func (r *Router) race(ctx context.Context, w http.ResponseWriter, req *parsedRequest, p *servedPool, m *catalog.Model,
	rt *pool.Route, call proxy.Call, first int, tried uint64) raced {
	cl := &claim{w: w, rc: http.NewResponseController(w)}
	ended := make(chan *attempt, 2)
	primary := r.launch(ctx, cl, req, p, m, rt, call, first, ended)
	timer := time.NewTimer(p.hedgeWait(rt, first, time.Now()))
	defer timer.Stop()
	var hedge, last *attempt
	var wasted time.Duration
	for running := 1; running > 0; {
		select {
		case <-timer.C:
			if primary.started.Load() || cl.taken() {
				continue
			}
			if j := p.pickHedge(rt, tried|1<<first, r.log, req.id); j >= 0 {
				// nil when the first call wrote since taken was asked: its
				// retry is spent for nothing, a window of microseconds.
				if hedge = r.launch(ctx, cl, req, p, m, rt, call, j, ended); hedge != nil {
					running++
					r.log.Debug("request hedged", "id", req.id, "pool", p.name,
						"endpoint", p.Endpoints()[first].Name(), "hedge", p.Endpoints()[j].Name())
				}
			}
		case a := <-ended:
			running--
			if a.lost {
				wasted += a.took
				continue
			}
			r.settle(req, p, p.Endpoints()[a.i], a.out)
			last = a
		}
	}

	served := last // a lost attempt means another wrote, and was not lost
	for _, a := range [2]*attempt{primary, hedge} {
		if a != nil && a.w.won {
			served = a
		}
	}
	if !served.w.won {
		// As an unhedged call leaves it, for the error the client gets.
		setModelHeader(w.Header(), req, m.Name)
	}
	res := raced{outcome: served.out, endpoint: served.i, hedge: -1}
	if hedge != nil {
		res.hedge = hedge.i
		outcome := hedgeFailed
		switch {
		case hedge.w.won:
			outcome = hedgeWon
		case primary.w.won:
			outcome = hedgeLost
		}
		r.m.hedges.WithLabelValues(p.name, outcome).Inc()
		r.m.hedgeWasted.WithLabelValues(p.name).Add(wasted.Seconds())
	}
	return res
}

// pickHedge is the endpoint a hedge of request id goes to: the pool
// policy's pick among the endpoints not in tried and not out, as a
// retry's; -1 when there is none, or the retry budget has no room for
// one more call, which log's debug lines say.
func (p *servedPool) pickHedge(rt *pool.Route, tried uint64, log *slog.Logger, id string) int {
	now := time.Now()
	j, reason := p.Pick(rt, p.Candidates(tried, now, false), now)
	if j < 0 {
		return -1
	}
	if !p.Budget().Retry(now) {
		log.Debug("retry budget spent: no hedge", "id", id, "pool", p.name)
		return -1
	}
	p.m.decisions[reason].Inc()
	return j
}

// launch sends call to endpoint i as an attempt of a race, on a goroutine
// of its own that reports on ended once the call is over; nil, and
// nothing sent, when an attempt has already written to the client.
func (r *Router) launch(ctx context.Context, cl *claim, req *parsedRequest, p *servedPool, m *catalog.Model,
	rt *pool.Route, call proxy.Call, i int, ended chan<- *attempt) *attempt {
	actx, cancel := context.WithCancelCause(ctx)
	a := &attempt{i: i, w: &attemptWriter{claim: cl, cancel: cancel, header: http.Header{modelHeader: {m.Name}}}}
	if !cl.join(a.w) {
		cancel(nil)
		return nil
	}
	call.URL = p.target(p.Endpoints()[i], req.api.upstreamPath, m.UpstreamName(), req.Stream)
	actx = notePick(actx, req, p, rt, i)
	go func() {
		at := time.Now()
		a.out = r.send(actx, a.w, req, p, i, rt, &call, &a.started)
		a.took = time.Since(at)
		// A failure of the upstream's own is one even when the other
		// attempt wrote meanwhile.
		a.lost = a.out.Reason == proxy.ReasonNone && errors.Is(context.Cause(actx), errLostRace)
		cancel(nil)
		ended <- a
	}()
	return a
}

// claim is the client's ResponseWriter while a hedged try's attempts race
// for it: the first attempt to write takes it, and the others are
// cancelled.
type claim struct {
	w  http.ResponseWriter
	rc *http.ResponseController // w's

	mu      sync.Mutex       // protects the fields below, and w's header until it is taken
	writers []*attemptWriter // the attempts', in the order they were sent
	winner  *attemptWriter   // nil until an attempt writes
}

// join adds an attempt to the race, and reports false when the writer is
// already taken: too late to join.
func (c *claim) join(a *attemptWriter) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.winner != nil {
		return false
	}
	c.writers = append(c.writers, a)
	return true
}

// taken reports whether an attempt has written.
func (c *claim) taken() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.winner != nil
}

// take gives the writer to a, if no attempt has it yet: a's headers
// become the answer's, and the other attempts are cancelled. It reports
// whether a has the writer.
func (c *claim) take(a *attemptWriter) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.winner != nil {
		return c.winner == a
	}
	c.winner = a
	h := c.w.Header()
	for k, v := range a.header {
		h[k] = v
	}
	for _, o := range c.writers {
		if o != a {
			o.cancel(errLostRace)
		}
	}
	return true
}

// attemptWriter is one attempt's ResponseWriter. Until the attempt writes,
// its headers go to a map of its own and a write deadline is held back;
// its first write, header or flush takes the client's writer if it is
// free, and from then on everything goes through; if the other attempt
// took it, writes fail with errLostRace. Its methods are called by one
// goroutine at a time, as the proxy's writes are.
type attemptWriter struct {
	claim     *claim
	cancel    context.CancelCauseFunc // ends the attempt's call
	header    http.Header             // the attempt's own, until it wins
	deadline  time.Time               // a write deadline set before it wrote; zero: none
	won, lost bool                    // decided at its first write
}

var _ http.ResponseWriter = (*attemptWriter)(nil)

// take reports whether the attempt has the client's writer, trying to
// take it the first time.
func (a *attemptWriter) take() bool {
	if !a.won && !a.lost {
		a.won = a.claim.take(a)
		a.lost = !a.won
		if a.won && !a.deadline.IsZero() {
			a.claim.rc.SetWriteDeadline(a.deadline)
		}
	}
	return a.won
}

func (a *attemptWriter) Header() http.Header {
	if a.won {
		return a.claim.w.Header()
	}
	return a.header
}

func (a *attemptWriter) WriteHeader(code int) {
	if a.take() {
		a.claim.w.WriteHeader(code)
	}
}

func (a *attemptWriter) Write(b []byte) (int, error) {
	if !a.take() {
		return 0, errLostRace
	}
	return a.claim.w.Write(b)
}

// FlushError flushes the client's writer, as http.ResponseController's
// Flush does.
func (a *attemptWriter) FlushError() error {
	if !a.take() {
		return errLostRace
	}
	return a.claim.rc.Flush()
}

// SetWriteDeadline sets the client's write deadline once the attempt has
// the writer, and until then holds it for when it does.
func (a *attemptWriter) SetWriteDeadline(t time.Time) error {
	switch {
	case a.won:
		return a.claim.rc.SetWriteDeadline(t)
	case a.lost:
		return errLostRace
	}
	a.deadline = t
	return nil
}
