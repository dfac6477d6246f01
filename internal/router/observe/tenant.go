package observe

// The tenant label: a request's tenant path cut to the level
// router.tenant_label names, then capped at router.tenant_label_limit
// values so that a store with many tenants cannot grow the series without
// bound. Three quarters of the values go to tenants as they come (the
// first requests after a start are mostly the heavy tenants'); the last
// quarter is kept for tenants that prove heavy, by making
// tenantPromoteAfter requests counted in a heavy-hitters table of bounded
// size, such as a tenant that grows after the first places are taken. A
// value once given is kept; every other tenant is "other". A named
// tenant's label is found without a lock, and so is other once every
// value is given; until then a tenant not yet named takes a lock.

import (
	"sync"
	"sync/atomic"

	"github.com/cespare/xxhash/v2"
	"github.com/prometheus/client_golang/prometheus"
)

const (
	// otherTenant is the tenant label of every tenant past the limit.
	otherTenant = "other"
	// defaultTenantLabelLimit is the limit when none is given: 100 tenants
	// of 30 series each (two histograms) is 3,000 series.
	defaultTenantLabelLimit = 100
	// tenantPromoteAfter is how many requests a tenant makes, counted
	// surely, before it gets one of the values kept for heavy tenants: the
	// heavy reach it first, and a flood of tenants calling once each takes
	// none.
	tenantPromoteAfter = 8
	// The heavy-hitters table holds 8 tenants a value of the limit,
	// between these bounds: a tenant with more than 1/size of the requests
	// keeps its entry however many others pass through (Space-Saving).
	minTenantCandidates, maxTenantCandidates = 64, 4096
	// foldedBits is the size of the bitmap that tells tenants folded into
	// other apart, to count each once: 16 KiB. A tenant whose bit another
	// set first goes uncounted, about n²/2¹⁸ of n tenants: under 1% up to
	// 2,500, 30% at 100,000.
	foldedBits = 1 << 17
)

// tenantLabel turns a request's tenant path into its tenant label.
type tenantLabel struct {
	level string
	limit int
	// firstCome is how many values go to tenants as they come.
	firstCome int

	named atomic.Pointer[map[string]struct{}] // tenants with a value of their own; replaced whole, never shrinks
	full  atomic.Bool                         // limit tenants are named: every other is other

	mu         sync.Mutex        // protects candidates and index, and the growing of named
	candidates []tenantCandidate // the heavy-hitters table, at most size; nil once full
	index      map[string]int    // key: tenant; value: its place in candidates
	size       int               // how many candidates the table holds at most

	folded  [foldedBits / 64]atomic.Uint64 // a bit for each tenant labelled other, set once
	dropped prometheus.Counter             // llmgw_tenant_series_dropped_total
}

// tenantCandidate is a tenant counted on its way to a value of its own:
// count requests at most, of which err may have been another tenant's
// (the count of the entry it took over).
type tenantCandidate struct {
	tenant     string
	count, err int
}

func newTenantLabel(level string, limit int) *tenantLabel {
	if limit <= 0 {
		limit = defaultTenantLabelLimit
	}
	t := &tenantLabel{
		level: level, limit: limit, firstCome: limit - limit/4,
		size: min(max(8*limit, minTenantCandidates), maxTenantCandidates),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "llmgw_tenant_series_dropped_total",
			Help: "Tenants whose requests were labelled other for want of a tenant label value of their own (router.tenant_label_limit): each counted once, told apart by a 16 KiB bitmap (an undercount past some thousands).",
		}),
	}
	t.named.Store(&map[string]struct{}{})
	return t
}

// label is the label value of tenant v for one more request of it.
func (t *tenantLabel) label(v string) string {
	if _, ok := (*t.named.Load())[v]; ok {
		return v
	}
	if t.full.Load() {
		t.fold(v)
		return otherTenant
	}
	return t.count(v)
}

// count labels a request of v, not named when it was looked at: it is
// named at once while first-come values are left, and once it has made
// tenantPromoteAfter requests while the values kept for heavy tenants
// are.
func (t *tenantLabel) count(v string) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	named := *t.named.Load()
	if _, ok := named[v]; ok {
		return v
	}
	if !t.full.Load() {
		if len(named) < t.firstCome {
			t.promote(named, v)
			return v
		}
		if t.heavy(v) {
			t.promote(named, v)
			return v
		}
	}
	t.fold(v)
	return otherTenant
}

// heavy counts a request of v in the heavy-hitters table (Space-Saving),
// and reports whether v has surely made tenantPromoteAfter requests; then
// it leaves the table.
func (t *tenantLabel) heavy(v string) bool {
	if t.index == nil {
		t.candidates, t.index = make([]tenantCandidate, 0, t.size), make(map[string]int, t.size)
	}
	i, ok := t.index[v]
	switch {
	case ok:
		t.candidates[i].count++
	case len(t.candidates) < t.size:
		i = len(t.candidates)
		t.candidates = append(t.candidates, tenantCandidate{tenant: v, count: 1})
	default:
		i = 0 // the least counted gives its place, its count taken as error
		for j, c := range t.candidates {
			if c.count < t.candidates[i].count {
				i = j
			}
		}
		delete(t.index, t.candidates[i].tenant)
		n := t.candidates[i].count
		t.candidates[i] = tenantCandidate{tenant: v, count: n + 1, err: n}
	}
	t.index[v] = i
	if c := t.candidates[i]; c.count-c.err < tenantPromoteAfter {
		return false
	}
	last := len(t.candidates) - 1
	t.candidates[i] = t.candidates[last]
	t.index[t.candidates[i].tenant] = i
	t.candidates = t.candidates[:last]
	delete(t.index, v)
	return true
}

// promote gives v a value of its own. Once every value is given, the
// table is let go.
func (t *tenantLabel) promote(named map[string]struct{}, v string) {
	next := make(map[string]struct{}, len(named)+1)
	for k := range named {
		next[k] = struct{}{}
	}
	next[v] = struct{}{}
	t.named.Store(&next)
	if len(next) >= t.limit {
		t.full.Store(true)
		t.candidates, t.index = nil, nil
	}
}

// fold notes that v is labelled other, counting it in
// llmgw_tenant_series_dropped_total the first time.
func (t *tenantLabel) fold(v string) {
	h := xxhash.Sum64String(v) % foldedBits
	w, bit := &t.folded[h/64], uint64(1)<<(h%64)
	if w.Load()&bit != 0 {
		return
	}
	if old := w.Or(bit); old&bit == 0 {
		t.dropped.Inc()
	}
}
