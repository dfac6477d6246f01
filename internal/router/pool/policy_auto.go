package pool

// auto: llmgw's own policy, the least predicted time to first token
// plus the prefill a prompt computed again costs those who wait behind
// it, the prefixes it pushes out of a cache that evicts, the stall its
// prefill gives the streams where it goes, and a charge where the first
// token is predicted past the request's SLO, or near it.
// Every prediction is of the endpoint's learned cost and decode models.
// docs/ROUTING.md explains its constants.

import (
	"math"
	"math/bits"
	"time"
)

// auto's constants; docs/ROUTING.md gives the reasoning behind each.
const (
	// cacheCredit is what a second of prefill computed again, past what
	// the prefix's holder would compute, costs against a second more of
	// waiting for this request, where others wait behind it: the work is
	// capacity taken from every request behind it, and a prefix computed
	// a second time somewhere else takes cache from other prefixes there.
	// At 1 an overloaded pool scatters its conversations and computes
	// more (docs/ROUTING.md). Where nothing waits behind it, the work
	// costs no one but this request.
	cacheCredit = 4.0
	// evictCredit is what a second of prefill stored where the cache
	// evicts costs, for the share of the prefixes expected there that its
	// answers found gone (1 − Precision): it pushes other prefixes out,
	// and each is computed again by the requests of its conversation that
	// would have found it, not only by the next. Where a cache keeps what
	// it is sent, its precision is 1 and storing costs nothing.
	evictCredit = 2 * cacheCredit
	// tieShare and tieFloor make predictions a near tie: within a tenth,
	// or 5 ms, of the best. Near ties go to the endpoint rendezvous
	// hashing ranks first for the prompt's place key (route.placeKey), so
	// that gateways that see different traffic still agree on where a
	// conversation goes.
	tieShare = 0.1
	tieFloor = 0.005
	// spareShare is the share of critical's TPOT SLO that a request below
	// critical may stall the streams on an endpoint by, with its prefill,
	// when critical streams decode there and another candidate has none:
	// a stall of one TPOT adds a TPOT to one gap, which even a 16-token
	// answer spreads to a sixteenth of its mean. Half held critical no
	// better and cost more goodput (docs/ROUTING.md).
	spareShare = 1.0
	// stallFloor is the least weight auto charges a second of the stall
	// a prefill gives each stream decoding where it goes, against a
	// second of the request's own wait, while the model's pace meets its
	// SLO: a stall slows every stream there, and on an engine that batches
	// prefill with decode it is the start of the spiral past the knee
	// where each slower step holds more requests, which stall more. On an
	// engine whose prefill holds up no stream, the decode model learns a
	// stall of nothing, and the floor charges nothing.
	stallFloor = 0.5
	// missCharge is what a first token predicted past what is left of the
	// request's TTFT SLO is charged, in that SLO: at 2, and cacheCredit at
	// 4, a request leaves the holder of its prefix to meet its SLO where
	// computing the prompt again costs those waiting behind it up to half
	// that SLO of prefill. Passing over every endpoint predicted to miss,
	// whatever the prompt computed again costs, spreads a backlog: under
	// load each holder is predicted past the SLO, the prompts go where
	// they are computed again, and the prefill added holds more first
	// tokens past it (docs/ROUTING.md).
	missCharge = 2.0
	// missRamp is how near the SLO, as a share of it either side, a
	// predicted first token is charged only part of missCharge: nothing
	// at (1 − missRamp) of the SLO, half at the SLO, all at (1 + missRamp)
	// of it. A prediction that near the SLO is as likely to meet it as to
	// miss it, and a charge that steps at the SLO moved requests off
	// their prefix's holder and back as its queue crossed it: on
	// llm-d-inference-sim, goodput at its knee went from 0.90 to 0.96,
	// level with gie's (docs/ROUTING.md).
	missRamp = 0.2
)

