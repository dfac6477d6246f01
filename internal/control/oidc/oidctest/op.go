// Package oidctest runs a real OpenID Provider in-process for tests: the
// example OP of github.com/zitadel/oidc (an OpenID-certified library), with
// static users, their groups and one confidential client whose access
// tokens are JWTs. Tests alone import it: it is never linked into llmgw.
package oidctest

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/zitadel/oidc/v3/example/server/exampleop"
	"github.com/zitadel/oidc/v3/example/server/storage"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
	"golang.org/x/oauth2"
	"golang.org/x/text/language"

	"gitea.mynodes.xyz/ilker/llmgw/internal/h1"
)

// Client and Secret are the provider's one client, llmgw's.
const (
	Client = "llmgw"
	Secret = "llmgw-client-secret"
)

// Password is every user's password.
const Password = "correct horse battery"

// GroupsScope is the scope that asks for the groups claim, and
// GroupsClaim the claim.
const (
	GroupsScope = "groups"
	GroupsClaim = "groups"
)

// User is one of the provider's users and the groups it is in.
type User struct {
	ID, Username, Email string
	Groups              []string
}

// Users are the provider's users: one for each role of the role matrix,
// and one in no group llmgw maps.
var Users = []User{
	{ID: "u-admin", Username: "alice", Email: "alice@example.com", Groups: []string{"platform-team"}},
	{ID: "u-viewer", Username: "victor", Email: "victor@example.com", Groups: []string{"auditors"}},
	{ID: "u-acme", Username: "lena", Email: "lena@acme.example", Groups: []string{"acme-leads", "staff"}},
	{ID: "u-search", Username: "sam", Email: "sam@acme.example", Groups: []string{"acme-search"}},
	{ID: "u-nobody", Username: "nina", Email: "nina@example.com", Groups: []string{"staff"}},
}

// Roles is the roles map llmgw is configured with for Users' groups.
var Roles = map[string][]string{
	"platform-team": {"admin"},
	"auditors":      {"viewer"},
	"acme-leads":    {"tenant_admin:acme"},
	"acme-search":   {"tenant_viewer:acme/search"},
}

// Provider is a running OP.
type Provider struct {
	// Issuer is its issuer URL, ending in "/".
	Issuer string
}

// Options shape a Provider.
type Options struct {
	// RedirectURIs are the client's registered redirect URIs.
	RedirectURIs []string
	// IDTokenLifetime is how long its ID tokens last; zero means an hour.
	IDTokenLifetime time.Duration
}

// Start runs a provider on a loopback listener until t ends.
func Start(t testing.TB, opts Options) *Provider {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	issuer := "http://" + ln.Addr().String() + "/"
	users := userStore{}
	groups := map[string][]string{}
	for _, u := range Users {
		users[u.ID] = &storage.User{ID: u.ID, Username: u.Username, Password: Password, FirstName: u.Username, LastName: "Example",
			Email: u.Email, EmailVerified: true, PreferredLanguage: language.English}
		groups[u.ID] = u.Groups
	}
	lifetime := opts.IDTokenLifetime
	if lifetime <= 0 {
		lifetime = time.Hour
	}
	c := &client{Client: storage.WebClient(Client, Secret, opts.RedirectURIs...), lifetime: lifetime}
	st := &store{Storage: storage.NewStorageWithClients(users, map[string]*storage.Client{Client: c.Client}), client: c, groups: groups}
	srv := h1.NewStdServer(exampleop.SetupServer(issuer, st, nil, false), h1.Deadlines{Header: 10 * time.Second, Body: 10 * time.Second, Idle: time.Minute})
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return &Provider{Issuer: issuer}
}

// userStore is the provider's users, by id.
type userStore map[string]*storage.User

func (u userStore) GetUserByID(id string) *storage.User { return u[id] }
func (u userStore) GetUserByUsername(name string) *storage.User {
	for _, x := range u {
		if x.Username == name {
			return x
		}
	}
	return nil
}
func (u userStore) ExampleClientID() string { return Client }

// client is the example's web client with JWT access tokens, the groups
// scope allowed, the profile and email claims in the ID token, and an ID
// token lifetime of its own.
type client struct {
	*storage.Client
	lifetime time.Duration
}

