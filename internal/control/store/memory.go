// The in-memory store: everything in maps behind one mutex, gone when the
// process ends. For tests, and for a gateway that needs no persistence.

package store

import (
	"bytes"
	"container/heap"
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/alert"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/audit"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/tenant"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/usage"
)

var _ Store = (*Memory)(nil)

// Memory is a Store held in memory. Its zero value is not usable; call
// NewMemory.
type Memory struct {
	mu      sync.Mutex                     // protects everything below
	keys    map[string]tenant.Key          // key: key ID
	order   []string                       // key IDs in the order created
	limits  map[string]tenant.TenantLimits // key: tenant path
	secrets map[string][]byte              // key: secret name
	usage   map[string]usage.Record        // key: record ID
	audit   []audit.Entry                  // in the order appended
	alerts  []alert.Alert                  // in the order fired; Seq is the index plus one
	// recent holds the IDs in usage in the order written, as a ring whose
	// next slot to overwrite is next, so the oldest record can be dropped.
	recent []string
	next   int
	closed bool
}

// MemoryUsageKept is how many usage records a Memory store keeps: the
// latest 100,000, about 25 MiB. Older ones are dropped, so a long-running
// demo or a gateway with no store of its own does not grow without bound;
// a ledger that must keep everything wants SQLite or Postgres.
const MemoryUsageKept = 100_000

// NewMemory returns an empty in-memory store.
func NewMemory() *Memory {
	return &Memory{
		keys:    map[string]tenant.Key{},
		limits:  map[string]tenant.TenantLimits{},
		secrets: map[string][]byte{},
		usage:   map[string]usage.Record{},
	}
}

func (m *Memory) check(ctx context.Context) error {
	if m.closed {
		return fmt.Errorf("memory store: %w", errClosed)
	}
	return ctx.Err()
}

// CreateKey adds k; an ID already present gives ErrExists.
func (m *Memory) CreateKey(ctx context.Context, k tenant.Key) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(ctx); err != nil {
		return err
	}
	if err := checkKey(k); err != nil {
		return err
	}
	if _, ok := m.keys[k.ID]; ok {
		return fmt.Errorf("create key %q: %w", k.ID, ErrExists)
	}
	k.Models, k.Tools = slices.Clone(k.Models), slices.Clone(k.Tools)
	m.keys[k.ID] = k
	m.order = append(m.order, k.ID)
	return nil
}

// Key returns the key with the given ID, or ErrNotFound.
func (m *Memory) Key(ctx context.Context, id string) (tenant.Key, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(ctx); err != nil {
		return tenant.Key{}, err
	}
	k, ok := m.keys[id]
	if !ok {
		return tenant.Key{}, fmt.Errorf("key %q: %w", id, ErrNotFound)
	}
	k.Models, k.Tools = slices.Clone(k.Models), slices.Clone(k.Tools)
	return k, nil
}

// Keys lists every key, oldest first; keys created at the same time are
// in ID order, as in the SQL stores.
func (m *Memory) Keys(ctx context.Context) ([]tenant.Key, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(ctx); err != nil {
		return nil, err
	}
	out := make([]tenant.Key, 0, len(m.order))
	for _, id := range m.order {
		k := m.keys[id]
		k.Models, k.Tools = slices.Clone(k.Models), slices.Clone(k.Tools)
		out = append(out, k)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if !out[i].Created.Equal(out[j].Created) {
			return out[i].Created.Before(out[j].Created)
		}
		return out[i].ID < out[j].ID
	})
	return out, nil
}

// RevokeKey sets the key's revocation time, or gives ErrNotFound.
func (m *Memory) RevokeKey(ctx context.Context, id string, at time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(ctx); err != nil {
		return err
	}
	k, ok := m.keys[id]
	if !ok {
		return fmt.Errorf("revoke key %q: %w", id, ErrNotFound)
	}
	k.Revoked = at
	m.keys[id] = k
	return nil
}

// SetTenantLimits sets l on its path, or removes the path's limits when
// l limits nothing.
func (m *Memory) SetTenantLimits(ctx context.Context, l tenant.TenantLimits) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(ctx); err != nil {
		return err
	}
	if l.IsZero() {
		delete(m.limits, l.Path)
		return nil
	}
	m.limits[l.Path] = l
	return nil
}

