package router

import (
	"testing"
	"time"

	"gitea.mynodes.xyz/ilker/llmgw/internal/config"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/status"
)

// TestStatus reads the router's status after real requests: the model's
// rate and p99s, and each endpoint's health, load and first-token times.
func TestStatus(t *testing.T) {
	up := &upstream{tokens: 3}
	g := newTestGateway(t, nil, up)
	const n = 25 // past sloMinSamples, so the p99s are believed
	for range n {
		if resp, body := g.post(t, "/v1/chat/completions", `{"model":"m","stream":true,"messages":[]}`); resp.StatusCode != 200 {
			t.Fatalf("%d %s", resp.StatusCode, body)
		}
	}
	st := g.r.Status(time.Now().Add(time.Second))
	if len(st.Models) != 1 || len(st.Pools) != 2 {
		t.Fatalf("status has %d models and %d pools, want 1 and 2: %+v", len(st.Models), len(st.Pools), st)
	}
	m := st.Models[0]
	if m.Name != "m" || m.Pool != "main" || m.RequestsPerSecond != float64(n)/status.RateWindow.Seconds() || m.ErrorRate != 0 {
		t.Errorf("model status %+v; want m on main at %v/s, no errors", m, float64(n)/status.RateWindow.Seconds())
	}
	if m.TTFTp99 <= 0 || m.TPOTp99 <= 0 || m.Samples != n || m.SLO.TTFTp99 != 500*time.Millisecond {
		t.Errorf("model status p99s %v %v from %d samples, SLO %+v; want both measured from %d", m.TTFTp99, m.TPOTp99, m.Samples, m.SLO, n)
	}
	p := st.Pools[0]
	if p.Name != "main" || len(p.Endpoints) != 1 {
		t.Fatalf("pool status %+v", p)
	}
	e := p.Endpoints[0]
	if e.Down || e.EjectedFor != 0 || e.Own.Inflight != 0 || e.MeasuredTTFT <= 0 || e.PredictedTTFT <= 0 || e.PrefixHits != 1 {
		t.Errorf("endpoint status %+v; want up, idle, with both first-token times", e)
	}
}

// TestStatusAdmission: a model with admission shows its goodput by class
// and its queue.
func TestStatusAdmission(t *testing.T) {
	g := newTestGateway(t, func(c *config.Config) {
		c.Models[0].SLO = catalog.SLO{TTFTp99: 5 * time.Second}
		c.Models[0].Admission.Enabled = true
	}, &upstream{tokens: 3})
	for range 3 {
		if resp, body := g.post(t, "/v1/chat/completions", `{"model":"m","stream":true,"messages":[]}`); resp.StatusCode != 200 {
			t.Fatalf("%d %s", resp.StatusCode, body)
		}
	}
	m := g.r.Status(time.Now()).Models[0]
	if !m.Admission || m.Queued != 0 || len(m.Goodput) != 1 || m.Goodput["standard"] != 1 {
		t.Errorf("model status %+v; want admission on, nothing queued, every standard request good", m)
	}
}

// TestStatusShowsAFailingEndpoint: a model whose one endpoint fails shows
// its errors, and the endpoint its ejection.
func TestStatusShowsAFailingEndpoint(t *testing.T) {
	g := newTestGateway(t, nil, &upstream{status: 500})
	if resp, _ := g.post(t, "/v1/chat/completions", `{"model":"m","messages":[]}`); resp.StatusCode < 500 {
		t.Fatalf("status %d, want a failure", resp.StatusCode)
	}
	if m := g.r.Status(time.Now().Add(time.Second)).Models[0]; m.ErrorRate != 1 || m.RequestsPerSecond != 1/status.RateWindow.Seconds() {
		t.Errorf("model status %+v; want every request an error", m)
	}
	e := g.r.Status(time.Now()).Pools[0].Endpoints[0]
	if e.EjectedFor <= 0 || e.Ejections != 1 {
		t.Errorf("endpoint status %+v; want ejected once", e)
	}
}
