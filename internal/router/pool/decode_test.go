package pool

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
)

// TestLearnDecode: fed the gaps of streams on engines of two shapes, the
// decode model comes to say how each step grows: with the streams in it
// and the prompt tokens computed in it on an engine that batches both,
// with neither on one that gives each request a slot. Prompts computed
// while no stream decodes, as where answers are short and far between,
// stall no gap and do not make a prompt token look cheaper.
func TestLearnDecode(t *testing.T) {
	for _, truth := range []Decode{
		{Step: 0.006, PerStream: 75e-6, PerPrefillToken: 75e-6}, // chunked prefill
		{Step: 0.010}, // slots
		{Step: 0.016, PerStream: 75e-6, PerPrefillToken: 25e-6}, // decode dear, prefill cheap
	} {
		p := New(catalog.Pool{Name: "p", Endpoints: []catalog.Endpoint{{URL: "http://10.0.0.1:8000/v1"}}}, nil, nil)
		rng := rand.New(rand.NewPCG(3, 4))
		now := time.Now()
		for range 200 {
			// A prompt computed alone: its answer's one token ends it.
			alone := p.Send(0, int64(rng.IntN(20000)), true, false, now)
			alone.FirstToken(now)
			alone.Done(0)
			// n streams decode for a few steps while a prompt of
			// perStep tokens a step is computed; it then streams too.
			n, steps, perStep := 1+rng.IntN(40), 8+rng.IntN(8), rng.IntN(2000)
			calls := make([]Call, 0, n+1)
			for range n {
				c := p.Send(0, 0, true, false, now)
				c.FirstToken(now)
				calls = append(calls, c)
			}
			gap := time.Duration((truth.Step + truth.PerStream*float64(n) + truth.PerPrefillToken*float64(perStep)) * float64(time.Second))
			for range steps {
				for i := range calls {
					calls[i].Gap(gap)
				}
			}
			prompt := p.Send(0, int64(perStep*steps), true, false, now)
			prompt.FirstToken(now)
			calls = append(calls, prompt)
			for i := range calls {
				calls[i].Done(0)
			}
		}
		got := *p.Endpoints()[0].decodeModel()
		for _, c := range []struct {
			name            string
			got, want, unit float64
		}{
			{"step", got.Step, truth.Step, 1},
			{"per stream", got.PerStream, truth.PerStream, tenStreams},
			{"per prefill token", got.PerPrefillToken, truth.PerPrefillToken, kiloTokens},
		} {
			// Within 5%, or 1 ms at the fit's unit of the feature.
			if math.Abs(c.got-c.want)/c.unit > max(0.05*c.want/c.unit, 0.001) {
				t.Errorf("%+v: %s %.4g, want %.4g", truth, c.name, c.got, c.want)
			}
		}
	}
}
