package oidc_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/access"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/oidc"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/oidc/oidctest"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/tenant"
)

// redirect is the console's callback as registered; the tests never
// reach it: the provider's redirect to it is where a sign-in stops.
const redirect = "http://127.0.0.1:9/ui/oidc/callback"

func roles(t *testing.T) map[string][]access.Role {
	out := map[string][]access.Role{}
	for v, rs := range oidctest.Roles {
		for _, s := range rs {
			r, err := access.ParseRole(s, tenant.ParsePath)
			if err != nil {
				t.Fatal(err)
			}
			out[v] = append(out[v], r)
		}
	}
	return out
}

func newProvider(t *testing.T, op *oidctest.Provider, change func(*oidc.Options)) *oidc.Provider {
	opts := oidc.Options{Issuer: op.Issuer, ClientID: oidctest.Client, ClientSecret: oidctest.Secret, RedirectURL: redirect,
		Scopes: []string{"email", oidctest.GroupsScope}, Roles: roles(t)}
	if change != nil {
		change(&opts)
	}
	return oidc.New(opts)
}

// signIn runs a sign-in as username through the provider's login form,
// and returns the code and state it sends back, and the sign-in's Pending.
func signIn(t *testing.T, p *oidc.Provider, op *oidctest.Provider, username string) (string, oidc.Pending) {
	t.Helper()
	authURL, pend, err := p.Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"code_challenge_method=S256", "code_challenge=", "nonce=" + pend.Nonce, "state=" + pend.State} {
		if !strings.Contains(authURL, want) {
			t.Errorf("the sign-in URL %s has no %s", authURL, want)
		}
	}
	back := op.Login(t, authURL, username)
	if got := back.Query().Get("state"); got != pend.State {
		t.Fatalf("the provider sent back state %q, want %q", got, pend.State)
	}
	return back.Query().Get("code"), pend
}

// TestSignIn: each user signs in through the provider's own login page
// with PKCE, state and nonce, and gets the roles its groups map to; a user
// whose groups map to none is refused.
func TestSignIn(t *testing.T) {
	op := oidctest.Start(t, oidctest.Options{RedirectURIs: []string{redirect}})
	p := newProvider(t, op, nil)
	for _, tc := range []struct {
		user  string
		want  access.Identity
		noRol bool
	}{
		{"alice", access.Identity{Subject: "u-admin", Email: "alice@example.com", Roles: []access.Role{{Kind: access.Admin}}}, false},
		{"victor", access.Identity{Subject: "u-viewer", Email: "victor@example.com", Roles: []access.Role{{Kind: access.Viewer}}}, false},
		{"lena", access.Identity{Subject: "u-acme", Email: "lena@acme.example", Roles: []access.Role{{Kind: access.TenantAdmin, Tenant: "acme"}}}, false},
		{"sam", access.Identity{Subject: "u-search", Email: "sam@acme.example", Roles: []access.Role{{Kind: access.TenantViewer, Tenant: "acme/search"}}}, false},
		{"nina", access.Identity{Subject: "u-nobody", Email: "nina@example.com"}, true},
	} {
		code, pend := signIn(t, p, op, tc.user)
		id, exp, err := p.Finish(context.Background(), code, pend)
		if tc.noRol {
			if !errors.Is(err, oidc.ErrNoRoles) {
				t.Errorf("%s: %v, want ErrNoRoles", tc.user, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tc.user, err)
		}
		if diff := cmp.Diff(tc.want, id); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.user, diff)
		}
		if d := time.Until(exp); d < 50*time.Minute || d > 61*time.Minute {
			t.Errorf("%s: the ID token expires in %v, want about an hour", tc.user, d)
		}
	}
}

// TestSignInRefusals: a code used twice, a code exchanged without its
// PKCE verifier, and an ID token without the sign-in's nonce are refused.
func TestSignInRefusals(t *testing.T) {
	op := oidctest.Start(t, oidctest.Options{RedirectURIs: []string{redirect}})
	p := newProvider(t, op, nil)
	ctx := context.Background()

	code, pend := signIn(t, p, op, "alice")
	if _, _, err := p.Finish(ctx, code, pend); err != nil {
		t.Fatal(err)
	}
	if _, _, err := p.Finish(ctx, code, pend); err == nil {
		t.Error("a code exchanged a second time was accepted")
	}

	code, pend = signIn(t, p, op, "alice")
	other := pend
	other.Verifier = strings.Repeat("x", 43)
	if _, _, err := p.Finish(ctx, code, other); err == nil {
		t.Error("a code exchanged with another PKCE verifier was accepted")
	}

	code, pend = signIn(t, p, op, "alice")
	pend.Nonce = "another-nonce"
	if _, _, err := p.Finish(ctx, code, pend); err == nil || !strings.Contains(err.Error(), "nonce") {
		t.Errorf("an ID token with another sign-in's nonce: %v, want refused for its nonce", err)
	}
}

// TestAccessTokens: the admin API's verifier takes the provider's JWT
// access tokens with the same roles, and refuses one from another issuer,
// for another audience, expired, or not a JWT.
func TestAccessTokens(t *testing.T) {
	op := oidctest.Start(t, oidctest.Options{RedirectURIs: []string{redirect}})
	other := oidctest.Start(t, oidctest.Options{RedirectURIs: []string{redirect}})
	p := newProvider(t, op, nil)
	ctx := context.Background()

	tok := op.AccessToken(t, "lena", redirect)
	id, err := p.Verify(ctx, tok)
	if err != nil {
		t.Fatal(err)
	}
	if want := []access.Role{{Kind: access.TenantAdmin, Tenant: "acme"}}; id.Subject != "u-acme" || !cmp.Equal(id.Roles, want) {
		t.Errorf("lena's access token names %+v, want u-acme with %v", id, want)
	}
	if _, err := p.Verify(ctx, other.AccessToken(t, "lena", redirect)); err == nil {
		t.Error("an access token from another issuer was accepted")
	}
	if _, err := newProvider(t, op, func(o *oidc.Options) { o.Audience = "another-api" }).Verify(ctx, tok); err == nil {
		t.Error("an access token for another audience was accepted")
	}
	later := func() time.Time { return time.Now().Add(13 * time.Hour) }
	if _, err := newProvider(t, op, func(o *oidc.Options) { o.Now = later }).Verify(ctx, tok); err == nil {
		t.Error("an expired access token was accepted")
	}
	if _, err := p.Verify(ctx, "not-a-jwt"); err == nil {
		t.Error("a token that is not a JWT was accepted")
	}
}
