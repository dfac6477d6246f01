package app

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
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

// TestGatewaysShareThePrefixIndex: two gateways on one Redis, in front of
// the same replicas. A prompt sent through one is known to the other: the
// other predicts a cached prefix for it, never having seen it, and the
// replica it picks confirms the prefix was cached, under the salt both
// made for the prompt's domain.
func TestGatewaysShareThePrefixIndex(t *testing.T) {
	redisURL := os.Getenv("LLMGW_TEST_REDIS")
	if redisURL == "" {
		t.Skip("LLMGW_TEST_REDIS is not set (e.g. redis://127.0.0.1:6379/0); skipping Redis tests")
	}
	ctx := t.Context()
	replicas, err := sim.StartReplicas(ctx, sim.Config{Model: "sim", FixedTiming: true, TTFT: 5 * time.Millisecond, TPOT: time.Millisecond}, 2, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var upstreams []string
	for _, r := range replicas {
		t.Cleanup(r.Close)
		upstreams = append(upstreams, r.URL())
	}
	// Gateways in front of the same replicas share the cache secret, as
	// those on one store do.
	var gws [2]*InProcess
	for i := range gws {
		g, err := StartGateway(ctx, GatewayOptions{Model: "sim", Kind: catalog.KindVLLM, Upstreams: upstreams, Redis: redisURL,
			CacheSecret: "one secret for both gateways"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { g.Close() })
		gws[i] = g
	}
	prompt := strings.Repeat("The same long system prompt, word after word. ", 200)
	body := fmt.Sprintf(`{"model":"sim","max_tokens":4,"messages":[{"role":"system","content":%q},{"role":"user","content":"hi"}]}`, prompt)
	post := func(g *InProcess) (cached int64) {
		t.Helper()
		resp, err := http.Post(g.URL()+"/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var answer struct {
			Usage struct {
				Details struct {
					Cached int64 `json:"cached_tokens"`
				} `json:"prompt_tokens_details"`
			} `json:"usage"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&answer); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d, decoding: %v", resp.StatusCode, err)
		}
		return answer.Usage.Details.Cached
	}
	// Publish/subscribe keeps nothing for a gateway not yet subscribed:
	// send until the second gateway has the first one's placement.
	deadline := time.Now().Add(10 * time.Second)
	for {
		post(gws[0])
		if n, _ := gws[1].CounterSum("llmgw_prefix_placements_total", "outcome", "received"); n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the second gateway never received a placement")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if cached := post(gws[1]); cached == 0 {
		t.Error("the second gateway sent the prompt where none of it was cached")
	}
	if n, _ := gws[1].CounterSum("llmgw_prefix_predicted_hits_total", "", ""); n == 0 {
		t.Error("the second gateway predicted no cached prefix for a prompt the first had sent")
	}
}

// TestFailedStartClosesWhatItOpened: a gateway that cannot take its API
// port fails with the listener's error, having closed its store and the
// listeners it had opened, and does not panic.
func TestFailedStartClosesWhatItOpened(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	cfg := upstreamConfig("sim", catalog.KindOpenAI, []string{"http://127.0.0.1:9/v1"})
	cfg.Server.Listen, cfg.Server.AdminListen = taken.Addr().String(), "127.0.0.1:0"
	g, err := newGateway(t.Context(), cfg, "", slog.New(slog.DiscardHandler))
	if err == nil {
		g.close()
		t.Fatal("the gateway started on a port already taken")
	}
	if !strings.HasPrefix(err.Error(), "API listener: ") {
		t.Errorf("error %q; want the API listener's", err)
	}
}

// TestSpoolDirIsOneGateways: a second gateway on a spool directory another
// holds fails to start, naming the setting, rather than replay the first
// one's journal while it is written; once the first has closed, it starts.
func TestSpoolDirIsOneGateways(t *testing.T) {
	dir := t.TempDir()
	cfg := upstreamConfig("sim", catalog.KindOpenAI, []string{"http://127.0.0.1:9/v1"})
	cfg.Server.Listen, cfg.Server.AdminListen = "127.0.0.1:0", "127.0.0.1:0"
	cfg.Store.URL, cfg.Store.SpoolDir = "sqlite:"+filepath.Join(dir, "llmgw.db"), filepath.Join(dir, "spool")
	first, err := newGateway(t.Context(), cfg, "", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	second, err := newGateway(t.Context(), cfg, "", slog.New(slog.DiscardHandler))
	if err == nil {
		second.close()
		first.close()
		t.Fatal("a second gateway started on a spool directory the first holds")
	}
	if !strings.Contains(err.Error(), "store.spool_dir") {
		t.Errorf("error %q; want one naming store.spool_dir", err)
	}
	first.close()
	again, err := newGateway(t.Context(), cfg, "", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("a gateway on the spool directory once the first closed: %v", err)
	}
	again.close()
}
