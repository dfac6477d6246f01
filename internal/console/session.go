package console

// Signing in: the admin token, asked once, buys a session: a random id
// in an HttpOnly, SameSite=Strict cookie, held here with its expiry and
// its CSRF token. The token itself is never stored or sent back, and a
// session ends when the token changes. A write needs the session, the
// CSRF token in its form, and a same-origin request as the browser tells
// it (Sec-Fetch-Site, else Origin).

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/access"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/admin"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/audit"
)

// cookieName is the session cookie's name.
const cookieName = "llmgw_console"

// maxSessions bounds the sessions held: past it, signing in drops the one
// nearest its end. An operator signs in a few times a day; this many is
// only reached by a script signing in over and over.
const maxSessions = 1000

// session is one sign-in.
type session struct {
	id      string
	csrf    string // the token every form of the session carries
	expires time.Time
	version uint64 // the version of the admin token it signed in with
	who     access.Identity
}

// sessions are the sign-ins held.
type sessions struct {
	ttl time.Duration
	mu  sync.Mutex          // protects by
	by  map[string]*session // key: session id
}

func newSessions(ttl time.Duration) *sessions {
	return &sessions{ttl: ttl, by: map[string]*session{}}
}

// randomID is 32 bytes from the system's random source, base64url.
func randomID() string {
	b := make([]byte, 32)
	rand.Read(b) // never fails on the systems llmgw runs on
	return base64.RawURLEncoding.EncodeToString(b)
}

// start makes a session of who, signed in with the token's version, that
// ends ttl after now or at notAfter if sooner (zero for no such bound);
// sessions that have ended, or were signed in with a token of another
// version, are let go.
func (s *sessions) start(now time.Time, version uint64, who access.Identity, notAfter time.Time) *session {
	ss := &session{id: randomID(), csrf: randomID(), expires: now.Add(s.ttl), version: version, who: who}
	if !notAfter.IsZero() && notAfter.Before(ss.expires) {
		ss.expires = notAfter
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, x := range s.by {
		if !now.Before(x.expires) || x.version != version {
			delete(s.by, id)
		}
	}
	if len(s.by) >= maxSessions {
		var first *session
		for _, x := range s.by {
			if first == nil || x.expires.Before(first.expires) {
				first = x
			}
		}
		delete(s.by, first.id)
	}
	s.by[ss.id] = ss
	return ss
}

// get is the live session with id at now, signed in with the token's
// version, or nil.
func (s *sessions) get(id string, now time.Time, version uint64) *session {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.by[id]
	if ss == nil {
		return nil
	}
	if !now.Before(ss.expires) || ss.version != version {
		delete(s.by, id)
		return nil
	}
	return ss
}

// end ends the session with id.
func (s *sessions) end(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.by, id)
}

// session is r's live session, or nil.
func (c *Console) session(r *http.Request) *session {
	ck, err := r.Cookie(cookieName)
	if err != nil {
		return nil
	}
	return c.sessions.get(ck.Value, c.now(), c.guard.Version())
}

// setCookie sets, or with a nil session clears, the session cookie.
func (c *Console) setCookie(w http.ResponseWriter, r *http.Request, ss *session) {
	ck := &http.Cookie{Name: cookieName, Path: "/ui", HttpOnly: true, SameSite: http.SameSiteStrictMode,
		Secure: r.TLS != nil || r.Header.Get("X-Forwarded-Proto") == "https"}
	if ss == nil {
		ck.MaxAge = -1
	} else {
		// Max-Age rather than Expires: the browser's clock may be off.
		ck.Value = ss.id
		ck.MaxAge = int(ss.expires.Sub(c.now()).Seconds())
	}
	http.SetCookie(w, ck)
}

// pageHandler is a page served to a session.
type pageHandler func(w http.ResponseWriter, r *http.Request, ss *session)

// signedIn serves h to a signed-in browser whose identity holds a role,
// refuses one that holds none with 403, and sends any other to the
// sign-in page, coming back here after.
func (c *Console) signedIn(h pageHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ss := c.session(r)
		if ss == nil {
			http.Redirect(w, r, "/ui/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
			return
		}
		w.Header().Set("Cache-Control", "no-store")
		if !ss.who.Any() {
			c.forbidden(w, r, ss)
			return
		}
		h(w, r, ss)
	}
}

// readsAll serves h to a signed-in reader of everything (admin or
// viewer), and refuses every other session with 403: the endpoints and
// the configuration are no tenant's.
func (c *Console) readsAll(h pageHandler) http.HandlerFunc {
	return c.signedIn(func(w http.ResponseWriter, r *http.Request, ss *session) {
		if !ss.who.ReadsAll() {
			c.forbidden(w, r, ss)
			return
		}
		h(w, r, ss)
	})
}

// forbidden answers 403: the session's roles do not allow the page or the
// change, and nothing was changed.
func (c *Console) forbidden(w http.ResponseWriter, r *http.Request, ss *session) {
	c.render(w, r, http.StatusForbidden, "error", ss, errorPage{Message: "Your roles do not allow this; nothing was changed."})
}

// write serves h to a signed-in, same-origin form that carries the
// session's CSRF token; anything else is refused with 403 and changes
// nothing.
func (c *Console) write(h pageHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ss := c.session(r)
		if ss == nil {
			c.render(w, r, http.StatusForbidden, "error", nil, errorPage{Message: "Your session has ended: sign in again."})
			return
		}
		if !c.readForm(w, r, ss) {
			return
		}
		if !c.sameOrigin(r) || !validCSRF(r, ss) {
			c.render(w, r, http.StatusForbidden, "error", ss, errorPage{Message: "This form was not sent from this console's own page; nothing was changed."})
			return
		}
		w.Header().Set("Cache-Control", "no-store")
		h(w, r, ss)
	}
}

