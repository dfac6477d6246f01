package pool

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
)

// TestEjectionBackoff: each failure of an endpoint just back from an
// ejection ejects it for twice as long, up to ejectMax, and one success
// restores it and forgets the ejections.
func TestEjectionBackoff(t *testing.T) {
	e := newEndpoint("a", "http://a/v1", nil)
	now := time.Unix(1_700_000_000, 0)
	for _, want := range []time.Duration{1, 2, 4, 8, 16, 30, 30} {
		want *= time.Second
		if !e.Failed(now) {
			t.Fatalf("a failure did not eject the endpoint (next wait %v)", want)
		}
		if got := time.Duration(e.ejectedUntil.Load() - now.UnixNano()); got != want {
			t.Errorf("ejected for %v, want %v", got, want)
		}
		if !e.Out(now.Add(want - 1).UnixNano()) {
			t.Errorf("back before its %v ejection ended", want)
		}
		now = now.Add(want)
		if e.Out(now.UnixNano()) {
			t.Errorf("still out when its %v ejection ended", want)
		}
	}

	e.Succeeded()
	if e.Out(now.UnixNano()) {
		t.Error("out after a success")
	}
	e.Failed(now)
	if got := time.Duration(e.ejectedUntil.Load() - now.UnixNano()); got != EjectBase {
		t.Errorf("the first ejection after a success lasts %v, want %v", got, EjectBase)
	}
}

func TestFreshLoad(t *testing.T) {
	e := newEndpoint("a", "http://a/v1", nil)
	at := time.Unix(1_700_000_000, 0)
	if l := e.freshLoad(at, time.Second); l != nil {
		t.Errorf("a load before any scrape: %+v", l)
	}
	l := &Load{Waiting: 3, KVUsage: 0.5, At: at}
	e.scrape.Store(l)
	for _, tc := range []struct {
		age  time.Duration
		want *Load
	}{
		{0, l},
		{time.Second, l},
		{time.Second + time.Nanosecond, nil},
		{time.Minute, nil},
	} {
		if got := e.freshLoad(at.Add(tc.age), time.Second); got != tc.want {
			t.Errorf("at age %v: %+v, want %+v", tc.age, got, tc.want)
		}
	}
}

// TestLearnConverges: fed first tokens from engines of different
// shapes, the learned model comes to predict each, and says what a
// cached token saves: one that computes prompts one after another, where
// prefill owed ahead costs as much as a request's own; one that gives each
// request a slot, where what is ahead costs nothing until the slots are
// full and the queue then costs by the request; and one whose own prompt
// costs nothing, so that a cached token saves nothing.
func TestLearnConverges(t *testing.T) {
	for _, truth := range []Cost{
		{Base: 0.050, PerToken: 250e-6, PerAhead: 250e-6},                   // serial prefill, slower than the prior
		{Base: 0.005, PerToken: 200e-6, PerAhead: 0, PerWaiting: 0.120},     // slots
		{Base: 0.300, PerToken: 0, PerAhead: 20e-6, PerWaiting: 0.050},      // a hosted API: caching saves nothing
		{Base: 0.020, PerToken: 100e-6, PerAhead: 50e-6, PerWaiting: 0.010}, // some of each
	} {
		e := newEndpoint("a", "http://a/v1", nil)
		rng := rand.New(rand.NewPCG(1, 2))
		for range 400 {
			own, ahead, waiting := float64(rng.IntN(8000)), float64(rng.IntN(20000)), float64(rng.IntN(10))
			if rng.IntN(3) == 0 {
				ahead, waiting = 0, 0 // an idle endpoint
			}
			e.learn(time.Now(), dur(truth.Predict(own, ahead, waiting)), own, ahead, waiting)
		}
		got := *e.firstTokenCost()
		// Within 5%, or 2 ms at the fit's unit of each feature (a
		// second, a thousand tokens, a request): the prior's pull on the
		// fit is a tenth of an observation.
		for _, c := range []struct {
			name      string
			got, want float64
		}{
			{"base", got.Base, truth.Base},
			{"per token", got.PerToken / kiloTokens, truth.PerToken / kiloTokens},
			{"per token ahead", got.PerAhead / kiloTokens, truth.PerAhead / kiloTokens},
			{"per request waiting", got.PerWaiting, truth.PerWaiting},
		} {
			if math.Abs(c.got-c.want) > max(0.05*c.want, 0.002) {
				t.Errorf("%+v: %s %.6g, want %.6g", truth, c.name, c.got, c.want)
			}
		}
	}
}

