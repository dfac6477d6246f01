package console

import (
	"context"
	"encoding/csv"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/admin"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/keys"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/store"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/tenant"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/usage"
)

const testToken = "console-test-token-0123456789"

// hostile is a name that runs script wherever it is not escaped.
const hostile = `<script>alert("x")</script><img src=x onerror=alert(1)>`

// fakeGateway is a Gateway of fixed values.
type fakeGateway struct {
	status Status
	cat    *catalog.Catalog
	reload Reload
	// tenants are the configuration's tenant limits.
	tenants []tenant.TenantLimits
}

func (f *fakeGateway) Status(time.Time) Status              { return f.status }
func (f *fakeGateway) Catalog() *catalog.Catalog            { return f.cat }
func (f *fakeGateway) LastReload() Reload                   { return f.reload }
func (f *fakeGateway) ConfigTenants() []tenant.TenantLimits { return f.tenants }
func (f *fakeGateway) setCatalog(c *catalog.Catalog)        { f.cat = c }

// testConsole serves a console over a memory store and a fake gateway,
// its models, pools and endpoints named with markup.
type testConsole struct {
	srv   *httptest.Server
	st    *store.Memory
	gw    *fakeGateway
	guard *admin.Guard
	now   time.Time
}

func newTestConsole(t *testing.T, token string) *testConsole {
	t.Helper()
	tc := &testConsole{st: store.NewMemory(), now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	cat, err := catalog.New([]catalog.Pool{{Name: "pool" + hostile, Endpoints: []catalog.Endpoint{{Name: "ep" + hostile, URL: "http://user:pw@127.0.0.1:9/v1"}}}},
		[]catalog.Model{{Name: "model" + hostile, Pool: "pool" + hostile, SLO: catalog.SLO{TTFTp99: time.Second}}})
	if err != nil {
		t.Fatal(err)
	}
	tc.gw = &fakeGateway{cat: cat, reload: Reload{At: tc.now, File: "/etc/llmgw.yaml", Err: "models[0].pool: " + hostile}}
	tc.gw.status = Status{
		Models: []ModelStatus{{Name: "model" + hostile, Pool: "pool" + hostile, RequestsPerSecond: 2.5, ErrorRate: 0.1,
			TTFTp99: 1500 * time.Millisecond, SLOTTFT: time.Second, Admission: true, Queued: 3, Goodput: map[string]float64{"critical": 0.9}}},
		Pools: []PoolStatus{{Name: "pool" + hostile, Kind: "vllm", Policy: "auto", Endpoints: []EndpointStatus{{Name: "ep" + hostile,
			Inflight: 4, Waiting: 2, KVUsage: 0.5, PrefixHits: 0.8, PredictedTTFT: 120 * time.Millisecond, MeasuredTTFT: 130 * time.Millisecond,
			PerKiloToken: 200 * time.Millisecond, PerQueued: 120 * time.Millisecond, Step: 10 * time.Millisecond, PerStream: 80 * time.Microsecond}}}},
	}
	clock := func() time.Time { return tc.now }
	tc.guard = admin.NewGuard(token, admin.GuardOptions{Now: clock})
	c, err := New(tc.st, tc.gw, Options{Guard: tc.guard, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	tc.srv = httptest.NewServer(c)
	t.Cleanup(tc.srv.Close)
	return tc
}

// client is a browser of the console: it keeps cookies, follows no
// redirect, and says its requests come from the console's own origin.
func (tc *testConsole) client(t *testing.T) *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func (tc *testConsole) get(t *testing.T, c *http.Client, path string) (*http.Response, string) {
	t.Helper()
	resp, err := c.Get(tc.srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

// post sends form from origin ("" for none) as a browser would.
func (tc *testConsole) post(t *testing.T, c *http.Client, path, origin string, form url.Values) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", tc.srv.URL+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

// signIn signs c in and returns the session's CSRF token, read from a page.
func (tc *testConsole) signIn(t *testing.T, c *http.Client) string {
	t.Helper()
	resp, _ := tc.post(t, c, "/ui/login", tc.srv.URL, url.Values{"token": {testToken}, "next": {"/ui/keys"}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/keys" {
		t.Fatalf("sign-in: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	_, body := tc.get(t, c, "/ui/keys")
	m := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(body)
	if m == nil {
		t.Fatal("no CSRF token on the Keys page")
	}
	return m[1]
}

var pages = []string{"overview", "endpoints", "keys", "usage", "requests", "config"}

// TestNoTokenExplainsAndShowsNothing: without an admin token every page
// says how to set one, and shows no link, form or data.
func TestNoTokenExplainsAndShowsNothing(t *testing.T) {
	tc := newTestConsole(t, "")
	c := tc.client(t)
	for _, p := range append(pages, "login", "assets/console.js") {
		resp, body := tc.get(t, c, "/ui/"+p)
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "LLMGW_ADMIN_TOKEN") || !strings.Contains(body, "admin: {token:") {
			t.Errorf("/ui/%s: %d, want 403 saying how to set a token:\n%s", p, resp.StatusCode, body)
		}
		for _, leak := range []string{"<nav", "<form", "model&lt;script", "Admin token</label>"} {
			if strings.Contains(body, leak) {
				t.Errorf("/ui/%s without a token shows %q", p, leak)
			}
		}
	}
	if resp, _ := tc.post(t, c, "/ui/login", tc.srv.URL, url.Values{"token": {""}}); resp.StatusCode != http.StatusForbidden {
		t.Errorf("sign-in with an empty token and none configured: %d, want 403", resp.StatusCode)
	}
}

// TestSignIn: pages send a browser without a session to the sign-in page;
// a wrong token is refused; the right one gives an HttpOnly, SameSite=
// Strict cookie holding a session id, never the token, and every page;
// signing out ends the session.
func TestSignIn(t *testing.T) {
	tc := newTestConsole(t, testToken)
	c := tc.client(t)
	for _, p := range pages {
		resp, _ := tc.get(t, c, "/ui/"+p)
		if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/ui/login?next=") {
			t.Errorf("/ui/%s signed out: %d to %q, want the sign-in page", p, resp.StatusCode, resp.Header.Get("Location"))
		}
	}
	_, body := tc.get(t, c, "/ui/login")
	if !strings.Contains(body, `<label for="token">Admin token</label>`) {
		t.Errorf("the sign-in page has no field labelled Admin token:\n%s", body)
	}
	resp, body := tc.post(t, c, "/ui/login", tc.srv.URL, url.Values{"token": {"wrong"}})
	if resp.StatusCode != http.StatusUnauthorized || len(resp.Cookies()) != 0 || !strings.Contains(body, "not the admin token") {
		t.Errorf("wrong token: %d, cookies %v", resp.StatusCode, resp.Cookies())
	}
	resp, _ = tc.post(t, c, "/ui/login", "https://evil.example", url.Values{"token": {testToken}})
	if resp.StatusCode != http.StatusForbidden || len(resp.Cookies()) != 0 {
		t.Errorf("sign-in from another origin: %d, cookies %v; want 403 and none", resp.StatusCode, resp.Cookies())
	}
	resp, _ = tc.post(t, c, "/ui/login", tc.srv.URL, url.Values{"token": {" " + testToken + "\n"}, "next": {"//evil.example/ui/x"}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/" {
		t.Errorf("sign-in with a next off the console: %d to %q, want /ui/", resp.StatusCode, resp.Header.Get("Location"))
	}
	cks := resp.Cookies()
	if len(cks) != 1 || !cks[0].HttpOnly || cks[0].SameSite != http.SameSiteStrictMode || cks[0].Path != "/ui" ||
		strings.Contains(cks[0].Value, testToken) || len(cks[0].Value) < 40 {
		t.Fatalf("session cookie %+v; want one HttpOnly, SameSite=Strict random id", cks)
	}
	for _, p := range pages {
		resp, body := tc.get(t, c, "/ui/"+p)
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Cache-Control") != "no-store" {
			t.Errorf("/ui/%s signed in: %d, Cache-Control %q", p, resp.StatusCode, resp.Header.Get("Cache-Control"))
		}
		if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "default-src 'none'") {
			t.Errorf("/ui/%s CSP %q", p, csp)
		}
		for _, link := range []string{">Overview</a>", ">Endpoints</a>", ">Keys</a>", ">Usage</a>", ">Requests</a>", ">Config</a>"} {
			if !strings.Contains(body, link) {
				t.Errorf("/ui/%s has no link %s", p, link)
			}
		}
		if strings.Contains(body, testToken) {
			t.Errorf("/ui/%s shows the admin token", p)
		}
	}
	_, body = tc.get(t, c, "/ui/overview")
	csrf := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(body)[1]
	if resp, _ := tc.post(t, c, "/ui/logout", tc.srv.URL, url.Values{"csrf": {csrf}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign out: %d", resp.StatusCode)
	}
	// The old cookie, sent again, no longer opens anything.
	c.Jar.SetCookies(mustURL(tc.srv.URL+"/ui"), cks)
	if resp, _ := tc.get(t, c, "/ui/overview"); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("after signing out, the old session still opens a page: %d", resp.StatusCode)
	}
}

func mustURL(s string) *url.URL {
	u, err := url.Parse(s)
	if err != nil {
		panic(err)
	}
	return u
}

// TestWrongTokensWait: past the guard's budget of wrong tokens from one
// address, its sign-ins, the right token's too, are refused unread with
// 429 until a slot comes back, when the right token signs in.
func TestWrongTokensWait(t *testing.T) {
	tc := newTestConsole(t, testToken)
	c := tc.client(t)
	refused := 0
	for i := 0; refused == 0; i++ {
		resp, _ := tc.post(t, c, "/ui/login", tc.srv.URL, url.Values{"token": {"guess"}})
		switch {
		case resp.StatusCode == http.StatusTooManyRequests:
			refused++
		case resp.StatusCode != http.StatusUnauthorized || i > 100:
			t.Fatalf("wrong token %d: %d, want 401 until the throttle refuses it", i, resp.StatusCode)
		}
	}
	resp, body := tc.post(t, c, "/ui/login", tc.srv.URL, url.Values{"token": {testToken}})
	wait, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
	if resp.StatusCode != http.StatusTooManyRequests || wait < 1 || len(resp.Cookies()) != 0 || !strings.Contains(body, "try again in") {
		t.Fatalf("the right token past the wrong ones: %d, Retry-After %q; want 429 and no session:\n%s", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	tc.now = tc.now.Add(time.Duration(wait) * time.Second)
	if resp, _ := tc.post(t, c, "/ui/login", tc.srv.URL, url.Values{"token": {testToken}}); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("the right token after Retry-After: %d, want 303", resp.StatusCode)
	}
}

// TestSessionsEndWhenTheTokenChanges: a session signed in with one admin
// token ends when another takes its place; the new token signs in.
func TestSessionsEndWhenTheTokenChanges(t *testing.T) {
	tc := newTestConsole(t, testToken)
	c := tc.client(t)
	tc.signIn(t, c)
	tc.signIn(t, tc.client(t)) // a session never used again
	if tc.guard.SetToken(" " + testToken + "\n") {
		t.Error("the same token, padded, counts as a change")
	}
	if resp, _ := tc.get(t, c, "/ui/overview"); resp.StatusCode != http.StatusOK {
		t.Fatalf("after the same token is set again: %d, want the page", resp.StatusCode)
	}
	if !tc.guard.SetToken("the-next-" + testToken) {
		t.Fatal("a new token does not count as a change")
	}
	if resp, _ := tc.get(t, c, "/ui/overview"); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("the old token's session after the change: %d, want the sign-in page", resp.StatusCode)
	}
	if resp, _ := tc.post(t, c, "/ui/login", tc.srv.URL, url.Values{"token": {testToken}}); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("the old token after the change: %d, want 401", resp.StatusCode)
	}
	if resp, _ := tc.post(t, c, "/ui/login", tc.srv.URL, url.Values{"token": {"the-next-" + testToken}}); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("the new token: %d, want 303", resp.StatusCode)
	}
	ss := tc.srv.Config.Handler.(*Console).sessions
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if n := len(ss.by); n != 1 {
		t.Errorf("%d sessions held after signing in with the new token, want 1: the old token's are let go", n)
	}
}

// TestSessionExpires: a session ends DefaultSessionTTL after signing in.
func TestSessionExpires(t *testing.T) {
	tc := newTestConsole(t, testToken)
	c := tc.client(t)
	tc.signIn(t, c)
	tc.now = tc.now.Add(DefaultSessionTTL - time.Second)
	if resp, _ := tc.get(t, c, "/ui/overview"); resp.StatusCode != http.StatusOK {
		t.Errorf("just before the end: %d", resp.StatusCode)
	}
	tc.now = tc.now.Add(time.Second)
	if resp, _ := tc.get(t, c, "/ui/overview"); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("at the end: %d, want the sign-in page", resp.StatusCode)
	}
}

// TestWritesNeedSessionAndCSRF: creating or revoking a key needs the
// session, its CSRF token in the form and a same-origin request; a key
// created is shown once.
func TestWritesNeedSessionAndCSRF(t *testing.T) {
	tc := newTestConsole(t, testToken)
	c := tc.client(t)
	form := url.Values{"tenant": {"acme/search"}, "name": {"ci"}, "models": {"llama-*, qwen/*"}, "rpm": {"60"}, "budget_usd": {"5"}, "priority": {"critical"}}
	with := func(csrf string) url.Values {
		f := url.Values{"csrf": {csrf}}
		for k, v := range form {
			f[k] = v
		}
		return f
	}
	if resp, _ := tc.post(t, c, "/ui/keys", tc.srv.URL, with("")); resp.StatusCode != http.StatusForbidden {
		t.Errorf("create without a session: %d, want 403", resp.StatusCode)
	}
	csrf := tc.signIn(t, c)
	for _, tt := range []struct {
		name, origin, csrf string
	}{
		{"no CSRF token", tc.srv.URL, ""},
		{"another session's CSRF token", tc.srv.URL, "x" + csrf},
		{"another origin", "https://evil.example", csrf},
	} {
		if resp, _ := tc.post(t, c, "/ui/keys", tt.origin, with(tt.csrf)); resp.StatusCode != http.StatusForbidden {
			t.Errorf("create with %s: %d, want 403", tt.name, resp.StatusCode)
		}
	}
	if ks, _ := tc.st.Keys(context.Background()); len(ks) != 0 {
		t.Fatalf("refused creates made %d keys", len(ks))
	}
	resp, body := tc.post(t, c, "/ui/keys", tc.srv.URL, with(csrf))
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("create: %d\n%s", resp.StatusCode, body)
	}
	ks, _ := tc.st.Keys(context.Background())
	if len(ks) != 1 || ks[0].Tenant != "acme/search" || ks[0].Limits.RPM != 60 || ks[0].Limits.BudgetUSD != 5 || ks[0].Priority != "critical" || len(ks[0].Models) != 2 {
		t.Fatalf("stored keys %+v", ks)
	}
	plain := regexp.MustCompile(`<code id="new-key" class="secret">([^<]+)</code>`).FindStringSubmatch(body)
	if plain == nil {
		t.Fatalf("the created key is not shown:\n%s", body)
	}
	if id, _, ok := keys.Parse(plain[1]); !ok || id != ks[0].ID {
		t.Errorf("shown key %q is not key %s", plain[1], ks[0].ID)
	}
	if _, body := tc.get(t, c, "/ui/keys"); strings.Contains(body, plain[1]) || !strings.Contains(body, ks[0].ID) {
		t.Errorf("the Keys page shows the key's secret again, or not its id")
	}
	resp, body = tc.post(t, c, "/ui/keys", tc.srv.URL, url.Values{"csrf": {csrf}, "tenant": {"acme"}, "rpm": {"lots"}})
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "rpm: must be a whole number.") {
		t.Errorf("create with a bad rpm: %d", resp.StatusCode)
	}
	resp, body = tc.post(t, c, "/ui/keys", tc.srv.URL, url.Values{"csrf": {csrf}, "tenant": {"a/b/c/d"}})
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "tenant: must be one to three levels") {
		t.Errorf("create with a bad tenant: %d", resp.StatusCode)
	}

	revoke := "/ui/keys/" + ks[0].ID + "/revoke"
	if resp, _ := tc.post(t, c, revoke, tc.srv.URL, url.Values{}); resp.StatusCode != http.StatusForbidden {
		t.Errorf("revoke without a CSRF token: %d, want 403", resp.StatusCode)
	}
	if k, _ := tc.st.Key(context.Background(), ks[0].ID); !k.Revoked.IsZero() {
		t.Fatal("a refused revoke revoked the key")
	}
	resp, _ = tc.post(t, c, revoke, tc.srv.URL, url.Values{"csrf": {csrf}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/keys?revoked="+ks[0].ID {
		t.Errorf("revoke: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	if k, _ := tc.st.Key(context.Background(), ks[0].ID); k.Revoked.IsZero() {
		t.Error("revoke did not revoke the key")
	}
	if resp, _ := tc.post(t, c, "/ui/keys/key_000000000000/revoke", tc.srv.URL, url.Values{"csrf": {csrf}}); resp.StatusCode != http.StatusNotFound {
		t.Errorf("revoke of no key: %d, want 404", resp.StatusCode)
	}
}

// TestHostileNamesRenderAsText: names from keys, the ledger, the catalog
// and the live status that hold markup come out escaped on every page.
func TestHostileNamesRenderAsText(t *testing.T) {
	tc := newTestConsole(t, testToken)
	c := tc.client(t)
	csrf := tc.signIn(t, c)
	resp, body := tc.post(t, c, "/ui/keys", tc.srv.URL, url.Values{"csrf": {csrf}, "tenant": {"acme"}, "name": {"key" + hostile}, "models": {"m" + hostile}})
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("create: %d\n%s", resp.StatusCode, body)
	}
	if err := tc.st.AddUsage(context.Background(), []usage.Record{{ID: "r1", Time: tc.now.Add(-time.Minute), Tenant: "tenant" + hostile,
		KeyID: "key_" + hostile, Model: "model" + hostile, Endpoint: "ep" + hostile, Status: 200, PromptTokens: 10}}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"overview", "endpoints", "keys", "usage?by=model", "usage?by=tenant", "requests", "config"} {
		_, body := tc.get(t, c, "/ui/"+p)
		if strings.Contains(body, "<script>alert") || strings.Contains(body, "<img src=x") {
			t.Errorf("/ui/%s has the hostile name unescaped", p)
		}
		if !strings.Contains(body, "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;") && !strings.Contains(body, `\u003cscript\u003ealert`) {
			t.Errorf("/ui/%s does not show the hostile name as text", p)
		}
	}
	if _, body := tc.get(t, c, "/ui/config"); strings.Contains(body, "user:pw") {
		t.Error("the Config page shows an endpoint URL's password")
	}
}

