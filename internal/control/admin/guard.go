package admin

// The admin token: what the admin API, the console's sign-in and every
// other guarded path of the admin listener ask for before they answer
// anything, behind one throttle on guessing it.

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/netip"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/access"
	"gitea.mynodes.xyz/ilker/llmgw/internal/openai"
)

// noTokenMessage is the refusal of every guarded path when no admin token
// is configured: no token sent can open them, so it says how to set one.
const noTokenMessage = "The admin API and profiles are disabled because no admin token is configured: set LLMGW_ADMIN_TOKEN or admin.token in the config, then send it as Authorization: Bearer <token>."

// wrongTokenMessage is the refusal of a request without the admin token,
// or with another; wrongCredentialMessage the same where the identity
// provider's access tokens are taken too.
const (
	wrongTokenMessage      = "This admin path needs the admin token: send Authorization: Bearer <token>."
	wrongCredentialMessage = "This admin path needs the admin token or an access token from the identity provider: send Authorization: Bearer <token>."
)

// Guard lets through only requests that carry the admin token. With no
// token configured it lets nothing through: every request gets 403 and
// noTokenMessage. Every try at the token takes a slot from the throttle
// before the token is compared, or read: past its source's budget, or
// the budget all sources share, a try gets 429 with Retry-After and is
// not compared. A missing or wrong token gets 401 with WWW-Authenticate:
// Bearer and keeps its slot; the right one gives it back. A refusal says
// nothing of what the path holds, nor whether it exists.
//
// One Guard serves /ui, /admin and /debug alike, so that all of them draw
// on one budget; its token can be changed while it serves (SetToken).
type Guard struct {
	token    atomic.Pointer[guardToken] // the token in service
	throttle *throttle
	failures *prometheus.CounterVec // labels: path, reason
	verifier TokenVerifier          // nil when only the admin token signs in
	now      func() time.Time
	log      *slog.Logger
}

// guardToken is one admin token in service.
type guardToken struct {
	sum     [sha256.Size]byte // the token's hash
	set     bool              // reports whether a token is configured
	version uint64            // how many times the token has changed before it
}

// GuardOptions configure a Guard.
type GuardOptions struct {
	// Registerer gets llmgw_admin_auth_failures_total; nil registers
	// nothing.
	Registerer prometheus.Registerer
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Logger gets a warning for a source's wrong tokens, at most one a
	// source every logEvery; nil discards them.
	Logger *slog.Logger
	// Verifier, when not nil, is asked of a bearer token that is not the
	// admin token, and names whose it is; nil means only the admin token
	// opens anything.
	Verifier TokenVerifier
}

// TokenVerifier names the identity a bearer token other than the admin
// token stands for, an identity provider's access token say, or fails.
type TokenVerifier interface {
	Verify(ctx context.Context, token string) (access.Identity, error)
}

// surface is the part of the admin listener a try at the token came to,
// as the failures metric labels it: ui (/ui), debug (/debug) or admin
// (every other path).
type surface string

const (
	surfaceUI    surface = "ui"
	surfaceAdmin surface = "admin"
	surfaceDebug surface = "debug"
)

// Why a try at the token failed, as the failures metric labels it.
const (
	reasonWrongToken = "wrong_token" // a token other than the admin token, or none
	reasonThrottled  = "throttled"   // refused unchecked: no slot was free
)

// NewGuard is the guard of token. White space around it is ignored, as it
// is around the token sent, so a token read from a file ending in a newline
// still matches; a token of white space alone is no token.
func NewGuard(token string, opts GuardOptions) *Guard {
	g := &Guard{throttle: newThrottle(), now: opts.Now, log: opts.Logger, verifier: opts.Verifier}
	if g.now == nil {
		g.now = time.Now
	}
	if g.log == nil {
		g.log = slog.New(slog.DiscardHandler)
	}
	g.failures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "llmgw_admin_auth_failures_total",
		Help: "Tries at the admin token that failed, on the admin listener's path (ui, admin or debug), by reason: wrong_token (another token, or none), throttled (refused unchecked, its source or all sources together past their budget).",
	}, []string{"path", "reason"})
	for _, s := range []surface{surfaceUI, surfaceAdmin, surfaceDebug} {
		for _, r := range []string{reasonWrongToken, reasonThrottled} {
			g.failures.WithLabelValues(string(s), r)
		}
	}
	if opts.Registerer != nil {
		opts.Registerer.MustRegister(g.failures)
	}
	g.token.Store(newGuardToken(token, 0))
	return g
}

func newGuardToken(token string, version uint64) *guardToken {
	token = strings.TrimSpace(token)
	if token == "" {
		return &guardToken{version: version}
	}
	return &guardToken{sum: sha256.Sum256([]byte(token)), set: true, version: version}
}

// match reports whether token is t's, white space around it ignored;
// never with no token configured. Both sides are hashed first so the
// comparison takes the same time whatever the length of what was sent.
func (t *guardToken) match(token string) bool {
	sum := sha256.Sum256([]byte(strings.TrimSpace(token)))
	return t.set && subtle.ConstantTimeCompare(sum[:], t.sum[:]) == 1
}

// SetToken puts token in service in place of the one before, and reports
// whether it differs from it; only a token that differs changes Version.
func (g *Guard) SetToken(token string) bool {
	old := g.token.Load()
	next := newGuardToken(token, old.version+1)
	if next.set == old.set && next.sum == old.sum {
		return false
	}
	g.token.Store(next)
	return true
}

