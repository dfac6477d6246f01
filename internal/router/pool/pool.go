// Package pool is what routing knows of a pool's endpoints, and how it
// picks one: each endpoint's calls in flight, scrape, health, ejection,
// first-token cost model and batch limit, learned through one lifecycle
// of a call (Begin, FirstToken, Gap, End, Confirm); the prefix index; the
// retry budget; and the routing policies, one file each.
package pool

// What routing knows of a pool: its endpoints and the prompts it has
// been sent, and the entry point that hands a request to the pool's
// policy. The policies themselves are in policy_*.go.

import (
	"math"
	"strings"
	"sync/atomic"
	"time"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
)

// Pool is a catalog pool with what routing has learned of its
// endpoints.
type Pool struct {
	name      string
	policy    string
	endpoints []*Endpoint
	order     []int // endpoint indexes, each repeated by its weight
	weight    []int // by endpoint index
	next      atomic.Uint64
	maxAge    time.Duration // a scrape older is unknown

	// index maps prompt blocks to the endpoints that hold them. It is
	// replaced, empty, when a scrape reports another KV-cache block size.
	index   atomic.Pointer[PrefixIndex]
	kvBlock atomic.Int32 // the KV-cache block the index is built for, in tokens
	// slots is how many slots each endpoint caches a prompt in, on a pool
	// whose servers cache per slot; zero on one with a block cache.
	slots atomic.Int32

	// meanPrompt is the mean uncached prompt of recent requests, in tokens
	// (float64 bits): what a request another gateway queued is assumed
	// to owe.
	meanPrompt atomic.Uint64

	budget RetryBudget
	placed PlaceFunc // hears the index's placements; nil for none
}

// New builds a pool from its catalog entry, keeping prev's endpoint
// state for URLs that stay, and prev's prefix index when the endpoints
// stay in the same order (the index knows them by position). An
// endpoint's calls go to its URL followed by one of paths.
func New(p catalog.Pool, prev *Pool, paths []string) *Pool {
	np := &Pool{name: p.Name, policy: p.Policy, maxAge: p.Metrics.MaxAge}
	if np.policy == "" {
		np.policy = catalog.PolicyAuto
	}
	if np.maxAge <= 0 {
		np.maxAge = time.Second
	}
	np.budget.share = p.RetryBudget
	sameOrder := prev != nil && len(prev.endpoints) == len(p.Endpoints)
	for i, e := range p.Endpoints {
		u := strings.TrimRight(e.URL, "/")
		name := e.Name
		if name == "" {
			name = u
		}
		var ep *Endpoint
		if prev != nil {
			for _, old := range prev.endpoints {
				if old.url == u && old.name == name {
					ep = old
				}
			}
		}
		if ep == nil {
			ep = newEndpoint(name, u, paths)
		}
		if sameOrder && prev.endpoints[i].url != u {
			sameOrder = false
		}
		np.endpoints = append(np.endpoints, ep)
		np.weight = append(np.weight, max(e.Weight, 1))
		for range max(e.Weight, 1) {
			np.order = append(np.order, i)
		}
	}
	if catalog.SlotCache(p.Kind) {
		np.slots.Store(int32(slotsOf(p)))
	}
	if sameOrder && prev.slots.Load() == np.slots.Load() {
		np.index.Store(prev.index.Load())
		np.kvBlock.Store(prev.kvBlock.Load())
		np.meanPrompt.Store(prev.meanPrompt.Load())
		np.budget.carry(&prev.budget)
	} else {
		np.kvBlock.Store(DefaultKVBlock)
		np.index.Store(np.newIndex())
	}
	return np
}

// slotsOf is the slots each endpoint of p runs, as configured, else its
// kind's default.
func slotsOf(p catalog.Pool) int {
	switch {
	case p.Slots > 0:
		return p.Slots
	case p.Kind == catalog.KindOllama:
		return DefaultSlotsOllama
	}
	return DefaultSlotsLlamaCpp
}

// newIndex is an empty index for p's endpoints, KV-cache block and slots.
func (p *Pool) newIndex() *PrefixIndex {
	block := BlockBytes(int(p.kvBlock.Load()))
	if n := p.slots.Load(); n > 0 {
		return newSlotIndex(len(p.endpoints), block, int(n))
	}
	return newPrefixIndex(len(p.endpoints), block)
}

// Name is the pool's name.
func (p *Pool) Name() string { return p.name }

// Policy is the pool's routing policy.
func (p *Pool) Policy() string { return p.policy }

// Endpoints is the pool's endpoints, in the catalog's order: an
// endpoint's index here is its index everywhere. The caller does not
// change the slice.
func (p *Pool) Endpoints() []*Endpoint { return p.endpoints }

// Budget is the pool's retry budget.
func (p *Pool) Budget() *RetryBudget { return &p.budget }

// Index is the pool's prefix index in use.
func (p *Pool) Index() *PrefixIndex { return p.index.Load() }

