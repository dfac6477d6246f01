package bench

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"gitea.mynodes.xyz/ilker/llmgw/internal/tokenize"
)

// sharedTraces is where the project's sample traces live, from this
// package's directory.
const sharedTraces = "../../../shared/traces"

func TestReadTrace(t *testing.T) {
	tests := []struct {
		path string
		want []TraceRecord
	}{
		{"testdata/mooncake-tiny.jsonl", []TraceRecord{
			{At: 0, Input: 1200, Output: 10, Blocks: []uint64{0, 1, 2}},
			{At: 250 * time.Millisecond, Input: 700, Output: 4, Blocks: []uint64{0, 1}},
			{At: time.Second, Input: 1536, Output: 12, Blocks: []uint64{0, 1, 3}},
			{At: 3 * time.Second, Input: 300, Output: 2, Blocks: []uint64{7}},
		}},
		{"testdata/azure-tiny.csv", []TraceRecord{
			{At: 0, Input: 4808, Output: 10},
			{At: 52 * time.Millisecond, Input: 3180, Output: 8},
			{At: 1520040 * time.Microsecond, Input: 100, Output: 1},
		}},
	}
	for _, tt := range tests {
		got, err := ReadTrace(tt.path)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tt.path, diff)
		}
	}
}

// TestReadTraceByContent checks that a trace without a known extension is
// read by what it holds.
func TestReadTraceByContent(t *testing.T) {
	dir := t.TempDir()
	for src, want := range map[string]int{"testdata/mooncake-tiny.jsonl": 4, "testdata/azure-tiny.csv": 3} {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, strings.TrimSuffix(filepath.Base(src), filepath.Ext(src))+".trace")
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		recs, err := ReadTrace(p)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if len(recs) != want {
			t.Errorf("%s: %d records, want %d", p, len(recs), want)
		}
	}
}

func TestReadTraceErrors(t *testing.T) {
	dir := t.TempDir()
	tests := []struct{ name, body, wantErr string }{
		{"bad.jsonl", `{"timestamp": 0, "input_length": 5}` + "\n", "line 1: output_length"},
		{"bad2.jsonl", "{\"timestamp\": 0, \"input_length\": 5, \"output_length\": 1}\nnot json\n", "line 2"},
		{"bad.csv", "TIMESTAMP,Other\n", "header must name"},
		{"bad2.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.9,x,1\n", "line 2: ContextTokens"},
		{"empty.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n", "no requests"},
		{"back.jsonl", "{\"timestamp\": 5, \"input_length\": 5, \"output_length\": 1}\n{\"timestamp\": 2, \"input_length\": 5, \"output_length\": 1}\n", "line 2: timestamp is 3ms before"},
		{"back.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:04.0,5,1\n2023-11-16 18:17:04.0,5,1\n2023-11-16 18:17:03.5,5,1\n", "line 4: timestamp is 500ms before"},
	}
	for _, tt := range tests {
		p := filepath.Join(dir, tt.name)
		if err := os.WriteFile(p, []byte(tt.body), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := ReadTrace(p)
		if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("%s: error %v, want one containing %q", tt.name, err, tt.wantErr)
		}
	}
}

func promptText(r Request) string {
	var b strings.Builder
	for _, m := range r.Prompt {
		b.WriteString(m.Text())
	}
	return b.String()
}

