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

import (
	"context"
	"math"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/tenant"
	"gitea.mynodes.xyz/ilker/llmgw/internal/openai"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/pool"
)

const (
	// PendingPerEndpoint is how many requests waiting for their
	// first token the gate lets each endpoint have. vLLM's chunked
	// prefill works on a few prompts at once; past four, a new prompt
	// mostly waits behind the others, and waiting in the gate keeps the
	// order ours to choose.
	PendingPerEndpoint = 4
	// admitPendingUnderPressure is the same for all but critical while
	// the model's recent p99 is past its SLO (pressure above 1): one
	// prompt at a time until the pool catches up.
	admitPendingUnderPressure = 1
	// The aim's trim: the share of the tightest TPOT SLO in play that the
	// pool's step time is held to. A request's TPOT is the mean of its
	// gaps, and a short stream that meets a prompt's prefill step or two
	// misses though the mean step is within the SLO; so the trim follows
	// the tight class's own streams: cut by trimCut on each that misses,
	// raised by trimCut × (1−tpotQuantile)/tpotQuantile on each that
	// meets, it settles where 99 in 100 meet. It starts at trimStart and
	// stays within [trimMin, 1].
	trimStart    = 0.5
	trimMin      = 0.2
	trimCut      = 0.1
	tpotQuantile = 0.99
	// aimWindow is how long a class's TPOT SLO stays in play after its
	// last arrival: its streams run that long at most, in the main.
	aimWindow = 30 * time.Second
	// prefillTPOTs bounds the prefill an endpoint may owe, in TPOT SLOs
	// of the tightest class in play, before it takes another prompt of a
	// class below critical: a server works through queued prompts in
	// back-to-back steps, each a chunk of a prompt as well as a token of
	// every stream, and a short stream that meets a run of them misses
	// its TPOT though the mean step is fine.
	prefillTPOTs = 2
)

// The rate the gate admits at, which a waiter's place in the queue turns
// into a wait: taken over the last admitsKept admissions, believed with
// admitsBelieved of them in the last admitsWindow.
const (
	admitsKept     = 64
	admitsBelieved = 8
	admitsWindow   = 10 * time.Second
	// tenantAdmitsKept bounds the tenants whose rates a gate keeps; past
	// it they start over.
	tenantAdmitsKept = 4096
)

// sheddableQueueShare is the share of a model's queue that sheddable
// requests may fill while a class above theirs is in play. With the whole
// queue theirs, a full queue shed sheddable waiters for each arrival
// above them, answering 429 after they had waited: on mixed at 1.5×
// capacity the median 429 took 26 ms. With three quarters, none was shed
// and the median 429 took 0.4 ms; with half, the same, and 3% of the
// requests fewer were served.
const sheddableQueueShare = 0.75

// batchKept is the share of the pool's batch limit that a class leaves
// free for each class above it that is in play (has arrived within
// aimWindow), in whole places, at least one: an arrival of a higher class
// then starts at once instead of waiting for a stream to end.
const batchKept = 0.1

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

