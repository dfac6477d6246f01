package bench

// Capacity at SLO: the most load a sweep found the target could carry
// while nearly every request still met its SLO. It is DistServe's
// goodput-based capacity: the highest rate at which at least 90% of
// requests meet both their TTFT and TPOT objectives, with errors,
// rejections and drops counted as misses.

import (
	"cmp"
	"fmt"
	"slices"
)

// capacityGoodput is the share of requests that must meet their SLO for a
// load to count as carried: DistServe's 90% attainment.
const capacityGoodput = 0.9

// Capacity units: a rate sweep's offered requests a second, or a trace
// sweep's time scale.
const (
	unitRate      = "req/s"
	unitTimeScale = "time_scale"
)

// Capacity is a sweep's capacity at SLO.
type Capacity struct {
	// AtSLO is the highest load with goodput at least capacityGoodput, in
	// Unit, interpolated linearly between the two swept loads around the
	// crossing. It is the highest swept load when every load passed (see
	// LowerBound), and 0 when none did (see Note).
	AtSLO float64 `json:"capacity_at_slo"`
	Unit  string  `json:"capacity_unit"`
	// RateAtSLO is the completed requests a second at AtSLO,
	// interpolated the same way: for a trace, capacity as a request rate.
	RateAtSLO float64 `json:"capacity_achieved_rate"`
	// LowerBound reports whether every swept load passed, so the real
	// capacity lies above AtSLO.
	LowerBound bool   `json:"capacity_lower_bound,omitempty"`
	Note       string `json:"capacity_note,omitempty"`
}

// sweepPoint is one run of a sweep as capacity reads it.
type sweepPoint struct {
	load     float64 // offered rate, or time scale
	goodput  float64 // share of requests meeting their SLO
	achieved float64 // completed requests a second
}

// sweepPoints are a sweep's runs as capacity reads them, in their order.
func sweepPoints(runs []Run, trace bool) []sweepPoint {
	points := make([]sweepPoint, len(runs))
	for i, r := range runs {
		points[i] = sweepPoint{load: r.load(trace), goodput: r.Goodput, achieved: r.AchievedRate}
	}
	return points
}

// load is what a sweep varied for r: the offered rate, or a trace's time
// scale.
func (r *Run) load(trace bool) float64 {
	if trace {
		return r.TimeScale
	}
	return r.Rate
}

// sortedByLoad is points sorted by load, ties in their order.
func sortedByLoad(points []sweepPoint) []sweepPoint {
	return slices.SortedStableFunc(slices.Values(points), func(a, b sweepPoint) int { return cmp.Compare(a.load, b.load) })
}

// capacityOf is the capacity of a sweep's runs: over their offered rates,
// or over a trace's time scales.
func capacityOf(runs []Run, trace bool) Capacity {
	c := capacityAtSLO(sweepPoints(runs, trace))
	c.Unit = unitRate
	if trace {
		c.Unit = unitTimeScale
	}
	return c
}

// refinement is the load a sweep runs next to narrow its capacity at SLO:
// halfway between the highest passing load and the next one swept, the
// two that capacityAtSLO interpolates between. A straight line between
// them reads the capacity low where goodput falls faster the further past
// the knee, as it does past a saturated server's, and each run halves the
// interval. There is none when every load passed or none did, or when the
// interval cannot be halved.
func refinement(runs []Run, trace bool) (float64, bool) {
	points := sortedByLoad(sweepPoints(runs, trace))
	best := highestPassing(points)
	if best < 0 || best == len(points)-1 {
		return 0, false
	}
	lo, hi := points[best].load, points[best+1].load
	mid := lo + (hi-lo)/2
	return mid, lo < mid && mid < hi
}

// highestPassing is the index of the highest load in points, sorted by
// load, whose goodput is at least capacityGoodput; -1 when none is.
func highestPassing(points []sweepPoint) int {
	best := -1
	for i, p := range points {
		if p.goodput >= capacityGoodput {
			best = i
		}
	}
	return best
}

// capacityAtSLO finds the highest load whose goodput is at least
// capacityGoodput. When a higher load fails, the capacity is interpolated
// linearly between that highest passing load and the next, failing, one.
// Goodput that dips below the target and recovers at a higher load (noise,
// or a run hit by a fault) is noted; the highest passing load still
// counts.
func capacityAtSLO(points []sweepPoint) Capacity {
	points = sortedByLoad(points)
	if len(points) == 0 {
		return Capacity{Note: "no runs"}
	}
	best := highestPassing(points)
	if best < 0 {
		lo := points[0]
		return Capacity{Note: fmt.Sprintf("no load met the SLO for %.0f%% of requests; at the lowest, %g, goodput was %.3f",
			capacityGoodput*100, lo.load, lo.goodput)}
	}
	var note string
	for i := range best {
		if points[i].goodput < capacityGoodput {
			note = fmt.Sprintf("goodput is not monotone: below %.0f%% at %g, above again at %g; capacity is from the highest passing load",
				capacityGoodput*100, points[i].load, points[best].load)
			break
		}
	}
	p := points[best]
	if best == len(points)-1 {
		if note != "" {
			note += "; "
		}
		note += "lower bound: the highest load swept passed"
		return Capacity{AtSLO: p.load, RateAtSLO: p.achieved, LowerBound: true, Note: note}
	}
	q := points[best+1]
	f := (p.goodput - capacityGoodput) / (p.goodput - q.goodput) // in [0, 1): q fails, p passes
	return Capacity{
		AtSLO:     p.load + f*(q.load-p.load),
		RateAtSLO: p.achieved + f*(q.achieved-p.achieved),
		Note:      note,
	}
}

// String is the capacity for the table.
func (c *Capacity) String() string {
	head := fmt.Sprintf("capacity at SLO (%.0f%% of requests within TTFT and TPOT): ", capacityGoodput*100)
	if c.AtSLO == 0 {
		return head + "0: " + c.Note
	}
	var s string
	if c.Unit == unitTimeScale {
		s = fmt.Sprintf("time scale %.3g, %.1f req/s achieved", c.AtSLO, c.RateAtSLO)
	} else {
		s = fmt.Sprintf("%.3g req/s offered, %.1f req/s achieved", c.AtSLO, c.RateAtSLO)
	}
	if c.LowerBound {
		s = "at least " + s
	}
	if c.Note != "" {
		s += " (" + c.Note + ")"
	}
	return head + s
}
