package admission

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/tenant"
	"gitea.mynodes.xyz/ilker/llmgw/internal/openai"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/pool"
)

func TestRequestClass(t *testing.T) {
	for _, tc := range []struct {
		name    string
		key     *tenant.Key // nil: no keys
		header  string
		want    Class
		wantErr bool
	}{
		{name: "no keys, no header", want: Standard},
		{name: "no keys, header sets", header: "critical", want: Critical},
		{name: "no keys, header lowers", header: "sheddable", want: Sheddable},
		{name: "key without a class is standard", key: &tenant.Key{}, want: Standard},
		{name: "key's class", key: &tenant.Key{Priority: "critical"}, want: Critical},
		{name: "header lowers the key's", key: &tenant.Key{Priority: "critical"}, header: "sheddable", want: Sheddable},
		{name: "header cannot raise", key: &tenant.Key{Priority: "sheddable"}, header: "critical", want: Sheddable},
		{name: "header cannot raise standard", key: &tenant.Key{}, header: "critical", want: Standard},
		{name: "unknown class", header: "urgent", wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hr, _ := http.NewRequest(http.MethodPost, "/v1/chat/completions", nil)
			if tc.header != "" {
				hr.Header.Set("x-llmgw-priority", tc.header)
			}
			got, err := RequestClass(hr, tc.key)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if err == nil && got != tc.want {
				t.Errorf("class = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestRequestTenant(t *testing.T) {
	for _, tc := range []struct {
		name   string
		key    *tenant.Key
		header string
		want   string
	}{
		{name: "key's tenant", key: &tenant.Key{Tenant: "acme/search"}, header: "beta", want: "acme/search"},
		{name: "no keys: header", header: "acme/chat", want: "acme/chat"},
		{name: "no keys, no header", want: ""},
		{name: "no keys: invalid header", header: "a//b", want: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hr, _ := http.NewRequest(http.MethodPost, "/v1/chat/completions", nil)
			if tc.header != "" {
				hr.Header.Set("x-llmgw-tenant", tc.header)
			}
			if got := RequestTenant(hr, tc.key); got != tc.want {
				t.Errorf("tenant = %q, want %q", got, tc.want)
			}
		})
	}
}

// harness is the gates of a catalog's pools, without a router: each
// pool's endpoints as a pool.Pool keeps them, or, where states holds
// them, as literal values.
type harness struct {
	gates  *Gates
	m      *Metrics
	cat    *catalog.Catalog
	pools  map[string]*pool.Pool   // key: pool name
	states map[string][]pool.State // key: pool name; in place of its pool's
	press  map[string]float64      // key: model; its SLO pressure, zero when absent
}

var _ Catalog = (*harness)(nil)

func (h *harness) PoolState(name string, now time.Time, startBatch bool) ([]pool.State, float64, bool) {
	if eps, ok := h.states[name]; ok {
		return eps, 1000, true
	}
	p := h.pools[name]
	if p == nil {
		return nil, 0, false
	}
	return p.States(now, startBatch), p.MeanPrompt(), true
}

func (h *harness) HasPool(name string) bool { return h.pools[name] != nil }

// NextFallback is the fallback after cur in requested's list, as the
// router's catalog gives it.
func (h *harness) NextFallback(requested, cur *catalog.Model) *catalog.Model {
	return h.cat.NextFallback(requested, cur)
}

// newHarness serves the catalog of pools and models, its metrics in a
// registry of its own.
func newHarness(t *testing.T, ps []catalog.Pool, ms []catalog.Model) (*harness, *prometheus.Registry) {
	t.Helper()
	cat, err := catalog.New(ps, ms)
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{m: NewMetrics(), cat: cat, pools: make(map[string]*pool.Pool), states: make(map[string][]pool.State),
		press: make(map[string]float64)}
	for _, p := range cat.Pools() {
		h.pools[p.Name] = pool.New(p, nil, nil)
	}
	h.gates = NewGates(func() Catalog { return h }, func(model string) float64 { return h.press[model] }, h.m)
	reg := prometheus.NewRegistry()
	for _, c := range h.m.Collectors() {
		if err := reg.Register(c); err != nil {
			t.Fatal(err)
		}
	}
	return h, reg
}

// admissionRouter is a harness whose pool "main" of one endpoint (never
// called) serves models "m" and "fast", both with admission: m's TTFT SLO
// is 10 s, fast's 2 s. mutate may change the models.
func admissionRouter(t *testing.T, mutate func(ms []catalog.Model)) (*harness, *prometheus.Registry) {
	t.Helper()
	adm := catalog.Admission{Enabled: true, Queue: 8}
	ms := []catalog.Model{
		{Name: "m", Pool: "main", SLO: catalog.SLO{TTFTp99: 10 * time.Second}, Admission: adm},
		{Name: "fast", Pool: "main", SLO: catalog.SLO{TTFTp99: 2 * time.Second}, Admission: adm},
	}
	if mutate != nil {
		mutate(ms)
	}
	return newHarness(t, []catalog.Pool{{Name: "main", Endpoints: []catalog.Endpoint{{URL: "http://127.0.0.1:1/v1"}}}}, ms)
}

// arrival is one request at the gate and what came of it.
type arrival struct {
	name   string
	ticket *Ticket
	err    error
	done   chan struct{}
	cancel context.CancelFunc
}

// arrive sends a request for model of class c from tenant (no key when
// empty) with a prompt of tokens to the gate, and waits until it is
// decided or blocked.
func arrive(r *harness, name, model string, c Class, tenantPath string, tokens int64) *arrival {
	m, _ := r.cat.Resolve(model)
	ctx, cancel := context.WithCancel(context.Background())
	a := &arrival{name: name, done: make(chan struct{}), cancel: cancel}
	go func() {
		defer close(a.done)
		a.ticket, a.err = r.gates.Admit(ctx, r, m, c, tenantPath, tokens)
	}()
	synctest.Wait()
	return a
}

// leave has every request of as leave the queue, as clients that go away
// do, so that a test ends with nothing waiting.
func leave(as ...*arrival) {
	for _, a := range as {
		a.cancel()
	}
	synctest.Wait()
}

func (a *arrival) decided() bool {
	select {
	case <-a.done:
		return true
	default:
		return false
	}
}

// fill admits admitPendingPerEndpoint requests, so that the one endpoint
// has no headroom, and returns their tickets.
func fill(t *testing.T, r *harness) []*Ticket {
	t.Helper()
	return fillWith(t, r, "fast", PendingPerEndpoint)
}

// serveInTurn releases one starting request at a time and returns the
// order in which the waiters were admitted: each release is the event
// that lets exactly one go.
func serveInTurn(t *testing.T, held []*Ticket, waiters ...*arrival) []string {
	t.Helper()
	for _, a := range waiters {
		if a.decided() {
			t.Fatalf("%s was decided before anything ended: %v", a.name, a.err)
		}
	}
	var order []string
	left := waiters
	for len(left) > 0 {
		if len(held) == 0 {
			t.Fatalf("no request left to end, and %d waiting", len(left))
		}
		held[0].FirstToken()
		held = held[1:]
		synctest.Wait()
		var still []*arrival
		for _, a := range left {
			if !a.decided() {
				still = append(still, a)
				continue
			}
			if a.err != nil {
				t.Fatalf("%s: %v", a.name, a.err)
			}
			order = append(order, a.name)
			held = append(held, a.ticket)
		}
		if len(left)-len(still) != 1 {
			t.Fatalf("one end admitted %d waiters, want 1", len(left)-len(still))
		}
		left = still
	}
	return order
}

func TestQueueOrder(t *testing.T) {
	for _, tc := range []struct {
		name    string
		arrive  func(r *harness) []*arrival
		weights map[string]float64
		want    []string
	}{{
		name: "bands: critical, then standard, then sheddable",
		arrive: func(r *harness) []*arrival {
			return []*arrival{
				arrive(r, "sheddable", "m", Sheddable, "", 10),
				arrive(r, "standard", "m", Standard, "", 10),
				arrive(r, "critical", "m", Critical, "", 10),
			}
		},
		want: []string{"critical", "standard", "sheddable"},
	}, {
		name: "earliest deadline first within a band",
		arrive: func(r *harness) []*arrival {
			a := arrive(r, "m, due in 10s", "m", Standard, "", 10)
			time.Sleep(time.Second)
			b := arrive(r, "fast, due in 2s", "fast", Standard, "", 10)
			return []*arrival{a, b}
		},
		want: []string{"fast, due in 2s", "m, due in 10s"},
	}, {
		name: "tenants share a band by served tokens",
		arrive: func(r *harness) []*arrival {
			return []*arrival{
				arrive(r, "a1", "m", Standard, "acme/a", 100),
				arrive(r, "a2", "m", Standard, "acme/a", 100),
				arrive(r, "a3", "m", Standard, "acme/a", 100),
				arrive(r, "b1", "m", Standard, "acme/b", 100),
				arrive(r, "b2", "m", Standard, "acme/b", 100),
			}
		},
		want: []string{"a1", "b1", "a2", "b2", "a3"},
	}, {
		name:    "tenants share a band by weight",
		weights: map[string]float64{"acme/b": 2},
		arrive: func(r *harness) []*arrival {
			return []*arrival{
				arrive(r, "a1", "m", Standard, "acme/a", 100),
				arrive(r, "a2", "m", Standard, "acme/a", 100),
				arrive(r, "a3", "m", Standard, "acme/a", 100),
				arrive(r, "b1", "m", Standard, "acme/b/x", 100),
				arrive(r, "b2", "m", Standard, "acme/b/y", 100),
				arrive(r, "b3", "m", Standard, "acme/b/x", 100),
			}
		},
		// b's paths weigh 2 each (their ancestor's weight); a's 1.
		want: []string{"a1", "b1", "b2", "b3", "a2", "a3"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r, _ := admissionRouter(t, func(ms []catalog.Model) {
					ms[0].Admission.TenantWeights = tc.weights
				})
				held := fill(t, r)
				got := serveInTurn(t, held, tc.arrive(r)...)
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("admission order (-want +got):\n%s", diff)
				}
			})
		})
	}
}

