package app

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/audit"
	"gitea.mynodes.xyz/ilker/llmgw/internal/sim"
)

const reloadConfig = `
server: {listen: "127.0.0.1:0", admin_listen: "127.0.0.1:0"}
router: {auth: none}
store: {url: "memory:"}
pools:
  - name: sim
    endpoints: [{url: %q}]
models:
%s`

func writeReloadConfig(t *testing.T, path, upstream, models string) {
	t.Helper()
	// Write then rename, as editors and config managers do, so that the
	// watcher never reads half a file.
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, fmt.Appendf(nil, reloadConfig, upstream, models), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func TestReload(t *testing.T) {
	ctx := t.Context()
	rep, err := sim.Start(ctx, sim.Config{Model: "a", FixedTiming: true}, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer rep.Close()
	path := filepath.Join(t.TempDir(), "llmgw.yaml")
	writeReloadConfig(t, path, rep.URL(), `  - {name: a, pool: sim, slo: {tpot_p99: 50ms}}`)
	g, logs := startFile(t, path, nil)
	models := func() string { return gatewayModels(t, g) }

	// A file that does not validate is refused; the old catalog serves on.
	writeReloadConfig(t, path, rep.URL(), `  - {name: a, pool: sim, slo: {tpot_p99: -1s}}`)
	if err := g.reload(); err == nil || !strings.Contains(err.Error(), "models[0].slo.tpot_p99: must be positive") {
		t.Errorf("reload of a bad file: %v", err)
	}
	if got := gaugeValue(t, g, "llmgw_config_last_reload_successful"); got != 0 {
		t.Errorf("last reload successful = %v after a refused reload", got)
	}
	if m := models(); !strings.Contains(m, `"id":"a"`) {
		t.Errorf("models after a refused reload: %s", m)
	}
	if !strings.Contains(logs.String(), "configuration reload refused") {
		t.Errorf("no log line for the refused reload:\n%s", logs.String())
	}
	// The console's Config page shows the refusal and why.
	if r := (consoleView{g}).LastReload(); r.File != path || r.At.IsZero() || !strings.Contains(r.Err, "models[0].slo.tpot_p99: must be positive") {
		t.Errorf("the console's last reload after a refused one: %+v", r)
	}

	// A good file is swapped in by the file watcher alone. Run starts the
	// watcher in its own goroutine, so the file is written again each
	// half second until a write lands after the watch began.
	deadline := time.Now().Add(10 * time.Second)
	var written time.Time
	for ; !strings.Contains(models(), `"id":"b"`); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the watcher did not reload a changed file")
		}
		if time.Since(written) > 500*time.Millisecond {
			writeReloadConfig(t, path, rep.URL(), `  - {name: a, pool: sim}
  - {name: b, pool: sim}`)
			written = time.Now()
		}
	}
	if got := gaugeValue(t, g, "llmgw_config_last_reload_successful"); got != 1 {
		t.Errorf("last reload successful = %v after a good reload", got)
	}
	if r := (consoleView{g}).LastReload(); r.Err != "" || r.At.IsZero() {
		t.Errorf("the console's last reload after a good one: %+v", r)
	}
	if c := (consoleView{g}).Catalog(); c == nil || len(c.Models()) != 2 {
		t.Errorf("the console's catalog after the reload is not the new one")
	}
	// The audit trail has both, the refusal with why.
	trail, err := g.store.Audit(ctx, audit.Query{Until: time.Now().Add(time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	var refused, reloaded bool
	for _, e := range trail {
		refused = refused || e.Action == audit.ConfigRefused && e.Target == path && e.Subject == "llmgw" && strings.Contains(e.Detail, "tpot_p99: must be positive")
		reloaded = reloaded || e.Action == audit.ConfigReload && e.Target == path
	}
	if !refused || !reloaded {
		t.Errorf("the audit trail after a refused and an accepted reload: %+v", trail)
	}
	// The model lost its SLO in the new file, so it is no longer reported.
	if n, err := testutil.GatherAndCount(g.reg, "llmgw_model_slo_seconds"); err != nil || n != 0 {
		t.Errorf("%d SLO series after the SLO was removed (%v)", n, err)
	}
}

// gaugeValue reads an unlabelled gauge from the gateway's registry.
func gaugeValue(t *testing.T, g *Gateway, name string) float64 {
	t.Helper()
	mfs, err := g.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// syncWriter lets goroutines share one writer.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

func (s *syncWriter) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return fmt.Sprint(s.w)
}
