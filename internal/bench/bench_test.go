package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"flag"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"gitea.mynodes.xyz/ilker/llmgw/internal/sim"
)

// runCommand runs the command and returns its stdout.
func runCommand(t *testing.T, args ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if err := Command(context.Background(), args, &stdout, &stderr); err != nil {
		t.Fatalf("bench %v: %v\nstderr:\n%s", args, err, stderr.String())
	}
	return stdout.String()
}

// statsFields are the fields every figures object must have: the ones
// scripts read.
var statsFields = []string{"requests", "errors", "rejected", "goodput", "ttft_p50_s", "ttft_p99_s", "tpot_p99_s", "itl_p99_s", "prefix_hit_rate"}

func checkFields(t *testing.T, where string, obj map[string]any) {
	t.Helper()
	for _, f := range statsFields {
		if _, ok := obj[f]; !ok {
			t.Errorf("%s: no %q field", where, f)
		}
	}
}

func readJSON(t *testing.T, path string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestCommandJSON(t *testing.T) {
	f := &fakeServer{}
	srv := f.start(t)
	dir := t.TempDir()
	jsonPath, plotPath := filepath.Join(dir, "out.json"), filepath.Join(dir, "out.svg")
	table := runCommand(t, "--workload", "mixed", "--rate", "40", "--duration", "1s", "--seed", "3",
		"--target", srv.URL+"/", "--json", jsonPath, "--plot", plotPath, "--slo-ttft", "0")
	out := readJSON(t, jsonPath)
	checkFields(t, "top level", out)
	for _, group := range []string{"by_class", "by_tenant"} {
		m, ok := out[group].(map[string]any)
		if !ok || len(m) == 0 {
			t.Fatalf("%s missing or empty: %v", group, out[group])
		}
		for k, v := range m {
			checkFields(t, group+"."+k, v.(map[string]any))
		}
	}
	classes := slices.Sorted(func(yield func(string) bool) {
		for k := range out["by_class"].(map[string]any) {
			yield(k)
		}
	})
	if diff := cmp.Diff([]string{"critical", "sheddable", "standard"}, classes); diff != "" {
		t.Errorf("classes (-want +got):\n%s", diff)
	}
	seen := f.requests()
	if got := out["requests"].(float64); int(got) != len(seen) || got < 20 {
		t.Errorf("report says %v requests, server saw %d", got, len(seen))
	}
	if out["errors"].(float64) != 0 || out["rejected"].(float64) != 0 {
		t.Errorf("errors %v, rejected %v against a healthy server", out["errors"], out["rejected"])
	}
	// The fake server reports half of every prompt as cached.
	if hit := out["prefix_hit_rate"].(float64); hit < 0.45 || hit > 0.5 {
		t.Errorf("prefix hit rate %v, want about 0.5", hit)
	}
	for _, r := range seen {
		if r.Model != defaultModel || !r.Stream || !r.IncludeUsage || !r.IgnoreEOS || r.MaxTokens <= 0 || r.Tenant == "" || r.Class == "" {
			t.Fatalf("server saw %+v", r)
		}
	}
	for _, want := range []string{"class", "critical", "tenant", "acme/search", "goodput"} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
	checkSVG(t, plotPath)
}

func checkSVG(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	d := xml.NewDecoder(bytes.NewReader(b))
	lines := 0
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("plot is not well-formed XML: %v", err)
		}
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "polyline" {
			lines++
		}
	}
	if lines == 0 {
		t.Error("plot has no lines")
	}
}

func TestCommandSweep(t *testing.T) {
	srv := (&fakeServer{}).start(t)
	dir := t.TempDir()
	jsonPath, plotPath := filepath.Join(dir, "sweep.json"), filepath.Join(dir, "sweep.svg")
	table := runCommand(t, "--workload", "flat", "--sweep", "20:60:20", "--duration", "500ms",
		"--target", srv.URL+"/v1", "--json", jsonPath, "--plot", plotPath)
	out := readJSON(t, jsonPath)
	checkFields(t, "top level", out)
	runs, ok := out["runs"].([]any)
	if !ok {
		t.Fatalf("no runs array: %v", out["runs"])
	}
	var rates, counts []float64
	total := 0.0
	for i, r := range runs {
		run := r.(map[string]any)
		checkFields(t, "runs["+string(rune('0'+i))+"]", run)
		rates = append(rates, run["rate"].(float64))
		counts = append(counts, run["requests"].(float64))
		total += run["requests"].(float64)
	}
	if diff := cmp.Diff([]float64{20, 40, 60}, rates); diff != "" {
		t.Errorf("rates (-want +got):\n%s", diff)
	}
	// Flat sends rate × duration requests exactly.
	if diff := cmp.Diff([]float64{10, 20, 30}, counts); diff != "" {
		t.Errorf("requests per run (-want +got):\n%s", diff)
	}
	if out["requests"].(float64) != total {
		t.Errorf("top-level requests %v, want the runs' sum %v", out["requests"], total)
	}
	if lines := strings.Split(strings.TrimSpace(table), "\n"); len(lines) != 6 || !strings.HasPrefix(lines[5], "capacity at SLO") {
		t.Errorf("sweep table should have the setup, a header, three rows and the capacity:\n%s", table)
	}
	if out["capacity_at_slo"] != 60.0 || out["capacity_lower_bound"] != true || out["capacity_unit"] != "req/s" {
		t.Errorf("capacity %v, lower bound %v, unit %v; want 60, true, req/s: every rate passed",
			out["capacity_at_slo"], out["capacity_lower_bound"], out["capacity_unit"])
	}
	checkSVG(t, plotPath)
}

