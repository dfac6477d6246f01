package admission

// Headroom: whether a pool can take a request now. A gate reads its pool
// as endpoint states for each decision (a poolView): requests waiting for
// their first token against a cap per endpoint, the predicted TTFT against
// the request's deadline, and, while a class's TPOT SLO is in play, the
// endpoints' batch limits and the prefill each owes. The TPOT aim the
// batch limits are held to is the tightest TPOT SLO in play, trimmed by
// how that class's own streams fare.

import (
	"math"
	"slices"
	"time"

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
	// outageStarting is how many of the gate's requests may be starting
	// (admitted, no first token yet) for one below critical to go while
	// no endpoint of its pool is up: enough for a pool that is down to
	// answer its queue, 503 by 503, and for last-resort tries to find it
	// back. A health probe that times out on every endpoint at
	// once (a loaded host) takes them all out for a probe interval; let
	// through whole, the queue (64 prompts, sheddable's of up to 4,096
	// tokens) landed on the pool at once, and critical's first tokens
	// waited seconds behind it.
	outageStarting = PendingPerEndpoint
)

// batchKept is the share of the pool's batch limit that a class leaves
// free for each class above it that is in play (has arrived within
// aimWindow), in whole places, at least one: an arrival of a higher class
// then starts at once instead of waiting for a stream to end.
const batchKept = 0.1

// tpotAim is a TPOT SLO in play at a gate.
type tpotAim struct {
	slo  time.Duration
	last time.Time
}

// poolView is what a gate reads of its pool for one decision.
type poolView struct {
	eps        []pool.State // those not out
	meanPrompt float64
	pending    int64   // requests at the endpoints waiting for their first token
	owed       float64 // prefill owed at the endpoints, in tokens
	perToken   float64 // the pool's seconds per prefill token, all endpoints computing together
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
		// The prompts queued ahead are computed by the pool, each as a
		// prompt of its own: the pool works through them at what its
		// endpoints' own prompt tokens cost (PerToken), whatever one
		// queued prompt costs the first token of another at the same
		// endpoint (PerAhead). Priced at PerAhead, one endpoint whose fit
		// put it at zero, as a vLLM-like one's does at times, made the
		// whole queue free: sheddable queued to miss rather than refused.
		if e.PerToken > 0 {
			rate += 1 / e.PerToken
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
// With no endpoint up it is zero: nothing is certain, and a request may
// wait for one to be back.
func (v *poolView) idle(tokens int64) float64 {
	if len(v.eps) == 0 {
		return 0
	}
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

// headroom reports whether w may go to the pool now: fewer requests wait
// for a first token than the cap, and some endpoint would give w its
// first token by its deadline; and, while a TPOT aim is in play, the
// batch limits have room for w's class and, below critical, some endpoint
// owes little enough prefill. Critical needs no deadline: it is served
// late rather than not at all. With no endpoint up, dispatch answers (a
// 503, or a last-resort try): critical goes, and the others while fewer
// than outageStarting of the gate's requests are starting.
func (g *Gate) headroom(v *poolView, w *waiter, now time.Time) bool {
	if len(v.eps) == 0 {
		return w.class == Critical || g.starting < outageStarting
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
