package scrape

// llama.cpp's and Ollama's answers: the /metrics page llama-server writes,
// held name by name to its source; its /slots; Ollama's /api/ps; answers
// that are huge, malformed or hold counts no server writes; and a
// Watcher reading a llama.cpp server's /slots while its /metrics is off.

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// llamacppMetrics is every metric llama-server writes on /metrics, with
// its type and help exactly as the source writes them: the
// all_metrics_def of server_routes::init_routes, get_metrics, in
// tools/server/server-context.cpp of ggml-org/llama.cpp at commit
// fb4026604c67c682f552337ec9b91eced0abd35a. The server writes each as
// "# HELP llamacpp:<name> <help>", "# TYPE llamacpp:<name> <type>" and
// "llamacpp:<name> <value>", counters first, in this order; a value
// passes through a C++ stream's default format, so 1482130 is written
// 1.48213e+06. No KV-cache gauge is among them: the server no longer
// exports one. testdata/llamacpp.txt is such a page.
var llamacppMetrics = []struct{ name, typ, help string }{
	{"prompt_tokens_total", "counter", "Number of prompt tokens processed."},
	{"prompt_seconds_total", "counter", "Prompt process time"},
	{"tokens_predicted_total", "counter", "Number of generation tokens processed."},
	{"tokens_predicted_seconds_total", "counter", "Predict process time"},
	{"n_decode_total", "counter", "Total number of llama_decode() calls"},
	{"n_tokens_max", "counter", "Largest observed n_tokens."},
	{"n_busy_slots_per_decode", "counter", "Average number of busy slots per llama_decode() call"},
	{"prompt_tokens_seconds", "gauge", "Average prompt throughput in tokens/s."},
	{"predicted_tokens_seconds", "gauge", "Average generation throughput in tokens/s."},
	{"requests_processing", "gauge", "Number of requests processing."},
	{"requests_deferred", "gauge", "Number of requests deferred."},
}

// TestLlamaCppPageIsTheSource holds testdata/llamacpp.txt to the source's
// definitions, and every llamacpp: name Parse reads to the page: a name
// misspelt in Parse reads nothing from a real server.
func TestLlamaCppPageIsTheSource(t *testing.T) {
	page := string(readTestdata(t, "llamacpp.txt"))
	var want strings.Builder
	lines := strings.Split(strings.TrimSuffix(page, "\n"), "\n")
	if len(lines) != 3*len(llamacppMetrics) {
		t.Fatalf("the page has %d lines, want %d", len(lines), 3*len(llamacppMetrics))
	}
	for k, m := range llamacppMetrics {
		full := "llamacpp:" + m.name
		fmt.Fprintf(&want, "# HELP %s %s\n# TYPE %s %s\n", full, m.help, full, m.typ)
		value, ok := strings.CutPrefix(lines[3*k+2], full+" ")
		if !ok || value == "" {
			t.Errorf("line %d: %q, want the sample of %s", 3*k+3, lines[3*k+2], full)
		}
	}
	var got strings.Builder
	for k, line := range lines {
		if k%3 != 2 {
			got.WriteString(line + "\n")
		}
	}
	if diff := cmp.Diff(want.String(), got.String()); diff != "" {
		t.Errorf("the page's HELP and TYPE lines differ from the source's (-source +page):\n%s", diff)
	}
	read := 0
	for m := range numMetrics {
		name := metricName(m)
		if !strings.HasPrefix(name, "llamacpp:") {
			continue
		}
		read++
		if !strings.Contains(page, "\n# TYPE "+name+" gauge\n") {
			t.Errorf("Parse reads %s, which the page has no gauge of", name)
		}
	}
	if read != 2 {
		t.Errorf("Parse reads %d llamacpp: metrics, want 2 (requests_deferred, requests_processing)", read)
	}
}

func TestParseSlots(t *testing.T) {
	// testdata/llamacpp-slots.json is a /slots answer: server_slot::to_json
	// in tools/server/server-context.cpp writes id, n_ctx, speculative and
	// is_processing for every slot, and the task's counts for a busy one.
	got, err := parseSlots(readTestdata(t, "llamacpp-slots.json"))
	if err != nil {
		t.Fatal(err)
	}
	if want := (Load{Waiting: -1, Running: 2, KVUsage: -1, Slots: 4}); !cmp.Equal(got, want) {
		t.Errorf("parseSlots = %+v, want %+v", got, want)
	}
}