// change is write for a form that changes the store: refused with 403,
// changing nothing, for a session that may change nothing (viewer,
// tenant_viewer, or no role).
func (c *Console) change(h pageHandler) http.HandlerFunc {
	return c.write(func(w http.ResponseWriter, r *http.Request, ss *session) {
		if !ss.who.Writes() {
			c.forbidden(w, r, ss)
			return
		}
		h(w, r, ss)
	})
}

// sameOrigin reports whether the browser says r came from the console's
// own origin: Sec-Fetch-Site, else an Origin header matching the host.
// A request that carries neither is let through to the CSRF token.
func (c *Console) sameOrigin(r *http.Request) bool {
	return c.csrf.Check(r) == nil
}

// validCSRF reports whether r's form, read already, carries ss's CSRF
// token.
func validCSRF(r *http.Request, ss *session) bool {
	got := r.PostFormValue("csrf")
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(ss.csrf)) == 1
}

// maxFormBytes bounds a form: a key's spec is a few hundred bytes.
const maxFormBytes = 64 << 10

// readForm reads r's form, at most maxFormBytes of it, and reports
// whether it could; if not it answers, 413 for a form too large, 408 for
// one that did not arrive within the listener's body deadline, else 400,
// and the connection closes after the answer.
func (c *Console) readForm(w http.ResponseWriter, r *http.Request, ss *session) bool {
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	err := r.ParseForm()
	if err == nil {
		return true
	}
	status, msg := http.StatusBadRequest, "The form could not be read; nothing was changed."
	var (
		tooLarge *http.MaxBytesError
		netErr   net.Error
	)
	switch {
	case errors.As(err, &tooLarge):
		status, msg = http.StatusRequestEntityTooLarge, "The form is larger than the console takes; nothing was changed."
	case errors.As(err, &netErr) && netErr.Timeout():
		status, msg = http.StatusRequestTimeout, "The form did not arrive in time; nothing was changed."
	}
	w.Header().Set("Connection", "close")
	c.render(w, r, status, "error", ss, errorPage{Message: msg})
	return false
}

// loginPage offers the ways to sign in: the identity provider, and the
// admin token unless it is turned off.
func (c *Console) loginPage(w http.ResponseWriter, r *http.Request) {
	if c.session(r) != nil {
		http.Redirect(w, r, nextPage(r.URL.Query().Get("next")), http.StatusSeeOther)
		return
	}
	c.render(w, r, http.StatusOK, "login", nil, c.loginData(r.URL.Query().Get("next"), ""))
}

// loginData is the sign-in page's data for next, with msg as its error.
func (c *Console) loginData(next, msg string) loginPage {
	p := loginPage{Next: next, Message: msg, Token: c.guard.TokenSet()}
	if c.opts.OIDC != nil {
		p.OIDC = oidcStart(next)
	}
	return p
}

// login starts a session for the admin token. The sign-in takes its slot
// in the guard's throttle before its form is read, so that sign-ins whose
// forms arrive together are compared no more than the throttle allows.
func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	if !c.sameOrigin(r) {
		c.render(w, r, http.StatusForbidden, "error", nil, errorPage{Message: "Sign in from this console's own page."})
		return
	}
	try, refused := c.guard.Try(r)
	if refused != nil {
		w.Header().Set("Retry-After", strconv.Itoa(refused.RetryAfterSeconds))
		w.Header().Set("Connection", "close")
		c.render(w, r, http.StatusTooManyRequests, "error", nil, errorPage{Message: refused.Message})
		return
	}
	if !c.readForm(w, r, nil) {
		return
	}
	next := r.PostFormValue("next")
	if !try.Match(r.PostFormValue("token")) {
		p := c.loginData(next, "")
		p.Failed = true
		c.log.Info("console: a sign-in failed", "why", "wrong admin token", "remote", r.RemoteAddr)
		admin.Note(r.Context(), c.st, c.log, r, access.AdminToken(), audit.Entry{Action: audit.SignInFailed, Detail: "wrong admin token"}, c.now())
		c.render(w, r, http.StatusUnauthorized, "login", nil, p)
		return
	}
	ss := c.sessions.start(c.now(), try.Version(), access.AdminToken(), time.Time{})
	c.setCookie(w, r, ss)
	c.log.Info("console: signed in", "remote", r.RemoteAddr)
	admin.Note(r.Context(), c.st, c.log, r, ss.who, audit.Entry{Action: audit.SignIn, Detail: "admin token"}, c.now())
	http.Redirect(w, r, nextPage(next), http.StatusSeeOther)
}

// nextPage is where to go after signing in: a console page, never
// another site; /ui/, the session's home page, by default.
func nextPage(next string) string {
	u, err := url.Parse(next)
	if err != nil || next == "" || u.Scheme != "" || u.Host != "" || u.Path == "/ui/login" ||
		len(u.Path) < len("/ui/") || u.Path[:len("/ui/")] != "/ui/" {
		return "/ui/"
	}
	return u.RequestURI()
}

func (c *Console) logout(w http.ResponseWriter, r *http.Request, ss *session) {
	c.sessions.end(ss.id)
	admin.Note(r.Context(), c.st, c.log, r, ss.who, audit.Entry{Action: audit.SignOut}, c.now())
	c.setCookie(w, r, nil)
	http.Redirect(w, r, "/ui/login", http.StatusSeeOther)
}
