package bench

// From results to figures: exact percentiles over sorted samples, goodput
// (the share of requests that met their SLO, with rejections, drops and
// errors counted as misses), the prefix hit rate, and the same figures per
// class and per tenant; between tenants, Jain's fairness index beside the
// highest a max-min fair sharing of the same tokens reaches.

import (
	"cmp"
	"math"
	"slices"
	"time"
)

// Stats are the figures of a set of requests. Latencies are in seconds,
// and 0 when there is no sample to take them from.
type Stats struct {
	Requests int `json:"requests"` // every request scheduled, sent or not
	OK       int `json:"ok"`
	Errors   int `json:"errors"`
	Rejected int `json:"rejected"` // answered 429
	Dropped  int `json:"dropped"`  // not sent: concurrency cap or cancelled run
	// Late is how many were served with their first token past their TTFT
	// SLO: answered, but too late to count.
	Late int `json:"late"`
	// Goodput is the share of Requests that completed within both parts of
	// their SLO, 0 to 1.
	Goodput float64 `json:"goodput"`

	TTFTp50 float64 `json:"ttft_p50_s"`
	TTFTp90 float64 `json:"ttft_p90_s"`
	TTFTp99 float64 `json:"ttft_p99_s"`
	TPOTp50 float64 `json:"tpot_p50_s"`
	TPOTp90 float64 `json:"tpot_p90_s"`
	TPOTp99 float64 `json:"tpot_p99_s"`
	// ITL is every gap between two token events of a stream.
	ITLp50 float64 `json:"itl_p50_s"`
	ITLp90 float64 `json:"itl_p90_s"`
	ITLp99 float64 `json:"itl_p99_s"`
	E2Ep50 float64 `json:"e2e_p50_s"`
	E2Ep90 float64 `json:"e2e_p90_s"`
	E2Ep99 float64 `json:"e2e_p99_s"`
	// Rejectedp50 and Rejectedp99 are how long a 429 took to come.
	Rejectedp50 float64 `json:"rejected_p50_s"`
	Rejectedp99 float64 `json:"rejected_p99_s"`

	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
	CachedTokens     int64 `json:"cached_tokens"`
	// AskedTokens is the output tokens the requests sent asked for (see
	// Result.askedTokens), served or not: what CompletionTokens would be
	// if every one were served in full.
	AskedTokens int64 `json:"asked_tokens"`
	// PrefixHitRate is cached over prompt tokens, as the server reported
	// them in the usage chunks.
	PrefixHitRate float64 `json:"prefix_hit_rate"`

	// WallSeconds is from the run's start to its last request's end.
	WallSeconds float64 `json:"wall_s"`
	// AchievedRate is completed requests a second of wall time.
	AchievedRate float64 `json:"achieved_rate"`
	// OutputTokensPerS is output tokens of completed requests a second of
	// wall time.
	OutputTokensPerS float64 `json:"output_tokens_per_s"`
	// Lag is how late the driver sent requests against their schedule:
	// near zero when the driver kept up.
	LagP50 float64 `json:"schedule_lag_p50_s"`
	LagP99 float64 `json:"schedule_lag_p99_s"`
	LagMax float64 `json:"schedule_lag_max_s"`
}

// Report is the figures of a run overall, per class and per tenant.
type Report struct {
	Stats
	ByClass  map[string]Stats `json:"by_class"`
	ByTenant map[string]Stats `json:"by_tenant"`
	// Jain is Jain's fairness index over the tenants' served (completion)
	// tokens: 1 when all were served alike, 1/n when one took everything.
	// Zero with fewer than two tenants.
	Jain float64 `json:"jain,omitempty"`
	// JainMaxMin is Jain's index of the max-min fair share of the same
	// served tokens over the tenants' asked tokens (see maxMinShares): the
	// highest Jain any sharing of that many tokens could reach, no tenant
	// getting more than it asked. With no tenant served more than it asked,
	// Jain equals it only when the tokens were shared max-min fairly, and
	// is below it when some tenant got less than its fair share. Zero as
	// Jain is.
	JainMaxMin float64 `json:"jain_max_min,omitempty"`
}

// maxMinShares is the max-min fair sharing of total among demands, with
// equal weights: each gets min(its demand, level), the level chosen so the
// shares sum to total. When total covers every demand, each gets its
// demand and the rest is left over.
func maxMinShares(demands []float64, total float64) []float64 {
	order := make([]int, len(demands))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return cmp.Compare(demands[a], demands[b]) })
	shares := make([]float64, len(demands))
	for k, i := range order {
		level := total / float64(len(order)-k)
		if demands[i] > level {
			for _, j := range order[k:] {
				shares[j] = level
			}
			break
		}
		shares[i] = demands[i]
		total -= demands[i]
	}
	return shares
}

// jain is Jain's fairness index of xs, (Σx)² / (n·Σx²); zero with fewer
// than two or all zero.
func jain(xs []float64) float64 {
	if len(xs) < 2 {
		return 0
	}
	var sum, sq float64
	for _, x := range xs {
		sum += x
		sq += x * x
	}
	if sq == 0 {
		return 0
	}
	return sum * sum / (float64(len(xs)) * sq)
}

