package observe

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

// ErrorType is why a request failed, one of the constants below; "" for
// a request that succeeded.
type ErrorType string

// The error types. A request answered 200 has none ("").
const (
	CallerInvalid   ErrorType = "caller_invalid_request" // malformed, too large, too slow to send, or refused by the backend as invalid
	CallerAuth      ErrorType = "caller_auth"            // no key, or one that is not valid
	CallerNotFound  ErrorType = "caller_not_found"       // a model the key may not use or no one has
	CallerCancelled ErrorType = "caller_cancelled"       // the client went away (499)

	PolicyRateLimit ErrorType = "policy_rate_limit" // a request or token rate limit (429)
	PolicyBudget    ErrorType = "policy_budget"     // a token or spending budget (429 insufficient_quota)
	PolicyAdmission ErrorType = "policy_admission"  // admission refused or shed it (429 overloaded)

	UpstreamConnect     ErrorType = "upstream_connect"     // no connection to the endpoint
	UpstreamTimeout     ErrorType = "upstream_timeout"     // no first byte in time, or a stream idle too long
	UpstreamStatus      ErrorType = "upstream_status"      // an error status not relayed: 5xx, 429, the gateway's key refused
	UpstreamProtocol    ErrorType = "upstream_protocol"    // a stream cut short, an error event, an answer that does not read
	UpstreamUnavailable ErrorType = "upstream_unavailable" // no endpoint of any pool could be tried

	GatewayTimeout  ErrorType = "gateway_timeout"  // the request's own time limit ran out
	GatewayInternal ErrorType = "gateway_internal" // the gateway could not serve it: no catalog, limits unreachable, a bug
)

// ErrorTypes is every error type, the closed set error_type takes values
// from (besides "" for success).
var ErrorTypes = []ErrorType{
	CallerInvalid, CallerAuth, CallerNotFound, CallerCancelled,
	PolicyRateLimit, PolicyBudget, PolicyAdmission,
	UpstreamConnect, UpstreamTimeout, UpstreamStatus, UpstreamProtocol, UpstreamUnavailable,
	GatewayTimeout, GatewayInternal,
}

// ErrNoEndpoint is the cause of the 503 a request gets when no endpoint of
// its model's pool, or of a fallback's, could be tried: its error type is
// upstream_unavailable.
var ErrNoEndpoint = errors.New("no endpoint left to try")

// ErrorTypeOf is what failed of a request answered with o.Status: "" when
// it succeeded. An upstream's fault (o.Reason) decides first, then the
// status and the refusal's error.
func ErrorTypeOf(o *proxy.Outcome) ErrorType {
	if o.Status == http.StatusOK && o.Reason == proxy.ReasonNone {
		return ""
	}
	if o.Status == openai.StatusClientClosed {
		return CallerCancelled
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
		return CallerAuth
	case s == http.StatusNotFound:
		return CallerNotFound
	case s == http.StatusServiceUnavailable && errors.Is(o.Err, ErrNoEndpoint):
		return UpstreamUnavailable
	case s == http.StatusGatewayTimeout:
		return GatewayTimeout
	case s == http.StatusBadGateway:
		return UpstreamStatus
	case s >= 400 && s < 500:
		return CallerInvalid
	}
	return GatewayInternal
}

// upstreamErrorType is the error type of an upstream's fault, by
// proxy.Outcome's Reason; "" for none.
func upstreamErrorType(reason proxy.Reason) ErrorType {
	switch reason {
	case proxy.ReasonNone:
		return ""
	case proxy.ReasonConnect:
		return UpstreamConnect
	case proxy.ReasonFirstByteTimeout, proxy.ReasonIdleTimeout:
		return UpstreamTimeout
	case proxy.ReasonStreamBroken, proxy.ReasonStreamError, proxy.ReasonBadAnswer:
		return UpstreamProtocol
	}
	return UpstreamStatus // status_429, status_auth, status_5xx, status_other
}

// policyErrorType is the error type of a 429 the gateway gave: a budget
// spent, admission's refusal, or a rate limit.
func policyErrorType(e *openai.Error) ErrorType {
	switch {
	case e == nil:
		return PolicyRateLimit
	case e.Code == limits.CodeInsufficientQuota:
		return PolicyBudget
	case e.Type == "overloaded" || e.Code == "overloaded":
		return PolicyAdmission
	}
	return PolicyRateLimit
}
