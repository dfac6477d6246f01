// Package admission is the SLO gate in front of each pool: priority
// classes, the queue and its order, the SLO tracker and goodput, and what
// admission exports. It reads its pools as endpoint states (pool.State),
// values taken at one moment, and the catalog through a small interface
// the router's snapshot satisfies.
package admission

// SLO-aware admission: one gate per pool, in front of the models that
// enable it. A request goes at once while the pool has headroom — for its
// first token, and, while a class's TPOT SLO is in play, within each
// endpoint's batch limit, which the step times its streams show hold to
// that SLO; else it waits in a bounded queue, served by class band, then
// the tenant with the least served tokens for its weight, then the
// earliest deadline. A request that can no longer meet its deadline, or
// finds the queue full, is answered at once with 429; a critical one
// whose pool cannot meet its SLO goes to a fallback whose own gate can
// take it. The queue moves on events: a first token or an end in the
// pool, a new arrival, a timer at the moment a waiter's deadline becomes
// unreachable. docs/ADMISSION.md says how the signals combine.
//
// gate.go is the gate: a request at its door, a fallback, and the ticket
// an admitted request holds. headroom.go is whether the pool can take a
// request now; queue.go is the queue, its order and its fairness.

import (
	"context"
	"math"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
	"gitea.mynodes.xyz/ilker/llmgw/internal/openai"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/pool"
)

// Admission decisions, the decision label.
const (
	decisionAdmitted = "admitted"
	decisionQueued   = "queued"
	decisionRejected = "rejected"
	decisionExpired  = "expired"
	decisionFellBack = "fell_back"
)

var allDecisions = []string{decisionAdmitted, decisionQueued, decisionRejected, decisionExpired, decisionFellBack}

// Error codes of a refusal by admission.
const (
	codeQueueFull   = "queue_full"
	codeUnreachable = "slo_unreachable"
	codeShed        = "shed"
)

// overloaded is a 429 from admission: why, and when to try again.
func overloaded(code, msg string, wait float64) *openai.Error {
	return &openai.Error{Status: http.StatusTooManyRequests, Type: "overloaded", Code: code, Message: msg,
		RetryAfterSeconds: max(1, int(math.Ceil(wait)))}
}

// Catalog is what admission reads of the catalog in service.
type Catalog interface {
	// PoolState is the endpoints of the named pool not out at now, each
	// as it stands, their batch limits started first with startBatch,
	// and the pool's mean uncached prompt; ok is false when the catalog
	// has no such pool.
	PoolState(name string, now time.Time, startBatch bool) (eps []pool.State, meanPrompt float64, ok bool)
	// HasPool reports whether the catalog has the named pool.
	HasPool(name string) bool
	// NextFallback is the fallback to try after cur, in the order the
	// requested model lists them; nil when there is none left.
	NextFallback(requested, cur *catalog.Model) *catalog.Model
}

// Gates holds each pool's gate. A gate outlives reloads: its waiters do.
// Every call to an endpoint looks its pool's gate up, so reads take no
// lock.
type Gates struct {
	mu sync.Mutex // serialises making gates
	by sync.Map   // key: pool name; value: *gate

	// current is the catalog in service, nil before the first: what a
	// queue that moves on its own (a first token, an end, a timer) reads.
	current func() Catalog
	// pressure is how far a model is over its SLO: 1 at it, above 1 past
	// it, 0 when it has none or too little is known.
	pressure func(model string) float64
	m        *Metrics
}

// NewGates is the gates of every pool, reading the catalog in service
// from current (nil before the first), a model's SLO pressure from
// pressure, and counting in m.
func NewGates(current func() Catalog, pressure func(model string) float64, m *Metrics) *Gates {
	return &Gates{current: current, pressure: pressure, m: m}
}

// gateOf is pool's gate, made on first use.
func (gs *Gates) gateOf(pool string) *Gate {
	if g := gs.Of(pool); g != nil {
		return g
	}
	gs.mu.Lock()
	defer gs.mu.Unlock()
	if g := gs.Of(pool); g != nil {
		return g
	}
	g := &Gate{gs: gs, m: gs.m, pool: pool, virtual: make(map[string]float64), queued: make(map[string]int),
		tenantAdmits: make(map[tenantClass]*admitRing)}
	gs.by.Store(pool, g)
	return g
}

// Of is pool's gate, nil when none was made.
func (gs *Gates) Of(pool string) *Gate {
	if g, ok := gs.by.Load(pool); ok {
		return g.(*Gate)
	}
	return nil
}

