package router

// error_type through a real gateway: each kind of failure a request can
// meet lands on its value, the same on llmgw_requests_total, on the
// request's span (error.type) and in the access log.

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"gitea.mynodes.xyz/ilker/llmgw/internal/config"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/tenant"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/usage"
	"gitea.mynodes.xyz/ilker/llmgw/internal/limits"
	"gitea.mynodes.xyz/ilker/llmgw/internal/openai"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/observe"
)

// Keys of the error_type tests: each key's secret is its id with sk-.
var testKeys = map[string]*tenant.Key{
	"sk-good":   {ID: "good", Tenant: "acme/search"},
	"sk-rate":   {ID: "rate", Tenant: "acme/search", Limits: tenant.Limits{RPM: 1}},
	"sk-budget": {ID: "budget", Tenant: "acme/search", Limits: tenant.Limits{BudgetTokens: 1, Period: "day"}},
	"sk-other":  {ID: "other", Tenant: "acme/search", Models: []string{"other-*"}},
}

type keyTable struct{}

func (keyTable) Authenticate(_ context.Context, secret string) (*tenant.Key, error) {
	if k := testKeys[secret]; k != nil {
		return k, nil
	}
	return nil, openai.Unauthorized("Incorrect API key provided.")
}

// spentLimiter refuses key rate as its rate limit would, and key budget as
// a spent budget would; it lets every other request through.
type spentLimiter struct{}

func (spentLimiter) Admit(_ context.Context, r limits.Request) (limits.Decision, error) {
	for _, s := range r.Scopes {
		switch s.Name {
		case "key:rate":
			return limits.Decision{Code: limits.CodeRateLimited, Kind: limits.KindRequests, Scope: s.Name, RetryAfter: time.Second}, nil
		case "key:budget":
			return limits.Decision{Code: limits.CodeInsufficientQuota, Kind: limits.KindBudgetTokens, Scope: s.Name, RetryAfter: time.Hour}, nil
		}
	}
	return limits.Decision{Allowed: true}, nil
}

func (spentLimiter) Settle(context.Context, limits.Reservation, int64, float64) {}

// refusedURL is the base URL of a port nothing listens on.
func refusedURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr + "/v1"
}

