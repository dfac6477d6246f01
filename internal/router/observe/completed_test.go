package observe

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
	"gitea.mynodes.xyz/ilker/llmgw/internal/openai"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/admission"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/proxy"
)

// finished is a request for m (nil: refused before its model was known),
// streamed or not, served by pool with o after took, finished as the
// router finishes it.
func finished(m *catalog.Model, stream bool, pool string, o proxy.Outcome, took time.Duration) *Completed {
	c := &Completed{Requested: m, Stream: stream, Generates: true, Operation: "chat", Pool: pool, Outcome: o, Took: took}
	c.Finish()
	return c
}

// streamed is an answer of tokens output tokens streamed, the first after
// ttft and the rest over decode.
func streamed(ttft time.Duration, tokens int64, decode time.Duration) proxy.Outcome {
	return proxy.Outcome{Status: 200, Usage: &openai.Usage{PromptTokens: 3, CompletionTokens: tokens}, TTFT: ttft, Decode: decode}
}

// registered registers o's metrics with a registry of its own, and puts
// cat in service when o keeps catalogs.
func registered(t *testing.T, o Observer, cat *catalog.Catalog) *prometheus.Registry {
	t.Helper()
	reg := prometheus.NewRegistry()
	if err := (Observers{o}).Register(reg); err != nil {
		t.Fatal(err)
	}
	if cat != nil {
		(Observers{o}).SetCatalog(cat)
	}
	return reg
}

// gather is reg's families by name.
func gather(t *testing.T, reg prometheus.Gatherer) map[string]*dto.MetricFamily {
	t.Helper()
	got, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	mfs := make(map[string]*dto.MetricFamily, len(got))
	for _, mf := range got {
		mfs[mf.GetName()] = mf
	}
	return mfs
}

func TestTokenTiming(t *testing.T) {
	usage := func(n int64) *openai.Usage { return &openai.Usage{CompletionTokens: n} }
	tests := []struct {
		name     string
		streamed bool
		o        proxy.Outcome
		took     time.Duration
		want     Timing
	}{
		{"streamed", true, proxy.Outcome{Usage: usage(11), Decode: time.Second}, 3 * time.Second, Timing{100 * time.Millisecond, 10, true}},
		{"streamed, one token", true, proxy.Outcome{Usage: usage(1), Decode: time.Second}, time.Second, Timing{}},
		{"streamed, no decode time", true, proxy.Outcome{Usage: usage(5)}, time.Second, Timing{}},
		{"plain", false, proxy.Outcome{Usage: usage(20)}, 2 * time.Second, Timing{0, 10, true}},
		{"plain, no time", false, proxy.Outcome{Usage: usage(20)}, 0, Timing{}},
		{"no usage", true, proxy.Outcome{Decode: time.Second}, time.Second, Timing{}},
		{"no output", false, proxy.Outcome{Usage: usage(0)}, time.Second, Timing{}},
	}
	for _, tt := range tests {
		if got := TokenTiming(tt.streamed, &tt.o, tt.took); got != tt.want {
			t.Errorf("%s: got %+v, want %+v", tt.name, got, tt.want)
		}
	}
}