// overloadedErr checks err is admission's 429 with code, and a
// Retry-After.
func overloadedErr(t *testing.T, err error, code string) {
	t.Helper()
	var e *openai.Error
	if !errors.As(err, &e) {
		t.Fatalf("err = %v, want an admission refusal", err)
	}
	if e.Status != http.StatusTooManyRequests || e.Type != "overloaded" || e.Code != code || e.RetryAfterSeconds < 1 {
		t.Errorf("refusal = %d %s %s retry after %d; want 429 overloaded %s with a Retry-After", e.Status, e.Type, e.Code, e.RetryAfterSeconds, code)
	}
}

func TestQueueFull(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, _ := admissionRouter(t, func(ms []catalog.Model) { ms[0].Admission.Queue = 2 })
		fill(t, r)
		s1 := arrive(r, "s1", "m", Sheddable, "", 10)
		s2 := arrive(r, "s2", "m", Standard, "", 10)
		third := arrive(r, "third", "m", Sheddable, "", 10)
		if !third.decided() {
			t.Fatal("a request finding the queue full waits; want an answer at once")
		}
		overloadedErr(t, third.err, codeQueueFull)

		// A critical request makes room by shedding the least important.
		c := arrive(r, "critical", "m", Critical, "", 10)
		if c.decided() {
			t.Fatalf("critical decided at once: %v", c.err)
		}
		if !s1.decided() || s2.decided() {
			t.Fatalf("shed sheddable %v, standard %v; want the sheddable shed", s1.decided(), s2.decided())
		}
		overloadedErr(t, s1.err, codeShed)
		got := testutil.ToFloat64(r.m.decisions.WithLabelValues("m", "sheddable", decisionRejected))
		if got != 2 {
			t.Errorf("sheddable rejections = %v, want 2", got)
		}
		c.cancel()
		s2.cancel()
		synctest.Wait()
	})
}

