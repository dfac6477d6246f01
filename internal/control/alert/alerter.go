package alert

// The alerter: every minute, each budget's use in its period is read from
// the ledger and each threshold it has crossed is fired (the store keeps
// one per threshold and period); then each alert due is posted to the
// webhook, signed, and tried again with backoff until it is taken.

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/tenant"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/usage"
)

// Store is what the alerter reads and writes; store.Store is one.
type Store interface {
	Keys(ctx context.Context) ([]tenant.Key, error)
	TenantLimits(ctx context.Context) ([]tenant.TenantLimits, error)
	Usage(ctx context.Context, q usage.Query) ([]usage.Row, error)
	FireAlert(ctx context.Context, a Alert) (bool, error)
	DueAlerts(ctx context.Context, now time.Time, limit int) ([]Alert, error)
	MarkAlert(ctx context.Context, seq int64, delivered time.Time, attempts int, next time.Time, lastErr string) error
}

// SignatureHeader carries the body's HMAC-SHA256 under the shared secret,
// as "sha256=" and its hex.
const SignatureHeader = "X-Llmgw-Signature-256"

// Timing of checks and deliveries.
const (
	// CheckEvery is how often budgets are checked and due alerts sent: a
	// threshold is reported within a minute of being crossed.
	CheckEvery = time.Minute
	// firstRetry is the wait after a first failed delivery, doubled after
	// each failure up to maxRetry: 30 s, 1 min, 2 min ... an hour.
	firstRetry = 30 * time.Second
	maxRetry   = time.Hour
	// sendTimeout bounds one delivery.
	sendTimeout = 10 * time.Second
	// dueBatch bounds the alerts sent in one round.
	dueBatch = 100
)

// Options configure an Alerter.
type Options struct {
	// WebhookURL receives each alert as a POST; empty keeps alerts in the
	// store and the console without sending them.
	WebhookURL string
	// Secret signs each body (SignatureHeader); empty sends none.
	Secret []byte
	// ConfigTenants is the configuration's tenant limits, checked beside
	// the store's (the store's win at a level both set); nil for none.
	ConfigTenants func() []tenant.TenantLimits
	Client        *http.Client // nil: one with sendTimeout
	// Registerer gets llmgw_spend_alerts_total and
	// llmgw_spend_alert_deliveries_total; nil registers nothing.
	Registerer prometheus.Registerer
	Now        func() time.Time // nil: time.Now
	Logger     *slog.Logger     // nil discards
}

// Alerter checks budgets and delivers alerts.
type Alerter struct {
	st         Store
	opts       Options
	fired      *prometheus.CounterVec // labels: threshold
	deliveries *prometheus.CounterVec // labels: result
}

// New returns an Alerter over st.
func New(st Store, opts Options) *Alerter {
	if opts.Client == nil {
		opts.Client = &http.Client{Timeout: sendTimeout}
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	a := &Alerter{st: st, opts: opts,
		fired: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "llmgw_spend_alerts_total",
			Help: "Spend alerts fired: a key's or a tenant level's budget past 50, 80 or 100 percent in its period, once each per period."}, []string{"threshold"}),
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "llmgw_spend_alert_deliveries_total",
			Help: "Deliveries of spend alerts to the webhook tried, by result: delivered, or failed (tried again with backoff)."}, []string{"result"}),
	}
	for _, t := range Thresholds {
		a.fired.WithLabelValues(strconv.Itoa(t))
	}
	a.deliveries.WithLabelValues("delivered")
	a.deliveries.WithLabelValues("failed")
	if opts.Registerer != nil {
		opts.Registerer.MustRegister(a.fired, a.deliveries)
	}
	return a
}

