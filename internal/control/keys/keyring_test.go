package keys

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/store"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/tenant"
)

// fakeSource is a Source whose answers, failures and pace a test controls.
type fakeSource struct {
	mu      sync.Mutex
	keys    map[string]tenant.Key // key: ID
	tenants []tenant.TenantLimits
	err     error         // returned by every read when set
	block   chan struct{} // when set, Key waits for it to close
	delay   time.Duration // how long each Key takes
	reads   int           // Key calls
}

func newFakeSource() *fakeSource { return &fakeSource{keys: make(map[string]tenant.Key)} }

func (f *fakeSource) Key(ctx context.Context, id string) (tenant.Key, error) {
	f.mu.Lock()
	f.reads++
	block, delay := f.block, f.delay
	f.mu.Unlock()
	time.Sleep(delay)
	if block != nil {
		select {
		case <-block:
		case <-ctx.Done():
			return tenant.Key{}, ctx.Err()
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return tenant.Key{}, f.err
	}
	k, ok := f.keys[id]
	if !ok {
		return tenant.Key{}, fmt.Errorf("key %s: %w", id, store.ErrNotFound)
	}
	return k, nil
}

func (f *fakeSource) TenantLimits(context.Context) ([]tenant.TenantLimits, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	return append([]tenant.TenantLimits(nil), f.tenants...), nil
}

func (f *fakeSource) CreateKey(_ context.Context, k tenant.Key) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.keys[k.ID] = k
	return nil
}

func (f *fakeSource) set(fn func(f *fakeSource)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

func (f *fakeSource) readCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reads
}

// clock is a settable time for Options.Now.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

var t0 = time.Date(2025, 6, 1, 10, 0, 0, 0, time.UTC)

// setup returns a source holding one key, its plaintext, and a Keyring on a
// clock at t0.
func setup(t *testing.T, spec Spec) (*fakeSource, *clock, *Keyring, string, tenant.Key) {
	t.Helper()
	src := newFakeSource()
	clk := &clock{t: t0}
	plain, k, err := Create(context.Background(), src, spec, t0)
	if err != nil {
		t.Fatal(err)
	}
	ring := NewKeyring(src, Options{Now: clk.Now})
	return src, clk, ring, plain, k
}

func TestAuthenticateValid(t *testing.T) {
	_, _, ring, plain, want := setup(t, Spec{Tenant: "acme/search", Name: "ci", RPM: 5})
	got, err := ring.Authenticate(context.Background(), plain)
	if err != nil {
		t.Fatalf("Authenticate: %v", err)
	}
	if diff := cmp.Diff(want, *got); diff != "" {
		t.Errorf("Authenticate key (-want +got):\n%s", diff)
	}
}

func TestAuthenticateInvalid(t *testing.T) {
	_, _, ring, plain, _ := setup(t, Spec{Tenant: "acme"})
	unknown, _, _, _ := Generate()
	secretAt := len(Prefix) + publicLen + 1
	wrongSecret := plain[:secretAt] + strings.Repeat("A", secretLen)
	tests := []struct{ name, key string }{
		{"empty", ""},
		{"garbage", "hello"},
		{"bearer prefix left on", "Bearer " + plain},
		{"unknown id", unknown},
		{"wrong secret", wrongSecret},
		{"truncated", plain[:len(plain)-1]},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ring.Authenticate(context.Background(), tt.key)
			if got != nil || err != ErrInvalidKey {
				t.Errorf("Authenticate = %v, %v; want nil, ErrInvalidKey exactly", got, err)
			}
		})
	}
	// The right key still works after all that.
	if _, err := ring.Authenticate(context.Background(), plain); err != nil {
		t.Errorf("Authenticate(valid) after bad attempts: %v", err)
	}
}

