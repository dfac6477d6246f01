package observe

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
	"gitea.mynodes.xyz/ilker/llmgw/internal/openai"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/admission"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/proxy"
)

// newSLOCounts is SLOCounts registered with a registry of its own, with
// cat in service.
func newSLOCounts(t *testing.T, cat *catalog.Catalog) (*SLOCounts, *prometheus.Registry) {
	t.Helper()
	s := NewSLOCounts()
	return s, registered(t, s, cat)
}

// sloRequestsText is llmgw_slo_requests_total as the exposition format
// writes it, with series.
func sloRequestsText(series string) string {
	return `
# HELP llmgw_slo_requests_total Streamed requests judged against the SLO of their admission class (the model's slo where the class sets none), by model, kind (ttft: time to first token against ttft_p99; tpot: time per output token against tpot_p99) and result: met (no longer than the SLO) or missed. For burn-rate alerts: missed over all is the error ratio.
# TYPE llmgw_slo_requests_total counter
` + series
}

// TestSLORequests: each streamed request of a model with an SLO is counted
// met or missed for each kind of sample it gave, by the one judgement
// goodput reads; a model without an SLO, a plain request and a stream too
// short for a time per token give no count of what they lack. A model's
// series show from the catalog on, at zero. Each request counted is a
// sample of the SLO tracker.
func TestSLORequests(t *testing.T) {
	cat, err := catalog.New([]catalog.Pool{{Name: "gpu", Endpoints: []catalog.Endpoint{{URL: "http://127.0.0.1:1/v1"}}}},
		[]catalog.Model{
			{Name: "llama", Aliases: []string{"default"}, Pool: "gpu", SLO: catalog.SLO{TTFTp99: 500 * time.Millisecond, TPOTp99: 50 * time.Millisecond}},
			{Name: "ttft-only", Pool: "gpu", SLO: catalog.SLO{TTFTp99: 500 * time.Millisecond}},
			{Name: "none", Pool: "gpu"},
		})
	if err != nil {
		t.Fatal(err)
	}
	counts, reg := newSLOCounts(t, cat)
	var tracker admission.SLOTracker
	settle := NewAdmission(&tracker, &admission.Goodput{}, nil)

	requests := []struct {
		model      string
		stream     bool
		ttft       time.Duration
		tokens     int64
		decode     time.Duration // tpot is decode/(tokens-1)
		metTTFT    bool          // the judgement of each, where judged
		metTPOT    bool
		judgedTPOT bool
	}{
		{"default", true, 300 * time.Millisecond, 11, 400 * time.Millisecond, true, true, true}, // 40 ms a token
		{"llama", true, 500 * time.Millisecond, 11, 500 * time.Millisecond, true, true, true},   // both at the SLO: met
		{"llama", true, 501 * time.Millisecond, 11, 501 * time.Millisecond, false, false, true}, // both just past
		{"llama", true, 200 * time.Millisecond, 1, 0, true, false, false},                       // one token: no TPOT, and no sample at all
		{"llama", false, 0, 20, 0, false, false, false},                                         // plain: no sample
		{"ttft-only", true, 900 * time.Millisecond, 11, 2 * time.Second, false, false, false},   // TPOT has no SLO
		{"none", true, 900 * time.Millisecond, 11, 2 * time.Second, false, false, false},        // no SLO
	}
	for _, q := range requests {
		m, _ := cat.Resolve(q.model)
		c := finished(m, q.stream, "gpu", streamed(q.ttft, q.tokens, q.decode), 2*time.Second)
		counts.Observe(c)
		settle.Observe(c)
		// Goodput's verdict on the same request, where both kinds are judged.
		if q.stream && q.judgedTPOT {
			if got, want := c.SLO.Met, q.metTTFT && q.metTPOT; got != want {
				t.Errorf("%+v: goodput reads met = %v, this test %v", q, got, want)
			}
		}
	}
	want := sloRequestsText(`llmgw_slo_requests_total{kind="tpot",model="llama",result="met"} 2
llmgw_slo_requests_total{kind="tpot",model="llama",result="missed"} 1
llmgw_slo_requests_total{kind="ttft",model="llama",result="met"} 2
llmgw_slo_requests_total{kind="ttft",model="llama",result="missed"} 1
llmgw_slo_requests_total{kind="ttft",model="ttft-only",result="met"} 0
llmgw_slo_requests_total{kind="ttft",model="ttft-only",result="missed"} 1
`)
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "llmgw_slo_requests_total"); err != nil {
		t.Error(err)
	}
	// One count of each kind for each sample the SLO tracker took.
	if n := tracker.Len("llama"); n != 3 {
		t.Errorf("SLO tracker holds %d samples for llama, want the 3 counted", n)
	}
}