func TestUnreachableDeadline(t *testing.T) {
	// A 10 ms TTFT is below what the endpoint's first token costs when
	// idle (20 ms): standard and sheddable are refused at once, critical
	// is served late rather than not at all.
	synctest.Test(t, func(t *testing.T) {
		r, _ := admissionRouter(t, func(ms []catalog.Model) { ms[0].SLO.TTFTp99 = 10 * time.Millisecond })
		for _, c := range []Class{Sheddable, Standard} {
			a := arrive(r, c.String(), "m", c, "", 100)
			if !a.decided() {
				t.Fatalf("%v waits; want an answer at once", c)
			}
			overloadedErr(t, a.err, codeUnreachable)
		}
		crit := arrive(r, "critical", "m", Critical, "", 100)
		if !crit.decided() || crit.err != nil || crit.ticket == nil || crit.ticket.fallback {
			t.Fatalf("critical: %v; want admitted", crit.err)
		}
	})
}

// fallbackRouter is a harness whose model "m" (pool main, TTFT SLO 10 ms)
// falls back to "f" (pool spare, admission on) and then "hosted" (pool
// hosted, admission off); ms[0] is m, and it falls back to no more than
// fallbacks of them.
func fallbackRouter(t *testing.T, fallbacks int) *harness {
	t.Helper()
	adm := catalog.Admission{Enabled: true, Queue: 8}
	slo := catalog.SLO{TTFTp99: 10 * time.Second}
	ms := []catalog.Model{
		{Name: "m", Pool: "main", SLO: catalog.SLO{TTFTp99: 10 * time.Millisecond}, Admission: adm,
			Fallbacks: []string{"f", "hosted"}[:fallbacks]},
		{Name: "fill", Pool: "main", SLO: slo, Admission: adm},
		{Name: "f", Pool: "spare", SLO: slo, Admission: adm},
		{Name: "hosted", Pool: "hosted"},
	}
	var ps []catalog.Pool
	for i, name := range []string{"main", "spare", "hosted"} {
		ps = append(ps, catalog.Pool{Name: name, Endpoints: []catalog.Endpoint{{URL: fmt.Sprintf("http://127.0.0.%d:1/v1", i+1)}}})
	}
	h, _ := newHarness(t, ps, ms)
	return h
}

// fillWith admits n requests for model.
func fillWith(t *testing.T, r *harness, model string, n int) []*Ticket {
	t.Helper()
	var ts []*Ticket
	for range n {
		a := arrive(r, "fill", model, Standard, "", 10)
		if !a.decided() || a.err != nil || a.ticket == nil {
			t.Fatalf("filling request for %s not admitted at once: %v", model, a.err)
		}
		ts = append(ts, a.ticket)
	}
	return ts
}

