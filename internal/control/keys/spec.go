package keys

// What an operator asks for when creating a key, its checks, and Create: one
// path shared by the admin API and `llmgw keys create`, so they cannot
// disagree about what a valid key is.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/tenant"
)

// Spec is a request for a new key. Field names are the admin API's JSON.
type Spec struct {
	Tenant string `json:"tenant"`
	Name   string `json:"name,omitempty"`
	// Models are globs of the models the key may use, '*' matching any
	// run of characters, '/' included (tenant.MatchModel); empty means
	// every model.
	Models []string `json:"models,omitempty"`
	// Tools are globs of the MCP tools and prompts the key may use, by
	// the names /mcp lists them under ("github__*"), in the same glob
	// language; empty means every one.
	Tools        []string `json:"tools,omitempty"`
	RPM          int64    `json:"rpm,omitempty"`
	TPM          int64    `json:"tpm,omitempty"`
	BudgetTokens int64    `json:"budget_tokens,omitempty"`
	BudgetUSD    float64  `json:"budget_usd,omitempty"`
	// ToolRPM is MCP tool calls a minute; zero means no limit.
	ToolRPM int64 `json:"tool_rpm,omitempty"`
	// Period is the budgets' period, day or month; empty means month.
	Period string `json:"period,omitempty"`
	// Priority is critical, standard or sheddable; empty means standard.
	Priority string `json:"priority,omitempty"`
	// ExpiresIn is how long the key lives, as a Go duration ("720h") or a
	// number of days ("90d"); empty means it never expires.
	ExpiresIn string `json:"expires_in,omitempty"`
}

// FieldError is a Spec or Limits check that failed: Field names the field
// as the admin API spells it, Message says what is wrong. Messages never
// repeat the value given, which might be a secret pasted in the wrong place.
type FieldError struct {
	Field   string
	Message string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Message }

// maxNameLen bounds a key's name: a label for people, not a document.
const maxNameLen = 128

// maxModels bounds a key's model globs; more than this is a mistake, not a
// policy.
const maxModels = 64

// maxGlobLen bounds one model glob: model names run to a few dozen bytes,
// and a glob's match costs up to its length times the name's.
const maxGlobLen = 256

// Validate checks s and returns it cleaned (the tenant path cleaned, the
// priority defaulted), or a *FieldError naming the first field at fault.
func (s Spec) Validate() (Spec, error) {
	if s.Tenant == "" {
		return s, &FieldError{"tenant", "is required: the org, org/team or org/team/user the key belongs to"}
	}
	p, err := tenant.ParsePath(s.Tenant)
	if err != nil {
		return s, &FieldError{"tenant", "must be one to three levels (org/team/user) of letters, digits, '-', '_' and '.'"}
	}
	s.Tenant = p
	if len(s.Name) > maxNameLen {
		return s, &FieldError{"name", fmt.Sprintf("must be at most %d bytes", maxNameLen)}
	}
	if strings.IndexFunc(s.Name, unicode.IsControl) >= 0 {
		return s, &FieldError{"name", "must not hold control characters"}
	}
	if err := checkGlobs("models", s.Models); err != nil {
		return s, err
	}
	if err := checkGlobs("tools", s.Tools); err != nil {
		return s, err
	}
	if err := ValidateLimits(s.limits()); err != nil {
		return s, err
	}
	if s.Priority == "" {
		s.Priority = tenant.PriorityStandard
	}
	if !tenant.ValidPriority(s.Priority) {
		return s, &FieldError{"priority", "must be critical, standard or sheddable"}
	}
	if s.ExpiresIn != "" {
		d, err := ParseDuration(s.ExpiresIn)
		if err != nil || d <= 0 {
			return s, &FieldError{"expires_in", `must be a positive duration such as "720h" or "90d"`}
		}
	}
	return s, nil
}

func (s Spec) limits() tenant.Limits {
	return tenant.Limits{RPM: s.RPM, TPM: s.TPM, BudgetTokens: s.BudgetTokens, BudgetUSD: s.BudgetUSD, Period: s.Period, ToolRPM: s.ToolRPM}
}

