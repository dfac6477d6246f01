// Package console is llmgw's web console, served by the admin listener at
// /ui: the gateway's live state per model and endpoint, keys and tenants,
// usage and the latest requests from the ledger, and the catalog in
// service. Pages are rendered on the server with html/template, which
// escapes every name a tenant, key or model may carry; a small script
// refreshes the live pages and draws the usage chart with a vendored
// Chart.js. Nothing is loaded from another host.
package console

import (
	"embed"
	"html/template"
	"log/slog"
	"net/http"
	"time"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/admin"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/keys"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/store"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/tenant"
)

// Gateway is what the console reads of the running gateway besides the
// store: its live status, the catalog in service and the last reload.
type Gateway interface {
	// Status is the gateway's state at now, from its own counters.
	Status(now time.Time) Status
	// Catalog is the catalog in service; nil before the first.
	Catalog() *catalog.Catalog
	// LastReload is the last time the configuration was loaded, and how.
	LastReload() Reload
	// ConfigTenants is the tenant limits of the configuration in service,
	// shown in the tenant tree beside the store's.
	ConfigTenants() []tenant.TenantLimits
}

// Reload is the last load of the configuration.
type Reload struct {
	At time.Time // when; zero when it was never loaded from a file
	// Err is why the last reload was refused, empty when it took. A
	// refused reload leaves the catalog before it in service.
	Err string
	// File is the configuration file; empty when the configuration came
	// from flags alone, which nothing reloads.
	File string
	// NeedRestart is the fields the reload found changed that take effect
	// only at a restart, as the file writes them; their values in
	// service are kept.
	NeedRestart []string
}

// Options configure the console.
type Options struct {
	// Guard holds the admin token that signs in, and the throttle every
	// sign-in takes a slot from before its form is read; the same guard
	// serves the rest of the admin listener. A guard with no token, or
	// nil, means the console explains how to set one and shows nothing
	// else. A session ends when the guard's token changes.
	Guard *admin.Guard
	// Keyring, when not nil, is told of revocations so this replica
	// refuses a revoked key at once.
	Keyring *keys.Keyring
	// OIDC, when not nil, is the identity provider people sign in with
	// beside (or, with the guard's token off, instead of) the admin token.
	OIDC Provider
	// SessionTTL is how long a sign-in lasts; zero means DefaultSessionTTL.
	// A sign-in with the provider ends at its ID token's expiry if sooner.
	SessionTTL time.Duration
	// Now is the clock; nil means time.Now.
	Now    func() time.Time
	Logger *slog.Logger // nil discards
}

// DefaultSessionTTL is how long a sign-in lasts: a working day, so that a
// console left open overnight asks for the token again.
const DefaultSessionTTL = 8 * time.Hour

//go:embed templates/*.html
var templateFS embed.FS

//go:embed assets/console.css assets/console.js assets/chart.umd.min.js
var assetFS embed.FS

// contentSecurityPolicy lets a page load scripts, styles, images and
// data from the console's own origin alone, run no inline script, post
// forms nowhere else, and sit in no frame.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// Console is the console's handler.
type Console struct {
	st       store.Store
	gw       Gateway
	opts     Options
	guard    *admin.Guard
	sessions *sessions
	pending  pendingSignIns                // sign-ins begun at the provider
	pages    map[string]*template.Template // key: page name
	now      func() time.Time
	log      *slog.Logger
	mux      *http.ServeMux
	csrf     *http.CrossOriginProtection
}

// New returns the console over st and gw, serving paths under /ui.
func New(st store.Store, gw Gateway, opts Options) (*Console, error) {
	c := &Console{st: st, gw: gw, opts: opts, guard: opts.Guard, now: opts.Now, log: opts.Logger,
		csrf: http.NewCrossOriginProtection()}
	if c.guard == nil {
		c.guard = admin.NewGuard("", admin.GuardOptions{})
	}
	if c.now == nil {
		c.now = time.Now
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	ttl := opts.SessionTTL
	if ttl <= 0 {
		ttl = DefaultSessionTTL
	}
	c.sessions = newSessions(ttl)
	var err error
	if c.pages, err = parsePages(); err != nil {
		return nil, err
	}
	c.routes()
	return c, nil
}

func (c *Console) routes() {
	m := http.NewServeMux()
	m.Handle("GET /ui/assets/", http.StripPrefix("/ui/", http.FileServerFS(assetFS)))
	m.HandleFunc("GET /ui/{$}", c.signedIn(func(w http.ResponseWriter, r *http.Request, ss *session) {
		http.Redirect(w, r, homePage(ss), http.StatusSeeOther)
	}))
	m.HandleFunc("GET /ui/login", c.loginPage)
	m.HandleFunc("POST /ui/login", c.login)
	m.HandleFunc("GET /ui/oidc/login", c.oidcLogin)
	m.HandleFunc("GET /ui/oidc/callback", c.oidcCallback)
	m.HandleFunc("POST /ui/logout", c.write(c.logout))
	m.HandleFunc("GET /ui/overview", c.readsAll(c.overview))
	m.HandleFunc("GET /ui/endpoints", c.readsAll(c.endpoints))
	m.HandleFunc("GET /ui/keys", c.signedIn(c.keysPage))
	m.HandleFunc("POST /ui/keys", c.change(c.createKey))
	m.HandleFunc("POST /ui/keys/{id}/revoke", c.change(c.revokeKey))
	m.HandleFunc("GET /ui/usage", c.signedIn(c.usagePage))
	m.HandleFunc("GET /ui/usage.csv", c.signedIn(c.usageCSV))
	m.HandleFunc("GET /ui/requests", c.signedIn(c.requests))
	m.HandleFunc("GET /ui/config", c.readsAll(c.config))
	m.HandleFunc("GET /ui/audit", c.signedIn(c.auditPage))
	m.HandleFunc("/ui/", func(w http.ResponseWriter, r *http.Request) {
		c.render(w, r, http.StatusNotFound, "error", nil, errorPage{Message: "There is no such page."})
	})
	c.mux = m
}

// homePage is where a session starts: the Overview for a reader of
// everything, the Keys of its subtrees for a tenant role.
func homePage(ss *session) string {
	if ss.who.ReadsAll() {
		return "/ui/overview"
	}
	return "/ui/keys"
}

// ServeHTTP serves the console, every answer with its security headers.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin")
	if r.URL.Path == "/ui" {
		http.Redirect(w, r, "/ui/", http.StatusSeeOther)
		return
	}
	if !c.guard.Configured() && r.URL.Path != "/ui/assets/console.css" {
		c.render(w, r, http.StatusForbidden, "notoken", nil, nil)
		return
	}
	c.mux.ServeHTTP(w, r)
}
