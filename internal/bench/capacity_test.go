package bench

import (
	"math"
	"strings"
	"testing"
)

func TestCapacityAtSLO(t *testing.T) {
	pts := func(loads, goodputs []float64) []sweepPoint {
		var p []sweepPoint
		for i := range loads {
			p = append(p, sweepPoint{load: loads[i], goodput: goodputs[i], achieved: loads[i] * 0.9})
		}
		return p
	}
	tests := []struct {
		name       string
		points     []sweepPoint
		want       float64
		lowerBound bool
		note       string // a substring of the note; empty means no note
	}{
		{"crossing", pts([]float64{10, 20, 30}, []float64{1, 0.95, 0.7}), 22, false, ""},
		{"exactly at the target", pts([]float64{10, 20, 30}, []float64{1, 0.9, 0.5}), 20, false, ""},
		{"just past the first", pts([]float64{10, 20}, []float64{0.9, 0.8}), 10, false, ""},
		{"unsorted input", pts([]float64{30, 10, 20}, []float64{0.7, 1, 0.95}), 22, false, ""},
		{"all pass", pts([]float64{10, 20, 30}, []float64{1, 0.99, 0.91}), 30, true, "lower bound"},
		{"one run passes", pts([]float64{5}, []float64{0.95}), 5, true, "lower bound"},
		{"none pass", pts([]float64{10, 20}, []float64{0.5, 0.2}), 0, false, "at the lowest, 10, goodput was 0.500"},
		{"non-monotone", pts([]float64{10, 20, 30, 40}, []float64{0.95, 0.85, 0.92, 0.8}), 30 + 10*0.02/0.12, false, "not monotone: below 90% at 20, above again at 30"},
		{"non-monotone, last passes", pts([]float64{10, 20, 30}, []float64{0.95, 0.5, 0.95}), 30, true, "not monotone"},
		{"no runs", nil, 0, false, "no runs"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := capacityAtSLO(tt.points)
			if math.Abs(c.AtSLO-tt.want) > 1e-9 || c.LowerBound != tt.lowerBound {
				t.Errorf("capacity %v, lower bound %v; want %v, %v", c.AtSLO, c.LowerBound, tt.want, tt.lowerBound)
			}
			if math.Abs(c.RateAtSLO-tt.want*0.9) > 1e-9 {
				t.Errorf("achieved rate at capacity %v, want %v: interpolated like the load", c.RateAtSLO, tt.want*0.9)
			}
			if tt.note == "" && c.Note != "" || !strings.Contains(c.Note, tt.note) {
				t.Errorf("note %q, want one containing %q", c.Note, tt.note)
			}
		})
	}
}

func TestCapacityOfTraceIsInTimeScale(t *testing.T) {
	runs := []Run{
		{Rate: 4, TimeScale: 2, Report: Report{Stats: Stats{Goodput: 1, AchievedRate: 4}}},
		{Rate: 8, TimeScale: 4, Report: Report{Stats: Stats{Goodput: 0.8, AchievedRate: 6}}},
	}
	c := capacityOf(runs, true)
	if c.Unit != unitTimeScale || math.Abs(c.AtSLO-3) > 1e-9 || math.Abs(c.RateAtSLO-5) > 1e-9 {
		t.Errorf("trace capacity %+v; want time scale 3 and 5 req/s achieved", c)
	}
	if got := c.String(); !strings.Contains(got, "time scale 3, 5.0 req/s achieved") {
		t.Errorf("String() = %q", got)
	}
	c = capacityOf(runs, false)
	if c.Unit != unitRate || math.Abs(c.AtSLO-6) > 1e-9 {
		t.Errorf("rate capacity %+v; want 6 req/s", c)
	}
}

func TestRefinement(t *testing.T) {
	runs := func(goodputs ...float64) []Run {
		var r []Run
		for i, g := range goodputs {
			r = append(r, Run{Rate: float64(10 * (i + 1)), Report: Report{Stats: Stats{Goodput: g}}})
		}
		return r
	}
	tests := []struct {
		name string
		runs []Run
		want float64 // 0: no refinement
	}{
		{"crossing", runs(1, 0.95, 0.7), 25},
		{"unsorted, as refined runs are appended", append(runs(1, 0.95, 0.7), Run{Rate: 25, Report: Report{Stats: Stats{Goodput: 0.92}}}), 27.5},
		{"above the highest passing load", runs(0.95, 0.5, 0.95, 0.6), 35},
		{"every load passed", runs(1, 0.99), 0},
		{"none did", runs(0.5, 0.2), 0},
		{"one run", runs(0.95), 0},
		{"no runs", nil, 0},
		{"nothing left to halve", []Run{{Rate: 1, Report: Report{Stats: Stats{Goodput: 1}}}, {Rate: math.Nextafter(1, 2)}}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := refinement(tt.runs, false)
			if ok != (tt.want != 0) || got != tt.want && ok {
				t.Errorf("refinement %v, %v; want %v", got, ok, tt.want)
			}
		})
	}
	// A trace's sweep is over time scales, not the offered rate.
	trace := []Run{
		{Rate: 40, TimeScale: 2, Report: Report{Stats: Stats{Goodput: 1}}},
		{Rate: 90, TimeScale: 4, Report: Report{Stats: Stats{Goodput: 0.5}}},
	}
	if got, ok := refinement(trace, true); !ok || got != 3 {
		t.Errorf("trace refinement %v, %v; want time scale 3", got, ok)
	}
}