// Run checks and delivers at once and then every CheckEvery until ctx
// ends; a failure is logged and tried again at the next round.
func (a *Alerter) Run(ctx context.Context) error {
	t := time.NewTicker(CheckEvery)
	defer t.Stop()
	for {
		if err := a.Check(ctx); err != nil {
			a.opts.Logger.Warn("spend alerts: checking the budgets failed; trying again within a minute", "err", err)
		}
		if err := a.Deliver(ctx); err != nil {
			a.opts.Logger.Warn("spend alerts: reading the alerts due failed; trying again within a minute", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// budget is one budget checked: its owner and its limits.
type budget struct {
	scope, subject, tenant string
	limits                 tenant.Limits
	q                      usage.Query // its use, without the window
}

// budgets is every live key's and every tenant level's that has one.
func (a *Alerter) budgets(ctx context.Context) ([]budget, error) {
	ks, err := a.st.Keys(ctx)
	if err != nil {
		return nil, err
	}
	now := a.opts.Now()
	var out []budget
	for _, k := range ks {
		if k.Revoked.IsZero() && (k.Expires.IsZero() || now.Before(k.Expires)) && (k.Limits.BudgetUSD > 0 || k.Limits.BudgetTokens > 0) {
			out = append(out, budget{ScopeKey, k.ID, k.Tenant, k.Limits, usage.Query{KeyID: k.ID}})
		}
	}
	ls, err := a.st.TenantLimits(ctx)
	if err != nil {
		return nil, err
	}
	levels := map[string]tenant.Limits{}
	if a.opts.ConfigTenants != nil {
		for _, l := range a.opts.ConfigTenants() {
			levels[l.Path] = l.Limits
		}
	}
	for _, l := range ls {
		levels[l.Path] = l.Limits
	}
	for p, l := range levels {
		if l.BudgetUSD > 0 || l.BudgetTokens > 0 {
			out = append(out, budget{ScopeTenant, p, p, l, usage.Query{TenantPrefix: p}})
		}
	}
	return out, nil
}

// Check fires each threshold every budget's use in its current period
// has reached; the store keeps one of each per period.
func (a *Alerter) Check(ctx context.Context) error {
	bs, err := a.budgets(ctx)
	if err != nil {
		return err
	}
	now := a.opts.Now().UTC()
	for _, b := range bs {
		q := b.q
		q.Since, q.Until = tenant.PeriodStart(b.limits.Period, now), now
		rows, err := a.st.Usage(ctx, q)
		if err != nil {
			return err
		}
		var tokens int64
		var usd float64
		for _, r := range rows {
			tokens += r.PromptTokens + r.CompletionTokens
			usd += r.CostUSD
		}
		for _, kind := range []struct {
			name        string
			used, limit float64
		}{{KindUSD, usd, b.limits.BudgetUSD}, {KindTokens, float64(tokens), float64(b.limits.BudgetTokens)}} {
			if kind.limit <= 0 {
				continue
			}
			for _, th := range Thresholds {
				if kind.used*100 < kind.limit*float64(th) {
					break
				}
				al := Alert{Scope: b.scope, Subject: b.subject, Tenant: b.tenant, Kind: kind.name, PeriodStart: q.Since, Threshold: th,
					Used: kind.used, Budget: kind.limit, Fired: now}
				isNew, err := a.st.FireAlert(ctx, al)
				if err != nil {
					return err
				}
				if isNew {
					a.fired.WithLabelValues(strconv.Itoa(th)).Inc()
					a.opts.Logger.Info("spend alert", "scope", b.scope, "subject", b.subject, "kind", kind.name, "threshold", th)
				}
			}
		}
	}
	return nil
}

// Deliver posts each alert due, once each; a failure is due again after
// a backoff that doubles with each attempt.
func (a *Alerter) Deliver(ctx context.Context) error {
	if a.opts.WebhookURL == "" {
		return nil
	}
	due, err := a.st.DueAlerts(ctx, a.opts.Now(), dueBatch)
	if err != nil {
		return err
	}
	for _, al := range due {
		err := a.send(ctx, al)
		now := a.opts.Now()
		attempts := al.Attempts + 1
		if err == nil {
			a.deliveries.WithLabelValues("delivered").Inc()
			if err := a.st.MarkAlert(ctx, al.Seq, now, attempts, now, ""); err != nil {
				return err
			}
			continue
		}
		a.deliveries.WithLabelValues("failed").Inc()
		wait := min(firstRetry<<min(attempts-1, 20), maxRetry)
		a.opts.Logger.Warn("spend alerts: the webhook refused an alert; trying again later", "subject", al.Subject, "threshold", al.Threshold, "attempts", attempts, "retry_in", wait, "err", err)
		if err := a.st.MarkAlert(ctx, al.Seq, time.Time{}, attempts, now.Add(wait), err.Error()); err != nil {
			return err
		}
	}
	return nil
}

// Body is an alert as the webhook gets it: text that Slack's and Teams'
// incoming webhooks show, and the alert itself.
type Body struct {
	Text  string `json:"text"`
	Alert Alert  `json:"alert"`
}

// send posts al to the webhook, signed.
func (a *Alerter) send(ctx context.Context, al Alert) error {
	b, err := json.Marshal(Body{Text: Text(al), Alert: al})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, sendTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "POST", a.opts.WebhookURL, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if len(a.opts.Secret) > 0 {
		req.Header.Set(SignatureHeader, Sign(a.opts.Secret, b))
	}
	resp, err := a.opts.Client.Do(req)
	if err != nil {
		return fmt.Errorf("posting to the webhook: %w", err)
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("the webhook answered %s", resp.Status)
	}
	return nil
}

// Sign is body's signature under secret, as SignatureHeader carries it.
func Sign(secret, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// Text is al in a sentence.
func Text(al Alert) string {
	what := "Key " + al.Subject + " (" + al.Tenant + ")"
	if al.Scope == ScopeTenant {
		what = "Tenant " + al.Subject
	}
	used, limit := strconv.FormatFloat(al.Used, 'f', 2, 64), strconv.FormatFloat(al.Budget, 'f', 2, 64)
	if al.Kind == KindUSD {
		used, limit = "$"+used, "$"+limit
	} else {
		used, limit = strconv.FormatFloat(al.Used, 'f', 0, 64)+" tokens", strconv.FormatFloat(al.Budget, 'f', 0, 64)+" tokens"
	}
	return fmt.Sprintf("llmgw: %s has passed %d%% of its budget for the period from %s: %s of %s.",
		what, al.Threshold, al.PeriodStart.UTC().Format("2006-01-02"), used, limit)
}
