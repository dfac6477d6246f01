package bench

// Workloads: each turns a seed, a rate and a duration into a precomputed,
// sorted list of requests with their arrival times, so the same seed always
// offers the same load. --rate is the offered load in requests a second
// averaged over the run, for every workload: chat starts sessions at rate
// divided by the mean number of turns, burst keeps its mean at rate while
// its bursts run at 3–5 times its base.

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/tenant"
)

// Request is one request of a workload: when it is sent, on whose behalf,
// what it asks and how fast it must be answered.
type Request struct {
	// At is when the request is sent, from the start of the run.
	At     time.Duration
	Tenant string // tenant path, sent as x-llmgw-tenant
	Class  string // priority class, sent as x-llmgw-priority
	Prompt []Message
	// PromptTokens is the prompt's length in tokens as generated (the sum
	// of its messages' texts under the project's tokenizer).
	PromptTokens int
	// MaxTokens is the answer's length, sent as max_tokens; with IgnoreEOS
	// a server replies exactly this long.
	MaxTokens int
	IgnoreEOS bool
	SLO       SLO
	// PrefixSeen is, for a replayed trace, how many of the prompt's tokens
	// lie in blocks an earlier request of the trace already sent (see
	// prefixCeiling).
	PrefixSeen int
}

// Message is one chat message. Its text is Content's pieces joined: pieces
// let many requests share a long prefix without copying it.
type Message struct {
	Role    string
	Content []string
}

// Text is the message's whole text.
func (m Message) Text() string { return strings.Join(m.Content, "") }

// SLO is what a request must meet to count toward goodput. Zero means no
// objective of that kind.
type SLO struct {
	TTFT time.Duration // time to the first token
	TPOT time.Duration // mean time per output token after the first
}

// Workload names.
const (
	WorkloadChat  = "chat"
	WorkloadBurst = "burst"
	WorkloadMixed = "mixed"
	WorkloadNoisy = "noisy"
	WorkloadFlat  = "flat"
	WorkloadTrace = "trace"
)

// Spec is what a workload is generated from.
type Spec struct {
	Workload string
	Rate     float64       // requests a second, averaged over the run; ignored by trace
	Duration time.Duration // arrivals stop here; for trace, zero means the whole trace
	Seed     uint64
	// Quick scales prompts, answers and sessions down for a short run.
	Quick bool
	// SLO is the objective of every request of the workloads that have no
	// classes of their own (all but mixed).
	SLO SLO

	// Trace replay only.
	TracePath   string
	TimeScale   float64 // >1 replays faster: inter-arrival times are divided by it; zero means 1
	LengthScale float64 // >1 shortens requests: token counts are divided by it; zero means 1
	// From is where on the trace's own clock replay starts: requests
	// before it are not sent, and the first sent arrives at once.
	From time.Duration
	// To, if not zero, is where on the trace's own clock replay stops:
	// requests at or after it are not sent. Unlike Duration, it cuts the
	// trace before time scaling, so every TimeScale sends the same
	// requests.
	To time.Duration

	// OutputTokens, for flat, is every answer's length; zero means
	// flatAnswerTokens.
	OutputTokens int
}

// Default class names and tenants of the workloads without classes.
const (
	defaultTenant = "bench"
	defaultClass  = tenant.PriorityStandard
)

// Generate builds the request list of s, sorted by arrival time. texts
// supplies prompt text of known token counts.
func Generate(s Spec, texts *Texts) ([]Request, error) {
	if s.Workload != WorkloadTrace {
		if !(s.Rate > 0) || math.IsInf(s.Rate, 0) {
			return nil, fmt.Errorf("rate must be a positive number of requests a second, got %v", s.Rate)
		}
		if s.Duration <= 0 {
			return nil, fmt.Errorf("duration must be positive, got %v", s.Duration)
		}
	}
	rng := rand.New(rand.NewPCG(s.Seed, 0x6c6c6d6777)) // "llmgw": the stream constant
	var reqs []Request
	var err error
	switch s.Workload {
	case WorkloadChat:
		reqs = chat(s, rng, texts)
	case WorkloadBurst:
		reqs = burst(s, rng, texts)
	case WorkloadMixed:
		reqs = mixed(s, rng, texts)
	case WorkloadNoisy:
		reqs = noisy(s, rng, texts)
	case WorkloadFlat:
		reqs = flat(s, texts)
	case WorkloadTrace:
		reqs, err = replay(s, texts)
	default:
		return nil, fmt.Errorf("unknown workload %q: want chat, burst, mixed, noisy, flat or trace", s.Workload)
	}
	if err != nil {
		return nil, err
	}
	slices.SortStableFunc(reqs, func(a, b Request) int { return int64Cmp(int64(a.At), int64(b.At)) })
	return reqs, nil
}

