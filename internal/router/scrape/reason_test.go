package scrape

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestReason: each way a real server can fail a scrape and a probe is
// told by its reason.
func TestReason(t *testing.T) {
	serve := func(h http.HandlerFunc) string {
		s := httptest.NewServer(h)
		t.Cleanup(s.Close)
		return s.URL
	}
	closed := httptest.NewServer(http.NotFoundHandler())
	refused := closed.URL
	closed.Close()
	tests := []struct {
		name   string
		url    string
		scrape string // the scrape's reason
		probe  string // the probe's; empty for none
	}{
		{"refused", refused, ReasonConnect, ReasonConnect},
		{"slow", serve(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }), ReasonTimeout, ReasonTimeout},
		{"status", serve(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(503) }), ReasonStatus, ReasonStatus},
		{"malformed", serve(func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, "vllm:num_requests_waiting{model_name=\"m\" 3\n")
		}), ReasonParse, ""},
		{"protobuf", serve(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/vnd.google.protobuf")
			w.Write([]byte{0x0a, 0x01})
		}), ReasonParse, ""},
		{"cut", serve(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", "1000")
			io.WriteString(w, "vllm:num_requests_waiting 3\n")
		}), ReasonConnect, ""},
	}
	for _, tc := range tests {
		var body bytes.Buffer
		_, err := scrape(context.Background(), http.DefaultClient, tc.url+"/metrics", FormatPrometheus, 200*time.Millisecond, &body)
		if got := Reason(err); err == nil || got != tc.scrape {
			t.Errorf("%s: scrape failed with %v, reason %q; want %q", tc.name, err, got, tc.scrape)
		}
		if tc.probe == "" {
			continue
		}
		err = probe(context.Background(), http.DefaultClient, tc.url+"/health", 200*time.Millisecond)
		if got := Reason(err); err == nil || got != tc.probe {
			t.Errorf("%s: probe failed with %v, reason %q; want %q", tc.name, err, got, tc.probe)
		}
	}
}