// TestCriticalFallsBack: a critical request its pool cannot serve in time
// goes through the first fallback's own gate when that has headroom, and
// past it to a fallback without admission when it has none.
func TestCriticalFallsBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := fallbackRouter(t, 2)
		fillWith(t, r, "fill", PendingPerEndpoint) // main, of one endpoint, has no headroom
		crit := arrive(r, "critical", "m", Critical, "", 100)
		if !crit.decided() || crit.err != nil || crit.ticket == nil || !crit.ticket.fallback || crit.ticket.to == nil || crit.ticket.to.Name != "f" {
			t.Fatalf("critical: ticket %+v, err %v; want admitted at f's gate at once", crit.ticket, crit.err)
		}
		if crit.ticket.g != r.gates.Of("spare") {
			t.Error("the ticket is not the spare pool's gate's")
		}
		if got := testutil.ToFloat64(r.m.decisions.WithLabelValues("m", "critical", decisionFellBack)); got != 1 {
			t.Errorf("m's fell_back = %v, want 1", got)
		}
		if got := testutil.ToFloat64(r.m.decisions.WithLabelValues("f", "critical", decisionAdmitted)); got != 1 {
			t.Errorf("f's admitted = %v, want 1", got)
		}

		// The spare pool full too: the next goes past it to hosted.
		fillWith(t, r, "f", PendingPerEndpoint-1)
		next := arrive(r, "critical", "m", Critical, "", 100)
		if !next.decided() || next.err != nil || next.ticket == nil || next.ticket.to == nil || next.ticket.to.Name != "hosted" {
			t.Fatalf("critical with f full: ticket %+v, err %v; want sent to hosted", next.ticket, next.err)
		}
		if got := r.gates.Of("spare").starting; got != PendingPerEndpoint {
			t.Errorf("the spare gate counts %d starting, want %d", got, PendingPerEndpoint)
		}
	})
}

// TestCriticalWaitsWhenNoFallbackCan: with its only fallback full, a
// critical request waits in its own queue; once its deadline is out of
// reach and the fallback is still full it waits on, and is served when
// its pool frees.
func TestCriticalWaitsWhenNoFallbackCan(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := fallbackRouter(t, 1)
		held := fillWith(t, r, "fill", PendingPerEndpoint)
		fillWith(t, r, "f", PendingPerEndpoint)
		crit := arrive(r, "critical", "m", Critical, "", 100)
		time.Sleep(time.Second)
		synctest.Wait()
		if crit.decided() {
			t.Fatalf("critical decided with nothing able to serve it: ticket %+v, err %v", crit.ticket, crit.err)
		}
		held[0].FirstToken()
		synctest.Wait()
		if !crit.decided() || crit.err != nil || crit.ticket == nil || crit.ticket.fallback {
			t.Fatalf("critical: ticket %+v, err %v; want admitted in its own pool, late", crit.ticket, crit.err)
		}
	})
}

