package router

// Picking an endpoint: a pool, what it knows of its endpoints and of the
// prompts it has been sent, and the entry point that hands a request to
// the pool's policy. The policies themselves are in policy.go.

import (
	"math"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/cespare/xxhash/v2"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
)

// pool is a catalog pool with what the router has learned of its
// endpoints.
type pool struct {
	name      string
	policy    string
	plain     http.Header // what a call carries, unstreamed and streamed
	streamed  http.Header
	endpoints []*endpoint
	order     []int // endpoint indexes, each repeated by its weight
	weight    []int // by endpoint index
	next      atomic.Uint64
	maxAge    time.Duration // a scrape older is unknown
	provider  *provider     // a hosted provider's; nil for OpenAI-compatible kinds
	takesSalt bool          // whether calls carry the request's cache_salt
	kind      string        // the pool's kind: what its servers speak

	// index maps prompt blocks to the endpoints that hold them. It is
	// replaced, empty, when a scrape reports another KV-cache block size.
	index   atomic.Pointer[prefixIndex]
	kvBlock atomic.Int32 // the KV-cache block the index is built for, in tokens

	// meanPrompt is the mean uncached prompt of recent requests, in tokens
	// (float64 bits): what a request another gateway queued is assumed
	// to owe.
	meanPrompt atomic.Uint64

	budget retryBudget
	hedge  catalog.Hedge // when a request is also sent to a second endpoint; After zero: never
	m      poolMetrics

	// peerCap is the most one gateway can have in flight at one endpoint
	// of the pool: what the other gateways' loads are believed up to,
	// summed (peers.go).
	peerCap loadCounts
}

