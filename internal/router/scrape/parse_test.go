package scrape

// Parse against the texts real servers write (testdata/*.txt, written by
// prometheus_client as testdata/expose.py declares each server's metrics)
// and against the corner cases of the text format, each noting whether
// expfmt takes it; and Parse's cost beside expfmt's on the real texts.

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// serverTexts are the real texts in testdata and what they read as.
var serverTexts = []struct {
	file string
	want Load
}{
	// vLLM 0.11, one engine: kv_cache_usage_perc only, and
	// num_requests_waiting_by_reason beside num_requests_waiting.
	{"vllm-0.11.txt", Load{Waiting: 3, Running: 12, KVUsage: 0.4375, BlockSize: 16}},
	// vLLM 0.8: gpu_cache_usage_perc, and cache_config_info without an
	// engine label.
	{"vllm-0.8.txt", Load{Waiting: 0, Running: 4, KVUsage: 0.0837, BlockSize: 16}},
	// vLLM 0.10 with two data-parallel engines: both KV gauges, every series
	// twice; requests add up, KV usage is the mean.
	{"vllm-0.10-dp2.txt", Load{Waiting: 7 + 2, Running: 31 + 29, KVUsage: (0.8125 + 0.75) / 2, BlockSize: 16}},
	// SGLang 0.5 in multiprocess mode, launched with --page-size 64.
	{"sglang-0.5.txt", Load{Waiting: 5, Running: 37, KVUsage: 0.61, BlockSize: 64}},
	// llama.cpp's llama-server with --metrics (llamacppMetrics): deferred
	// and processing requests, and no KV-cache gauge.
	{"llamacpp.txt", Load{Waiting: 6, Running: 4, KVUsage: -1}},
}

func readTestdata(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseServerTexts(t *testing.T) {
	for _, tc := range serverTexts {
		t.Run(tc.file, func(t *testing.T) {
			text := readTestdata(t, tc.file)
			got, err := Parse(text)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Parse (-want +got):\n%s", diff)
			}
			// The texts are real: expfmt takes them and reads the same.
			fams, err := newExpfmtParser().TextToMetricFamilies(bytes.NewReader(text))
			if err != nil {
				t.Fatalf("expfmt refuses the text: %v", err)
			}
			if diff := cmp.Diff(tc.want, referenceLoad(fams)); diff != "" {
				t.Errorf("from expfmt's families (-want +got):\n%s", diff)
			}
		})
	}
}

// unknown is an all-unknown Load with the given fields changed.
func unknown(f func(*Load)) Load {
	l := unknownLoad()
	if f != nil {
		f(&l)
	}
	return l
}