// Version counts the changes of the token: what was opened with the token
// of one version, a console session say, is closed at the next.
func (g *Guard) Version() uint64 { return g.token.Load().version }

// TokenSet reports whether an admin token is configured.
func (g *Guard) TokenSet() bool { return g.token.Load().set }

// Configured reports whether a token is configured, or a verifier of
// other tokens, and so whether any request can get through.
func (g *Guard) Configured() bool { return g.token.Load().set || g.verifier != nil }

// Wrap is h behind the guard: the token is read from the Authorization
// header as a bearer token (the scheme in any case), and h finds the
// identity it stands for in the request's context (access.FromContext).
func (g *Guard) Wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !g.Configured() {
			openai.WriteError(w, openai.Forbidden(noTokenMessage))
			return
		}
		a, err := g.Try(r)
		if err != nil {
			w.Header().Set("Connection", "close")
			openai.WriteError(w, err)
			return
		}
		id, ok := a.Identify(r.Context(), bearer(r))
		if !ok {
			w.Header().Set("WWW-Authenticate", "Bearer")
			msg := wrongTokenMessage
			if g.verifier != nil {
				msg = wrongCredentialMessage
			}
			openai.WriteError(w, openai.Unauthorized(msg))
			return
		}
		h.ServeHTTP(w, r.WithContext(access.NewContext(r.Context(), id)))
	})
}

// bearer is r's bearer token, or "" when it sends none.
func bearer(r *http.Request) string {
	h := r.Header.Get("Authorization")
	if len(h) < len("Bearer ") || !strings.EqualFold(h[:len("Bearer ")], "Bearer ") {
		return ""
	}
	return h[len("Bearer "):]
}

// Attempt is one try at the token, holding its slot in the throttle until
// it is compared.
type Attempt struct {
	g       *Guard
	src     netip.Prefix
	surface surface
	version uint64 // the version of the token compared; set by Match
}

// Try takes a slot for one try at the token from r's source (the
// connection's address), before anything r sends is read: a try that
// finds none free is refused with a 429 saying when to come back, counted
// and logged. Its answer should close the connection, so that it goes out
// at once, without the body being read first. Call Match on the Attempt
// with the token r sends.
func (g *Guard) Try(r *http.Request) (*Attempt, *openai.Error) {
	a := &Attempt{g: g, src: sourceOf(r.RemoteAddr), surface: surfaceOf(r.URL.Path)}
	wait, ok := g.throttle.take(a.src, g.now())
	if ok {
		return a, nil
	}
	a.fail(reasonThrottled)
	secs := int(math.Ceil(wait.Seconds()))
	return nil, openai.RateLimited("rate_limit_exceeded",
		fmt.Sprintf("Too many tries at the admin token: try again in %d s.", secs), secs)
}

// Match reports whether token is the admin token, white space around it
// ignored; never with no token configured. The right token gives the
// attempt's slot back; a wrong one keeps it, and is counted and logged.
func (a *Attempt) Match(token string) bool {
	t := a.g.token.Load()
	a.version = t.version
	if t.match(token) {
		a.g.throttle.giveBack(a.src, a.g.now())
		return true
	}
	a.fail(reasonWrongToken)
	return false
}

// Identify is the identity token stands for: the admin token's, else the
// one the guard's verifier names, if any. Like Match, a token that names
// one gives the attempt's slot back, and one that names none keeps it
// and is counted and logged.
func (a *Attempt) Identify(ctx context.Context, token string) (access.Identity, bool) {
	t := a.g.token.Load()
	a.version = t.version
	if t.match(token) {
		a.g.throttle.giveBack(a.src, a.g.now())
		return access.AdminToken(), true
	}
	if a.g.verifier != nil && strings.TrimSpace(token) != "" {
		if id, err := a.g.verifier.Verify(ctx, strings.TrimSpace(token)); err == nil {
			a.g.throttle.giveBack(a.src, a.g.now())
			return id, true
		}
	}
	a.fail(reasonWrongToken)
	return access.Identity{}, false
}

// Version is the version of the token Match compared against.
func (a *Attempt) Version() uint64 { return a.version }

// fail counts a failed try, and logs its source's failures when its time
// has come: never the token sent.
func (a *Attempt) fail(reason string) {
	a.g.failures.WithLabelValues(string(a.surface), reason).Inc()
	log, wrong, throttled := a.g.throttle.note(a.src, a.g.now(), reason == reasonThrottled)
	if log {
		a.g.log.Warn("admin token refused: wrong tokens, or tries past the throttle, from one source; logged at most once a minute a source",
			"source", sourceString(a.src), "path", string(a.surface), "wrong_tokens", wrong, "throttled", throttled)
	}
}

// surfaceOf is the surface of a request's path.
func surfaceOf(path string) surface {
	switch {
	case path == "/ui" || strings.HasPrefix(path, "/ui/"):
		return surfaceUI
	case path == "/debug" || strings.HasPrefix(path, "/debug/"):
		return surfaceDebug
	}
	return surfaceAdmin
}

// sourceString is a source as the log names it: an IPv4 address alone,
// an IPv6 /64 as a prefix.
func sourceString(p netip.Prefix) string {
	switch {
	case !p.IsValid():
		return "unknown"
	case p.Addr().Is4():
		return p.Addr().String()
	}
	return p.String()
}
