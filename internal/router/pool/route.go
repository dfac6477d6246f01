package pool

// A request as routing sees it: its prompt hashed into the pool's index
// once, what each endpoint holds of it, what is left of its SLO, and the
// key it is placed by.

import (
	"math"
	"time"

	"github.com/cespare/xxhash/v2"
)

// Route is one request as the policies see it.
type Route struct {
	index       *PrefixIndex
	hashes      []uint64 // the prompt's chained block hashes
	promptBytes int      // the prompt's length as sent
	prompt      int64    // its size in tokens, estimated
	slo         float64  // what is left of the request's TTFT SLO, in seconds; 0 when it has none
	// Spare is critical's TPOT SLO in seconds for a request below
	// critical, whose prefill auto keeps off critical streams; zero for a
	// critical request.
	Spare float64
	// Stall is what auto charges a second of the stall this request's
	// prefill gives each stream decoding where it goes, against a second
	// of its own wait (the SLO tracker's stall weight); zero charges none.
	Stall float64
	// indexed reports whether the pool's policy reads the prefix index,
	// and so whether a send notes the prompt in it.
	indexed bool
	// matched and computed are, for each endpoint, how many of the
	// prompt's blocks it holds from the first, and how many of those it
	// had computed when the request was prepared (PrefixIndex.Match).
	matched, computed [64]int32
	// predicted is the last pick's endpoint's predicted TTFT in seconds,
	// when its policy predicts one (auto); zero when it does not.
	predicted float64
	// Model is the request's model as the pool's servers list what they
	// have loaded (an Ollama pool's, scrape.OllamaName): auto charges a
	// cold start where it is not loaded, and the other policies prefer
	// the endpoints where it is. Empty where they list nothing.
	Model string
	// Key is the request's prompt_cache_key hashed from its isolation
	// domain's seed (CacheKeyPlace), what it is placed by in place of its
	// blocks; zero when it sent none. It is the request's, not a pool's:
	// Prepare leaves it.
	Key uint64
}

// Index is the prefix index rt was prepared on.
func (rt *Route) Index() *PrefixIndex { return rt.index }

// Indexed reports whether the pool's policy reads the prefix index and
// the prompt has a block: whether a send notes the prompt in it.
func (rt *Route) Indexed() bool { return rt.indexed }

// Hashes is the prompt's chained block hashes.
func (rt *Route) Hashes() []uint64 { return rt.hashes }

// Matched is how many of the prompt's blocks, from the first, endpoint i
// holds.
func (rt *Route) Matched(i int) int32 { return rt.matched[i] }

// CachedShare is the share of the prompt endpoint i was predicted to
// hold cached, at most 1; zero for an empty prompt.
func (rt *Route) CachedShare(i int) float64 { return rt.share(rt.matched[i]) }

// share is the share of the prompt that its first blocks make, at most
// 1; zero for an empty prompt.
func (rt *Route) share(blocks int32) float64 {
	if rt.promptBytes <= 0 {
		return 0
	}
	return min(float64(blocks)*float64(rt.index.block)/float64(rt.promptBytes), 1)
}

// Computed notes in the index that endpoint i has computed the prompt's
// blocks: its first token came. Until then they are held there but not
// checked against its answers (Confirm). The blocks it had computed when
// rt was prepared are passed over: this call promised none of them.
func (rt *Route) Computed(i int) {
	if rt.indexed {
		rt.index.Settle(rt.hashes[rt.computed[i]:], i)
	}
}

// Confirm checks the prefix endpoint e, at index i, was predicted to hold
// against its answer, of prompt tokens with cached of them cached. It
// returns the tokens routing predicted cached and how many of those the
// answer confirmed. Into e's precision goes only the prefix e had
// computed when rt was prepared, to within one block of the index: a
// prefix still being computed then was not evicted when the answer found
// it missing, and a prefix's tokens are estimated from its bytes, where a
// server caches only whole blocks of its own. An answer where nothing
// was predicted cached confirms nothing. On a slot index, an answer that
// found over a block less than the prefix computed there corrects the
// slots (PrefixIndex.Correct).
func (rt *Route) Confirm(e *Endpoint, i int, prompt, cached int64) (predicted, confirmed int64) {
	predicted = int64(rt.share(rt.matched[i]) * float64(prompt))
	if predicted <= 0 {
		return 0, 0
	}
	if done := int64(rt.share(rt.computed[i]) * float64(prompt)); done > 0 {
		slack := int64(rt.share(1) * float64(prompt))
		e.Confirm(done, min(cached+slack, done))
		if rt.indexed && cached+slack < done && prompt > 0 {
			keep := float64(cached) / float64(prompt) * float64(rt.promptBytes) / float64(rt.index.block)
			rt.index.Correct(rt.hashes, i, int32(keep))
		}
	}
	return predicted, min(cached, predicted)
}

// CacheKeyPlace is the place key of a request that sent the
// prompt_cache_key key, from its isolation domain's seed: the same key
// sent from two domains places its requests independently, so that no
// tenant's key says where another's requests go. Zero for no key.
func CacheKeyPlace(key string, seed uint64) uint64 {
	if key == "" {
		return 0
	}
	return mix(seed^xxhash.Sum64String(key)) | 1
}

// SLOLeft is what is left at now of a TTFT SLO for a request that arrived
// at start: one that waited for admission is routed by the time it has,
// not by the whole SLO. No SLO (zero) stays none; a request already past
// its SLO has a nanosecond left, within which no endpoint is predicted.
func SLOLeft(slo time.Duration, start, now time.Time) time.Duration {
	if slo <= 0 {
		return 0
	}
	return max(slo-now.Sub(start), time.Nanosecond)
}

// Prepare hashes prompt for p's index, from the seed of the request's
// isolation domain, once per request and pool.
func (rt *Route) Prepare(p *Pool, prompt []byte, seed uint64, tokens int64, slo time.Duration) {
	rt.index = p.index.Load()
	rt.promptBytes = len(prompt)
	rt.prompt = tokens
	rt.slo = slo.Seconds()
	rt.Spare, rt.Stall = 0, 0
	rt.hashes = nil
	rt.indexed = p.Indexed()
	if n := min(len(prompt)/rt.index.block, MaxPrefixBlocks); n > 0 && rt.indexed {
		rt.hashes = HashBlocks(make([]uint64, 0, n), prompt, rt.index.block, seed)
		rt.index.Match(rt.hashes, &rt.matched, &rt.computed)
	} else {
		rt.matched = [64]int32{}
		rt.computed = [64]int32{}
	}
	rt.indexed = rt.indexed && len(rt.hashes) > 0
}

// Uncached is the estimated prompt tokens endpoint i must compute for rt:
// the part past the prefix it holds.
func (rt *Route) Uncached(i int) int64 {
	if rt.matched[i] == 0 {
		return rt.prompt
	}
	return int64(math.Ceil(float64(rt.prompt) * (1 - rt.share(rt.matched[i]))))
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
func (rt *Route) placeKey() uint64 {
	if rt.Key != 0 {
		return rt.Key
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
