package admin

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// clockedGuard is a guard of token on a clock the test moves, logging
// to logs.
type clockedGuard struct {
	*Guard
	now  time.Time
	logs strings.Builder
	reg  *prometheus.Registry
}

func newClockedGuard(t *testing.T, token string) *clockedGuard {
	t.Helper()
	cg := &clockedGuard{now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC), reg: prometheus.NewRegistry()}
	cg.Guard = NewGuard(token, GuardOptions{Registerer: cg.reg, Now: func() time.Time { return cg.now },
		Logger: slog.New(slog.NewTextHandler(&cg.logs, nil))})
	return cg
}

// try sends token from addr (host:port) to path, and returns the status
// the guard answers with: 200 when it lets the request through.
func (cg *clockedGuard) try(addr, path, token string) int {
	r := httptest.NewRequest(http.MethodGet, path, nil)
	r.RemoteAddr = addr
	r.Header.Set("Authorization", "Bearer "+token)
	w := httptest.NewRecorder()
	cg.Wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})).ServeHTTP(w, r)
	return w.Code
}

// statuses are how many times each status was answered.
type statuses map[int]int

func (cg *clockedGuard) tries(n int, addr, path, token string) statuses {
	got := statuses{}
	for range n {
		got[cg.try(addr, path, token)]++
	}
	return got
}

const throttleTestToken = "guard-test-token"

// TestThrottleBudgetOfASource: a source's wrong tokens are compared up to
// its budget, then refused unchecked with Retry-After until a slot comes
// back; the right token from it waits too.
func TestThrottleBudgetOfASource(t *testing.T) {
	cg := newClockedGuard(t, throttleTestToken)
	if got, want := cg.tries(100, "192.0.2.1:1000", "/admin/keys", "guess"), (statuses{401: sourceBurst, 429: 100 - sourceBurst}); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("100 wrong tokens: %v, want %v", got, want)
	}
	r := httptest.NewRequest(http.MethodGet, "/admin/keys", nil)
	r.RemoteAddr = "192.0.2.1:1001"
	_, refused := cg.Try(r)
	if refused == nil || refused.Status != http.StatusTooManyRequests || refused.RetryAfterSeconds != int(sourceEvery/time.Second) {
		t.Fatalf("the right token past the budget: %+v, want 429 after %v", refused, sourceEvery)
	}
	cg.now = cg.now.Add(sourceEvery - time.Millisecond)
	if got := cg.try("192.0.2.1:1002", "/admin/keys", throttleTestToken); got != http.StatusTooManyRequests {
		t.Errorf("the right token just before a slot comes back: %d, want 429", got)
	}
	cg.now = cg.now.Add(time.Millisecond)
	if got := cg.try("192.0.2.1:1003", "/admin/keys", throttleTestToken); got != http.StatusOK {
		t.Errorf("the right token once a slot is back: %d, want 200", got)
	}
}

// TestThrottleRightTokenGivesBack: the right token gives its slot back, so
// that a source sending it is never refused, whatever wrong tokens came
// before within the budget.
func TestThrottleRightTokenGivesBack(t *testing.T) {
	cg := newClockedGuard(t, throttleTestToken)
	cg.tries(sourceBurst-1, "192.0.2.1:1", "/admin/keys", "guess")
	if got := cg.tries(1000, "192.0.2.1:1", "/admin/keys", throttleTestToken); got[200] != 1000 {
		t.Errorf("1000 right tokens after %d wrong: %v, want 1000 × 200", sourceBurst-1, got)
	}
}

// TestThrottleOneBudgetForEveryPath: /ui, /admin and /debug take from the
// same budget.
func TestThrottleOneBudgetForEveryPath(t *testing.T) {
	cg := newClockedGuard(t, throttleTestToken)
	third := sourceBurst / 3
	cg.tries(third, "192.0.2.1:1", "/ui/login", "guess")
	cg.tries(third, "192.0.2.1:1", "/debug/pprof/", "guess")
	cg.tries(sourceBurst-2*third, "192.0.2.1:1", "/admin/keys", "guess")
	for _, p := range []string{"/admin/keys", "/debug/pprof/", "/ui/login", "/nothing"} {
		if got := cg.try("192.0.2.1:1", p, throttleTestToken); got != http.StatusTooManyRequests {
			t.Errorf("%s once the budget is spent on the others: %d, want 429", p, got)
		}
	}
	for _, tt := range []struct {
		path, reason string
		want         float64
	}{
		{"ui", reasonWrongToken, float64(third)},
		{"debug", reasonWrongToken, float64(third)},
		{"admin", reasonWrongToken, float64(sourceBurst - 2*third)},
		{"admin", reasonThrottled, 2},
		{"ui", reasonThrottled, 1},
		{"debug", reasonThrottled, 1},
	} {
		if got := testutil.ToFloat64(cg.failures.WithLabelValues(tt.path, tt.reason)); got != tt.want {
			t.Errorf("llmgw_admin_auth_failures_total{path=%q,reason=%q} = %v, want %v", tt.path, tt.reason, got, tt.want)
		}
	}
}

