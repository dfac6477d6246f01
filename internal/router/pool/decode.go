package pool

// The decode model: how an endpoint's step, the gap between two tokens
// of a stream, grows with the streams it decodes at once and with the
// prompts it computes between them, learned from its streams' gaps. An
// engine that batches decode and fits prompt chunks into the same steps
// (vLLM, SGLang) slows every stream by both; one that gives each request
// a slot of its own, by neither.

import (
	"sync"
	"sync/atomic"
)

// stepModel is what an endpoint's streams say of its step time.
type stepModel struct {
	// gapNanos and gaps sum the inter-token gaps of the streams here:
	// their mean over a while is the server's step time as its clients
	// see it. gapStreams sums the streams decoding here at each gap, and
	// gapPrompt the uncached prompt tokens of each call whose first token
	// has come, times the streams decoding here as it came: summed over
	// the gaps, what their steps decoded and what prefill they carried.
	// A prompt computed while no stream decodes holds up no gap.
	gapNanos, gaps, gapStreams, gapPrompt atomic.Int64
	// decode is the decode model learned from the gaps (nil before the
	// first observation: the prior), and decodeFit what it is learned by.
	decode    atomic.Pointer[Decode]
	decodeFit decodeFit
	// batch is how many requests admission lets the endpoint have in
	// flight so that its step time stays within the TPOT aim.
	batch batchLimit
}

// The decode model's prior: a 10 ms step, nothing more a stream, and a
// prompt token computed between two tokens stalls them by what the
// first-token model's prior says it costs, as if prefill and decode took
// turns on the same hardware. The streams' gaps replace it.
const (
	priorStep = 0.010
	// decodeSampleSteps is how many steps' gaps, at least, one observation
	// of the decode model averages: a step that carries a prompt chunk
	// counts in the share such steps have.
	decodeSampleSteps = 8
	// decodeDecay is the weight the fit keeps of what it knew at each
	// new observation: about the last thirty count.
	decodeDecay = 0.97
	// decodeRidge holds each coefficient toward the prior as firmly as a
	// tenth of an observation at a feature's unit would: a second, ten
	// streams, a thousand prompt tokens a step.
	decodeRidge = 0.1
)

// The decode model's fit counts streams in tens, so that its
// coefficients are of the order of a step and the fit well conditioned.
const tenStreams = 0.1

// Decode is an endpoint's decode model: a step takes Step seconds, plus
// PerStream for each stream decoded in it, plus PerPrefillToken for each
// prompt token computed in it. PerPrefillToken is also how long a prompt
// token holds up every stream at the endpoint: what a prefill sent there
// costs the requests already decoding.
type Decode struct {
	Step, PerStream, PerPrefillToken float64
}

// priorDecode is the decode model before an endpoint's streams have shown
// their gaps.
var priorDecode = Decode{Step: priorStep, PerPrefillToken: priorPerToken}

// decodeFit is the fit behind an endpoint's decode model, with the sums it
// takes its observations from as they stood at the last one.
type decodeFit struct {
	mu                               sync.Mutex
	f                                fit
	gapNanos, gaps, streams, prompts int64
}

// decodeModel is the endpoint's decode model.
func (s *stepModel) decodeModel() *Decode {
	if d := s.decode.Load(); d != nil {
		return d
	}
	return &priorDecode
}

// learnDecode folds the gaps since the last observation into the decode
// model, once they span decodeSampleSteps steps: their mean is a step's
// time, the streams in flight at each gap averaged over them the streams
// a step decodes, and the prompt tokens whose first token came meanwhile,
// each counted once for every stream that decoded beside it, averaged
// over the gaps, the prompt tokens a step computed. Prompts computed
// while nothing decoded are in no gap, and count in none: spread over
// the steps that were seen, they would make a prompt token look cheap
// wherever streams are short and far between.
func (s *stepModel) learnDecode() {
	d := &s.decodeFit
	if !d.mu.TryLock() {
		return // another call's end is taking the same observation
	}
	defer d.mu.Unlock()
	gapNanos, gaps := s.gapNanos.Load(), s.gaps.Load()
	streams, prompts := s.gapStreams.Load(), s.gapPrompt.Load()
	n := gaps - d.gaps
	if n <= 0 {
		return
	}
	perStep := float64(streams-d.streams) / float64(n) // streams decoded a step
	steps := float64(n) / max(perStep, 1)
	if steps < decodeSampleSteps {
		return
	}
	step := float64(gapNanos-d.gapNanos) / float64(n) / 1e9
	prompt := float64(prompts-d.prompts) / float64(n)
	d.gapNanos, d.gaps, d.streams, d.prompts = gapNanos, gaps, streams, prompts
	if d.f.n == 0 {
		r := decodeRidge
		d.f = newFit(decodeDecay, []float64{priorDecode.Step, priorDecode.PerStream / tenStreams, priorDecode.PerPrefillToken / kiloTokens}, []float64{r, r, r})
	}
	d.f.add([]float64{1, perStep * tenStreams, prompt * kiloTokens}, step)
	th := d.f.theta
	s.decode.Store(&Decode{
		Step:            max(th[0], 0),
		PerStream:       max(th[1], 0) * tenStreams,
		PerPrefillToken: max(th[2], 0) * kiloTokens,
	})
}