// onTimeNow returns a source holding one key, its plaintext, and a
// Keyring on time.Now, which in a synctest bubble is the bubble's clock.
func onTimeNow(t *testing.T) (*fakeSource, *Keyring, string) {
	t.Helper()
	src := newFakeSource()
	plain, _, err := Create(context.Background(), src, Spec{Tenant: "acme"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return src, NewKeyring(src, Options{}), plain
}

// usedThenRevoked is setup's key, authenticated once, so that it is
// cached, and then revoked in the store.
func usedThenRevoked(t *testing.T) (*fakeSource, *clock, *Keyring, string, tenant.Key) {
	t.Helper()
	src, clk, ring, plain, k := setup(t, Spec{Tenant: "acme"})
	if _, err := ring.Authenticate(context.Background(), plain); err != nil {
		t.Fatal(err)
	}
	src.set(func(f *fakeSource) {
		k.Revoked = clk.Now()
		f.keys[k.ID] = k
	})
	return src, clk, ring, plain, k
}

// A revocation is seen within twice MaxAge: a key used past MaxAge is
// served from the cache while it is read again in the background, and a
// key not used until twice MaxAge waits for the read.
func TestAuthenticateRevokedWithinTwiceMaxAge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src, clk, ring, plain, _ := usedThenRevoked(t)
		ctx := context.Background()
		// Fresh just short of MaxAge: the store is not asked again.
		clk.Add(DefaultMaxAge - time.Millisecond)
		if _, err := ring.Authenticate(ctx, plain); err != nil {
			t.Fatalf("Authenticate within MaxAge of the cached read: %v, want the cached key", err)
		}
		synctest.Wait()
		if n := src.readCount(); n != 1 {
			t.Fatalf("store reads = %d, want 1 (the rest from cache)", n)
		}
		// At MaxAge the cached key is still served, and read again.
		clk.Add(time.Millisecond)
		if _, err := ring.Authenticate(ctx, plain); err != nil {
			t.Fatalf("Authenticate at MaxAge: %v, want the cached key while it is read again", err)
		}
		synctest.Wait()
		if n := src.readCount(); n != 2 {
			t.Fatalf("store reads = %d, want 2: one in the background at MaxAge", n)
		}
		if _, err := ring.Authenticate(ctx, plain); !errors.Is(err, ErrRevoked) {
			t.Fatalf("Authenticate after the background read: %v, want ErrRevoked", err)
		}

		// Unused until twice MaxAge, a key waits for its read.
		_, clk2, ring2, plain2, _ := usedThenRevoked(t)
		clk2.Add(2 * DefaultMaxAge)
		if _, err := ring2.Authenticate(ctx, plain2); !errors.Is(err, ErrRevoked) {
			t.Fatalf("Authenticate at twice MaxAge after revocation: %v, want ErrRevoked", err)
		}
	})
}

// A key in steady use never waits on the store, however slow its reads:
// each is made in the background while the cached answer serves.
func TestAuthenticateHotKeyNeverWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src, ring, plain := onTimeNow(t)
		ctx := context.Background()
		if _, err := ring.Authenticate(ctx, plain); err != nil {
			t.Fatal(err)
		}
		src.set(func(f *fakeSource) { f.delay = 200 * time.Millisecond }) // a slow store
		end := time.Now().Add(5 * time.Second)
		for time.Now().Before(end) {
			time.Sleep(50 * time.Millisecond) // a request every 50 ms
			start := time.Now()
			if _, err := ring.Authenticate(ctx, plain); err != nil {
				t.Fatalf("Authenticate: %v", err)
			}
			if waited := time.Since(start); waited != 0 {
				t.Fatalf("Authenticate waited %v on a slow store", waited)
			}
		}
		// One read every MaxAge and a read's time: the key stayed fresh.
		if n := src.readCount(); n < 6 || n > 11 {
			t.Errorf("store reads over 5 s = %d, want one about every 700 ms", n)
		}
	})
}

// When the store hangs rather than refusing, the first read past twice
// MaxAge waits out lookupTimeout; after that failure, cached keys are
// served at once while the store stays down.
func TestAuthenticateHangingStoreWaitsOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src, clk, ring, plain, _ := setup(t, Spec{Tenant: "acme"})
		ctx := context.Background()
		if _, err := ring.Authenticate(ctx, plain); err != nil {
			t.Fatal(err)
		}
		hang := make(chan struct{})
		src.set(func(f *fakeSource) { f.block = hang })
		defer close(hang)
		for i := range 3 {
			clk.Add(time.Minute)
			start := time.Now()
			if _, err := ring.Authenticate(ctx, plain); err != nil {
				t.Fatalf("Authenticate with the store hanging and the key cached: %v", err)
			}
			want := time.Duration(0)
			if i == 0 {
				want = lookupTimeout
			}
			if waited := time.Since(start); waited != want {
				t.Errorf("Authenticate %d waited %v, want %v", i, waited, want)
			}
		}
	})
}

func TestForgetRevokesAtOnce(t *testing.T) {
	_, _, ring, plain, k := usedThenRevoked(t)
	ring.Forget(k.ID)
	if _, err := ring.Authenticate(context.Background(), plain); !errors.Is(err, ErrRevoked) {
		t.Fatalf("Authenticate after Forget: %v, want ErrRevoked", err)
	}
}