// TestEndpointsShowWhatRoutingLearned: the Endpoints page shows each
// endpoint's learned first-token and decode costs, a cost learned to be
// none as 0 ms rather than as unknown.
func TestEndpointsShowWhatRoutingLearned(t *testing.T) {
	tc := newTestConsole(t, testToken)
	c := tc.client(t)
	tc.signIn(t, c)
	_, body := tc.get(t, c, "/ui/endpoints")
	for _, want := range []string{"200 ms / 0 ms, 120 ms", "10 ms + 0.08 ms + 0 ms"} {
		if !strings.Contains(body, want) {
			t.Errorf("the Endpoints page does not show %q:\n%s", want, body)
		}
	}
}

// TestUsageCSV: the export holds the page's rows, one per group, with a
// cell that a spreadsheet would read as a formula quoted.
func TestUsageCSV(t *testing.T) {
	tc := newTestConsole(t, testToken)
	c := tc.client(t)
	tc.signIn(t, c)
	recs := []usage.Record{
		{ID: "a", Time: tc.now.Add(-time.Hour), Model: "llama", Tenant: "acme", Status: 200, PromptTokens: 100, CompletionTokens: 10, CostUSD: 0.5},
		{ID: "b", Time: tc.now.Add(-2 * time.Hour), Model: "llama", Tenant: "acme", Status: 500, PromptTokens: 50},
		{ID: "c", Time: tc.now.Add(-3 * time.Hour), Model: "=HYPERLINK(\"http://evil\")", Tenant: "acme", Status: 200, PromptTokens: 1},
		{ID: "d", Time: tc.now.Add(-48 * time.Hour), Model: "old", Tenant: "acme", Status: 200, PromptTokens: 1},
	}
	if err := tc.st.AddUsage(context.Background(), recs); err != nil {
		t.Fatal(err)
	}
	resp, body := tc.get(t, c, "/ui/usage.csv?since=24h&by=model")
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/csv") || !strings.Contains(resp.Header.Get("Content-Disposition"), "attachment") {
		t.Fatalf("CSV: %d %q %q", resp.StatusCode, resp.Header.Get("Content-Type"), resp.Header.Get("Content-Disposition"))
	}
	rows, err := csv.NewReader(strings.NewReader(body)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	want := [][]string{
		{"model", "requests", "errors", "prompt_tokens", "completion_tokens", "cached_tokens", "cost_usd", "since", "until"},
		{`'=HYPERLINK("http://evil")`, "1", "0", "1", "0", "0", "0", "2026-02-28T12:00:00Z", "2026-03-01T12:00:00Z"},
		{"llama", "2", "1", "150", "10", "0", "0.5", "2026-02-28T12:00:00Z", "2026-03-01T12:00:00Z"},
	}
	if len(rows) != len(want) {
		t.Fatalf("CSV rows %q, want %q", rows, want)
	}
	for i := range want {
		if strings.Join(rows[i], "|") != strings.Join(want[i], "|") {
			t.Errorf("CSV row %d = %q, want %q", i, rows[i], want[i])
		}
	}
	if resp, _ := tc.get(t, c, "/ui/usage.csv?since=yesterday"); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("CSV with a bad window: %d, want 400", resp.StatusCode)
	}
	_, page := tc.get(t, c, "/ui/usage?since=24h&by=model")
	if !strings.Contains(page, `href="/ui/usage.csv?by=model&amp;since=24h"`) || !strings.Contains(page, `data-chart="{&#34;labels&#34;:[`) {
		t.Errorf("the Usage page has no CSV link or chart data for its query")
	}
}

