// Package sim is a simulated inference server that behaves like one vLLM
// replica: the OpenAI API, continuous batching with chunked prefill, a KV
// cache in blocks with a prefix cache, a bounded waiting queue, vLLM's
// metric names, and faults on demand. It lets routing and admission be
// proven on a machine without a GPU.
//
// Timing has two modes. In batch mode (the default) one step loop per
// replica runs the batch: each step decodes one token for every running
// sequence and prefills up to a budget of prompt tokens, and takes
// StepBase + StepPerToken × decodes + StepPerPrefillToken × prompt tokens,
// so TPOT grows with the batch and a long prompt slows everyone's next
// token. In fixed mode (any
// of TTFT, TPOT, PrefillPerToken set, or FixedTiming) each sequence keeps
// its own clock: its first token comes TTFT + PrefillPerToken × uncached
// prompt tokens after it is admitted, then one every TPOT. Fixed mode with
// every duration zero answers as fast as it can. Both modes share the KV
// cache, MaxSeqs and the waiting queue, and both are scaled by Speed. The
// prefix cache is vLLM's (blocks, least recently released first) or
// SGLang's (a radix tree, least recently used leaf first). A Profile sets
// the timing, the limits and the cache of one kind of engine at once.
//
// config.go is the replica's configuration, its defaults, and faults.
package sim

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"time"
)

// Config is one replica's configuration. Zero values mean the defaults
// below.
type Config struct {
	// Model is the name the replica serves; requests naming another model
	// get 404, as vLLM answers. An empty model in a request means this one.
	Model string
	// Speed scales every duration: 2 is twice as fast, 0.5 half. Zero
	// means 1.
	Speed float64

	// MaxSeqs caps the sequences running at once (vLLM's max_num_seqs).
	MaxSeqs int
	// MaxBatchedTokens is the per-step token budget, decodes included, that
	// chunked prefill fills (vLLM's max_num_batched_tokens).
	MaxBatchedTokens int
	// BlockSize is how many tokens a KV-cache block holds.
	BlockSize int
	// NumBlocks is the KV cache's capacity in blocks.
	NumBlocks int
	// MaxWaiting is how many requests may wait for admission; past it a
	// request gets 429.
	MaxWaiting int
	// MaxModelLen is the longest prompt plus max_tokens a request may ask
	// for; past it the request gets 400.
	MaxModelLen int
	// DefaultMaxTokens is the output limit of a request that names none.
	DefaultMaxTokens int
	// EmbeddingDims is the length of an embedding vector when the request
	// does not ask for one.
	EmbeddingDims int

	// StepBase, StepPerToken and StepPerPrefillToken make a batch-mode
	// step's duration: StepBase + StepPerToken × decodes in the step +
	// StepPerPrefillToken × prefill tokens in it. A zero
	// StepPerPrefillToken means StepPerToken: a prompt token costs what a
	// decoded one does.
	StepBase, StepPerToken, StepPerPrefillToken time.Duration

	// Cache is the prefix cache's kind: CacheBlocks, the zero value, or
	// CacheRadix.
	Cache CacheKind

	// FixedTiming selects fixed mode even when TTFT, TPOT and
	// PrefillPerToken are all zero, which then means no delay at all.
	FixedTiming bool
	// TTFT is fixed mode's time from admission to the first token, before
	// prefill.
	TTFT time.Duration
	// TPOT is fixed mode's time between two output tokens.
	TPOT time.Duration
	// PrefillPerToken is fixed mode's added time to first token for each
	// prompt token not found in the prefix cache.
	PrefillPerToken time.Duration

	// Seed varies the output text and lengths between replicas or runs;
	// the same Seed and request always give the same answer.
	Seed int64

	// Faults are the faults the replica starts with.
	Faults Faults

	// Logger gets a Replica's HTTP server errors, such as a connection
	// that broke mid-request, at level warn; nil means the log package's
	// standard logger, as net/http has it.
	Logger *slog.Logger
}