func TestErrorTypes(t *testing.T) {
	chat := `{"model":"m","messages":[{"role":"user","content":"hi"}]}`
	noRetry := func(c *config.Config) { c.Server.Retries = 0 }
	tests := []struct {
		name     string
		key      string // sent as the bearer token; empty sends none
		body     string
		header   http.Header
		upstream http.Handler // nil: one that answers
		mutate   func(*config.Config)
		cancel   bool // the client leaves once the upstream has the request
		status   int
		want     string
	}{
		{name: "success", key: "sk-good", body: chat, status: 200, want: ""},
		{name: "bad JSON", key: "sk-good", body: `{"model":`, status: 400, want: "caller_invalid_request"},
		{name: "bad key", key: "sk-bad", body: chat, status: 401, want: "caller_auth"},
		{name: "unknown model", key: "sk-good", body: `{"model":"gpt-9","messages":[]}`, status: 404, want: "caller_not_found"},
		{name: "rate limit", key: "sk-rate", body: chat, status: 429, want: "policy_rate_limit"},
		{name: "budget", key: "sk-budget", body: chat, status: 429, want: "policy_budget"},
		{name: "admission shed", key: "sk-good", body: chat, header: http.Header{"X-Llmgw-Priority": {"sheddable"}},
			mutate: func(c *config.Config) {
				c.Models[0].Admission = catalog.Admission{Enabled: true, Classes: map[string]catalog.SLO{"sheddable": {TTFTp99: time.Millisecond}}}
			}, status: 429, want: "policy_admission"},
		{name: "connect refused", key: "sk-good", body: chat, status: 502, want: "upstream_connect",
			mutate: func(c *config.Config) {
				noRetry(c)
				c.Pools[0].Endpoints = []catalog.Endpoint{{URL: refusedURL(t)}}
			}},
		{name: "upstream 500", key: "sk-good", body: chat, upstream: &upstream{status: 500}, mutate: noRetry, status: 502, want: "upstream_status"},
		{name: "first-byte timeout", key: "sk-good", body: chat, upstream: newRacer(t, "stalled", 0, true),
			mutate: func(c *config.Config) { noRetry(c); c.Models[0].FirstTokenTimeout = 50 * time.Millisecond }, status: 504, want: "upstream_timeout"},
		{name: "client gone", key: "sk-good", body: chat, upstream: newRacer(t, "stalled", 0, true), cancel: true,
			status: openai.StatusClientClosed, want: "caller_cancelled"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up := tt.upstream
			if up == nil {
				up = &upstream{tokens: 2}
			}
			exp, tp, log := newTracedOptions(t)
			g := newTestGatewayWith(t, Options{Auth: keyTable{}, Limits: spentLimiter{},
				Telemetry: TelemetryOptions{Tracer: tp, AccessLog: log}}, tt.mutate, up)
			req, _ := http.NewRequest(http.MethodPost, g.url+"/v1/chat/completions", strings.NewReader(tt.body))
			for k, v := range tt.header {
				req.Header[k] = v
			}
			if tt.key != "" {
				req.Header.Set("Authorization", "Bearer "+tt.key)
			}
			if tt.cancel {
				ctx, cancel := context.WithCancel(context.Background())
				req = req.WithContext(ctx)
				go func() {
					waitFor(t, "the upstream to have the request", func() bool { return up.(*racer).hits.Load() > 0 })
					cancel()
				}()
				if _, err := http.DefaultClient.Do(req); !errors.Is(err, context.Canceled) {
					t.Fatalf("the client's request ended with %v, want it cancelled", err)
				}
			} else {
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != tt.status {
					t.Fatalf("status %d, want %d", resp.StatusCode, tt.status)
				}
			}
			server, _ := serverSpan(t, exp)

			// The counter.
			waitFor(t, "the request to be counted", func() bool { return len(gather(t, g.reg)["llmgw_requests_total"].GetMetric()) == 1 })
			if err := testutil.GatherAndCompare(g.reg, strings.NewReader(requestsText(tt.status, tt.want)), "llmgw_requests_total"); err != nil {
				t.Error(err)
			}
			// The span.
			if got, ok := attrs(server)["error.type"]; tt.want == "" && ok || tt.want != "" && got.AsString() != tt.want {
				t.Errorf("span error.type = %q (set %v), want %q", got.AsString(), ok, tt.want)
			}
			// The access log.
			lines := strings.Split(strings.TrimSuffix(log.String(), "\n"), "\n")
			if len(lines) != 1 {
				t.Fatalf("access log has %d lines, want 1:\n%s", len(lines), log.String())
			}
			var line struct {
				ID        string `json:"id"`
				Status    int    `json:"status"`
				ErrorType string `json:"error_type"`
				TraceID   string `json:"trace_id"`
			}
			if err := json.Unmarshal([]byte(lines[0]), &line); err != nil {
				t.Fatalf("access log line %s: %v", lines[0], err)
			}
			if line.ErrorType != tt.want || line.Status != tt.status || line.TraceID != server.SpanContext.TraceID().String() || line.ID == "" {
				t.Errorf("access log line %s; want error_type %q, status %d, trace_id %s", lines[0], tt.want, tt.status, server.SpanContext.TraceID())
			}
			if tt.key != "" && strings.Contains(lines[0], tt.key) {
				t.Errorf("the access log names the API key: %s", lines[0])
			}
			if tt.status == 200 {
				// The ledger record's fields, as the ledger would have them.
				var rec usage.Record
				json.Unmarshal([]byte(lines[0]), &rec)
				want := usage.Record{ID: line.ID, Time: rec.Time, KeyID: "good", Tenant: "acme/search", Model: "m", Pool: "main",
					Endpoint: g.endpointName("main", 0), PromptTokens: 5, CompletionTokens: 2, Status: 200, TTFT: rec.TTFT, Duration: rec.Duration}
				if diff := cmp.Diff(want, rec); diff != "" || rec.Time.IsZero() || rec.Duration <= 0 || rec.TTFT <= 0 {
					t.Errorf("access log line %s (-want +got):\n%s", lines[0], diff)
				}
			}
		})
	}
}

// requestsText is llmgw_requests_total with one request of model m,
// answered with status and errType.
func requestsText(status int, errType string) string {
	model, pool := "m", "main"
	switch status {
	case http.StatusNotFound, http.StatusBadRequest, http.StatusUnauthorized:
		model, pool = observe.Unknown, "none" // refused before the model was read or known
	case http.StatusTooManyRequests:
		pool = "none"
	}
	return `# HELP llmgw_requests_total Requests answered, by model, the pool that served them (none if no pool did), HTTP status (499 when the client left) and error_type: why it failed, empty when it succeeded.
# TYPE llmgw_requests_total counter
llmgw_requests_total{code="` + strconv.Itoa(status) + `",error_type="` + errType + `",model="` + model + `",pool="` + pool + `"} 1
`
}