// TenantLimits lists every tenant level's limits in path order.
func (m *Memory) TenantLimits(ctx context.Context) ([]tenant.TenantLimits, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(ctx); err != nil {
		return nil, err
	}
	out := make([]tenant.TenantLimits, 0, len(m.limits))
	for _, l := range m.limits {
		out = append(out, l)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

// AddUsage stores the records whose IDs are new.
func (m *Memory) AddUsage(ctx context.Context, recs []usage.Record) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(ctx); err != nil {
		return err
	}
	for _, r := range recs {
		if _, ok := m.usage[r.ID]; ok {
			continue
		}
		if len(m.recent) < MemoryUsageKept {
			m.recent = append(m.recent, r.ID)
		} else {
			delete(m.usage, m.recent[m.next])
			m.recent[m.next] = r.ID
			m.next = (m.next + 1) % MemoryUsageKept
		}
		m.usage[r.ID] = r
	}
	return nil
}

// Usage sums the records q selects, with the same semantics as the SQL
// stores.
func (m *Memory) Usage(ctx context.Context, q usage.Query) ([]usage.Row, error) {
	if _, err := groupColumn(q.By); err != nil {
		return nil, err
	}
	until := q.Until
	if until.IsZero() {
		until = time.Now()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(ctx); err != nil {
		return nil, err
	}
	groups := map[string]*usage.Row{} // key: group value
	if q.By == "" {
		groups[""] = &usage.Row{}
	}
	for _, r := range m.usage {
		if !r.Time.Before(until) || (!q.Since.IsZero() && r.Time.Before(q.Since)) {
			continue
		}
		if q.TenantPrefix != "" && r.Tenant != q.TenantPrefix && !strings.HasPrefix(r.Tenant, q.TenantPrefix+"/") {
			continue
		}
		if q.KeyID != "" && r.KeyID != q.KeyID {
			continue
		}
		var g string
		switch q.By {
		case usage.ByModel:
			g = r.Model
		case usage.ByTenant:
			g = r.Tenant
		case usage.ByKey:
			g = r.KeyID
		}
		row := groups[g]
		if row == nil {
			row = &usage.Row{Group: g}
			groups[g] = row
		}
		row.Requests++
		if r.Status >= 400 {
			row.Errors++
		}
		row.PromptTokens += r.PromptTokens
		row.CompletionTokens += r.CompletionTokens
		row.CachedTokens += r.CachedTokens
		row.CostUSD += r.CostUSD
	}
	out := make([]usage.Row, 0, len(groups))
	for _, row := range groups {
		out = append(out, *row)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Group < out[j].Group })
	return out, nil
}

// Records is the latest records q selects, newest first, with the same
// semantics as the SQL stores. It keeps only the latest q.RecordLimit
// while it looks, in a heap whose top is the oldest kept.
func (m *Memory) Records(ctx context.Context, q usage.RecordQuery) ([]usage.Record, error) {
	until := q.Until
	if until.IsZero() {
		until = time.Now()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(ctx); err != nil {
		return nil, err
	}
	kept := &latest{limit: q.RecordLimit()}
	for _, r := range m.usage {
		switch {
		case !r.Time.Before(until), !q.Since.IsZero() && r.Time.Before(q.Since),
			q.TenantPrefix != "" && r.Tenant != q.TenantPrefix && !strings.HasPrefix(r.Tenant, q.TenantPrefix+"/"),
			q.KeyID != "" && r.KeyID != q.KeyID,
			q.Model != "" && r.Model != q.Model,
			q.Status != 0 && r.Status != q.Status,
			q.Errors && r.Status < 400:
			continue
		}
		kept.offer(r)
	}
	slices.SortFunc(kept.recs, func(a, b usage.Record) int { return -recordOrder(a, b) })
	return kept.recs, nil
}

// recordOrder orders records by time, then by ID.
func recordOrder(a, b usage.Record) int {
	if c := a.Time.Compare(b.Time); c != 0 {
		return c
	}
	return strings.Compare(a.ID, b.ID)
}

// latest keeps the latest limit records offered, as a min-heap by
// recordOrder: recs[0] is the oldest kept.
type latest struct {
	limit int
	recs  []usage.Record
}

func (l *latest) Len() int           { return len(l.recs) }
func (l *latest) Less(i, j int) bool { return recordOrder(l.recs[i], l.recs[j]) < 0 }
func (l *latest) Swap(i, j int)      { l.recs[i], l.recs[j] = l.recs[j], l.recs[i] }
func (l *latest) Push(x any)         { l.recs = append(l.recs, x.(usage.Record)) }
func (l *latest) Pop() any {
	r := l.recs[len(l.recs)-1]
	l.recs = l.recs[:len(l.recs)-1]
	return r
}

// offer keeps r if it is among the latest limit so far.
func (l *latest) offer(r usage.Record) {
	if len(l.recs) < l.limit {
		heap.Push(l, r)
		return
	}
	if recordOrder(r, l.recs[0]) > 0 {
		l.recs[0] = r
		heap.Fix(l, 0)
	}
}

// Ping reports an error only once the store is closed.
func (m *Memory) Ping(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.check(ctx)
}

// Close ends the store; later calls fail.
func (m *Memory) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	return nil
}

// errClosed is returned by a Memory store's methods after Close.
var errClosed = errors.New("store is closed")

// Secret is the secret named name, made on first use; it lives as long
// as m, so gateways that share it are the goroutines of one process.
func (m *Memory) Secret(ctx context.Context, name string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(ctx); err != nil {
		return nil, err
	}
	v, ok := m.secrets[name]
	if !ok {
		v = newSecret()
		m.secrets[name] = v
	}
	return bytes.Clone(v), nil
}
