// Package alert is spend alerts: a key or a tenant level crossing 50%, 80%
// and 100% of a budget in its period fires one alert per threshold and
// period, kept in the store and delivered to a webhook (a JSON body Slack
// and Teams incoming webhooks accept, signed with HMAC-SHA256), retried
// with backoff until it is delivered, across restarts.
package alert

import "time"

// Thresholds are the shares of a budget that fire an alert, in percent.
var Thresholds = []int{50, 80, 100}

// Scopes of an alert: what owns the budget.
const (
	ScopeKey    = "key"
	ScopeTenant = "tenant"
)

// Kinds of budget.
const (
	KindUSD    = "usd"
	KindTokens = "tokens"
)

// Alert is one threshold crossed in one period, and its delivery.
type Alert struct {
	// Seq is the store's number for it; zero before it is stored.
	Seq int64 `json:"-"`
	// Scope is key or tenant; Subject the key id or the tenant path; Tenant
	// the tenant path the budget falls in (the key's, or Subject).
	Scope   string `json:"scope"`
	Subject string `json:"subject"`
	Tenant  string `json:"tenant"`
	// Kind is the budget's kind, usd or tokens.
	Kind        string    `json:"kind"`
	PeriodStart time.Time `json:"period_start"`
	Threshold   int       `json:"threshold"` // percent
	Used        float64   `json:"used"`
	Budget      float64   `json:"budget"`
	Fired       time.Time `json:"fired"`

	// Delivered is when the webhook took it; zero until then.
	Delivered time.Time `json:"delivered,omitzero"`
	// Attempts counts deliveries tried; NextTry is when the next is due;
	// LastError is why the last failed, empty for none.
	Attempts  int       `json:"attempts"`
	NextTry   time.Time `json:"-"`
	LastError string    `json:"last_error,omitempty"`
}
