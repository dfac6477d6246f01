package console

// The role matrix: each identity (admin, viewer, tenant_admin of acme,
// tenant_viewer of acme/search, and one holding no role) against every
// console page, action and CSV export and every /admin path, over real
// sockets. What a role allows works; what it does not answers 403 (or, for
// a key outside the subtree, exactly what a missing key answers) and
// changes nothing; and a tenant role's answers hold nothing of another
// org or subtree, totals included.

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/access"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/admin"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/alert"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/audit"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/keys"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/store"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/tenant"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/usage"
)

// The identities of the matrix, by name.
var matrixIdentities = map[string]access.Identity{
	"admin":         access.AdminToken(),
	"viewer":        {Subject: "u-viewer", Email: "viewer@example.com", Roles: []access.Role{{Kind: access.Viewer}}},
	"acme_admin":    {Subject: "u-acme", Email: "lead@acme.example", Roles: []access.Role{{Kind: access.TenantAdmin, Tenant: "acme"}}},
	"search_viewer": {Subject: "u-search", Email: "dev@acme.example", Roles: []access.Role{{Kind: access.TenantViewer, Tenant: "acme/search"}}},
	"nobody":        {Subject: "u-nobody", Email: "nobody@example.com"},
}

// tokenTable is a TokenVerifier of fixed bearer tokens, standing in for
// an identity provider's access tokens: each names one identity.
type tokenTable map[string]access.Identity

func (t tokenTable) Verify(_ context.Context, token string) (access.Identity, error) {
	if id, ok := t[token]; ok {
		return id, nil
	}
	return access.Identity{}, errors.New("unknown token")
}

// roleFixture is a console and the admin API over one memory store on a
// real listener, with keys, limits and usage in acme/search, acme/ads and
// globex, and a session and a bearer token for each identity.
type roleFixture struct {
	srv      *httptest.Server
	st       *store.Memory
	keyID    map[string]string // key: tenant path; value: its key's id
	sessions map[string]*session
}

// The usage each subtree holds, set apart so that a leaked sum shows:
// acme's tokens are 1,300, its search team's 1,000, and globex's 50,000.
const (
	searchPrompt = 600
	adsPrompt    = 300
	globexPrompt = 50000
)

