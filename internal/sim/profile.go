// Engine profiles: named shapes of serving engine, each the timing, limits
// and prefix cache that one kind of real engine has, as far as routing
// depends on them: whether concurrency slows decode, how much time to first
// token a cached prompt token saves, and what the cache drops first.

package sim

import (
	"fmt"
	"strings"
	"time"
)

// CacheKind is the kind of a replica's prefix cache.
type CacheKind uint8

const (
	// CacheBlocks is vLLM's prefix cache: a hash table of full blocks;
	// blocks no sequence holds are evicted one at a time, least recently
	// released first, a prompt's last block before its first.
	CacheBlocks CacheKind = iota
	// CacheRadix is SGLang's RadixCache: a tree whose edges are runs of
	// blocks; only a leaf no sequence holds is evicted, least recently used
	// first and whole, so a shared prefix outlives every branch that hangs
	// from it, and one eviction may free more than was asked for.
	CacheRadix
	// CacheSlots is llama.cpp's server's: one prompt cached per slot, a
	// slot per sequence run at once (MaxSeqs); a new sequence takes the
	// idle slot whose prompt shares the longest prefix with its own, past
	// a tenth of it, else the least recently used (slots.go).
	CacheSlots
)

// String is the kind's name as the docs give it.
func (k CacheKind) String() string {
	switch k {
	case CacheRadix:
		return "radix"
	case CacheSlots:
		return "slot"
	}
	return "blocks"
}

// Profile is a named engine shape. Apply sets a Config's timing, limits
// and cache from it.
type Profile struct {
	Name string
	// Summary says what the profile models in a line, for `llmgw sim
	// --help`.
	Summary string

	// FixedTiming selects fixed mode with TTFT, TPOT and PrefillPerToken;
	// otherwise batch mode with StepBase, StepPerToken and
	// StepPerPrefillToken, zero meaning StepPerToken. See Config.
	FixedTiming                                 bool
	StepBase, StepPerToken, StepPerPrefillToken time.Duration
	TTFT, TPOT, PrefillPerToken                 time.Duration
	MaxSeqs, MaxBatchedTokens                   int
	Cache                                       CacheKind
}

// DefaultProfile is the profile of a zero Config: ProfileChunked.
const DefaultProfile = ProfileChunked

// The profiles' names.
const (
	ProfileChunked      = "chunked"
	ProfileSlots        = "slots"
	ProfilePrefillHeavy = "prefill_heavy"
	ProfileDecodeHeavy  = "decode_heavy"
	ProfileRadix        = "radix"
	ProfileLlamaCpp     = "llamacpp"
)