// pickAuto predicts each candidate's time to first token for this request,
// from the prefill and queue ahead of it and the part of this prompt it
// does not hold, and takes the candidate with the least prediction plus
// charges (scoreAuto): the prompt computed again past the prefix's
// holder where others wait behind it, the prefixes it would push out of
// a cache that evicts, the stall its prefill would give the streams
// there, and a first token predicted past or near the request's SLO. A
// request below critical passes over endpoints where critical streams
// decode when its prefill would stall them past spareShare of critical's
// TPOT SLO and another candidate qualifies. Near ties go by rendezvous
// hashing of the prompt's place key. The chosen candidate's prediction is
// left in rt.predicted, for hedging to wait by.
func (p *Pool) pickAuto(rt *Route, c, cold uint64, now time.Time) (int, string) {
	var pred, score [64]float64
	fastest := p.scoreAuto(rt, c, cold, now, &pred, &score)
	eligible := c // all, or those clear of critical streams
	best, bestScore := leastScore(eligible, &score)
	spared := false
	if rt.Spare > 0 {
		if clear := p.clearOfCritical(rt, eligible, now); clear != 0 && clear != eligible {
			eligible = clear
			if clear&(1<<best) == 0 {
				spared = true
				best, bestScore = leastScore(eligible, &score)
			}
		}
	}
	chosen := p.breakTie(rt, eligible, best, bestScore, &score)
	rt.predicted = pred[chosen]
	slower := pred[chosen] > pred[fastest]
	switch {
	case spared:
		return chosen, reasonSpare
	case rt.matched[chosen] > 0 && (slower || chosen != best):
		return chosen, reasonPrefix
	case chosen != best:
		return chosen, reasonCold
	case slower:
		// Slower to a first token for a charge: which of the two
		// told it from the fastest most.
		evictF, stallF := p.chargesAt(rt, fastest, now)
		evictC, stallC := p.chargesAt(rt, chosen, now)
		if evictF-evictC > stallF-stallC {
			return chosen, reasonEvict
		}
		return chosen, reasonStreams
	}
	return chosen, reasonFastest
}

// scoreAuto fills pred and score for each candidate in c: its predicted
// TTFT, and that plus the prefill it would compute past the prefix
// holder, weighted by cacheCredit where others wait behind it, plus the
// charges for storing its prompt and for stalling the streams there
// (charges), plus missCharge of rt's SLO where the prediction is past
// what is left of it, and a part of it near it (missShare). A candidate
// in cold, where the request's model is not loaded, is predicted its
// cold start on top. It returns the candidate with the least prediction.
func (p *Pool) scoreAuto(rt *Route, c, cold uint64, now time.Time, pred, score *[64]float64) (fastest int) {
	var uncached [64]int64
	least := rt.prompt // the least any candidate owes: the prefix holder's
	for m := c; m != 0; m &= m - 1 {
		i := bits.TrailingZeros64(m)
		uncached[i] = rt.Uncached(i)
		least = min(least, uncached[i])
	}
	meanPrompt := p.MeanPrompt()
	stall := max(rt.Stall, stallFloor)
	fastest = -1
	for m := c; m != 0; m &= m - 1 {
		i := bits.TrailingZeros64(m)
		e := p.endpoints[i]
		peers := e.Peers(now)
		cost := e.costAt(now)
		pred[i] = e.predictTTFT(cost, uncached[i], e.freshLoad(now, p.maxAge), peers, meanPrompt)
		if cold&(1<<i) != 0 {
			pred[i] += e.coldStartCost()
		}
		score[i] = pred[i]
		if othersWait(e, cost, pred[i], uncached[i], peers) {
			score[i] += cacheCredit * cost.PerToken * float64(uncached[i]-least)
		}
		evict, stalled := charges(e, cost, uncached[i], e.inflight.Load()+peers.Inflight, stall)
		score[i] += evict + stalled
		score[i] += missCharge * rt.slo * missShare(pred[i], rt.slo)
		if fastest < 0 || pred[i] < pred[fastest] {
			fastest = i
		}
	}
	return fastest
}

// missShare is the share of missCharge a first token predicted at pred
// seconds is charged, against an SLO of slo seconds: 0 up to (1 −
// missRamp) of it, all from (1 + missRamp) of it, in proportion between;
// 0 where there is no SLO.
func missShare(pred, slo float64) float64 {
	if slo <= 0 {
		return 0
	}
	return min(max((pred-(1-missRamp)*slo)/(2*missRamp*slo), 0), 1)
}