// TestLearnKeepsPriorUnseen: a cause no first token has had (nothing was
// ever ahead, nothing queued) keeps its prior coefficient while the
// others are learned; and a fit that would make a cost negative makes it
// zero.
func TestLearnKeepsPriorUnseen(t *testing.T) {
	e := newEndpoint("a", "http://a/v1", nil)
	for i := range 100 {
		own := float64(500 + 100*(i%20))
		e.learn(time.Now(), dur(0.010+300e-6*own), own, 0, 0)
	}
	c := e.firstTokenCost()
	if math.Abs(c.PerToken-300e-6) > 5e-6 || math.Abs(c.Base-0.010) > 0.005 {
		t.Errorf("learned %+v, want base 0.010 and 300µs a token", *c)
	}
	if math.Abs(c.PerAhead-priorPerToken) > 1e-12 || c.PerWaiting != 0 {
		t.Errorf("unseen causes: %+v, want the prior's %g ahead and 0 waiting", *c, priorPerToken)
	}
	// First tokens that come sooner the more is ahead: a negative cost,
	// published as none.
	for i := range 200 {
		ahead := float64(1000 * (i % 10))
		e.learn(time.Now(), dur(max(0.5-20e-6*ahead, 0.001)), 1000, ahead, 0)
	}
	if c := e.firstTokenCost(); c.PerAhead != 0 {
		t.Errorf("per token ahead %g, want 0 rather than negative", c.PerAhead)
	}
}

// TestPredictTTFTCountsOthersQueue: requests the endpoint reports waiting
// beyond this gateway's own are prefill ahead, at the mean prompt.
func TestPredictTTFTCountsOthersQueue(t *testing.T) {
	e := newEndpoint("a", "http://a/v1", nil)
	e.owed.Store(1000)
	e.pending.Store(2)
	alone := e.predictTTFT(e.costAt(time.Now()), 500, nil, Counts{}, 800)
	if want := priorBase + priorPerToken*1500; math.Abs(alone-want) > 1e-12 {
		t.Errorf("with no scrape: %v, want %v", alone, want)
	}
	for _, tc := range []struct {
		waiting float64
		want    float64
	}{
		{-1, alone}, // not exported
		{2, alone},  // only this gateway's
		{5, priorBase + priorPerToken*(1500+3*800)}, // three from others
		{0, alone}, // fewer than pending: never less
	} {
		if got := e.predictTTFT(e.costAt(time.Now()), 500, &Load{Waiting: tc.waiting}, Counts{}, 800); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("with %v waiting: %v, want %v", tc.waiting, got, tc.want)
		}
	}
}

// TestStaleCostForgotten: a cost model learned in a burst, that predicts
// an idle endpoint two seconds slow, holds while it is recent or a
// request there awaits its first token; past costStale with none, the
// prior stands in, auto sends the endpoint a request again, and that
// request's first token starts the fit again rather than joining the
// burst's.
func TestStaleCostForgotten(t *testing.T) {
	p := testPool(catalog.PolicyAuto, 1, 1)
	slow := p.endpoints[0]
	t0 := time.Unix(1000, 0)
	for i := range 50 {
		own := float64(500 + 100*(i%10))
		slow.learn(t0, dur(2+100e-6*own), own, 0, 0)
		p.endpoints[1].learn(t0.Add(costStale), dur(0.1+100e-6*own), own, 0, 0)
	}
	prompt := promptText(9, 4)
	pick := func(at time.Time) int {
		i, _ := p.Pick(routeFor(p, prompt, 0), all(p), at)
		return i
	}
	if c := slow.costAt(t0.Add(costStale)); c.Base < 1.9 {
		t.Fatalf("learned base %v, want about 2 s", c.Base)
	}
	if i := pick(t0.Add(costStale)); i != 1 {
		t.Errorf("while the model is recent: picked %d, want 1", i)
	}
	later := t0.Add(costStale + time.Second)
	slow.pending.Store(1)
	if c := slow.costAt(later); c == &priorCost {
		t.Error("a request awaiting its first token: the model is forgotten, want it held")
	}
	slow.pending.Store(0)
	if c := slow.costAt(later); c != &priorCost {
		t.Errorf("past costStale with nothing pending: cost %+v, want the prior", *c)
	}
	if i := pick(later); i != 0 {
		t.Errorf("past costStale: picked %d, want the idle endpoint 0", i)
	}
	call := p.Send(0, 1000, true, false, later)
	call.FirstToken(later.Add(dur(0.12)))
	if c := slow.costAt(later.Add(time.Second)); c.Base > 0.1 {
		t.Errorf("after one first token of 120 ms: base %v, want the burst forgotten", c.Base)
	}
}

