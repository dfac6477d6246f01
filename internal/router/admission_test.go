package router

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"gitea.mynodes.xyz/ilker/llmgw/internal/config"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/admission"
)

// admissionRouter is a router whose pool "main" of one endpoint (never
// called) serves models "m" and "fast", both with admission: m's TTFT SLO
// is 10 s, fast's 2 s. mutate may change the models.
func admissionRouter(t *testing.T, mutate func(ms []catalog.Model)) (*Router, *prometheus.Registry) {
	t.Helper()
	adm := catalog.Admission{Enabled: true, Queue: 8}
	ms := []catalog.Model{
		{Name: "m", Pool: "main", SLO: catalog.SLO{TTFTp99: 10 * time.Second}, Admission: adm},
		{Name: "fast", Pool: "main", SLO: catalog.SLO{TTFTp99: 2 * time.Second}, Admission: adm},
	}
	if mutate != nil {
		mutate(ms)
	}
	cat, err := catalog.New([]catalog.Pool{{Name: "main", Endpoints: []catalog.Endpoint{{URL: "http://127.0.0.1:1/v1"}}}}, ms)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	r, err := New(Options{Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	r.SetCatalog(cat)
	t.Cleanup(r.Close)
	return r, reg
}

// arrival is one request at the gate and what came of it.
type arrival struct {
	name   string
	ticket *admission.Ticket
	err    error
	done   chan struct{}
	cancel context.CancelFunc
}

// arrive sends a request for model of class c from tenant (no key when
// empty) with a prompt of tokens to the gate, and waits until it is
// decided or blocked.
func arrive(r *Router, name, model string, c admission.Class, tenantPath string, tokens int64) *arrival {
	s := r.snap.Load()
	m, _ := s.cat.Resolve(model)
	req := &parsedRequest{model: m, class: c, estimate: tokens, tenant: tenantPath}
	ctx, cancel := context.WithCancel(context.Background())
	a := &arrival{name: name, done: make(chan struct{}), cancel: cancel}
	go func() {
		defer close(a.done)
		a.ticket, a.err = admitSLO(ctx, r.gates, req, s)
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

// fillWith admits n requests for model.
func fillWith(t *testing.T, r *Router, model string, n int) []*admission.Ticket {
	t.Helper()
	var ts []*admission.Ticket
	for range n {
		a := arrive(r, "fill", model, admission.Standard, "", 10)
		if !a.decided() || a.err != nil || a.ticket == nil {
			t.Fatalf("filling request for %s not admitted at once: %v", model, a.err)
		}
		ts = append(ts, a.ticket)
	}
	return ts
}

// heldUpstream streams an answer only once release is closed, and says on
// arrived when each request comes in.
type heldUpstream struct {
	arrived chan struct{}
	release chan struct{}
	up      upstream
}

func (h *heldUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.arrived <- struct{}{}
	<-h.release
	h.up.ServeHTTP(w, r)
}

// TestAdmissionEndToEnd overloads a pool of one slow endpoint through the
// router: a sheddable request is refused at once with 429, a critical one
// waits and is served when the endpoint frees up.
func TestAdmissionEndToEnd(t *testing.T) {
	up := &heldUpstream{arrived: make(chan struct{}, 16), release: make(chan struct{}), up: upstream{tokens: 3}}
	g := newTestGateway(t, func(c *config.Config) {
		c.Models[0].Admission = catalog.Admission{Enabled: true,
			Classes: map[string]catalog.SLO{"sheddable": {TTFTp99: 50 * time.Millisecond}}}
	}, up)
	// About 105 prompt tokens: an idle endpoint's first token is 20 ms
	// and 10.5 ms by the prior cost model, within sheddable's 50 ms; with
	// four such prompts ahead it is 70 ms, past it.
	body := `{"model":"m","stream":true,"messages":[{"role":"user","content":"` + strings.Repeat("x", 360) + `"}]}`
	send := func(class string) (*http.Response, string) {
		req, _ := http.NewRequest(http.MethodPost, g.url+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("x-llmgw-priority", class)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
			return nil, ""
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	codes := make(chan int, admission.PendingPerEndpoint)
	for range admission.PendingPerEndpoint {
		go func() {
			resp, _ := send("standard")
			codes <- resp.StatusCode
		}()
	}
	for range admission.PendingPerEndpoint {
		<-up.arrived
	}

	resp, b := send("sheddable")
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("sheddable under overload: %d, Retry-After %q; want 429 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	var e struct {
		Error struct {
			Message string
			Type    string
			Param   *string
			Code    string
		}
	}
	if err := json.Unmarshal([]byte(b), &e); err != nil || e.Error.Type != "overloaded" || e.Error.Code != "slo_unreachable" || e.Error.Message == "" {
		t.Errorf("refusal body %s; want an overloaded error with code %s", b, "slo_unreachable")
	}

	critical := make(chan int, 1)
	go func() {
		resp, _ := send("critical")
		critical <- resp.StatusCode
	}()
	for queued := false; !queued; {
		depth, _ := gaugeValue(t, g.reg, "llmgw_queue_depth", "class", "critical")
		queued = depth == 1
		time.Sleep(time.Millisecond)
	}
	close(up.release) // the endpoint's first tokens wake the queue
	if code := <-critical; code != http.StatusOK {
		t.Errorf("critical: %d, want 200", code)
	}
	for range admission.PendingPerEndpoint {
		if code := <-codes; code != http.StatusOK {
			t.Errorf("standard: %d, want 200", code)
		}
	}
	for _, c := range []struct {
		class, decision string
		want            float64
	}{
		{"standard", "admitted", 4},
		{"sheddable", "rejected", 1},
		{"critical", "queued", 1},
		{"critical", "admitted", 1},
	} {
		if got := decisions(t, g.reg, "m", c.class, c.decision); got != c.want {
			t.Errorf("llmgw_admission_total{class=%q,decision=%q} = %v, want %v", c.class, c.decision, got, c.want)
		}
	}
	// The other classes' goodput depends on how fast this machine is; a
	// refusal is a miss whatever the speed.
	if got, ok := gaugeValue(t, g.reg, "llmgw_goodput_ratio", "class", "sheddable"); !ok || got != 0 {
		t.Errorf("sheddable goodput = %v (found %v), want 0", got, ok)
	}
}

// gaugeValue is the value of the gauge named name whose label has value.
func gaugeValue(t *testing.T, reg *prometheus.Registry, name, label, value string) (float64, bool) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					return m.GetGauge().GetValue(), true
				}
			}
		}
	}
	return 0, false
}

// TestAdmissionFollowsReload turns a model's admission off and on by
// swapping catalogs: the gate is passed only while it is on.
func TestAdmissionFollowsReload(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, reg := admissionRouter(t, nil)
		swap := func(on bool) {
			c := r.Catalog()
			ms := append([]catalog.Model(nil), c.Models()...)
			ms[0].Admission.Enabled = on
			cat, err := catalog.New(c.Pools(), ms)
			if err != nil {
				t.Fatal(err)
			}
			r.SetCatalog(cat)
		}
		admitted := func() float64 {
			return decisions(t, reg, "m", "standard", "admitted")
		}
		swap(false)
		if a := arrive(r, "off", "m", admission.Standard, "", 10); a.err != nil || a.ticket != nil || admitted() != 0 {
			t.Fatalf("admission off: ticket %v, err %v, admitted %v; want the gate skipped", a.ticket, a.err, admitted())
		}
		swap(true)
		if a := arrive(r, "on", "m", admission.Standard, "", 10); a.err != nil || a.ticket == nil || admitted() != 1 {
			t.Fatalf("admission on: ticket %v, err %v, admitted %v; want through the gate", a.ticket, a.err, admitted())
		}
	})
}

