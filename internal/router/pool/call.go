package pool

// A call's life at its endpoint, the one every path that sends a call
// goes through (the router's dispatch and hedged races, the virtual
// clock): Begin when it is sent, FirstToken, a Gap for each later token
// of a stream, End when it is over, and Confirm with the cached tokens
// its answer reports. Between them the endpoint's counts, its learned
// models, the pool's mean prompt and its prefix index each hear of the
// call once, in the same order, whoever sends it.

import "time"

// Attempt is one call of a request to one endpoint of its pool, from
// Begin to End. Its methods run on the call's goroutine; the Route it
// was begun with is shared by the request's calls, hedged or retried.
type Attempt struct {
	p    *Pool
	rt   *Route
	i    int
	call Call
	slot int // the slot its prompt was given on a slot index; -1 for none
}

// PlaceFunc hears what a pool's calls place in its prefix index: the
// blocks, hashed for an index of block bytes, promised to endpoint i
// when a call is sent there, or dropped from it when the call computed
// nothing.
type PlaceFunc func(i, block int, hashes []uint64, drop bool)

// OnPlace sets who hears the pool's placements (the gateways' bus); nil
// for none. It is set once, before the pool serves.
func (p *Pool) OnPlace(f PlaceFunc) { p.placed = f }

// Begin sends a call for the request rt was prepared for to endpoint i
// at now. The endpoint counts it in flight and owing the prompt it does
// not hold; the pool's mean prompt takes that share; the index promises
// the prompt's blocks there. A streamed call teaches the endpoint's
// models, or its cold start where the endpoint said rt's model was not
// loaded; a critical one counts, past its first token, as a stream to
// keep prefill off.
func (p *Pool) Begin(rt *Route, i int, stream, critical bool, now time.Time) Attempt {
	uncached := rt.Uncached(i)
	a := Attempt{p: p, rt: rt, i: i, call: p.Send(i, uncached, stream, critical, now), slot: -1}
	if rt.Model != "" {
		loaded, known := p.endpoints[i].holds(rt.Model, now, p.maxAge)
		a.call.cold = known && !loaded
	}
	p.NotePrompt(uncached)
	if rt.Indexed() {
		a.place(rt.Hashes(), false)
	}
	return a
}

// Endpoint is the index of the endpoint the call went to.
func (a *Attempt) Endpoint() int { return a.i }

// FirstToken ends the call's prefill, teaches the endpoint what it cost,
// and notes the prompt computed there. It reports false, and does
// nothing, after the first time.
func (a *Attempt) FirstToken(now time.Time) bool {
	if !a.call.FirstToken(now) {
		return false
	}
	a.rt.Computed(a.i)
	return true
}

// Started reports whether the call's first token is in.
func (a *Attempt) Started() bool { return a.call.Started() }

// Gap takes one inter-token gap of the call's stream.
func (a *Attempt) Gap(d time.Duration) { a.call.Gap(d) }

// End takes the call off its endpoint's counts, and off the slot it was
// given on a slot index. With aim, the step time admission holds the
// endpoint to, the endpoint's batch limit is decided on the way; zero
// leaves it alone. A call that computed nothing (it was refused, failed
// before a byte came back, or lost a hedged race before its first token)
// leaves none of the blocks it was promised at the endpoint.
func (a *Attempt) End(aim time.Duration, computed bool) {
	a.call.Done(aim)
	if a.rt.Indexed() {
		a.rt.Index().releaseSlot(a.i, a.slot)
	}
	if !computed && a.rt.Indexed() && len(a.rt.Hashes()) > int(a.rt.Matched(a.i)) {
		a.place(a.rt.Hashes()[a.rt.Matched(a.i):], true)
	}
}

// Confirm checks the prefix the index predicted at the endpoint against
// the call's answer, of prompt tokens with cached of them found cached
// (Route.Confirm). It returns the tokens predicted cached and how many
// of those the answer confirmed.
func (a *Attempt) Confirm(prompt, cached int64) (predicted, confirmed int64) {
	return a.rt.Confirm(a.p.endpoints[a.i], a.i, prompt, cached)
}

