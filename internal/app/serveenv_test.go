package app

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gitea.mynodes.xyz/ilker/llmgw/internal/config"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/keys"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/store"
	"gitea.mynodes.xyz/ilker/llmgw/internal/sim"
)

// serveInProcess runs `llmgw serve args...` in this process until the test
// ends, and returns its API and admin URLs.
func serveInProcess(t *testing.T, args ...string) (api, admin string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- ServeCommand(ctx, args, pw, io.Discard)
		pw.Close()
	}()
	t.Cleanup(func() { cancel(); <-done })
	found := listenerURLs(pr)
	select {
	case u := <-found:
		return u[0], u[1]
	case err := <-done:
		t.Fatalf("serve ended before it served: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not start")
	}
	return "", ""
}

// TestServeTakesURLsFromTheEnvironment: LLMGW_STORE_URL and LLMGW_REDIS_URL
// take the place of the file's store.url and limits.redis, as a Kubernetes
// Secret gives them.
func TestServeTakesURLsFromTheEnvironment(t *testing.T) {
	ctx := t.Context()
	rep, err := sim.Start(ctx, sim.Config{Model: "chat", FixedTiming: true}, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rep.Close)
	dir := t.TempDir()
	fileStore := filepath.Join(dir, "file.db")
	envStore := "sqlite:" + filepath.Join(dir, "env.db")
	path := filepath.Join(dir, "llmgw.yaml")
	if err := os.WriteFile(path, []byte(keyedConfig(rep.URL(), "sqlite:"+fileStore, "")), 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(ctx, envStore)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	key, _, err := keys.Create(ctx, st, keys.Spec{Tenant: "env/team"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(config.EnvStoreURL, envStore)
	// Nothing listens on port 1: the gateway warns, and serves with limits
	// in Redis failing open.
	t.Setenv(config.EnvRedisURL, "redis://127.0.0.1:1/0")
	api, admin := serveInProcess(t, "--config", path)

	if code, _ := chat(t, api, key); code != http.StatusOK {
		t.Errorf("a key made in LLMGW_STORE_URL's store: status %d, want 200", code)
	}
	if _, err := os.Stat(fileStore); err == nil {
		t.Errorf("the file's store %s was opened", fileStore)
	}
	if m := scrape(t, admin); !strings.Contains(m, "llmgw_limits_settle_dropped_total") {
		t.Errorf("no Redis limiter's metrics with LLMGW_REDIS_URL set:\n%s", firstLines(m, 5))
	}
}

// firstLines is the first n lines of s.
func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	return strings.Join(lines[:min(n, len(lines))], "\n")
}
