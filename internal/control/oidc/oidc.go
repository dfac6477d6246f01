// Package oidc signs people and automation in to the console and the
// admin API with an OpenID Connect provider: the authorization code flow
// with PKCE, state and nonce for a browser, and an access token (a JWT
// checked against the provider's keys: issuer, audience, expiry) for
// automation; both named as an access.Identity whose roles come from a
// claim's values through the configured map.
package oidc

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	gooidc "github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/access"
)

// Options configure a Provider.
type Options struct {
	Issuer       string // the provider's issuer URL
	ClientID     string // llmgw's client; the ID tokens' audience
	ClientSecret string
	RedirectURL  string   // the console's callback, as registered
	Scopes       []string // asked for at sign-in; openid is added when missing
	// RolesClaim is the claim whose values Roles maps; empty means
	// "groups".
	RolesClaim string
	// Audience is what an access token must be for; empty means ClientID.
	Audience string
	// Roles maps a value of RolesClaim to the roles it grants.
	Roles map[string][]access.Role
	// HTTPClient reaches the provider; nil means one with a 10 s timeout.
	HTTPClient *http.Client
	// Now is the clock tokens' expiry is checked against; nil means
	// time.Now.
	Now func() time.Time
}

// discoveryTimeout bounds reading the provider's discovery document and
// keys, and exchanging a code: the provider is a service llmgw calls
// while a person waits.
const discoveryTimeout = 10 * time.Second

// Provider is a configured OpenID Connect provider. Its discovery
// document is read at the first use that needs it, and again after a
// failure, so llmgw starts while the provider is away.
type Provider struct {
	opts Options

	mu    sync.Mutex // protects found
	found *discovered
}

// discovered is what the discovery document gave.
type discovered struct {
	oauth   oauth2.Config
	idToken *gooidc.IDTokenVerifier // issuer, ClientID, expiry, signature
	access  *gooidc.IDTokenVerifier // issuer, Audience, expiry, signature
}

// New returns a Provider; nothing is fetched until it is used.
func New(opts Options) *Provider {
	if opts.RolesClaim == "" {
		opts.RolesClaim = "groups"
	}
	if opts.Audience == "" {
		opts.Audience = opts.ClientID
	}
	if !slices.Contains(opts.Scopes, gooidc.ScopeOpenID) {
		opts.Scopes = append([]string{gooidc.ScopeOpenID}, opts.Scopes...)
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{Timeout: discoveryTimeout}
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Provider{opts: opts}
}

// discover reads the discovery document once it has answered.
func (p *Provider) discover(ctx context.Context) (*discovered, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.found != nil {
		return p.found, nil
	}
	ctx = gooidc.ClientContext(ctx, p.opts.HTTPClient)
	prov, err := gooidc.NewProvider(ctx, p.opts.Issuer)
	if err != nil {
		return nil, fmt.Errorf("oidc: reading the provider's discovery document: %w", err)
	}
	p.found = &discovered{
		oauth: oauth2.Config{ClientID: p.opts.ClientID, ClientSecret: p.opts.ClientSecret, RedirectURL: p.opts.RedirectURL,
			Endpoint: prov.Endpoint(), Scopes: p.opts.Scopes},
		idToken: prov.Verifier(&gooidc.Config{ClientID: p.opts.ClientID, Now: p.opts.Now}),
		access:  prov.Verifier(&gooidc.Config{ClientID: p.opts.Audience, Now: p.opts.Now}),
	}
	return p.found, nil
}

// Pending is a sign-in begun: what its callback must bring back (State)
// and what only llmgw holds (the nonce the ID token must carry and the
// PKCE verifier the code is exchanged with).
type Pending struct {
	State, Nonce, Verifier string
}

// Start begins a sign-in: the provider's URL to send the browser to, and
// the Pending to keep until the callback.
func (p *Provider) Start(ctx context.Context) (string, Pending, error) {
	d, err := p.discover(ctx)
	if err != nil {
		return "", Pending{}, err
	}
	pend := Pending{State: oauth2.GenerateVerifier(), Nonce: oauth2.GenerateVerifier(), Verifier: oauth2.GenerateVerifier()}
	u := d.oauth.AuthCodeURL(pend.State, gooidc.Nonce(pend.Nonce), oauth2.S256ChallengeOption(pend.Verifier))
	return u, pend, nil
}

// ErrNoRoles is a sign-in or token whose claims map to no role.
var ErrNoRoles = errors.New("oidc: the identity's claims map to no role")

// Finish exchanges the callback's code with pend's PKCE verifier, checks
// the ID token (signature, issuer, audience, expiry and pend's nonce),
// and returns who signed in and when the ID token expires. An identity
// whose claims map to no role is ErrNoRoles.
func (p *Provider) Finish(ctx context.Context, code string, pend Pending) (access.Identity, time.Time, error) {
	d, err := p.discover(ctx)
	if err != nil {
		return access.Identity{}, time.Time{}, err
	}
	ctx = gooidc.ClientContext(ctx, p.opts.HTTPClient)
	tok, err := d.oauth.Exchange(ctx, code, oauth2.VerifierOption(pend.Verifier))
	if err != nil {
		return access.Identity{}, time.Time{}, fmt.Errorf("oidc: exchanging the code: %w", err)
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return access.Identity{}, time.Time{}, errors.New("oidc: the provider answered the code with no ID token")
	}
	idt, err := d.idToken.Verify(ctx, raw)
	if err != nil {
		return access.Identity{}, time.Time{}, fmt.Errorf("oidc: the ID token: %w", err)
	}
	if idt.Nonce != pend.Nonce {
		return access.Identity{}, time.Time{}, errors.New("oidc: the ID token's nonce is not the sign-in's")
	}
	id, err := p.identity(idt)
	if err != nil {
		return access.Identity{}, time.Time{}, err
	}
	if !id.Any() {
		return id, time.Time{}, ErrNoRoles
	}
	return id, idt.Expiry, nil
}

// Verify names the identity an access token stands for: a JWT signed by
// one of the provider's keys, from its issuer, for the configured
// audience and not expired. Its roles may be none.
func (p *Provider) Verify(ctx context.Context, token string) (access.Identity, error) {
	d, err := p.discover(ctx)
	if err != nil {
		return access.Identity{}, err
	}
	t, err := d.access.Verify(gooidc.ClientContext(ctx, p.opts.HTTPClient), token)
	if err != nil {
		return access.Identity{}, fmt.Errorf("oidc: the access token: %w", err)
	}
	return p.identity(t)
}

// identity is the subject, email and mapped roles of a verified token.
func (p *Provider) identity(t *gooidc.IDToken) (access.Identity, error) {
	var claims map[string]any
	if err := t.Claims(&claims); err != nil {
		return access.Identity{}, fmt.Errorf("oidc: reading the token's claims: %w", err)
	}
	id := access.Identity{Subject: t.Subject}
	id.Email, _ = claims["email"].(string)
	id.Roles = p.roles(claims[p.opts.RolesClaim])
	return id, nil
}

// roles is what the roles claim's value, a string or a list of strings,
// maps to, each role once, in the order of the values.
func (p *Provider) roles(v any) []access.Role {
	var values []string
	switch x := v.(type) {
	case string:
		values = []string{x}
	case []any:
		for _, e := range x {
			if s, ok := e.(string); ok {
				values = append(values, s)
			}
		}
	}
	var out []access.Role
	for _, val := range values {
		for _, r := range p.opts.Roles[val] {
			if !slices.Contains(out, r) {
				out = append(out, r)
			}
		}
	}
	return out
}
