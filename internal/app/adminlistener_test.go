package app

// The admin listener over real sockets: which paths answer whom, under each
// way the admin token and profiles can be configured, and the warning when
// the listener is reachable from beyond this host.

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"gitea.mynodes.xyz/ilker/llmgw/internal/config"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/keys"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/tenant"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/usage"
)

const adminTestToken = "admin-listener-test-token"

// Data only the admin API shows: a refusal that holds any of it leaked.
const (
	leakTenant = "leakyorg/leakyteam"
	leakTokens = 987654 // the prompt tokens of the one usage record
)

// startAdminGateway runs a gateway with keys on and a store in memory
// holding a key, a tenant's limits and a usage record, its admin token
// taken from admin.token (fileToken) or LLMGW_ADMIN_TOKEN (envToken), and
// admin.pprof as given. It returns the gateway and the key's id.
func startAdminGateway(t *testing.T, fileToken, envToken string, pprof bool) (*Gateway, string) {
	t.Helper()
	t.Setenv("LLMGW_ADMIN_TOKEN", envToken)
	cfg := upstreamConfig("chat", catalog.KindOpenAI, []string{"http://127.0.0.1:1/v1"})
	cfg.Router.Auth = "keys"
	cfg.Admin = config.Admin{Token: fileToken, PProf: pprof}
	g := startConfigured(t, cfg)

	ctx, now := t.Context(), time.Now()
	_, k, err := keys.Create(ctx, g.store, keys.Spec{Tenant: leakTenant, Name: "leaky-key"}, now)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.store.SetTenantLimits(ctx, tenant.TenantLimits{Path: "leakyorg", Limits: tenant.Limits{RPM: 7}}); err != nil {
		t.Fatal(err)
	}
	rec := usage.Record{ID: "r1", Time: now.Add(-time.Minute), KeyID: k.ID, Tenant: leakTenant, Model: "chat", PromptTokens: leakTokens, Status: 200}
	if err := g.store.AddUsage(ctx, []usage.Record{rec}); err != nil {
		t.Fatal(err)
	}
	return g, k.ID
}

// adminGet sends GET path to the admin listener with the given
// Authorization header, or none when it is empty.
func adminGet(t *testing.T, g *Gateway, path, auth string) (*http.Response, []byte) {
	t.Helper()
	return get(t, g.AdminURL()+path, auth)
}

