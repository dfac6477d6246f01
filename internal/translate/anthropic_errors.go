package translate

// Errors as the Messages API sends them: its error type for a status,
// and the body and response a Messages client is refused with.

import (
	"net/http"

	"gitea.mynodes.xyz/ilker/llmgw/internal/openai"
)

// AnthropicErrorType is the Anthropic error type for a status.
func AnthropicErrorType(status int) string {
	switch status {
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusForbidden:
		return "permission_error"
	case http.StatusNotFound:
		return "not_found_error"
	case http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	case http.StatusServiceUnavailable, 529:
		return "overloaded_error"
	case http.StatusGatewayTimeout:
		return "timeout_error"
	}
	if status >= 500 {
		return "api_error"
	}
	return "invalid_request_error"
}

// AnthropicErrorBody is e as Anthropic sends errors:
// {"type":"error","error":{"type":"...","message":"..."}}.
func AnthropicErrorBody(e *openai.Error) []byte {
	return mustJSON(anthropicError{Type: "error", Error: anthropicErrorFields{Type: AnthropicErrorType(e.Status), Message: e.Message}})
}

// WriteAnthropicError sends err as an Anthropic error response, with the
// same status and Retry-After as openai.WriteError.
func WriteAnthropicError(w http.ResponseWriter, err error) {
	e := openai.AsError(err)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	if e.RetryAfterSeconds > 0 {
		h.Set("Retry-After", itoa(int64(e.RetryAfterSeconds)))
	}
	w.WriteHeader(e.Status)
	w.Write(AnthropicErrorBody(e))
}