// Gate is one pool's admission point.
type Gate struct {
	gs   *Gates // the gates it is one of: what it reads beyond its own state
	m    *Metrics
	pool string

	mu       sync.Mutex // protects the fields below
	waiting  []*waiter
	starting int // admitted by the gate, not yet at their first token or end
	// virtual is each tenant's served tokens over its weight while the
	// queue is busy; it is cleared when the queue empties, so that only
	// contention is shared out. Key: tenant path ("" without keys).
	virtual map[string]float64
	queued  map[string]int // key: model name; waiters, for its bound
	// aims are the TPOT SLOs of the classes that arrived lately, with when
	// each last did; the tightest, times trim, is aim.
	aims []tpotAim
	trim float64 // 0 until the first TPOT SLO arrives
	// arrived is when each class last arrived.
	arrived [numClasses]time.Time
	// classAdmits and tenantAdmits are the times of each class's last
	// admissions, and of each tenant's in each class, while the queue is
	// busy: a waiter's turn comes at their rates.
	classAdmits  [numClasses]admitRing
	tenantAdmits map[tenantClass]*admitRing

	// aim is the step time that the gate holds the pool's endpoints to;
	// zero when no class has a TPOT SLO. Endpoints read it on every
	// request's end.
	aim   atomic.Int64 // a time.Duration
	tight atomic.Int64 // the tightest TPOT SLO in play, a time.Duration
}

// waiter is a request in, or at the door of, a gate's queue.
type waiter struct {
	model    *catalog.Model
	class    Class
	tenant   string
	weight   float64
	tokens   int64 // the prompt, estimated
	arrived  time.Time
	deadline time.Time // arrival plus the class's TTFT SLO
	timer    *time.Timer
	done     chan verdict // receives the gate's one verdict
	// late is set on a critical waiter whose deadline is out of reach and
	// no fallback could take: it waits on, without a timer.
	late bool
	// gone is set when the client has left; g.mu protects it.
	gone bool
}

// verdict is what the gate decided for a waiter.
type verdict struct {
	decision string
	err      *openai.Error // for rejected and expired
	Ticket   *Ticket       // for fell_back: the fallback's admission
}

// Ticket is an admitted request's hold on its gate: it counts as starting
// until its first token or its end.
type Ticket struct {
	g       *Gate
	tenant  string
	weight  float64
	started atomic.Bool // the first token is in, or the request ended
	// fallback sends the request straight to the model's fallbacks, from
	// to (nil: the first).
	fallback bool
	to       *catalog.Model
	queued   bool // it waited in the queue before it was admitted
}

// Admit passes a request for m, of class c from tenant with a prompt of
// tokens, through m's pool's gate, reading that pool in cat.
func (gs *Gates) Admit(ctx context.Context, cat Catalog, m *catalog.Model, c Class, tenant string, tokens int64) (*Ticket, error) {
	g := gs.gateOf(m.Pool)
	now := time.Now()
	w := &waiter{
		model: m, class: c, tokens: tokens, arrived: now,
		deadline: now.Add(m.ClassSLO(c.String()).TTFTp99),
		done:     make(chan verdict, 1), tenant: tenant,
	}
	w.weight = tenantWeight(m, w.tenant)
	am := gs.m.of(m.Name, w.class)

	g.mu.Lock()
	g.arriveLocked(w, now)
	v := g.look(cat, m.Name, now)
	if len(g.waiting) == 0 && g.headroom(&v, w, now) {
		t := g.admitLocked(w, now)
		g.mu.Unlock()
		am.decisions[decisionAdmitted].Inc()
		return t, nil
	}
	if g.fallsBack(&v, w, now) {
		// Its pool cannot serve it in time: a fallback that can take it
		// now does. Gates are locked one at a time.
		g.mu.Unlock()
		if t := gs.fallBack(w, cat); t != nil {
			am.decisions[decisionFellBack].Inc()
			return t, nil
		}
		now = time.Now()
		g.mu.Lock()
		v = g.look(cat, m.Name, now)
	}
	if err := g.refuseAtDoor(&v, w, now); err != nil {
		g.mu.Unlock()
		return nil, err
	}
	g.enqueueLocked(w, v.idle(w.tokens), now)
	am.decisions[decisionQueued].Inc()
	g.pumpLocked(now)
	g.mu.Unlock()

	select {
	case vd := <-w.done:
		return g.answer(w, vd)
	case <-ctx.Done():
	}
	g.mu.Lock()
	w.gone = true
	left := g.removeLocked(w)
	if left {
		g.pumpLocked(time.Now())
	}
	g.mu.Unlock()
	if !left {
		// The gate decided as the client left: an admission is handed
		// back, as the request will not be sent.
		if t, _ := g.answer(w, <-w.done); t != nil {
			t.End(0)
		}
	} else {
		am.wait.Observe(time.Since(w.arrived).Seconds())
	}
	return nil, &openai.Error{Status: openai.StatusClientClosed, Type: "invalid_request_error",
		Message: "The client went away while queued.", Err: ctx.Err()}
}

// arriveLocked notes w's class, and its TPOT SLO, as in play. g.mu is
// held.
func (g *Gate) arriveLocked(w *waiter, now time.Time) {
	g.noteAim(w.model.ClassSLO(w.class.String()).TPOTp99, now)
	g.arrived[w.class] = now
}

