// Package status is the router's read model: the gateway's live status as
// plain values, read from the router's own state rather than its metrics
// — per model, the recent request rate and error rate, p99s against the
// SLO, goodput by class and the admission queue; per pool, each
// endpoint's health, load and first-token times — and what routing sees
// of each endpoint (endpointview.go). The console shows the one, /metrics
// the other; nothing here decides anything.
package status

import (
	"sync"
	"sync/atomic"
	"time"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/admission"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/observe"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/pool"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/scrape"
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
	// RequestsPerSecond and ErrorRate are over the last RateWindow:
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
	// LoadedOn is the endpoints of its pool whose servers said, while
	// fresh, that they have it loaded, and ListsLoaded whether any said:
	// false on pools whose servers do not say (all but Ollama's).
	LoadedOn    []string
	ListsLoaded bool
}

// PoolStatus is one pool and its endpoints.
type PoolStatus struct {
	Name, Kind, Policy string
	Endpoints          []pool.EndpointStatus
}

// Pool is a pool of the catalog in service, as the router serves it.
type Pool struct {
	*pool.Pool
	Name, Kind string
}

// Board is the read model: the requests' rates it counts as an Observer,
// the endpoints' sights it keeps for the scrapes and probes, and what it
// reads of admission and the pools when asked.
type Board struct {
	tracker *admission.SLOTracker
	goodput *admission.Goodput
	gates   *admission.Gates

	rates  modelRates
	sights endpointSights
	view   atomic.Pointer[view] // the catalog in service; nil before the first
	m      *endpointMetrics
}

var (
	_ observe.Observer   = (*Board)(nil)
	_ observe.Collecting = (*Board)(nil)
)

// view is a catalog in service and its pools, in the catalog's order.
type view struct {
	cat   *catalog.Catalog
	pools []Pool
}

// New is a Board reading the SLO tracker's p99s, goodput and the gates'
// queues.
func New(tracker *admission.SLOTracker, goodput *admission.Goodput, gates *admission.Gates) *Board {
	return &Board{tracker: tracker, goodput: goodput, gates: gates, m: newEndpointMetrics()}
}

// SetCatalog puts cat in service, served by pools in its order.
func (b *Board) SetCatalog(cat *catalog.Catalog, pools []Pool) {
	b.view.Store(&view{cat: cat, pools: pools})
}

// Observe counts c against its model's rates.
func (b *Board) Observe(c *observe.Completed) {
	if c.Requested != nil {
		b.rates.note(c.Model, c.Outcome.Status, time.Now())
	}
}

// Status is the router's status at now; empty before the first catalog.
func (b *Board) Status(now time.Time) Status {
	st := Status{At: now}
	v := b.view.Load()
	if v == nil {
		return st
	}
	for _, m := range v.cat.Models() {
		ms := ModelStatus{Name: m.Name, Pool: m.Pool, SLO: m.SLO, Admission: m.Admission.Enabled}
		ms.RequestsPerSecond, ms.ErrorRate = b.rates.rate(m.Name, now)
		ms.TTFTp99, ms.TPOTp99, ms.Samples = b.tracker.P99(m.Name, now)
		ms.Queued = b.gates.Queued(m.Pool, m.Name)
		ms.Goodput = b.goodput.Ratios(m.Name)
		ms.LoadedOn, ms.ListsLoaded = v.loadedOn(m, now)
		st.Models = append(st.Models, ms)
	}
	for _, p := range v.pools {
		st.Pools = append(st.Pools, PoolStatus{Name: p.Name, Kind: p.Kind, Policy: p.Policy(), Endpoints: p.Status(now)})
	}
	return st
}

// loadedOn is the endpoints of m's pool whose servers said they have m
// loaded, and whether any said: on an ollama pool, whose servers list
// the models loaded by the upstream name as Ollama writes it.
func (v *view) loadedOn(m catalog.Model, now time.Time) ([]string, bool) {
	for _, p := range v.pools {
		if p.Name == m.Pool && p.Kind == catalog.KindOllama {
			return p.LoadedOn(scrape.OllamaName(m.UpstreamName()), now)
		}
	}
	return nil, false
}

// RateWindow is how far back a model's request rate looks: long enough to
// be steady at a request every few seconds, short enough to show a burst
// while it lasts.
const RateWindow = 10 * time.Second

// rateSlots is one slot per second of RateWindow, and one more for the
// second under way.
const rateSlots = int(RateWindow/time.Second) + 1

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

// rate is model's requests a second over the RateWindow seconds before
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
		if d := sec - s.sec.Load(); d >= 1 && d <= int64(RateWindow/time.Second) {
			req += s.requests.Load()
			errs += s.errors.Load()
		}
	}
	if req == 0 {
		return 0, 0
	}
	return float64(req) / RateWindow.Seconds(), float64(errs) / float64(req)
}
