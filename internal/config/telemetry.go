package config

// The telemetry block: what llmgw emits besides its Prometheus metrics,
// traces and an access log, and how each is turned on. Both are off
// unless asked for.

import (
	"net/url"
	"os"
	"strings"
)

// Telemetry says where traces and the access log go.
type Telemetry struct {
	// Traces is otlp, to export a span per request and per upstream call
	// over OTLP/HTTP, or off. Empty means the OTEL_TRACES_EXPORTER
	// environment variable (otlp or none), and off without it.
	Traces string `yaml:"traces"`
	// Endpoint is the base URL of the OTLP/HTTP endpoint spans are sent
	// to, such as http://collector:4318, to which /v1/traces is added.
	// Empty means OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or
	// OTEL_EXPORTER_OTLP_ENDPOINT, else http://localhost:4318.
	Endpoint string `yaml:"endpoint,omitempty"`
	// RecordContent puts each request's prompt messages on its span, as
	// gen_ai.input.messages. Off, no message content is ever recorded.
	RecordContent bool `yaml:"record_content"`
	// ClientTrace is what a client's W3C traceparent does: link (the
	// default) starts each request's trace afresh, linked to the client's
	// span, sampled as llmgw's sampler decides, with none of the client's
	// tracestate sent on; continue, for clients inside the operator's
	// organisation, continues the client's trace, tracestate and sampling
	// decision into llmgw's spans and its upstream calls.
	ClientTrace string `yaml:"client_trace"`
	// AccessLog is where one JSON line per request goes: stderr, stdout,
	// a file's path (appended to), or off.
	AccessLog string `yaml:"access_log"`
}

// The values of telemetry.traces.
const (
	TracesOff  = "off"
	TracesOTLP = "otlp"
)

// The values of telemetry.client_trace.
const (
	ClientTraceLink     = "link"
	ClientTraceContinue = "continue"
)

// AccessLogOff is telemetry.access_log's value that writes none.
const AccessLogOff = "off"

// TracesOn reports whether traces are exported: telemetry.traces says
// otlp, or is empty and OTEL_TRACES_EXPORTER says otlp; and
// OTEL_SDK_DISABLED is not true.
func (t Telemetry) TracesOn(getenv func(string) string) bool {
	if getenv == nil {
		getenv = os.Getenv
	}
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return false
	}
	switch t.Traces {
	case TracesOTLP:
		return true
	case "":
		return strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")) == TracesOTLP
	}
	return false
}

func (t *Telemetry) validate(ps *problems) {
	switch t.Traces {
	case "", TracesOff, TracesOTLP:
	default:
		ps.add("telemetry.traces", "must be otlp or off, got %q", t.Traces)
	}
	if t.Endpoint != "" {
		u, err := url.Parse(t.Endpoint)
		switch {
		case err != nil:
			ps.add("telemetry.endpoint", "must be a URL, such as http://collector:4318: %v", err)
		case u.Scheme != "http" && u.Scheme != "https":
			ps.add("telemetry.endpoint", "must be an http:// or https:// URL, got scheme %q", u.Scheme)
		case u.Host == "":
			ps.add("telemetry.endpoint", "must name a host, such as http://collector:4318")
		}
	}
	switch t.ClientTrace {
	case ClientTraceLink, ClientTraceContinue:
	default:
		ps.add("telemetry.client_trace", "must be link or continue, got %q", t.ClientTrace)
	}
	if strings.TrimSpace(t.AccessLog) == "" {
		ps.add("telemetry.access_log", "must be off, stderr, stdout or a file's path, got %q", t.AccessLog)
	}
}