// Defaults, from a mid-size model (8B parameters, bf16) on one H100 SXM.
const (
	DefaultModel = "sim-8b"

	// DefaultStepBase is a decode step's fixed cost: reading 16 GB of
	// weights at the H100's 3.35 TB/s takes 4.8 ms, plus ~1 ms of
	// scheduling and sampling.
	DefaultStepBase = 6 * time.Millisecond
	// DefaultStepPerToken is each batched token's added cost: 2 × 8e9 FLOP
	// a token at ~30% of the H100's 990 dense bf16 TFLOP/s is ~55 µs, plus
	// attention over the KV cache. Prefill then runs at about 12k tokens/s
	// (2048 tokens in 6 + 154 ms), and a decode batch of 100 takes 13.5 ms
	// a token against 6.1 ms alone.
	DefaultStepPerToken = 75 * time.Microsecond

	// DefaultMaxSeqs is vLLM's default max_num_seqs.
	DefaultMaxSeqs = 256
	// DefaultMaxBatchedTokens is vLLM's classic chunked-prefill budget: a
	// full prefill chunk makes a 160 ms step, the worst inter-token gap it
	// causes others.
	DefaultMaxBatchedTokens = 2048
	// DefaultBlockSize is vLLM's default block size on CUDA.
	DefaultBlockSize = 16
	// DefaultNumBlocks is the KV cache an 8B model leaves on an 80 GB card:
	// at 90% memory use, 72 GB less 16 GB of weights and ~1 GB of
	// activations is 55 GiB; a Llama-3-8B token takes 2 (K,V) × 32 layers ×
	// 8 KV heads × 128 dims × 2 bytes = 128 KiB, so 450,560 tokens, or
	// 28,160 blocks of 16.
	DefaultNumBlocks = 28160
	// DefaultMaxWaiting bounds the waiting queue at a few batches' worth:
	// a request further back would wait for minutes.
	DefaultMaxWaiting = 1024
	// DefaultMaxModelLen is a common served context length for 8B models.
	DefaultMaxModelLen = 32768
	// DefaultMaxTokens is the output limit when a request names none; the
	// drawn length averages half of it.
	DefaultMaxTokens = 256
	// DefaultEmbeddingDims is a common embedding width.
	DefaultEmbeddingDims = 768
)

// withDefaults is c with every zero field set to its default.
func (c Config) withDefaults() Config {
	if c.Model == "" {
		c.Model = DefaultModel
	}
	if c.Speed <= 0 {
		c.Speed = 1
	}
	setInt := func(p *int, def int) {
		if *p <= 0 {
			*p = def
		}
	}
	setInt(&c.MaxSeqs, DefaultMaxSeqs)
	setInt(&c.MaxBatchedTokens, DefaultMaxBatchedTokens)
	setInt(&c.BlockSize, DefaultBlockSize)
	setInt(&c.NumBlocks, DefaultNumBlocks)
	setInt(&c.MaxWaiting, DefaultMaxWaiting)
	setInt(&c.MaxModelLen, DefaultMaxModelLen)
	setInt(&c.DefaultMaxTokens, DefaultMaxTokens)
	setInt(&c.EmbeddingDims, DefaultEmbeddingDims)
	if c.StepBase <= 0 {
		c.StepBase = DefaultStepBase
	}
	if c.StepPerToken <= 0 {
		c.StepPerToken = DefaultStepPerToken
	}
	if c.StepPerPrefillToken <= 0 {
		c.StepPerPrefillToken = c.StepPerToken
	}
	if c.TTFT > 0 || c.TPOT > 0 || c.PrefillPerToken > 0 {
		c.FixedTiming = true
	}
	return c
}

