package observe

// The logs of requests: the access log, one JSON line per request when
// telemetry.access_log names a place for it, and a line per request in
// the debug log. An access log line is the request's usage record, as the
// ledger takes it, with the trace id of its span and its error_type.
// Both name the key by its id, never the key itself, and hold no content.

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/usage"
	"gitea.mynodes.xyz/ilker/llmgw/internal/openai"
)

// AccessLog writes the access log, an Observer.
type AccessLog struct {
	w   io.Writer    // takes each line in one Write
	log *slog.Logger // where a failed write is told
}

var _ Observer = (*AccessLog)(nil)

// NewAccessLog writes the access log to w, telling log when a write
// fails; nil when w is nil, and then no access log is written.
func NewAccessLog(w io.Writer, log *slog.Logger) *AccessLog {
	if w == nil {
		return nil
	}
	return &AccessLog{w: w, log: log}
}

// accessLine is one line of the access log.
type accessLine struct {
	usage.Record
	// TraceID is the trace of the request's span; empty when it was not
	// traced.
	TraceID string `json:"trace_id,omitempty"`
	// ErrorType is the request's error_type; empty when it succeeded.
	ErrorType ErrorType `json:"error_type"`
}

// Observe writes c's line.
func (a *AccessLog) Observe(c *Completed) {
	line := accessLine{Record: c.Record, ErrorType: c.ErrorType}
	if c.Span != nil {
		if sc := c.Span.SpanContext(); sc.HasTraceID() {
			line.TraceID = sc.TraceID().String()
		}
	}
	b, err := json.Marshal(line)
	if err != nil {
		return
	}
	if _, err := a.w.Write(append(b, '\n')); err != nil {
		a.log.Warn("the access log could not be written", "err", err)
	}
}

// DebugLog writes a line per request to a logger at debug level, when
// the logger takes debug lines: an Observer.
type DebugLog struct {
	log *slog.Logger
}

var _ Observer = DebugLog{}

// NewDebugLog logs requests to log.
func NewDebugLog(log *slog.Logger) DebugLog { return DebugLog{log: log} }

// Observe writes c's line, unless log leaves out debug lines.
func (d DebugLog) Observe(c *Completed) {
	if !d.log.Enabled(context.Background(), slog.LevelDebug) {
		return
	}
	o := &c.Outcome
	model := c.Asked
	if !openai.Shown(model) {
		model = "(not shown)"
	}
	attrs := []slog.Attr{
		slog.String("id", c.ID), slog.String("model", model), slog.String("pool", c.Pool),
		slog.String("endpoint", c.Endpoint), slog.Int("status", o.Status), slog.Bool("stream", c.Stream),
		slog.Duration("ttft", o.TTFT), slog.Duration("duration", c.Took),
	}
	if u := o.Usage; u != nil {
		attrs = append(attrs, slog.Int64("prompt_tokens", u.PromptTokens), slog.Int64("completion_tokens", u.CompletionTokens), slog.Bool("estimated", o.Estimated))
	}
	if c.Record.KeyID != "" {
		attrs = append(attrs, slog.String("key_id", c.Record.KeyID), slog.String("tenant", c.Record.Tenant))
	}
	if o.Err != nil {
		attrs = append(attrs, slog.String("err", o.Err.Error()))
	}
	d.log.LogAttrs(context.Background(), slog.LevelDebug, "request", attrs...)
}
