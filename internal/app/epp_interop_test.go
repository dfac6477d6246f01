package app

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"gitea.mynodes.xyz/ilker/llmgw/internal/config"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
)

// TestInteropLLMD drives llm-d's EPP with llmgw's epp pool. It runs under
// scripts/epp-interop.sh, which builds llm-d's EPP from a local checkout,
// starts it with file discovery in front of simulated replicas, and sets
// LLMGW_EPP_INTEROP (the EPP's address), LLMGW_EPP_INTEROP_UPSTREAMS (the
// replicas' base URLs, comma-separated) and LLMGW_EPP_INTEROP_PHASE: "up"
// while the EPP runs, "down" once the script has stopped it. Without
// them it is skipped.
func TestInteropLLMD(t *testing.T) {
	addr, ups, phase := os.Getenv("LLMGW_EPP_INTEROP"), os.Getenv("LLMGW_EPP_INTEROP_UPSTREAMS"), os.Getenv("LLMGW_EPP_INTEROP_PHASE")
	if addr == "" || ups == "" {
		t.Skip("llm-d's EPP is not running: see scripts/epp-interop.sh")
	}
	modes := map[string]int{catalog.FailClose: http.StatusOK}
	if phase == "down" {
		modes = map[string]int{catalog.FailClose: http.StatusServiceUnavailable, catalog.FailOpen: http.StatusOK}
	}
	for mode, want := range modes {
		t.Run(phase+"/"+mode, func(t *testing.T) {
			g, stop := interopGateway(t, addr, strings.Split(ups, ","), mode)
			defer stop()
			const n = 20
			for k := range n {
				body := `{"model":"sim-8b","max_tokens":8,"stream":` + map[bool]string{true: "true", false: "false"}[k%2 == 0] + `,"messages":[{"role":"user","content":"interop ` + strings.Repeat("x", k) + `"}]}`
				resp, err := http.Post(g.URL()+"/chat/completions", "application/json", strings.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != want {
					t.Fatalf("request %d: %d (%s), want %d", k, resp.StatusCode, b, want)
				}
			}
			epp, _ := interopSum(g, "llmgw_route_decisions_total", "reason", "epp")
			retries, _ := interopSum(g, "llmgw_retries_total", "", "")
			switch {
			case phase != "down" && (epp != n || retries != 0):
				t.Errorf("%v of %d requests went where the EPP said, with %v retries; want all, none", epp, n, retries)
			case phase == "down" && epp != 0:
				t.Errorf("%v requests went where a stopped EPP said", epp)
			}
		})
	}
}

// interopGateway is a gateway whose pool of ups asks the EPP at addr.
func interopGateway(t *testing.T, addr string, ups []string, mode string) (*Gateway, func()) {
	t.Helper()
	cfg := upstreamConfig("sim-8b", catalog.KindVLLM, ups)
	cfg.Server.Listen, cfg.Server.AdminListen = "127.0.0.1:0", "127.0.0.1:0"
	cfg.Pools[0].Policy = catalog.PolicyEPP
	cfg.Pools[0].EPP = catalog.EPP{Address: addr, FailureMode: mode, Timeout: 2 * time.Second}
	config.PoolDefaults(&cfg.Pools[0])
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	g, err := newGateway(t.Context(), cfg, "", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- g.Run(ctx) }()
	return g, func() { cancel(); <-ran }
}

// interopSum sums the counters of family name in g's registry whose label
// k is v (every series when k is empty).
func interopSum(g *Gateway, name, k, v string) (float64, error) {
	fams, err := g.reg.Gather()
	if err != nil {
		return 0, err
	}
	sum := 0.0
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			match := k == ""
			for _, l := range m.GetLabel() {
				match = match || l.GetName() == k && l.GetValue() == v
			}
			if match {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum, nil
}
