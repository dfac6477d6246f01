// Package virtual replays a workload through a pool's routing on a
// virtual clock: the gateway's policies, learned models and prefix index
// (internal/router/pool) in front of simulated replicas (sim.Virtual),
// with time moved from one event to the next rather than waited out. A
// run of minutes takes the CPU time of its picks and steps, and a seed
// always gives the same figures.
//
// It measures routing alone. What the gateway does around a pick, it does
// here as internal/router's dispatch does it for a stream (see send
// there): the route prepared from the prompt as the client sent it, and
// each call through the one lifecycle a call has at its endpoint
// (pool.Attempt: begun, its first token and gaps taught to the endpoint,
// ended, its answer's cached tokens confirming the prefix the index
// predicted), the replicas' load scraped at the pool's
// interval, and the SLO tracker fed for auto's stall weight. What it
// leaves out: the wire (a call's bytes take no time), retries and
// failures (a virtual replica never fails), admission, hedging, and other
// gateways.
package virtual

import (
	"cmp"
	"container/heap"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/cespare/xxhash/v2"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/tenant"
	"gitea.mynodes.xyz/ilker/llmgw/internal/openai"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/admission"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/pool"
	"gitea.mynodes.xyz/ilker/llmgw/internal/sim"
)

// Request is one request of a replayed workload.
type Request struct {
	At time.Duration // when it arrives, from the start of the run
	// Body is the chat completions body the client sends. The replica
	// times its tokens alike whether it asks for a stream or not, and the
	// gateway learns from them as from a stream's.
	Body []byte
	// Tenant and Class are its x-llmgw-tenant and x-llmgw-priority
	// headers; empty for none.
	Tenant, Class string
}

// Result is what one request came to. Times are from its arrival.
type Result struct {
	// Err is why it was not answered: refused by the gateway or the
	// replica, or cut at the run's end.
	Err string
	// Answered reports whether every token it asked for came.
	Answered bool
	TTFT     time.Duration // zero when no token came
	Last     time.Duration // the last token's time
	Tokens   int           // output tokens produced
	Gaps     []float32     // seconds between successive tokens
	// PromptTokens and CachedTokens are the replica's count of the
	// prompt, and of those it found in its prefix cache.
	PromptTokens, CachedTokens int
	Endpoint                   int // the replica it went to; -1 for none
}

// Options are a run's pool, model and replicas.
type Options struct {
	Pool  catalog.Pool  // its endpoints' URLs name the replicas only
	Model catalog.Model // the model's SLO and class SLOs
	// Replicas are the pool's endpoints, in its order.
	Replicas []*sim.Virtual
	// Drain is how long requests in flight after the last arrival may run
	// before they are cut; zero means until they end.
	Drain time.Duration
}

// epoch is the virtual clock's zero: any fixed instant serves.
var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Run replays reqs, sorted by arrival, and returns a Result for each in
// the same order.
func Run(o Options, reqs []Request) ([]Result, error) {
	if len(o.Replicas) != len(o.Pool.Endpoints) {
		return nil, fmt.Errorf("virtual: %d replicas for %d endpoints", len(o.Replicas), len(o.Pool.Endpoints))
	}
	if len(o.Replicas) == 0 || len(o.Replicas) > 64 {
		return nil, fmt.Errorf("virtual: a pool of 1 to 64 endpoints, not %d", len(o.Replicas))
	}
	r := &run{
		o:       o,
		p:       pool.New(o.Pool, nil, nil),
		results: make([]Result, len(reqs)),
		salts:   make(map[string]uint64),
		scrape:  cmp.Or(o.Pool.Metrics.Interval, time.Second),
	}
	r.p.SetKVBlock(o.Replicas[0].Config().BlockSize)
	for i := range r.results {
		r.results[i].Endpoint = -1
	}
	return r.results, r.loop(reqs)
}

// run is one replay's state.
type run struct {
	o       Options
	p       *pool.Pool
	slo     admission.SLOTracker
	results []Result
	salts   map[string]uint64 // isolation domain's seed, by domain
	scrape  time.Duration
	open    int // requests sent and not yet answered whole
}