func int64Cmp(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// expGap is an exponential inter-arrival time for a Poisson process of
// rate events a second.
func expGap(rng *rand.Rand, rate float64) time.Duration {
	return time.Duration(rng.ExpFloat64() / rate * float64(time.Second))
}

// between is a uniform integer in [lo, hi].
func between(rng *rand.Rand, lo, hi int) int { return lo + rng.IntN(hi-lo+1) }

// chatShape is the chat workload's size. The full shape offers 40 system
// prompts of about 2k tokens, ten sessions each at the default rate and
// duration; quick keeps the structure and shrinks every length.
type chatShape struct {
	prompts, promptTokens int
	minTurns, maxTurns    int
	minQuestion, maxQ     int
	minAnswer, maxAnswer  int
	think                 time.Duration // mean pause between one turn's send and the next
}

func chatShapeFor(quick bool) chatShape {
	if quick {
		return chatShape{prompts: 8, promptTokens: 1000, minTurns: 3, maxTurns: 5, minQuestion: 16, maxQ: 48, minAnswer: 32, maxAnswer: 96, think: 1500 * time.Millisecond}
	}
	return chatShape{prompts: 40, promptTokens: 2000, minTurns: 4, maxTurns: 8, minQuestion: 20, maxQ: 80, minAnswer: 64, maxAnswer: 256, think: 3 * time.Second}
}

// chat is multi-turn sessions over a few long shared system prompts: each
// turn resends the conversation so far with the last answer and a new
// question appended. Sessions start as a Poisson process at rate divided by
// the mean number of turns; to offer the steady rate from the first second,
// sessions also start during one mean session length before time zero, and
// only their turns from time zero on are sent (their history is still part
// of the prompt). That lead-in is twice the longest session's mean span,
// which the exponential think times rarely exceed. Turn times are fixed in advance: the next turn follows
// after an exponential think time whether or not the answer has come.
func chat(s Spec, rng *rand.Rand, texts *Texts) []Request {
	sh := chatShapeFor(s.Quick)
	systems := make([]string, sh.prompts)
	for i := range systems {
		systems[i] = texts.Block(uint64(i)|1<<62, sh.promptTokens)
	}
	meanTurns := float64(sh.minTurns+sh.maxTurns) / 2
	sessionRate := s.Rate / meanTurns
	warm := 2 * time.Duration(sh.maxTurns-1) * sh.think
	var reqs []Request
	session := 0
	for t := -warm + expGap(rng, sessionRate); t < s.Duration; t += expGap(rng, sessionRate) {
		sys := systems[session%sh.prompts]
		sysTokens := sh.promptTokens
		session++
		msgs := []Message{{Role: "system", Content: []string{sys}}}
		tokens := sysTokens
		turns := between(rng, sh.minTurns, sh.maxTurns)
		at := t
		for turn := 0; turn < turns && at < s.Duration; turn++ {
			qn := between(rng, sh.minQuestion, sh.maxQ)
			q := texts.Random(rng, qn)
			msgs = append(msgs, Message{Role: "user", Content: []string{q}})
			tokens += qn
			answer := between(rng, sh.minAnswer, sh.maxAnswer)
			if at >= 0 {
				reqs = append(reqs, Request{
					At: at, Tenant: defaultTenant, Class: defaultClass,
					Prompt: slices.Clone(msgs), PromptTokens: tokens,
					MaxTokens: answer, IgnoreEOS: true, SLO: s.SLO,
				})
			}
			msgs = append(msgs, Message{Role: "assistant", Content: []string{texts.Random(rng, answer)}})
			tokens += answer
			at += expGap(rng, 1/sh.think.Seconds())
		}
	}
	return reqs
}

// burst is single-turn requests of unshared prompts whose Poisson arrival
// rate switches between a base rate and bursts of 3–5 times it: each
// period opens with a burst lasting burstShare of it. The base is set so
// that the mean over each period is the asked rate.
func burst(s Spec, rng *rand.Rand, texts *Texts) []Request {
	const burstShare = 0.2 // of each period spent bursting
	period, minP, maxP, minA, maxA := 10*time.Second, 256, 1024, 64, 256
	if s.Quick {
		period, minP, maxP, minA, maxA = 4*time.Second, 128, 512, 32, 128
	}
	var reqs []Request
	for start := time.Duration(0); start < s.Duration; start += period {
		mult := 3 + 2*rng.Float64()
		base := s.Rate / (1 - burstShare + burstShare*mult)
		burstEnd := start + time.Duration(burstShare*float64(period))
		end := min(start+period, s.Duration)
		for _, seg := range [2]struct {
			from, to time.Duration
			rate     float64
		}{{start, min(burstEnd, end), base * mult}, {burstEnd, end, base}} {
			for t := seg.from + expGap(rng, seg.rate); t < seg.to; t += expGap(rng, seg.rate) {
				pn, an := between(rng, minP, maxP), between(rng, minA, maxA)
				reqs = append(reqs, Request{
					At: t, Tenant: defaultTenant, Class: defaultClass,
					Prompt:       []Message{{Role: "user", Content: []string{texts.Random(rng, pn)}}},
					PromptTokens: pn, MaxTokens: an, IgnoreEOS: true, SLO: s.SLO,
				})
			}
		}
	}
	return reqs
}

// mixedTenant is one tenant of the mixed workload: its share of requests,
// its priority class and SLO, and its request sizes. Tenants with shared
// prompts pick one of a few system prompts and add a question of their own.
type mixedTenant struct {
	tenant, class        string
	share                float64
	slo                  SLO
	shared, sharedTokens int // shared system prompts and their length; 0 for none
	minPrompt, maxPrompt int // the request's own text
	minAnswer, maxAnswer int
}

// mixedTenants are a latency-critical search service, an interactive chat
// service and a batch tenant that can wait. Their SLOs are ordered so that
// admission has something to protect: critical is tight, sheddable loose.
func mixedTenants(quick bool) []mixedTenant {
	ts := []mixedTenant{
		{tenant: "acme/search", class: tenant.PriorityCritical, share: 0.3,
			slo:       SLO{TTFT: 500 * time.Millisecond, TPOT: 50 * time.Millisecond},
			minPrompt: 128, maxPrompt: 512, minAnswer: 16, maxAnswer: 64},
		{tenant: "acme/chat", class: tenant.PriorityStandard, share: 0.4,
			slo:    SLO{TTFT: time.Second, TPOT: 100 * time.Millisecond},
			shared: 4, sharedTokens: 1024, minPrompt: 32, maxPrompt: 256, minAnswer: 64, maxAnswer: 256},
		{tenant: "beta/batch", class: tenant.PrioritySheddable, share: 0.3,
			slo:       SLO{TTFT: 10 * time.Second, TPOT: 250 * time.Millisecond},
			minPrompt: 1024, maxPrompt: 4096, minAnswer: 128, maxAnswer: 512},
	}
	if quick {
		for i := range ts {
			t := &ts[i]
			t.sharedTokens /= 2
			t.minPrompt, t.maxPrompt = t.minPrompt/2, t.maxPrompt/2
			t.minAnswer, t.maxAnswer = t.minAnswer/2, t.maxAnswer/2
		}
	}
	return ts
}

// mixed is several tenants and priority classes, each with its own SLO,
// arriving as one Poisson process at the asked rate; each request's tenant
// is drawn by share.
func mixed(s Spec, rng *rand.Rand, texts *Texts) []Request {
	ts := mixedTenants(s.Quick)
	systems := make([][]string, len(ts))
	for i, t := range ts {
		for j := range t.shared {
			systems[i] = append(systems[i], texts.Block(uint64(i)<<32|uint64(j)|1<<61, t.sharedTokens))
		}
	}
	var reqs []Request
	for at := expGap(rng, s.Rate); at < s.Duration; at += expGap(rng, s.Rate) {
		i, u := 0, rng.Float64()
		for ; i < len(ts)-1 && u >= ts[i].share; i++ {
			u -= ts[i].share
		}
		t := ts[i]
		var msgs []Message
		tokens := 0
		if t.shared > 0 {
			msgs = append(msgs, Message{Role: "system", Content: []string{systems[i][rng.IntN(t.shared)]}})
			tokens += t.sharedTokens
		}
		pn := between(rng, t.minPrompt, t.maxPrompt)
		msgs = append(msgs, Message{Role: "user", Content: []string{texts.Random(rng, pn)}})
		reqs = append(reqs, Request{
			At: at, Tenant: t.tenant, Class: t.class,
			Prompt: msgs, PromptTokens: tokens + pn,
			MaxTokens: between(rng, t.minAnswer, t.maxAnswer), IgnoreEOS: true, SLO: t.slo,
		})
	}
	return reqs
}

// noisyTenants are the noisy workload's three standard tenants of equal
// weight, and how many times the others' rate each sends: one noisy
// neighbour at five times the two quiet ones.
var noisyTenants = []struct {
	tenant string
	times  float64
}{{"noisy/loud", 5}, {"noisy/quiet-a", 1}, {"noisy/quiet-b", 1}}

// Noisy request sizes: a short chat turn, the same for every tenant, so
// that served tokens differ only by how many requests were served.
const (
	noisyMinPrompt, noisyMaxPrompt = 256, 1024
	noisyMinAnswer, noisyMaxAnswer = 64, 256
)

// noisy is three standard tenants arriving as one Poisson process at the
// asked rate, one of them sending five times what each other does: what a
// gateway's fairness between tenants is measured on (Jain's index over
// their served tokens).
func noisy(s Spec, rng *rand.Rand, texts *Texts) []Request {
	total := 0.0
	for _, t := range noisyTenants {
		total += t.times
	}
	scale := 1
	if s.Quick {
		scale = 2
	}
	var reqs []Request
	for at := expGap(rng, s.Rate); at < s.Duration; at += expGap(rng, s.Rate) {
		i, u := 0, rng.Float64()*total
		for ; i < len(noisyTenants)-1 && u >= noisyTenants[i].times; i++ {
			u -= noisyTenants[i].times
		}
		pn := between(rng, noisyMinPrompt/scale, noisyMaxPrompt/scale)
		reqs = append(reqs, Request{
			At: at, Tenant: noisyTenants[i].tenant, Class: tenant.PriorityStandard,
			Prompt:       []Message{{Role: "user", Content: []string{texts.Random(rng, pn)}}},
			PromptTokens: pn, MaxTokens: between(rng, noisyMinAnswer/scale, noisyMaxAnswer/scale), IgnoreEOS: true, SLO: s.SLO,
		})
	}
	return reqs
}

// Flat workload sizes: short enough that the gateway's own work, not the
// model's, is what a flat run measures.
const (
	flatPromptTokens = 32
	flatAnswerTokens = 16
)

// flat is one fixed short prompt sent at evenly spaced arrivals, for
// measuring overhead.
func flat(s Spec, texts *Texts) []Request {
	prompt := texts.Block(1<<60, flatPromptTokens)
	answer := flatAnswerTokens
	if s.OutputTokens > 0 {
		answer = s.OutputTokens
	}
	var reqs []Request
	for i := 0; ; i++ {
		at := time.Duration(float64(i) * float64(time.Second) / s.Rate)
		if at >= s.Duration {
			break
		}
		reqs = append(reqs, Request{
			At: at, Tenant: defaultTenant, Class: defaultClass,
			Prompt:       []Message{{Role: "user", Content: []string{prompt}}},
			PromptTokens: flatPromptTokens, MaxTokens: answer, IgnoreEOS: true, SLO: s.SLO,
		})
	}
	return reqs
}
