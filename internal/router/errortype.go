package router

// error_type: why a request failed, in a closed set of words, decided once
// at its end from what the router knows then — the status the client got,
// the Outcome of its last upstream call, and the refusal's error — and
// written alike on llmgw_requests_total, the request's span (error.type)
// and the access log. The prefix says whose the failure is: the caller's,
// a policy's, an upstream's or the gateway's own; alerts and dashboards
// read the prefix alone.

import (
	"errors"
	"net/http"

	"gitea.mynodes.xyz/ilker/llmgw/internal/limits"
	"gitea.mynodes.xyz/ilker/llmgw/internal/openai"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/proxy"
)

// The error types. A request answered 200 has none ("").
const (
	errCallerInvalid   = "caller_invalid_request" // malformed, too large, too slow to send, or refused by the backend as invalid
	errCallerAuth      = "caller_auth"            // no key, or one that is not valid
	errCallerNotFound  = "caller_not_found"       // a model the key may not use or no one has
	errCallerCancelled = "caller_cancelled"       // the client went away (499)

	errPolicyRateLimit = "policy_rate_limit" // a request or token rate limit (429)
	errPolicyBudget    = "policy_budget"     // a token or spending budget (429 insufficient_quota)
	errPolicyAdmission = "policy_admission"  // admission refused or shed it (429 overloaded)

	errUpstreamConnect     = "upstream_connect"     // no connection to the endpoint
	errUpstreamTimeout     = "upstream_timeout"     // no first byte in time, or a stream idle too long
	errUpstreamStatus      = "upstream_status"      // an error status not relayed: 5xx, 429, the gateway's key refused
	errUpstreamProtocol    = "upstream_protocol"    // a stream cut short, an error event, an answer that does not read
	errUpstreamUnavailable = "upstream_unavailable" // no endpoint of any pool could be tried

	errGatewayTimeout  = "gateway_timeout"  // the request's own time limit ran out
	errGatewayInternal = "gateway_internal" // the gateway could not serve it: no catalog, limits unreachable, a bug
)

// errorTypes is every error type, the closed set error_type takes values
// from (besides "" for success).
var errorTypes = []string{
	errCallerInvalid, errCallerAuth, errCallerNotFound, errCallerCancelled,
	errPolicyRateLimit, errPolicyBudget, errPolicyAdmission,
	errUpstreamConnect, errUpstreamTimeout, errUpstreamStatus, errUpstreamProtocol, errUpstreamUnavailable,
	errGatewayTimeout, errGatewayInternal,
}

// errorType is what failed of a request answered with o.Status: "" when
// it succeeded. An upstream's fault (o.Reason) decides first, then the
// status and the refusal's error.
func errorType(o *proxy.Outcome) string {
	if o.Status == http.StatusOK && o.Reason == proxy.ReasonNone {
		return ""
	}
	if o.Status == openai.StatusClientClosed {
		return errCallerCancelled
	}
	if t := upstreamErrorType(o.Reason); t != "" {
		return t
	}
	var e *openai.Error
	errors.As(o.Err, &e)
	switch s := o.Status; {
	case s == http.StatusTooManyRequests:
		return policyErrorType(e)
	case s == http.StatusUnauthorized || s == http.StatusForbidden:
		return errCallerAuth
	case s == http.StatusNotFound:
		return errCallerNotFound
	case s == http.StatusServiceUnavailable && errors.Is(o.Err, errNoEndpoint):
		return errUpstreamUnavailable
	case s == http.StatusGatewayTimeout:
		return errGatewayTimeout
	case s == http.StatusBadGateway:
		return errUpstreamStatus
	case s >= 400 && s < 500:
		return errCallerInvalid
	}
	return errGatewayInternal
}

// upstreamErrorType is the error type of an upstream's fault, by
// proxy.Outcome's Reason; "" for none.
func upstreamErrorType(reason proxy.Reason) string {
	switch reason {
	case proxy.ReasonNone:
		return ""
	case proxy.ReasonConnect:
		return errUpstreamConnect
	case proxy.ReasonFirstByteTimeout, proxy.ReasonIdleTimeout:
		return errUpstreamTimeout
	case proxy.ReasonStreamBroken, proxy.ReasonStreamError, proxy.ReasonBadAnswer:
		return errUpstreamProtocol
	}
	return errUpstreamStatus // status_429, status_auth, status_5xx, status_other
}

// policyErrorType is the error type of a 429 the gateway gave: a budget
// spent, admission's refusal, or a rate limit.
func policyErrorType(e *openai.Error) string {
	switch {
	case e == nil:
		return errPolicyRateLimit
	case e.Code == limits.CodeInsufficientQuota:
		return errPolicyBudget
	case e.Type == "overloaded" || e.Code == "overloaded":
		return errPolicyAdmission
	}
	return errPolicyRateLimit
}