// loop moves the clock from event to event: a replica's, the scrape's, or
// an arrival, in that order at one instant, until every request is
// answered or the drain ends.
func (r *run) loop(reqs []Request) error {
	nextScrape := epoch
	var end time.Time
	if len(reqs) > 0 && r.o.Drain > 0 {
		end = epoch.Add(reqs[len(reqs)-1].At + r.o.Drain)
	}
	var q replicaQueue
	for i := range r.o.Replicas {
		q.set(i, r.o.Replicas[i])
	}
	next := 0
	for next < len(reqs) || r.open > 0 {
		now, which := time.Time{}, -2 // -1 the scrape, -2 an arrival
		if next < len(reqs) {
			now = epoch.Add(reqs[next].At)
		}
		if !nextScrape.After(now) || next == len(reqs) {
			now, which = nextScrape, -1
		}
		at, i, busy := q.first()
		if busy && !at.After(now) {
			now, which = at, i
		}
		if !busy && next == len(reqs) {
			// Nothing left to arrive or to run, yet requests are open:
			// the replicas hold them in a queue nothing will move.
			return fmt.Errorf("virtual: %d requests queued at replicas with nothing running", r.open)
		}
		if !end.IsZero() && now.After(end) {
			r.cut(end)
			return nil
		}
		switch which {
		case -1:
			r.scrapeAll(now)
			nextScrape = now.Add(r.scrape)
		case -2:
			r.arrive(&reqs[next], next, now, &q)
			next++
		default:
			r.o.Replicas[which].Advance(now)
			q.set(which, r.o.Replicas[which])
		}
	}
	return nil
}

// scrapeAll gives every endpoint its replica's load as a scrape reads it.
func (r *run) scrapeAll(now time.Time) {
	for i, v := range r.o.Replicas {
		_, waiting, kv := v.Load()
		r.p.Endpoints()[i].SetLoad(float64(waiting), kv, now)
	}
}

// cut ends every request still open at end as the bench's driver does:
// counted as not answered.
func (r *run) cut(end time.Time) {
	for i := range r.results {
		if res := &r.results[i]; res.Endpoint >= 0 && res.Err == "" && !res.Answered {
			res.Err = "cut at the end of the drain"
		}
	}
	r.open = 0
}

// call is one request on its way: its route, its life at its endpoint,
// and what came of it so far.
type call struct {
	r     *run
	rt    pool.Route
	at    pool.Attempt
	model string
	start time.Time
	last  time.Time
	res   *Result
}

// arrive routes one request at now and submits it to the replica picked.
func (r *run) arrive(req *Request, n int, now time.Time, q *replicaQueue) {
	res := &r.results[n]
	body := req.Body
	parsed, err := openai.ParseRequest(body)
	if err != nil {
		res.Err = err.Error()
		return
	}
	hr := &http.Request{Header: http.Header{}}
	hr.Header.Set(admission.TenantHeader, req.Tenant)
	hr.Header.Set(admission.PriorityHeader, req.Class)
	class, err := admission.RequestClass(hr, nil)
	if err != nil {
		res.Err = err.Error()
		return
	}
	seed, salt := r.domain(admission.RequestTenant(hr, nil))
	m := &r.o.Model
	c := &call{r: r, model: m.Name, start: now, res: res}
	c.rt.Key = pool.CacheKeyPlace(parsed.PromptCacheKey, seed)
	estimate := int64(len(body)+pool.BytesPerToken-1) / pool.BytesPerToken
	c.rt.Prepare(r.p, parsed.Prompt(body), seed, estimate, pool.SLOLeft(m.ClassSLO(class.String()).TTFTp99, now, now))
	if r.p.Policy() == catalog.PolicyAuto {
		c.rt.Stall = r.slo.StallWeight(m, now)
	}
	if class != admission.Critical {
		c.rt.Spare = m.ClassSLO(admission.Critical.String()).TPOTp99.Seconds()
	}
	i, _ := r.p.Pick(&c.rt, r.p.Candidates(0, now, false), now)
	if i < 0 {
		i, _ = r.p.Pick(&c.rt, r.p.Candidates(0, now, true), now)
	}
	if i < 0 {
		res.Err = errNoEndpoint.Error()
		return
	}
	res.Endpoint = i
	c.at = r.p.Begin(&c.rt, i, true, class == admission.Critical, now)
	up := parsed.Rewrite(body, openai.Edits{Model: parsed.Model, IncludeUsage: true, CacheSalt: salt})
	if _, err := r.o.Replicas[i].Submit(up, now, c.token); err != nil {
		c.at.End(0, false) // a refusal computed nothing
		res.Err = err.Error()
		return
	}
	r.open++
	q.set(i, r.o.Replicas[i])
}