// get sends GET url with the given Authorization header, or none when it
// is empty, and reads the answer.
func get(t *testing.T, url, auth string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

// TestAdminListenerAccess sends every path to every configuration, without
// a token, with a wrong one and with the right one, and checks the status,
// that each answer holds what it should, and that no refusal holds anything
// but an OpenAI-style error.
func TestAdminListenerAccess(t *testing.T) {
	configs := []struct {
		name                string
		fileToken, envToken string
		pprof               bool
	}{
		{name: "no token, pprof off"},
		{name: "no token, pprof on", pprof: true},
		{name: "admin.token, pprof off", fileToken: adminTestToken},
		{name: "admin.token, pprof on", fileToken: adminTestToken, pprof: true},
		{name: "LLMGW_ADMIN_TOKEN, pprof on", envToken: adminTestToken, pprof: true},
	}
	auths := []struct{ name, header string }{
		{"not sent", ""},
		{"wrong", "Bearer not-the-" + adminTestToken},
		{"right", "Bearer " + adminTestToken},
	}
	// holds is what a 200 from the path contains, so that its absence
	// from a refusal means something.
	paths := []struct {
		path  string
		holds func(keyID string) string
	}{
		{"/admin/keys", func(id string) string { return id }},
		{"/admin/usage", func(string) string { return `"prompt_tokens":987654` }},
		{"/admin/tenants", func(string) string { return `"leakyorg"` }},
		{"/debug/pprof/", func(string) string { return "goroutine" }},
		{"/debug/pprof/profile?seconds=1", func(string) string { return "" }},
		{"/debug/pprof/goroutine", func(string) string { return "" }},
		{"/metrics", func(string) string { return "go_goroutines" }},
		{"/healthz", func(string) string { return "ok" }},
		{"/livez", func(string) string { return "live" }},
		{"/readyz", func(string) string { return "ready" }},
	}
	for _, c := range configs {
		t.Run(c.name, func(t *testing.T) {
			g, keyID := startAdminGateway(t, c.fileToken, c.envToken, c.pprof)
			tokenSet := c.fileToken != "" || c.envToken != ""
			leaks := []string{keyID, "leakyorg", "987654", adminTestToken, "goroutine"}
			for _, a := range auths {
				for _, p := range paths {
					want := http.StatusOK
					open := p.path == "/metrics" || p.path == "/healthz" || p.path == "/livez" || p.path == "/readyz"
					switch {
					case open:
					case !tokenSet:
						want = http.StatusForbidden
					case a.name != "right":
						want = http.StatusUnauthorized
					case strings.HasPrefix(p.path, "/debug/") && !c.pprof:
						want = http.StatusNotFound
					}
					t.Run(a.name+" "+p.path, func(t *testing.T) {
						resp, b := adminGet(t, g, p.path, a.header)
						if resp.StatusCode != want {
							t.Fatalf("status %d, want %d; body %.200q", resp.StatusCode, want, b)
						}
						if want == http.StatusOK {
							if h := p.holds(keyID); !bytes.Contains(b, []byte(h)) {
								t.Errorf("answer does not hold %q: %.300q", h, b)
							}
							return
						}
						e := onlyAnError(t, b)
						for _, l := range leaks {
							if bytes.Contains(b, []byte(l)) {
								t.Errorf("refusal holds %q: %s", l, b)
							}
						}
						gotAuth := resp.Header.Get("WWW-Authenticate")
						switch want {
						case http.StatusForbidden:
							if e.Type != "permission_error" || !strings.Contains(e.Message, "set LLMGW_ADMIN_TOKEN or admin.token") {
								t.Errorf("403 = %+v, want a permission_error saying how to set a token", e)
							}
						case http.StatusUnauthorized:
							if gotAuth != "Bearer" {
								t.Errorf("WWW-Authenticate = %q, want Bearer", gotAuth)
							}
							if e.Type != "invalid_request_error" || e.Code != "invalid_api_key" {
								t.Errorf("401 = %+v, want invalid_request_error/invalid_api_key", e)
							}
						case http.StatusNotFound:
							if !strings.Contains(e.Message, "admin.pprof") {
								t.Errorf("404 = %+v, want it to say admin.pprof turns profiles on", e)
							}
						}
						if want != http.StatusUnauthorized && gotAuth != "" {
							t.Errorf("WWW-Authenticate = %q on a %d", gotAuth, want)
						}
					})
				}
			}
		})
	}
}

// adminError is an OpenAI-style error's fields.
type adminError struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    string  `json:"code"`
}