// SetKVBlock notes the KV-cache block size a scrape reported, starting an
// empty index when it differs from the one in use.
func (p *Pool) SetKVBlock(tokens int) {
	if tokens <= 0 || int(p.kvBlock.Load()) == tokens {
		return
	}
	p.kvBlock.Store(int32(tokens))
	p.index.Store(p.newIndex())
}

// SetSlots notes the slots a scrape of endpoint e's /slots listed, on a
// pool whose servers cache per slot: the index models that many there
// from now, keeping the prompts of the slots that stay.
func (p *Pool) SetSlots(e *Endpoint, n int) {
	if n <= 0 || p.slots.Load() == 0 {
		return
	}
	for i, ep := range p.endpoints {
		if ep == e {
			p.index.Load().resizeSlots(i, n)
		}
	}
}

// Indexed reports whether p's policy reads the prefix index, and so
// whether p keeps one up to date.
func (p *Pool) Indexed() bool {
	return p.policy != catalog.PolicyRoundRobin && p.policy != catalog.PolicyLeastRequest
}

// EndpointNamed is the index of p's endpoint named name, or -1.
func (p *Pool) EndpointNamed(name string) int {
	for i, e := range p.endpoints {
		if e.name == name {
			return i
		}
	}
	return -1
}

// Candidates is the set of endpoints a pick may take, as bits by index:
// those not in tried and not out, or with relaxed those not in tried.
func (p *Pool) Candidates(tried uint64, now time.Time, relaxed bool) uint64 {
	var c, full uint64
	t := now.UnixNano()
	for i, e := range p.endpoints {
		if tried&(1<<i) == 0 && (relaxed || !e.Out(t)) {
			c |= 1 << i
			if limit, room := e.batchRoom(); limit > 0 && room == 0 {
				full |= 1 << i
			}
		}
	}
	if c&^full != 0 {
		// An endpoint at its batch limit would slow every stream it runs
		// past the TPOT aim: another is taken while one has room.
		c &^= full
	}
	return c
}

// Pick is the endpoint the pool's policy takes for rt among candidates,
// and why; -1 when there are none. Where rt names its model as the
// servers list what they have loaded, auto charges a cold start to the
// endpoints where it is not loaded; the other policies, which predict no
// first token, pick among the candidates where it is loaded, while there
// are any.
func (p *Pool) Pick(rt *Route, candidates uint64, now time.Time) (int, string) {
	if candidates == 0 {
		return -1, ""
	}
	rt.predicted = 0
	var cold uint64
	if rt.Model != "" {
		var warm uint64
		warm, cold = p.loadedAt(rt.Model, candidates, now)
		if p.policy != catalog.PolicyAuto && warm != 0 {
			candidates = warm
		}
	}
	switch p.policy {
	case catalog.PolicyRoundRobin:
		return p.pickRoundRobin(candidates), reasonTurn
	case catalog.PolicyLeastRequest:
		return p.pickLeastRequest(candidates), reasonLeastRequest
	case catalog.PolicyPrefix:
		return p.pickPrefix(rt, candidates)
	case catalog.PolicyGIE:
		return p.pickGIE(rt, candidates, now), reasonScore
	case catalog.PolicySGLang:
		return p.pickSGLang(rt, candidates)
	default:
		return p.pickAuto(rt, candidates, cold, now)
	}
}

// Predicted is the time to first token predicted for rt at endpoint i, in
// seconds: the last pick's own when its policy made one (auto), else the
// one auto would make.
func (p *Pool) Predicted(rt *Route, i int, now time.Time) float64 {
	if rt.predicted > 0 {
		return rt.predicted
	}
	e := p.endpoints[i]
	return e.predictTTFT(e.costAt(now), rt.Uncached(i), e.freshLoad(now, p.maxAge), e.Peers(now), p.MeanPrompt())
}

// StateOf is endpoint i as it stands at now, out or not: what an operator
// is shown of it.
func (p *Pool) StateOf(i int, now time.Time) State {
	return p.endpoints[i].state(now, p.maxAge)
}

// States is the pool's endpoints not out at now, each as it stands, their
// batch limits started first with startBatch.
func (p *Pool) States(now time.Time, startBatch bool) []State {
	var eps []State
	t := now.UnixNano()
	for _, e := range p.endpoints {
		if e.Out(t) {
			continue
		}
		if startBatch {
			e.StartBatch()
		}
		eps = append(eps, e.state(now, p.maxAge))
	}
	return eps
}

// MeanPrompt is the pool's mean uncached prompt, in tokens.
func (p *Pool) MeanPrompt() float64 {
	if v := math.Float64frombits(p.meanPrompt.Load()); v > 0 {
		return v
	}
	return 1000 // a guess until the first request: a short chat turn
}

// NotePrompt folds one request's uncached prompt into the pool's mean,
// weighted as costSmoothing is.
func (p *Pool) NotePrompt(tokens int64) {
	m := p.MeanPrompt()
	p.meanPrompt.Store(math.Float64bits(m + CostSmoothing*(float64(tokens)-m)))
}
