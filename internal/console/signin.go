package console

// Signing in with an OpenID Connect provider: /ui/oidc/login sends the
// browser to the provider with a fresh state, nonce and PKCE challenge,
// and /ui/oidc/callback takes the code back once, for the browser that
// began the sign-in, into a session that ends at the ID token's expiry or
// sooner.

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"sync"
	"time"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/access"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/admin"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/audit"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/oidc"
)

// Provider is the OpenID Connect provider the console signs in with;
// *oidc.Provider is one.
type Provider interface {
	// Start is the provider's URL to send the browser to, and what the
	// callback needs back.
	Start(ctx context.Context) (string, oidc.Pending, error)
	// Finish exchanges the callback's code, and names who signed in and
	// when their ID token expires; oidc.ErrNoRoles when they hold no role.
	Finish(ctx context.Context, code string, p oidc.Pending) (access.Identity, time.Time, error)
}

// pendingCookie holds a sign-in's state in the browser that began it,
// so that the callback takes it from that browser alone. It is Lax, not
// Strict: the callback is a navigation from the provider's site.
const pendingCookie = "llmgw_oidc"

// The bounds of sign-ins begun and not finished: each lasts
// pendingTTL, time enough to type a password and pass a second factor,
// and past maxPending the one nearest its end is dropped.
const (
	pendingTTL = 10 * time.Minute
	maxPending = 1000
)

// pendingSignIn is one sign-in begun.
type pendingSignIn struct {
	oidc.Pending
	next    string // the console page to go to after
	expires time.Time
}

// pendingSignIns are the sign-ins begun, by state.
type pendingSignIns struct {
	mu sync.Mutex                // protects by
	by map[string]*pendingSignIn // key: state
}

// add keeps p, letting go of those that have ended.
func (ps *pendingSignIns) add(p *pendingSignIn, now time.Time) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.by == nil {
		ps.by = map[string]*pendingSignIn{}
	}
	var first *pendingSignIn
	for s, x := range ps.by {
		if !now.Before(x.expires) {
			delete(ps.by, s)
		} else if first == nil || x.expires.Before(first.expires) {
			first = x
		}
	}
	if len(ps.by) >= maxPending {
		delete(ps.by, first.State)
	}
	ps.by[p.State] = p
}

// take is the live sign-in with state, which is let go: a state is used
// once. Nil when there is none.
func (ps *pendingSignIns) take(state string, now time.Time) *pendingSignIn {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	p := ps.by[state]
	delete(ps.by, state)
	if p == nil || !now.Before(p.expires) {
		return nil
	}
	return p
}

// oidcLogin begins a sign-in at the provider.
func (c *Console) oidcLogin(w http.ResponseWriter, r *http.Request) {
	if c.opts.OIDC == nil {
		c.render(w, r, http.StatusNotFound, "error", nil, errorPage{Message: "Sign-in with an identity provider is not configured."})
		return
	}
	authURL, pend, err := c.opts.OIDC.Start(r.Context())
	if err != nil {
		c.log.Error("console: beginning a sign-in at the identity provider", "err", err)
		c.render(w, r, http.StatusBadGateway, "error", nil, errorPage{Message: "The identity provider could not be reached; the gateway's log says why."})
		return
	}
	now := c.now()
	c.pending.add(&pendingSignIn{Pending: pend, next: nextPage(r.URL.Query().Get("next")), expires: now.Add(pendingTTL)}, now)
	http.SetCookie(w, &http.Cookie{Name: pendingCookie, Value: pend.State, Path: "/ui/oidc", HttpOnly: true, SameSite: http.SameSiteLaxMode,
		Secure: r.TLS != nil || r.Header.Get("X-Forwarded-Proto") == "https", MaxAge: int(pendingTTL.Seconds())})
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, authURL, http.StatusSeeOther)
}

// oidcCallback finishes a sign-in: the state must be one begun here, not
// yet used, by this browser; the code is exchanged with its PKCE verifier
// and the ID token must carry its nonce. The session ends at the ID
// token's expiry, or the console's session length if sooner.
func (c *Console) oidcCallback(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	http.SetCookie(w, &http.Cookie{Name: pendingCookie, Path: "/ui/oidc", HttpOnly: true, SameSite: http.SameSiteLaxMode, MaxAge: -1})
	if c.opts.OIDC == nil {
		c.render(w, r, http.StatusNotFound, "error", nil, errorPage{Message: "Sign-in with an identity provider is not configured."})
		return
	}
	q := r.URL.Query()
	now := c.now()
	p := c.pending.take(q.Get("state"), now)
	ck, err := r.Cookie(pendingCookie)
	if p == nil || err != nil || ck.Value != p.State {
		// Not written to the trail: anyone may send this, as often as they
		// like, without reaching the provider.
		c.log.Info("console: a sign-in's callback with an unknown or used state, or from another browser", "remote", r.RemoteAddr)
		c.render(w, r, http.StatusBadRequest, "login", nil, c.loginData("", "This sign-in has ended, was used already, or was begun in another browser: sign in again."))
		return
	}
	if e := q.Get("error"); e != "" || q.Get("code") == "" {
		c.signInFailed(w, r, access.Identity{}, http.StatusUnauthorized, "The identity provider did not sign you in.", "provider error")
		return
	}
	who, exp, err := c.opts.OIDC.Finish(r.Context(), q.Get("code"), p.Pending)
	switch {
	case errors.Is(err, oidc.ErrNoRoles):
		c.signInFailed(w, r, who, http.StatusForbidden, "You are signed in at the identity provider, but none of your groups has a role in this console.", "no role")
		return
	case err != nil:
		c.log.Warn("console: a sign-in at the identity provider failed", "err", err, "remote", r.RemoteAddr)
		c.signInFailed(w, r, access.Identity{}, http.StatusUnauthorized, "The sign-in could not be completed: sign in again.", "refused")
		return
	}
	ss := c.sessions.start(now, c.guard.Version(), who, exp)
	c.setCookie(w, r, ss)
	c.log.Info("console: signed in", "actor", who.Actor(), "remote", r.RemoteAddr)
	admin.Note(r.Context(), c.st, c.log, r, who, audit.Entry{Action: audit.SignIn, Detail: "identity provider"}, now)
	// The session's cookie is Strict, and this answer is to a navigation
	// from the provider's site: a redirect would carry the browser on
	// without it, so the page sends it on itself.
	c.render(w, r, http.StatusOK, "signedin", nil, signedInPage{Next: p.next, Who: who.Actor()})
}

// signInFailed answers a sign-in that did not succeed, and notes it in
// the trail.
func (c *Console) signInFailed(w http.ResponseWriter, r *http.Request, who access.Identity, status int, msg, why string) {
	c.log.Info("console: a sign-in failed", "why", why, "actor", who.Actor(), "remote", r.RemoteAddr)
	if who.Subject == "" {
		who.Subject = "(unknown)"
	}
	admin.Note(r.Context(), c.st, c.log, r, who, audit.Entry{Action: audit.SignInFailed, Detail: "identity provider: " + why}, c.now())
	c.render(w, r, status, "login", nil, c.loginData("", msg))
}

// signedInPage is the page a sign-in with the provider ends on.
type signedInPage struct {
	Next string // where it sends the browser on
	Who  string
}

// oidcStart is the sign-in link for next.
func oidcStart(next string) string {
	return "/ui/oidc/login?next=" + url.QueryEscape(next)
}