// decisions is llmgw_admission_total for model, class and decision in
// reg; zero when it has none.
func decisions(t *testing.T, reg *prometheus.Registry, model, class, decision string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"model": model, "class": class, "decision": decision}
	for _, mf := range mfs {
		if mf.GetName() != "llmgw_admission_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			match := 0
			for _, l := range m.GetLabel() {
				if want[l.GetName()] == l.GetValue() {
					match++
				}
			}
			if match == len(want) {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// TestSLOPressure: a model's pressure is its recent p99 as a share of its
// SLO, the larger of the two kinds, known by name or alias; 0 with too
// few samples and for a name the catalog does not know.
func TestSLOPressure(t *testing.T) {
	g := newTestGateway(t, nil, &upstream{})
	if p := g.r.snap.Load().sloPressure(&g.r.slo, "m"); p != 0 {
		t.Errorf("pressure with no samples = %v, want 0", p)
	}
	// TTFT p99 at its SLO (500 ms), TPOT at twice its SLO (50 ms).
	for range 100 { // enough recent samples for a p99
		g.r.slo.Add("m", 500*time.Millisecond, 100*time.Millisecond)
	}
	if p := g.r.snap.Load().sloPressure(&g.r.slo, "a"); p != 2 {
		t.Errorf("pressure = %v, want 2 (TPOT at twice its SLO, asked by alias)", p)
	}
	if p := g.r.snap.Load().sloPressure(&g.r.slo, "nope"); p != 0 {
		t.Errorf("pressure of an unknown model = %v, want 0", p)
	}
}