// tpotAim is a TPOT SLO in play at a gate.
type tpotAim struct {
	slo  time.Duration
	last time.Time
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

// poolView is what a gate reads of its pool for one decision.
type poolView struct {
	eps        []pool.State // those not out
	meanPrompt float64
	pending    int64   // requests at the endpoints waiting for their first token
	owed       float64 // prefill owed at the endpoints, in tokens
	perToken   float64 // the pool's seconds per prefill token queued ahead, all endpoints together
	base       float64 // the least fixed first-token cost of any endpoint
	extra      int64   // prompt tokens admitted in this look, not yet at an endpoint
	pressure   float64
	// batched is whether the pool is held to a batch: a TPOT aim is in
	// play and every endpoint has a batch limit. batchLimit is their sum,
	// batchFree the room left under them.
	batched    bool
	batchLimit float64
	batchFree  int64
	admitted   int64 // requests admitted in this look
	// above is, for each class, how many classes above it are in play.
	above [numClasses]int
}

// look reads the pool in cat for one decision about a request for
// model.
func (g *Gate) look(cat Catalog, model string, now time.Time) poolView {
	v := poolView{pressure: g.gs.pressure(model), base: math.Inf(1)}
	if cat == nil {
		return v
	}
	batched := g.TPOTAim() > 0
	eps, meanPrompt, ok := cat.PoolState(g.pool, now, batched)
	if !ok {
		return v
	}
	v.eps, v.meanPrompt, v.batched = eps, meanPrompt, batched
	rate := 0.0
	for c := range numClasses {
		for _, t := range g.arrived[:c] {
			if !t.IsZero() && now.Sub(t) <= aimWindow {
				v.above[c]++
			}
		}
	}
	for _, e := range eps {
		v.batched = v.batched && e.BatchLimit > 0
		v.batchLimit += e.BatchLimit
		v.batchFree += e.BatchRoom
		v.pending += e.Own.Pending
		v.owed += float64(e.Own.Owed)
		v.base = min(v.base, e.Base)
		// What queued prefill costs the prompts behind it: nothing on an
		// endpoint whose first tokens do not wait for the prompts ahead
		// (a slot a request), and then nothing for the pool.
		if e.PerAhead > 0 {
			rate += 1 / e.PerAhead
		} else {
			rate = math.Inf(1)
		}
	}
	if rate > 0 {
		v.perToken = 1 / rate
	}
	return v
}

// best is the least predicted TTFT, in seconds, of a tokens-long prompt at
// any endpoint, with the prompts admitted in this look ahead of it.
func (v *poolView) best(tokens int64) float64 {
	b := math.Inf(1)
	for i := range v.eps {
		b = min(b, v.eps[i].PredictTTFT(tokens+v.extra, v.meanPrompt))
	}
	return b
}

// idle is the least TTFT a tokens-long prompt could have if the pool had
// nothing else to do: a deadline closer than this is certainly missed.
func (v *poolView) idle(tokens int64) float64 {
	b := math.Inf(1)
	for _, e := range v.eps {
		b = min(b, e.Base+e.PerToken*float64(tokens))
	}
	return b
}

// queued is the predicted TTFT of a tokens-long prompt behind ahead
// tokens of queued prompts: the whole pool prefilling what it owes, then
// the queue, then it.
func (v *poolView) queued(ahead, tokens int64) float64 {
	if len(v.eps) == 0 {
		return 0
	}
	return v.base + v.perToken*(v.owed+float64(v.extra+ahead+tokens))
}

// batchRoom reports whether a request of class c fits the endpoints'
// batch limits: the room left, less what this look admitted, is more than
// what the class must leave to those above it in play.
func (v *poolView) batchRoom(c Class) bool {
	keep := int64(math.Ceil(v.batchLimit * batchKept * float64(v.above[c])))
	return v.batchFree-v.admitted > keep
}

// prefillRoom reports whether some endpoint can take a tokens-long
// prompt without stalling the streams it decodes for long: it owes no
// prefill, or what it owes with this prompt (and those admitted in this
// look) takes it no more than prefillTPOTs of the tightest TPOT SLO.
func (v *poolView) prefillRoom(tokens int64, tight time.Duration) bool {
	bound := prefillTPOTs * tight.Seconds()
	for _, e := range v.eps {
		owed := e.Own.Owed + v.extra
		if owed <= 0 || e.Decode.PerPrefillToken*float64(owed+tokens) <= bound {
			return true
		}
	}
	return false
}

// headroom reports whether w may go to the pool now: an endpoint is up
// (with none, dispatch answers), fewer requests wait for a first token
// than the cap, and some endpoint would give w its first token by its
// deadline; and, while a TPOT aim is in play, the batch limits have room
// for w's class and, below critical, some endpoint owes little enough
// prefill. Critical needs no deadline: it is served late rather than not
// at all.
func (g *Gate) headroom(v *poolView, w *waiter, now time.Time) bool {
	if len(v.eps) == 0 {
		return true
	}
	perEndpoint := PendingPerEndpoint
	if v.pressure > 1 && w.class != Critical {
		perEndpoint = admitPendingUnderPressure
	}
	if max(int64(g.starting), v.pending) >= int64(perEndpoint*len(v.eps)) {
		return false
	}
	if v.batched && !v.batchRoom(w.class) {
		return false
	}
	if v.batched && w.class != Critical && !v.prefillRoom(w.tokens, g.tightestTPOT()) {
		return false
	}
	return w.class == Critical || v.best(w.tokens) <= w.deadline.Sub(now).Seconds()
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

// noteAim puts a TPOT SLO that just arrived in play, lets those not seen
// for aimWindow go, and sets the gate's aim from the tightest left. g.mu
// is held.
func (g *Gate) noteAim(slo time.Duration, now time.Time) {
	if slo > 0 {
		i := slices.IndexFunc(g.aims, func(a tpotAim) bool { return a.slo == slo })
		if i < 0 {
			g.aims = append(g.aims, tpotAim{slo: slo})
			i = len(g.aims) - 1
		}
		g.aims[i].last = now
	}
	g.aims = slices.DeleteFunc(g.aims, func(a tpotAim) bool { return now.Sub(a.last) > aimWindow })
	g.setAimLocked()
}

// tightest is the tightest TPOT SLO in play; zero for none. g.mu is held.
func (g *Gate) tightest() time.Duration {
	var t time.Duration
	for _, a := range g.aims {
		if t == 0 || a.slo < t {
			t = a.slo
		}
	}
	return t
}

func (g *Gate) setAimLocked() {
	if g.trim == 0 {
		g.trim = trimStart
	}
	g.tight.Store(int64(g.tightest()))
	g.aim.Store(int64(float64(g.tightest()) * g.trim))
}

// NoteTPOT trims the aim by one stream served through the gate, of a class
// whose TPOT SLO is slo: only the tightest class's streams count.
func (g *Gate) NoteTPOT(slo, tpot time.Duration) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if slo <= 0 || slo != g.tightest() {
		return
	}
	if tpot > slo {
		g.trim *= 1 - trimCut
	} else {
		g.trim *= 1 + trimCut*(1-tpotQuantile)/tpotQuantile
	}
	g.trim = min(max(g.trim, trimMin), 1)
	g.setAimLocked()
}

// tightestTPOT is the tightest TPOT SLO in play; zero for none.
func (g *Gate) tightestTPOT() time.Duration { return time.Duration(g.tight.Load()) }

// TPOTAim is the step time the gate holds its pool to; zero for none.
func (g *Gate) TPOTAim() time.Duration { return time.Duration(g.aim.Load()) }

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

// places is how many of the queue's places w's model may fill when w
// arrives: all of them, but for sheddable while a class above it is in
// play only sheddableQueueShare, so that the others find room without
// shedding a sheddable waiter that has been waiting, and a sheddable
// request is refused at once instead.
func (g *Gate) places(v *poolView, w *waiter) int {
	bound := w.model.QueueBound()
	if w.class == Sheddable && v.above[Sheddable] > 0 {
		return max(1, int(float64(bound)*sheddableQueueShare))
	}
	return bound
}

// wait is the predicted wait of w before its first token, were it
// queued: the longer of the pool prefilling what is owed and queued ahead
// of it, and its turn at the rate the gate admits. The first binds when
// prompts are long; the second when the batch limit is what holds the
// queue. g.mu is held.
func (g *Gate) wait(v *poolView, w *waiter, now time.Time) float64 {
	return max(v.queued(g.tokensAhead(w), w.tokens), g.queueWait(w, now))
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

// queueWait is how long w would wait in the queue: its turn at the rate
// the gate has been admitting its class — the waiters of its class served
// before it, in the queue's order, and it — and its turn at the rate its
// tenant's requests of the class have been admitted — its tenant's
// waiters before it, and it. The first rate is what the bands above leave
// the class; the second is the tenant's share of that, which for a tenant
// sending more than its share is what it gets, however quiet tenants'
// requests go ahead of its backlog. Zero while neither rate is known.
func (g *Gate) queueWait(w *waiter, now time.Time) float64 {
	c := w.class
	Class, tenant := 1, 1
	for _, x := range g.waiting {
		if x.class == c && !g.before(w, x) {
			Class++
			if x.tenant == w.tenant {
				tenant++
			}
		}
	}
	wait := 0.0
	if turn, ok := g.classAdmits[c].turn(now); ok {
		wait = float64(Class) * turn
	}
	if r := g.tenantAdmits[tenantClass{w.tenant, c}]; r != nil {
		if turn, ok := r.turn(now); ok {
			wait = max(wait, float64(tenant)*turn)
		}
	}
	return wait
}

// admitRing holds the times of the last admissions of a class, or of a
// tenant's requests of a class.
type admitRing struct {
	at [admitsKept]time.Time
	n  int // admissions ever; n%admitsKept is where the next goes
}

func (r *admitRing) note(now time.Time) {
	r.at[r.n%admitsKept] = now
	r.n++
}

// turn is the time between two admissions, over the last admitsKept;
// false with fewer than admitsBelieved in the last admitsWindow.
func (r *admitRing) turn(now time.Time) (float64, bool) {
	k := min(r.n, admitsKept)
	if k < admitsBelieved {
		return 0, false
	}
	span := now.Sub(r.at[(r.n-k)%admitsKept])
	if span <= 0 || span > admitsWindow {
		return 0, false
	}
	return span.Seconds() / float64(k), true
}

// tenantClass keys a tenant's admissions of a class.
type tenantClass struct {
	tenant string
	class  Class
}

// tokensAhead is the prompt tokens of the waiters that would go before w.
func (g *Gate) tokensAhead(w *waiter) int64 {
	var n int64
	for _, x := range g.waiting {
		if x.class < w.class || x.class == w.class && !x.deadline.After(w.deadline) {
			n += x.tokens
		}
	}
	return n
}

// evictLocked makes room for w in a full queue of its model, and reports
// whether it could. It sheds the waiter in the lowest band below w's with
// the latest deadline; or, with none below, the latest of w's band held
// by the tenant with the most places for its weight, when that is more
// than w's tenant would hold with w — so that one tenant cannot keep
// the others out of a full queue.
func (g *Gate) evictLocked(w *waiter, now time.Time) bool {
	var victim *waiter
	for _, x := range g.waiting {
		if x.model.Name != w.model.Name || x.class <= w.class {
			continue
		}
		if victim == nil || x.class > victim.class || x.class == victim.class && x.deadline.After(victim.deadline) {
			victim = x
		}
	}
	if victim == nil {
		victim = g.crowding(w)
	}
	if victim == nil {
		return false
	}
	g.removeLocked(victim)
	am := g.m.of(victim.model.Name, victim.class)
	am.wait.Observe(now.Sub(victim.arrived).Seconds())
	am.decisions[decisionRejected].Inc()
	victim.done <- verdict{decision: decisionRejected,
		err: overloaded(codeShed, "The request was shed to make room for more important ones or other tenants; try again shortly.", now.Sub(victim.arrived).Seconds())}
	return true
}

// crowding is the latest waiter of w's model and band held by the tenant
// with the most places for its weight, if that tenant holds more than
// w's would with w; nil otherwise.
func (g *Gate) crowding(w *waiter) *waiter {
	places := make(map[string]float64) // key: tenant; value: places over weight
	for _, x := range g.waiting {
		if x.model.Name == w.model.Name && x.class == w.class {
			places[x.tenant] += 1 / x.weight
		}
	}
	mine := places[w.tenant] + 1/w.weight
	var victim *waiter
	for _, x := range g.waiting {
		if x.model.Name != w.model.Name || x.class != w.class || x.tenant == w.tenant || places[x.tenant] <= mine {
			continue
		}
		if victim == nil || places[x.tenant] > places[victim.tenant] ||
			places[x.tenant] == places[victim.tenant] && x.deadline.After(victim.deadline) {
			victim = x
		}
	}
	return victim
}

func (g *Gate) enqueueLocked(w *waiter, idle float64, now time.Time) {
	if _, ok := g.virtual[w.tenant]; !ok {
		// A tenant new to the queue starts level with the least served
		// of those waiting, not at zero: idling earns no credit.
		least := math.Inf(1)
		for _, x := range g.waiting {
			least = min(least, g.virtual[x.tenant])
		}
		if math.IsInf(least, 1) {
			least = 0
		}
		g.virtual[w.tenant] = least
	}
	g.waiting = append(g.waiting, w)
	g.queued[w.model.Name]++
	g.m.of(w.model.Name, w.class).depth.Inc()
	// Past this moment even an idle pool misses the deadline: standard
	// and sheddable are refused then, critical falls back if it can.
	if (w.class != Critical || len(w.model.Fallbacks) > 0) && !w.late {
		at := w.deadline.Add(-time.Duration(idle * float64(time.Second)))
		w.timer = time.AfterFunc(at.Sub(now), func() { g.expire(w) })
	}
}

// removeLocked takes w out of the queue and reports whether it was there.
func (g *Gate) removeLocked(w *waiter) bool {
	i := slices.Index(g.waiting, w)
	if i < 0 {
		return false
	}
	g.waiting = slices.Delete(g.waiting, i, i+1)
	g.queued[w.model.Name]--
	if g.queued[w.model.Name] == 0 {
		delete(g.queued, w.model.Name)
	}
	if w.timer != nil {
		w.timer.Stop()
	}
	am := g.m.of(w.model.Name, w.class)
	am.depth.Dec()
	if len(g.waiting) == 0 {
		clear(g.virtual)
		clear(g.tenantAdmits)
	}
	return true
}

// expire refuses w once its deadline is out of reach, if it is still
// waiting; critical goes to a fallback that can take it, or, with none,
// waits on, to be served late rather than not at all.
func (g *Gate) expire(w *waiter) {
	g.mu.Lock()
	if !g.removeLocked(w) {
		g.mu.Unlock()
		return
	}
	am := g.m.of(w.model.Name, w.class)
	if w.class != Critical {
		defer g.mu.Unlock()
		am.wait.Observe(time.Since(w.arrived).Seconds())
		am.decisions[decisionExpired].Inc()
		w.done <- verdict{decision: decisionExpired,
			err: overloaded(codeUnreachable, "The request waited until its SLO could no longer be met; try again shortly.", time.Since(w.arrived).Seconds())}
		return
	}
	g.mu.Unlock()
	if cat := g.gs.current(); cat != nil {
		if t := g.gs.fallBack(w, cat); t != nil {
			am.wait.Observe(time.Since(w.arrived).Seconds())
			am.decisions[decisionFellBack].Inc()
			w.done <- verdict{decision: decisionFellBack, Ticket: t}
			return
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if w.gone {
		// It left while no gate held it: it waits for this verdict.
		w.done <- verdict{decision: decisionExpired}
		return
	}
	w.late = true
	g.enqueueLocked(w, 0, time.Now())
	g.pumpLocked(time.Now())
}

// next is the waiter to serve first: the most important band, then the
// tenant with the least served tokens for its weight, then the earliest
// deadline.
func (g *Gate) next() *waiter {
	var best *waiter
	for _, w := range g.waiting {
		if best == nil || g.before(w, best) {
			best = w
		}
	}
	return best
}

func (g *Gate) before(a, b *waiter) bool {
	if a.class != b.class {
		return a.class < b.class
	}
	if va, vb := g.virtual[a.tenant], g.virtual[b.tenant]; va != vb {
		return va < vb
	}
	return a.deadline.Before(b.deadline)
}

// pumpLocked admits waiters in order while the pool has headroom for the
// first of them.
func (g *Gate) pumpLocked(now time.Time) {
	if len(g.waiting) == 0 {
		return
	}
	first := g.next()
	v := g.look(g.gs.current(), first.model.Name, now)
	for len(g.waiting) > 0 {
		w := g.next()
		if !g.headroom(&v, w, now) {
			return
		}
		g.removeLocked(w)
		g.admitLocked(w, now)
		v.extra += w.tokens
		v.admitted++
		am := g.m.of(w.model.Name, w.class)
		am.wait.Observe(now.Sub(w.arrived).Seconds())
		am.decisions[decisionAdmitted].Inc()
		w.done <- verdict{decision: decisionAdmitted}
	}
}

// admitLocked counts w as starting and charges its tenant its prompt.
func (g *Gate) admitLocked(w *waiter, now time.Time) *Ticket {
	g.classAdmits[w.class].note(now)
	k := tenantClass{w.tenant, w.class}
	r := g.tenantAdmits[k]
	if r == nil {
		if len(g.tenantAdmits) >= tenantAdmitsKept {
			clear(g.tenantAdmits) // the rates start over; they are estimates
		}
		r = new(admitRing)
		g.tenantAdmits[k] = r
	}
	r.note(now)
	g.starting++
	if len(g.waiting) > 0 {
		g.virtual[w.tenant] += float64(w.tokens) / w.weight
	}
	return &Ticket{g: g, tenant: w.tenant, weight: w.weight}
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

// tenantWeight is a tenant's weight for m: its nearest listed ancestor's,
// or 1.
func tenantWeight(m *catalog.Model, path string) float64 {
	if path == "" || len(m.Admission.TenantWeights) == 0 {
		return 1
	}
	ps := tenant.Prefixes(path)
	for i := len(ps) - 1; i >= 0; i-- {
		if w, ok := m.Admission.TenantWeights[ps[i]]; ok && w > 0 {
			return w
		}
	}
	return 1
}
