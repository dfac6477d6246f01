package router

// The gateway's live status as plain values, read from the router's own
// state rather than its metrics: per model, the recent request rate and
// error rate, p99s against the SLO, goodput by class and the admission
// queue; per pool, each endpoint's health, load and first-token times.
// The console shows it; nothing here decides anything.

import (
	"sync"
	"sync/atomic"
	"time"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/pool"
)

// Status is the router as it stands at one moment.
type Status struct {
	At     time.Time
	Models []ModelStatus // in the catalog's order
	Pools  []PoolStatus  // in the catalog's order
}

// ModelStatus is one model of the catalog in service.
type ModelStatus struct {
	Name, Pool string
	// RequestsPerSecond and ErrorRate are over the last rateWindow:
	// requests answered a second, and the share of them with a status of
	// 400 or above (499 included).
	RequestsPerSecond, ErrorRate float64
	// TTFTp99 and TPOTp99 are the recent p99s of streamed answers, zero
	// while too few are known; Samples is how many the tracker holds.
	TTFTp99, TPOTp99 time.Duration
	Samples          int
	SLO              catalog.SLO
	// Admission reports whether the model's requests pass its pool's
	// gate; Queued is how many wait there now.
	Admission bool
	Queued    int
	// Goodput is, by priority class, the share of recent requests that
	// met the class's SLOs; models with admission enabled.
	Goodput map[string]float64
}

// PoolStatus is one pool and its endpoints.
type PoolStatus struct {
	Name, Kind, Policy string
	Endpoints          []pool.EndpointStatus
}

// Status is the router's status at now; empty before the first catalog.
func (r *Router) Status(now time.Time) Status {
	st := Status{At: now}
	s := r.snap.Load()
	if s == nil {
		return st
	}
	for _, m := range s.cat.Models() {
		ms := ModelStatus{Name: m.Name, Pool: m.Pool, SLO: m.SLO, Admission: m.Admission.Enabled}
		ms.RequestsPerSecond, ms.ErrorRate = r.rates.rate(m.Name, now)
		ms.TTFTp99, ms.TPOTp99, ms.Samples = r.slo.P99(m.Name, now)
		ms.Queued = r.gates.Queued(m.Pool, m.Name)
		ms.Goodput = r.goodput.Ratios(m.Name)
		st.Models = append(st.Models, ms)
	}
	for _, p := range s.cat.Pools() {
		sp := s.pools[p.Name]
		if sp == nil {
			continue
		}
		st.Pools = append(st.Pools, PoolStatus{Name: p.Name, Kind: sp.kind, Policy: sp.Policy(), Endpoints: sp.Status(now)})
	}
	return st
}

// rateWindow is how far back a model's request rate looks: long enough to
// be steady at a request every few seconds, short enough to show a burst
// while it lasts.
const rateWindow = 10 * time.Second

// rateSlots is one slot per second of rateWindow, and one more for the
// second under way.
const rateSlots = int(rateWindow/time.Second) + 1

// modelRates counts each model's requests and errors per second, over
// the last rateSlots seconds.
type modelRates struct {
	by sync.Map // key: canonical model name; value: *rateRing
}

// rateRing is one model's counts, one slot per second.
type rateRing [rateSlots]rateSlot

type rateSlot struct {
	sec              atomic.Int64 // the Unix second the counts are of
	requests, errors atomic.Int64
}

// note counts one request of model answered with status at now. A request
// that lands as its slot turns to a new second may go uncounted: a rate
// shown to people does not need it.
func (m *modelRates) note(model string, status int, now time.Time) {
	v, ok := m.by.Load(model)
	if !ok {
		v, _ = m.by.LoadOrStore(model, new(rateRing))
	}
	sec := now.Unix()
	s := &v.(*rateRing)[sec%int64(rateSlots)]
	if old := s.sec.Load(); old != sec && s.sec.CompareAndSwap(old, sec) {
		s.requests.Store(0)
		s.errors.Store(0)
	}
	s.requests.Add(1)
	if status >= 400 {
		s.errors.Add(1)
	}
}

// rate is model's requests a second over the rateWindow seconds before
// now's, and the share of them that failed.
func (m *modelRates) rate(model string, now time.Time) (perSecond, errorRate float64) {
	v, ok := m.by.Load(model)
	if !ok {
		return 0, 0
	}
	sec := now.Unix()
	var req, errs int64
	for i := range v.(*rateRing) {
		s := &v.(*rateRing)[i]
		if d := sec - s.sec.Load(); d >= 1 && d <= int64(rateWindow/time.Second) {
			req += s.requests.Load()
			errs += s.errors.Load()
		}
	}
	if req == 0 {
		return 0, 0
	}
	return float64(req) / rateWindow.Seconds(), float64(errs) / float64(req)
}
