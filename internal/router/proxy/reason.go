package proxy

// Why an upstream call failed, as a closed set: the reason label of
// llmgw_upstream_errors_total and llmgw_retries_total, and what decides
// a failed request's error_type. A Reason is one of the constants below,
// so that a reason misspelt is a compile error, not a new label value.

// Reason names the upstream's fault in an Outcome; ReasonNone, the zero
// value, when the upstream did its part.
type Reason uint8

const (
	ReasonNone             Reason = iota // the upstream did its part
	ReasonConnect                        // no connection, or no URL to connect to
	ReasonFirstByteTimeout               // no first byte within Call.FirstByte
	ReasonIdleTimeout                    // a stream silent for longer than Call.Idle
	ReasonStatus429                      // the upstream said it is at capacity
	ReasonStatusAuth                     // a 401 or 403: the gateway's own credentials refused
	ReasonStatus5xx                      // a 5xx status
	ReasonStatusOther                    // any other status not relayed
	ReasonStreamBroken                   // the answer's bytes stopped before its end
	ReasonStreamError                    // the stream carried an error event
	ReasonBadAnswer                      // a plain answer that is no chat completion, found when translating it
)

// Reasons is every Reason but ReasonNone, in the order of the constants.
var Reasons = []Reason{
	ReasonConnect, ReasonFirstByteTimeout, ReasonIdleTimeout, ReasonStatus429, ReasonStatusAuth,
	ReasonStatus5xx, ReasonStatusOther, ReasonStreamBroken, ReasonStreamError, ReasonBadAnswer,
}

// reasonNames are the label values, by Reason.
var reasonNames = [...]string{
	ReasonNone:             "",
	ReasonConnect:          "connect",
	ReasonFirstByteTimeout: "first_byte_timeout",
	ReasonIdleTimeout:      "idle_timeout",
	ReasonStatus429:        "status_429",
	ReasonStatusAuth:       "status_auth",
	ReasonStatus5xx:        "status_5xx",
	ReasonStatusOther:      "status_other",
	ReasonStreamBroken:     "stream_broken",
	ReasonStreamError:      "stream_error",
	ReasonBadAnswer:        "bad_answer",
}

// String is the reason's label value: "" for ReasonNone, and for a value
// outside the set.
func (r Reason) String() string {
	if int(r) < len(reasonNames) {
		return reasonNames[r]
	}
	return ""
}

// MarshalText writes the label value, so that a log line names the
// reason rather than its number.
func (r Reason) MarshalText() ([]byte, error) { return []byte(r.String()), nil }