var errNoEndpoint = errors.New("no endpoint left to try")

// token takes one output token of c's answer at now, as the relay passes
// it: the first ends the call's prefill, each later one is a gap, and the
// last settles the call.
func (c *call) token(a *sim.Answer, now time.Time) {
	res := c.res
	if res.Err != "" {
		return // cut
	}
	if a.Tokens == 1 {
		res.TTFT = now.Sub(c.start)
		c.at.FirstToken(now)
	} else {
		gap := now.Sub(c.last)
		res.Gaps = append(res.Gaps, float32(gap.Seconds()))
		c.at.Gap(gap)
	}
	c.last = now
	res.Tokens = a.Tokens
	res.PromptTokens, res.CachedTokens = a.PromptTokens, a.CachedTokens
	if !a.Done() {
		return
	}
	res.Last, res.Answered = now.Sub(c.start), true
	c.at.End(0, true)
	c.r.open--
	c.at.Confirm(int64(a.PromptTokens), int64(a.CachedTokens))
	var tpot time.Duration
	if a.Tokens > 1 {
		tpot = (res.Last - res.TTFT) / time.Duration(a.Tokens-1)
	}
	c.r.slo.AddAt(c.model, now, res.TTFT, tpot)
}

// domain is the seed a tenant's prompts are hashed from and the salt its
// calls carry: one a domain at the gateway's default isolation, the org.
func (r *run) domain(tenantPath string) (seed uint64, salt string) {
	d := tenant.AtLevel(tenantPath, tenant.LevelOrg)
	seed, ok := r.salts[d]
	if !ok {
		seed = xxhash.Sum64String("llmgw virtual domain " + d)
		r.salts[d] = seed
	}
	return seed, fmt.Sprintf("%016x", seed)
}

// replicaQueue orders the replicas by their next event.
type replicaQueue struct {
	items []replicaEvent
	where []int // by replica, its place in items; -1 when it has no event
}

type replicaEvent struct {
	at time.Time
	i  int
}

// set puts replica i at its next event, or takes it out when it has none.
func (q *replicaQueue) set(i int, v *sim.Virtual) {
	for len(q.where) <= i {
		q.where = append(q.where, -1)
	}
	at, ok := v.Next()
	switch k := q.where[i]; {
	case k >= 0 && ok:
		q.items[k].at = at
		heap.Fix(q, k)
	case k >= 0:
		heap.Remove(q, k)
	case ok:
		heap.Push(q, replicaEvent{at: at, i: i})
	}
}

// first is the earliest replica event.
func (q *replicaQueue) first() (time.Time, int, bool) {
	if len(q.items) == 0 {
		return time.Time{}, 0, false
	}
	return q.items[0].at, q.items[0].i, true
}

func (q *replicaQueue) Len() int { return len(q.items) }
func (q *replicaQueue) Less(a, b int) bool {
	if !q.items[a].at.Equal(q.items[b].at) {
		return q.items[a].at.Before(q.items[b].at)
	}
	return q.items[a].i < q.items[b].i
}
func (q *replicaQueue) Swap(a, b int) {
	q.items[a], q.items[b] = q.items[b], q.items[a]
	q.where[q.items[a].i], q.where[q.items[b].i] = a, b
}
func (q *replicaQueue) Push(x any) {
	e := x.(replicaEvent)
	q.where[e.i] = len(q.items)
	q.items = append(q.items, e)
}
func (q *replicaQueue) Pop() any {
	e := q.items[len(q.items)-1]
	q.items = q.items[:len(q.items)-1]
	q.where[e.i] = -1
	return e
}