func (c *client) AccessTokenType() op.AccessTokenType { return op.AccessTokenTypeJWT }
func (c *client) IsScopeAllowed(scope string) bool {
	return scope == GroupsScope || c.Client.IsScopeAllowed(scope)
}
func (c *client) IDTokenUserinfoClaimsAssertion() bool { return true }
func (c *client) IDTokenLifetime() time.Duration       { return c.lifetime }
func (c *client) RestrictAdditionalIdTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}
func (c *client) RestrictAdditionalAccessTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}

// store is the example's storage, its client ours, with each user's
// groups in the ID token and the access token when the groups scope is
// asked for.
type store struct {
	*storage.Storage
	client *client
	groups map[string][]string // key: user id
}

func (s *store) GetClientByClientID(ctx context.Context, id string) (op.Client, error) {
	if id == Client {
		return s.client, nil
	}
	return s.Storage.GetClientByClientID(ctx, id)
}

func (s *store) SetUserinfoFromRequest(ctx context.Context, info *oidc.UserInfo, req op.IDTokenRequest, scopes []string) error {
	if err := s.Storage.SetUserinfoFromRequest(ctx, info, req, scopes); err != nil {
		return err
	}
	if slices.Contains(scopes, GroupsScope) {
		info.AppendClaims(GroupsClaim, s.groups[req.GetSubject()])
	}
	return nil
}

func (s *store) GetPrivateClaimsFromScopes(ctx context.Context, userID, clientID string, scopes []string) (map[string]any, error) {
	claims, err := s.Storage.GetPrivateClaimsFromScopes(ctx, userID, clientID, scopes)
	if err != nil {
		return nil, err
	}
	if slices.Contains(scopes, GroupsScope) {
		if claims == nil {
			claims = map[string]any{}
		}
		claims[GroupsClaim] = s.groups[userID]
	}
	return claims, nil
}

// URL is the provider's URL for path.
func (p *Provider) URL(path string) string { return p.Issuer + path }

// Login follows authURL, a sign-in's start at the provider, through the
// provider's own login form as username, the way a browser posts it, and
// returns where the provider sends the browser back: the client's
// redirect URI with the code and state.
func (p *Provider) Login(t testing.TB, authURL, username string) *url.URL {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	var back *url.URL
	c := &http.Client{Jar: jar, Timeout: 10 * time.Second, CheckRedirect: func(r *http.Request, _ []*http.Request) error {
		if !strings.HasPrefix(r.URL.String(), p.Issuer) {
			back = r.URL
			return http.ErrUseLastResponse
		}
		return nil
	}}
	resp, err := c.Get(authURL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := regexp.MustCompile(`name="id" value="([^"]+)"`).FindSubmatch(body)
	if m == nil {
		t.Fatalf("the provider's answer to the sign-in (%d) has no login form:\n%s", resp.StatusCode, body)
	}
	resp, err = c.PostForm(p.Issuer+"login/username", url.Values{"id": {string(m[1])}, "username": {username}, "password": {Password}})
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if back == nil {
		t.Fatalf("the provider did not send the browser back after the login (%d):\n%s", resp.StatusCode, body)
	}
	return back
}

// AccessToken signs username in as a client of its own would, with PKCE
// and the groups scope, and returns the JWT access token it is given.
func (p *Provider) AccessToken(t testing.TB, username, redirectURI string) string {
	t.Helper()
	conf := oauth2.Config{ClientID: Client, ClientSecret: Secret, RedirectURL: redirectURI, Scopes: []string{"openid", "email", GroupsScope},
		Endpoint: oauth2.Endpoint{AuthURL: p.Issuer + "auth", TokenURL: p.Issuer + "oauth/token"}}
	verifier := oauth2.GenerateVerifier()
	back := p.Login(t, conf.AuthCodeURL("state-"+username, oauth2.S256ChallengeOption(verifier)), username)
	tok, err := conf.Exchange(context.Background(), back.Query().Get("code"), oauth2.VerifierOption(verifier))
	if err != nil {
		t.Fatal(err)
	}
	return tok.AccessToken
}
