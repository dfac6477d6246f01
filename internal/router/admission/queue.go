package admission

// The queue and its fairness: who waits, in what order, and who is shed.
// Waiters are served by class band, then the tenant with the least served
// tokens for its weight, then the earliest deadline; a full queue sheds
// the latest of a lower band, or of the tenant holding the most places
// for its weight. A waiter's predicted wait is the longer of the pool
// prefilling the prompts ahead of it and its turn at the rates its class
// and its tenant have been admitted at; a timer refuses it when its
// deadline is out of reach.

import (
	"math"
	"slices"
	"time"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/tenant"
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

// wait is the predicted wait of w before its first token, were it
// queued: the longer of the pool prefilling what is owed and queued ahead
// of it, and its turn at the rate the gate admits. The first binds when
// prompts are long; the second when the batch limit is what holds the
// queue. g.mu is held.
func (g *Gate) wait(v *poolView, w *waiter, now time.Time) float64 {
	return max(v.queued(g.tokensAhead(w), w.tokens), g.queueWait(w, now))
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
