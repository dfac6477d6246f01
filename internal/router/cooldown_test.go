package router

import (
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"gitea.mynodes.xyz/ilker/llmgw/internal/config"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
)

// TestRetryAfterCoolsTheDeployment: a deployment that answers 429 with
// Retry-After: 2 is passed over for 2 s and no longer, and the request is
// served by the next deployment within the retry budget; the client never
// sees the 429.
func TestRetryAfterCoolsTheDeployment(t *testing.T) {
	var limited atomic.Int32
	throttled := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		limited.Add(1)
		w.Header().Set("Retry-After", "2")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(429)
		io.WriteString(w, `{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}`)
	})
	g := newTestGateway(t, func(c *config.Config) {
		c.Pools[0].Policy = catalog.PolicyRoundRobin
	}, throttled, &upstream{tokens: 2})
	before := time.Now()
	for i := 0; i < 4 && limited.Load() == 0; i++ {
		resp, body := g.post(t, "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
		if resp.StatusCode != 200 {
			t.Fatalf("answered %d %s", resp.StatusCode, body)
		}
	}
	after := time.Now()
	if limited.Load() != 1 {
		t.Fatalf("the throttled deployment was called %d times", limited.Load())
	}
	ep := g.r.snap.Load().pools["main"].Endpoints()[0]
	if !ep.Out(before.Add(1999*time.Millisecond).UnixNano()) || ep.Out(after.Add(2*time.Second).UnixNano()) {
		t.Error("the deployment is not out for exactly the 2 s its Retry-After asked")
	}
	// While it cools, every request goes to the other deployment.
	for range 3 {
		if resp, body := g.post(t, "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`); resp.StatusCode != 200 {
			t.Fatalf("answered %d %s", resp.StatusCode, body)
		}
	}
	if limited.Load() != 1 {
		t.Errorf("the cooled deployment was called again: %d calls", limited.Load())
	}
	n := 0
	for _, m := range gather(t, g.reg)["llmgw_ejections_total"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "reason" && l.GetValue() == "retry_after" {
				n += int(m.GetCounter().GetValue())
			}
		}
	}
	if n != 1 {
		t.Errorf("%d retry_after ejections counted, want 1", n)
	}
}
