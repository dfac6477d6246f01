package admission

import (
	"math"
	"testing"
	"time"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
)

func TestSLOTrackerP99(t *testing.T) {
	var tr SLOTracker
	now := time.Now()
	for i := 1; i < sloMinSamples; i++ {
		tr.Add("m", time.Duration(i)*time.Millisecond, 0)
	}
	if _, _, ok := tr.p99("m", now); ok {
		t.Fatalf("a p99 from %d samples was believed", sloMinSamples-1)
	}
	tr.Add("m", sloMinSamples*time.Millisecond, 0)
	if _, _, ok := tr.p99("m", now.Add(sloRecompute-1)); ok {
		t.Error("p99s taken again sooner than sloRecompute")
	}
	ttft, tpot, ok := tr.p99("m", now.Add(sloRecompute))
	if !ok || ttft != sloMinSamples*time.Millisecond || tpot != 0 {
		t.Errorf("p99 of 1..20 ms = %v %v %v, want 20ms 0 true", ttft, tpot, ok)
	}
	// The ring keeps the latest sloSamplesKept: 1000 samples of 1..1000 ms
	// leave 745..1000, whose p99 (index 253 of 256) is 998 ms.
	for i := 1; i <= 1000; i++ {
		tr.Add("n", time.Duration(i)*time.Millisecond, time.Duration(i)*time.Microsecond)
	}
	ttft, tpot, _ = tr.p99("n", time.Now())
	if ttft != 998*time.Millisecond || tpot != 998*time.Microsecond {
		t.Errorf("p99 = %v %v, want 998ms 998µs", ttft, tpot)
	}
	if len(tr.by["n"].ring) != sloSamplesKept {
		t.Errorf("ring holds %d, want %d", len(tr.by["n"].ring), sloSamplesKept)
	}
	// Samples older than the window do not count.
	if _, _, ok := tr.p99("n", time.Now().Add(sloWindow+time.Second)); ok {
		t.Error("samples older than the window were counted")
	}
}

func TestStallWeight(t *testing.T) {
	var tr SLOTracker
	m := catalog.Model{Name: "m", SLO: catalog.SLO{TTFTp99: 500 * time.Millisecond, TPOTp99: 50 * time.Millisecond}}
	now := time.Now()
	if w := tr.StallWeight(&m, now); w != 0 {
		t.Errorf("weight with no samples = %v, want 0", w)
	}
	tests := []struct {
		name       string
		ttft, tpot time.Duration
		want       float64
	}{
		{"TTFT nearer its SLO", 400 * time.Millisecond, 25 * time.Millisecond, 0},
		{"TPOT nearer, within its SLO", 100 * time.Millisecond, 45 * time.Millisecond, 0},
		{"TPOT past its SLO, TTFT past by more", time.Second, 60 * time.Millisecond, 0},
		{"TPOT past its SLO and nearer by a quarter", 500 * time.Millisecond, 62500 * time.Microsecond, 0.25},
		{"TPOT far past its SLO, TTFT well within", 50 * time.Millisecond, 100 * time.Millisecond, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr.by = nil
			for range sloMinSamples {
				tr.Add("m", tt.ttft, tt.tpot)
			}
			if w := tr.StallWeight(&m, time.Now()); math.Abs(w-tt.want) > 1e-9 {
				t.Errorf("weight = %v, want %v", w, tt.want)
			}
		})
	}
	noSLO := m
	noSLO.SLO.TPOTp99 = 0
	if w := tr.StallWeight(&noSLO, time.Now()); w != 0 {
		t.Errorf("weight of a model with no TPOT SLO = %v, want 0", w)
	}
}