// ValidateLimits checks limits for a key or a tenant level: no negative
// numbers, a finite dollar budget, and a period of day, month or empty.
func ValidateLimits(l tenant.Limits) error {
	switch {
	case l.RPM < 0:
		return &FieldError{"rpm", "must not be negative"}
	case l.TPM < 0:
		return &FieldError{"tpm", "must not be negative"}
	case l.ToolRPM < 0:
		return &FieldError{"tool_rpm", "must not be negative"}
	case l.BudgetTokens < 0:
		return &FieldError{"budget_tokens", "must not be negative"}
	case l.BudgetUSD < 0 || math.IsNaN(l.BudgetUSD) || math.IsInf(l.BudgetUSD, 0):
		return &FieldError{"budget_usd", "must be a finite number, not negative"}
	case l.Period != "" && l.Period != tenant.PeriodDay && l.Period != tenant.PeriodMonth:
		return &FieldError{"period", "must be day or month"}
	}
	return nil
}

// ParseDuration reads a Go duration ("36h", "90m") or a whole number of
// days ("30d"), which time.ParseDuration lacks and key lifetimes want.
func ParseDuration(s string) (time.Duration, error) {
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.ParseInt(days, 10, 64)
		if err != nil || n < 0 || n > math.MaxInt64/int64(24*time.Hour) {
			return 0, fmt.Errorf("keys: duration %q: want a whole number of days before d", s)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("keys: %w", err)
	}
	return d, nil
}

// KeyCreator is where Create puts a new key; store.Store is one.
type KeyCreator interface {
	CreateKey(ctx context.Context, k tenant.Key) error
}

// Create validates spec, makes a key created at now, and stores it. It
// returns the plaintext, which exists nowhere else and must be shown once,
// and the key as stored. A *FieldError means spec was at fault.
func Create(ctx context.Context, st KeyCreator, spec Spec, now time.Time) (string, tenant.Key, error) {
	spec, err := spec.Validate()
	if err != nil {
		return "", tenant.Key{}, err
	}
	plaintext, id, hash, err := Generate()
	if err != nil {
		return "", tenant.Key{}, err
	}
	k := tenant.Key{
		ID:       id,
		Name:     spec.Name,
		Tenant:   spec.Tenant,
		Hash:     hash,
		Models:   spec.Models,
		Tools:    spec.Tools,
		Limits:   spec.limits(),
		Priority: spec.Priority,
		Created:  now.UTC(),
	}
	if spec.ExpiresIn != "" {
		d, _ := ParseDuration(spec.ExpiresIn) // checked by Validate
		k.Expires = k.Created.Add(d)
	}
	if err := st.CreateKey(ctx, k); err != nil {
		return "", tenant.Key{}, fmt.Errorf("keys: storing key %s: %w", id, err)
	}
	return plaintext, k, nil
}

// AsFieldError reports whether err is, or wraps, a *FieldError, and returns it.
func AsFieldError(err error) (*FieldError, bool) {
	var fe *FieldError
	ok := errors.As(err, &fe)
	return fe, ok
}

// Key statuses, as listings show them.
const (
	StatusActive  = "active"
	StatusRevoked = "revoked"
	StatusExpired = "expired"
)

// Status is a key's status at now: revoked (whatever its expiry), expired,
// or active.
func Status(k *tenant.Key, now time.Time) string {
	switch {
	case !k.Revoked.IsZero() && !now.Before(k.Revoked):
		return StatusRevoked
	case !k.Expires.IsZero() && !now.Before(k.Expires):
		return StatusExpired
	}
	return StatusActive
}

// checkGlobs checks a key's globs of models or tools, field naming which.
func checkGlobs(field string, globs []string) error {
	if len(globs) > maxModels {
		return &FieldError{field, fmt.Sprintf("at most %d globs", maxModels)}
	}
	for i, g := range globs {
		at := fmt.Sprintf("%s[%d]", field, i)
		if g == "" {
			return &FieldError{at, "is empty"}
		}
		if len(g) > maxGlobLen {
			return &FieldError{at, fmt.Sprintf("must be at most %d bytes", maxGlobLen)}
		}
		if strings.IndexFunc(g, unicode.IsControl) >= 0 {
			return &FieldError{at, "must not hold control characters"}
		}
		if strings.Contains(g, Prefix) {
			// An API key pasted in the wrong place: a glob is listed, a
			// key must never be.
			return &FieldError{at, "holds an API key, not a name"}
		}
	}
	return nil
}