func TestReplayMooncake(t *testing.T) {
	tests := []struct {
		lengthScale float64
		block       int   // tokens of one block
		inputs      []int // prompt tokens per request
		outputs     []int
	}{
		{1, 512, []int{1200, 700, 1536, 300}, []int{10, 4, 12, 2}},
		{4, 128, []int{300, 175, 384, 75}, []int{3, 1, 3, 1}},
	}
	for _, tt := range tests {
		reqs, err := Generate(Spec{Workload: WorkloadTrace, TracePath: "testdata/mooncake-tiny.jsonl", LengthScale: tt.lengthScale, TimeScale: 2}, NewTexts(tokenize.Count))
		if err != nil {
			t.Fatal(err)
		}
		var inputs, outputs []int
		var ats []time.Duration
		for _, r := range reqs {
			if got := tokenize.Count(promptText(r)); got != r.PromptTokens {
				t.Errorf("scale %v: prompt counts %d tokens, want %d", tt.lengthScale, got, r.PromptTokens)
			}
			inputs, outputs, ats = append(inputs, r.PromptTokens), append(outputs, r.MaxTokens), append(ats, r.At)
		}
		if diff := cmp.Diff(tt.inputs, inputs); diff != "" {
			t.Errorf("scale %v: inputs (-want +got):\n%s", tt.lengthScale, diff)
		}
		if diff := cmp.Diff(tt.outputs, outputs); diff != "" {
			t.Errorf("scale %v: outputs (-want +got):\n%s", tt.lengthScale, diff)
		}
		// Time scale 2 halves every arrival time.
		if diff := cmp.Diff([]time.Duration{0, 125 * time.Millisecond, 500 * time.Millisecond, 1500 * time.Millisecond}, ats); diff != "" {
			t.Errorf("scale %v: arrivals (-want +got):\n%s", tt.lengthScale, diff)
		}
		// Requests 0, 1 and 2 share blocks 0 and 1: their prompts begin
		// with the same 2 blocks of text, and block 0 is exactly one
		// block long.
		p0, p1, p2 := reqs[0].Prompt[0].Content, reqs[1].Prompt[0].Content, reqs[2].Prompt[0].Content
		if p0[0] != p1[0] || p0[0] != p2[0] || p0[1] != p2[1] {
			t.Errorf("scale %v: equal hash ids gave different text", tt.lengthScale)
		}
		if got := tokenize.Count(p0[0]); got != tt.block {
			t.Errorf("scale %v: a block counts %d tokens, want %d", tt.lengthScale, got, tt.block)
		}
		// Request 1 stops part way into block 1: a prefix of the full
		// block 1 of request 0.
		if !strings.HasPrefix(p0[1], p1[1]) || len(p1[1]) >= len(p0[1]) {
			t.Errorf("scale %v: a partial block is not a prefix of the whole block", tt.lengthScale)
		}
		// Different ids (2 and 3) give different text.
		if p0[2] == p2[2] {
			t.Errorf("scale %v: blocks 2 and 3 have the same text", tt.lengthScale)
		}
		if !strings.HasPrefix(promptText(reqs[2]), p0[0]+p0[1]) {
			t.Errorf("scale %v: request 2 does not start with the shared prefix", tt.lengthScale)
		}
	}
}

func TestReplayDurationCuts(t *testing.T) {
	reqs, err := Generate(Spec{Workload: WorkloadTrace, TracePath: "testdata/mooncake-tiny.jsonl", Duration: time.Second}, NewTexts(tokenize.Count))
	if err != nil {
		t.Fatal(err)
	}
	if len(reqs) != 2 {
		t.Errorf("%d requests in the first second, want 2", len(reqs))
	}
}

// TestReplayTo ends a replay part way into the trace, before time
// scaling: every time scale sends the same requests, where a --duration
// cut sends more the faster the replay.
func TestReplayTo(t *testing.T) {
	count := func(s Spec) int {
		t.Helper()
		s.Workload, s.TracePath = WorkloadTrace, "testdata/mooncake-tiny.jsonl"
		reqs, err := Generate(s, NewTexts(tokenize.Count))
		if err != nil {
			t.Fatal(err)
		}
		return len(reqs)
	}
	for _, ts := range []float64{1, 2, 4} {
		// Requests at 0, 0.25 and 1 s are before 1.5 s of trace; 3 s is not.
		if n := count(Spec{TimeScale: ts, To: 1500 * time.Millisecond}); n != 3 {
			t.Errorf("time scale %g: %d requests before 1.5 s of trace, want 3", ts, n)
		}
	}
	if n := count(Spec{TimeScale: 4, Duration: time.Second}); n != 4 {
		t.Errorf("time scale 4: %d requests in 1 s of replay, want all 4", n)
	}
	// A request exactly at To is not sent; From and To together keep the
	// requests between.
	if n := count(Spec{From: 200 * time.Millisecond, To: time.Second}); n != 1 {
		t.Errorf("%d requests from 0.2 s to 1 s of trace, want 1", n)
	}
}

// TestReplaySharedTraces replays the first minute of the project's sample
// traces, scaled down, and checks that sharing and lengths hold at size.
func TestReplaySharedTraces(t *testing.T) {
	for _, name := range []string{"mooncake-synthetic.jsonl", "azure-llm-2023-code.csv"} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(sharedTraces, name)
			if _, err := os.Stat(path); err != nil {
				t.Skipf("sample trace not present: %v", err)
			}
			recs, err := ReadTrace(path)
			if err != nil {
				t.Fatal(err)
			}
			reqs, err := Generate(Spec{Workload: WorkloadTrace, TracePath: path, Duration: 20 * time.Second, LengthScale: 16}, NewTexts(tokenize.Count))
			if err != nil {
				t.Fatal(err)
			}
			if len(reqs) == 0 || len(reqs) >= len(recs) {
				t.Fatalf("%d requests in 20s of a %d-request trace", len(reqs), len(recs))
			}
			for i, r := range reqs {
				if want := scaleTokens(recs[i].Input, 16); r.PromptTokens != want {
					t.Fatalf("request %d: %d prompt tokens, want %d", i, r.PromptTokens, want)
				}
				if got := tokenize.Count(promptText(r)); got != r.PromptTokens {
					t.Fatalf("request %d: prompt counts %d tokens, want %d", i, got, r.PromptTokens)
				}
			}
		})
	}
}

