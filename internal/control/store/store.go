// Package store is where the control plane keeps what must outlive a
// process: API keys, limits set on tenant levels, and the usage ledger.
// One interface, with SQLite (the default), Postgres and in-memory
// implementations that pass the same suite.
package store

import (
	"context"
	"crypto/rand"
	"errors"
	"time"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/alert"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/audit"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/tenant"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/usage"
)

// ErrNotFound is returned when a key or tenant asked for does not exist.
var ErrNotFound = errors.New("not found")

// ErrExists is returned by CreateKey when a key with the same ID is
// already stored.
var ErrExists = errors.New("already exists")

// SecretSize is the length of a Secret: 256 bits, what an HMAC-SHA256 key
// needs.
const SecretSize = 32

// newSecret is SecretSize bytes from the system's random source.
func newSecret() []byte {
	b := make([]byte, SecretSize)
	rand.Read(b) // never fails on the systems llmgw runs on
	return b
}

// Store is the control plane's persistence. Every method is safe for
// concurrent use.
type Store interface {
	// CreateKey adds a key; its ID must be new.
	CreateKey(ctx context.Context, k tenant.Key) error
	// Key finds a key by ID, revoked and expired ones included.
	Key(ctx context.Context, id string) (tenant.Key, error)
	// Keys lists every key, oldest first.
	Keys(ctx context.Context) ([]tenant.Key, error)
	// RevokeKey marks a key revoked at the given time.
	RevokeKey(ctx context.Context, id string, at time.Time) error

	// SetTenantLimits sets, or with zero limits removes, the limits on a
	// tenant level.
	SetTenantLimits(ctx context.Context, l tenant.TenantLimits) error
	// TenantLimits lists the limits on every tenant level that has any.
	TenantLimits(ctx context.Context) ([]tenant.TenantLimits, error)

	// AddUsage writes records. A record whose ID is already stored is
	// skipped, so a batch may be written again after a failure.
	AddUsage(ctx context.Context, recs []usage.Record) error
	// Usage sums the records q selects.
	Usage(ctx context.Context, q usage.Query) ([]usage.Row, error)
	// Records is the latest records q selects, newest first (by time,
	// then by ID), at most q.RecordLimit of them.
	Records(ctx context.Context, q usage.RecordQuery) ([]usage.Record, error)

	// AddAudit appends an entry to the audit trail.
	AddAudit(ctx context.Context, e audit.Entry) error
	// Audit is the latest entries q selects, newest first (by time, then
	// in the order appended), at most q.EntryLimit of them.
	Audit(ctx context.Context, q audit.Query) ([]audit.Entry, error)
	// PruneAudit removes the entries before a time, the trail's
	// retention, and reports how many it removed.
	PruneAudit(ctx context.Context, before time.Time) (int64, error)

	// FireAlert stores a spend alert, due for delivery at its Fired time,
	// and reports whether it is new: the same threshold of the same budget
	// in the same period is stored once, however often it is fired.
	FireAlert(ctx context.Context, a alert.Alert) (bool, error)
	// DueAlerts is the undelivered alerts due at a time, the longest due
	// first, at most limit of them.
	DueAlerts(ctx context.Context, now time.Time, limit int) ([]alert.Alert, error)
	// MarkAlert records a delivery of the alert seq tried: delivered at a
	// time, or, with the zero time, due again at next for lastErr.
	MarkAlert(ctx context.Context, seq int64, delivered time.Time, attempts int, next time.Time, lastErr string) error
	// Alerts is the latest alerts fired, newest first, at most limit.
	Alerts(ctx context.Context, limit int) ([]alert.Alert, error)

	// Secret is the secret named name: SecretSize random bytes made the
	// first time any process sharing the store asks for it, and the same
	// bytes ever after, to every one of them.
	Secret(ctx context.Context, name string) ([]byte, error)

	// Ping reports whether the store answers.
	Ping(ctx context.Context) error
	Close() error
}
