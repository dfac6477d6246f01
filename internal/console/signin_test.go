package console

// Signing in with a real OpenID Provider (zitadel's example OP, run
// in-process), driven over HTTP as a browser would: through the
// provider's own login form, back to the callback, into a session with
// the roles the user's groups map to; a state or a code used twice, a
// state from another browser, a user with no role, the session's end at
// the ID token's expiry and at sign-out.

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/access"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/admin"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/oidc"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/oidc/oidctest"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/store"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/tenant"
)

// oidcConsole is a console signing in with a provider, on a listener
// picked before the provider starts, so that its callback can be
// registered there; its clock runs ahead of the real one by skew.
type oidcConsole struct {
	srv  *httptest.Server
	op   *oidctest.Provider
	skew atomic.Int64 // nanoseconds
}

func newOIDCConsole(t *testing.T, lifetime time.Duration) *oidcConsole {
	t.Helper()
	oc := &oidcConsole{}
	oc.srv = httptest.NewUnstartedServer(nil)
	callback := "http://" + oc.srv.Listener.Addr().String() + "/ui/oidc/callback"
	oc.op = oidctest.Start(t, oidctest.Options{RedirectURIs: []string{callback}, IDTokenLifetime: lifetime})
	roles := map[string][]access.Role{}
	for v, rs := range oidctest.Roles {
		for _, s := range rs {
			r, _ := access.ParseRole(s, tenant.ParsePath)
			roles[v] = append(roles[v], r)
		}
	}
	p := oidc.New(oidc.Options{Issuer: oc.op.Issuer, ClientID: oidctest.Client, ClientSecret: oidctest.Secret, RedirectURL: callback,
		Scopes: []string{"email", oidctest.GroupsScope}, Roles: roles})
	clock := func() time.Time { return time.Now().Add(time.Duration(oc.skew.Load())) }
	c, err := New(store.NewMemory(), &fakeGateway{}, Options{Guard: admin.NewGuard("", admin.GuardOptions{Verifier: p}), OIDC: p, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	oc.srv.Config.Handler = c
	oc.srv.Start()
	t.Cleanup(oc.srv.Close)
	return oc
}

// browser is a cookie-keeping client that follows no redirect.
func oidcBrowser() *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// begin starts a sign-in in b, returning the provider's sign-in URL.
func (oc *oidcConsole) begin(t *testing.T, b *http.Client) string {
	t.Helper()
	resp, err := b.Get(oc.srv.URL + "/ui/oidc/login?next=/ui/usage")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(loc, oc.op.Issuer) {
		t.Fatalf("beginning a sign-in: %d to %q, want the provider", resp.StatusCode, loc)
	}
	return loc
}

// callback sends b back to the console at back, as the provider does.
func (oc *oidcConsole) callback(t *testing.T, b *http.Client, back *url.URL) (int, string) {
	t.Helper()
	return getBody(t, b, oc.srv.URL+back.RequestURI())
}

func getBody(t *testing.T, c *http.Client, u string) (int, string) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestOIDCSignIn(t *testing.T) {
	oc := newOIDCConsole(t, time.Hour)

	// Each user gets the pages of its roles; one with no role none.
	for _, tc := range []struct {
		user, page string
		want       int
	}{
		{"alice", "/ui/overview", 200},
		{"victor", "/ui/config", 200},
		{"lena", "/ui/keys", 200},
		{"lena", "/ui/overview", 403},
		{"sam", "/ui/usage", 200},
	} {
		b := oidcBrowser()
		back := oc.op.Login(t, oc.begin(t, b), tc.user)
		status, body := oc.callback(t, b, back)
		if status != 200 || !strings.Contains(body, `http-equiv="refresh" content="0;url=/ui/usage"`) {
			t.Fatalf("%s: the callback answers %d:\n%s", tc.user, status, body)
		}
		if status, _ := getBody(t, b, oc.srv.URL+tc.page); status != tc.want {
			t.Errorf("%s: %s answers %d, want %d", tc.user, tc.page, status, tc.want)
		}
	}
	b := oidcBrowser()
	if status, body := oc.callback(t, b, oc.op.Login(t, oc.begin(t, b), "nina")); status != 403 || !strings.Contains(body, "none of your groups") {
		t.Errorf("a user with no role: %d, want 403 saying so:\n%s", status, body)
	}
	if status, _ := getBody(t, b, oc.srv.URL+"/ui/keys"); status != http.StatusSeeOther {
		t.Errorf("after a refused sign-in /ui/keys answers %d, want the sign-in page", status)
	}
}

// TestOIDCReplays: the callback takes a state once, from the browser
// that began the sign-in, and a code once.
func TestOIDCReplays(t *testing.T) {
	oc := newOIDCConsole(t, time.Hour)
	a := oidcBrowser()
	back := oc.op.Login(t, oc.begin(t, a), "alice")

	// Another browser brings alice's callback first: refused, and the
	// state is spent.
	if status, _ := oc.callback(t, oidcBrowser(), back); status != http.StatusBadRequest {
		t.Errorf("the callback from another browser: %d, want 400", status)
	}
	if status, _ := oc.callback(t, a, back); status != http.StatusBadRequest {
		t.Errorf("a state used already: %d, want 400", status)
	}

	back = oc.op.Login(t, oc.begin(t, a), "alice")
	if status, _ := oc.callback(t, a, back); status != 200 {
		t.Fatalf("signing in: %d", status)
	}
	if status, _ := oc.callback(t, oidcBrowser(), back); status != http.StatusBadRequest {
		t.Errorf("the same callback again: %d, want 400", status)
	}
	// The code again, under a fresh sign-in's state in a fresh browser.
	c := oidcBrowser()
	fresh, _ := url.Parse(oc.begin(t, c))
	replay := *back
	q := replay.Query()
	q.Set("state", fresh.Query().Get("state"))
	replay.RawQuery = q.Encode()
	if status, _ := oc.callback(t, c, &replay); status != http.StatusUnauthorized {
		t.Errorf("a code used already, with a fresh state: %d, want 401", status)
	}
	if status, _ := getBody(t, c, oc.srv.URL+"/ui/keys"); status != http.StatusSeeOther {
		t.Errorf("after a replayed code /ui/keys answers %d, want the sign-in page", status)
	}
}

// TestOIDCSessionEnds: a session ends at its ID token's expiry, and at
// sign-out.
func TestOIDCSessionEnds(t *testing.T) {
	oc := newOIDCConsole(t, 20*time.Minute)
	b := oidcBrowser()
	if status, _ := oc.callback(t, b, oc.op.Login(t, oc.begin(t, b), "alice")); status != 200 {
		t.Fatalf("signing in: %d", status)
	}
	oc.skew.Store(int64(19 * time.Minute))
	if status, _ := getBody(t, b, oc.srv.URL+"/ui/keys"); status != 200 {
		t.Errorf("a minute before the ID token's expiry: %d, want 200", status)
	}
	oc.skew.Store(int64(20*time.Minute + time.Second))
	if status, _ := getBody(t, b, oc.srv.URL+"/ui/keys"); status != http.StatusSeeOther {
		t.Errorf("past the ID token's expiry: %d, want the sign-in page", status)
	}

	oc.skew.Store(0)
	b = oidcBrowser()
	if status, _ := oc.callback(t, b, oc.op.Login(t, oc.begin(t, b), "lena")); status != 200 {
		t.Fatalf("signing in: %d", status)
	}
	_, body := getBody(t, b, oc.srv.URL+"/ui/keys")
	csrf := csrfOf(t, body)
	req, _ := http.NewRequest("POST", oc.srv.URL+"/ui/logout", strings.NewReader(url.Values{"csrf": {csrf}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", oc.srv.URL)
	resp, err := b.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("signing out: %d", resp.StatusCode)
	}
	if status, _ := getBody(t, b, oc.srv.URL+"/ui/keys"); status != http.StatusSeeOther {
		t.Errorf("after signing out: %d, want the sign-in page", status)
	}
}

func csrfOf(t *testing.T, body string) string {
	t.Helper()
	m := csrfValue.FindString(body)
	if m == "" {
		t.Fatal("no CSRF token on the page")
	}
	return strings.TrimSuffix(strings.TrimPrefix(m, `name="csrf" value="`), `"`)
}
