// Package admin is llmgw's admin HTTP API: creating, listing and revoking
// API keys, setting limits on tenant levels, reading the usage ledger and
// the audit trail, all over the store, each for the roles of who asks. It also holds Self, what a key may read about itself.
package admin

// The handler: routes behind the guard of the admin token and of the
// identities it verifies, each checking the roles of who asks, and the
// JSON helpers every route shares. Errors are OpenAI-style bodies, as on
// the API listener.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/access"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/keys"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/store"
	"gitea.mynodes.xyz/ilker/llmgw/internal/openai"
)

// Options configure the admin API.
type Options struct {
	// Guard holds the admin token every route demands as a bearer token,
	// and the throttle on guessing it. Nil refuses every route with 403
	// and noTokenMessage, reads as well as writes, as a guard with no
	// token does.
	Guard *Guard
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Logger gets an audit line per change and the causes of failures;
	// nil discards them.
	Logger *slog.Logger
}

// maxBodyBytes bounds an admin request body: a key spec or a set of
// limits is a few hundred bytes.
const maxBodyBytes = 64 << 10

type api struct {
	st   store.Store
	ring *keys.Keyring // may be nil; told of revocations and tenant changes
	now  func() time.Time
	log  *slog.Logger
}

// New returns the admin API's handler, serving paths under /admin/ behind
// opts.Guard. ring, when not nil, is told of each revocation
// and tenant change so this replica applies them at once; the others see
// them within the ring's MaxAge.
func New(st store.Store, ring *keys.Keyring, opts Options) http.Handler {
	a := &api{st: st, ring: ring, now: opts.Now, log: opts.Logger}
	if a.now == nil {
		a.now = time.Now
	}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}

	m := http.NewServeMux()
	m.HandleFunc("POST /admin/keys", a.createKey)
	m.HandleFunc("GET /admin/keys", a.listKeys)
	m.HandleFunc("DELETE /admin/keys/{id}", a.revokeKey)
	m.HandleFunc("POST /admin/keys/{id}/revoke", a.revokeKey)
	m.HandleFunc("GET /admin/tenants", a.listTenants)
	m.HandleFunc("PUT /admin/tenants/{path...}", a.setTenant)
	m.HandleFunc("GET /admin/usage", a.usage)
	m.HandleFunc("GET /admin/audit", a.auditList)
	// The same paths with any other method, and everything else.
	for _, p := range []string{"/admin/keys", "/admin/keys/{id}", "/admin/keys/{id}/revoke", "/admin/tenants", "/admin/tenants/{path...}", "/admin/usage", "/admin/audit"} {
		m.HandleFunc(p, methodNotAllowed)
	}
	m.HandleFunc("/", notFound)
	g := opts.Guard
	if g == nil {
		g = NewGuard("", GuardOptions{})
	}
	return g.Wrap(withRole(m))
}

// withRole refuses every path to an identity that holds no role, with
// 403, whatever the path; the routes check the roles the others hold.
func withRole(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !access.FromContext(r.Context()).Any() {
			forbidden(w)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// AdminOnly is h for an admin, as a guard's Wrap names it, and 403 for
// every other identity: profiles and whatever else of the listener is
// not the admin API's or the console's.
func AdminOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !access.FromContext(r.Context()).IsAdmin() {
			forbidden(w)
			return
		}
		h.ServeHTTP(w, r)
	})
}

func methodNotAllowed(w http.ResponseWriter, r *http.Request) {
	openai.WriteError(w, openai.MethodNotAllowed(r.Method))
}

// notFound answers an unknown admin URL without repeating it: a key pasted
// into a URL must not come back in the body.
func notFound(w http.ResponseWriter, r *http.Request) {
	openai.WriteError(w, &openai.Error{Status: http.StatusNotFound, Type: "invalid_request_error", Code: "unknown_url", Message: "Unknown admin URL."})
}

// internal answers a failure of the store or of llmgw itself: the cause
// goes to the log, a plain message to the client.
func (a *api) internal(w http.ResponseWriter, what string, err error) {
	a.log.Error("admin: "+what, "err", err)
	openai.WriteError(w, openai.Internal(err))
}

// decode reads a JSON body into v strictly: unknown fields, a second value
// or more than maxBodyBytes are 400s, naming the field where one is at
// fault; a body that does not arrive within the listener's deadline is a
// 408.
func decode(w http.ResponseWriter, r *http.Request, v any) *openai.Error {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil {
		if dec.Decode(&struct{}{}) != io.EOF {
			return openai.BadRequest("", "The request body must be one JSON object.")
		}
		return nil
	}
	var (
		typeErr *json.UnmarshalTypeError
		tooBig  *http.MaxBytesError
		netErr  net.Error
	)
	switch {
	case errors.As(err, &tooBig):
		return openai.TooLarge(maxBodyBytes)
	case errors.As(err, &netErr) && netErr.Timeout():
		w.Header().Set("Connection", "close")
		return openai.BodyTimedOut()
	case errors.As(err, &typeErr) && typeErr.Field != "":
		return openai.BadRequest(typeErr.Field, "%s: must be a JSON %s.", typeErr.Field, jsonKind(typeErr.Type.Kind().String()))
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		field := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return openai.BadRequest(field, "%s: unknown field.", field)
	case errors.Is(err, io.EOF):
		return openai.BadRequest("", "The request body is empty; want a JSON object.")
	}
	return openai.BadRequest("", "The request body is not valid JSON.")
}

// jsonKind names a Go kind as JSON calls it.
func jsonKind(kind string) string {
	switch {
	case strings.HasPrefix(kind, "int"), strings.HasPrefix(kind, "uint"), strings.HasPrefix(kind, "float"):
		return "number"
	case kind == "slice":
		return "array"
	case kind == "struct", kind == "map":
		return "object"
	case kind == "bool":
		return "boolean"
	}
	return kind
}

// fieldError turns a keys.FieldError into a 400 naming the field.
func fieldError(err error) (*openai.Error, bool) {
	fe, ok := keys.AsFieldError(err)
	if !ok {
		return nil, false
	}
	return openai.BadRequest(fe.Field, "%s: %s.", fe.Field, fe.Message), true
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		openai.WriteError(w, openai.Internal(fmt.Errorf("admin: encoding response: %w", err)))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// list is the shape of every listing, as OpenAI lists things.
type list[T any] struct {
	Object string `json:"object"` // always "list"
	Data   []T    `json:"data"`
}

func newList[T any](data []T) list[T] {
	if data == nil {
		data = []T{}
	}
	return list[T]{Object: "list", Data: data}
}
