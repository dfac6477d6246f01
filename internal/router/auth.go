package router

// Authentication: the API key from the Authorization header, or from
// x-api-key as Anthropic-style clients send it, checked by the control
// plane's keyring. The key is never logged or echoed.

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/tenant"
	"gitea.mynodes.xyz/ilker/llmgw/internal/openai"
)

// authenticate finds the request's key with auth. Its errors are
// *openai.Error: the Authenticator decides what a client may be told.
func authenticate(auth Authenticator, hr *http.Request) (*tenant.Key, error) {
	secret := hr.Header.Get("x-api-key")
	if h := hr.Header.Get("Authorization"); h != "" {
		scheme, token, ok := strings.Cut(h, " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") {
			return nil, openai.Unauthorized("The Authorization header must be 'Bearer YOUR_API_KEY'.")
		}
		secret = strings.TrimSpace(token)
	}
	if secret == "" {
		return nil, openai.Unauthorized("You didn't provide an API key. Send it as 'Authorization: Bearer YOUR_API_KEY'.")
	}
	return auth.Authenticate(hr.Context(), secret)
}

// modelFor is the catalog entry that name, a model's name or alias,
// resolves to for key (nil without authentication). A model the key may
// not use answers 404 model_not_found, as one that does not exist, so
// that its existence does not leak.
func (s *snapshot) modelFor(key *tenant.Key, name string) (*catalog.Model, error) {
	m, ok := s.cat.Resolve(name)
	if !ok || !visible(key, m) {
		return nil, openai.ModelNotFound(name)
	}
	return m, nil
}

// visible reports whether key may use m, known by its name or any of its
// aliases: always for a nil key and one that names no models.
func visible(key *tenant.Key, m *catalog.Model) bool {
	if key == nil || len(key.Models) == 0 {
		return true
	}
	return key.Allows(m.Name) || key.Allows(m.Aliases...)
}

// SelfUsage tells a key about its own limits and usage.
type SelfUsage interface {
	KeyUsage(ctx context.Context, k *tenant.Key, now time.Time) (any, error)
}

// serveSelfUsage answers GET /v1/llmgw/usage: the calling key's own
// limits, usage and remaining budget, and nobody else's.
func (r *Router) serveSelfUsage(w http.ResponseWriter, hr *http.Request) {
	if hr.Method != http.MethodGet {
		openai.WriteError(w, openai.MethodNotAllowed(hr.Method))
		return
	}
	if r.opts.Auth == nil || r.opts.Self == nil {
		openai.WriteError(w, openai.NotFound(hr.URL.Path))
		return
	}
	key, err := authenticate(r.opts.Auth, hr)
	if err != nil {
		openai.WriteError(w, err)
		return
	}
	u, err := r.opts.Self.KeyUsage(hr.Context(), key, time.Now())
	if err != nil {
		r.log.Warn("reading a key's own usage", "key_id", key.ID, "err", err)
		openai.WriteError(w, openai.Unavailable("Usage cannot be read right now.", err))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(u)
}

// serveMCP answers /mcp, MCP's Streamable HTTP transport, for the
// request's key: authenticated first, as every other path (401 as an
// OpenAI error), then handed to the MCP gateway.
func (r *Router) serveMCP(w http.ResponseWriter, hr *http.Request) {
	if r.opts.MCP == nil {
		openai.WriteError(w, openai.NotFound(hr.URL.Path))
		return
	}
	var key *tenant.Key
	if r.opts.Auth != nil {
		var err error
		if key, err = authenticate(r.opts.Auth, hr); err != nil {
			openai.WriteError(w, err)
			return
		}
	}
	r.opts.MCP.ServeHTTP(w, hr, key)
}
