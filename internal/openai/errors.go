// Package openai holds what llmgw speaks on the wire: OpenAI-style error
// bodies, the few request fields routing reads, usage, and the SSE reader.
package openai

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// Error is a failure as a client sees it, with the cause the log gets kept
// apart: Message is safe to show, Err is for operators only. Neither ever
// holds an API key or a prompt.
type Error struct {
	Status  int    // HTTP status
	Type    string // OpenAI error type: invalid_request_error, rate_limit_error, ...
	Code    string // machine-readable code, such as model_not_found; may be empty
	Param   string // the request field at fault; may be empty
	Message string // what the client reads

	// RetryAfter, when positive, is sent as a Retry-After header in whole
	// seconds, rounded up.
	RetryAfterSeconds int

	Err error // the detailed cause, for logs; may be nil
}

func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%d %s: %v", e.Status, e.Message, e.Err)
	}
	return fmt.Sprintf("%d %s", e.Status, e.Message)
}

func (e *Error) Unwrap() error { return e.Err }

// StatusClientClosed is the status recorded when the client went away before
// the answer was complete. It is never sent: there is no one to send it to.
const StatusClientClosed = 499

// Constructors for the errors llmgw answers with. Each names its status and
// OpenAI type once, so the mapping lives in one place.

func BadRequest(param, format string, args ...any) *Error {
	return &Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Param: param, Message: fmt.Sprintf(format, args...)}
}

// InvalidType is the 400 for a request field of the wrong JSON type,
// worded as OpenAI words it. want and got are kinds of value with their
// article, such as "a string", "an integer" or "null".
func InvalidType(param, want, got string) *Error {
	e := BadRequest(param, "Invalid type for '%s': expected %s, but got %s instead.", param, want, got)
	e.Code = "invalid_type"
	return e
}

// ModelNotFound is the 404 for a model that does not exist or that the
// key may not use. It names the model, as OpenAI does, unless the name
// may be a secret pasted by mistake (see Shown).
func ModelNotFound(model string) *Error {
	msg := fmt.Sprintf("The model %q does not exist or you do not have access to it.", model)
	if !Shown(model) {
		msg = "The requested model does not exist or you do not have access to it."
	}
	return &Error{Status: http.StatusNotFound, Type: "invalid_request_error", Code: "model_not_found", Param: "model", Message: msg}
}

// Shown reports whether a client-sent name may be repeated in an answer
// or a log: not when it looks like an API key (sk-...) or is too long to
// be a name, which is how a pasted secret usually looks.
func Shown(name string) bool {
	return !strings.HasPrefix(name, "sk-") && len(name) <= 128
}

func Unauthorized(msg string) *Error {
	return &Error{Status: http.StatusUnauthorized, Type: "invalid_request_error", Code: "invalid_api_key", Message: msg}
}

func Forbidden(msg string) *Error {
	return &Error{Status: http.StatusForbidden, Type: "permission_error", Message: msg}
}

func MethodNotAllowed(method string) *Error {
	return &Error{Status: http.StatusMethodNotAllowed, Type: "invalid_request_error", Message: fmt.Sprintf("Method %s is not allowed here.", method)}
}

func NotFound(path string) *Error {
	return &Error{Status: http.StatusNotFound, Type: "invalid_request_error", Code: "unknown_url", Message: fmt.Sprintf("Unknown request URL: %s.", path)}
}

func TooLarge(limit int64) *Error {
	return &Error{Status: http.StatusRequestEntityTooLarge, Type: "invalid_request_error", Code: "request_too_large", Message: fmt.Sprintf("The request body is larger than the limit of %d bytes.", limit)}
}

// BodyTimedOut is the 408 for a request body that did not arrive within
// its listener's deadline.
func BodyTimedOut() *Error {
	return &Error{Status: http.StatusRequestTimeout, Type: "invalid_request_error", Code: "request_timeout", Message: "The request body did not arrive in time."}
}

// RateLimited is a 429 for a request or token limit; code is
// rate_limit_exceeded or, for a spent budget, insufficient_quota.
func RateLimited(code, msg string, retryAfterSeconds int) *Error {
	return &Error{Status: http.StatusTooManyRequests, Type: "rate_limit_error", Code: code, Message: msg, RetryAfterSeconds: retryAfterSeconds}
}

// Overloaded is a 429 for a request shed by admission or refused by a
// backend's full queue.
func Overloaded(msg string, retryAfterSeconds int) *Error {
	return &Error{Status: http.StatusTooManyRequests, Type: "rate_limit_error", Code: "overloaded", Message: msg, RetryAfterSeconds: retryAfterSeconds}
}

func BadGateway(cause error) *Error {
	return &Error{Status: http.StatusBadGateway, Type: "upstream_error", Code: "bad_gateway", Message: "The model's backend failed to answer.", Err: cause}
}

// UpstreamAuth is the 502 for an upstream that refused the gateway's own
// credentials (its 401 or 403): the operator's to fix, not the client's,
// whose own key is not in question.
func UpstreamAuth(cause error) *Error {
	return &Error{Status: http.StatusBadGateway, Type: "upstream_error", Code: "bad_gateway", Message: "The model's provider refused the gateway's credentials.", Err: cause}
}

func Unavailable(msg string, cause error) *Error {
	return &Error{Status: http.StatusServiceUnavailable, Type: "upstream_error", Code: "service_unavailable", Message: msg, Err: cause}
}

func GatewayTimeout(msg string, cause error) *Error {
	return &Error{Status: http.StatusGatewayTimeout, Type: "upstream_error", Code: "timeout", Message: msg, Err: cause}
}

func Internal(cause error) *Error {
	return &Error{Status: http.StatusInternalServerError, Type: "server_error", Message: "The gateway failed to handle the request.", Err: cause}
}

// AsError returns err as an *Error, mapping anything else to a 500.
func AsError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return Internal(err)
}

type errorBody struct {
	Error errorFields `json:"error"`
}

type errorFields struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

// Body is e's JSON body, {"error":{"message","type","param","code"}}, with
// param and code null when empty, as OpenAI sends them.
func (e *Error) Body() []byte {
	f := errorFields{Message: e.Message, Type: e.Type}
	if e.Param != "" {
		f.Param = &e.Param
	}
	if e.Code != "" {
		f.Code = &e.Code
	}
	b, _ := json.Marshal(errorBody{Error: f})
	return b
}

// WriteError sends err as an OpenAI-style error response.
func WriteError(w http.ResponseWriter, err error) {
	e := AsError(err)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	if e.RetryAfterSeconds > 0 {
		h.Set("Retry-After", strconv.Itoa(e.RetryAfterSeconds))
	}
	w.WriteHeader(e.Status)
	w.Write(e.Body())
}