func TestParsePS(t *testing.T) {
	// testdata/ollama-ps.json is a GET /api/ps answer: api.ProcessResponse
	// of ollama/ollama's api/types.go, {"models": [ProcessModelResponse]},
	// each with name, model, size, digest, details, expires_at, size_vram
	// and context_length.
	got, err := parsePS(readTestdata(t, "ollama-ps.json"))
	if err != nil {
		t.Fatal(err)
	}
	want := Load{Waiting: -1, Running: -1, KVUsage: -1, Models: []string{"llama3.2:1b", "qwen3:latest"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("parsePS (-want +got):\n%s", diff)
	}
	// Nothing loaded is a reading: every model is cold.
	got, err = parsePS([]byte(`{"models":[]}`))
	if err != nil || got.Models == nil || len(got.Models) != 0 {
		t.Errorf("parsePS of no models = %+v, %v; want an empty list", got, err)
	}
}

func TestOllamaName(t *testing.T) {
	for in, want := range map[string]string{
		"llama3.2":                            "llama3.2:latest",
		"llama3.2:1b":                         "llama3.2:1b",
		"Llama3.2:1B":                         "llama3.2:1b",
		"library/qwen3":                       "qwen3:latest",
		"registry.ollama.ai/library/qwen3:8b": "qwen3:8b",
		"hf.co/bartowski/Llama-3.2-1B-Instruct-GGUF": "hf.co/bartowski/llama-3.2-1b-instruct-gguf:latest",
		"localhost:5000/team/model":                  "localhost:5000/team/model:latest",
		"localhost:5000/team/model:q4":               "localhost:5000/team/model:q4",
	} {
		if got := OllamaName(in); got != want {
			t.Errorf("OllamaName(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestHostileAnswers feeds the readers answers no server writes: each is
// refused whole (an error, and so no reading), or reads as unknown, and
// never as an idle endpoint.
func TestHostileAnswers(t *testing.T) {
	many := func(n int, item string) string {
		return strings.TrimSuffix(strings.Repeat(item+",", n), ",")
	}
	for _, tc := range []struct {
		name  string
		parse func([]byte) (Load, error)
		body  string
		want  Load // when it is read
		err   bool
	}{
		{"metrics NaN", Parse, "llamacpp:requests_deferred NaN\nllamacpp:requests_processing 2\n", Load{Waiting: -1, Running: 2, KVUsage: -1}, false},
		{"metrics negative", Parse, "llamacpp:requests_deferred -3\nllamacpp:requests_processing +Inf\n", Load{Waiting: -1, Running: -1, KVUsage: -1}, false},
		{"metrics malformed", Parse, "llamacpp:requests_deferred three\n", Load{}, true},
		{"slots malformed", parseSlots, `[{"is_processing": tru`, Load{}, true},
		{"slots not a list", parseSlots, `{"is_processing": true}`, Load{}, true},
		{"slots none", parseSlots, `[]`, Load{}, true},
		{"slots too many", parseSlots, "[" + many(maxSlots+1, `{"is_processing":false}`) + "]", Load{}, true},
		{"slot without is_processing", parseSlots, `[{"id":0}]`, Load{}, true},
		{"slot is_processing a number", parseSlots, `[{"is_processing":1}]`, Load{}, true},
		{"ps malformed", parsePS, `{"models":[{"name":`, Load{}, true},
		{"ps without models", parsePS, `{"modelz":[]}`, Load{}, true},
		{"ps models null", parsePS, `{"models":null}`, Load{}, true},
		{"ps too many", parsePS, `{"models":[` + many(maxModels+1, `{"name":"m"}`) + `]}`, Load{}, true},
		{"ps name a number", parsePS, `{"models":[{"name":3}]}`, Load{}, true},
		{"ps names empty or too long", parsePS, `{"models":[{"name":"","model":"` + strings.Repeat("x", maxModelName+1) + `"}]}`,
			Load{Waiting: -1, Running: -1, KVUsage: -1, Models: []string{}}, false},
	} {
		got, err := tc.parse([]byte(tc.body))
		if tc.err {
			if err == nil {
				t.Errorf("%s: read as %+v, want an error", tc.name, got)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, diff)
		}
	}
}

// TestScrapeHugeAnswer holds an /api/ps and a /slots answer to the bound
// on a /metrics answer: longer is refused, unread, as a parse failure.
func TestScrapeHugeAnswer(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"models":[{"name":"`))
		w.Write(bytes.Repeat([]byte("x"), maxMetricsBody))
		w.Write([]byte(`"}]}`))
	}))
	defer srv.Close()
	var body bytes.Buffer
	_, err := scrape(t.Context(), srv.Client(), srv.URL+"/api/ps", FormatOllama, 5e9, &body)
	if Reason(err) != ReasonParse {
		t.Errorf("a huge /api/ps: %v, reason %q; want %q", err, Reason(err), ReasonParse)
	}
	_, err = scrapeSlots(t.Context(), srv.Client(), srv.URL+"/slots", 5e9, &body)
	if Reason(err) != ReasonParse {
		t.Errorf("a huge /slots: %v, reason %q; want %q", err, Reason(err), ReasonParse)
	}
}

// TestWatcherReadsSlotsWithoutMetrics runs a Watcher against a server
// playing llama-server without --metrics: /metrics answers 501 as it
// does, and the load is read from /slots, with no scrape failure. With
// /slots off too (--no-slots), the scrape fails as the status it is.
func TestWatcherReadsSlotsWithoutMetrics(t *testing.T) {
	var slotsOff atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/metrics":
			http.Error(w, `{"error":{"code":501,"message":"This server does not support metrics endpoint. Start it with `+"`--metrics`"+`","type":"not_supported_error"}}`, http.StatusNotImplemented)
		case r.URL.Path == "/slots" && !slotsOff.Load():
			w.Write(readTestdata(t, "llamacpp-slots.json"))
		default:
			http.Error(w, "not supported", http.StatusNotImplemented)
		}
	}))
	defer srv.Close()
	run := func() (Load, error) {
		loads, errs := make(chan Load, 1), make(chan error, 1)
		w := NewWatcher(srv.Client())
		defer w.Close()
		w.Set([]Target{{
			Name: "llamacpp", MetricsURL: srv.URL + "/metrics", SlotsURL: srv.URL + "/slots", Interval: 1e9, MaxAge: 5e9,
			OnLoad:        func(l Load) { loads <- l },
			OnScrapeError: func(err error) { errs <- err },
		}})
		select {
		case l := <-loads:
			return l, nil
		case err := <-errs:
			return Load{}, err
		}
	}
	l, err := run()
	if err != nil || l.Running != 2 || l.Waiting != -1 || l.KVUsage != -1 {
		t.Errorf("with /slots on: %+v, %v; want 2 running, the rest unknown", l, err)
	}
	slotsOff.Store(true)
	if _, err := run(); Reason(err) != ReasonStatus {
		t.Errorf("with /slots off: %v, reason %q; want %q", err, Reason(err), ReasonStatus)
	}
}