// Percentile is the p-th quantile (0 < p ≤ 1) of sorted samples by nearest
// rank: the smallest sample with at least p of them at or below it. It is
// 0 for no samples.
func Percentile[T float32 | float64](sorted []T, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return float64(sorted[min(max(i, 0), len(sorted)-1)])
}

// Summarise computes the report of a run's results.
func Summarise(results []Result) Report {
	return summariseOver(results, wallTime(results))
}

// SummariseRuns is the report of several runs taken together, as a sweep's
// top level: their requests pooled, and rates over the sum of the runs' wall
// times, since the runs went one after another.
func SummariseRuns(runs ...[]Result) Report {
	var all []Result
	var wall time.Duration
	for _, r := range runs {
		all = append(all, r...)
		wall += wallTime(r)
	}
	return summariseOver(all, wall)
}

func summariseOver(results []Result, wall time.Duration) Report {
	rep := Report{Stats: summarise(results, wall), ByClass: map[string]Stats{}, ByTenant: map[string]Stats{}}
	for key, group := range groupBy(results, func(r *Result) string { return r.Class }) {
		rep.ByClass[key] = summarise(group, wall)
	}
	var served, asked []float64
	total := 0.0
	for key, group := range groupBy(results, func(r *Result) string { return r.Tenant }) {
		s := summarise(group, wall)
		rep.ByTenant[key] = s
		served = append(served, float64(s.CompletionTokens))
		asked = append(asked, float64(s.AskedTokens))
		total += float64(s.CompletionTokens)
	}
	rep.Jain = jain(served)
	rep.JainMaxMin = jain(maxMinShares(asked, total))
	return rep
}

// wallTime is from the run's start to the end of its last request.
func wallTime(results []Result) time.Duration {
	var wall time.Duration
	for i := range results {
		wall = max(wall, results[i].Start+results[i].E2E)
	}
	return wall
}

func groupBy(results []Result, key func(*Result) string) map[string][]Result {
	g := map[string][]Result{}
	for i := range results {
		k := key(&results[i])
		if k == "" {
			k = "-"
		}
		g[k] = append(g[k], results[i])
	}
	return g
}

// summarise is the figures of results, with rates over wall.
func summarise(results []Result, wall time.Duration) Stats {
	var s Stats
	var ttft, tpot, e2e, lag, rejected []float64
	var gaps []float32
	met := 0
	for i := range results {
		r := &results[i]
		s.Requests++
		switch r.Outcome {
		case OutcomeOK:
			s.OK++
		case OutcomeRejected:
			s.Rejected++
			rejected = append(rejected, r.E2E.Seconds())
		case OutcomeError:
			s.Errors++
		case OutcomeDropped:
			s.Dropped++
			continue
		}
		lag = append(lag, r.Lag.Seconds())
		s.PromptTokens += r.PromptTokens
		s.CachedTokens += r.CachedTokens
		s.AskedTokens += r.askedTokens()
		if r.Outcome != OutcomeOK {
			continue
		}
		if r.MetSLO() {
			met++
		}
		s.CompletionTokens += r.OutputTokens()
		e2e = append(e2e, r.E2E.Seconds())
		if r.Tokens > 0 {
			ttft = append(ttft, r.TTFT.Seconds())
			if r.SLO.TTFT > 0 && r.TTFT > r.SLO.TTFT {
				s.Late++
			}
		}
		if d, ok := r.TPOT(); ok {
			tpot = append(tpot, d.Seconds())
		}
		gaps = append(gaps, r.Gaps...)
	}
	if s.Requests > 0 {
		s.Goodput = float64(met) / float64(s.Requests)
	}
	if s.PromptTokens > 0 {
		s.PrefixHitRate = float64(s.CachedTokens) / float64(s.PromptTokens)
	}
	slices.Sort(ttft)
	slices.Sort(tpot)
	slices.Sort(e2e)
	slices.Sort(lag)
	slices.Sort(rejected)
	slices.Sort(gaps)
	s.TTFTp50, s.TTFTp90, s.TTFTp99 = Percentile(ttft, .5), Percentile(ttft, .9), Percentile(ttft, .99)
	s.TPOTp50, s.TPOTp90, s.TPOTp99 = Percentile(tpot, .5), Percentile(tpot, .9), Percentile(tpot, .99)
	s.ITLp50, s.ITLp90, s.ITLp99 = Percentile(gaps, .5), Percentile(gaps, .9), Percentile(gaps, .99)
	s.E2Ep50, s.E2Ep90, s.E2Ep99 = Percentile(e2e, .5), Percentile(e2e, .9), Percentile(e2e, .99)
	s.LagP50, s.LagP99, s.LagMax = Percentile(lag, .5), Percentile(lag, .99), Percentile(lag, 1)
	s.Rejectedp50, s.Rejectedp99 = Percentile(rejected, .5), Percentile(rejected, .99)
	if w := wall.Seconds(); w > 0 {
		s.WallSeconds = w
		s.AchievedRate = float64(s.OK) / w
		s.OutputTokensPerS = float64(s.CompletionTokens) / w
	}
	return s
}