// TestRequestsFilter: the Requests page lists the latest records that
// match its filters, and refuses a filter that is not one.
func TestRequestsFilter(t *testing.T) {
	tc := newTestConsole(t, testToken)
	c := tc.client(t)
	tc.signIn(t, c)
	recs := []usage.Record{
		{ID: "a", Time: tc.now.Add(-time.Minute), Model: "llama", Tenant: "acme/x", Status: 200, Endpoint: "ep-one"},
		{ID: "b", Time: tc.now.Add(-2 * time.Minute), Model: "qwen", Tenant: "other", Status: 429, Endpoint: "ep-two"},
	}
	if err := tc.st.AddUsage(context.Background(), recs); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		query      string
		want, not  string
		wantStatus int
	}{
		{"", "ep-one", "", 200},
		{"?model=qwen", "ep-two", "ep-one", 200},
		{"?tenant=acme", "ep-one", "ep-two", 200},
		{"?errors=1", "ep-two", "ep-one", 200},
		{"?status=200", "ep-one", "ep-two", 200},
		{"?status=abc", "status: must be an HTTP status", "ep-one", 400},
		{"?key=sk-secret", "key: must be a key id", "sk-secret", 400},
	} {
		resp, body := tc.get(t, c, "/ui/requests"+tt.query)
		if resp.StatusCode != tt.wantStatus || !strings.Contains(body, tt.want) || (tt.not != "" && strings.Contains(body, tt.not)) {
			t.Errorf("/ui/requests%s: %d; want %d with %q and without %q", tt.query, resp.StatusCode, tt.wantStatus, tt.want, tt.not)
		}
	}
}