func TestWaiterExpires(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, reg := admissionRouter(t, nil)
		held := fill(t, r)
		a := arrive(r, "waits", "fast", Standard, "", 10)
		time.Sleep(time.Second)
		synctest.Wait()
		if a.decided() {
			t.Fatalf("decided with a second of its 2 s left: %v", a.err)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if !a.decided() {
			t.Fatal("still waiting past its deadline")
		}
		overloadedErr(t, a.err, codeUnreachable)
		if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP llmgw_queue_depth Requests waiting in a model's admission queue now, by model and priority class.
# TYPE llmgw_queue_depth gauge
llmgw_queue_depth{class="standard",model="fast"} 0
`), "llmgw_queue_depth"); err != nil {
			t.Error(err)
		}
		if got := testutil.ToFloat64(r.m.decisions.WithLabelValues("fast", "standard", decisionExpired)); got != 1 {
			t.Errorf("expired = %v, want 1", got)
		}
		for _, h := range held {
			h.End(0)
		}
	})
}

func TestClientLeavesTheQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, _ := admissionRouter(t, nil)
		held := fill(t, r)
		gone := arrive(r, "gone", "m", Critical, "", 10)
		stays := arrive(r, "stays", "m", Standard, "", 10)
		gone.cancel()
		synctest.Wait()
		if !gone.decided() {
			t.Fatal("a client that left is still queued")
		}
		if e := openai.AsError(gone.err); e.Status != openai.StatusClientClosed {
			t.Errorf("left: %v, want 499", gone.err)
		}
		g := r.gates.gateOf("main")
		g.mu.Lock()
		n := len(g.waiting)
		g.mu.Unlock()
		if n != 1 {
			t.Fatalf("%d waiting, want 1", n)
		}
		// The next end admits the one that stayed, not the one that left.
		if got := serveInTurn(t, held, stays); !cmp.Equal(got, []string{"stays"}) {
			t.Errorf("admitted %v", got)
		}
	})
}

func TestAdmitAtOnceWithHeadroom(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, _ := admissionRouter(t, nil)
		for c := range numClasses {
			a := arrive(r, c.String(), "m", c, "", 10)
			if !a.decided() || a.err != nil {
				t.Fatalf("%v: %v; want admitted at once", c, a.err)
			}
			a.ticket.End(5)
		}
		for c := range numClasses {
			if got := testutil.ToFloat64(r.m.decisions.WithLabelValues("m", c.String(), decisionAdmitted)); got != 1 {
				t.Errorf("%v admitted = %v, want 1", c, got)
			}
		}
	})
}

// TestFullQueueSharedByTenants fills a queue with one tenant's requests:
// another tenant's arrival takes a place from it, until they hold as many.
func TestFullQueueSharedByTenants(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, _ := admissionRouter(t, func(ms []catalog.Model) { ms[0].Admission.Queue = 3 })
		fill(t, r)
		a1 := arrive(r, "a1", "m", Standard, "acme/loud", 10)
		a2 := arrive(r, "a2", "m", Standard, "acme/loud", 10)
		time.Sleep(time.Millisecond)
		a3 := arrive(r, "a3", "m", Standard, "acme/loud", 10)
		b1 := arrive(r, "b1", "m", Standard, "acme/quiet", 10)
		if !a3.decided() || a1.decided() || a2.decided() || b1.decided() {
			t.Fatalf("decided: a1 %v a2 %v a3 %v b1 %v; want only a3, the loud tenant's latest, shed",
				a1.decided(), a2.decided(), a3.decided(), b1.decided())
		}
		overloadedErr(t, a3.err, codeShed)
		// loud holds 2, quiet 1: taking another place would only turn the
		// imbalance round, so a second quiet arrival is refused.
		b2 := arrive(r, "b2", "m", Standard, "acme/quiet", 10)
		if !b2.decided() || a1.decided() || a2.decided() {
			t.Fatalf("b2 decided %v, a1 %v, a2 %v; want b2 refused", b2.decided(), a1.decided(), a2.decided())
		}
		overloadedErr(t, b2.err, codeQueueFull)
		for _, a := range []*arrival{a1, a2, b1} {
			a.cancel()
		}
		synctest.Wait()
	})
}

// TestBatchLimitKeepsRoomForCritical: with critical in play and the
// pool's endpoint one place short of its batch limit, standard waits while
// critical goes in the place kept for it; ends let standard in.
func TestBatchLimitKeepsRoomForCritical(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, _ := admissionRouter(t, func(ms []catalog.Model) {
			ms[0].SLO.TPOTp99 = 50 * time.Millisecond
		})
		p := r.pools["main"]
		p.Endpoints()[0].SetBatchLimit(10)
		decoding := streams(p, 8)

		first := arrive(r, "critical", "m", Critical, "", 10)
		if !first.decided() || first.err != nil {
			t.Fatalf("critical not admitted with two places left: %v", first.err)
		}
		decoding = append(decoding, streams(p, 1)...) // it is sent
		if got, want := r.gates.gateOf("main").TPOTAim(), time.Duration(trimStart*float64(50*time.Millisecond)); got != want {
			t.Errorf("aim = %v, want %v: the TPOT SLO times %v", got, want, trimStart)
		}

		std := arrive(r, "standard", "m", Standard, "", 10)
		if std.decided() {
			t.Fatalf("standard decided with only the place kept for critical left: %v", std.err)
		}
		second := arrive(r, "critical", "m", Critical, "", 10)
		if !second.decided() || second.err != nil {
			t.Fatalf("critical not admitted into the kept place: %v", second.err)
		}
		decoding = append(decoding, streams(p, 1)...)

		for _, c := range decoding[:2] { // two ended: a place beyond the kept one
			c.Done(0)
		}
		first.ticket.End(0)
		second.ticket.End(0)
		synctest.Wait()
		if !std.decided() || std.err != nil {
			t.Fatalf("standard not admitted after two ends: %v", std.err)
		}
	})
}

// TestTrimFollowsTheTightClass: the aim is the tightest TPOT SLO in play,
// trimmed by each of that class's streams — cut on a miss, raised a
// ninety-ninth as much on a meet — and a class not seen for aimWindow
// leaves play.
func TestTrimFollowsTheTightClass(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, _ := admissionRouter(t, nil)
		g := r.gates.gateOf("main")
		tight, loose := 50*time.Millisecond, 200*time.Millisecond
		g.mu.Lock()
		g.noteAim(loose, time.Now())
		g.noteAim(tight, time.Now())
		g.mu.Unlock()
		aim := func() float64 { return float64(g.TPOTAim()) / float64(tight) }
		if got := aim(); got != trimStart {
			t.Fatalf("aim = %v of the tight SLO, want %v", got, trimStart)
		}

		g.NoteTPOT(loose, time.Second) // a loose stream's miss trims nothing
		if got := aim(); got != trimStart {
			t.Errorf("a looser class's miss moved the aim to %v", got)
		}
		g.NoteTPOT(tight, 60*time.Millisecond)
		cut := trimStart * (1 - trimCut)
		if got := aim(); math.Abs(got-cut) > 1e-9 {
			t.Errorf("after a miss: %v, want %v", got, cut)
		}
		for range 99 {
			g.NoteTPOT(tight, 30*time.Millisecond)
		}
		// One miss in a hundred: back about where it was.
		if got := aim(); math.Abs(got-trimStart) > 0.01 {
			t.Errorf("after 99 meets: %v, want about %v", got, trimStart)
		}

		time.Sleep(aimWindow + time.Second)
		g.mu.Lock()
		g.noteAim(loose, time.Now())
		g.mu.Unlock()
		// The loose SLO, trimmed as the tight class's streams left it: cut
		// once, then raised 99 times by trimCut/99.
		left := trimStart * (1 - trimCut) * math.Pow(1+trimCut/99, 99)
		if got, want := g.TPOTAim(), time.Duration(float64(loose)*left); (got - want).Abs() > time.Microsecond {
			t.Errorf("with the tight class gone: aim %v, want %v", got, want)
		}
	})
}

// TestPrefillBoundHoldsBackAllButCritical: while a TPOT SLO is in play,
// a standard prompt waits while the endpoint owes more prefill than
// prefillTPOTs of that SLO with it, and goes once the endpoint has caught
// up; critical goes at once.
func TestPrefillBoundHoldsBackAllButCritical(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, _ := admissionRouter(t, func(ms []catalog.Model) {
			ms[0].SLO.TPOTp99 = 50 * time.Millisecond
		})
		// The cost prior, 100 µs a token, makes the bound of 2 × 50 ms
		// a thousand tokens.
		owed := r.pools["main"].Send(0, 800, false, false, time.Now())
		std := arrive(r, "standard", "m", Standard, "", 300)
		if std.decided() {
			t.Fatalf("standard decided with 1,100 tokens of prefill owed: %v", std.err)
		}
		crit := arrive(r, "critical", "m", Critical, "", 300)
		if !crit.decided() || crit.err != nil {
			t.Fatalf("critical not admitted at once: %v", crit.err)
		}
		small := arrive(r, "small", "m", Standard, "", 100)
		if small.decided() {
			t.Fatalf("a standard prompt that fits went ahead of the queue: %v", small.err)
		}

		owed.FirstToken(time.Now()) // the endpoint caught up
		crit.ticket.FirstToken()
		synctest.Wait()
		if !std.decided() || std.err != nil {
			t.Fatalf("standard not admitted once nothing is owed: %v", std.err)
		}
	})
}

// TestRefusedAtTheAdmissionRate: once the gate has admitted a class at a
// rate it can measure, a sheddable or standard request whose turn, at that
// rate, comes after its deadline is refused at once rather than queued to
// expire or be shed; requests of the class above waiting too do not
// count, as the measured rate is what they leave it.
func TestRefusedAtTheAdmissionRate(t *testing.T) {
	for _, c := range []Class{Sheddable, Standard} {
		t.Run(c.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r, _ := admissionRouter(t, func(ms []catalog.Model) { ms[0].Admission.Queue = 64 })
				var held []*Ticket
				for range PendingPerEndpoint {
					a := arrive(r, "first", "m", c, "", 10)
					if !a.decided() || a.err != nil {
						t.Fatalf("not admitted at once: %v", a.err)
					}
					held = append(held, a.ticket)
				}
				// Four more admitted, one a second as the held ones end:
				// eight admissions in four seconds, half a second a turn.
				for i := range 4 {
					a := arrive(r, "waits", "m", c, "", 10)
					time.Sleep(time.Second)
					held[i].FirstToken()
					synctest.Wait()
					if !a.decided() || a.err != nil {
						t.Fatalf("waiter %d not admitted as a place freed: %v", i, a.err)
					}
				}

				// Twenty turns fit in the 10 s deadline.
				var queued []*arrival
				for i := range 20 {
					queued = append(queued, arrive(r, "critical", "m", Critical, "", 10))
					a := arrive(r, c.String(), "m", c, "", 10)
					if a.decided() {
						t.Fatalf("request %d, whose turn is within its deadline, was decided: %v", i+1, a.err)
					}
					queued = append(queued, a)
				}
				late := arrive(r, c.String(), "m", c, "", 10)
				if !late.decided() {
					t.Fatal("a request whose turn comes after its deadline was queued")
				}
				overloadedErr(t, late.err, codeUnreachable)
				leave(queued...)
			})
		})
	}
}

// TestSheddableLeavesQueueRoom: with a class above in play, sheddable
// requests fill no more than sheddableQueueShare of the model's queue; the
// next is refused at once, and a standard arrival still finds a place
// without shedding anyone.
func TestSheddableLeavesQueueRoom(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, _ := admissionRouter(t, nil) // m's queue holds 8
		fill(t, r)                      // standard arrived: a class above sheddable is in play
		var queued []*arrival
		for i := range 6 {
			a := arrive(r, "sheddable", "m", Sheddable, "", 10)
			if a.decided() {
				t.Fatalf("sheddable %d of 6 decided: %v", i+1, a.err)
			}
			queued = append(queued, a)
		}
		seventh := arrive(r, "sheddable", "m", Sheddable, "", 10)
		if !seventh.decided() {
			t.Fatal("a seventh sheddable took a place kept for the classes above")
		}
		overloadedErr(t, seventh.err, codeQueueFull)
		std := arrive(r, "standard", "m", Standard, "", 10)
		if std.decided() {
			t.Fatalf("standard decided: %v", std.err)
		}
		for _, a := range queued {
			if a.decided() {
				t.Errorf("a sheddable waiter was shed: %v", a.err)
			}
		}
		leave(append(queued, std)...)
	})
}

// TestQueueWaitCountsTheTenantsShare: a tenant with a backlog waits its
// turn at its own admission rate, which is its share of the class's; a
// quiet tenant, whose request goes before that backlog, waits its turn at
// the class's rate.
func TestQueueWaitCountsTheTenantsShare(t *testing.T) {
	r, _ := admissionRouter(t, nil)
	g := r.gates.gateOf("main")
	m, _ := r.cat.Resolve("m")
	now := time.Now()
	g.mu.Lock()
	defer g.mu.Unlock()
	// In the last second, 10 standard admissions: 8 loud, 2 quiet.
	for i := range 10 {
		w := &waiter{model: m, class: Standard, tenant: "loud", weight: 1}
		if i%5 == 4 {
			w.tenant = "quiet"
		}
		g.admitLocked(w, now.Add(-time.Second+time.Duration(i)*100*time.Millisecond))
	}
	g.virtual["loud"], g.virtual["quiet"] = 800, 200
	for range 20 {
		g.waiting = append(g.waiting, &waiter{model: m, class: Standard, tenant: "loud", weight: 1, deadline: now.Add(time.Second)})
	}
	loud := &waiter{model: m, class: Standard, tenant: "loud", weight: 1, deadline: now.Add(time.Second)}
	quiet := &waiter{model: m, class: Standard, tenant: "quiet", weight: 1, deadline: now.Add(time.Second)}
	// The class admits one each 0.1 s (ten in the second since its
	// first), loud one each 0.125 s (eight in the same second).
	if got, want := g.queueWait(quiet, now), 0.1; math.Abs(got-want) > 1e-9 {
		t.Errorf("quiet waits %v s, want %v: first in line, at the class's rate", got, want)
	}
	loudTurn := 1.0 / 8
	if got, want := g.queueWait(loud, now), 21*loudTurn; math.Abs(got-want) > 1e-9 {
		t.Errorf("loud waits %v s, want %v: behind its 20, at its own rate", got, want)
	}
	g.waiting = nil
}

// streams sends n calls to p's first endpoint that are past their first
// token: streams decoding there.
func streams(p *pool.Pool, n int) []pool.Call {
	calls := make([]pool.Call, n)
	for i := range calls {
		calls[i] = p.Send(0, 0, false, false, time.Now())
		calls[i].FirstToken(time.Now())
	}
	return calls
}

// TestHeadroomFromEndpointStates: whether a request goes at once is
// decided from its pool's endpoint states alone: requests waiting for a
// first token against the cap, and the first token predicted from the
// prefill owed there, this gateway's and the other gateways', within the
// deadline (fast's TTFT SLO, 2 s); a pool with no endpoint up lets it
// through, for dispatch to answer.
func TestHeadroomFromEndpointStates(t *testing.T) {
	const base, perToken = 0.020, 100e-6 // 10,000 prefill tokens a second
	idle := pool.State{Cost: pool.Cost{Base: base, PerToken: perToken, PerAhead: perToken}, Decode: pool.Decode{Step: 0.010, PerPrefillToken: perToken}}
	pending := idle
	pending.Own.Pending = PendingPerEndpoint
	owing := idle
	owing.Own.Owed = 30_000 // 3 s of prefill ahead
	peersOwing := idle
	peersOwing.Peers.Owed = 30_000
	scrapedQueue := idle
	scrapedQueue.Load = &pool.Load{Waiting: 25} // 25 requests of 1,000 tokens queued by others
	for _, tc := range []struct {
		name string
		eps  []pool.State
		want bool // admitted at once
	}{
		{"an idle endpoint", []pool.State{idle}, true},
		{"as many waiting for a first token as the cap", []pool.State{pending}, false},
		{"the cap counts every endpoint", []pool.State{pending, idle}, true},
		{"its own prefill owed past the deadline", []pool.State{owing}, false},
		{"the other gateways' prefill owed past the deadline", []pool.State{peersOwing}, false},
		{"another sender's queue, as scraped, past the deadline", []pool.State{scrapedQueue}, false},
		{"an endpoint that can make it", []pool.State{owing, idle}, true},
		{"no endpoint up", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h, _ := admissionRouter(t, nil)
				h.states["main"] = tc.eps
				a := arrive(h, "a", "fast", Standard, "", 10)
				defer leave(a)
				if got := a.decided() && a.err == nil; got != tc.want {
					t.Errorf("admitted at once: %v (err %v), want %v", got, a.err, tc.want)
				}
				if got := testutil.ToFloat64(h.m.decisions.WithLabelValues("fast", "standard", decisionQueued)); got != map[bool]float64{true: 0, false: 1}[tc.want] {
					t.Errorf("queued %v times, want %v", got, !tc.want)
				}
			})
		})
	}
}

// TestNoEndpointUpLetsATrickleThrough: with every endpoint of the pool
// out (a health probe timed out on each at once), critical goes at once,
// and the others only while fewer than outageStarting of the gate's
// requests are starting; the next goes when one of them has its first
// token, so that the queue does not land on the pool all at once when it
// is back. Waiting, they are not refused: with no endpoint up, no
// deadline is certainly missed.
func TestNoEndpointUpLetsATrickleThrough(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, _ := admissionRouter(t, nil)
		h.states["main"] = nil // every endpoint out
		var held []*Ticket
		for i := range outageStarting {
			a := arrive(h, fmt.Sprint("s", i), "m", Standard, "", 2000)
			if !a.decided() || a.err != nil {
				t.Fatalf("standard %d of %d with no endpoint up: %v; want admitted", i+1, outageStarting, a.err)
			}
			held = append(held, a.ticket)
		}
		next := arrive(h, "next", "m", Sheddable, "", 4000)
		if next.decided() {
			t.Fatalf("sheddable decided with %d starting and no endpoint up: %v; want it to wait", outageStarting, next.err)
		}
		crit := arrive(h, "critical", "m", Critical, "", 300)
		if !crit.decided() || crit.err != nil {
			t.Fatalf("critical with no endpoint up: %v; want admitted at once", crit.err)
		}
		held[0].FirstToken() // critical's start counts too: still outageStarting
		synctest.Wait()
		if next.decided() {
			t.Fatalf("sheddable decided with %d starting and no endpoint up: %v; want it to wait", outageStarting, next.err)
		}
		crit.ticket.FirstToken()
		synctest.Wait()
		if !next.decided() || next.err != nil {
			t.Fatalf("sheddable not admitted once fewer than %d were starting: %v", outageStarting, next.err)
		}
		if got := testutil.ToFloat64(h.m.decisions.WithLabelValues("m", "sheddable", decisionQueued)); got != 1 {
			t.Errorf("sheddable queued %v times, want 1", got)
		}
	})
}

// TestQueuedPrefillPricedAtThePoolsCompute: the wait a sheddable request
// is refused by prices the prefill ahead of it at what the pool computes
// a prompt token at, so an endpoint whose fit puts a prompt queued ahead
// at no cost to the next (PerAhead zero) does not make the queue free.
func TestQueuedPrefillPricedAtThePoolsCompute(t *testing.T) {
	const perToken = 100e-6 // two endpoints: 20,000 prefill tokens a second
	busy := pool.State{Cost: pool.Cost{Base: 0.020, PerToken: perToken, PerAhead: perToken},
		Decode: pool.Decode{Step: 0.010, PerPrefillToken: perToken}}
	busy.Own.Pending = PendingPerEndpoint
	for _, tc := range []struct {
		name     string
		owed     int64 // each endpoint's
		perAhead float64
		refused  bool
	}{
		{"8 s of prefill owed", 80_000, perToken, false},
		{"12 s of prefill owed", 120_000, perToken, true},
		{"12 s owed, a queued prompt costing the next nothing", 120_000, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h, _ := admissionRouter(t, nil)
				a, b := busy, busy
				a.Own.Owed, b.Own.Owed = tc.owed, tc.owed
				a.PerAhead = tc.perAhead
				h.states["main"] = []pool.State{a, b}
				s := arrive(h, "sheddable", "m", Sheddable, "", 1000)
				defer leave(s)
				if !tc.refused {
					if s.decided() {
						t.Fatalf("decided at once: %v; want it to wait", s.err)
					}
					return
				}
				if !s.decided() {
					t.Fatal("waits; want refused at once, its SLO of 10 s out of reach")
				}
				overloadedErr(t, s.err, codeUnreachable)
			})
		})
	}
}
