package app

// Signing in to the console with a real OpenID Provider (zitadel's
// example OP, run in-process with static users and groups) in headless
// Chromium, through the provider's own login page, with the admin token
// turned off; and the admin API taking the provider's access tokens.

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"gitea.mynodes.xyz/ilker/llmgw/internal/config"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/oidc/oidctest"
)

const oidcSecretEnv = "LLMGW_TEST_OIDC_CLIENT_SECRET"

// startOIDC runs a gateway signing in with op on admin, an address picked
// before op started so that its callback is registered there.
func startOIDC(t *testing.T, cfg *config.Config, admin string, op *oidctest.Provider) *Gateway {
	t.Helper()
	t.Setenv(oidcSecretEnv, oidctest.Secret)
	cfg.Admin = config.Admin{DisableToken: true, OIDC: config.OIDC{Issuer: op.Issuer, ClientID: oidctest.Client, ClientSecretEnv: oidcSecretEnv,
		RedirectURL: "http://" + admin + "/ui/oidc/callback", Scopes: []string{"openid", "email", oidctest.GroupsScope}, Roles: oidctest.Roles}}
	cfg.Server.Listen, cfg.Server.AdminListen = "127.0.0.1:0", admin
	return runGateway(t, cfg, slog.New(slog.DiscardHandler))
}