// TestConfirmPrecision: misses lower an endpoint's precision down to its
// floor, hits raise it, and answers with nothing predicted change nothing.
func TestConfirmPrecision(t *testing.T) {
	e := newEndpoint("a", "http://a/v1", nil)
	if p := e.Precision(); p != 1 {
		t.Fatalf("precision %v before any answer, want 1", p)
	}
	e.Confirm(0, 0)
	if p := e.Precision(); p != 1 {
		t.Errorf("an answer with nothing predicted moved precision to %v", p)
	}
	e.Confirm(1000, 0)
	if p, want := e.Precision(), 1-CostSmoothing; math.Abs(p-want) > 1e-12 {
		t.Errorf("precision %v after one miss, want %v", p, want)
	}
	last := e.Precision()
	for range 100 {
		e.Confirm(1000, 0)
		if p := e.Precision(); p > last || p < minPrecision {
			t.Fatalf("precision went from %v to %v on a miss", last, p)
		}
		last = e.Precision()
	}
	if last != minPrecision {
		t.Errorf("precision %v after many misses, want the floor %v", last, minPrecision)
	}
	e.Confirm(1000, 5000) // more cached than predicted counts as a full hit
	if p, want := e.Precision(), minPrecision+CostSmoothing*(1-minPrecision); math.Abs(p-want) > 1e-12 {
		t.Errorf("precision %v after a hit, want %v", p, want)
	}
}

// TestConfirmOnlyComputedPrefix: an answer missing a prefix its endpoint
// had computed before the request was sent lowers precision; one missing
// a prefix that was still being computed there does not, though routing
// counted both held and the metrics count both predicted, nor does one
// short of it by less than a block of the index.
func TestConfirmOnlyComputedPrefix(t *testing.T) {
	p := testPool(catalog.PolicyAuto, 1, 1)
	prompt := promptText(1, 8)
	x := p.index.Load()
	hashes := HashBlocks(nil, prompt, x.block, 0)
	x.Promise(hashes, 0) // a turn sent, its first token not yet come

	rt := routeFor(p, prompt, 0)
	if rt.Matched(0) != 8 {
		t.Fatalf("matched %d blocks, want the 8 promised", rt.Matched(0))
	}
	predicted, confirmed := rt.Confirm(p.endpoints[0], 0, 1000, 0)
	if predicted != 1000 || confirmed != 0 {
		t.Errorf("Confirm = %d, %d; want 1000 predicted, 0 confirmed", predicted, confirmed)
	}
	if got := p.endpoints[0].Precision(); got != 1 {
		t.Errorf("precision %v after missing a prefix still being computed, want 1", got)
	}

	rt.Computed(0) // the turn's first token
	rt = routeFor(p, prompt, 0)
	rt.Confirm(p.endpoints[0], 0, 1000, 875) // short by less than a block of the index
	if got := p.endpoints[0].Precision(); got != 1 {
		t.Errorf("precision %v after an answer short by less than a block, want 1", got)
	}
	rt.Confirm(p.endpoints[0], 0, 1000, 0) // the eighth the index cannot place is forgiven
	if got, want := p.endpoints[0].Precision(), 1-CostSmoothing*7/8; math.Abs(got-want) > 1e-12 {
		t.Errorf("precision %v after missing a computed prefix, want %v", got, want)
	}
}