// TestThrottleOthersGetIn: sources that fail, one or many, do not lock
// out another: the right token from an address with no wrong token gets
// in while they are refused, though they have spent the shared budget
// down to its reserve. Only many addresses new to the throttle empty
// the reserve, and then the ceiling holds for everyone.
func TestThrottleOthersGetIn(t *testing.T) {
	cg := newClockedGuard(t, throttleTestToken)
	if got := cg.tries(sourceBurst+5, "192.0.2.1:1", "/ui/login", "guess"); got[401] != sourceBurst {
		t.Fatalf("one source's wrong tokens: %v", got)
	}
	if got := cg.try("192.0.2.2:1", "/ui/login", throttleTestToken); got != http.StatusOK {
		t.Fatalf("the right token from another address while one is throttled: %d, want 200", got)
	}
	// Enough failing sources to spend the shared budget down to its
	// reserve, and more.
	compared := sourceBurst
	for i := range 2 * sharedBurst / sourceBurst {
		compared += cg.tries(sourceBurst, fmt.Sprintf("198.51.100.%d:1", i), "/admin/keys", "guess")[401]
	}
	if max := sharedBurst - freshReserve + 2*sharedBurst/sourceBurst; compared > max {
		t.Errorf("%d wrong tokens compared from failing sources, want at most %d: the reserve is theirs too", compared, max)
	}
	if got := cg.try("192.0.2.3:1", "/admin/keys", throttleTestToken); got != http.StatusOK {
		t.Errorf("the right token from a new address once failing sources spent the shared budget: %d, want 200", got)
	}
	if got := cg.try("192.0.2.4:1", "/admin/keys", "guess"); got != http.StatusUnauthorized {
		t.Errorf("a new address's first wrong token: %d, want 401", got)
	}
	if got := cg.try("192.0.2.4:1", "/admin/keys", throttleTestToken); got != http.StatusTooManyRequests {
		t.Errorf("after its wrong token, the address no longer takes the reserve: %d, want 429", got)
	}
	// Addresses new to the throttle empty the reserve; then nobody is
	// compared until it refills.
	for i := range freshReserve {
		cg.try(fmt.Sprintf("203.0.113.%d:1", i), "/admin/keys", "guess")
	}
	if got := cg.try("192.0.2.5:1", "/admin/keys", throttleTestToken); got != http.StatusTooManyRequests {
		t.Errorf("the right token once the whole shared budget is spent: %d, want 429", got)
	}
	cg.now = cg.now.Add(sharedEvery)
	if got := cg.try("192.0.2.5:1", "/admin/keys", throttleTestToken); got != http.StatusOK {
		t.Errorf("the right token from a new address once a shared slot is back: %d, want 200", got)
	}
}

// TestSourceOf: an IPv6 source is its /64, an IPv4 one (mapped or not)
// its address.
func TestSourceOf(t *testing.T) {
	for _, tt := range []struct{ a, b string }{
		{"[2001:db8:1:2::1]:80", "[2001:db8:1:2:ffff::9]:81"},
		{"[::ffff:192.0.2.1]:80", "192.0.2.1:81"},
		{"[fe80::1%eth0]:80", "[fe80::2%eth1]:81"},
	} {
		if sourceOf(tt.a) != sourceOf(tt.b) {
			t.Errorf("%s and %s are two sources, want one", tt.a, tt.b)
		}
	}
	for _, tt := range []struct{ a, b string }{
		{"[2001:db8:1:2::1]:80", "[2001:db8:1:3::1]:80"},
		{"192.0.2.1:80", "192.0.2.2:80"},
	} {
		if sourceOf(tt.a) == sourceOf(tt.b) {
			t.Errorf("%s and %s are one source, want two", tt.a, tt.b)
		}
	}
	if got := sourceOf("not an address"); got != (netip.Prefix{}) {
		t.Errorf("an address that does not parse is %v, want the zero prefix", got)
	}
}

// TestThrottleForgetsTheOldest: the sources held stay within maxSources.
func TestThrottleForgetsTheOldest(t *testing.T) {
	th := newThrottle()
	now := time.Now()
	for i := range maxSources + 100 {
		src := sourceOf(fmt.Sprintf("[2001:db8:%x:%x::1]:1", i>>16, i&0xffff))
		th.take(src, now)
		th.note(src, now, false)
	}
	if len(th.sources) != maxSources || th.order.Len() != maxSources {
		t.Errorf("%d sources held (%d in order), want %d", len(th.sources), th.order.Len(), maxSources)
	}
}

// TestThrottleLogsOncePerSourcePerInterval: a source's failures make one
// warning at once and at most one a logEvery after, counting those
// between; the token sent is never in it.
func TestThrottleLogsOncePerSourcePerInterval(t *testing.T) {
	cg := newClockedGuard(t, throttleTestToken)
	cg.tries(sourceBurst+10, "192.0.2.1:1", "/admin/keys", "guess-sent")
	cg.tries(3, "192.0.2.2:1", "/ui/login", "guess-sent")
	cg.now = cg.now.Add(logEvery)
	cg.try("192.0.2.1:1", "/debug/pprof/", "guess-sent")
	lines := strings.Split(strings.TrimSpace(cg.logs.String()), "\n")
	want := []string{
		"source=192.0.2.1 path=admin wrong_tokens=1 throttled=0",
		"source=192.0.2.2 path=ui wrong_tokens=1 throttled=0",
		fmt.Sprintf("source=192.0.2.1 path=debug wrong_tokens=%d throttled=10", sourceBurst),
	}
	if len(lines) != len(want) {
		t.Fatalf("%d log lines, want %d:\n%s", len(lines), len(want), cg.logs.String())
	}
	for i, l := range lines {
		if !strings.Contains(l, "level=WARN") || !strings.Contains(l, want[i]) {
			t.Errorf("line %d: %s\nwant a warning with %s", i, l, want[i])
		}
	}
	if strings.Contains(cg.logs.String(), "guess-sent") {
		t.Error("a log line holds the token sent")
	}
}
