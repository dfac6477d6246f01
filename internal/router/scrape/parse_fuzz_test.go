package scrape

// The differential test of Parse: any text that prometheus/common's expfmt
// text parser takes must read as the same Load through Parse as through
// expfmt's metric families (referenceLoad, written here from the families,
// not from Parse's code). A text expfmt refuses may read as anything or as
// an error, but must not make Parse panic.
//
// Parse takes a few texts expfmt refuses: lines ending in CRLF, a last line
// without its newline, and malformed lines of metrics it does not read.

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	dto "github.com/prometheus/client_model/go"
)

// fuzzMaxText bounds an input: well past the real texts' 80 KB, small
// enough that expfmt keeps the fuzzer fast.
const fuzzMaxText = 256 << 10

func FuzzParseMatchesExpfmt(f *testing.F) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.txt"))
	if err != nil {
		f.Fatal(err)
	}
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, tc := range formatCases {
		f.Add([]byte(tc.text))
	}
	f.Fuzz(func(t *testing.T, text []byte) {
		if len(text) > fuzzMaxText {
			return
		}
		got, err := Parse(text)
		fams, ok := expfmtFamilies(text)
		if !ok {
			return
		}
		if err != nil {
			t.Fatalf("Parse refuses a text expfmt takes: %v\ntext: %q", err, text)
		}
		if diff := cmp.Diff(referenceLoad(fams), got); diff != "" {
			t.Fatalf("Parse reads the text otherwise than expfmt (-expfmt +Parse):\n%s\ntext: %q", diff, text)
		}
	})
}

// expfmtFamilies is text as expfmt's text parser reads it, with names
// checked as UTF-8 (as Prometheus scrapes now), and whether it takes it.
func expfmtFamilies(text []byte) (fams map[string]*dto.MetricFamily, ok bool) {
	defer func() {
		if recover() != nil {
			ok = false // a panic in expfmt is expfmt's, not a text to compare on
		}
	}()
	fams, err := newExpfmtParser().TextToMetricFamilies(bytes.NewReader(text))
	return fams, err == nil
}

// referenceLoad is the Load that expfmt's families hold, by Load's doc: a
// metric is read only where its family is a gauge, counter or untyped.
func referenceLoad(fams map[string]*dto.MetricFamily) Load {
	// values is the named metric's values in text order, or false when it
	// is not there or is not a single-valued type.
	values := func(name string) ([]float64, bool) {
		mf := fams[name]
		if mf == nil {
			return nil, false
		}
		var vs []float64
		for _, m := range mf.GetMetric() {
			switch mf.GetType() {
			case dto.MetricType_GAUGE:
				vs = append(vs, m.GetGauge().GetValue())
			case dto.MetricType_COUNTER:
				vs = append(vs, m.GetCounter().GetValue())
			case dto.MetricType_UNTYPED:
				vs = append(vs, m.GetUntyped().GetValue())
			default:
				return nil, false
			}
		}
		return vs, len(vs) > 0
	}
	// total adds the named metric's values up, each at most limit, and
	// says how many there were; -1 where any is NaN, infinite or negative.
	total := func(name string, limit float64) (float64, int) {
		vs, ok := values(name)
		if !ok {
			return -1, 0
		}
		sum := 0.0
		for _, v := range vs {
			if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
				return -1, 0
			}
			sum += min(v, limit)
		}
		if math.IsInf(sum, 0) {
			return -1, 0
		}
		return sum, len(vs)
	}
	sum := func(names ...string) float64 {
		for _, name := range names {
			if s, _ := total(name, math.Inf(1)); s >= 0 {
				return s
			}
		}
		return -1
	}
	mean := func(names ...string) float64 {
		for _, name := range names {
			if s, n := total(name, 1); s >= 0 {
				return s / float64(n)
			}
		}
		return -1
	}
	l := Load{
		Waiting: sum("vllm:num_requests_waiting", "sglang:num_queue_reqs", "llamacpp:requests_deferred"),
		Running: sum("vllm:num_requests_running", "sglang:num_running_reqs", "llamacpp:requests_processing"),
		KVUsage: mean("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc", "sglang:token_usage"),
	}
	if _, ok := values("vllm:cache_config_info"); ok {
	series:
		for _, m := range fams["vllm:cache_config_info"].GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() != "block_size" {
					continue
				}
				if n, err := strconv.Atoi(lp.GetValue()); err == nil && n >= 1 && n <= maxBlockSize {
					l.BlockSize = n
					break series
				}
				break
			}
		}
	}
	if l.BlockSize == 0 {
		vs, _ := values("sglang:page_size")
		for _, v := range vs {
			if v >= 1 && v <= maxBlockSize && v == math.Trunc(v) {
				l.BlockSize = int(v)
				break
			}
		}
	}
	return l
}
