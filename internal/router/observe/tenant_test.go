package observe

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/tenant"
	"gitea.mynodes.xyz/ilker/llmgw/internal/openai"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/proxy"
)

// tenantMetrics is the metrics of model m on pool gpu, their tenant label
// at team level capped at limit values.
func tenantMetrics(t *testing.T, limit int) (*Metrics, *prometheus.Registry) {
	t.Helper()
	return newMetrics(t, tenantCatalog(t), tenant.LevelTeam, limit)
}

// tenantCatalog is model m on pool gpu.
func tenantCatalog(t *testing.T) *catalog.Catalog {
	t.Helper()
	cat, err := catalog.New([]catalog.Pool{{Name: "gpu", Kind: catalog.KindOpenAI, Endpoints: []catalog.Endpoint{{URL: "http://127.0.0.1:1/v1"}}}},
		[]catalog.Model{{Name: "m", Pool: "gpu"}})
	if err != nil {
		t.Fatal(err)
	}
	return cat
}

// streamFrom observes one streamed request of team's user: 11 tokens
// decoded in a second.
func streamFrom(m *Metrics, team string) {
	c := finished(nil, true, "gpu", proxy.Outcome{
		Usage: &openai.Usage{CompletionTokens: 11}, TTFT: 300 * time.Millisecond, Decode: time.Second,
	}, 2*time.Second)
	c.Tenant = m.TenantLabel("acme/" + team + "/alice")
	m.Observe(c)
}

// tenantValues is the tenant label's values on family name, as /metrics
// shows it.
func tenantValues(t *testing.T, reg prometheus.Gatherer, name string) map[string]bool {
	t.Helper()
	seen := map[string]bool{}
	for _, m := range gather(t, reg)[name].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "tenant" {
				seen[l.GetValue()] = true
			}
		}
	}
	return seen
}

// TestTenantLabelLimit: with a limit of 2 and five teams, /metrics shows
// two teams by name and the other three as other, however much each
// sends, and counts the three folded once each.
func TestTenantLabelLimit(t *testing.T) {
	r, reg := tenantMetrics(t, 2)
	teams := []string{"search", "ads", "mail", "maps", "docs"}
	for range 20 {
		for _, team := range teams {
			streamFrom(r, team)
		}
	}
	for _, name := range []string{"llmgw_tenant_tpot_seconds", "llmgw_tenant_output_tokens_per_second"} {
		got := tenantValues(t, reg, name)
		want := map[string]bool{"acme/search": true, "acme/ads": true, "other": true}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: tenant values %v, want %v", name, got, want)
		}
	}
	want := `
# HELP llmgw_tenant_series_dropped_total Tenants whose requests were labelled other for want of a tenant label value of their own (router.tenant_label_limit): each counted once, told apart by a 16 KiB bitmap (an undercount past some thousands).
# TYPE llmgw_tenant_series_dropped_total counter
llmgw_tenant_series_dropped_total 3
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "llmgw_tenant_series_dropped_total"); err != nil {
		t.Error(err)
	}
	// other holds the three folded teams' 60 requests; each named team its 20.
	perTenant := map[string]uint64{"acme/search": 20, "acme/ads": 20, "other": 60}
	for _, m := range gather(t, reg)["llmgw_tenant_output_tokens_per_second"].GetMetric() {
		tenant := m.GetLabel()[0].GetValue()
		if got := m.GetHistogram().GetSampleCount(); got != perTenant[tenant] {
			t.Errorf("%s: %d requests, want %d", tenant, got, perTenant[tenant])
		}
	}
}

// TestTenantLabelKeptForHeavy: of a limit of 4, three values go to the
// first teams to come and the fourth is kept for a heavy one. A flood of
// 2,000 teams sending once each takes none of it; a team sending one
// request in ten does, after 8, and keeps it. Every flooding team is
// counted as folded, and so is the heavy one, whose first 7 requests were
// other.
func TestTenantLabelKeptForHeavy(t *testing.T) {
	r, reg := tenantMetrics(t, 4)
	for _, team := range []string{"a", "b", "c"} {
		streamFrom(r, team)
	}
	heavy := 0
	for i := range 2000 {
		streamFrom(r, fmt.Sprintf("flood-%d", i))
		if i%10 == 0 {
			streamFrom(r, "heavy")
			heavy++
		}
	}
	got := tenantValues(t, reg, "llmgw_tenant_tpot_seconds")
	want := map[string]bool{"acme/a": true, "acme/b": true, "acme/c": true, "acme/heavy": true, "other": true}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("tenant values %v, want %v", got, want)
	}
	for _, m := range gather(t, reg)["llmgw_tenant_tpot_seconds"].GetMetric() {
		if m.GetLabel()[0].GetValue() == "acme/heavy" {
			if n := m.GetHistogram().GetSampleCount(); n != uint64(heavy-tenantPromoteAfter+1) {
				t.Errorf("acme/heavy has %d requests, want all %d but its first %d", n, heavy, tenantPromoteAfter-1)
			}
		}
	}
	// Once every value is given, no table is kept.
	if r.tenant.candidates != nil || !r.tenant.full.Load() {
		t.Errorf("full = %v with %d candidates kept, want full with none", r.tenant.full.Load(), len(r.tenant.candidates))
	}
	if got := testutil.ToFloat64(r.tenant.dropped); got < 1990 || got > 2001 {
		t.Errorf("llmgw_tenant_series_dropped_total = %v, want 2,001 (the flood and heavy) less a few bitmap collisions", got)
	}
}

// TestTenantLabelBoundedTable: a flood of tenants while values are left
// keeps the heavy-hitters table at its size.
func TestTenantLabelBoundedTable(t *testing.T) {
	l := newTenantLabel(tenant.LevelTeam, 8) // 6 first come, 2 kept
	for i := range 6 {
		l.label(fmt.Sprint("first-", i))
	}
	for i := range 100_000 {
		if got := l.label(fmt.Sprint("flood-", i)); got != otherTenant {
			t.Fatalf("flood-%d labelled %q, want other", i, got)
		}
	}
	if n := len(l.candidates); n != minTenantCandidates || len(l.index) != n {
		t.Errorf("table holds %d candidates (%d indexed), want its size %d", n, len(l.index), minTenantCandidates)
	}
}

// TestTenantLabelConcurrent: labels asked for from many goroutines at
// once (run with -race) give no more values than the limit, and a value
// once given stays.
func TestTenantLabelConcurrent(t *testing.T) {
	l := newTenantLabel(tenant.LevelTeam, 10)
	var wg sync.WaitGroup
	var mu sync.Mutex
	given := map[string]bool{}
	for g := range 8 {
		wg.Go(func() {
			for i := range 2000 {
				v := fmt.Sprint("t-", (i*7+g)%40)
				if got := l.label(v); got != otherTenant {
					mu.Lock()
					given[got] = true
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if len(given) > 10 {
		t.Errorf("%d values given, want at most 10", len(given))
	}
	for v := range given {
		if got := l.label(v); got != v {
			t.Errorf("%s labelled %q after it was given its own", v, got)
		}
	}
}

// BenchmarkTenantLabel is the cost of a named tenant's label, the common
// path.
func BenchmarkTenantLabel(b *testing.B) {
	l := newTenantLabel(tenant.LevelTeam, 100)
	for i := range 100 {
		l.label(fmt.Sprint("acme/team-", i))
	}
	b.ReportAllocs()
	for b.Loop() {
		l.label("acme/team-42")
	}
}