// Profiles are every engine profile, the default first. Batch-mode ones
// start from an 8B model on one H100 (see DefaultStepBase): a decode step
// costs 6 ms plus 75 µs a sequence, so a prompt token costs 1/80 of a
// lone decode step; the others move that ratio or the engine's shape.
var Profiles = []Profile{
	{
		// vLLM V1: continuous batching with chunked prefill. Every step
		// decodes a token for each running sequence and fills the rest of
		// a 2048-token budget with prompt chunks, so TPOT grows with the
		// batch and a long prompt stalls everyone's next token.
		Name: ProfileChunked, Summary: "vLLM: continuous batching; prefill chunks stall decode",
		StepBase: DefaultStepBase, StepPerToken: DefaultStepPerToken,
		MaxSeqs: DefaultMaxSeqs, MaxBatchedTokens: DefaultMaxBatchedTokens,
	},
	{
		// llm-d-inference-sim with fixed time per token: a request holds
		// one of 16 slots (its --max-num-seqs) from admission to its last
		// token; its first token comes 200 µs per uncached prompt token
		// after admission, then one every 10 ms whatever the others do.
		// No batching slowdown, no stall; only a full house queues. At
		// chat's ~2 s a request a replica serves about 8 a second.
		Name: ProfileSlots, Summary: "llm-d-inference-sim: 16 slots, 200µs/prompt token, 10ms/token",
		FixedTiming: true, PrefillPerToken: 200 * time.Microsecond, TPOT: 10 * time.Millisecond,
		MaxSeqs: 16, MaxBatchedTokens: DefaultMaxBatchedTokens,
	},
	{
		// Prefill dear against decode, 1/20 of a lone decode step a prompt
		// token (4× chunked's share): long contexts, whose attention makes
		// each prompt token cost several times the weights' FLOPs, on an
		// engine whose decode is cheap (speculative decoding, FP8 KV). A
		// cached token saves much. The 512-token budget keeps a chunk's
		// stall of others near chunked's 160 ms, as operators of such
		// engines lower max_num_batched_tokens to.
		Name: ProfilePrefillHeavy, Summary: "prompt tokens 4x dearer (300µs): a cached token saves much",
		StepBase: DefaultStepBase, StepPerToken: DefaultStepPerToken, StepPerPrefillToken: 300 * time.Microsecond,
		MaxSeqs: DefaultMaxSeqs, MaxBatchedTokens: 512,
	},
	{
		// Prefill cheap against decode, 1/640 of a lone decode step a
		// prompt token (8× below chunked's share): a mixture-of-experts
		// model, whose decode step reads most experts' weights (16 ms) while
		// prefill computes only the active ones (25 µs a token). A cached
		// token saves little; the batch's decode is what queues.
		Name: ProfileDecodeHeavy, Summary: "16ms decode steps, 25µs prompt tokens: caching saves little",
		StepBase: 16 * time.Millisecond, StepPerToken: DefaultStepPerToken, StepPerPrefillToken: 25 * time.Microsecond,
		MaxSeqs: DefaultMaxSeqs, MaxBatchedTokens: DefaultMaxBatchedTokens,
	},
	{
		// SGLang: chunked's timing over a RadixCache, which evicts whole
		// least recently used leaves of its prefix tree rather than
		// vLLM's single blocks, and keeps one copy of a prefix that two
		// running requests computed at once.
		Name: ProfileRadix, Summary: "SGLang: chunked timing, radix cache evicting whole LRU leaves",
		StepBase: DefaultStepBase, StepPerToken: DefaultStepPerToken,
		MaxSeqs: DefaultMaxSeqs, MaxBatchedTokens: DefaultMaxBatchedTokens, Cache: CacheRadix,
	},
	{
		// llama.cpp's llama-server with --parallel 8: chunked's timing
		// (continuous batching, prompts in 2048-token batches), eight
		// slots each caching the last prompt it processed, taken by
		// prompt similarity else least recently used; its answers report
		// cached tokens as timings.cache_n, and its metrics are
		// llama.cpp's.
		Name: ProfileLlamaCpp, Summary: "llama.cpp: 8 slots, each caching its last prompt; chunked timing",
		StepBase: DefaultStepBase, StepPerToken: DefaultStepPerToken,
		MaxSeqs: 8, MaxBatchedTokens: DefaultMaxBatchedTokens, Cache: CacheSlots,
	},
}

// ProfileNames are the profiles' names, the default first.
func ProfileNames() []string {
	names := make([]string, len(Profiles))
	for i, p := range Profiles {
		names[i] = p.Name
	}
	return names
}

// ProfileNamed is the profile called name, or an error listing the names.
func ProfileNamed(name string) (Profile, error) {
	for _, p := range Profiles {
		if p.Name == name {
			return p, nil
		}
	}
	return Profile{}, fmt.Errorf("sim: unknown profile %q: want one of %s", name, strings.Join(ProfileNames(), ", "))
}

// Apply is c with the profile's timing, limits and cache: every field the
// profile has is set to the profile's value, zero included, whatever c
// held there; Config's defaults then fill the zero ones.
func (p Profile) Apply(c Config) Config {
	c.FixedTiming = p.FixedTiming
	c.StepBase, c.StepPerToken, c.StepPerPrefillToken = p.StepBase, p.StepPerToken, p.StepPerPrefillToken
	c.TTFT, c.TPOT, c.PrefillPerToken = p.TTFT, p.TPOT, p.PrefillPerToken
	c.MaxSeqs, c.MaxBatchedTokens = p.MaxSeqs, p.MaxBatchedTokens
	c.Cache = p.Cache
	return c
}

// profilesHelp lists the profiles for --help, a line each.
func profilesHelp() string {
	var b strings.Builder
	width := 0
	for _, p := range Profiles {
		width = max(width, len(p.Name))
	}
	for _, p := range Profiles {
		fmt.Fprintf(&b, "%-*s  %s\n", width, p.Name, p.Summary)
	}
	return b.String()
}
