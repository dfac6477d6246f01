package pool

import (
	"math"
	"testing"
)

// TestFitForgets: after the truth changes, the fit follows it within a
// few dozen observations, the old ones decayed away; a non-finite
// observation changes nothing.
func TestFitForgets(t *testing.T) {
	f := newFit(0.9, []float64{0, 0}, []float64{1e-9, 1e-9})
	observe := func(a, b float64, n int) {
		for i := range n {
			x := float64(i % 7)
			f.add([]float64{1, x}, a+b*x)
		}
	}
	observe(1, 2, 100)
	if math.Abs(f.theta[0]-1) > 1e-3 || math.Abs(f.theta[1]-2) > 1e-3 {
		t.Fatalf("θ = %v, want [1 2]", f.theta[:2])
	}
	observe(5, -1, 150)
	if math.Abs(f.theta[0]-5) > 1e-3 || math.Abs(f.theta[1]+1) > 1e-3 {
		t.Errorf("after the change θ = %v, want [5 -1]", f.theta[:2])
	}
	before := f.theta
	f.add([]float64{1, math.NaN()}, 3)
	f.add([]float64{1, 2}, math.Inf(1))
	if f.theta != before {
		t.Errorf("a non-finite observation moved θ from %v to %v", before[:2], f.theta[:2])
	}
}
