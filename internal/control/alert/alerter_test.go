package alert_test

import (
	"context"
	"crypto/hmac"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/alert"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/store"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/tenant"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/usage"
)

var secret = []byte("webhook-secret-0123456789")

// receiver is a webhook that checks each body's signature, keeps the
// alerts it takes, and refuses the first fail deliveries with 503.
type receiver struct {
	mu        sync.Mutex
	fail      int
	taken     []alert.Body
	badSigned int
	refused   int
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if !hmac.Equal([]byte(r.Header.Get(alert.SignatureHeader)), []byte(alert.Sign(secret, b))) {
		rc.badSigned++
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	if rc.fail > 0 {
		rc.fail--
		rc.refused++
		http.Error(w, "busy", http.StatusServiceUnavailable)
		return
	}
	var body alert.Body
	if err := json.Unmarshal(b, &body); err != nil || body.Text == "" {
		http.Error(w, "not a message", http.StatusBadRequest)
		return
	}
	rc.taken = append(rc.taken, body)
}

// names are the alerts taken, as scope/kind/threshold.
func (rc *receiver) names() []string {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	var out []string
	for _, b := range rc.taken {
		out = append(out, b.Alert.Scope+"/"+b.Alert.Kind+"/"+itoa(b.Alert.Threshold))
	}
	return out
}

// itoa is n in three digits, so that 50 reads 050 and sorts before 100.
func itoa(n int) string { return fmt.Sprintf("%03d", n) }

// metric is the counter name{result=value} in reg.
func metric(t *testing.T, reg *prometheus.Registry, name, value string) prometheus.Collector {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetValue() == value {
					c := prometheus.NewCounter(prometheus.CounterOpts{Name: "x"})
					c.Add(m.GetCounter().GetValue())
					return c
				}
			}
		}
	}
	t.Fatalf("no %s{%s}", name, value)
	return nil
}

// TestAlerts: thresholds crossed fire once each per period, for a key's
// dollar budget and a tenant level's token budget; a delivery refused is
// tried again after its backoff, not before; a restart between firing and
// delivering delivers once, and fires nothing again; every body is
// signed and carries the text a Slack or Teams webhook shows.
func TestAlerts(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "llmgw.db")
	st, err := store.OpenSQLite(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	key := tenant.Key{ID: "key_AAAAAAAAAAAA", Tenant: "acme/search", Hash: strings.Repeat("a", 64), Created: now.AddDate(0, 0, -9),
		Limits: tenant.Limits{BudgetUSD: 10}}
	if err := st.CreateKey(ctx, key); err != nil {
		t.Fatal(err)
	}
	if err := st.SetTenantLimits(ctx, tenant.TenantLimits{Path: "acme", Limits: tenant.Limits{BudgetTokens: 1000}}); err != nil {
		t.Fatal(err)
	}
	n := 0
	spend := func(usd float64, tokens int64) {
		n++
		rec := usage.Record{ID: "r" + itoa(n), Time: now.Add(-time.Minute), KeyID: key.ID, Tenant: key.Tenant, Model: "m", Status: 200,
			PromptTokens: tokens, CostUSD: usd}
		if err := st.AddUsage(ctx, []usage.Record{rec}); err != nil {
			t.Fatal(err)
		}
	}
	rc := &receiver{fail: 1}
	hook := httptest.NewServer(rc)
	t.Cleanup(hook.Close)
	reg := prometheus.NewRegistry()
	newAlerter := func(st alert.Store, reg prometheus.Registerer) *alert.Alerter {
		return alert.New(st, alert.Options{WebhookURL: hook.URL, Secret: secret, Now: clock, Registerer: reg})
	}
	a := newAlerter(st, reg)
	round := func(a *alert.Alerter) {
		t.Helper()
		if err := a.Check(ctx); err != nil {
			t.Fatal(err)
		}
		if err := a.Deliver(ctx); err != nil {
			t.Fatal(err)
		}
	}

	spend(4, 400) // 40% of each: nothing
	round(a)
	if got := rc.names(); len(got) != 0 || rc.refused != 0 {
		t.Fatalf("under 50%%: %v", got)
	}
	spend(1.5, 200) // $5.50 and 600 tokens: 50% of each
	round(a)        // the first delivery is refused, the second not yet due
	if got := rc.names(); len(got) != 1 || rc.refused != 1 {
		t.Fatalf("at 50%% with the webhook failing once: taken %v, refused %d; want one taken, one refused", got, rc.refused)
	}
	round(a)
	if got := rc.names(); len(got) != 1 {
		t.Fatalf("the refused alert was tried again before its backoff: %v", got)
	}
	now = now.Add(31 * time.Second)
	round(a)
	if got := strings.Join(rc.names(), " "); !strings.Contains(got, "key/usd/050") || !strings.Contains(got, "tenant/tokens/050") || len(rc.names()) != 2 {
		t.Fatalf("after the backoff: %v, want the key's and the tenant's 50%% alerts once each", got)
	}

	// 85%: 80% fires; the gateway stops before delivering it.
	spend(3, 0)
	if err := a.Check(ctx); err != nil {
		t.Fatal(err)
	}
	st.Close()
	st, err = store.OpenSQLite(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	a = newAlerter(st, prometheus.NewRegistry())
	round(a)
	round(a)
	spend(2, 500) // $10.50 and 1,100 tokens: 100% of each
	round(a)
	round(a)
	want := []string{"key/usd/050", "tenant/tokens/050", "key/usd/080", "key/usd/100", "tenant/tokens/080", "tenant/tokens/100"}
	got := rc.names()
	if len(got) != len(want) {
		t.Errorf("alerts taken %v, want %v, each once", got, want)
	}
	for _, w := range want {
		if c := strings.Count(strings.Join(got, " "), w); c != 1 {
			t.Errorf("%s taken %d times, want once", w, c)
		}
	}
	if rc.badSigned != 0 {
		t.Errorf("%d bodies with a wrong signature", rc.badSigned)
	}
	texts := ""
	for _, b := range rc.taken {
		texts += b.Text + "\n"
	}
	for _, w := range []string{"Key key_AAAAAAAAAAAA (acme/search) has passed 50% of its budget for the period from 2026-03-01: $5.50 of $10.00.",
		"Tenant acme has passed 100% of its budget for the period from 2026-03-01: 1100 tokens of 1000 tokens."} {
		if !strings.Contains(texts, w) {
			t.Errorf("no alert says %q:\n%s", w, texts)
		}
	}
	if n, err := testutil.GatherAndCount(reg, "llmgw_spend_alerts_total"); err != nil || n != 3 {
		t.Errorf("llmgw_spend_alerts_total: %d series, %v; want one a threshold", n, err)
	}
	if v := testutil.ToFloat64(metric(t, reg, "llmgw_spend_alert_deliveries_total", "failed")); v != 1 {
		t.Errorf("failed deliveries counted %v before the restart, want 1", v)
	}
}