// TestCommandSweepRefines: with --refine, a sweep adds runs halfway
// between the highest load that passed and the next, and reads capacity
// between the closest two. The target answers the first 30 requests and
// fails every one after, so 20 and 40 req/s pass (10 and 20 requests) and
// every later run fails.
func TestCommandSweepRefines(t *testing.T) {
	var served atomic.Int64
	srv := (&fakeServer{script: func(w http.ResponseWriter, _ *fakeRequest) bool {
		if served.Add(1) <= 30 {
			return false
		}
		http.Error(w, `{"error":{"message":"overloaded","type":"server_error","param":null,"code":null}}`, http.StatusServiceUnavailable)
		return true
	}}).start(t)
	jsonPath := filepath.Join(t.TempDir(), "sweep.json")
	table := runCommand(t, "--workload", "flat", "--sweep", "20:60:20", "--refine", "2", "--duration", "500ms",
		"--target", srv.URL, "--json", jsonPath)
	out := readJSON(t, jsonPath)
	var rates, goodputs []float64
	for _, r := range out["runs"].([]any) {
		run := r.(map[string]any)
		rates = append(rates, run["rate"].(float64))
		goodputs = append(goodputs, run["goodput"].(float64))
	}
	// 60 fails, so 50 is run, fails, and then 45.
	if diff := cmp.Diff([]float64{20, 40, 45, 50, 60}, rates); diff != "" {
		t.Errorf("rates, in order (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]float64{1, 1, 0, 0, 0}, goodputs); diff != "" {
		t.Errorf("goodput per run (-want +got):\n%s", diff)
	}
	// Between 40 (goodput 1) and 45 (0): a tenth of the way.
	if got := out["capacity_at_slo"].(float64); math.Abs(got-40.5) > 1e-9 {
		t.Errorf("capacity %v, want 40.5", got)
	}
	if rows := strings.Count(table, "\n"); rows != 8 {
		t.Errorf("table should have the setup, a header, five rows and the capacity:\n%s", table)
	}
}

// TestCommandSweepRefinesNothingPastTheSweep: when every load passes,
// there is no interval to halve and --refine adds no run.
func TestCommandSweepRefinesNothingPastTheSweep(t *testing.T) {
	srv := (&fakeServer{}).start(t)
	jsonPath := filepath.Join(t.TempDir(), "sweep.json")
	runCommand(t, "--workload", "flat", "--sweep", "20:40:20", "--refine", "3", "--duration", "500ms",
		"--target", srv.URL, "--json", jsonPath)
	out := readJSON(t, jsonPath)
	if n := len(out["runs"].([]any)); n != 2 || out["capacity_lower_bound"] != true {
		t.Errorf("%d runs, lower bound %v; want the 2 swept and a lower bound", n, out["capacity_lower_bound"])
	}
}

func TestCommandTrace(t *testing.T) {
	f := &fakeServer{}
	srv := f.start(t)
	runCommand(t, "--workload", "trace", "--trace", "testdata/mooncake-tiny.jsonl", "--time-scale", "20", "--length-scale", "8", "--target", srv.URL)
	var got []int
	for _, r := range f.requests() {
		got = append(got, r.PromptTokens)
	}
	slices.Sort(got)
	if diff := cmp.Diff([]int{38, 88, 150, 192}, got); diff != "" {
		t.Errorf("prompt tokens the server counted (-want +got):\n%s", diff)
	}
}

// TestCommandTraceFrom replays the tiny trace from 0.9 s of its clock:
// only its last two requests are sent, and the setup line says where
// the replay started.
func TestCommandTraceFrom(t *testing.T) {
	f := &fakeServer{}
	srv := f.start(t)
	table := runCommand(t, "--workload", "trace", "--trace", "testdata/mooncake-tiny.jsonl", "--trace-from", "900ms", "--time-scale", "20", "--length-scale", "8", "--target", srv.URL)
	var got []int
	for _, r := range f.requests() {
		got = append(got, r.PromptTokens)
	}
	slices.Sort(got)
	if diff := cmp.Diff([]int{38, 192}, got); diff != "" {
		t.Errorf("prompt tokens the server counted (-want +got):\n%s", diff)
	}
	if !strings.Contains(table, "from 0.9s") {
		t.Errorf("the report does not say where the replay started:\n%s", table)
	}
}

// TestCommandTraceToSweep sweeps two time scales over the tiny trace up
// to 1.5 s of its clock: both runs send the same three requests, and the
// table and the JSON say where the replay stopped.
func TestCommandTraceToSweep(t *testing.T) {
	f := &fakeServer{}
	srv := f.start(t)
	jsonPath := filepath.Join(t.TempDir(), "sweep.json")
	table := runCommand(t, "--workload", "trace", "--trace", "testdata/mooncake-tiny.jsonl", "--trace-to", "1500ms", "--sweep", "10:20:10", "--length-scale", "8",
		"--target", srv.URL, "--json", jsonPath)
	var got []int
	for _, r := range f.requests() {
		got = append(got, r.PromptTokens)
	}
	slices.Sort(got)
	if diff := cmp.Diff([]int{88, 88, 150, 150, 192, 192}, got); diff != "" {
		t.Errorf("prompt tokens the server counted (-want +got):\n%s", diff)
	}
	if !strings.Contains(table, "to 1.5s") {
		t.Errorf("the report does not say where the replay stopped:\n%s", table)
	}
	if got := readJSON(t, jsonPath)["trace_to_s"]; got != 1.5 {
		t.Errorf("trace_to_s is %v, want 1.5", got)
	}
}

// TestCommandTraceWindowEmpty: a window of the trace with no request in
// it is an error that names the window, not a run of nothing.
func TestCommandTraceWindowEmpty(t *testing.T) {
	srv := (&fakeServer{}).start(t)
	args := []string{"--workload", "trace", "--trace", "testdata/mooncake-tiny.jsonl", "--trace-from", "1100ms", "--trace-to", "2s", "--target", srv.URL}
	err := Command(context.Background(), args, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "between --trace-from and --trace-to") {
		t.Errorf("error %v, want one naming the window", err)
	}
}

func TestCommandAPIKeysFile(t *testing.T) {
	f := &fakeServer{}
	srv := f.start(t)
	keys := filepath.Join(t.TempDir(), "keys")
	os.WriteFile(keys, []byte("# tenants\nacme/search = sk-search\n\nacme/chat=sk-chat\nbeta/batch=sk-batch\n"), 0o600)
	runCommand(t, "--workload", "mixed", "--rate", "30", "--duration", "1s", "--target", srv.URL, "--api-keys", keys)
	want := map[string]string{"acme/search": "Bearer sk-search", "acme/chat": "Bearer sk-chat", "beta/batch": "Bearer sk-batch"}
	for _, r := range f.requests() {
		if r.Auth != want[r.Tenant] {
			t.Fatalf("tenant %s sent the wrong key", r.Tenant)
		}
	}
}

func TestCommandRejectsBadFlags(t *testing.T) {
	dir := t.TempDir()
	badKeys := filepath.Join(dir, "keys")
	os.WriteFile(badKeys, []byte("acme/search=sk-secret-1\nsk-secret-2\n"), 0o600)
	tests := []struct {
		args    []string
		wantErr string
	}{
		{[]string{"--workload", "chat"}, "name a target"},
		{[]string{"--target", "http://x", "--spawn-sim", "2"}, "not both"},
		{[]string{"--target", "ftp://x"}, "http:// or https://"},
		{[]string{"--workload", "nope", "--target", "http://x"}, `invalid value "nope" for flag --workload`},
		{[]string{"--workload", "trace", "--target", "http://x"}, "needs --trace"},
		{[]string{"--workload", "trace", "--trace", "t.csv", "--rate", "3", "--target", "http://x"}, "does not apply to a trace"},
		{[]string{"--workload", "trace", "--trace", "t.csv", "--sweep", "1:2:1", "--time-scale", "2", "--target", "http://x"}, "--time-scale or --sweep"},
		{[]string{"--trace", "t.csv", "--target", "http://x"}, "needs --workload trace"},
		{[]string{"--time-scale", "2", "--target", "http://x"}, "only to --workload trace"},
		{[]string{"--trace-from", "60s", "--target", "http://x"}, "only to --workload trace"},
		{[]string{"--workload", "trace", "--trace", "t.csv", "--trace-from", "-1s", "--target", "http://x"}, "--trace-from must not be negative"},
		{[]string{"--trace-to", "60s", "--target", "http://x"}, "only to --workload trace"},
		{[]string{"--workload", "trace", "--trace", "t.csv", "--trace-from", "60s", "--trace-to", "60s", "--target", "http://x"}, "--trace-to must be later than --trace-from"},
		{[]string{"--rate", "0", "--target", "http://x"}, "--rate must be a positive number"},
		{[]string{"--rate", "2", "--sweep", "1:2:1", "--target", "http://x"}, "not both"},
		{[]string{"--sweep", "5:1:1", "--target", "http://x"}, "B must not be below A"},
		{[]string{"--sweep", "1:5", "--target", "http://x"}, "want A:B:STEP"},
		{[]string{"--sweep", "1:5:1", "--refine", "-1", "--target", "http://x"}, "--refine must not be negative"},
		{[]string{"--refine", "2", "--target", "http://x"}, "--refine applies only to a --sweep"},
		{[]string{"--target", "http://x", "--virtual"}, "--virtual applies only with --spawn-sim"},
		{[]string{"--spawn-sim", "2", "--virtual", "--admission", "on"}, "--virtual replays routing alone"},
		{[]string{"--spawn-sim", "2", "--virtual", "--gateways", "2"}, "--virtual replays routing alone"},
		{[]string{"--spawn-sim", "2", "--virtual", "--sim-fault", "0:kill@1s"}, "--virtual replays routing alone"},
		{[]string{"--sweep", "4:4:1", "--refine", "2", "--target", "http://x"}, "--refine applies only to a --sweep"},
		{[]string{"--policy", "round_robin", "--target", "http://x"}, "--policy applies only with --spawn-sim"},
		{[]string{"--spawn-sim", "2", "--admission", "maybe"}, "on or off"},
		{[]string{"--spawn-sim", "1", "--direct", "--policy", "round_robin"}, "--direct bypasses the gateway"},
		{[]string{"--spawn-sim", "2", "--direct", "--gateways", "2"}, "--direct bypasses the gateway"},
		{[]string{"--spawn-sim", "2", "--policy", "p2c"}, `invalid value "p2c" for flag --policy: want auto, round_robin`},
		{[]string{"--spawn-sim", "2", "--gateways", "0"}, "--gateways must be at least 1"},
		{[]string{"--target", "http://x", "--gateways", "2"}, "--gateways applies only with --spawn-sim"},
		{[]string{"--target", "http://x", "--sim-speeds", "1,2"}, "--sim-speeds applies only with --spawn-sim"},
		{[]string{"--target", "http://x", "--sim-fault", "0:kill@1s"}, "--sim-fault applies only with --spawn-sim"},
		{[]string{"--target", "http://x", "--hedge", "3"}, "--hedge applies only with --spawn-sim"},
		{[]string{"--spawn-sim", "1", "--direct", "--hedge", "3"}, "--direct bypasses the gateway"},
		{[]string{"--spawn-sim", "2", "--hedge", "1"}, "--hedge must be 0 (off) or above 1"},
		{[]string{"--spawn-sim", "2", "--hedge", "NaN"}, "--hedge must be 0 (off) or above 1"},
		{[]string{"--spawn-sim", "3", "--sim-speeds", "1,2"}, "lists 2 speeds for --spawn-sim 3"},
		{[]string{"--spawn-sim", "2", "--sim-speeds", "1,2", "--sim-speed", "2"}, "--sim-speed or --sim-speeds, not both"},
		{[]string{"--spawn-sim", "2", "--sim-profile", "vllm"}, `invalid value "vllm" for flag --sim-profile: want chunked, slots`},
		{[]string{"--target", "http://x", "--sim-profile", "slots"}, "--sim-profile applies only with --spawn-sim"},
		{[]string{"--spawn-sim", "2", "--sim-profile", "slots", "--sim-instant"}, "--sim-instant or --sim-profile, not both"},
		{[]string{"--spawn-sim", "2", "--sim-num-blocks", "-1"}, "--sim-num-blocks must not be negative"},
		{[]string{"--target", "http://x", "--sim-num-blocks", "100"}, "--sim-num-blocks applies only with --spawn-sim"},
		{[]string{"--spawn-sim", "2", "--sim-speeds", "1,0"}, "want positive speeds"},
		{[]string{"--spawn-sim", "2", "--sim-speeds", "1,,2"}, "want positive speeds"},
		{[]string{"--spawn-sim", "2", "--sim-fault", "2:kill@1s"}, "replica 2 does not exist; --spawn-sim 2 makes replicas 0 to 1"},
		{[]string{"--spawn-sim", "2", "--sim-fault", "1:crash@1s"}, `unknown fault "crash"`},
		{[]string{"--spawn-sim", "2", "--sim-fault", "1:kill@1s", "--sim-fault", "1:stall@2s+1s"}, "replica 1 is already dead after 1:kill@1s"},
		{[]string{"--spawn-sim", "2", "--sim-fault", "0:stall@1s+2s", "--sim-fault", "0:stall@2s+1s"}, "overlaps 0:stall@1s+2s"},
		{[]string{"--plot", "out.png", "--target", "http://x"}, "SVG only"},
		{[]string{"--duration", "0s", "--target", "http://x"}, "--duration must be positive"},
		{[]string{"--api-keys", badKeys, "--target", "http://x"}, "line 2: want tenant=key"},
		{[]string{"--target", "http://x", "extra"}, `unexpected argument "extra"`},
	}
	for _, tt := range tests {
		var stderr bytes.Buffer
		err := Command(context.Background(), tt.args, io.Discard, &stderr)
		if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("bench %v: error %v, want one containing %q", tt.args, err, tt.wantErr)
			continue
		}
		if strings.Contains(err.Error()+stderr.String(), "sk-secret") {
			t.Errorf("bench %v: error or stderr shows a key: %v", tt.args, err)
		}
	}
	var stdout bytes.Buffer
	if err := Command(context.Background(), []string{"-h"}, &stdout, io.Discard); !errors.Is(err, flag.ErrHelp) || !strings.HasPrefix(stdout.String(), "usage: llmgw bench") {
		t.Errorf("-h: %v and %q, want flag.ErrHelp and the usage on stdout", err, stdout.String())
	}
	if !errors.Is(WritePlot("x.png", &Output{}, nil), ErrPlotFormat) {
		t.Error("WritePlot(x.png) did not refuse")
	}
}

