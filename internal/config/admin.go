package config

// The admin listener's sign-in: OpenID Connect for people and automation,
// beside the admin token, and the roles an identity provider's claim
// values map to.

import (
	"maps"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/access"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/tenant"
)

// OIDC is an OpenID Connect provider the console signs in with
// (authorization code flow with PKCE) and whose access tokens the admin
// API accepts.
type OIDC struct {
	// Issuer is the provider's issuer URL, as its discovery document and
	// its tokens name it.
	Issuer string `yaml:"issuer"`
	// ClientID is llmgw's client at the provider; its ID tokens are for it.
	ClientID string `yaml:"client_id"`
	// ClientSecretEnv and ClientSecretFile say where the client secret is
	// read: an environment variable, or a file (white space around it
	// ignored). One of them; the secret itself is never in the file.
	ClientSecretEnv  string `yaml:"client_secret_env,omitempty"`
	ClientSecretFile string `yaml:"client_secret_file,omitempty"`
	// RedirectURL is the console's callback as the browser reaches it:
	// https://<admin listener>/ui/oidc/callback, registered at the
	// provider.
	RedirectURL string `yaml:"redirect_url"`
	// Scopes are asked for at sign-in; openid is always among them.
	// Empty means openid, email and profile.
	Scopes []string `yaml:"scopes,omitempty"`
	// RolesClaim is the claim, in the ID token and in access tokens, whose
	// values (a string or a list of strings) Roles maps; empty means
	// "groups".
	RolesClaim string `yaml:"roles_claim,omitempty"`
	// Audience is the audience the admin API demands of an access token;
	// empty means ClientID.
	Audience string `yaml:"audience,omitempty"`
	// Roles maps a value of RolesClaim to the roles it grants: admin,
	// viewer, tenant_admin:<path>, tenant_viewer:<path>. A value not here
	// grants nothing; an identity granted nothing may not sign in.
	Roles map[string][]string `yaml:"roles"`
}

// DefaultOIDCScopes are the scopes asked for when none are set: who the
// person is and their email, for the audit trail.
var DefaultOIDCScopes = []string{"openid", "email", "profile"}

// DefaultRolesClaim is the claim read for roles when none is named.
const DefaultRolesClaim = "groups"

// envName is an environment variable's name.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Set reports whether o names a provider: any of its fields is set.
func (o *OIDC) Set() bool {
	return o.Issuer != "" || o.ClientID != "" || o.ClientSecretEnv != "" || o.ClientSecretFile != "" ||
		o.RedirectURL != "" || len(o.Scopes) > 0 || o.RolesClaim != "" || o.Audience != "" || len(o.Roles) > 0
}

// Alerts is where spend alerts go: each key's and tenant level's budget
// passing 50, 80 and 100% in its period. Alerts are kept in the store and
// shown on the console whether or not a webhook is set.
type Alerts struct {
	// WebhookURL receives each alert once as a POST of JSON that Slack and
	// Teams incoming webhooks accept; empty sends none.
	WebhookURL string `yaml:"webhook_url,omitempty"`
	// SecretEnv is the environment variable holding the secret each body
	// is signed with (HMAC-SHA256, X-Llmgw-Signature-256); required with
	// a webhook.
	SecretEnv string `yaml:"secret_env,omitempty"`
}

func (a *Alerts) validate(ps *problems) {
	if a.WebhookURL == "" {
		if a.SecretEnv != "" {
			ps.add("alerts.secret_env", "is set, but alerts.webhook_url is not: nothing would be signed")
		}
		return
	}
	if u, err := url.Parse(a.WebhookURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		ps.add("alerts.webhook_url", "must be an http(s) URL")
	}
	if !envName.MatchString(a.SecretEnv) {
		ps.add("alerts.secret_env", "must name the environment variable holding the webhook's signing secret")
	}
}

// DefaultAuditRetention is how long the audit trail is kept when no
// retention is set: a year (8760h), what an access review looks back over.
const DefaultAuditRetention = 365 * 24 * time.Hour

func (a *Admin) validate(ps *problems) {
	if a.AuditRetention != 0 && a.AuditRetention < time.Hour {
		ps.add("admin.audit_retention", "must be an hour or more, got %s", a.AuditRetention)
	}
	o := &a.OIDC
	if !o.Set() {
		if a.DisableToken {
			ps.add("admin.disable_token", "turns the admin token off, so admin.oidc must be set, or nothing could sign in")
		}
		return
	}
	const at = "admin.oidc"
	if u, err := url.Parse(o.Issuer); o.Issuer == "" || err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		ps.add(at+".issuer", "must be the provider's http(s) issuer URL, got %q", o.Issuer)
	}
	if o.ClientID == "" {
		ps.add(at+".client_id", "must be set: llmgw's client id at the provider")
	}
	switch {
	case o.ClientSecretEnv != "" && o.ClientSecretFile != "":
		ps.add(at+".client_secret_env", "set client_secret_env or client_secret_file, not both")
	case o.ClientSecretEnv == "" && o.ClientSecretFile == "":
		ps.add(at+".client_secret_env", "must be set, or client_secret_file: where the client secret is read; never the secret itself")
	case o.ClientSecretEnv != "" && !envName.MatchString(o.ClientSecretEnv):
		ps.add(at+".client_secret_env", "must be an environment variable's name, got a value that is not one")
	}
	if u, err := url.Parse(o.RedirectURL); o.RedirectURL == "" || err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.Path != "/ui/oidc/callback" {
		ps.add(at+".redirect_url", "must be the console's callback, http(s)://<admin listener>/ui/oidc/callback, got %q", o.RedirectURL)
	}
	if len(o.Scopes) > 0 && !slices.Contains(o.Scopes, "openid") {
		ps.add(at+".scopes", "must include openid")
	}
	if len(o.Roles) == 0 {
		ps.add(at+".roles", "must map at least one claim value to a role, or no one could sign in")
	}
	for _, value := range slices.Sorted(maps.Keys(o.Roles)) {
		roles := o.Roles[value]
		if len(roles) == 0 {
			ps.add(at+".roles."+value, "must list at least one role")
		}
		for i, r := range roles {
			if _, err := access.ParseRole(r, tenant.ParsePath); err != nil {
				ps.add(at+".roles."+value+"["+strconv.Itoa(i)+"]", "%v", err)
			}
		}
	}
}

// ClientSecret is the client secret, read from the environment variable
// or the file o names; empty when it is not there.
func (o *OIDC) ClientSecret() (string, error) {
	if o.ClientSecretEnv != "" {
		return os.Getenv(o.ClientSecretEnv), nil
	}
	b, err := os.ReadFile(o.ClientSecretFile)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}