// formatCases are the corners of the text format, as seeds for
// FuzzParseMatchesExpfmt too. expfmt says whether expfmt's text parser
// takes the text; where it does, Parse must read what expfmt does.
var formatCases = []struct {
	name    string
	text    string
	expfmt  bool
	want    Load
	wantErr bool
}{
	{name: "empty", text: "", expfmt: true, want: unknown(nil)},
	{name: "blank lines and indents", expfmt: true,
		text: "\n\n   \t\n  vllm:num_requests_waiting 3\n\t# TYPE vllm:num_requests_running gauge\n\n",
		want: unknown(func(l *Load) { l.Waiting = 3 })},
	{name: "brace in a label value", expfmt: true,
		text: `vllm:num_requests_waiting{model_name="a}b",engine="0"} 3` + "\n",
		want: unknown(func(l *Load) { l.Waiting = 3 })},
	{name: "escaped quote in a label value", expfmt: true,
		text: `vllm:num_requests_waiting{model_name="a\"} 9",engine="0"} 3` + "\n",
		want: unknown(func(l *Load) { l.Waiting = 3 })},
	{name: "escapes in a label value", expfmt: true,
		text: `vllm:num_requests_waiting{model_name="a\\\n\"b"} 3` + "\n",
		want: unknown(func(l *Load) { l.Waiting = 3 })},
	{name: "metric name in a label value", expfmt: true,
		text: `vllm:num_requests_running{model_name="vllm:num_requests_waiting 100"} 2` + "\n" +
			`python_info{version="\nvllm:num_requests_waiting 100"} 1` + "\n",
		want: unknown(func(l *Load) { l.Running = 2 })},
	{name: "timestamps", expfmt: true,
		text: "vllm:num_requests_waiting{engine=\"0\"} 3 1700000000000\nvllm:num_requests_waiting{engine=\"1\"} 4 -5\n",
		want: unknown(func(l *Load) { l.Waiting = 7 })},
	{name: "comments", expfmt: true,
		text: "# vllm:num_requests_waiting 5\n#vllm:num_requests_waiting 5\n# HELP vllm:num_requests_waiting Number of requests \\\\ waiting.\n# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting 1\n",
		want: unknown(func(l *Load) { l.Waiting = 1 })},
	{name: "TYPE histogram", expfmt: true,
		text: "# TYPE vllm:num_requests_waiting histogram\nvllm:num_requests_waiting_bucket{le=\"+Inf\"} 3\nvllm:num_requests_waiting_sum 3\nvllm:num_requests_waiting_count 3\nvllm:num_requests_waiting{le=\"1\"} 3\nsglang:num_queue_reqs 2\n",
		want: unknown(func(l *Load) { l.Waiting = 2 })},
	{name: "TYPE summary", expfmt: true,
		text: "# TYPE sglang:token_usage SUMMARY\nsglang:token_usage{quantile=\"0.5\"} 0.2\nsglang:token_usage_count 3\n",
		want: unknown(nil)},
	{name: "TYPE gaugehistogram", expfmt: true,
		text: "#\tTYPE\tvllm:kv_cache_usage_perc\tGaugeHistogram\nvllm:kv_cache_usage_perc{le=\"1\"} 0.2\nvllm:gpu_cache_usage_perc 0.3\n",
		want: unknown(func(l *Load) { l.KVUsage = 0.3 })},
	{name: "TYPE counter and untyped", expfmt: true,
		text: "# TYPE vllm:num_requests_waiting counter\nvllm:num_requests_waiting 3\n# TYPE vllm:num_requests_running untyped\nvllm:num_requests_running 2\n",
		want: unknown(func(l *Load) { l.Waiting, l.Running = 3, 2 })},
	{name: "TYPE in Unicode case", expfmt: true,
		text: "# TYPE vllm:num_requests_waiting h\u0131stogram\nvllm:num_requests_waiting{le=\"1\"} 3\n# TYPE vllm:num_requests_running \u017fummary\n",
		want: unknown(nil)},
	{name: "TYPE with backslashes", expfmt: true,
		text: "#TYPE vllm:num_requests_waiting gAuge\\\nvllm:num_requests_waiting 3\n# TYPE sglang:num_queue_reqs \\h\\i\\st\\\\ogram\nsglang:num_queue_reqs{le=\"+Inf\"} 2\n",
		want: unknown(func(l *Load) { l.Waiting = 3 })},
	{name: "TYPE unknown", expfmt: false, wantErr: true,
		text: "# TYPE vllm:num_requests_waiting gauges\nvllm:num_requests_waiting 3\n"},
	{name: "TYPE after samples", expfmt: false,
		text: "vllm:num_requests_waiting 3\n# TYPE vllm:num_requests_waiting histogram\n",
		want: unknown(nil)},
	{name: "plus Inf", expfmt: true,
		text: "vllm:num_requests_waiting +Inf\nvllm:num_requests_running{engine=\"0\"} 1\nvllm:num_requests_running{engine=\"1\"} -Inf\nvllm:kv_cache_usage_perc inf\n",
		want: unknown(nil)},
	{name: "NaN falls back to the older name", expfmt: true,
		text: "vllm:kv_cache_usage_perc NaN\nvllm:gpu_cache_usage_perc 0.5\n",
		want: unknown(func(l *Load) { l.KVUsage = 0.5 })},
	{name: "negative", expfmt: true,
		text: "vllm:num_requests_waiting{engine=\"0\"} 2\nvllm:num_requests_waiting{engine=\"1\"} -1\nsglang:num_running_reqs -0\n",
		want: unknown(func(l *Load) { l.Running = 0 })},
	{name: "sum overflows", expfmt: true,
		text: "vllm:num_requests_waiting 1e308\nvllm:num_requests_waiting 1e308\n",
		want: unknown(nil)},
	{name: "KV usage above 1", expfmt: true,
		text: "sglang:token_usage 1.5\nsglang:token_usage 0.5\n",
		want: unknown(func(l *Load) { l.KVUsage = 0.75 })},
	{name: "vLLM names before SGLang's", expfmt: true,
		text: "sglang:num_queue_reqs 9\nvllm:num_requests_waiting 1\nsglang:num_running_reqs 8\nsglang:token_usage 0.9\nvllm:gpu_cache_usage_perc 0.1\n",
		want: Load{Waiting: 1, Running: 8, KVUsage: 0.1}},
	{name: "similar names", expfmt: true,
		text: "vllm:num_requests_waiting_by_reason{reason=\"capacity\"} 7\nvllm:num_requests_running_total 5\nvllm:num_requests_waiting_sum 1\nvllm:num_requests_waitin 1\nvllm:num_requests_waiting2 1\n" +
			"sglang:num_running_reqs_offline_batch 3\nsglang:token_usage_perc 0.3\nvllm:cache_config_info_total{block_size=\"8\"} 1\nxvllm:num_requests_waiting 1\n",
		want: unknown(nil)},
	{name: "quoted name", expfmt: true,
		text: "\"vllm:num_requests_waiting\"{engine=\"0\"} 4\n{\"vllm:num_requests_running\"} 5\n{engine=\"0\", \"sglang:token_usage\", model_name=\"x\"} 0.25\n",
		want: Load{Waiting: 4, Running: 5, KVUsage: 0.25}},
	{name: "quotes inside a name", expfmt: true,
		text: "vllm:num_\"requests_waiting\" 4\n# TYPE \"vllm:kv_cache_usage_perc\" histogram\n",
		want: unknown(func(l *Load) { l.Waiting = 4 })},
	{name: "two names in braces", expfmt: false,
		text: "{\"vllm:num_requests_waiting\",\"vllm:num_requests_running\"} 4\n", wantErr: true},
	{name: "braces without a name", expfmt: false,
		text: "{engine=\"0\"} 4\n{} 3\n", want: unknown(nil)},
	{name: "no newline at the end", expfmt: false,
		text: "vllm:num_requests_waiting 3", want: unknown(func(l *Load) { l.Waiting = 3 })},
	{name: "CRLF", expfmt: false,
		text: "# TYPE vllm:num_requests_waiting gauge\r\nvllm:num_requests_waiting{engine=\"0\"} 3\r\n",
		want: unknown(func(l *Load) { l.Waiting = 3 })},
	{name: "trailing blank", expfmt: false, wantErr: true,
		text: "vllm:num_requests_waiting 3 \n"},
	{name: "text after the timestamp", expfmt: false, wantErr: true,
		text: "vllm:num_requests_waiting 3 17 x\n"},
	{name: "tabs and no braces gap", expfmt: true,
		text: "vllm:num_requests_waiting\t{engine=\"0\",}\t3\t17\nvllm:num_requests_running{}2\nsglang:num_queue_reqs{ a = \"1\" , }-0.0\n",
		want: unknown(func(l *Load) { l.Waiting, l.Running = 3, 2 })},
	{name: "number syntax", expfmt: true,
		text: "vllm:num_requests_waiting 1e2\nvllm:num_requests_waiting .5\nvllm:num_requests_running 3.0e+00\nvllm:kv_cache_usage_perc 5E-1\n",
		want: unknown(func(l *Load) { l.Waiting, l.Running, l.KVUsage = 100.5, 3, 0.5 })},
	{name: "hex float value", expfmt: false, wantErr: true,
		text: "vllm:num_requests_waiting 0x1p3\n"},
	{name: "underscores in a value", expfmt: false, wantErr: true,
		text: "vllm:num_requests_waiting 1_000\n"},
	{name: "not a number", expfmt: false, wantErr: true,
		text: "vllm:num_requests_waiting abc\n"},
	{name: "another metric malformed", expfmt: false,
		text: "python_gc{ 3\nvllm:num_requests_waiting 3\n", want: unknown(func(l *Load) { l.Waiting = 3 })},
	{name: "label value not closed", expfmt: false, wantErr: true,
		text: "vllm:num_requests_waiting{a=\"3} 3\n"},
	{name: "le on a gauge", expfmt: true,
		text: "vllm:num_requests_waiting{le=\"x\",quantile=\"y\"} 3\n",
		want: unknown(func(l *Load) { l.Waiting = 3 })},
	{name: "block size", expfmt: true,
		text: "vllm:cache_config_info{block_size=\"abc\",engine=\"0\"} 1.0\nvllm:cache_config_info{engine=\"1\",block_size=\"32\"} 1.0\nvllm:cache_config_info{block_size=\"64\"} 1.0\nsglang:page_size 16\n",
		want: unknown(func(l *Load) { l.BlockSize = 32 })},
	{name: "block size out of range", expfmt: true,
		text: "vllm:cache_config_info{block_size=\"0\"} 1\nvllm:cache_config_info{block_size=\"2000000\"} 1\nvllm:cache_config_info{block_size=\"-16\"} 1\nsglang:page_size 16.5\nsglang:page_size 8\n",
		want: unknown(func(l *Load) { l.BlockSize = 8 })},
	{name: "block size label before the name", expfmt: true,
		text: "{block_size=\"+0016\", \"vllm:cache_config_info\"} NaN\n",
		want: unknown(func(l *Load) { l.BlockSize = 16 })},
	{name: "cache config as a histogram", expfmt: true,
		text: "# TYPE vllm:cache_config_info histogram\nvllm:cache_config_info_bucket{block_size=\"16\",le=\"+Inf\"} 1\nsglang:page_size 1\n",
		want: unknown(func(l *Load) { l.BlockSize = 1 })},
	{name: "SGLang page size", expfmt: true,
		text: "sglang:page_size{tp_rank=\"0\"} 64.0\nsglang:page_size{tp_rank=\"1\"} 64.0\n",
		want: unknown(func(l *Load) { l.BlockSize = 64 })},
}