// TestFailuresDuringAnEjectionDoNotExtendIt: when an endpoint dies with
// requests in flight, each of them fails, at nearly the same moment. The
// first ejects it; the others were sent before the ejection and are the
// same outage, not ejections that follow it, so the endpoint is out for
// EjectBase, as a server that restarts within seconds should be.
func TestFailuresDuringAnEjectionDoNotExtendIt(t *testing.T) {
	e := newEndpoint("a", "http://a/v1", nil)
	now := time.Unix(1_700_000_000, 0)
	ejections := 0
	for k := range 8 { // eight streams in flight break within 8 ms
		if e.Failed(now.Add(time.Duration(k) * time.Millisecond)) {
			ejections++
		}
	}
	if got := time.Duration(e.ejectedUntil.Load() - now.UnixNano()); got > EjectBase+8*time.Millisecond {
		t.Errorf("eight failures at once eject the endpoint for %v, want %v", got, EjectBase)
	}
	if ejections != 1 {
		t.Errorf("eight failures at once count as %d ejections, want 1", ejections)
	}
}

// gapsAt feeds the endpoint a decision window of gaps of d, for inflight
// streams.
func gapsAt(e *Endpoint, d time.Duration, inflight int64) {
	c := Call{e: e}
	for range batchSteps * inflight {
		c.Gap(d)
	}
}

// batchOf is the endpoint's batch limit.
func batchOf(e *Endpoint) float64 {
	limit, _ := e.batchRoom()
	return limit
}

// TestBatchLimitFollowsTheStepTime: the limit starts at batchStart and
// grows while it binds and the step time is under the aim; a step time
// over the aim cuts it at once, and not again before a round of ends has
// shown the cut; nothing is decided before a window of gaps is in.
func TestBatchLimitFollowsTheStepTime(t *testing.T) {
	const aim = 40 * time.Millisecond
	e := newEndpoint("a", "http://a/v1", nil)
	gapsAt(e, aim, 4)
	e.tuneBatch(0, 4)
	if got := batchOf(e); got != 0 {
		t.Fatalf("limit %v with no aim, want none", got)
	}
	e.StartBatch()
	if got := batchOf(e); got != batchStart {
		t.Fatalf("first limit %v, want %v", got, batchStart)
	}
	e.tuneBatch(aim, 4)
	if got := batchOf(e); got != batchStart {
		t.Fatalf("limit %v decided on gaps from before the start", got)
	}

	short := newEndpoint("b", "http://b/v1", nil)
	short.StartBatch()
	c := Call{e: short}
	for range batchSteps*4 - 1 {
		c.Gap(aim / 4)
	}
	short.tuneBatch(aim, 4)
	if got := batchOf(short); got != batchStart {
		t.Fatalf("limit %v decided on less than a window of gaps", got)
	}

	for _, step := range []struct {
		gap      time.Duration
		inflight int64
		want     float64
	}{
		{aim / 2, 4, 6},   // binding, half the aim: grows by half the proportion
		{aim / 4, 6, 12},  // a quarter: grows by at most double
		{aim / 2, 3, 12},  // not binding: stays
		{2 * aim, 12, 6},  // twice the aim: the first cut comes at once
		{2 * aim, 6, 6},   // within the round the cut has not shown yet
		{2 * aim, 6, 6},   //
		{2 * aim, 6, 6},   //
		{2 * aim, 6, 6},   //
		{2 * aim, 6, 6},   // five ends of six
		{4 * aim, 6, 3},   // a round later: cut, by at most half
		{aim, 3, 3},       // at the aim: neither way
		{aim / 2, 3, 4.5}, // binding again
	} {
		gapsAt(e, step.gap, step.inflight)
		e.tuneBatch(aim, step.inflight)
		if got := batchOf(e); got != step.want {
			t.Fatalf("gaps of %v with %d in flight: limit %v, want %v", step.gap, step.inflight, got, step.want)
		}
	}
	if _, room := e.batchRoom(); room != 4 {
		t.Errorf("room with nothing in flight = %d, want 4", room)
	}
}