// TestConfigPageNamesFieldsLeftForARestart: the Config page names the
// fields the last reload found changed but kept until a restart.
func TestConfigPageNamesFieldsLeftForARestart(t *testing.T) {
	tc := newTestConsole(t, testToken)
	tc.gw.reload = Reload{At: tc.now, File: "/etc/llmgw.yaml", NeedRestart: []string{"server.listen", "store.url"}}
	c := tc.client(t)
	tc.signIn(t, c)
	_, body := tc.get(t, c, "/ui/config")
	if !strings.Contains(body, "until a restart: <code>server.listen</code> <code>store.url</code>") {
		t.Errorf("the Config page does not name the fields left for a restart:\n%s", body)
	}
}

// TestEndpointsShowModelsLoaded: an endpoint whose server lists the
// models it has loaded shows them, or none, and its cold start, learned
// or the prior; one whose server lists none shows nothing known; each
// model of the pool shows the endpoints it is loaded on.
func TestEndpointsShowModelsLoaded(t *testing.T) {
	tc := newTestConsole(t, testToken)
	eps := &tc.gw.status.Pools[0].Endpoints
	warm, cold := (*eps)[0], (*eps)[0]
	warm.Name, warm.Models, warm.ListsModels = "warm", []string{"llama3.2:1b", "qwen3:latest"}, true
	warm.ColdStart, warm.ColdStartLearned = 12300*time.Millisecond, true
	cold.Name, cold.Models, cold.ListsModels = "cold", []string{}, true
	cold.ColdStart = 5 * time.Second
	*eps = append(*eps, warm, cold)
	tc.gw.status.Pools[0].Loaded = []ModelLoaded{{Model: "llama3.2", On: []string{"warm"}}, {Model: "gone"}}
	c := tc.client(t)
	tc.signIn(t, c)
	_, body := tc.get(t, c, "/ui/endpoints")
	for _, want := range []string{
		"<td>llama3.2:1b, qwen3:latest</td>", "<td>none</td>", "<td>–</td>",
		`<td class="n">12300 ms</td>`, `<td class="n">5000 ms (prior)</td>`,
		"llama3.2 is loaded on warm.", "gone is loaded on no endpoint",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the Endpoints page does not show %q:\n%s", want, body)
		}
	}
}