func TestRedactURL(t *testing.T) {
	if got := redactURL("http://user:sk-secret@127.0.0.1:8080/v1"); strings.Contains(got, "sk-secret") {
		t.Errorf("redactURL kept the password: %s", got)
	}
	if got := redactURL("http://127.0.0.1:8080/v1"); got != "http://127.0.0.1:8080/v1" {
		t.Errorf("redactURL changed a plain URL: %s", got)
	}
}

func TestParseSweep(t *testing.T) {
	tests := []struct {
		in   string
		want []float64
	}{
		{"1:5:1", []float64{1, 2, 3, 4, 5}},
		{"10:40:15", []float64{10, 25, 40}},
		{"0.1:0.5:0.1", []float64{0.1, 0.2, 0.3, 0.4, 0.5}},
		{"2:9:3", []float64{2, 5, 8}},
		{"4:4:1", []float64{4}},
	}
	for _, tt := range tests {
		got, err := parseSweep(tt.in)
		if err != nil {
			t.Errorf("parseSweep(%q): %v", tt.in, err)
			continue
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("parseSweep(%q) (-want +got):\n%s", tt.in, diff)
		}
	}
	for _, bad := range []string{"", "1:2", "a:2:1", "1:2:0", "-1:2:1", "1:1000:1"} {
		if _, err := parseSweep(bad); err == nil {
			t.Errorf("parseSweep(%q) succeeded", bad)
		}
	}
}