// TestJudge: each kind is judged where the SLO has it and the request
// measured it; the whole is met when the request was answered 200, its
// first token measured within the TTFT SLO, and its tokens within the
// TPOT SLO where measured.
func TestJudge(t *testing.T) {
	both := catalog.SLO{TTFTp99: 500 * time.Millisecond, TPOTp99: 50 * time.Millisecond}
	paced := func(tpot time.Duration) Timing { return Timing{TPOT: tpot, Rate: 1, OK: true} }
	tests := []struct {
		name   string
		slo    catalog.SLO
		status int
		ttft   time.Duration
		timing Timing
		ttftV  Verdict
		tpotV  Verdict
		met    bool
	}{
		{"both within", both, 200, 500 * time.Millisecond, paced(50 * time.Millisecond), Met, Met, true},
		{"first token late", both, 200, 501 * time.Millisecond, paced(40 * time.Millisecond), Missed, Met, false},
		{"tokens slow", both, 200, 300 * time.Millisecond, paced(51 * time.Millisecond), Met, Missed, false},
		{"plain, no TPOT", both, 200, 300 * time.Millisecond, Timing{Rate: 10, OK: true}, Met, Unjudged, true},
		{"no first token measured", both, 200, 0, Timing{}, Unjudged, Unjudged, false},
		{"failed", both, 502, 300 * time.Millisecond, paced(40 * time.Millisecond), Met, Met, false},
		{"no SLO", catalog.SLO{}, 200, 9 * time.Second, paced(time.Second), Unjudged, Unjudged, true},
		{"TPOT alone, no first token", catalog.SLO{TPOTp99: 50 * time.Millisecond}, 200, 0, paced(40 * time.Millisecond), Unjudged, Met, true},
	}
	for _, tt := range tests {
		got := Judge(tt.slo, tt.status, tt.ttft, tt.timing)
		want := Judgement{SLO: tt.slo, TTFT: tt.ttftV, TPOT: tt.tpotV, Met: tt.met}
		if got != want {
			t.Errorf("%s: got %+v, want %+v", tt.name, got, want)
		}
	}
}

// TestFinishJudgesAgainstTheClass: a request is judged against its
// priority class's SLO, each figure the model's where the class sets
// none, and the judgement says which SLO it used.
func TestFinishJudgesAgainstTheClass(t *testing.T) {
	m := &catalog.Model{Name: "m", SLO: catalog.SLO{TTFTp99: time.Second, TPOTp99: 50 * time.Millisecond},
		Admission: catalog.Admission{Enabled: true, Classes: map[string]catalog.SLO{"critical": {TTFTp99: 200 * time.Millisecond}}}}
	o := streamed(500*time.Millisecond, 11, 400*time.Millisecond) // 40 ms a token
	for _, tt := range []struct {
		class admission.Class
		slo   catalog.SLO
		met   bool
	}{
		{admission.Critical, catalog.SLO{TTFTp99: 200 * time.Millisecond, TPOTp99: 50 * time.Millisecond}, false},
		{admission.Standard, m.SLO, true},
	} {
		c := &Completed{Requested: m, Class: tt.class, Stream: true, Outcome: o, Took: time.Second}
		c.Finish()
		if c.Model != "m" || c.SLO.SLO != tt.slo || c.SLO.Met != tt.met {
			t.Errorf("%s: model %q judged against %+v, met %v; want m against %+v, met %v", tt.class, c.Model, c.SLO.SLO, c.SLO.Met, tt.slo, tt.met)
		}
	}
	if c := finished(nil, true, "", proxy.Outcome{Status: 404}, time.Millisecond); c.Model != Unknown || c.SLO != (Judgement{}) || c.ErrorType != CallerNotFound {
		t.Errorf("a request refused before its model was known: model %q, judgement %+v, error type %q", c.Model, c.SLO, c.ErrorType)
	}
}

// counter counts the Completed requests it is handed.
type counter struct{ ids []string }

func (c *counter) Observe(cp *Completed) { c.ids = append(c.ids, cp.ID) }

// catalogCounter is a counter that keeps the catalogs it is told of.
type catalogCounter struct {
	counter
	cats int
}

func (c *catalogCounter) SetCatalog(*catalog.Catalog) { c.cats++ }

// TestObserversInOrder: each observer of the list gets each Completed
// once, in the list's order; only those that keep catalogs are told of
// one.
func TestObserversInOrder(t *testing.T) {
	var order []string
	a, b := &catalogCounter{}, &counter{}
	os := Observers{a, observerFunc(func(c *Completed) { order = append(order, "second") }), b}
	for _, id := range []string{"x", "y"} {
		os.Observe(&Completed{ID: id})
	}
	os.SetCatalog(nil)
	if len(a.ids) != 2 || len(b.ids) != 2 || len(order) != 2 || a.cats != 1 {
		t.Errorf("observers saw %v, %d and %v; the first %d catalogs", a.ids, len(order), b.ids, a.cats)
	}
}

// observerFunc is a function as an Observer.
type observerFunc func(*Completed)

func (f observerFunc) Observe(c *Completed) { f(c) }
