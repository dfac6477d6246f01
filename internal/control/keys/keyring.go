package keys

// The Keyring: authenticating a request's API key against a cache of the
// store, fast enough for every request and correct within MaxAge of a
// revocation on every replica, and the limits set on tenant levels, kept as
// a snapshot refreshed in the background.

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/store"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/tenant"
)

// Errors from Authenticate. ErrInvalidKey covers a malformed key, an unknown
// one and a wrong secret alike, so a caller cannot probe which it was.
var (
	ErrInvalidKey = errors.New("invalid API key")
	ErrRevoked    = errors.New("API key has been revoked")
	ErrExpired    = errors.New("API key has expired")
	// ErrUnavailable wraps a store failure met with nothing cached to
	// serve instead; the request cannot be authenticated either way.
	ErrUnavailable = errors.New("key store unavailable")
)

// Source is where a Keyring reads keys and tenant limits; store.Store is
// one. Key returns an error wrapping store.ErrNotFound for an unknown ID.
type Source interface {
	Key(ctx context.Context, id string) (tenant.Key, error)
	TenantLimits(ctx context.Context) ([]tenant.TenantLimits, error)
}

var _ Source = store.Store(nil)

// DefaultMaxAge is how long a cached key or tenant snapshot is trusted
// before the store is asked again: 500ms. A key past it is read again in
// the background and served from the cache meanwhile, for up to another
// MaxAge; only past twice MaxAge does a request wait for the read. So a
// revocation takes effect on every replica within one second, and a key
// in steady use never waits on the store.
const DefaultMaxAge = 500 * time.Millisecond

// lookupTimeout bounds one store read. A store slower than this counts as
// down: cached entries are served stale and uncached keys get ErrUnavailable.
const lookupTimeout = 2 * time.Second

// maxNegative bounds how many unknown key IDs are remembered, so a flood of
// made-up keys costs the store one read each per MaxAge but cannot grow the
// cache without end. At about 100 bytes an entry it is a megabyte at most.
const maxNegative = 10000

// Options tune a Keyring. Zero values take the defaults.
type Options struct {
	// MaxAge is how long a cached key, a cached miss, or the tenant limits
	// are used before being read again; zero or negative means
	// DefaultMaxAge.
	MaxAge time.Duration
	// ConfigTenants are tenant limits from the config file. The store's
	// limits for the same path replace them; a path the store has no limits
	// for keeps the config's.
	ConfigTenants []tenant.TenantLimits
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Logger gets store failures and recoveries; nil discards them.
	Logger *slog.Logger
}

// Keyring authenticates API keys and answers tenant limits. It is safe for
// concurrent use; Run keeps its tenant limits fresh.
type Keyring struct {
	src    Source
	maxAge time.Duration
	now    func() time.Time
	log    *slog.Logger

	group singleflight.Group // key: key ID; one store read per ID at a time

	mu        sync.RWMutex
	byID      map[string]*entry // key: key ID; protected by mu. Entries are never modified, only replaced.
	negatives int               // entries in byID for unknown IDs; protected by mu

	storeDown atomic.Bool // whether the last store read failed: an outage is logged once, and cached keys served without waiting

	tenantMu      sync.Mutex            // serializes rebuilding tenants; protects configTenants and storeTenants
	configTenants []tenant.TenantLimits // from the config file
	storeTenants  []tenant.TenantLimits // the last good read from the store
	tenants       atomic.Pointer[map[string]tenant.Limits]
}

// entry is one cached answer from the store about one key ID.
type entry struct {
	key     *tenant.Key       // nil when the store has no such key
	hash    [sha256.Size]byte // the key's stored hash, decoded
	hashOK  bool              // whether the stored hash decoded to a SHA-256
	checked time.Time         // when the store was last asked about this ID
}

// NewKeyring returns a Keyring reading from src. It holds the config's
// tenant limits at once and the store's after the first Refresh or Run.
func NewKeyring(src Source, opts Options) *Keyring {
	k := &Keyring{
		src:    src,
		maxAge: opts.MaxAge,
		now:    opts.Now,
		log:    opts.Logger,
		byID:   make(map[string]*entry),
	}
	if k.maxAge <= 0 {
		k.maxAge = DefaultMaxAge
	}
	if k.now == nil {
		k.now = time.Now
	}
	if k.log == nil {
		k.log = slog.New(slog.DiscardHandler)
	}
	k.SetConfigTenants(opts.ConfigTenants)
	return k
}