func TestNormaliseURL(t *testing.T) {
	for in, want := range map[string]string{
		"http://127.0.0.1:8080":                  "http://127.0.0.1:8080/v1",
		"http://127.0.0.1:8080/":                 "http://127.0.0.1:8080/v1",
		"http://127.0.0.1:8080/v1":               "http://127.0.0.1:8080/v1",
		"http://127.0.0.1:8080/v1/":              "http://127.0.0.1:8080/v1",
		"https://gw.example/v1/chat/completions": "https://gw.example/v1",
		"http://10.0.0.7:8000/openai":            "http://10.0.0.7:8000/openai/v1",
	} {
		got, err := normaliseURL(in)
		if err != nil || got != want {
			t.Errorf("normaliseURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

// TestCommandSpawnSim runs against simulated replicas started in-process:
// straight to one replica, and through the gateway in front of two.
func TestCommandSpawnSim(t *testing.T) {
	for _, tt := range []struct {
		name string
		args []string
	}{
		{"direct", []string{"--spawn-sim", "1", "--direct"}},
		{"gateway", []string{"--spawn-sim", "2", "--admission", "off"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			jsonPath := filepath.Join(t.TempDir(), "out.json")
			runCommand(t, append([]string{"--workload", "flat", "--rate", "50", "--duration", "1s", "--sim-instant", "--json", jsonPath}, tt.args...)...)
			out := readJSON(t, jsonPath)
			if out["requests"].(float64) != 50 || out["ok"].(float64) != 50 {
				t.Errorf("requests %v, ok %v; want 50 and 50", out["requests"], out["ok"])
			}
			// Every flat request is the same prompt: after the first, the
			// replica's prefix cache holds it.
			if hit := out["prefix_hit_rate"].(float64); hit <= 0 {
				t.Errorf("prefix hit rate %v, want above 0", hit)
			}
			if got := out["completion_tokens"].(float64); got != 50*flatAnswerTokens {
				t.Errorf("completion tokens %v, want %v: ignore_eos must make every answer max_tokens long", got, 50*flatAnswerTokens)
			}
		})
	}
}

func TestPlotTitle(t *testing.T) {
	tests := []struct {
		out  Output
		want string
	}{
		{Output{Workload: "chat", Rate: 24, Seed: 1, Target: "spawn-sim:4"}, "llmgw bench chat at 24 req/s, seed 1, spawn-sim:4"},
		{Output{Workload: "chat", Seed: 1, Target: "http://gw/v1", Runs: []Run{{Rate: 1}, {Rate: 2}}}, "llmgw bench chat, seed 1, http://gw/v1"},
		{Output{Workload: "trace", Trace: "../shared/traces/mooncake.jsonl", TimeScale: 10, LenScale: 16, Seed: 7, Target: "spawn-sim:1", Direct: true},
			"llmgw bench trace mooncake.jsonl, gaps ÷10, lengths ÷16, seed 7, spawn-sim:1 direct"},
		{Output{Workload: "trace", Trace: "azure.csv", TimeScale: 1, LenScale: 1, Target: "spawn-sim:4"}, "llmgw bench trace azure.csv, seed 0, spawn-sim:4"},
	}
	for _, tt := range tests {
		if got := plotTitle(&tt.out); got != tt.want {
			t.Errorf("plotTitle(%+v)\n got %q\nwant %q", tt.out, got, tt.want)
		}
	}
}

// TestCommandSpawnSimPool runs against a pool shaped by the flags: replica
// speeds, two gateways and faults, all said in the report.
func TestCommandSpawnSimPool(t *testing.T) {
	jsonPath := filepath.Join(t.TempDir(), "out.json")
	var stdout, stderr bytes.Buffer
	args := []string{"--workload", "flat", "--rate", "40", "--duration", "1s", "--sim-instant", "--json", jsonPath,
		"--spawn-sim", "3", "--sim-speeds", "1,1,0.5", "--gateways", "2", "--policy", "round_robin",
		"--sim-fault", "2:stall@100ms+200ms", "--sim-fault", "1:kill@500ms"}
	if err := Command(context.Background(), args, &stdout, &stderr); err != nil {
		t.Fatalf("bench: %v\nstderr:\n%s", err, stderr.String())
	}
	out := readJSON(t, jsonPath)
	if out["requests"].(float64) != 40 {
		t.Errorf("requests %v, want 40", out["requests"])
	}
	want := map[string]any{
		"policy": "round_robin",
		"pool":   map[string]any{"replicas": 3.0, "speeds": []any{1.0, 1.0, 0.5}, "gateways": 2.0, "instant": true},
		"faults": []any{
			map[string]any{"spec": "2:stall@100ms+200ms", "replica": 2.0, "kind": "stall", "at_s": 0.1, "for_s": 0.2},
			map[string]any{"spec": "1:kill@500ms", "replica": 1.0, "kind": "kill", "at_s": 0.5},
		},
	}
	for k, v := range want {
		if diff := cmp.Diff(v, out[k]); diff != "" {
			t.Errorf("%s (-want +got):\n%s", k, diff)
		}
	}
	for _, line := range []string{"fault at 100ms: replica 2 stalls for 200ms", "fault at 500ms: replica 1 killed"} {
		if !strings.Contains(stderr.String(), line) {
			t.Errorf("stderr lacks %q:\n%s", line, stderr.String())
		}
	}
	if first, _, _ := strings.Cut(stdout.String(), "\n"); !strings.Contains(first, "3 simulated replicas (instant) behind 2 gateways, policy round_robin") ||
		!strings.Contains(first, "faults 2:stall@100ms+200ms 1:kill@500ms") {
		t.Errorf("table's first line %q does not say the pool, policy and faults", first)
	}
}

// TestSpawnSimSpeeds starts a pool with a speed per replica.
func TestSpawnSimSpeeds(t *testing.T) {
	o := &options{model: defaultModel, spawn: 3, simSpeeds: []float64{1, 2, 0.5}, policy: "round_robin", admission: "off", gateways: 2}
	tgt, err := spawnSim(t.Context(), o, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer tgt.Close()
	var speeds []float64
	for _, r := range tgt.replicas {
		speeds = append(speeds, r.Speed())
	}
	if diff := cmp.Diff([]float64{1, 2, 0.5}, speeds); diff != "" {
		t.Errorf("replica speeds (-want +got):\n%s", diff)
	}
	if len(tgt.URLs) != 2 || tgt.URLs[0] == tgt.URLs[1] {
		t.Errorf("gateway URLs %v, want two", tgt.URLs)
	}
}

// TestSpawnSimProfile: --sim-profile gives every spawned replica the
// profile's engine and --sim-num-blocks its KV cache, and the report says
// which.
func TestSpawnSimProfile(t *testing.T) {
	for _, name := range sim.ProfileNames() {
		t.Run(name, func(t *testing.T) {
			p, err := sim.ProfileNamed(name)
			if err != nil {
				t.Fatal(err)
			}
			o := &options{model: defaultModel, spawn: 2, simSpeed: 1, simProfile: name, simNumBlocks: 500, policy: "round_robin", admission: "off", gateways: 1}
			tgt, err := spawnSim(t.Context(), o, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			defer tgt.Close()
			prefill := p.StepPerPrefillToken
			if prefill == 0 {
				prefill = p.StepPerToken
			}
			for i, r := range tgt.replicas {
				got := r.Server().Config()
				if got.FixedTiming != p.FixedTiming || got.MaxSeqs != p.MaxSeqs || got.Cache != p.Cache ||
					got.TPOT != p.TPOT || got.PrefillPerToken != p.PrefillPerToken || got.NumBlocks != 500 ||
					(!p.FixedTiming && (got.StepBase != p.StepBase || got.StepPerPrefillToken != prefill)) {
					t.Errorf("replica %d runs %+v, want profile %+v", i, got, p)
				}
			}
		})
	}
	jsonPath := filepath.Join(t.TempDir(), "out.json")
	var stdout bytes.Buffer
	args := []string{"--workload", "flat", "--rate", "20", "--duration", "500ms", "--spawn-sim", "2", "--sim-profile", "slots",
		"--sim-num-blocks", "300", "--policy", "round_robin", "--json", jsonPath}
	if err := Command(context.Background(), args, &stdout, io.Discard); err != nil {
		t.Fatal(err)
	}
	out := readJSON(t, jsonPath)
	if diff := cmp.Diff(map[string]any{"replicas": 2.0, "speeds": []any{1.0, 1.0}, "gateways": 1.0, "profile": "slots", "num_blocks": 300.0}, out["pool"]); diff != "" {
		t.Errorf("pool (-want +got):\n%s", diff)
	}
	if out["ok"].(float64) != out["requests"].(float64) {
		t.Errorf("%v of %v requests ok under slots", out["ok"], out["requests"])
	}
	if first, _, _ := strings.Cut(stdout.String(), "\n"); !strings.Contains(first, "2 simulated replicas (profile slots, speeds 1,1, 300 KV blocks)") {
		t.Errorf("table's first line %q does not say the profile", first)
	}
}

// TestSpawnSimGatewayKnowsTheSLO: a spawned gateway's model has the SLO
// the bench measures its requests by, as an operator's catalog would give
// it, except for mixed, whose classes only admission gives the gateway.
func TestSpawnSimGatewayKnowsTheSLO(t *testing.T) {
	for _, tt := range []struct {
		workload string
		want     []string // lines of the gateway's metrics
	}{
		{WorkloadChat, []string{
			`llmgw_model_slo_seconds{kind="ttft_p99",model="sim-8b"} 2`,
			`llmgw_model_slo_seconds{kind="tpot_p99",model="sim-8b"} 0.1`,
		}},
		{WorkloadMixed, nil},
	} {
		t.Run(tt.workload, func(t *testing.T) {
			o := &options{model: defaultModel, spawn: 1, workload: tt.workload, admission: "off",
				slo: SLO{TTFT: 2 * time.Second, TPOT: 100 * time.Millisecond}}
			tgt, err := spawnSim(t.Context(), o, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			defer tgt.Close()
			resp, err := http.Get(tgt.gateways[0].AdminURL() + "/metrics")
			if err != nil {
				t.Fatal(err)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for line := range strings.Lines(string(body)) {
				if strings.HasPrefix(line, "llmgw_model_slo_seconds{") {
					got = append(got, strings.TrimSpace(line))
				}
			}
			if diff := cmp.Diff(tt.want, got, cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
				t.Errorf("the gateway's SLO series (-want +got):\n%s", diff)
			}
		})
	}
}

// TestCommandTraceSweep sweeps a trace's time scale: each run says its
// time scale, its offered rate and the trace's prefix hit ceiling, and
// capacity is in time scale.
func TestCommandTraceSweep(t *testing.T) {
	srv := (&fakeServer{}).start(t)
	jsonPath := filepath.Join(t.TempDir(), "out.json")
	table := runCommand(t, "--workload", "trace", "--trace", "testdata/mooncake-tiny.jsonl", "--sweep", "20:40:20", "--length-scale", "8",
		"--target", srv.URL, "--json", jsonPath, "--plot", filepath.Join(t.TempDir(), "out.svg"))
	out := readJSON(t, jsonPath)
	// At length scale 8 blocks are 64 tokens; requests of 150, 88, 192 and
	// 38 tokens see 0, 88, 128 and 0 of them earlier in the trace.
	ceiling := 216.0 / 468
	runs := out["runs"].([]any)
	if len(runs) != 2 {
		t.Fatalf("%d runs, want 2", len(runs))
	}
	for i, r := range runs {
		run := r.(map[string]any)
		scale := 20.0 * float64(i+1)
		// Four requests, the last at 3s of trace time.
		if run["time_scale"] != scale || run["rate"] != 4/(3/scale) || run["prefix_hit_ceiling"] != ceiling {
			t.Errorf("run %d: time scale %v, rate %v, ceiling %v; want %v, %v, %v", i, run["time_scale"], run["rate"], run["prefix_hit_ceiling"], scale, 4/(3/scale), ceiling)
		}
	}
	if out["prefix_hit_ceiling"] != ceiling || out["capacity_unit"] != "time_scale" || out["capacity_at_slo"] != 40.0 {
		t.Errorf("ceiling %v, capacity %v %v; want %v and 40 time_scale", out["prefix_hit_ceiling"], out["capacity_at_slo"], out["capacity_unit"], ceiling)
	}
	if !strings.Contains(table, "time scale") || !strings.Contains(table, "hit ceiling") || !strings.Contains(table, "capacity at SLO") {
		t.Errorf("table:\n%s", table)
	}
}

// TestCommandVirtual: a trace's sweep on a virtual clock answers every
// request and reports its setup as virtual.
func TestCommandVirtual(t *testing.T) {
	jsonPath := filepath.Join(t.TempDir(), "out.json")
	table := runCommand(t, "--spawn-sim", "2", "--virtual", "--sim-profile", "slots", "--workload", "trace",
		"--trace", "testdata/mooncake-tiny.jsonl", "--length-scale", "8", "--sweep", "1:2:1", "--json", jsonPath)
	out := readJSON(t, jsonPath)
	runs := out["runs"].([]any)
	if len(runs) != 2 {
		t.Fatalf("%d runs, want 2", len(runs))
	}
	for i, r := range runs {
		run := r.(map[string]any)
		if run["ok"] != 4.0 || run["goodput"] != 1.0 {
			t.Errorf("run %d: %v ok, goodput %v; want 4 and 1", i, run["ok"], run["goodput"])
		}
	}
	if pool := out["pool"].(map[string]any); pool["virtual"] != true {
		t.Errorf("pool %v, want it marked virtual", pool)
	}
	if !strings.Contains(table, "on a virtual clock") {
		t.Errorf("table:\n%s", table)
	}
}

// TestCommandHedges: with --hedge, requests sent to a replica stalled from
// the start are hedged to the other and answered, and the report counts
// the hedges from the gateway's own metrics. Eight requests stay within
// the retry budget's floor of ten, which a hedge spends.
func TestCommandHedges(t *testing.T) {
	dir := t.TempDir()
	jsonPath := filepath.Join(dir, "out.json")
	table := runCommand(t, "--spawn-sim", "2", "--policy", "round_robin", "--hedge", "2", "--sim-fault", "1:stall@0s+10s",
		"--workload", "flat", "--rate", "8", "--duration", "1s", "--drain", "5s", "--json", jsonPath)
	out := readJSON(t, jsonPath)
	h, ok := out["hedges"].(map[string]any)
	if !ok {
		t.Fatalf("no hedges object in the report: %v", out["hedges"])
	}
	if sent, won := h["sent"].(float64), h["won"].(float64); won < 1 || sent < won {
		t.Errorf("hedges sent %v, won %v: want some sent, each answered first by the healthy replica", sent, won)
	}
	if wasted := h["wasted_s"].(float64); wasted <= 0 {
		t.Errorf("wasted %v s, want the stalled calls' time", wasted)
	}
	if errs := out["errors"].(float64); errs != 0 {
		t.Errorf("%v errors: hedged requests should all be answered", errs)
	}
	if !strings.Contains(table, "hedged ") {
		t.Errorf("the table does not report the hedges:\n%s", table)
	}
}

// TestCommandSharesPlacements: with --redis, the spawned gateways share
// their prefix indexes and their loads, and the report says what they
// sent and received.
func TestCommandSharesPlacements(t *testing.T) {
	redisURL := os.Getenv("LLMGW_TEST_REDIS")
	if redisURL == "" {
		t.Skip("LLMGW_TEST_REDIS is not set (e.g. redis://127.0.0.1:6379/0); skipping Redis tests")
	}
	jsonPath := filepath.Join(t.TempDir(), "out.json")
	table := runCommand(t, "--spawn-sim", "2", "--gateways", "2", "--redis", redisURL,
		"--rate", "20", "--duration", "2s", "--drain", "5s", "--json", jsonPath)
	out := readJSON(t, jsonPath)
	if pool := out["pool"].(map[string]any); pool["shared_index"] != true || pool["shared_load"] != true {
		t.Errorf("pool %v: want shared_index and shared_load true", pool)
	}
	pl, ok := out["placements"].(map[string]any)
	if !ok {
		t.Fatalf("no placements object in the report: %v", out["placements"])
	}
	// Every request is placed once by the gateway that sent it; the other
	// receives all but those the subscription started too late for.
	sent, received := pl["sent"].(float64), pl["received"].(float64)
	if ok := out["ok"].(float64); sent < ok || received <= 0 || received > sent {
		t.Errorf("placements sent %v, received %v, for %v answers: want one sent for each, and most received", sent, received, ok)
	}
	if pl["dropped"].(float64) != 0 || pl["ignored"].(float64) != 0 {
		t.Errorf("placements %v: want none dropped or ignored", pl)
	}
	// Each gateway says its load every 10 ms while it has requests in
	// flight: over 2 s of 20 requests a second, many times.
	lm, ok := out["load_messages"].(map[string]any)
	if !ok {
		t.Fatalf("no load_messages object in the report: %v", out["load_messages"])
	}
	if sent, received := lm["sent"].(float64), lm["received"].(float64); sent < 20 || received <= 0 || received > sent {
		t.Errorf("load messages sent %v, received %v: want at least 20 sent, and most received", sent, received)
	}
	if lm["dropped"].(float64) != 0 || lm["ignored"].(float64) != 0 {
		t.Errorf("load messages %v: want none dropped or ignored", lm)
	}
	if !strings.Contains(table, "sharing a prefix index and their loads") || !strings.Contains(table, "placements shared") ||
		!strings.Contains(table, "load messages shared") {
		t.Errorf("the table does not say the gateways shared their index and loads:\n%s", table)
	}
}