// onlyAnError decodes b as an OpenAI-style error body and nothing more:
// any other field, or anything after it, fails the test.
func onlyAnError(t *testing.T, b []byte) adminError {
	t.Helper()
	var body struct {
		Error *adminError `json:"error"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil || body.Error == nil || body.Error.Message == "" || dec.More() {
		t.Fatalf("not only an OpenAI-style error body (%v): %.300q", err, b)
	}
	return *body.Error
}

// TestAdminListenerGuardsEveryOtherPath: the three open paths answer alone;
// any other path, and any method on a guarded one, asks for the token
// before saying whether it exists.
func TestAdminListenerGuardsEveryOtherPath(t *testing.T) {
	g, _ := startAdminGateway(t, adminTestToken, "", true)
	for _, r := range []struct {
		method, path string
		auth         bool
		want         int
	}{
		{"GET", "/", false, 401},
		{"GET", "/admin", false, 401},
		{"GET", "/debug", false, 401},
		{"GET", "/debug/vars", false, 401},
		{"GET", "/debug/pprof/cmdline", false, 401},
		{"GET", "/debug/pprof/trace?seconds=0.1", false, 401},
		{"POST", "/debug/pprof/symbol", false, 401},
		{"GET", "/%61dmin/keys", false, 401},
		{"DELETE", "/admin/keys/key_abcdefghijkl", false, 401},
		{"GET", "/nothing", true, 404},
		{"GET", "/debug/pprof/trace?seconds=0.1", true, 200},
	} {
		req, _ := http.NewRequest(r.method, g.AdminURL()+r.path, nil)
		if r.auth {
			req.Header.Set("Authorization", "Bearer "+adminTestToken)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != r.want {
			t.Errorf("%s %s (token sent: %v): status %d, want %d; %.200q", r.method, r.path, r.auth, resp.StatusCode, r.want, b)
			continue
		}
		if r.want != 200 {
			onlyAnError(t, b)
		}
	}
}

// TestAdminListenerWarnsOffLoopback starts a gateway on each admin address
// and counts the warnings that it is not on loopback.
func TestAdminListenerWarnsOffLoopback(t *testing.T) {
	tests := []struct {
		addr string
		warn bool
	}{
		{"127.0.0.1:0", false},
		{"127.0.0.2:0", false},
		{"localhost:0", false},
		{"[::1]:0", false},
		{":0", true},
		{"0.0.0.0:0", true},
		{"[::]:0", true},
	}
	if ip := nonLoopbackIP(); ip != "" {
		tests = append(tests, struct {
			addr string
			warn bool
		}{net.JoinHostPort(ip, "0"), true})
	} else {
		t.Log("no address but loopback on this host; a specific outward address goes untried")
	}
	for _, tt := range tests {
		t.Run(tt.addr, func(t *testing.T) {
			if ln, err := net.Listen("tcp", tt.addr); err != nil {
				t.Skipf("this host cannot listen on %s: %v", tt.addr, err)
			} else {
				ln.Close()
			}
			t.Setenv("LLMGW_ADMIN_TOKEN", "")
			cfg := upstreamConfig("chat", catalog.KindOpenAI, []string{"http://127.0.0.1:1/v1"})
			cfg.Server.Listen, cfg.Server.AdminListen = "127.0.0.1:0", tt.addr
			cfg.Admin.Token = adminTestToken
			logs := &syncWriter{w: new(strings.Builder)}
			g, err := newGateway(t.Context(), cfg, "", slog.New(slog.NewTextHandler(logs, nil)))
			if err != nil {
				t.Fatal(err)
			}
			g.close()
			var warnings []string
			for _, l := range strings.Split(logs.String(), "\n") {
				if strings.Contains(l, "level=WARN") && strings.Contains(l, "not on loopback") {
					warnings = append(warnings, l)
				}
			}
			want := 0
			if tt.warn {
				want = 1
			}
			if len(warnings) != want {
				t.Fatalf("%d warnings, want %d; logs:\n%s", len(warnings), want, logs)
			}
			if want == 1 {
				w := warnings[0]
				for _, s := range []string{"anyone who can reach it reads /metrics, /healthz, /livez and /readyz", "admin token", "/admin/", "addr="} {
					if !strings.Contains(w, s) {
						t.Errorf("warning does not say %q: %s", s, w)
					}
				}
				if strings.Contains(w, adminTestToken) {
					t.Errorf("warning holds the token: %s", w)
				}
			}
		})
	}
}

// nonLoopbackIP is an address of one of this host's interfaces that is
// not loopback, or "" when it has none.
func nonLoopbackIP() string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return ""
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil {
			return n.IP.String()
		}
	}
	return ""
}

func TestOnLoopback(t *testing.T) {
	for _, tt := range []struct {
		addr string
		want bool
	}{
		{"127.0.0.1:8081", true},
		{"127.3.4.5:8081", true},
		{"[::1]:8081", true},
		{"[::ffff:127.0.0.1]:8081", true},
		{"localhost:8081", true},
		{"LOCALHOST:8081", true},
		{":8081", false},
		{"0.0.0.0:8081", false},
		{"[::]:8081", false},
		{"10.0.0.7:8081", false},
		{"[fe80::1%eth0]:8081", false},
		{"[2001:db8::1]:8081", false},
		{"example.com:8081", false},
		{"8081", false},
	} {
		if got := onLoopback(tt.addr); got != tt.want {
			t.Errorf("onLoopback(%q) = %v, want %v", tt.addr, got, tt.want)
		}
	}
}