// Authenticate checks a plaintext API key and returns the key it is. The
// returned Key is shared with the cache and must not be modified. Errors are
// ErrInvalidKey, ErrRevoked, ErrExpired, ErrUnavailable (wrapping the
// store's error), or ctx's error when ctx ends while the store is read.
func (k *Keyring) Authenticate(ctx context.Context, plaintext string) (*tenant.Key, error) {
	var id [idLen]byte
	var sum [sha256.Size]byte
	if !parse(plaintext, &id, &sum) {
		return nil, ErrInvalidKey
	}
	now := k.now()
	k.mu.RLock()
	e := k.byID[string(id[:])]
	k.mu.RUnlock()
	switch {
	case e != nil && now.Sub(e.checked) < k.maxAge:
	case e != nil && (now.Sub(e.checked) < 2*k.maxAge || k.storeDown.Load()):
		// Stale but recent, or the store is down: serve the cached
		// answer and read the store in the background.
		k.read(ctx, string(id[:]))
	default:
		var err error
		if e, err = k.lookup(ctx, string(id[:])); err != nil {
			return nil, err
		}
	}
	match := subtle.ConstantTimeCompare(e.hash[:], sum[:]) == 1
	if e.key == nil || !e.hashOK || !match {
		return nil, ErrInvalidKey
	}
	if r := e.key.Revoked; !r.IsZero() && !now.Before(r) {
		return nil, ErrRevoked
	}
	if x := e.key.Expires; !x.IsZero() && !now.Before(x) {
		return nil, ErrExpired
	}
	return e.key, nil
}

// read starts a read of id from the store, or joins the one under way,
// and returns where its result arrives. The read runs on even if the
// caller that started it leaves.
func (k *Keyring) read(ctx context.Context, id string) <-chan singleflight.Result {
	return k.group.DoChan(id, func() (any, error) {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), lookupTimeout)
		defer cancel()
		return k.fetch(rctx, id)
	})
}