// Faults are the failures a replica injects. The zero value injects none.
type Faults struct {
	// ErrorRate is the share of inference requests (chat, completions,
	// embeddings), 0 to 1, answered at once with an error status instead of
	// served.
	ErrorRate float64
	// ErrorStatus is that status: 429, 500 or 503. Zero picks one of the
	// three at random for each failed request.
	ErrorStatus int
	// DieAfterTokens, when positive, cuts the connection abruptly once a
	// request has produced this many output tokens: no final chunk, no
	// [DONE].
	DieAfterTokens int
	// StallFirstToken holds every request this long before it is queued,
	// so nothing at all is sent for that time.
	StallFirstToken time.Duration
	// Refuse stops the replica accepting connections (its listener is
	// closed) and cuts requests on connections already open.
	Refuse bool
	// RefuseFor, when positive with Refuse, ends the refusal by itself
	// after this long. It is the only way to end it over HTTP, since a
	// refusing replica's admin endpoint cannot be reached.
	RefuseFor time.Duration
	// Slow multiplies every step's duration; 0 and 1 mean normal speed.
	Slow float64
	// Hang makes the replica stop answering, as a GPU server whose engine
	// is stuck does: connections are still accepted, but no step runs and
	// no request, new or in flight, gets another byte. Streams freeze
	// mid-way; /health and /metrics wait too. When the hang ends every
	// request carries on where it stopped. Only /sim/faults still answers.
	Hang bool
	// HangFor, when positive with Hang, ends the hang by itself after this
	// long.
	HangFor time.Duration
}

// faultsJSON is Faults on the wire, with the stall as a Go duration string
// such as "1.5s".
type faultsJSON struct {
	ErrorRate       float64 `json:"error_rate"`
	ErrorStatus     int     `json:"error_status"`
	DieAfterTokens  int     `json:"die_after_tokens"`
	StallFirstToken string  `json:"stall_first_token"`
	Refuse          bool    `json:"refuse"`
	RefuseFor       string  `json:"refuse_for"`
	Slow            float64 `json:"slow"`
	Hang            bool    `json:"hang"`
	HangFor         string  `json:"hang_for"`
}

// MarshalJSON writes f as the admin endpoint shows it.
func (f Faults) MarshalJSON() ([]byte, error) {
	return json.Marshal(faultsJSON{
		ErrorRate: f.ErrorRate, ErrorStatus: f.ErrorStatus, DieAfterTokens: f.DieAfterTokens,
		StallFirstToken: f.StallFirstToken.String(), Refuse: f.Refuse, RefuseFor: f.RefuseFor.String(), Slow: f.Slow,
		Hang: f.Hang, HangFor: f.HangFor.String(),
	})
}

// UnmarshalJSON reads f from the admin endpoint's JSON; absent fields are
// zero.
func (f *Faults) UnmarshalJSON(b []byte) error {
	var j faultsJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	stall, err := parseDuration("stall_first_token", j.StallFirstToken)
	if err != nil {
		return err
	}
	refuseFor, err := parseDuration("refuse_for", j.RefuseFor)
	if err != nil {
		return err
	}
	hangFor, err := parseDuration("hang_for", j.HangFor)
	if err != nil {
		return err
	}
	*f = Faults{
		ErrorRate: j.ErrorRate, ErrorStatus: j.ErrorStatus, DieAfterTokens: j.DieAfterTokens,
		StallFirstToken: stall, Refuse: j.Refuse, RefuseFor: refuseFor, Slow: j.Slow,
		Hang: j.Hang, HangFor: hangFor,
	}
	return nil
}

// parseDuration reads a Go duration string; empty means zero.
func parseDuration(field, s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", field, err)
	}
	return d, nil
}

// Validate reports what is wrong with f, naming the field.
func (f Faults) Validate() error {
	switch {
	case f.ErrorRate < 0 || f.ErrorRate > 1:
		return fmt.Errorf("error_rate: must be between 0 and 1, got %v", f.ErrorRate)
	case f.ErrorStatus != 0 && f.ErrorStatus != 429 && f.ErrorStatus != 500 && f.ErrorStatus != 503:
		return fmt.Errorf("error_status: must be 0, 429, 500 or 503, got %d", f.ErrorStatus)
	case f.DieAfterTokens < 0:
		return fmt.Errorf("die_after_tokens: must not be negative, got %d", f.DieAfterTokens)
	case f.StallFirstToken < 0:
		return fmt.Errorf("stall_first_token: must not be negative, got %v", f.StallFirstToken)
	case f.RefuseFor < 0:
		return fmt.Errorf("refuse_for: must not be negative, got %v", f.RefuseFor)
	case f.Slow < 0:
		return fmt.Errorf("slow: must not be negative, got %v", f.Slow)
	case f.HangFor < 0:
		return fmt.Errorf("hang_for: must not be negative, got %v", f.HangFor)
	}
	return nil
}