// TestCriticalStreamsCounted: a critical call counts on its endpoint from
// its first token to its end, and one that ends before a first token
// never counts; other classes never do.
func TestCriticalStreamsCounted(t *testing.T) {
	p := New(catalog.Pool{Name: "p", Endpoints: []catalog.Endpoint{{URL: "http://10.0.0.1:8000/v1"}}}, nil, nil)
	ep := p.Endpoints()[0]
	now := time.Now()
	calls := []Call{
		p.Send(0, 100, true, true, now),
		p.Send(0, 100, true, true, now),
		p.Send(0, 100, true, false, now),
	}
	calls[0].FirstToken(time.Now())
	calls[2].FirstToken(time.Now())
	if got := ep.Counts().Critical; got != 1 {
		t.Fatalf("%d critical streams decoding, want 1", got)
	}
	calls[1].Done(0) // ended before its first token
	calls[2].Done(0)
	if got := ep.Counts().Critical; got != 1 {
		t.Fatalf("%d critical streams after the others ended, want 1", got)
	}
	calls[0].Done(0)
	if got := ep.Counts(); got != (Counts{}) {
		t.Errorf("counts after all ended = %+v, want none", got)
	}
}

// dur is s seconds as a duration.
func dur(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// TestQueueMovesOnWithCalls: a scrape that showed requests waiting is
// moved on by this gateway's calls since: each sent waits too, each ended
// lets one in; a scrape that showed none waiting says nothing of the room
// left, and counts no queue.
func TestQueueMovesOnWithCalls(t *testing.T) {
	p := New(catalog.Pool{Name: "p", Endpoints: []catalog.Endpoint{{URL: "http://10.0.0.1:8000/v1"}}}, nil, nil)
	e := p.Endpoints()[0]
	now := time.Now()
	waiting := func() float64 {
		_, w := ahead(e.Counts(), e.freshLoad(now, time.Second), Counts{}, 1000)
		return w
	}
	first := p.Send(0, 100, true, false, now)
	e.SetLoad(3, 0.5, now)
	if got := waiting(); got != 3 {
		t.Errorf("at the scrape: %v waiting, want 3", got)
	}
	var calls []Call
	for range 4 {
		calls = append(calls, p.Send(0, 100, true, false, now))
	}
	if got := waiting(); got != 7 {
		t.Errorf("four calls later: %v waiting, want 7", got)
	}
	first.Done(0)
	calls[0].Done(0)
	if got := waiting(); got != 5 {
		t.Errorf("two ended: %v waiting, want 5", got)
	}
	for _, c := range calls[1:] {
		c.Done(0)
	}
	if got := waiting(); got != 2 {
		t.Errorf("all ended: %v waiting, want 2", got)
	}
	for range 3 {
		calls = append(calls, p.Send(0, 100, true, false, now))
	}
	e.SetLoad(1, 0.5, now)
	for _, c := range calls[4:] {
		c.Done(0)
	}
	if got := waiting(); got != 0 {
		t.Errorf("three ended after a scrape with one waiting: %v waiting, want 0 (never below none)", got)
	}
	e.SetLoad(0, 0.5, now)
	p.Send(0, 100, true, false, now)
	if got := waiting(); got != 0 {
		t.Errorf("a call after a scrape with none waiting: %v waiting, want 0", got)
	}
}

// TestCoolFor: a Retry-After of 2 s takes the endpoint out for 2 s and no
// longer; a shorter one after it changes nothing, a longer one extends
// it, and none takes it out past maxCooldown. A success does not bring it
// back early.
func TestCoolFor(t *testing.T) {
	var h health
	now := time.Unix(1000, 0)
	if !h.CoolFor(2*time.Second, now) {
		t.Fatal("a first cooldown did not take the endpoint out")
	}
	h.Succeeded()
	for _, c := range []struct {
		at  time.Duration
		out bool
	}{{0, true}, {1999 * time.Millisecond, true}, {2 * time.Second, false}, {3 * time.Second, false}} {
		if got := h.Out(now.Add(c.at).UnixNano()); got != c.out {
			t.Errorf("out at %s: %v, want %v", c.at, got, c.out)
		}
	}
	if h.CoolFor(time.Second, now) || h.CoolFor(0, now) {
		t.Error("a shorter cooldown, or none, extended the endpoint's")
	}
	if !h.CoolFor(3*time.Second, now) || !h.Out(now.Add(2500*time.Millisecond).UnixNano()) {
		t.Error("a longer cooldown did not extend it")
	}
	h.CoolFor(time.Hour, now)
	if h.Out(now.Add(maxCooldown).UnixNano()) {
		t.Errorf("a cooldown of an hour took the endpoint out past %s", maxCooldown)
	}
}