// TestSLORequestsOfAClass: a request of a priority class with an SLO of
// its own is counted against it, as goodput judges it: critical streams
// whose first token beat the model's SLO but not their class's missed, a
// sheddable one past the model's SLO but within its class's met. A kind
// only a class has an SLO of is counted too, from the catalog on.
func TestSLORequestsOfAClass(t *testing.T) {
	cat, err := catalog.New([]catalog.Pool{{Name: "gpu", Endpoints: []catalog.Endpoint{{URL: "http://127.0.0.1:1/v1"}}}},
		[]catalog.Model{{Name: "m", Pool: "gpu", SLO: catalog.SLO{TTFTp99: time.Second},
			Admission: catalog.Admission{Enabled: true, Classes: map[string]catalog.SLO{
				"critical":  {TTFTp99: 200 * time.Millisecond, TPOTp99: 50 * time.Millisecond},
				"sheddable": {TTFTp99: 10 * time.Second},
			}}}})
	if err != nil {
		t.Fatal(err)
	}
	counts, reg := newSLOCounts(t, cat)
	m, _ := cat.Resolve("m")
	for _, q := range []struct {
		class admission.Class
		ttft  time.Duration
	}{{admission.Critical, 500 * time.Millisecond}, {admission.Critical, 500 * time.Millisecond}, {admission.Sheddable, 3 * time.Second}} {
		c := &Completed{Requested: m, Class: q.class, Stream: true, Outcome: streamed(q.ttft, 11, 400*time.Millisecond), Took: 5 * time.Second}
		c.Finish()
		counts.Observe(c)
	}
	want := sloRequestsText(`llmgw_slo_requests_total{kind="tpot",model="m",result="met"} 2
llmgw_slo_requests_total{kind="tpot",model="m",result="missed"} 0
llmgw_slo_requests_total{kind="ttft",model="m",result="met"} 1
llmgw_slo_requests_total{kind="ttft",model="m",result="missed"} 2
`)
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "llmgw_slo_requests_total"); err != nil {
		t.Error(err)
	}
}

// TestAdmissionSettles: a request of a model with admission counts toward
// its class's goodput by its judgement; a count, a request whose client
// left and one refused before its model was known do not. Each stream
// with token timing is a sample of the SLO tracker.
func TestAdmissionSettles(t *testing.T) {
	m := &catalog.Model{Name: "m", Pool: "gpu", SLO: catalog.SLO{TTFTp99: time.Second}, Admission: catalog.Admission{Enabled: true}}
	var goodput admission.Goodput
	var tracker admission.SLOTracker
	a := NewAdmission(&tracker, &goodput, admission.NewGates(func() admission.Catalog { return nil }, func(string) float64 { return 0 }, admission.NewMetrics()))
	good := finished(m, true, "gpu", streamed(300*time.Millisecond, 11, time.Second), 2*time.Second)
	late := finished(m, true, "gpu", streamed(3*time.Second, 11, time.Second), 4*time.Second)
	gone := finished(m, true, "gpu", proxy.Outcome{Status: openai.StatusClientClosed}, time.Second)
	count := finished(m, false, "", proxy.Outcome{Status: 200}, time.Millisecond)
	count.Operation = OperationCount
	refused := finished(nil, false, "", proxy.Outcome{Status: 401}, time.Millisecond)
	for _, c := range []*Completed{good, late, gone, count, refused} {
		a.Observe(c)
	}
	if got := goodput.Ratios("m"); len(got) != 1 || got["critical"] != 0.5 {
		t.Errorf("goodput %v, want half of the two judged", got)
	}
	if n := tracker.Len("m"); n != 2 {
		t.Errorf("SLO tracker holds %d samples, want the 2 streams with token timing", n)
	}
}