func TestAuthenticateExpired(t *testing.T) {
	src, clk, ring, plain, _ := setup(t, Spec{Tenant: "acme", ExpiresIn: "1h"})
	ctx := context.Background()
	clk.Add(time.Hour - time.Nanosecond)
	if _, err := ring.Authenticate(ctx, plain); err != nil {
		t.Fatalf("Authenticate just before expiry: %v", err)
	}
	clk.Add(time.Nanosecond)
	if _, err := ring.Authenticate(ctx, plain); !errors.Is(err, ErrExpired) {
		t.Fatalf("Authenticate at expiry: %v, want ErrExpired", err)
	}
	if n := src.readCount(); n != 1 {
		t.Errorf("store reads = %d, want 1: expiry needs no store read", n)
	}
}

func TestAuthenticateStaleWhenStoreFails(t *testing.T) {
	synctest.Test(t, testAuthenticateStaleWhenStoreFails)
}

func testAuthenticateStaleWhenStoreFails(t *testing.T) {
	src := newFakeSource()
	clk := &clock{t: t0}
	var logs bytes.Buffer
	ring := NewKeyring(src, Options{Now: clk.Now, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	ctx := context.Background()
	plain, k, err := Create(ctx, src, Spec{Tenant: "acme"}, t0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ring.Authenticate(ctx, plain); err != nil {
		t.Fatal(err)
	}

	boom := errors.New("connection refused")
	src.set(func(f *fakeSource) { f.err = boom })
	for range 3 {
		clk.Add(time.Minute)
		got, err := ring.Authenticate(ctx, plain)
		if err != nil {
			t.Fatalf("Authenticate with the store down and the key cached: %v", err)
		}
		if got.ID != k.ID {
			t.Fatalf("Authenticate returned key %s, want %s", got.ID, k.ID)
		}
	}
	// Nothing cached for this one: the store's error, wrapped.
	other, _, _, _ := Generate()
	_, err = ring.Authenticate(ctx, other)
	if !errors.Is(err, ErrUnavailable) || !errors.Is(err, boom) {
		t.Fatalf("Authenticate uncached with the store down: %v, want ErrUnavailable wrapping %v", err, boom)
	}
	if n := strings.Count(logs.String(), "level=WARN"); n != 1 {
		t.Errorf("warnings logged = %d, want 1 per outage:\n%s", n, logs.String())
	}
	if strings.Contains(logs.String(), plain) || strings.Contains(logs.String(), other) {
		t.Errorf("a plaintext key was logged:\n%s", logs.String())
	}

	// Back up: a revocation made meanwhile is seen once the store is read
	// again. The store was down, so the request that finds it back is
	// served from the cache while the read runs in the background. The
	// reads the outage started end first: one still under way would be
	// joined, and answer with the outage.
	synctest.Wait()
	src.set(func(f *fakeSource) {
		f.err = nil
		k.Revoked = t0
		f.keys[k.ID] = k
	})
	clk.Add(time.Minute)
	ring.Authenticate(ctx, plain)
	synctest.Wait()
	if _, err := ring.Authenticate(ctx, plain); !errors.Is(err, ErrRevoked) {
		t.Fatalf("Authenticate after the store recovered: %v, want ErrRevoked", err)
	}
	if !strings.Contains(logs.String(), "store answers again") {
		t.Errorf("recovery not logged:\n%s", logs.String())
	}
}

func TestUnknownKeysCached(t *testing.T) {
	synctest.Test(t, testUnknownKeysCached)
}

func testUnknownKeysCached(t *testing.T) {
	src, clk, ring, _, _ := setup(t, Spec{Tenant: "acme"})
	ctx := context.Background()
	unknown, _, _, _ := Generate()
	for range 5 {
		if _, err := ring.Authenticate(ctx, unknown); err != ErrInvalidKey {
			t.Fatalf("Authenticate(unknown) = %v, want ErrInvalidKey", err)
		}
	}
	if n := src.readCount(); n != 1 {
		t.Fatalf("store reads for one unknown key tried 5 times = %d, want 1", n)
	}
	// After MaxAge the miss is checked again.
	clk.Add(DefaultMaxAge)
	if _, err := ring.Authenticate(ctx, unknown); err != ErrInvalidKey {
		t.Fatalf("Authenticate(unknown) = %v, want ErrInvalidKey", err)
	}
	synctest.Wait()
	if n := src.readCount(); n != 2 {
		t.Fatalf("store reads after MaxAge = %d, want 2", n)
	}
}

func TestUnknownKeysBounded(t *testing.T) {
	src := newFakeSource()
	clk := &clock{t: t0}
	ring := NewKeyring(src, Options{Now: clk.Now})
	ctx := context.Background()
	for range maxNegative + 10 {
		unknown, _, _, _ := Generate()
		if _, err := ring.Authenticate(ctx, unknown); err != ErrInvalidKey {
			t.Fatalf("Authenticate(unknown) = %v", err)
		}
	}
	ring.mu.RLock()
	n, neg := len(ring.byID), ring.negatives
	ring.mu.RUnlock()
	if n != maxNegative || neg != maxNegative {
		t.Fatalf("cache holds %d entries (%d unknown), want %d", n, neg, maxNegative)
	}
	// Once they age out, new misses sweep them away.
	clk.Add(DefaultMaxAge)
	unknown, _, _, _ := Generate()
	ring.Authenticate(ctx, unknown)
	ring.mu.RLock()
	n, neg = len(ring.byID), ring.negatives
	ring.mu.RUnlock()
	if n != 1 || neg != 1 {
		t.Fatalf("after a sweep the cache holds %d entries (%d unknown), want 1", n, neg)
	}
}

func TestConcurrentMissesShareOneRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src, ring, plain := onTimeNow(t)
		ctx := context.Background()
		release := make(chan struct{})
		src.set(func(f *fakeSource) { f.block = release })

		const n = 50
		errs := make(chan error, n)
		for range n {
			go func() {
				_, err := ring.Authenticate(ctx, plain)
				errs <- err
			}()
		}
		synctest.Wait() // every goroutine is now waiting on the one read
		close(release)
		for range n {
			if err := <-errs; err != nil {
				t.Errorf("Authenticate: %v", err)
			}
		}
		if got := src.readCount(); got != 1 {
			t.Errorf("store reads for %d concurrent misses = %d, want 1", n, got)
		}
	})
}

