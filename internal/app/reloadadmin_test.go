package app

// Reloading what takes effect at start: the admin token rotates, and
// every other field a reload does not apply is named, its value in
// service kept.

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gitea.mynodes.xyz/ilker/llmgw/internal/config"
)

// startFile runs a gateway from the configuration file at path until the
// test ends, with whatever serve would set over it applied by override
// (nil for nothing), and returns it with its logs.
func startFile(t *testing.T, path string, override func(*config.Config)) (*Gateway, *syncWriter) {
	t.Helper()
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if override != nil {
		override(cfg)
	}
	logs := &syncWriter{w: new(strings.Builder)}
	g, err := newGateway(t.Context(), cfg, path, slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	g.overrides = override
	done := make(chan error, 1)
	go func() { done <- g.Run(t.Context()) }()
	t.Cleanup(func() { <-done })
	return g, logs
}

// adminFile writes a configuration of one model on a pool nobody answers,
// with the admin token and profiles given, and extra YAML after it.
func adminFile(t *testing.T, path, token string, pprof bool, model, extra string) {
	t.Helper()
	yaml := fmt.Sprintf(`server: {listen: "127.0.0.1:0", admin_listen: "127.0.0.1:0"}
router: {auth: none}
store: {url: "memory:"}
admin: {token: %q, pprof: %t}
pools:
  - name: p
    endpoints: [{url: "http://127.0.0.1:1/v1"}]
models:
  - {name: %s, pool: p}
%s`, token, pprof, model, extra)
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestAdminTokenRotatesOnReload: a reload with another admin token puts it
// in service on /admin, /debug and the console, refuses the old one, and
// ends the console sessions signed in with it; a reload that gives no
// token keeps the one in service and says so.
func TestAdminTokenRotatesOnReload(t *testing.T) {
	t.Setenv(envAdminToken, "")
	const oldToken, newToken = "the-old-admin-token", "the-new-admin-token"
	path := filepath.Join(t.TempDir(), "llmgw.yaml")
	adminFile(t, path, oldToken, true, "a", "")
	g, logs := startFile(t, path, nil)
	c := adminClient(t, "127.0.0.1")
	if status, _ := tryToken(t, c, g, "/ui/login", oldToken); status != http.StatusSeeOther {
		t.Fatalf("signing in with the token in service: %d", status)
	}
	overview := func() int {
		resp, err := c.Get(g.AdminURL() + "/ui/overview")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := overview(); got != http.StatusOK {
		t.Fatalf("the console signed in: %d", got)
	}

	adminFile(t, path, newToken, true, "a", "")
	if err := g.reload(); err != nil {
		t.Fatal(err)
	}
	if got := overview(); got != http.StatusSeeOther {
		t.Errorf("the old token's console session after the reload: %d, want the sign-in page", got)
	}
	for _, p := range []string{"/admin/keys", "/debug/pprof/", "/ui/login"} {
		if status, _ := tryToken(t, c, g, p, oldToken); status != http.StatusUnauthorized {
			t.Errorf("the old token on %s after the reload: %d, want 401", p, status)
		}
		if status, _ := tryToken(t, c, g, p, newToken); status != rightTokenStatus(p) {
			t.Errorf("the new token on %s after the reload: %d, want %d", p, status, rightTokenStatus(p))
		}
	}
	if !strings.Contains(logs.String(), "the admin token changed") || strings.Contains(logs.String(), newToken) {
		t.Errorf("the log does not say the token changed, or holds it:\n%s", logs)
	}

	adminFile(t, path, "", true, "a", "")
	if err := g.reload(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "gives no admin token") {
		t.Errorf("a reload with no token does not say the one in service is kept:\n%s", logs)
	}
	if status, _ := tryToken(t, c, g, "/admin/keys", newToken); status != http.StatusOK {
		t.Errorf("the token in service after a reload that gives none: %d, want 200", status)
	}
}

// TestReloadNamesFieldsThatNeedARestart: a reload names, in a warning and
// on the console's Config page, every changed field it leaves for a
// restart, and keeps its value in service; what it applies, it applies.
func TestReloadNamesFieldsThatNeedARestart(t *testing.T) {
	t.Setenv(envAdminToken, "")
	path := filepath.Join(t.TempDir(), "llmgw.yaml")
	adminFile(t, path, adminTestToken, false, "a", "")
	g, logs := startFile(t, path, nil)

	adminFile(t, path, adminTestToken, true, "b", `limits: {on_redis_error: closed}
telemetry: {access_log: stdout}
`)
	if err := g.reload(); err != nil {
		t.Fatal(err)
	}
	want := []string{"limits.on_redis_error", "admin.pprof", "telemetry.access_log"}
	var warning string
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "level=WARN") && strings.Contains(l, "needs_restart=") {
			warning = l
		}
	}
	if !strings.Contains(warning, `needs_restart="`+strings.Join(want, ", ")+`"`) {
		t.Errorf("the reload's warning %q does not name %q; logs:\n%s", warning, want, logs)
	}
	if got := (consoleView{g}).LastReload().NeedRestart; !slices.Equal(got, want) {
		t.Errorf("the console's last reload names %q, want %q", got, want)
	}
	if m := gatewayModels(t, g); !strings.Contains(m, `"id":"b"`) {
		t.Errorf("the catalog was not reloaded: %s", m)
	}
	if status, _ := tryToken(t, adminClient(t, "127.0.0.1"), g, "/debug/pprof/", adminTestToken); status != http.StatusNotFound {
		t.Errorf("admin.pprof turned on by a reload: /debug/pprof/ answers %d, want 404 until a restart", status)
	}

	// Back to the values in service: nothing is left for a restart.
	adminFile(t, path, adminTestToken, false, "c", "")
	if err := g.reload(); err != nil {
		t.Fatal(err)
	}
	if got := (consoleView{g}).LastReload().NeedRestart; len(got) != 0 {
		t.Errorf("a reload back to the values in service names %q", got)
	}
}

// TestReloadKeepsServeOverrides: what serve set over the file at start,
// from the environment and flags, is set over each reload's file too, so
// that a reload neither warns of it nor loses it.
func TestReloadKeepsServeOverrides(t *testing.T) {
	path := filepath.Join(t.TempDir(), "llmgw.yaml")
	adminFile(t, path, adminTestToken, false, "a", "")
	g, logs := startFile(t, path, func(c *config.Config) { c.Server.HTTP = config.HTTPNetHTTP })
	if err := g.reload(); err != nil {
		t.Fatal(err)
	}
	if got := (consoleView{g}).LastReload().NeedRestart; len(got) != 0 || strings.Contains(logs.String(), "needs_restart") {
		t.Errorf("a reload of the same file under serve's overrides names %q:\n%s", got, logs)
	}
}

// gatewayModels is g's /v1/models answer.
func gatewayModels(t *testing.T, g *Gateway) string {
	t.Helper()
	_, b := get(t, g.URL()+"/models", "")
	return string(b)
}

// TestConsoleShowsReloadedTenants: the console's tenant tree shows the
// tenant limits of the file in service, the reloaded one's in place of
// those it started with.
func TestConsoleShowsReloadedTenants(t *testing.T) {
	t.Setenv(envAdminToken, "")
	const token = "the-admin-token-of-this-test"
	path := filepath.Join(t.TempDir(), "llmgw.yaml")
	write := func(tenant string) {
		adminFile(t, path, token, false, "a", "tenants: [{path: "+tenant+", rpm: 7}]")
		yaml, _ := os.ReadFile(path)
		os.WriteFile(path, []byte(strings.Replace(string(yaml), "auth: none", "auth: keys", 1)), 0o600)
	}
	write("initech")
	g, _ := startFile(t, path, nil)
	c := adminClient(t, "127.0.0.1")
	if status, _ := tryToken(t, c, g, "/ui/login", token); status != http.StatusSeeOther {
		t.Fatalf("signing in: %d", status)
	}
	keysPage := func() string {
		resp, err := c.Get(g.AdminURL() + "/ui/keys")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	if page := keysPage(); !strings.Contains(page, "initech") {
		t.Fatalf("the keys page does not show the file's tenant initech:\n%s", page)
	}
	write("globex")
	if err := g.reload(); err != nil {
		t.Fatal(err)
	}
	if page := keysPage(); !strings.Contains(page, "globex") || strings.Contains(page, "initech") {
		t.Errorf("after the reload, the keys page shows globex %v and initech %v; want globex alone",
			strings.Contains(page, "globex"), strings.Contains(page, "initech"))
	}
}
