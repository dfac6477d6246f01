// Package tenant is who is asking: API keys, the org/team/user path each is
// bound to, and the limits and budgets set on keys and on tenant levels.
// Everything here is data; enforcing it is the router's and the limiter's.
package tenant

import (
	"fmt"
	"strings"
	"time"
)

// Levels of a tenant path, outermost first.
const (
	LevelOrg  = "org"
	LevelTeam = "team"
	LevelUser = "user"
)

// MaxDepth is the deepest a tenant path goes: org/team/user.
const MaxDepth = 3

// ParsePath checks a tenant path of one to three non-empty segments of
// letters, digits, '-', '_' and '.', and returns it cleaned.
func ParsePath(p string) (string, error) {
	if p == "" {
		return "", fmt.Errorf("tenant path is empty")
	}
	segs := strings.Split(p, "/")
	if len(segs) > MaxDepth {
		return "", fmt.Errorf("tenant path %q has %d levels; at most %d (org/team/user)", p, len(segs), MaxDepth)
	}
	for _, s := range segs {
		if s == "" {
			return "", fmt.Errorf("tenant path %q has an empty level", p)
		}
		for _, r := range s {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
				return "", fmt.Errorf("tenant path %q: %q is not allowed in a level", p, r)
			}
		}
	}
	return p, nil
}

// Prefixes is a path and its ancestors, outermost first:
// "acme/search/alice" gives acme, acme/search, acme/search/alice.
func Prefixes(p string) []string {
	var out []string
	for i := 0; i < len(p); i++ {
		if p[i] == '/' {
			out = append(out, p[:i])
		}
	}
	return append(out, p)
}

// AtLevel cuts a path to the named level: AtLevel("acme/search/alice",
// "team") is "acme/search". A path shorter than the level is returned
// whole; an unknown level gives the org.
func AtLevel(p, level string) string {
	n := 1
	switch level {
	case LevelTeam:
		n = 2
	case LevelUser:
		n = 3
	}
	for i := 0; i < len(p); i++ {
		if p[i] == '/' {
			if n--; n == 0 {
				return p[:i]
			}
		}
	}
	return p
}

// Priority classes, most protected first. Admission sheds the last first.
const (
	PriorityCritical  = "critical"
	PriorityStandard  = "standard"
	PrioritySheddable = "sheddable"
)

// ValidPriority reports whether p names a priority class.
func ValidPriority(p string) bool {
	return p == PriorityCritical || p == PriorityStandard || p == PrioritySheddable
}

// Budget periods.
const (
	PeriodDay   = "day"
	PeriodMonth = "month"
)

// Limits is what a key or a tenant level may use. Zero in a field means no
// limit of that kind.
type Limits struct {
	RPM          int64   `yaml:"rpm,omitempty" json:"rpm,omitempty"`                     // requests a minute
	TPM          int64   `yaml:"tpm,omitempty" json:"tpm,omitempty"`                     // tokens a minute, prompt and completion
	BudgetTokens int64   `yaml:"budget_tokens,omitempty" json:"budget_tokens,omitempty"` // tokens a period
	BudgetUSD    float64 `yaml:"budget_usd,omitempty" json:"budget_usd,omitempty"`       // US dollars a period, from catalog prices
	// Period is the budgets' period, day or month (UTC); empty means month.
	Period string `yaml:"period,omitempty" json:"period,omitempty"`
	// ToolRPM is MCP tool calls a minute, counted apart from requests to
	// models.
	ToolRPM int64 `yaml:"tool_rpm,omitempty" json:"tool_rpm,omitempty"`
}

// IsZero reports whether l limits nothing.
func (l Limits) IsZero() bool {
	return l.RPM == 0 && l.TPM == 0 && l.BudgetTokens == 0 && l.BudgetUSD == 0 && l.ToolRPM == 0
}

// PeriodStart is the start of the budget period holding t, in UTC.
func PeriodStart(period string, t time.Time) time.Time {
	t = t.UTC()
	if period == PeriodDay {
		return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
	}
	return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
}

// PeriodEnd is the end of the budget period holding t: the next start.
func PeriodEnd(period string, t time.Time) time.Time {
	s := PeriodStart(period, t)
	if period == PeriodDay {
		return s.AddDate(0, 0, 1)
	}
	return s.AddDate(0, 1, 0)
}

// Key is an API key as the store holds it: never the secret, only its hash.
type Key struct {
	ID     string `json:"id"`
	Name   string `json:"name,omitempty"`
	Tenant string `json:"tenant"`
	// Hash is the SHA-256 of the key's secret part, hex-encoded.
	Hash string `json:"-"`
	// Models are globs (see MatchModel) of the model names and aliases
	// the key may use; empty means every model.
	Models []string `json:"models,omitempty"`
	// Tools are globs (see MatchModel) of the MCP tools and prompts the
	// key may use, by their names as the gateway lists them
	// ("server__tool"); empty means every one.
	Tools    []string  `json:"tools,omitempty"`
	Limits   Limits    `json:"limits"`
	Priority string    `json:"priority,omitempty"`
	Created  time.Time `json:"created"`
	// Expires and Revoked are zero when the key has no expiry or is live.
	Expires time.Time `json:"expires,omitzero"`
	Revoked time.Time `json:"revoked,omitzero"`
}

// Allows reports whether the key may use the model known by any of names
// (its canonical name and aliases).
func (k *Key) Allows(names ...string) bool {
	if len(k.Models) == 0 {
		return true
	}
	for _, g := range k.Models {
		for _, n := range names {
			if MatchModel(g, n) {
				return true
			}
		}
	}
	return false
}

// AllowsTool reports whether the key may use the MCP tool or prompt
// name, as the gateway lists it.
func (k *Key) AllowsTool(name string) bool {
	if len(k.Tools) == 0 {
		return true
	}
	for _, g := range k.Tools {
		if MatchModel(g, name) {
			return true
		}
	}
	return false
}

// MatchModel reports whether the model name matches glob, in which '*'
// matches any run of characters, '/' included, and every other character
// only itself: "meta-llama*" matches "meta-llama/Llama-3.1-8B", and "*"
// every name. Matching is case-sensitive, as model names are.
//
// It keeps the latest '*' to fall back to and never revisits an earlier
// one, so it takes at most len(glob)·len(name) steps, whatever the glob.
func MatchModel(glob, name string) bool {
	g, n := 0, 0
	star, mark := -1, 0 // the latest '*' in glob, and where name resumes past it
	for n < len(name) {
		switch {
		case g < len(glob) && glob[g] == '*':
			star, mark = g, n
			g++
		case g < len(glob) && glob[g] == name[n]:
			g++
			n++
		case star >= 0:
			// The run the latest '*' matched takes one more character.
			mark++
			g, n = star+1, mark
		default:
			return false
		}
	}
	for g < len(glob) && glob[g] == '*' {
		g++
	}
	return g == len(glob)
}

// Live reports whether the key may be used at now: not revoked, not expired.
func (k *Key) Live(now time.Time) bool {
	if !k.Revoked.IsZero() && !now.Before(k.Revoked) {
		return false
	}
	return k.Expires.IsZero() || now.Before(k.Expires)
}

// TenantLimits are limits set on a tenant level, org or team, and so on
// every key below it together.
type TenantLimits struct {
	Path   string `yaml:"path" json:"path"`
	Limits `yaml:",inline" json:",inline"`
}
