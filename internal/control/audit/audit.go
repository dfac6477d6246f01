// Package audit is the trail of changes made through the console and the
// admin API, and of signing in and out and reloading the configuration:
// who did what to what, when, and from where. Everything here is data;
// the store keeps it, append-only for the gateway, for the retention set.
package audit

import "time"

// Action is what an entry records.
type Action string

// The actions recorded.
const (
	KeyCreate      Action = "key.create"      // Target: the key id
	KeyRevoke      Action = "key.revoke"      // Target: the key id
	TenantLimits   Action = "tenant.limits"   // Target: the tenant path; Detail: the limits set
	SignIn         Action = "signin"          // Detail: how (oidc, admin token)
	SignInFailed   Action = "signin.failed"   // Detail: why
	SignOut        Action = "signout"         //
	ConfigReload   Action = "config.reload"   // Target: the file
	ConfigRefused  Action = "config.refused"  // Target: the file; Detail: why
	RetentionPrune Action = "audit.retention" // Detail: how many entries were removed
)

// Actions are every action, in the order the console offers them.
var Actions = []Action{KeyCreate, KeyRevoke, TenantLimits, SignIn, SignInFailed, SignOut, ConfigReload, ConfigRefused, RetentionPrune}

// Entry is one recorded change.
type Entry struct {
	Time time.Time `json:"time"`
	// Subject is who: the identity provider's subject, "admin token", or
	// "llmgw" for what the gateway does itself (a reload, pruning); Email
	// is theirs when known.
	Subject string `json:"subject"`
	Email   string `json:"email,omitempty"`
	Action  Action `json:"action"`
	// Target is what was changed: a key id, a tenant path, a file.
	Target string `json:"target,omitempty"`
	// Tenant is the tenant path the change falls in; empty for what
	// belongs to no tenant (signing in, the configuration), which only
	// readers of everything see.
	Tenant string `json:"tenant,omitempty"`
	// Source is the address the request came from; empty for the gateway's
	// own.
	Source string `json:"source,omitempty"`
	// Detail says more, in words: why a sign-in failed, the limits set.
	Detail string `json:"detail,omitempty"`
}

// Query selects entries, newest first. Zero fields select everything.
type Query struct {
	Action       Action    // one action only
	Actor        string    // a subject or an email, exactly
	TenantPrefix string    // a tenant path; its descendants are included
	Since        time.Time // entries at or after
	Until        time.Time // entries before; zero means now
	Limit        int       // at most this many; see EntryLimit
}

// The bounds of Query.Limit, as for the latest requests: a page of the
// trail stays a page however long it is.
const (
	DefaultEntries = 100
	MaxEntries     = 1000
)

// EntryLimit is how many entries q asks for, within its bounds.
func (q Query) EntryLimit() int {
	switch {
	case q.Limit <= 0:
		return DefaultEntries
	case q.Limit > MaxEntries:
		return MaxEntries
	}
	return q.Limit
}

// DefaultRetention is how long entries are kept when no retention is set:
// a year, what an access review looks back over.
const DefaultRetention = 365 * 24 * time.Hour
