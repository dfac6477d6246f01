package app

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"gitea.mynodes.xyz/ilker/llmgw/internal/sim"
)

// TestInProcessAdmission starts the in-process gateway with admission on,
// as `llmgw bench --spawn-sim N --admission on` does: the model's requests
// pass its gate, and the admission metrics say so.
func TestInProcessAdmission(t *testing.T) {
	ctx := t.Context()
	replicas, err := sim.StartReplicas(ctx, sim.Config{Model: "sim", FixedTiming: true, TTFT: 5 * time.Millisecond, TPOT: time.Millisecond}, 1, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(replicas[0].Close)
	g, err := StartGateway(ctx, GatewayOptions{Model: "sim", Upstreams: []string{replicas[0].URL()}, Admission: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	if m, ok := g.router.Catalog().Resolve("sim"); !ok || !m.Admission.Enabled || m.ClassSLO("critical").TTFTp99 <= 0 {
		t.Fatalf("model %+v: want admission on with class SLOs", m)
	}
	req, _ := http.NewRequest(http.MethodPost, g.URL()+"/chat/completions",
		strings.NewReader(`{"model":"sim","stream":true,"max_tokens":4,"messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("x-llmgw-priority", "sheddable")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d, want 200", resp.StatusCode)
	}
	metrics, err := http.Get(g.AdminURL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(metrics.Body)
	metrics.Body.Close()
	want := `llmgw_admission_total{class="sheddable",decision="admitted",model="sim"} 1`
	if !strings.Contains(string(b), want) {
		t.Errorf("metrics lack %s", want)
	}
}