func TestAuthenticateCallerLeaves(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src, ring, plain := onTimeNow(t)
		release := make(chan struct{})
		src.set(func(f *fakeSource) { f.block = release })
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() {
			_, err := ring.Authenticate(ctx, plain)
			done <- err
		}()
		synctest.Wait()
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("Authenticate after its caller left: %v, want context.Canceled", err)
		}
		// The read went on and its answer is cached for the next caller.
		close(release)
		synctest.Wait()
		if _, err := ring.Authenticate(context.Background(), plain); err != nil {
			t.Fatalf("Authenticate: %v", err)
		}
		if got := src.readCount(); got != 1 {
			t.Errorf("store reads = %d, want 1", got)
		}
	})
}

func TestTenantLimits(t *testing.T) {
	src := newFakeSource()
	src.tenants = []tenant.TenantLimits{
		{Path: "acme/search", Limits: tenant.Limits{RPM: 3}},
		{Path: "acme/search/alice", Limits: tenant.Limits{BudgetTokens: 1000, Period: "day"}},
		{Path: "globex", Limits: tenant.Limits{TPM: 9}},
	}
	ring := NewKeyring(src, Options{ConfigTenants: []tenant.TenantLimits{
		{Path: "acme", Limits: tenant.Limits{RPM: 100}},
		{Path: "acme/search", Limits: tenant.Limits{RPM: 50, TPM: 5000}},
		{Path: "acmex", Limits: tenant.Limits{RPM: 1}},
		{Path: "initech", Limits: tenant.Limits{}},
	}})

	before := []struct {
		path string
		want []tenant.TenantLimits
	}{
		{"acme/search/alice", []tenant.TenantLimits{
			{Path: "acme", Limits: tenant.Limits{RPM: 100}},
			{Path: "acme/search", Limits: tenant.Limits{RPM: 50, TPM: 5000}},
		}},
		{"globex/x", nil},
	}
	for _, tt := range before {
		if diff := cmp.Diff(tt.want, ring.TenantLimits(tt.path)); diff != "" {
			t.Errorf("before refresh, TenantLimits(%q) (-want +got):\n%s", tt.path, diff)
		}
	}

	if err := ring.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	after := []struct {
		path string
		want []tenant.TenantLimits
	}{
		{"acme/search/alice", []tenant.TenantLimits{
			{Path: "acme", Limits: tenant.Limits{RPM: 100}},
			{Path: "acme/search", Limits: tenant.Limits{RPM: 3}}, // the store's entry wins whole
			{Path: "acme/search/alice", Limits: tenant.Limits{BudgetTokens: 1000, Period: "day"}},
		}},
		{"acme/search", []tenant.TenantLimits{
			{Path: "acme", Limits: tenant.Limits{RPM: 100}},
			{Path: "acme/search", Limits: tenant.Limits{RPM: 3}},
		}},
		{"acme/searching", []tenant.TenantLimits{{Path: "acme", Limits: tenant.Limits{RPM: 100}}}},
		{"acmex/a", []tenant.TenantLimits{{Path: "acmex", Limits: tenant.Limits{RPM: 1}}}},
		{"globex", []tenant.TenantLimits{{Path: "globex", Limits: tenant.Limits{TPM: 9}}}},
		{"initech/a/b", nil}, // zero limits limit nothing
		{"", nil},
	}
	for _, tt := range after {
		if diff := cmp.Diff(tt.want, ring.TenantLimits(tt.path)); diff != "" {
			t.Errorf("after refresh, TenantLimits(%q) (-want +got):\n%s", tt.path, diff)
		}
	}

	// A failed refresh keeps the last snapshot.
	boom := errors.New("timeout")
	src.set(func(f *fakeSource) { f.err = boom })
	if err := ring.Refresh(context.Background()); !errors.Is(err, boom) {
		t.Fatalf("Refresh with the store down: %v, want %v", err, boom)
	}
	if diff := cmp.Diff(after[0].want, ring.TenantLimits("acme/search/alice")); diff != "" {
		t.Errorf("after a failed refresh (-want +got):\n%s", diff)
	}

	// A config reload replaces the config's part and keeps the store's.
	ring.SetConfigTenants([]tenant.TenantLimits{{Path: "acme", Limits: tenant.Limits{RPM: 7}}})
	want := []tenant.TenantLimits{
		{Path: "acme", Limits: tenant.Limits{RPM: 7}},
		{Path: "acme/search", Limits: tenant.Limits{RPM: 3}},
	}
	if diff := cmp.Diff(want, ring.TenantLimits("acme/search")); diff != "" {
		t.Errorf("after SetConfigTenants (-want +got):\n%s", diff)
	}
}

