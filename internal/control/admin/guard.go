package admin

// The admin token: what the admin API, and every other guarded path of the
// admin listener, asks for before it answers anything.

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"

	"gitea.mynodes.xyz/ilker/llmgw/internal/openai"
)

// noTokenMessage is the refusal of every guarded path when no admin token
// is configured: no token sent can open them, so it says how to set one.
const noTokenMessage = "The admin API and profiles are disabled because no admin token is configured: set LLMGW_ADMIN_TOKEN or admin.token in the config, then send it as Authorization: Bearer <token>."

// wrongTokenMessage is the refusal of a request without the admin token,
// or with another.
const wrongTokenMessage = "This admin path needs the admin token: send Authorization: Bearer <token>."

// Guard lets through only requests that carry the admin token as a bearer
// token. With no token configured it lets nothing through: every request
// gets 403 and noTokenMessage. A missing or wrong token gets 401 with
// WWW-Authenticate: Bearer. A refusal says nothing of what the path holds,
// nor whether it exists.
type Guard struct {
	token [sha256.Size]byte // the configured token's hash
	set   bool              // reports whether a token is configured
}

// NewGuard is the guard of token. White space around it is ignored, as it
// is around the token sent, so a token read from a file ending in a newline
// still matches; a token of white space alone is no token.
func NewGuard(token string) *Guard {
	token = strings.TrimSpace(token)
	if token == "" {
		return &Guard{}
	}
	return &Guard{token: sha256.Sum256([]byte(token)), set: true}
}

// Configured reports whether a token is configured, and so whether any
// request can get through.
func (g *Guard) Configured() bool { return g.set }

// Wrap is h behind the guard.
func (g *Guard) Wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case !g.set:
			openai.WriteError(w, openai.Forbidden(noTokenMessage))
		case !g.authorized(r):
			w.Header().Set("WWW-Authenticate", "Bearer")
			openai.WriteError(w, openai.Unauthorized(wrongTokenMessage))
		default:
			h.ServeHTTP(w, r)
		}
	})
}

// Match reports whether token is the admin token, white space around it
// ignored; never with no token configured. Both sides are hashed first so
// the comparison takes the same time whatever the length of what was sent.
func (g *Guard) Match(token string) bool {
	sum := sha256.Sum256([]byte(strings.TrimSpace(token)))
	return g.set && subtle.ConstantTimeCompare(sum[:], g.token[:]) == 1
}

// authorized reports whether r carries the admin token as a bearer token
// (the scheme in any case).
func (g *Guard) authorized(r *http.Request) bool {
	h := r.Header.Get("Authorization")
	if len(h) < len("Bearer ") || !strings.EqualFold(h[:len("Bearer ")], "Bearer ") {
		return false
	}
	return g.Match(h[len("Bearer "):])
}
