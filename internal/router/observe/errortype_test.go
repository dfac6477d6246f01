package observe

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"gitea.mynodes.xyz/ilker/llmgw/internal/openai"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/proxy"
)

// TestErrorTypeOfOutcomes: the failures the gateway test does not reach
// by a request of its own, from the Outcome they leave.
func TestErrorTypeOfOutcomes(t *testing.T) {
	tests := []struct {
		o    proxy.Outcome
		want ErrorType
	}{
		{proxy.Outcome{Status: 200}, ""},
		{proxy.Outcome{Status: 502, Reason: proxy.ReasonStreamBroken, Wrote: true}, "upstream_protocol"},
		{proxy.Outcome{Status: 502, Reason: proxy.ReasonBadAnswer}, "upstream_protocol"},
		{proxy.Outcome{Status: 504, Reason: proxy.ReasonIdleTimeout, Wrote: true}, "upstream_timeout"},
		{proxy.Outcome{Status: 502, Reason: proxy.ReasonStatus429}, "upstream_status"},
		{proxy.Outcome{Status: 502, Reason: proxy.ReasonStatusAuth}, "upstream_status"},
		{proxy.Outcome{Status: 504, Err: openai.GatewayTimeout("The request took longer than its time limit.", nil)}, "gateway_timeout"},
		{proxy.Outcome{Status: 503, Err: openai.Unavailable("No endpoint of the model's pool is available.", ErrNoEndpoint)}, "upstream_unavailable"},
		{proxy.Outcome{Status: 503, Err: openai.Unavailable("Rate limits cannot be checked right now; try again shortly.", errors.New("redis down"))}, "gateway_internal"},
		{proxy.Outcome{Status: 500, Err: openai.Internal(errors.New("bug"))}, "gateway_internal"},
		{proxy.Outcome{Status: 413, Err: openai.TooLarge(1)}, "caller_invalid_request"},
		{proxy.Outcome{Status: 408, Err: openai.BodyTimedOut()}, "caller_invalid_request"},
		{proxy.Outcome{Status: 400, Wrote: true}, "caller_invalid_request"}, // an upstream's 400, relayed
		{proxy.Outcome{Status: 403, Err: openai.Forbidden("no")}, "caller_auth"},
		{proxy.Outcome{Status: 499, Reason: proxy.ReasonNone, Err: context.Canceled}, "caller_cancelled"},
	}
	for _, tt := range tests {
		got := ErrorTypeOf(&tt.o)
		if got != tt.want {
			t.Errorf("errorType(%+v) = %q, want %q", tt.o, got, tt.want)
		}
		if got != "" && !slices.Contains(ErrorTypes, got) {
			t.Errorf("errorType(%+v) = %q, not one of the closed set", tt.o, got)
		}
	}
}

// TestEveryReasonIsAnUpstreamFault: each of proxy's reasons is an
// upstream's fault, of an upstream_ error type, and none is a success.
func TestEveryReasonIsAnUpstreamFault(t *testing.T) {
	for _, r := range proxy.Reasons {
		got := ErrorTypeOf(&proxy.Outcome{Status: 502, Reason: r})
		if !strings.HasPrefix(string(got), "upstream_") || !slices.Contains(ErrorTypes, got) {
			t.Errorf("reason %s: error type %q, want one of the upstream's", r, got)
		}
		if got := ErrorTypeOf(&proxy.Outcome{Status: 200, Reason: r}); got == "" {
			t.Errorf("reason %s on a 200: no error type", r)
		}
	}
}