func (a *Attempt) place(hashes []uint64, drop bool) {
	x := a.rt.Index()
	if drop {
		x.Drop(hashes, a.i)
	} else {
		a.slot = x.promise(hashes, a.i)
	}
	if a.p.placed != nil {
		a.p.placed(a.i, x.Block(), hashes, drop)
	}
}

// Call is one call's mark on its endpoint's counts, from Send to Done:
// in flight all along, and until its first token pending, owing its
// uncached prompt. Its methods run on the call's goroutine.
type Call struct {
	e        *Endpoint
	uncached int64 // prompt tokens the endpoint was expected to compute
	// ahead and waiting are the prefill owed before the call when it was
	// sent, in tokens, and the requests the server reported queued: with
	// uncached, what its first token's time is learned against.
	ahead, waiting float64
	at             time.Time // when it was sent
	// stale reports that the cost model was stale when the call was
	// sent: its first token starts the fit again.
	stale    bool
	stream   bool
	critical bool // the request is of class critical
	first    bool // the first token is in
	// cold reports that the endpoint said, as the call was sent, that
	// its model was not loaded: its first token teaches the cold start,
	// not the cost model.
	cold bool
}

// Send counts a call to endpoint i sent at now, whose prompt the endpoint
// must compute uncached tokens of: the endpoint's part of Begin, without
// the pool's mean prompt and index. A streamed call teaches the cost model
// at its first token; a critical one counts, past it, as a stream to keep
// prefill off.
func (p *Pool) Send(i int, uncached int64, stream, critical bool, now time.Time) Call {
	e := p.endpoints[i]
	peers := e.Peers(now)
	before := Counts{Inflight: e.inflight.Load(), Pending: e.pending.Load(), Owed: e.owed.Add(uncached) - uncached}
	tokens, waiting := ahead(before, e.freshLoad(now, p.maxAge), peers, p.MeanPrompt())
	stale := e.costStale(now)
	e.inflight.Add(1)
	e.pending.Add(1)
	return Call{e: e, uncached: uncached, ahead: tokens, waiting: waiting, at: now, stale: stale, stream: stream, critical: critical}
}

// FirstToken ends the call's prefill owed, and teaches the endpoint what
// the first token cost. It reports false, and does nothing, after the
// first time. A plain answer's headers come with its last token, so only
// streams teach.
func (c *Call) FirstToken(now time.Time) bool {
	if c.first {
		return false
	}
	c.first = true
	decoding := c.e.inflight.Load() - c.e.pending.Add(-1) - 1 // the others
	c.e.owed.Add(-c.uncached)
	c.e.gapPrompt.Add(c.uncached * max(decoding, 0))
	if c.critical {
		c.e.critical.Add(1)
	}
	switch {
	case c.stream && c.cold:
		c.e.learnColdStart(now.Sub(c.at).Seconds() - c.e.firstTokenCost().Predict(float64(c.uncached), c.ahead, c.waiting))
	case c.stream:
		if c.stale {
			c.e.forget(c.at)
		}
		c.e.learn(now, now.Sub(c.at), float64(c.uncached), c.ahead, c.waiting)
	}
	return true
}

// Started reports whether the call's first token is in.
func (c *Call) Started() bool { return c.first }

// Gap counts one inter-token gap of the call's stream.
func (c *Call) Gap(d time.Duration) {
	c.e.gapNanos.Add(int64(d))
	c.e.gapStreams.Add(c.e.inflight.Load() - c.e.pending.Load())
	c.e.gaps.Add(1)
}

// Done takes the call off its endpoint's counts. With aim, the step time
// admission holds the endpoint to, it decides the batch limit on the way;
// zero leaves the limit alone.
func (c *Call) Done(aim time.Duration) {
	if !c.first {
		c.e.pending.Add(-1)
		c.e.owed.Add(-c.uncached)
	} else if c.critical {
		c.e.critical.Add(-1)
	}
	n := c.e.inflight.Add(-1)
	if c.stream && c.first {
		c.e.learnDecode()
	}
	c.e.tuneBatch(aim, n+1)
}