// TestPrefixCeiling works the tiny trace's ceiling out by hand. At length
// scale 1 (blocks of 512): request 0 (blocks 0 1 2, 1200 tokens) is all
// new; request 1 (blocks 0 1, 700 tokens: 512 + 188) was wholly sent
// before; request 2 (blocks 0 1 3, 1536 tokens) hits 0 and 1, not 3;
// request 3 (block 7) is new. At scale 4 blocks are 128 tokens and the
// same walk gives 0, 175, 256 and 0.
func TestPrefixCeiling(t *testing.T) {
	tests := []struct {
		lengthScale float64
		seen        []int
		prompt      int64
	}{
		{1, []int{0, 700, 1024, 0}, 3736},
		{4, []int{0, 175, 256, 0}, 934},
	}
	for _, tt := range tests {
		reqs, err := Generate(Spec{Workload: WorkloadTrace, TracePath: "testdata/mooncake-tiny.jsonl", LengthScale: tt.lengthScale}, NewTexts(tokenize.Count))
		if err != nil {
			t.Fatal(err)
		}
		var seen []int
		for _, r := range reqs {
			seen = append(seen, r.PrefixSeen)
		}
		if diff := cmp.Diff(tt.seen, seen); diff != "" {
			t.Errorf("scale %v: tokens seen before (-want +got):\n%s", tt.lengthScale, diff)
		}
		c := ceilingOf(reqs)
		want := float64(tt.seen[1]+tt.seen[2]) / float64(tt.prompt)
		if got := c.share(); got == nil || *got != want {
			t.Errorf("scale %v: ceiling %v, want %v", tt.lengthScale, got, want)
		}
	}
	// Only a partly seen block hits only what was seen, and ends the walk.
	dir := t.TempDir()
	path := filepath.Join(dir, "partial.jsonl")
	os.WriteFile(path, []byte(`{"timestamp":0,"input_length":600,"output_length":1,"hash_ids":[1,2]}
{"timestamp":1,"input_length":1536,"output_length":1,"hash_ids":[1,2,3]}
{"timestamp":2,"input_length":1536,"output_length":1,"hash_ids":[1,2,3]}
`), 0o644)
	reqs, err := Generate(Spec{Workload: WorkloadTrace, TracePath: path}, NewTexts(tokenize.Count))
	if err != nil {
		t.Fatal(err)
	}
	var seen []int
	for _, r := range reqs {
		seen = append(seen, r.PrefixSeen)
	}
	// Request 1 hits block 1 whole and the 88 tokens of block 2 request 0
	// sent; request 2 hits all three blocks.
	if diff := cmp.Diff([]int{0, 512 + 88, 1536}, seen); diff != "" {
		t.Errorf("tokens seen before (-want +got):\n%s", diff)
	}
	if (prefixCeiling{}).share() != nil {
		t.Error("the ceiling of no prompt tokens is not nil")
	}
}

// TestReplayFrom starts a replay part way into the trace: the requests
// before the point are not sent, the first one after it arrives at once,
// and a prefix only the skipped requests sent counts as unseen.
func TestReplayFrom(t *testing.T) {
	reqs, err := Generate(Spec{Workload: WorkloadTrace, TracePath: "testdata/mooncake-tiny.jsonl", TimeScale: 2, From: 900 * time.Millisecond}, NewTexts(tokenize.Count))
	if err != nil {
		t.Fatal(err)
	}
	var ats []time.Duration
	var seen []int
	for _, r := range reqs {
		ats, seen = append(ats, r.At), append(seen, r.PrefixSeen)
	}
	// Requests 2 and 3 of the trace, at 1 s and 3 s, less 0.9 s, halved.
	if diff := cmp.Diff([]time.Duration{50 * time.Millisecond, 1050 * time.Millisecond}, ats); diff != "" {
		t.Fatalf("arrivals (-want +got):\n%s", diff)
	}
	// Request 2 shares blocks 0 and 1 with request 0 alone, which was
	// not sent.
	if seen[0] != 0 {
		t.Errorf("the first request sent has %d prefix tokens seen before, want 0", seen[0])
	}
	all, err := Generate(Spec{Workload: WorkloadTrace, TracePath: "testdata/mooncake-tiny.jsonl", TimeScale: 2}, NewTexts(tokenize.Count))
	if err != nil {
		t.Fatal(err)
	}
	if promptText(reqs[0]) != promptText(all[2]) {
		t.Error("a request's prompt differs when the replay starts later")
	}
}
