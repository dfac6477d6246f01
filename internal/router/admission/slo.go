package admission

// Each model's recent first-token and per-token times, kept so that
// admission can compare them against the model's SLO without reading the
// metrics back.

import (
	"slices"
	"sync"
	"time"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
)

const (
	// sloSamplesKept is how many recent streamed requests a model's
	// tracker holds: enough for a p99 that moves with the load, little
	// enough to sort on every look.
	sloSamplesKept = 256
	// sloWindow is how old a sample may be and still count.
	sloWindow = 5 * time.Minute
	// sloMinSamples is how many recent requests a p99 needs before it is
	// believed.
	sloMinSamples = 20
	// sloRecompute is how long a model's p99s are kept before they are
	// taken again: admission reads them on every arrival and every move of
	// its queue, and a tenth of a second changes them little.
	sloRecompute = 100 * time.Millisecond
)

// SLOTracker keeps each model's recent first-token and per-token times.
type SLOTracker struct {
	mu sync.Mutex
	by map[string]*sloSamples // key: canonical model name
}

type sloSample struct {
	at         time.Time
	ttft, tpot time.Duration
}

// sloSamples is a ring of a model's latest samples, and the p99s last
// taken over it.
type sloSamples struct {
	ring []sloSample // at most sloSamplesKept
	next int         // where the next sample goes once ring is full

	takenAt    time.Time // when ttft and tpot were taken; zero for never
	ttft, tpot time.Duration
}

// Add notes a streamed request's time to first token and time per output
// token for model, ended now; either is zero when it was not measured.
func (t *SLOTracker) Add(model string, ttft, tpot time.Duration) {
	t.AddAt(model, time.Now(), ttft, tpot)
}

// AddAt is Add for a request that ended at at.
func (t *SLOTracker) AddAt(model string, at time.Time, ttft, tpot time.Duration) {
	x := sloSample{at: at, ttft: ttft, tpot: tpot}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.by == nil {
		t.by = make(map[string]*sloSamples)
	}
	s := t.by[model]
	if s == nil {
		s = &sloSamples{}
		t.by[model] = s
	}
	if len(s.ring) < sloSamplesKept {
		s.ring = append(s.ring, x)
		return
	}
	s.ring[s.next] = x
	s.next = (s.next + 1) % sloSamplesKept
}

// p99 is a model's recent 99th percentiles, and false with too few. Either
// figure is zero when it alone has too few samples.
func (t *SLOTracker) p99(model string, now time.Time) (ttft, tpot time.Duration, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.by[model]
	if s == nil {
		return 0, 0, false
	}
	if d := now.Sub(s.takenAt); s.takenAt.IsZero() || d < 0 || d >= sloRecompute {
		var a, b [sloSamplesKept]time.Duration
		na, nb := 0, 0
		for _, x := range s.ring {
			if now.Sub(x.at) > sloWindow {
				continue
			}
			if x.ttft > 0 {
				a[na] = x.ttft
				na++
			}
			if x.tpot > 0 {
				b[nb] = x.tpot
				nb++
			}
		}
		s.ttft, s.tpot, s.takenAt = percentile99(a[:na]), percentile99(b[:nb]), now
	}
	return s.ttft, s.tpot, s.ttft > 0 || s.tpot > 0
}

// percentile99 is v's 99th percentile, or zero with fewer than
// sloMinSamples. It sorts v.
func percentile99(v []time.Duration) time.Duration {
	if len(v) < sloMinSamples {
		return 0
	}
	slices.Sort(v)
	return v[len(v)*99/100]
}

// Len is how many recent samples the tracker holds for model.
func (t *SLOTracker) Len(model string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s := t.by[model]; s != nil {
		return len(s.ring)
	}
	return 0
}

// Shares is how near a model's recent p99s are to its SLO, each as a
// share of it: 1 at the SLO, above 1 past it. A share is 0 when the model
// has no SLO of that kind or too little is known of it.
func (t *SLOTracker) Shares(m *catalog.Model, now time.Time) (ttft, tpot float64) {
	slo := m.SLO
	if slo.TTFTp99 <= 0 && slo.TPOTp99 <= 0 {
		return 0, 0
	}
	p99TTFT, p99TPOT, ok := t.p99(m.Name, now)
	if !ok {
		return 0, 0
	}
	if slo.TTFTp99 > 0 && p99TTFT > 0 {
		ttft = float64(p99TTFT) / float64(slo.TTFTp99)
	}
	if slo.TPOTp99 > 0 && p99TPOT > 0 {
		tpot = float64(p99TPOT) / float64(slo.TPOTp99)
	}
	return ttft, tpot
}

// StallWeight is how much auto charges a prompt for the stall its prefill
// gives the streams decoding where it goes, from how near each of the
// model's SLOs is to breaking. While the model's recent TPOT p99 is past
// its TPOT SLO, it is the amount by which that p99 is nearer its SLO than
// the TTFT p99 is to its own, each as a share of its SLO, at most 1. It is
// zero while the answers keep their pace, while the first token is the
// nearer to breaking, and when the model has no SLO of either kind or too
// little is known: then a request's own wait is what matters, and auto
// ranks by it alone.
func (t *SLOTracker) StallWeight(m *catalog.Model, now time.Time) float64 {
	ttft, tpot := t.Shares(m, now)
	if ttft <= 0 || tpot <= 1 {
		return 0
	}
	return min(max(tpot-ttft, 0), 1)
}