func TestRunRefreshesEveryMaxAge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := newFakeSource()
		ring := NewKeyring(src, Options{})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- ring.Run(ctx) }()
		synctest.Wait()
		if got := ring.TenantLimits("acme"); got != nil {
			t.Fatalf("TenantLimits before any set = %v, want nil", got)
		}

		want := []tenant.TenantLimits{{Path: "acme", Limits: tenant.Limits{RPM: 4}}}
		src.set(func(f *fakeSource) { f.tenants = want })
		time.Sleep(DefaultMaxAge - time.Millisecond)
		synctest.Wait()
		if got := ring.TenantLimits("acme"); got != nil {
			t.Fatalf("TenantLimits before MaxAge = %v, want nil (not yet refreshed)", got)
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		if diff := cmp.Diff(want, ring.TenantLimits("acme")); diff != "" {
			t.Fatalf("TenantLimits at MaxAge (-want +got):\n%s", diff)
		}

		cancel()
		if err := <-done; err != nil {
			t.Fatalf("Run returned %v, want nil at cancel", err)
		}
	})
}

func BenchmarkAuthenticateHit(b *testing.B) {
	src := newFakeSource()
	ring := NewKeyring(src, Options{MaxAge: time.Hour})
	ctx := context.Background()
	plain, _, err := Create(ctx, src, Spec{Tenant: "acme/search"}, time.Now())
	if err != nil {
		b.Fatal(err)
	}
	if _, err := ring.Authenticate(ctx, plain); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ring.Authenticate(ctx, plain); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAuthenticateHitParallel(b *testing.B) {
	src := newFakeSource()
	ring := NewKeyring(src, Options{MaxAge: time.Hour})
	ctx := context.Background()
	plain, _, err := Create(ctx, src, Spec{Tenant: "acme/search"}, time.Now())
	if err != nil {
		b.Fatal(err)
	}
	if _, err := ring.Authenticate(ctx, plain); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := ring.Authenticate(ctx, plain); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func BenchmarkTenantLimits(b *testing.B) {
	ring := NewKeyring(newFakeSource(), Options{ConfigTenants: []tenant.TenantLimits{
		{Path: "acme", Limits: tenant.Limits{RPM: 100}},
		{Path: "acme/search", Limits: tenant.Limits{TPM: 1000}},
	}})
	b.ReportAllocs()
	for b.Loop() {
		if len(ring.TenantLimits("acme/search/alice")) != 2 {
			b.Fatal("wrong limits")
		}
	}
}
