package app

// Sign-in on the admin listener beside the admin token: the OpenID
// Connect provider admin.oidc names, whose sign-ins the console takes and
// whose access tokens the admin API takes, with the roles its claim maps.

import (
	"fmt"
	"maps"
	"os"
	"slices"

	"gitea.mynodes.xyz/ilker/llmgw/internal/config"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/access"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/oidc"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/tenant"
)

// oidcProvider is the provider cfg configures, or nil for none. Nothing
// is fetched from it yet: its discovery document is read at first use.
func oidcProvider(cfg *config.Config) (*oidc.Provider, error) {
	o := &cfg.Admin.OIDC
	if !o.Set() {
		return nil, nil
	}
	secret, err := o.ClientSecret()
	if err != nil {
		return nil, fmt.Errorf("admin.oidc: reading the client secret: %w", err)
	}
	if secret == "" {
		return nil, fmt.Errorf("admin.oidc: the client secret is empty: set %s", secretSource(o))
	}
	roles := map[string][]access.Role{}
	for _, v := range slices.Sorted(maps.Keys(o.Roles)) {
		for _, s := range o.Roles[v] {
			r, err := access.ParseRole(s, tenant.ParsePath)
			if err != nil {
				return nil, fmt.Errorf("admin.oidc.roles.%s: %w", v, err)
			}
			roles[v] = append(roles[v], r)
		}
	}
	scopes := o.Scopes
	if len(scopes) == 0 {
		scopes = config.DefaultOIDCScopes
	}
	return oidc.New(oidc.Options{Issuer: o.Issuer, ClientID: o.ClientID, ClientSecret: secret, RedirectURL: o.RedirectURL,
		Scopes: scopes, RolesClaim: o.RolesClaim, Audience: o.Audience, Roles: roles}), nil
}

// secretSource names where o's client secret is read.
func secretSource(o *config.OIDC) string {
	if o.ClientSecretEnv != "" {
		return "the environment variable " + o.ClientSecretEnv
	}
	return "the file " + o.ClientSecretFile
}

// envAdminToken is the environment variable the admin token is read from
// when admin.token is empty.
const envAdminToken = "LLMGW_ADMIN_TOKEN"

// adminToken is the admin token cfg gives: admin.token, else
// LLMGW_ADMIN_TOKEN; empty for none, and with admin.disable_token.
func adminToken(cfg *config.Config) string {
	if cfg.Admin.DisableToken {
		return ""
	}
	if cfg.Admin.Token != "" {
		return cfg.Admin.Token
	}
	return os.Getenv(envAdminToken)
}