// lookup reads id from the store and waits for the answer, sharing one
// read among concurrent callers.
func (k *Keyring) lookup(ctx context.Context, id string) (*entry, error) {
	ch := k.read(ctx, id)
	select {
	case r := <-ch:
		if r.Err != nil {
			return nil, r.Err
		}
		return r.Val.(*entry), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// fetch asks the store about id and caches the answer. A store error with
// an entry already cached serves that entry, stale, for another MaxAge.
func (k *Keyring) fetch(ctx context.Context, id string) (*entry, error) {
	k.mu.RLock()
	old := k.byID[id]
	k.mu.RUnlock()
	if old != nil && k.now().Sub(old.checked) < k.maxAge {
		return old, nil // refreshed by a read that finished just before this one began
	}
	key, err := k.src.Key(ctx, id)
	now := k.now()
	var e *entry
	switch {
	case err == nil:
		e = &entry{key: &key, checked: now}
		if b, herr := hex.DecodeString(strings.ToLower(key.Hash)); herr == nil && len(b) == sha256.Size {
			copy(e.hash[:], b)
			e.hashOK = true
		}
		k.storeUp()
	case errors.Is(err, store.ErrNotFound):
		e = &entry{checked: now}
		k.storeUp()
	case old != nil:
		k.storeFailed("serving cached keys", err)
		stale := *old
		stale.checked = now
		e = &stale
	default:
		k.storeFailed("refusing uncached keys", err)
		return nil, fmt.Errorf("keys: reading key %s: %w: %w", id, ErrUnavailable, err)
	}
	k.put(id, e, now)
	return e, nil
}

// put caches e for id, keeping the count of unknown IDs
// under maxNegative: past it, expired ones are swept, and if that frees
// nothing the new unknown ID is not remembered.
func (k *Keyring) put(id string, e *entry, now time.Time) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if cur := k.byID[id]; cur != nil && cur.key == nil {
		k.negatives--
	}
	if e.key == nil {
		if k.negatives >= maxNegative {
			for oid, oe := range k.byID {
				if oe.key == nil && now.Sub(oe.checked) >= k.maxAge {
					delete(k.byID, oid)
					k.negatives--
				}
			}
		}
		if k.negatives >= maxNegative {
			delete(k.byID, id)
			return
		}
		k.negatives++
	}
	k.byID[id] = e
}

// Forget drops what is cached about a key ID, so the next Authenticate of
// that key reads the store. The admin API calls it after a revocation, so
// the replica that revoked refuses the key at once.
func (k *Keyring) Forget(id string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if e := k.byID[id]; e != nil {
		if e.key == nil {
			k.negatives--
		}
		delete(k.byID, id)
	}
}

func (k *Keyring) storeFailed(what string, err error) {
	if !k.storeDown.Swap(true) {
		k.log.Warn("keyring: store read failed; "+what+" until it answers", "err", err)
	}
}

func (k *Keyring) storeUp() {
	if k.storeDown.Swap(false) {
		k.log.Info("keyring: store answers again")
	}
}

// TenantLimits returns the limits set on each level of a tenant path that
// has any, outermost first: for "acme/search/alice", acme's, then
// acme/search's, then acme/search/alice's. It is nil when no level has
// limits. It reads the latest snapshot and never waits on the store.
func (k *Keyring) TenantLimits(path string) []tenant.TenantLimits {
	snap := *k.tenants.Load()
	if len(snap) == 0 {
		return nil
	}
	var out []tenant.TenantLimits
	for i := 1; i <= len(path); i++ {
		if i == len(path) || path[i] == '/' {
			if l, ok := snap[path[:i]]; ok {
				if out == nil {
					out = make([]tenant.TenantLimits, 0, tenant.MaxDepth)
				}
				out = append(out, tenant.TenantLimits{Path: path[:i], Limits: l})
			}
		}
	}
	return out
}

// SetConfigTenants replaces the tenant limits from the config file, as on
// a config reload. The store's limits still win for the paths they cover.
func (k *Keyring) SetConfigTenants(ls []tenant.TenantLimits) {
	k.tenantMu.Lock()
	defer k.tenantMu.Unlock()
	k.configTenants = append([]tenant.TenantLimits(nil), ls...)
	k.rebuildTenants()
}

// ConfigTenants is the tenant limits from the config file in service.
func (k *Keyring) ConfigTenants() []tenant.TenantLimits {
	k.tenantMu.Lock()
	defer k.tenantMu.Unlock()
	return append([]tenant.TenantLimits(nil), k.configTenants...)
}

// Refresh reads the tenant limits from the store now. On error the last
// good snapshot stays.
func (k *Keyring) Refresh(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, lookupTimeout)
	defer cancel()
	ls, err := k.src.TenantLimits(ctx)
	if err != nil {
		k.storeFailed("keeping the last tenant limits", err)
		return fmt.Errorf("keys: reading tenant limits: %w", err)
	}
	k.storeUp()
	k.tenantMu.Lock()
	defer k.tenantMu.Unlock()
	k.storeTenants = ls
	k.rebuildTenants()
	return nil
}

// rebuildTenants publishes the config's tenant limits overlaid with the
// store's. Zero limits are left out: they limit nothing. Called with
// tenantMu held.
func (k *Keyring) rebuildTenants() {
	m := make(map[string]tenant.Limits, len(k.configTenants)+len(k.storeTenants))
	for _, t := range k.configTenants {
		m[t.Path] = t.Limits
	}
	for _, t := range k.storeTenants {
		m[t.Path] = t.Limits
	}
	for p, l := range m {
		if l.IsZero() {
			delete(m, p)
		}
	}
	k.tenants.Store(&m)
}

// Run refreshes the tenant limits at once and then every MaxAge until ctx
// ends, when it returns nil. A failed refresh is logged and keeps the last
// good snapshot.
func (k *Keyring) Run(ctx context.Context) error {
	t := time.NewTicker(k.maxAge)
	defer t.Stop()
	for {
		_ = k.Refresh(ctx) // failures are logged by storeFailed and change nothing
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