// newPool builds a pool from its catalog entry, keeping prev's endpoint
// state for URLs that stay, and prev's prefix index when the endpoints
// stay in the same order (the index knows them by position).
func newPool(p catalog.Pool, prev *pool, m *metrics) *pool {
	np := &pool{
		name: p.Name, policy: p.Policy, plain: poolHeaders(p, false), streamed: poolHeaders(p, true),
		maxAge: p.Metrics.MaxAge, provider: newProvider(p), takesSalt: takesSalt(p.Kind), kind: p.Kind,
	}
	if np.policy == "" {
		np.policy = catalog.PolicyAuto
	}
	if np.maxAge <= 0 {
		np.maxAge = time.Second
	}
	np.budget.share = p.RetryBudget
	np.hedge = p.Hedge
	sameOrder := prev != nil && len(prev.endpoints) == len(p.Endpoints)
	for i, e := range p.Endpoints {
		u := strings.TrimRight(e.URL, "/")
		name := e.Name
		if name == "" {
			name = u
		}
		var ep *endpoint
		if prev != nil {
			for _, old := range prev.endpoints {
				if old.url == u && old.name == name {
					ep = old
				}
			}
		}
		if ep == nil {
			ep = newEndpoint(name, u)
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
	if sameOrder {
		np.index.Store(prev.index.Load())
		np.kvBlock.Store(prev.kvBlock.Load())
		np.meanPrompt.Store(prev.meanPrompt.Load())
		np.budget.carry(&prev.budget)
	} else {
		np.index.Store(newPrefixIndex(len(np.endpoints), blockBytes(defaultKVBlock)))
		np.kvBlock.Store(defaultKVBlock)
	}
	np.m = m.forPool(np.name, np.policy)
	return np
}

// header is what a call to the pool carries.
func (p *pool) header(stream bool) http.Header {
	if stream {
		return p.streamed
	}
	return p.plain
}

// setKVBlock notes the KV-cache block size a scrape reported, starting an
// empty index when it differs from the one in use.
func (p *pool) setKVBlock(tokens int) {
	if tokens <= 0 || int(p.kvBlock.Load()) == tokens {
		return
	}
	p.kvBlock.Store(int32(tokens))
	p.index.Store(newPrefixIndex(len(p.endpoints), blockBytes(tokens)))
}

// indexed reports whether p's policy reads the prefix index, and so
// whether p keeps one up to date.
func (p *pool) indexed() bool {
	return p.policy != catalog.PolicyRoundRobin && p.policy != catalog.PolicyLeastRequest
}

// route is one request as the policies see it.
type route struct {
	index       *prefixIndex
	hashes      []uint64 // the prompt's chained block hashes
	promptBytes int      // the prompt's length as sent
	prompt      int64    // its size in tokens, estimated
	slo         float64  // what is left of the request's TTFT SLO, in seconds; 0 when it has none
	// spare is critical's TPOT SLO in seconds for a request below
	// critical, whose prefill auto keeps off critical streams; zero for a
	// critical request.
	spare float64
	// stall is what auto charges a second of the stall this request's
	// prefill gives each stream decoding where it goes, against a second
	// of its own wait (Router.stallWeight); zero charges none.
	stall float64
	// indexed reports whether the pool's policy reads the prefix index,
	// and so whether a send notes the prompt in it.
	indexed bool
	matched [64]int32
	// predicted is the last pick's endpoint's predicted TTFT in seconds,
	// when its policy predicts one (auto); zero when it does not.
	predicted float64
	// key is the request's prompt_cache_key hashed from its isolation
	// domain's seed (cacheKeyPlace), what it is placed by in place of its
	// blocks; zero when it sent none. It is the request's, not a pool's:
	// prepare leaves it.
	key uint64
}

// cacheKeyPlace is the place key of a request that sent the
// prompt_cache_key key, from its isolation domain's seed: the same key
// sent from two domains places its requests independently, so that no
// tenant's key says where another's requests go. Zero for no key.
func cacheKeyPlace(key string, seed uint64) uint64 {
	if key == "" {
		return 0
	}
	return mix(seed^xxhash.Sum64String(key)) | 1
}

// sloLeft is what is left at now of a TTFT SLO for a request that arrived
// at start: one that waited for admission is routed by the time it has,
// not by the whole SLO. No SLO (zero) stays none; a request already past
// its SLO has a nanosecond left, within which no endpoint is predicted.
func sloLeft(slo time.Duration, start, now time.Time) time.Duration {
	if slo <= 0 {
		return 0
	}
	return max(slo-now.Sub(start), time.Nanosecond)
}

// prepare hashes prompt for p's index, from the seed of the request's
// isolation domain, once per request and pool.
func (rt *route) prepare(p *pool, prompt []byte, seed uint64, tokens int64, slo time.Duration) {
	rt.index = p.index.Load()
	rt.promptBytes = len(prompt)
	rt.prompt = tokens
	rt.slo = slo.Seconds()
	rt.spare, rt.stall = 0, 0
	rt.hashes, rt.matched = nil, [64]int32{}
	rt.indexed = p.indexed()
	if n := min(len(prompt)/rt.index.block, maxPrefixBlocks); n > 0 && rt.indexed {
		rt.hashes = hashBlocks(make([]uint64, 0, n), prompt, rt.index.block, seed)
		rt.index.match(rt.hashes, &rt.matched)
	}
	rt.indexed = rt.indexed && len(rt.hashes) > 0
}

// uncached is the estimated prompt tokens endpoint i must compute for rt:
// the part past the prefix it holds.
func (rt *route) uncached(i int) int64 {
	if rt.promptBytes == 0 || rt.matched[i] == 0 {
		return rt.prompt
	}
	cached := float64(rt.matched[i]) * float64(rt.index.block) / float64(rt.promptBytes)
	return int64(math.Ceil(float64(rt.prompt) * max(0, 1-cached)))
}

// placeKey is the hash rendezvous hashing places a prompt by: its
// prompt_cache_key's, when it sent one; else the first of its blocks that
// no endpoint is known to hold, or its last when all are held; zero for a
// prompt shorter than a block without a key. Blocks are hashed with all
// before them, so the first unknown block names the conversation and not
// the system prompt it shares with others, and every later turn of the
// conversation has the same block: gateways that never saw its earlier
// turns still place it where those went. A key names the conversation as
// the client sees it, and holds from its first turn.
func (rt *route) placeKey() uint64 {
	if rt.key != 0 {
		return rt.key
	}
	if len(rt.hashes) == 0 {
		return 0
	}
	held := int32(0)
	for _, m := range rt.matched {
		held = max(held, m)
	}
	return rt.hashes[min(int(held), len(rt.hashes)-1)]
}

// candidates is the set of endpoints a pick may take, as bits by index:
// those not in tried and not out, or with relaxed those not in tried.
func (p *pool) candidates(tried uint64, now time.Time, relaxed bool) uint64 {
	var c, full uint64
	t := now.UnixNano()
	for i, e := range p.endpoints {
		if tried&(1<<i) == 0 && (relaxed || !e.out(t)) {
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

// pick is the endpoint the pool's policy takes for rt among candidates,
// and why; -1 when there are none.
func (p *pool) pick(rt *route, candidates uint64, now time.Time) (int, string) {
	if candidates == 0 {
		return -1, ""
	}
	rt.predicted = 0
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
		return p.pickAuto(rt, candidates, now)
	}
}

// predictTTFT is auto's prediction of rt's time to first token at
// endpoint i, in seconds.
func (p *pool) predictTTFT(rt *route, i int, now time.Time) float64 {
	e := p.endpoints[i]
	return e.predictTTFT(rt.uncachedBelieved(i, e.Precision()), e.freshLoad(now, p.maxAge), e.Peers(now), p.meanPromptTokens())
}

// state is the pool's endpoints not out at now, each as it stands, their
// batch limits started first with startBatch.
func (p *pool) state(now time.Time, startBatch bool) []endpointState {
	var eps []endpointState
	t := now.UnixNano()
	for _, e := range p.endpoints {
		if e.out(t) {
			continue
		}
		if startBatch {
			e.StartBatch()
		}
		eps = append(eps, e.state(now, p.maxAge))
	}
	return eps
}

// meanPromptTokens is the pool's mean uncached prompt, in tokens.
func (p *pool) meanPromptTokens() float64 {
	if v := math.Float64frombits(p.meanPrompt.Load()); v > 0 {
		return v
	}
	return 1000 // a guess until the first request: a short chat turn
}

// notePrompt folds one request's uncached prompt into the pool's mean,
// weighted as costSmoothing is.
func (p *pool) notePrompt(tokens int64) {
	m := p.meanPromptTokens()
	p.meanPrompt.Store(math.Float64bits(m + costSmoothing*(float64(tokens)-m)))
}