// charges are what auto charges for sending a prompt with uncached
// tokens to endpoint e, at cost its cost model, with requests in flight
// there and stall the weight of a second of their stall: the prefixes
// its prompt would push out of a cache that evicts, at evictCredit for
// the share of expected prefixes found gone, and the stall its prefill
// would give every request there, as long as the endpoint's decode model
// says a prompt token holds up a stream (those decoding now, and those
// still owed a prefill, which decode while this one's runs).
func charges(e *Endpoint, cost *Cost, uncached, requests int64, stall float64) (evict, stalled float64) {
	own := float64(uncached)
	evict = evictCredit * cost.PerToken * own * (1 - e.Precision())
	stalled = stall * e.decodeModel().PerPrefillToken * own * float64(max(requests, 0))
	return evict, stalled
}

// chargesAt is charges for rt at endpoint i, at now.
func (p *Pool) chargesAt(rt *Route, i int, now time.Time) (evict, stalled float64) {
	e := p.endpoints[i]
	return charges(e, e.costAt(now), rt.Uncached(i), e.inflight.Load()+e.Peers(now).Inflight, max(rt.Stall, stallFloor))
}

// clearOfCritical is the candidates in c where rt, a request below
// critical, may put its prefill: no critical stream decodes there, or the
// prefill would stall them by no more than spareShare of critical's TPOT
// SLO.
func (p *Pool) clearOfCritical(rt *Route, c uint64, now time.Time) uint64 {
	var clear uint64
	for m := c; m != 0; m &= m - 1 {
		i := bits.TrailingZeros64(m)
		e := p.endpoints[i]
		if e.critical.Load()+e.Peers(now).Critical == 0 || p.stallAt(rt, i) <= spareShare*rt.Spare {
			clear |= 1 << i
		}
	}
	return clear
}

// breakTie is the candidate among eligible that rt goes to, best having
// the least score. Among near ties, rendezvous hashing decides, unless
// some are within tieFloor of the best and one of those holds the
// prompt: a gain that small is no reason to compute the prefix again
// elsewhere, and the one holding most of it keeps it. A prompt shorter
// than a block, without a prompt_cache_key, has nothing to place it by.
func (p *Pool) breakTie(rt *Route, eligible uint64, best int, bestScore float64, score *[64]float64) int {
	tie := max(tieShare*math.Abs(bestScore), tieFloor)
	var ties uint64
	holder := -1
	for m := eligible; m != 0; m &= m - 1 {
		i := bits.TrailingZeros64(m)
		if score[i] > bestScore+tie {
			continue
		}
		ties |= 1 << i
		if score[i] <= bestScore+tieFloor && rt.matched[i] > 0 && (holder < 0 || rt.matched[i] > rt.matched[holder]) {
			holder = i
		}
	}
	if holder >= 0 {
		return holder
	}
	if first := rt.placeKey(); first != 0 {
		if i := p.rendezvous(first, ties); i >= 0 {
			return i
		}
	}
	return best
}

// othersWait reports whether requests wait behind the prefill a request
// sends to endpoint e, at cost its cost model, with pred its predicted
// first token, uncached its own prompt tokens to compute, and peers the
// other gateways' counts: some prefill or queue is predicted ahead of it
// there (others will come in behind it too), or prompts stall the streams
// there and some are in flight. Only then is prefill computed again, past
// the prefix's holder, dearer than the request's own wait; where nothing
// waits behind it, it takes room no one else would have used.
func othersWait(e *Endpoint, cost *Cost, pred float64, uncached int64, peers Counts) bool {
	if pred > cost.Base+cost.PerToken*float64(uncached)+tieFloor {
		return true
	}
	return e.decodeModel().PerPrefillToken >= cost.PerToken/2 && e.inflight.Load()+peers.Inflight > 0
}

// stallAt is how long rt's prefill would hold up the streams decoding on
// endpoint i, in seconds.
func (p *Pool) stallAt(rt *Route, i int) float64 {
	return p.endpoints[i].decodeModel().PerPrefillToken * float64(rt.Uncached(i))
}

// leastScore is the candidate in c with the least score, and its score.
func leastScore(c uint64, score *[64]float64) (int, float64) {
	best, bestScore := -1, math.Inf(1)
	for m := c; m != 0; m &= m - 1 {
		if i := bits.TrailingZeros64(m); score[i] < bestScore {
			best, bestScore = i, score[i]
		}
	}
	return best, bestScore
}