func newRoleFixture(t *testing.T) *roleFixture {
	t.Helper()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	f := &roleFixture{st: store.NewMemory(), keyID: map[string]string{}, sessions: map[string]*session{}}
	ctx := context.Background()
	var recs []usage.Record
	for i, tn := range []string{"acme/search", "acme/ads", "globex"} {
		_, k, err := keys.Create(ctx, f.st, keys.Spec{Tenant: tn, Name: "key of " + tn}, now.Add(-time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		f.keyID[tn] = k.ID
		if err := f.st.SetTenantLimits(ctx, tenant.TenantLimits{Path: tn, Limits: tenant.Limits{RPM: int64(10 + i)}}); err != nil {
			t.Fatal(err)
		}
		prompt := map[string]int64{"acme/search": searchPrompt, "acme/ads": adsPrompt, "globex": globexPrompt}[tn]
		recs = append(recs, usage.Record{ID: "r-" + k.ID, Time: now.Add(-30 * time.Minute), KeyID: k.ID, Tenant: tn, Model: "model-" + strings.ReplaceAll(tn, "/", "-"),
			PromptTokens: prompt, CompletionTokens: 400, Status: 200})
	}
	if err := f.st.SetTenantLimits(ctx, tenant.TenantLimits{Path: "acme", Limits: tenant.Limits{RPM: 100}}); err != nil {
		t.Fatal(err)
	}
	if err := f.st.AddUsage(ctx, recs); err != nil {
		t.Fatal(err)
	}
	// Spend alerts of each org's budgets.
	for _, tn := range []string{"globex", "acme/search"} {
		if _, err := f.st.FireAlert(ctx, alert.Alert{Scope: alert.ScopeTenant, Subject: tn, Tenant: tn, Kind: alert.KindUSD,
			PeriodStart: now.AddDate(0, 0, -1), Threshold: 80, Used: 8, Budget: 10, Fired: now.Add(-time.Minute)}); err != nil {
			t.Fatal(err)
		}
	}
	// The trail so far: a change in globex, and a sign-in, which belongs
	// to no tenant.
	for _, e := range []audit.Entry{
		{Time: now.Add(-time.Hour), Subject: "u-boss", Email: "boss@globex.example", Action: audit.KeyCreate, Target: f.keyID["globex"], Tenant: "globex", Source: "198.51.100.7"},
		{Time: now.Add(-time.Hour), Subject: "u-someone", Email: "someone@example.com", Action: audit.SignIn, Source: "203.0.113.9"},
		{Time: now.Add(-time.Hour), Subject: "u-acme", Action: audit.KeyCreate, Target: f.keyID["acme/ads"], Tenant: "acme/ads", Source: "192.0.2.44"},
	} {
		if err := f.st.AddAudit(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	bearers := tokenTable{}
	for name, id := range matrixIdentities {
		if name != "admin" {
			bearers["bearer-"+name] = id
		}
	}
	guard := admin.NewGuard(testToken, admin.GuardOptions{Now: clock, Verifier: bearers})
	gw := &fakeGateway{tenants: []tenant.TenantLimits{{Path: "globex/research", Limits: tenant.Limits{TPM: 9}}, {Path: "acme/search/al", Limits: tenant.Limits{TPM: 8}}}}
	c, err := New(f.st, gw, Options{Guard: guard, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	for name, id := range matrixIdentities {
		f.sessions[name] = c.sessions.start(now, guard.Version(), id, time.Time{})
	}
	mux := http.NewServeMux()
	mux.Handle("/ui/", c)
	mux.Handle("/admin/", admin.New(f.st, nil, admin.Options{Guard: guard, Now: clock}))
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

// do sends one matrix request as who: a console request with who's
// session (and, for a form, its CSRF token from the console's origin), an
// /admin one with who's bearer token.
func (f *roleFixture) do(t *testing.T, who, method, path, body string) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, f.srv.URL+path, rd)
	if strings.HasPrefix(path, "/ui/") {
		req.AddCookie(&http.Cookie{Name: cookieName, Value: f.sessions[who].id})
		if method == "POST" {
			form, _ := url.ParseQuery(body)
			form.Set("csrf", f.sessions[who].csrf)
			req, _ = http.NewRequest(method, f.srv.URL+path, strings.NewReader(form.Encode()))
			req.AddCookie(&http.Cookie{Name: cookieName, Value: f.sessions[who].id})
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.Header.Set("Origin", f.srv.URL)
		}
	} else {
		token := "bearer-" + who
		if who == "admin" {
			token = testToken
		}
		req.Header.Set("Authorization", "Bearer "+token)
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// state is what a change could touch: every key and every level's limits.
func (f *roleFixture) state(t *testing.T) any {
	ks, err := f.st.Keys(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ls, err := f.st.TenantLimits(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return struct {
		K []tenant.Key
		L []tenant.TenantLimits
	}{ks, ls}
}

// leaks are what each tenant role must never see: another org's or
// another team's names, key ids and sums, whole or added into a total.
func (f *roleFixture) leaks(who string) []string {
	globex := []string{"globex", f.keyID["globex"], "50000", "50,000", "51300", "51,300", "52200", "52,200", "198.51.100.7", "203.0.113.9"}
	switch who {
	case "acme_admin":
		return globex
	case "search_viewer":
		return append(globex, "acme/ads", f.keyID["acme/ads"], "acme-ads", "1300", "1,300", "2100", "2,100", "192.0.2.44")
	}
	return nil
}

// csrfValue is a form's CSRF token, which differs from session to session.
var csrfValue = regexp.MustCompile(`name="csrf" value="[^"]*"`)

// TestRoleMatrix runs every row against every identity. want gives the
// status for each identity; a row with changes set alters the store when
// its status is below 400, and every other answer leaves it as it was.
func TestRoleMatrix(t *testing.T) {
	const missingKey = "key_AAAAAAAAAAAA"
	all := func(ok int) map[string]int {
		return map[string]int{"admin": ok, "viewer": ok, "acme_admin": ok, "search_viewer": ok, "nobody": 403}
	}
	only := func(ok int, who ...string) map[string]int {
		m := map[string]int{"admin": 403, "viewer": 403, "acme_admin": 403, "search_viewer": 403, "nobody": 403}
		for _, w := range who {
			m[w] = ok
		}
		return m
	}
	with := func(m map[string]int, who string, status int) map[string]int { m[who] = status; return m }
	rows := []struct {
		name, method, path, body string
		changes                  bool
		want                     map[string]int
	}{
		// Console pages and the CSV export.
		{name: "home", method: "GET", path: "/ui/", want: all(303)},
		{name: "overview", method: "GET", path: "/ui/overview", want: only(200, "admin", "viewer")},
		{name: "endpoints", method: "GET", path: "/ui/endpoints", want: only(200, "admin", "viewer")},
		{name: "config", method: "GET", path: "/ui/config", want: only(200, "admin", "viewer")},
		{name: "keys page", method: "GET", path: "/ui/keys", want: all(200)},
		{name: "usage by model", method: "GET", path: "/ui/usage", want: all(200)},
		{name: "usage by tenant", method: "GET", path: "/ui/usage?by=tenant", want: all(200)},
		{name: "usage by key", method: "GET", path: "/ui/usage?by=key&since=7d", want: all(200)},
		{name: "usage of another org", method: "GET", path: "/ui/usage?by=tenant&tenant=globex", want: all(200)},
		{name: "usage of the parent org", method: "GET", path: "/ui/usage?by=tenant&tenant=acme", want: all(200)},
		{name: "usage CSV", method: "GET", path: "/ui/usage.csv?by=tenant", want: all(200)},
		{name: "usage CSV by key", method: "GET", path: "/ui/usage.csv?by=key", want: all(200)},
		{name: "requests", method: "GET", path: "/ui/requests", want: all(200)},
		{name: "requests of another org", method: "GET", path: "/ui/requests?tenant=globex", want: all(200)},
		{name: "audit", method: "GET", path: "/ui/audit", want: all(200)},
		{name: "audit of another org", method: "GET", path: "/ui/audit?tenant=globex", want: all(200)},
		{name: "audit of sign-ins", method: "GET", path: "/ui/audit?action=signin", want: all(200)},
		// Console actions.
		{name: "create a key in acme/search", method: "POST", path: "/ui/keys", body: "tenant=acme/search&name=new", changes: true, want: only(201, "admin", "acme_admin")},
		{name: "create a key in globex", method: "POST", path: "/ui/keys", body: "tenant=globex&name=new", changes: true, want: only(201, "admin")},
		{name: "revoke acme/search's key", method: "POST", path: "/ui/keys/{search}/revoke", changes: true, want: only(303, "admin", "acme_admin")},
		{name: "revoke globex's key", method: "POST", path: "/ui/keys/{globex}/revoke", changes: true, want: with(only(303, "admin"), "acme_admin", 404)},
		{name: "revoke a missing key", method: "POST", path: "/ui/keys/" + missingKey + "/revoke", want: with(only(404, "admin"), "acme_admin", 404)},
		{name: "sign out", method: "POST", path: "/ui/logout", want: map[string]int{"admin": 303, "viewer": 303, "acme_admin": 303, "search_viewer": 303, "nobody": 303}},
		// The admin API.
		{name: "list keys", method: "GET", path: "/admin/keys", want: all(200)},
		{name: "list tenants", method: "GET", path: "/admin/tenants", want: all(200)},
		{name: "usage total", method: "GET", path: "/admin/usage", want: all(200)},
		{name: "usage by tenant (API)", method: "GET", path: "/admin/usage?by=tenant", want: all(200)},
		{name: "usage by key (API)", method: "GET", path: "/admin/usage?by=key", want: all(200)},
		{name: "usage of another org (API)", method: "GET", path: "/admin/usage?tenant=globex&by=model", want: all(200)},
		{name: "usage of another org's key", method: "GET", path: "/admin/usage?key={globex}&by=key", want: all(200)},
		{name: "audit (API)", method: "GET", path: "/admin/audit", want: all(200)},
		{name: "audit of another org (API)", method: "GET", path: "/admin/audit?tenant=globex", want: all(200)},
		{name: "create a key (API) in acme/search", method: "POST", path: "/admin/keys", body: `{"tenant":"acme/search"}`, changes: true, want: only(201, "admin", "acme_admin")},
		{name: "create a key (API) in globex", method: "POST", path: "/admin/keys", body: `{"tenant":"globex"}`, changes: true, want: only(201, "admin")},
		{name: "revoke (API) acme/search's key", method: "DELETE", path: "/admin/keys/{search}", changes: true, want: only(200, "admin", "acme_admin")},
		{name: "revoke (API) globex's key", method: "POST", path: "/admin/keys/{globex}/revoke", changes: true, want: with(only(200, "admin"), "acme_admin", 404)},
		{name: "revoke (API) a missing key", method: "DELETE", path: "/admin/keys/" + missingKey, want: with(only(404, "admin"), "acme_admin", 404)},
		{name: "set a team's limits", method: "PUT", path: "/admin/tenants/acme/search", body: `{"rpm":5}`, changes: true, want: only(200, "admin", "acme_admin")},
		{name: "set the org's own limits", method: "PUT", path: "/admin/tenants/acme", body: `{"rpm":5000}`, changes: true, want: only(200, "admin")},
		{name: "set another org's limits", method: "PUT", path: "/admin/tenants/globex", body: `{"rpm":5}`, changes: true, want: only(200, "admin")},
		{name: "unknown admin path", method: "GET", path: "/admin/nothing", want: all(404)},
	}
	notFound := map[string]string{} // key: "ui" or "admin", and who; value: the missing key's answer
	for _, row := range rows {
		for _, who := range []string{"admin", "viewer", "acme_admin", "search_viewer", "nobody"} {
			t.Run(row.name+"/"+who, func(t *testing.T) {
				f := newRoleFixture(t)
				path := strings.NewReplacer("{search}", f.keyID["acme/search"], "{globex}", f.keyID["globex"]).Replace(row.path)
				before := f.state(t)
				trail, _ := f.st.Audit(context.Background(), audit.Query{Until: time.Now(), Limit: audit.MaxEntries})
				status, body := f.do(t, who, row.method, path, row.body)
				want := row.want[who]
				if status != want {
					t.Fatalf("%s %s: %d, want %d:\n%.600s", row.method, path, status, want, body)
				}
				changed := !cmp.Equal(before, f.state(t))
				if wantChange := row.changes && status < 400; changed != wantChange {
					t.Errorf("%s %s: changed the store: %v, want %v", row.method, path, changed, wantChange)
				}
				after, _ := f.st.Audit(context.Background(), audit.Query{Until: time.Now(), Limit: audit.MaxEntries})
				switch {
				case changed && (len(after) != len(trail)+1 || after[0].Subject != matrixIdentities[who].Subject):
					t.Errorf("%s %s: a change by %s left the trail %+v", row.method, path, who, after[:min(len(after), 2)])
				case !changed && row.name != "sign out" && len(after) != len(trail):
					t.Errorf("%s %s: changed nothing, but the trail grew to %d from %d", row.method, path, len(after), len(trail))
				}
				for _, leak := range f.leaks(who) {
					if leak == "globex" && strings.Contains(path, "tenant=globex") {
						continue // the form shows again what was asked for
					}
					if strings.Contains(body, leak) {
						t.Errorf("%s %s answers %q, outside %s's subtree:\n%.2000s", row.method, path, leak, who, body)
					}
				}
				if row.name == "usage by model" && status == 200 && !strings.Contains(body, "tenant acme/search") {
					t.Errorf("%s: the Usage page does not show acme/search's spend alert, which %s may read", path, who)
				}
				if status == 404 && strings.Contains(row.name, "revoke") {
					// A key outside the subtree answers as a missing one.
					surface := strings.SplitN(path, "/", 3)[1] + " " + who
					body = csrfValue.ReplaceAllString(body, "")
					if prev, ok := notFound[surface]; ok && prev != body {
						t.Errorf("%s %s: a 404 unlike a missing key's:\n%s\nwant:\n%s", row.method, path, body, prev)
					}
					notFound[surface] = body
				}
			})
		}
	}
}