func TestParseFormatCases(t *testing.T) {
	for _, tc := range formatCases {
		t.Run(tc.name, func(t *testing.T) {
			fams, err := newExpfmtParser().TextToMetricFamilies(strings.NewReader(tc.text))
			if (err == nil) != tc.expfmt {
				t.Errorf("expfmt takes the text: %v, want %v (error: %v)", err == nil, tc.expfmt, err)
			}
			got, err := Parse([]byte(tc.text))
			if (err != nil) != tc.wantErr {
				t.Fatalf("Parse error: %v, want an error: %v", err, tc.wantErr)
			}
			want := tc.want
			if tc.wantErr {
				want = unknownLoad()
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Parse (-want +got):\n%s", diff)
			}
			if tc.expfmt && fams != nil {
				if diff := cmp.Diff(want, referenceLoad(fams)); diff != "" {
					t.Errorf("from expfmt's families (-want +got):\n%s", diff)
				}
			}
		})
	}
}

func TestParseErrorNamesLineAndMetric(t *testing.T) {
	_, err := Parse([]byte("# HELP x y\nvllm:num_requests_running 1\nvllm:num_requests_waiting{engine=\"0\"} many\n"))
	if err == nil {
		t.Fatal("no error")
	}
	const want = `scrape: line 3: vllm:num_requests_waiting: value "many" is not a number`
	if err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
}

func newExpfmtParser() *expfmt.TextParser {
	p := expfmt.NewTextParser(model.UTF8Validation)
	return &p
}

// BenchmarkParse and BenchmarkExpfmt read the same real texts, Parse's way
// and expfmt's (families only, none of the reading after); compare them
// side by side:
//
//	go test -run '^$' -bench 'Parse$|Expfmt$' -benchmem ./internal/router/scrape
func BenchmarkParse(b *testing.B) {
	for _, tc := range serverTexts {
		text := readTestdata(b, tc.file)
		b.Run(tc.file, func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Parse(text); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkExpfmt(b *testing.B) {
	for _, tc := range serverTexts {
		text := readTestdata(b, tc.file)
		b.Run(tc.file, func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			b.ReportAllocs()
			p := newExpfmtParser()
			for b.Loop() {
				if _, err := p.TextToMetricFamilies(bytes.NewReader(text)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
