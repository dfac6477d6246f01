package admission

// What admission knows, handed out as plain values for the status the
// router gives the console: a model's recent p99s, its goodput by class,
// and how many of its requests wait at its pool's gate.

import "time"

// P99 is model's recent 99th-percentile TTFT and TPOT over the last
// sloWindow, and how many samples the tracker holds; a figure is zero
// while it has fewer than sloMinSamples.
func (t *SLOTracker) P99(model string, now time.Time) (ttft, tpot time.Duration, samples int) {
	ttft, tpot, _ = t.p99(model, now)
	return ttft, tpot, t.Len(model)
}

// Ratios is model's goodput by class name: the share of its recent
// requests of each class that met both of the class's SLOs. A class with
// no requests yet is missing.
func (t *Goodput) Ratios(model string) map[string]float64 {
	out := map[string]float64{}
	t.ratios(func(k goodputKey, ratio float64) {
		if k.model == model {
			out[k.class.String()] = ratio
		}
	})
	return out
}

// Queued is how many of model's requests wait at pool's gate now; zero
// when the pool has no gate.
func (gs *Gates) Queued(pool, model string) int {
	g := gs.Of(pool)
	if g == nil {
		return 0
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.queued[model]
}
