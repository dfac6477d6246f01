package config

import "testing"

// TestTracesOn: telemetry.traces decides, and unset leaves it to
// OTEL_TRACES_EXPORTER; OTEL_SDK_DISABLED=true turns traces off whatever
// either says.
func TestTracesOn(t *testing.T) {
	tests := []struct {
		traces string
		env    map[string]string
		want   bool
	}{
		{traces: "", want: false},
		{traces: "", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, want: true},
		{traces: "", env: map[string]string{"OTEL_TRACES_EXPORTER": "none"}, want: false},
		{traces: TracesOTLP, want: true},
		{traces: TracesOff, env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, want: false},
		{traces: TracesOTLP, env: map[string]string{"OTEL_SDK_DISABLED": "true"}, want: false},
		{traces: "", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_SDK_DISABLED": "TRUE"}, want: false},
	}
	for _, tt := range tests {
		got := Telemetry{Traces: tt.traces}.TracesOn(func(k string) string { return tt.env[k] })
		if got != tt.want {
			t.Errorf("traces %q, env %v: on = %v, want %v", tt.traces, tt.env, got, tt.want)
		}
	}
}