// fallsBack reports whether w, which cannot go at once, should go to its
// model's fallbacks rather than wait: it is critical, the model has
// fallbacks, and its queued wait would miss its deadline or the queue is
// full. g.mu is held.
func (g *Gate) fallsBack(v *poolView, w *waiter, now time.Time) bool {
	if w.class != Critical || len(w.model.Fallbacks) == 0 {
		return false
	}
	full := g.queued[w.model.Name] >= w.model.QueueBound()
	return full || g.wait(v, w, now) > w.deadline.Sub(now).Seconds()
}

// refuseAtDoor is the 429 for a request that cannot go at once and should
// not wait; nil when it may queue. g.mu is held.
func (g *Gate) refuseAtDoor(v *poolView, w *waiter, now time.Time) error {
	am := g.m.of(w.model.Name, w.class)
	remaining := w.deadline.Sub(now).Seconds()
	wait := g.wait(v, w, now)
	miss := false
	switch w.class {
	case Standard:
		// A certain miss, or its class's queue ahead of it will not
		// clear in time at the rate it is clearing: waiting would end in
		// the same 429 at the deadline.
		miss = v.idle(w.tokens) > remaining || g.queueWait(w, now) > remaining
	case Sheddable:
		miss = wait > remaining
	}
	full := g.queued[w.model.Name] >= g.places(v, w)
	switch {
	case miss:
		am.decisions[decisionRejected].Inc()
		return overloaded(codeUnreachable, "The model's pool cannot answer within this request's SLO now; try again shortly.", wait)
	case full && !g.evictLocked(w, now):
		am.decisions[decisionRejected].Inc()
		return overloaded(codeQueueFull, "The model's queue is full; try again shortly.", wait)
	}
	return nil // it waits; critical rather than be refused
}

// fallBack admits w at the first of its model's fallbacks that can take
// it now: one without admission, or one whose gate has no queue, has
// headroom and predicts a first token within the fallback's deadline for
// w's class. Nil when none can. It takes each gate's lock in turn, so the
// caller holds none.
func (gs *Gates) fallBack(w *waiter, cat Catalog) *Ticket {
	own := w.model
	for m := cat.NextFallback(own, own); m != nil; m = cat.NextFallback(own, m) {
		switch {
		case !cat.HasPool(m.Pool) || m.Pool == own.Pool:
			continue // nothing to send to, or the gate that just said no
		case !m.Admission.Enabled:
			return &Ticket{fallback: true, to: m}
		}
		now := time.Now()
		fw := &waiter{model: m, class: w.class, tenant: w.tenant, weight: tenantWeight(m, w.tenant),
			tokens: w.tokens, arrived: w.arrived, deadline: w.arrived.Add(m.ClassSLO(w.class.String()).TTFTp99)}
		g := gs.gateOf(m.Pool)
		g.mu.Lock()
		g.arriveLocked(fw, now)
		v := g.look(cat, m.Name, now)
		var t *Ticket
		if len(g.waiting) == 0 && g.headroom(&v, fw, now) && v.best(fw.tokens) <= fw.deadline.Sub(now).Seconds() {
			t = g.admitLocked(fw, now)
			t.fallback, t.to = true, m
		}
		g.mu.Unlock()
		if t != nil {
			gs.m.of(m.Name, w.class).decisions[decisionAdmitted].Inc()
			return t
		}
	}
	return nil
}

// answer turns a verdict into what admitSLO returns.
func (g *Gate) answer(w *waiter, vd verdict) (*Ticket, error) {
	switch vd.decision {
	case decisionAdmitted:
		return &Ticket{g: g, tenant: w.tenant, weight: w.weight, queued: true}, nil
	case decisionFellBack:
		if vd.Ticket != nil {
			vd.Ticket.queued = true
		}
		return vd.Ticket, nil
	}
	return nil, vd.err
}

// Wake moves the queue on: something in the pool has changed.
func (g *Gate) Wake() {
	g.mu.Lock()
	g.pumpLocked(time.Now())
	g.mu.Unlock()
}

// FallbackTo is the fallback model the ticket's request was admitted at,
// to go straight to; nil when it was admitted at its own model's pool, or
// t is nil.
func (t *Ticket) FallbackTo() *catalog.Model {
	if t == nil || !t.fallback {
		return nil
	}
	return t.to
}

// Queued reports whether the ticket's request waited in its gate's queue
// before it was admitted; false for a nil ticket.
func (t *Ticket) Queued() bool { return t != nil && t.queued }

// FirstToken releases the request's place among those starting.
func (t *Ticket) FirstToken() {
	if t == nil || t.g == nil || !t.started.CompareAndSwap(false, true) {
		return
	}
	g := t.g
	g.mu.Lock()
	g.starting--
	g.pumpLocked(time.Now())
	g.mu.Unlock()
}

// End releases the request if its first token did not, and charges its
// tenant the completion tokens it was served.
func (t *Ticket) End(completion int64) {
	if t == nil || t.g == nil {
		return
	}
	t.FirstToken()
	if completion <= 0 {
		return
	}
	g := t.g
	g.mu.Lock()
	if _, ok := g.virtual[t.tenant]; ok {
		g.virtual[t.tenant] += float64(completion) / t.weight
	}
	g.mu.Unlock()
}
