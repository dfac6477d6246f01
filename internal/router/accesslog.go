package router

// The access log: one JSON line per request, when telemetry.access_log
// names a place for it. A line is the request's usage record, as the
// ledger takes it, with the trace id of its span and its error_type. It
// names the key by its id, never the key itself, and holds no content.

import (
	"encoding/json"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/usage"
)

// accessLine is one line of the access log.
type accessLine struct {
	usage.Record
	// TraceID is the trace of the request's span; empty when it was not
	// traced.
	TraceID string `json:"trace_id,omitempty"`
	// ErrorType is the request's error_type; empty when it succeeded.
	ErrorType string `json:"error_type"`
}

// writeAccess writes req's line to the access log.
func (r *Router) writeAccess(req *parsedRequest, rec *usage.Record, errType string) {
	line := accessLine{Record: *rec, ErrorType: errType}
	if req.span != nil {
		if sc := req.span.SpanContext(); sc.HasTraceID() {
			line.TraceID = sc.TraceID().String()
		}
	}
	b, err := json.Marshal(line)
	if err != nil {
		return
	}
	if _, err := r.access.Write(append(b, '\n')); err != nil {
		r.log.Warn("the access log could not be written", "err", err)
	}
}