// freeAddr is a loopback address no listener holds just now.
func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// adminCall sends method path with body to g's admin API with the bearer
// token, and returns the status and body.
func adminCall(t *testing.T, g *Gateway, token, method, path, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, g.AdminURL()+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestConsoleOIDCInBrowser: a tenant admin signs in through the
// provider's login page, sees the Keys of its org alone and no Overview,
// creates a key in its org and is refused one in another, signs out; the
// admin token opens nothing; the provider's access token opens the admin
// API with the same roles, and one from another provider opens nothing.
func TestConsoleOIDCInBrowser(t *testing.T) {
	b := newBrowser(t)
	backend := httptest.NewServer(chatBackend())
	t.Cleanup(backend.Close)
	admin := freeAddr(t)
	callback := "http://" + admin + "/ui/oidc/callback"
	op := oidctest.Start(t, oidctest.Options{RedirectURIs: []string{callback}})
	cfg := upstreamConfig("chat", catalog.KindOpenAI, []string{backend.URL + "/v1"})
	cfg.Router.Auth = "keys"
	g := startOIDC(t, cfg, admin, op)

	// An admin token's key in another org, made through the API with an
	// admin's access token.
	adminTok := op.AccessToken(t, "alice", callback)
	if status, body := adminCall(t, g, adminTok, "POST", "/admin/keys", `{"tenant":"globex","name":"globex-ci"}`); status != 201 {
		t.Fatalf("an admin's access token creating a key: %d %s", status, body)
	}

	b.do(t, "opening the console", chromedp.Navigate(g.AdminURL()+"/ui"), chromedp.WaitVisible(chromedp.ID("oidc-signin")))
	if eval[bool](t, b, `document.getElementById("token") !== null`) {
		t.Error("the sign-in page offers the admin token, which is turned off")
	}
	b.screenshots(t, "signin-oidc")
	b.checkClean(t, "the sign-in page")
	b.do(t, "going to the provider", chromedp.Click(chromedp.ID("oidc-signin")), chromedp.WaitVisible(chromedp.ID("username")))
	if !strings.HasPrefix(eval[string](t, b, `location.href`), op.Issuer+"login/") {
		t.Fatalf("the sign-in went to %s, not the provider's login page", eval[string](t, b, `location.href`))
	}
	b.do(t, "signing in at the provider",
		chromedp.SendKeys(chromedp.ID("username"), "lena"),
		chromedp.SendKeys(chromedp.ID("password"), oidctest.Password),
		chromedp.Submit(chromedp.ID("password")),
		chromedp.WaitVisible(chromedp.CSS(`nav a[aria-current="page"]`)))
	b.forget() // the provider's own page asks for a favicon it does not have
	if who := b.text(t, ".who"); !strings.Contains(who, "lena@acme.example") {
		t.Errorf("the header names %q, want lena's email", who)
	}
	if nav := b.text(t, "nav"); strings.Contains(nav, "Overview") || strings.Contains(nav, "Config") || !strings.Contains(nav, "Keys") {
		t.Errorf("a tenant admin's navigation: %q, want Keys and no Overview or Config", nav)
	}
	if keys := b.text(t, "#main"); strings.Contains(keys, "globex") {
		t.Errorf("a tenant admin of acme sees another org's key:\n%s", keys)
	}
	b.do(t, "creating a key in acme",
		chromedp.SetValue(chromedp.CSS(`input[name="tenant"]`), "acme/search"),
		chromedp.SetValue(chromedp.CSS(`input[name="name"]`), "search-ci"),
		chromedp.Click(chromedp.CSS(`form.grid button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.ID("new-key")))
	plain := b.text(t, "#new-key")
	if status := consoleChatModel(t, g, plain, "chat"); status != 200 {
		t.Errorf("a request with the key lena created: %d", status)
	}
	b.screenshots(t, "keys-tenant")
	b.do(t, "creating a key in another org",
		chromedp.SetValue(chromedp.CSS(`input[name="tenant"]`), "globex"),
		chromedp.Click(chromedp.CSS(`form.grid button[type="submit"]`)))
	b.waitFor(t, "the refusal", `document.readyState === "complete" && document.body.textContent.includes("Your roles do not allow this")`)
	b.forget() // the refusal's 403

	b.do(t, "signing out", chromedp.Click(chromedp.CSS(`form.logout button`)), chromedp.WaitVisible(chromedp.ID("oidc-signin")))
	b.do(t, "coming back", chromedp.Navigate(g.AdminURL()+"/ui/keys"), chromedp.WaitVisible(chromedp.ID("oidc-signin")))
	b.checkClean(t, "after signing out")

	// The admin API: lena's access token lists acme's keys alone and
	// creates none elsewhere; another provider's token, or the admin
	// token's old place, opens nothing.
	lena := op.AccessToken(t, "lena", callback)
	status, body := adminCall(t, g, lena, "GET", "/admin/keys", "")
	var list struct {
		Data []struct{ Tenant string } `json:"data"`
	}
	if err := json.Unmarshal([]byte(body), &list); status != 200 || err != nil || len(list.Data) != 1 || list.Data[0].Tenant != "acme/search" {
		t.Errorf("lena's access token listing keys: %d %s, want acme/search's key alone", status, body)
	}
	if status, _ := adminCall(t, g, lena, "POST", "/admin/keys", `{"tenant":"globex"}`); status != 403 {
		t.Errorf("lena's access token creating a key in another org: %d, want 403", status)
	}
	other := oidctest.Start(t, oidctest.Options{RedirectURIs: []string{callback}})
	if status, _ := adminCall(t, g, other.AccessToken(t, "alice", callback), "GET", "/admin/keys", ""); status != 401 {
		t.Errorf("another provider's access token: %d, want 401", status)
	}
	if status, _ := adminCall(t, g, "", "GET", "/admin/keys", ""); status != 401 {
		t.Errorf("no token: %d, want 401", status)
	}
}

// forget drops the errors the page logged so far: ones the test meant.
func (b *browser) forget() {
	time.Sleep(50 * time.Millisecond) // messages arrive apart from the page
	b.mu.Lock()
	b.problems = nil
	b.mu.Unlock()
}

// consoleChatModel sends one chat completion for model with key to g.
func consoleChatModel(t *testing.T, g *Gateway, key, model string) int {
	t.Helper()
	req, _ := http.NewRequest("POST", g.URL()+"/chat/completions", strings.NewReader(fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"hi"}]}`, model)))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}
